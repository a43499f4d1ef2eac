package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
)

// DefaultSearchAttributes are the custom search attributes wmrl sets on its workflows,
// as NAME=TYPE pairs. serve registers them in its namespace at every start; register adds
// them to an existing cluster. docs/devserver.md lists them too.
const DefaultSearchAttributes = "WmrlRunName=Keyword,WmrlMode=Keyword,WmrlStep=Int,WmrlHeldoutScore=Double"

const (
	defaultAddress   = "127.0.0.1:7233"
	defaultNamespace = "default"
)

// searchAttribute is one custom search attribute: its name and indexed type.
type searchAttribute struct {
	Name string
	Type enumspb.IndexedValueType
}

// indexedType maps a type name accepted on the command line (case-insensitive) to
// Temporal's indexed value type.
func indexedType(name string) (enumspb.IndexedValueType, bool) {
	switch strings.ToLower(name) {
	case "keyword":
		return enumspb.INDEXED_VALUE_TYPE_KEYWORD, true
	case "text":
		return enumspb.INDEXED_VALUE_TYPE_TEXT, true
	case "int":
		return enumspb.INDEXED_VALUE_TYPE_INT, true
	case "double":
		return enumspb.INDEXED_VALUE_TYPE_DOUBLE, true
	case "bool":
		return enumspb.INDEXED_VALUE_TYPE_BOOL, true
	case "datetime":
		return enumspb.INDEXED_VALUE_TYPE_DATETIME, true
	case "keywordlist":
		return enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST, true
	}
	return enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED, false
}

// parseSearchAttributes parses "NAME=TYPE,NAME=TYPE". Names start with a letter and hold
// letters, digits and underscores; types are case-insensitive. The order is kept; an empty
// spec gives no attributes.
func parseSearchAttributes(spec string) ([]searchAttribute, error) {
	var out []searchAttribute
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, typ, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("search attribute %q: want NAME=TYPE", item)
		}
		name, typ = strings.TrimSpace(name), strings.TrimSpace(typ)
		if !validName(name) {
			return nil, fmt.Errorf("search attribute %q: name must start with a letter and hold only letters, digits and _", item)
		}
		if seen[name] {
			return nil, fmt.Errorf("search attribute %s: listed twice", name)
		}
		t, ok := indexedType(typ)
		if !ok {
			return nil, fmt.Errorf("search attribute %s: unknown type %q (want Keyword, Text, Int, Double, Bool, Datetime or KeywordList)", name, typ)
		}
		seen[name] = true
		out = append(out, searchAttribute{Name: name, Type: t})
	}
	return out, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if i == 0 && !letter {
			return false
		}
		if !letter && !(r >= '0' && r <= '9') && r != '_' {
			return false
		}
	}
	return true
}

// dynamicConfig collects repeated --dynamic-config KEY=JSON flags.
type dynamicConfig map[string]any

func (d dynamicConfig) String() string { return fmt.Sprint(map[string]any(d)) }

func (d dynamicConfig) Set(s string) error {
	key, raw, ok := strings.Cut(s, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return fmt.Errorf("want KEY=JSON_VALUE, got %q", s)
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return fmt.Errorf("value of %s is not JSON (strings need quotes): %w", key, err)
	}
	d[key] = v
	return nil
}

// serveOptions is the validated configuration of "temporal-dev serve".
type serveOptions struct {
	IP               string
	Port             int
	HTTPPort         int
	UIPort           int
	DB               string
	Namespace        string
	Retention        time.Duration
	SearchAttributes []searchAttribute
	LogLevel         string
	DynamicConfig    dynamicConfig
	StartTimeout     time.Duration
	Postgres         postgresOptions
	TLS              serverTLS
	UI               uiOptions
}

// FrontendAddress is the host:port clients dial.
func (o serveOptions) FrontendAddress() string {
	return net.JoinHostPort(o.IP, fmt.Sprint(o.Port))
}

// UIAddress is the host:port the Web UI listens on.
func (o serveOptions) UIAddress() string {
	return net.JoinHostPort(o.UI.IP, fmt.Sprint(o.UIPort))
}

