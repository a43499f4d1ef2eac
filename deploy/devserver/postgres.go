package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	pgplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
)

// postgresHistoryShards is the shard count of a Postgres-backed cluster. Like SQLite's,
// it is fixed for the life of the database.
const postgresHistoryShards = 4

// postgresOptions configure Temporal's persistence in PostgreSQL (the server's SQL
// plugin "postgres12") instead of the SQLite file: one database for executions, one for
// visibility, both created with their schema on first start and upgraded on later ones.
type postgresOptions struct {
	Address    string // host:port; empty means SQLite
	User       string
	Password   string // from $TEMPORAL_POSTGRES_PASSWORD only, never a flag or a log line
	Database   string
	Visibility string
}

func (p postgresOptions) enabled() bool { return p.Address != "" }

// sqlConfig is the persistence config of database db.
func (p postgresOptions) sqlConfig(db string) *config.SQL {
	return &config.SQL{
		PluginName:      pgplugin.PluginName,
		DatabaseName:    db,
		ConnectAddr:     p.Address,
		ConnectProtocol: "tcp",
		User:            p.User,
		Password:        p.Password,
		MaxConns:        20,
		MaxIdleConns:    20,
		MaxConnLifetime: time.Hour,
	}
}

// preparePostgres creates the two databases if they are missing, then brings each to the
// newest schema the server embeds (setup at version 0.0, then every versioned update; both
// steps are no-ops on an up-to-date database). Postgres may still be starting (a container
// that came up with this one), so connection errors are retried until ctx ends.
func preparePostgres(ctx context.Context, p postgresOptions, logger log.Logger) error {
	for _, d := range []struct{ db, schemaName string }{
		{p.Database, "postgresql/v12/temporal"},
		{p.Visibility, "postgresql/v12/visibility"},
	} {
		err := retry(ctx, "postgres database "+d.db, func(context.Context) error {
			return prepareOne(p, d.db, d.schemaName, logger)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func prepareOne(p postgresOptions, db, schemaName string, logger log.Logger) error {
	if err := sqltool.DoCreateDatabase(p.sqlConfig(db), "postgres", logger); err != nil &&
		!strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("create database: %w", err)
	}
	conn, err := sqltool.NewConnection(p.sqlConfig(db), logger)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run(); err != nil {
		return fmt.Errorf("schema setup: %w", err)
	}
	if err := schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: db, SchemaName: schemaName}, logger).Run(); err != nil {
		return fmt.Errorf("schema update %s: %w", schemaName, err)
	}
	return nil
}

// resolveIP turns "auto" into the host's first non-loopback IPv4 address (a container's
// address on its network); any other value is returned as it is.
func resolveIP(ip string) (string, error) {
	if ip != "auto" {
		return ip, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("--ip auto: %w", err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("--ip auto: no non-loopback IPv4 address on this host")
}
