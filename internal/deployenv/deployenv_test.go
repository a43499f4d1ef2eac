package deployenv

import (
	"path/filepath"
	"testing"
)

func TestRead(t *testing.T) {
	set := map[string]string{EnvAddress: "temporal:7233", EnvNamespace: "lab", EnvUIURL: "http://ui", EnvDatabaseURL: "dbname=x",
		EnvDataDir: "/data", EnvCache: "/cache", EnvSandbox: "process", EnvMetricsAddr: ":9464"}
	got := read(func(k string) string { return set[k] })
	want := Env{Address: "temporal:7233", Namespace: "lab", UIURL: "http://ui", DatabaseURL: "dbname=x", DataDir: "/data", Cache: "/cache",
		Sandbox: "process", MetricsAddr: ":9464"}
	if got != want {
		t.Errorf("read = %+v, want %+v", got, want)
	}
	def := read(func(k string) string {
		if k == "XDG_DATA_HOME" {
			return "/xdg"
		}
		return ""
	})
	if def.Address != DefaultAddress || def.Namespace != DefaultNamespace || def.UIURL != DefaultUIURL ||
		def.DatabaseURL != DefaultDatabaseURL || def.DataDir != filepath.Join("/xdg", "wmrl") || def.Sandbox != DefaultSandbox ||
		def.MetricsAddr != "" {
		t.Errorf("defaults = %+v", def)
	}
}

func TestRunsKey(t *testing.T) {
	tests := []struct {
		namespace, database, id string
		want                    string
	}{
		{"default", "wmrl", "0123456789abcdef0123456789abcdef", "default/wmrl-0123456789ab"},
		{"default", "wmrl", "fedcba9876543210fedcba9876543210", "default/wmrl-fedcba987654"},
		{"team/a b", "my db", "ab", "team_a_b/my_db-ab"},
		{"..", "", "", "_../-"},
	}
	for _, tt := range tests {
		if got := RunsKey(tt.namespace, tt.database, tt.id); got != filepath.FromSlash(tt.want) {
			t.Errorf("RunsKey(%q, %q, %q) = %q, want %q", tt.namespace, tt.database, tt.id, got, tt.want)
		}
	}
}

func TestReadTLS(t *testing.T) {
	set := map[string]string{EnvTLSCA: "/ca.pem", EnvTLSCert: "/c.pem", EnvTLSKey: "/k.pem", EnvTLSServerName: "temporal"}
	got := read(func(k string) string { return set[k] }).TLS
	if want := (TLS{CA: "/ca.pem", Cert: "/c.pem", Key: "/k.pem", ServerName: "temporal"}); got != want {
		t.Errorf("TLS = %+v, want %+v", got, want)
	}
	if !got.Enabled() || (TLS{}).Enabled() || !(TLS{ServerName: "x"}).Enabled() {
		t.Error("Enabled: want true with any variable, false without")
	}
	if def := read(func(string) string { return "" }); def.TLS != (TLS{}) {
		t.Errorf("TLS without variables = %+v, want none", def.TLS)
	}
}