// UIURL is the Web UI's page for the namespace's workflows, or "" without a UI.
func (o serveOptions) UIURL() string {
	if o.UIPort == 0 {
		return ""
	}
	host := o.UI.IP
	if host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	return fmt.Sprintf("http://%s/namespaces/%s/workflows", net.JoinHostPort(host, fmt.Sprint(o.UIPort)), o.Namespace)
}

func parseServe(args []string, stderr io.Writer) (serveOptions, error) {
	fs := flag.NewFlagSet("temporal-dev serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := serveOptions{DynamicConfig: dynamicConfig{}}
	var attrs string
	fs.StringVar(&o.IP, "ip", "127.0.0.1", "IPv4 address every service binds to")
	fs.IntVar(&o.Port, "port", 7233, "frontend gRPC port")
	fs.IntVar(&o.HTTPPort, "http-port", 0, "frontend HTTP API port, also serving Nexus (0: a free port)")
	fs.IntVar(&o.UIPort, "ui-port", 8233, "Web UI port (0: no UI)")
	fs.StringVar(&o.DB, "db", ".cache/temporal/dev.db", "SQLite database file (created with its schema if missing)")
	fs.StringVar(&o.Namespace, "namespace", defaultNamespace, "namespace registered at startup")
	fs.DurationVar(&o.Retention, "retention", 72*time.Hour, "retention of closed workflows in a namespace created by this start")
	fs.StringVar(&attrs, "search-attributes", DefaultSearchAttributes, "custom search attributes to register, NAME=TYPE,...")
	fs.StringVar(&o.LogLevel, "log-level", "warn", "server log level: debug, info, warn or error")
	fs.Var(o.DynamicConfig, "dynamic-config", "dynamic config value KEY=JSON_VALUE (repeatable)")
	fs.DurationVar(&o.StartTimeout, "start-timeout", 2*time.Minute, "how long startup may take before giving up")
	fs.StringVar(&o.Postgres.Address, "postgres", "", "persist in PostgreSQL at host:port instead of the SQLite --db (password from $TEMPORAL_POSTGRES_PASSWORD)")
	fs.StringVar(&o.Postgres.User, "postgres-user", "temporal", "PostgreSQL user (with --postgres)")
	fs.StringVar(&o.Postgres.Database, "postgres-db", "temporal", "PostgreSQL database of executions (with --postgres)")
	fs.StringVar(&o.Postgres.Visibility, "postgres-visibility-db", "temporal_visibility", "PostgreSQL database of visibility (with --postgres)")
	addServerTLSFlags(fs, &o.TLS)
	addUIFlags(fs, &o.UI)
	if err := fs.Parse(args); err != nil {
		return serveOptions{}, err
	}
	if fs.NArg() > 0 {
		return serveOptions{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.Postgres.Password = os.Getenv("TEMPORAL_POSTGRES_PASSWORD")
	var err error
	if o.IP, err = resolveIP(o.IP); err != nil {
		return serveOptions{}, err
	}
	if net.ParseIP(o.IP).To4() == nil {
		return serveOptions{}, fmt.Errorf("--ip %q: want an IPv4 address", o.IP)
	}
	for _, p := range []struct {
		name     string
		port     int
		optional bool
	}{{"--port", o.Port, false}, {"--http-port", o.HTTPPort, true}, {"--ui-port", o.UIPort, true}} {
		if p.optional && p.port == 0 {
			continue
		}
		if p.port < 1 || p.port > 65535 {
			return serveOptions{}, fmt.Errorf("%s %d: want a port in 1..65535", p.name, p.port)
		}
	}
	if o.HTTPPort != 0 && o.HTTPPort == o.Port || o.UIPort != 0 && (o.UIPort == o.Port || o.UIPort == o.HTTPPort) {
		return serveOptions{}, fmt.Errorf("--port, --http-port and --ui-port must differ")
	}
	if o.DB == "" {
		return serveOptions{}, fmt.Errorf("--db: empty path")
	}
	if o.Namespace == "" {
		return serveOptions{}, fmt.Errorf("--namespace: empty")
	}
	if o.Retention < time.Hour {
		return serveOptions{}, fmt.Errorf("--retention %v: want at least 1h", o.Retention)
	}
	switch o.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return serveOptions{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.LogLevel)
	}
	if o.StartTimeout <= 0 {
		return serveOptions{}, fmt.Errorf("--start-timeout %v: want > 0", o.StartTimeout)
	}
	if o.Postgres.enabled() {
		if _, _, err := net.SplitHostPort(o.Postgres.Address); err != nil {
			return serveOptions{}, fmt.Errorf("--postgres %q: want host:port: %w", o.Postgres.Address, err)
		}
		for _, f := range []struct{ name, v string }{
			{"--postgres-user", o.Postgres.User}, {"--postgres-db", o.Postgres.Database},
			{"--postgres-visibility-db", o.Postgres.Visibility},
		} {
			if f.v == "" {
				return serveOptions{}, fmt.Errorf("%s: empty", f.name)
			}
		}
		if o.Postgres.Database == o.Postgres.Visibility {
			return serveOptions{}, fmt.Errorf("--postgres-db and --postgres-visibility-db must differ")
		}
	}
	if o.SearchAttributes, err = parseSearchAttributes(attrs); err != nil {
		return serveOptions{}, fmt.Errorf("--search-attributes: %w", err)
	}
	if err := o.TLS.check(o.IP); err != nil {
		return serveOptions{}, err
	}
	if err := o.UI.check(o.UIPort); err != nil {
		return serveOptions{}, err
	}
	return o, nil
}

// clientOptions is the configuration of the client commands, check and register.
type clientOptions struct {
	Address          string
	Namespace        string
	Timeout          time.Duration
	SearchAttributes []searchAttribute
	// TLS is the client TLS to the frontend (nil: plain text).
	TLS *tls.Config
}

// parseClient parses the flags of check and register. attrsDefault is the default of
// --search-attributes: empty for check (verify none), the wmrl list for register.
func parseClient(name string, args []string, stderr io.Writer, attrsDefault string) (clientOptions, error) {
	fs := flag.NewFlagSet("temporal-dev "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	address := os.Getenv("TEMPORAL_ADDRESS")
	if address == "" {
		address = defaultAddress
	}
	var o clientOptions
	var attrs string
	fs.StringVar(&o.Address, "address", address, "frontend host:port (default from $TEMPORAL_ADDRESS)")
	fs.StringVar(&o.Namespace, "namespace", defaultNamespace, "namespace")
	fs.DurationVar(&o.Timeout, "timeout", time.Minute, "give up after this long")
	fs.StringVar(&attrs, "search-attributes", attrsDefault, "search attributes NAME=TYPE,...")
	var tlsFlags clientTLS
	addClientTLSFlags(fs, &tlsFlags)
	if err := fs.Parse(args); err != nil {
		return clientOptions{}, err
	}
	if fs.NArg() > 0 {
		return clientOptions{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	host, port, err := net.SplitHostPort(o.Address)
	if err != nil {
		return clientOptions{}, fmt.Errorf("--address %q: %w", o.Address, err)
	}
	if host == "auto" { // the host's own address, as serve --ip auto binds to
		if host, err = resolveIP(host); err != nil {
			return clientOptions{}, err
		}
		o.Address = net.JoinHostPort(host, port)
	}
	if o.Namespace == "" {
		return clientOptions{}, fmt.Errorf("--namespace: empty")
	}
	if o.Timeout <= 0 {
		return clientOptions{}, fmt.Errorf("--timeout %v: want > 0", o.Timeout)
	}
	if o.SearchAttributes, err = parseSearchAttributes(attrs); err != nil {
		return clientOptions{}, fmt.Errorf("--search-attributes: %w", err)
	}
	if o.TLS, err = tlsFlags.config(); err != nil {
		return clientOptions{}, err
	}
	return o, nil
}
