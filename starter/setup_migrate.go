package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/migrations"
)

// migrateReport is wmrl migrate --json: the migrations this call applied
// ([] when the schema was current) and the schema version afterwards.
type migrateReport struct {
	Applied []migrations.Migration `json:"applied"`
	Version int                    `json:"version"`
}

func newMigrateCmd(cf *connFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "migrate [--database-url DSN] [--json]",
		Short: "Create or update the Postgres schema",
		Long: `migrate applies the SQL migrations built into wmrl that the database has not
applied yet, in order, each in its own transaction, and prints them. It holds a
Postgres advisory lock while it works, so several processes may run it at once:
each migration is applied once. Running it on a current schema changes nothing.
It fails, changing nothing, if a migration the database applied was since
changed, or if the database has a migration this binary does not know.

The database is --database-url, else $WMRL_DATABASE_URL, else
"` + store.DefaultDSN + `" (created by deploy/postgres.sh). A DSN
is a libpq keyword/value string or a postgres:// URL.

--json prints one object: applied [{version, name, checksum}] ([] when the
schema was current) and version (the schema version afterwards).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := store.Open(cmd.Context(), cf.dsn())
			if err != nil {
				return err
			}
			defer s.Close()
			applied, err := s.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			all, err := s.Applied(cmd.Context())
			if err != nil {
				return err
			}
			r := migrateReport{Applied: applied, Version: 0}
			if r.Applied == nil {
				r.Applied = []migrations.Migration{}
			}
			if len(all) > 0 {
				r.Version = all[len(all)-1].Version
			}
			return printMigrate(cmd.OutOrStdout(), r, asJSON)
		},
	}
	uses(cmd, groupPostgres)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printMigrate(w io.Writer, r migrateReport, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	for _, m := range r.Applied {
		if _, err := fmt.Fprintf(w, "applied %s\n", m.Name); err != nil {
			return err
		}
	}
	verb := "schema is"
	if len(r.Applied) == 0 {
		verb = "schema already"
	}
	_, err := fmt.Fprintf(w, "%s at version %d\n", verb, r.Version)
	return err
}
