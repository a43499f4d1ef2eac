package migrations

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"testing/fstest"
)

func TestAllEmbedded(t *testing.T) {
	ms, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].Name != "0001_init.sql" {
		t.Fatalf("All() = %v, want 0001_init.sql first", ms)
	}
	for i, m := range ms {
		sum := sha256.Sum256([]byte(m.SQL))
		if m.Version != i+1 || m.Checksum != hex.EncodeToString(sum[:]) || strings.TrimSpace(m.SQL) == "" {
			t.Errorf("migration %d = {%d %s %s}, want version %d, some SQL and the SHA-256 of its text", i, m.Version, m.Name,
				m.Checksum, i+1)
		}
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		give    []string
		want    []string // names in order
		wantErr string
	}{
		{name: "ordered", give: []string{"0002_b.sql", "0001_a.sql", "README.md", "0003_c_2.sql"}, want: []string{"0001_a.sql", "0002_b.sql", "0003_c_2.sql"}},
		{name: "empty", give: []string{"notes.txt"}},
		{name: "gap", give: []string{"0001_a.sql", "0003_c.sql"}, wantErr: "migration 0003_c.sql: version 3, want 2"},
		{name: "not from 1", give: []string{"0002_b.sql"}, wantErr: "version 2, want 1"},
		{name: "same version", give: []string{"0001_a.sql", "0001_b.sql"}, wantErr: "migrations 0001_a.sql and 0001_b.sql have the same version"},
		{name: "three digits", give: []string{"001_a.sql"}, wantErr: "migration 001_a.sql: name must be NNNN_name.sql"},
		{name: "no name", give: []string{"0001_.sql"}, wantErr: "name must be"},
		{name: "upper case", give: []string{"0001_Init.sql"}, wantErr: "name must be"},
		{name: "dash", give: []string{"0001-init.sql"}, wantErr: "name must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, n := range tt.give {
				fsys[n] = &fstest.MapFile{Data: []byte("SELECT 1; -- " + n)}
			}
			ms, err := Load(fsys)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load = %v, %v; want error containing %q", ms, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, m.Name)
				if m.SQL != "SELECT 1; -- "+m.Name {
					t.Errorf("%s holds %q", m.Name, m.SQL)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("Load = %v, want %v", got, tt.want)
			}
		})
	}
}
