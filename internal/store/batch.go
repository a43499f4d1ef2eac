package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// table describes how a batch of rows meets an existing table. The names
// are constants of this package, never user input.
type table struct {
	name string   // target table
	key  []string // primary key columns
	cols []string // other columns written by the batch
}

func (t table) all() []string { return append(append([]string(nil), t.key...), t.cols...) }

func (t table) staging() string { return "staged_" + t.name }

// stage creates a temporary table with the columns of t (dropped at commit) and copies
// rows into it; each row holds the values of t.all() in order. It fails when
// two rows share a key, which is a caller bug.
func stage(ctx context.Context, tx pgx.Tx, t table, rows [][]any) error {
	tmp := t.staging()
	// Column types of the target, without its constraints.
	if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE %s ON COMMIT DROP AS SELECT %s FROM %s WITH NO DATA",
		tmp, strings.Join(t.all(), ", "), t.name)); err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{tmp}, t.all(), pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("copy into %s: %w", tmp, err)
	}
	key := strings.Join(t.key, ", ")
	dup, err := firstKey(ctx, tx, fmt.Sprintf("SELECT %s FROM %s GROUP BY %s HAVING count(*) > 1 ORDER BY %s LIMIT 1", key, tmp, key, key), len(t.key))
	if err != nil {
		return fmt.Errorf("check %s for duplicates: %w", t.name, err)
	}
	if dup != "" {
		return fmt.Errorf("duplicate key %s in one batch for %s", dup, t.name)
	}
	return nil
}

// insertNew inserts the staged rows whose key is not in t yet (in key order,
// so that concurrent batches lock keys in the same order) and returns how
// many it inserted. If cmp is non-empty, it then fails with ErrConflict when
// a staged row's cmp columns differ from the stored row's.
func insertNew(ctx context.Context, tx pgx.Tx, t table, cmp []string) (int, error) {
	all := strings.Join(t.all(), ", ")
	key := strings.Join(t.key, ", ")
	tag, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s ORDER BY %s ON CONFLICT (%s) DO NOTHING",
		t.name, all, all, t.staging(), key, key))
	if err != nil {
		return 0, fmt.Errorf("insert %s: %w", t.name, err)
	}
	if len(cmp) > 0 {
		if err := checkSame(ctx, tx, t, cmp, ""); err != nil {
			return 0, err
		}
	}
	return int(tag.RowsAffected()), nil
}

// checkSame fails with ErrConflict naming the first staged key whose stored
// row differs in the cmp columns (NULLs compare equal). Extra, if not empty,
// is an SQL condition on the stored row "d" restricting the check.
func checkSame(ctx context.Context, tx pgx.Tx, t table, cmp []string, extra string) error {
	var on, d, s []string
	for _, k := range t.key {
		on = append(on, fmt.Sprintf("d.%s = s.%s", k, k))
	}
	for _, c := range cmp {
		d = append(d, "d."+c)
		s = append(s, "s."+c)
	}
	where := fmt.Sprintf("(%s) IS DISTINCT FROM (%s)", strings.Join(d, ", "), strings.Join(s, ", "))
	if len(cmp) == 1 {
		where = fmt.Sprintf("%s IS DISTINCT FROM %s", d[0], s[0])
	}
	if extra != "" {
		where += " AND " + extra
	}
	var sk []string
	for _, k := range t.key {
		sk = append(sk, "s."+k)
	}
	q := fmt.Sprintf("SELECT %s FROM %s s JOIN %s d ON %s WHERE %s ORDER BY %s LIMIT 1",
		strings.Join(sk, ", "), t.staging(), t.name, strings.Join(on, " AND "), where, strings.Join(sk, ", "))
	k, err := firstKey(ctx, tx, q, len(t.key))
	if err != nil {
		return fmt.Errorf("compare %s: %w", t.name, err)
	}
	if k != "" {
		return fmt.Errorf("%s %s: %w", t.name, k, ErrConflict)
	}
	return nil
}

// missing fails with ErrNotFound naming the first key staged for t that is
// absent from the table target (which has t's key columns).
func missing(ctx context.Context, tx pgx.Tx, t table, target string) error {
	var on, sk []string
	for _, k := range t.key {
		on = append(on, fmt.Sprintf("d.%s = s.%s", k, k))
		sk = append(sk, "s."+k)
	}
	q := fmt.Sprintf("SELECT %s FROM %s s WHERE NOT EXISTS (SELECT 1 FROM %s d WHERE %s) ORDER BY %s LIMIT 1",
		strings.Join(sk, ", "), t.staging(), target, strings.Join(on, " AND "), strings.Join(sk, ", "))
	k, err := firstKey(ctx, tx, q, len(t.key))
	if err != nil {
		return fmt.Errorf("look up %s: %w", target, err)
	}
	if k != "" {
		return fmt.Errorf("%s %s: %w", target, k, ErrNotFound)
	}
	return nil
}

// firstKey runs q, which returns at most one row of n key columns, and
// formats that row as "(a, b, c)", or returns "" when there is no row.
func firstKey(ctx context.Context, tx pgx.Tx, q string, n int) (string, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	err := tx.QueryRow(ctx, q).Scan(ptrs...)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	parts := make([]string, n)
	for i, v := range vals {
		parts[i] = fmt.Sprint(v)
	}
	return "(" + strings.Join(parts, ", ") + ")", nil
}

// insertOne runs insert, an INSERT ... ON CONFLICT DO NOTHING of one row,
// and, when it inserted nothing, same, a query with the same arguments
// returning one boolean: whether the stored row equals the given values. It
// fails with ErrConflict when they differ.
func insertOne(ctx context.Context, q querier, insert, same string, args ...any) error {
	tag, err := q.Exec(ctx, insert, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var eq bool
	if err := q.QueryRow(ctx, same, args...).Scan(&eq); err != nil {
		return fmt.Errorf("compare with stored row: %w", err)
	}
	if !eq {
		return ErrConflict
	}
	return nil
}
