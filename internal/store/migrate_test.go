package store

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/wmrl/wmrl/migrations"
)

func load(t *testing.T, files map[string]string) []migrations.Migration {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, sql := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(sql)}
	}
	ms, err := migrations.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func names(ms []migrations.Migration) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func TestMigrateOnce(t *testing.T) {
	s := openDSN(t, freshDB(t))
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Migrate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names(got), names(all)) {
		t.Fatalf("first Migrate applied %v, want %v", names(got), names(all))
	}
	again, err := s.Migrate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Fatalf("second Migrate applied %v, want nothing", names(again))
	}
	applied, err := s.Applied(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != len(all) {
		t.Fatalf("schema_migrations has %d rows, want %d", len(applied), len(all))
	}
	for i, a := range applied {
		if a.Version != all[i].Version || a.Name != all[i].Name || a.Checksum != all[i].Checksum {
			t.Errorf("applied[%d] = %+v, want %+v", i, a, all[i])
		}
	}
	var tables []string
	rows, err := s.pool.Query(t.Context(), `SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"anchor_pairs", "calibration_maps", "checkpoints", "deployment", "evaluations", "fusion_states",
		"run_terminations", "runs", "schema_migrations", "steps",
		"tinker_futures", "tinker_journal", "tinker_models", "tinker_sessions", "tinker_weights", "trajectories",
		"turns", "world_model_cache", "world_model_versions"}
	if !slices.Equal(tables, want) {
		t.Errorf("tables %v, want %v", tables, want)
	}
}

func TestMigrateConcurrent(t *testing.T) {
	dsn := freshDB(t)
	// The sleep keeps the first migrator inside the lock while the second
	// arrives; without the lock both would create the tables.
	ms := load(t, map[string]string{
		"0001_a.sql": "CREATE TABLE a (id int PRIMARY KEY); SELECT pg_sleep(0.3);",
		"0002_b.sql": "CREATE TABLE b (id int PRIMARY KEY);",
	})
	const n = 2
	stores := []*Store{openDSN(t, dsn), openDSN(t, dsn)}
	got := make([][]migrations.Migration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = stores[i].Apply(t.Context(), ms)
		}()
	}
	wg.Wait()
	var total []string
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
		total = append(total, names(got[i])...)
	}
	slices.Sort(total)
	if !slices.Equal(total, names(ms)) {
		t.Errorf("applied in total %v, want each of %v once", total, names(ms))
	}
	applied, err := stores[0].Applied(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names(applied), names(ms)) {
		t.Errorf("schema_migrations %v, want %v", names(applied), names(ms))
	}
}

func TestMigrateChanged(t *testing.T) {
	s := openDSN(t, freshDB(t))
	orig := map[string]string{
		"0001_a.sql": "CREATE TABLE a (id int PRIMARY KEY);",
		"0002_b.sql": "CREATE TABLE b (id int PRIMARY KEY);",
	}
	if _, err := s.Apply(t.Context(), load(t, orig)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		give map[string]string
		want string
	}{
		{
			name: "changed text",
			give: map[string]string{
				"0001_a.sql": "CREATE TABLE a (id bigint PRIMARY KEY);",
				"0002_b.sql": orig["0002_b.sql"],
				"0003_c.sql": "CREATE TABLE c (id int);",
			},
			want: "migration 0001_a.sql was changed after it was applied",
		},
		{
			name: "unknown applied version",
			give: map[string]string{"0001_a.sql": orig["0001_a.sql"]},
			want: "database has migration 0002_b.sql (version 2) that this binary does not know",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Apply(t.Context(), load(t, tt.give))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Apply = %v, %v; want error containing %q", names(got), err, tt.want)
			}
			if len(got) != 0 {
				t.Errorf("applied %v despite the error", names(got))
			}
		})
	}
	// Nothing of the rejected sets was applied.
	applied, err := s.Applied(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0001_a.sql", "0002_b.sql"}; !slices.Equal(names(applied), want) {
		t.Errorf("schema_migrations %v, want %v", names(applied), want)
	}
}

func TestMigrateFailureRollsBack(t *testing.T) {
	s := openDSN(t, freshDB(t))
	ms := load(t, map[string]string{
		"0001_a.sql":   "CREATE TABLE a (id int PRIMARY KEY);",
		"0002_bad.sql": "CREATE TABLE b (id int PRIMARY KEY); INSERT INTO nowhere VALUES (1);",
	})
	got, err := s.Apply(t.Context(), ms)
	if err == nil || !strings.Contains(err.Error(), "apply 0002_bad.sql") || !strings.Contains(err.Error(), `"nowhere"`) {
		t.Fatalf("Apply error = %v, want one naming 0002_bad.sql and the missing table", err)
	}
	if want := []string{"0001_a.sql"}; !slices.Equal(names(got), want) {
		t.Errorf("applied %v, want %v", names(got), want)
	}
	var b *string
	if err := s.pool.QueryRow(t.Context(), "SELECT to_regclass('b')::text").Scan(&b); err != nil {
		t.Fatal(err)
	}
	if b != nil {
		t.Error("table b of the failed migration exists")
	}
	applied, err := s.Applied(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0001_a.sql"}; !slices.Equal(names(applied), want) {
		t.Errorf("schema_migrations %v, want %v", names(applied), want)
	}
	// Fixed, the migration applies on the next run.
	ms = load(t, map[string]string{
		"0001_a.sql":   "CREATE TABLE a (id int PRIMARY KEY);",
		"0002_bad.sql": "CREATE TABLE b (id int PRIMARY KEY);",
	})
	got, err = s.Apply(t.Context(), ms)
	if err != nil || !slices.Equal(names(got), []string{"0002_bad.sql"}) {
		t.Fatalf("Apply after fix = %v, %v", names(got), err)
	}
}
