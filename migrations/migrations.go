// Package migrations holds wmrl's Postgres schema as numbered SQL files,
// embedded in the binary. A file is named NNNN_name.sql; versions start at 1
// and are contiguous. Files are applied in version order, each in its own
// transaction, by internal/store (the `wmrl migrate` command), which records
// every applied version with the SHA-256 of its text in schema_migrations. An
// applied file must never change: add a new file instead.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

//go:embed *.sql
var files embed.FS

// Migration is one SQL file.
type Migration struct {
	Version  int    `json:"version"`
	Name     string `json:"name"` // file name, e.g. "0001_init.sql"
	SQL      string `json:"-"`
	Checksum string `json:"checksum"` // hex SHA-256 of SQL
}

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	return Load(files)
}

// Load reads the migrations in the root of fsys: every *.sql file must be
// named NNNN_name.sql (lowercase name), and versions must run 1, 2, 3, ...
// without gaps or duplicates. Other files are ignored.
func Load(fsys fs.FS) ([]Migration, error) {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		v, ok := parseName(name)
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql (lowercase letters, digits, _)", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		sum := sha256.Sum256(b)
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b), Checksum: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			if i > 0 && ms[i-1].Version == m.Version {
				return nil, fmt.Errorf("migrations %s and %s have the same version", ms[i-1].Name, m.Name)
			}
			return nil, fmt.Errorf("migration %s: version %d, want %d (versions start at 1 without gaps)", m.Name, m.Version, i+1)
		}
	}
	return ms, nil
}

// parseName returns the version of a file named NNNN_name.sql, where NNNN are
// four digits and name is non-empty lowercase letters, digits and '_'.
func parseName(name string) (int, bool) {
	base, ok := strings.CutSuffix(name, ".sql")
	if !ok || len(base) < 6 || base[4] != '_' {
		return 0, false
	}
	v := 0
	for _, c := range base[:4] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = 10*v + int(c-'0')
	}
	for _, c := range base[5:] {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return 0, false
		}
	}
	return v, true
}
