// Package deployenv reads, in one place, the environment that says which
// wmrl deployment a process belongs to: where Temporal is
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE) and its Web UI (WMRL_UI_URL), the
// Postgres database (WMRL_DATABASE_URL), the data directory of checkpoints
// and fused batches (WMRL_DATA_DIR), the suite cache (WMRL_CACHE), the
// workers' sandbox (WMRL_SANDBOX) and where a worker serves its metrics
// (WMRL_METRICS_ADDR), and TLS to the Temporal frontend (TEMPORAL_TLS_CA,
// TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY, TEMPORAL_TLS_SERVER_NAME: tls.go).
// The worker and the wmrl command take the defaults of their flags from
// Read.
//
// Several deployments may share one machine and one data directory; the
// files of their runs are kept apart by RunsKey, which names a deployment
// by its namespace and its database's identity.
package deployenv

import (
	"os"
	"path/filepath"
	"regexp"
)

// The environment variables.
const (
	EnvAddress     = "TEMPORAL_ADDRESS"
	EnvNamespace   = "TEMPORAL_NAMESPACE"
	EnvUIURL       = "WMRL_UI_URL"
	EnvDatabaseURL = "WMRL_DATABASE_URL"
	EnvDataDir     = "WMRL_DATA_DIR"
	EnvCache       = "WMRL_CACHE"
	EnvSandbox     = "WMRL_SANDBOX"
	EnvBackends    = "WMRL_BACKENDS"
	EnvMetricsAddr = "WMRL_METRICS_ADDR"
)

// Defaults: the local stack of deploy/.
const (
	DefaultAddress     = "127.0.0.1:7233"
	DefaultNamespace   = "default"
	DefaultUIURL       = "http://127.0.0.1:8233"
	DefaultDatabaseURL = "host=/var/run/postgresql user=postgres dbname=wmrl"
	// DefaultSandbox is runconfig.SandboxAuto: Docker when an engine
	// answers, else the process sandbox.
	DefaultSandbox = "auto"
)

// Env is a deployment's settings, each from its variable or defaulted.
type Env struct {
	Address     string
	Namespace   string
	UIURL       string
	DatabaseURL string
	// DataDir is $WMRL_DATA_DIR, else wmrl under $XDG_DATA_HOME, else
	// ~/.local/share/wmrl, else wmrl-data.
	DataDir string
	// Cache is $WMRL_CACHE, else wmrl under the user's cache directory,
	// else "" (unknown: set WMRL_CACHE).
	Cache string
	// Sandbox is the sandbox kind of a worker's real executions: docker,
	// process or auto (checked by the worker).
	Sandbox string
	// Backends is the file of a worker's remote backends ("": none).
	Backends string
	// MetricsAddr is where a worker serves its Prometheus metrics
	// (host:port; "": it serves none).
	MetricsAddr string
	// TLS is how to reach Temporal over TLS (zero: plain text).
	TLS TLS
}

// Read returns the settings of the process's environment.
func Read() Env { return read(os.Getenv) }

func read(getenv func(string) string) Env {
	or := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	e := Env{
		Address:     or(EnvAddress, DefaultAddress),
		Namespace:   or(EnvNamespace, DefaultNamespace),
		UIURL:       or(EnvUIURL, DefaultUIURL),
		DatabaseURL: or(EnvDatabaseURL, DefaultDatabaseURL),
		DataDir:     getenv(EnvDataDir),
		Cache:       getenv(EnvCache),
		Sandbox:     or(EnvSandbox, DefaultSandbox),
		Backends:    getenv(EnvBackends),
		MetricsAddr: getenv(EnvMetricsAddr),
		TLS:         readTLS(getenv),
	}
	if e.DataDir == "" {
		e.DataDir = defaultDataDir(getenv)
	}
	if e.Cache == "" {
		if base, err := os.UserCacheDir(); err == nil {
			e.Cache = filepath.Join(base, "wmrl")
		}
	}
	return e
}

func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "wmrl")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "wmrl")
	}
	return "wmrl-data"
}

// unsafeChars are the characters RunsKey replaces in a path element.
var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// RunsKey is the directory of a deployment's runs under the data
// directory's runs/: <namespace>/<database>-<id>, where database and id
// are the name and the random identity of the deployment's database
// (store.Deployment; the id's first 12 hex digits). Every worker of a
// deployment computes the same key, however it reaches the database; two
// deployments never share one, even with the same namespace and database
// name on two Postgres servers.
func RunsKey(namespace, database, id string) string {
	if len(id) > 12 {
		id = id[:12]
	}
	return filepath.Join(element(namespace), element(database+"-"+id))
}

// element makes s one safe path element.
func element(s string) string {
	s = unsafeChars.ReplaceAllString(s, "_")
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}
