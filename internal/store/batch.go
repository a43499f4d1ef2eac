package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// batch is a set of rows headed for a table, sent as one array per column
// and read back in SQL as the relation "s" (unnest zips the arrays). The
// table and column names are constants of this package, never user input.
type batch struct {
	table string   // target table
	key   []string // primary key columns
	cols  []string // other columns of the batch
	types []string // SQL types of key and cols, in that order
	args  []any    // one slice per column of key and cols, all of one length
}

func (b batch) columns() []string { return append(append([]string(nil), b.key...), b.cols...) }

// source is the batch as a FROM item named s.
func (b batch) source() string {
	params := make([]string, len(b.types))
	for i, t := range b.types {
		params[i] = fmt.Sprintf("$%d::%s[]", i+1, t)
	}
	return fmt.Sprintf("unnest(%s) AS s(%s)", strings.Join(params, ", "), strings.Join(b.columns(), ", "))
}

// joinOn is the condition matching s to the stored row d by key.
func (b batch) joinOn() string {
	on := make([]string, len(b.key))
	for i, k := range b.key {
		on[i] = fmt.Sprintf("d.%s = s.%s", k, k)
	}
	return strings.Join(on, " AND ")
}

func (b batch) sKey() string {
	sk := make([]string, len(b.key))
	for i, k := range b.key {
		sk[i] = "s." + k
	}
	return strings.Join(sk, ", ")
}

// insertNew inserts the rows whose key is not stored yet (in key order, so
// that concurrent batches lock keys in the same order) and returns how many
// it inserted. If cmp is non-empty, it then fails with ErrConflict when a
// row's cmp columns differ from the stored row's. Run it in a transaction so
// that a conflict undoes the insert.
func insertNew(ctx context.Context, tx pgx.Tx, b batch, cmp []string) (int, error) {
	all := strings.Join(b.columns(), ", ")
	tag, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s ORDER BY %s ON CONFLICT (%s) DO NOTHING",
		b.table, all, all, b.source(), strings.Join(b.key, ", "), strings.Join(b.key, ", ")), b.args...)
	if err != nil {
		return 0, fmt.Errorf("insert %s: %w", b.table, err)
	}
	if len(cmp) > 0 {
		if err := checkSame(ctx, tx, b, cmp); err != nil {
			return 0, err
		}
	}
	return int(tag.RowsAffected()), nil
}

// checkSame fails with ErrConflict naming the first key of the batch whose
// stored row differs in the cmp columns (NULLs compare equal).
func checkSame(ctx context.Context, tx pgx.Tx, b batch, cmp []string) error {
	d := make([]string, len(cmp))
	s := make([]string, len(cmp))
	for i, c := range cmp {
		d[i], s[i] = "d."+c, "s."+c
	}
	q := fmt.Sprintf("SELECT %s FROM %s JOIN %s d ON %s WHERE ROW(%s) IS DISTINCT FROM ROW(%s) ORDER BY %s LIMIT 1",
		b.sKey(), b.source(), b.table, b.joinOn(), strings.Join(d, ", "), strings.Join(s, ", "), b.sKey())
	k, err := firstKey(ctx, tx, len(b.key), q, b.args...)
	if err != nil {
		return fmt.Errorf("compare %s: %w", b.table, err)
	}
	if k != "" {
		return fmt.Errorf("%s %s: %w", b.table, k, ErrConflict)
	}
	return nil
}

// missing fails with ErrNotFound naming the first key of the batch absent
// from the table target (which has the batch's key columns).
func missing(ctx context.Context, tx pgx.Tx, b batch, target string) error {
	q := fmt.Sprintf("SELECT %s FROM %s WHERE NOT EXISTS (SELECT 1 FROM %s d WHERE %s) ORDER BY %s LIMIT 1",
		b.sKey(), b.source(), target, b.joinOn(), b.sKey())
	k, err := firstKey(ctx, tx, len(b.key), q, b.args...)
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
func firstKey(ctx context.Context, tx pgx.Tx, n int, q string, args ...any) (string, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	err := tx.QueryRow(ctx, q, args...).Scan(ptrs...)
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

// firstDup returns the first key that occurs twice in keys, if any. A batch
// that names a key twice is a caller bug.
func firstDup[K comparable](keys []K) (K, bool) {
	seen := make(map[K]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return k, true
		}
		seen[k] = true
	}
	var zero K
	return zero, false
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
