package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
)

func TestParseSearchAttributes(t *testing.T) {
	tests := []struct {
		give    string
		want    []searchAttribute
		wantErr string
	}{
		{give: "", want: nil},
		{give: DefaultSearchAttributes, want: []searchAttribute{
			{"WmrlRunName", enumspb.INDEXED_VALUE_TYPE_KEYWORD},
			{"WmrlMode", enumspb.INDEXED_VALUE_TYPE_KEYWORD},
			{"WmrlStep", enumspb.INDEXED_VALUE_TYPE_INT},
			{"WmrlHeldoutScore", enumspb.INDEXED_VALUE_TYPE_DOUBLE},
		}},
		{give: " A_1 = keywordlist , b=DATETIME,", want: []searchAttribute{
			{"A_1", enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST},
			{"b", enumspb.INDEXED_VALUE_TYPE_DATETIME},
		}},
		{give: "NoType", wantErr: "want NAME=TYPE"},
		{give: "1x=Int", wantErr: "must start with a letter"},
		{give: "a-b=Int", wantErr: "must start with a letter"},
		{give: "A=Int,A=Keyword", wantErr: "listed twice"},
		{give: "A=Float", wantErr: `unknown type "Float"`},
	}
	for _, tt := range tests {
		got, err := parseSearchAttributes(tt.give)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseSearchAttributes(%q) error = %v, want it to contain %q", tt.give, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseSearchAttributes(%q): %v", tt.give, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseSearchAttributes(%q) = %v, want %v", tt.give, got, tt.want)
		}
		for _, a := range got {
			if back, ok := indexedType(typeName(a.Type)); !ok || back != a.Type {
				t.Errorf("type %v does not survive typeName/indexedType: %v %v", a.Type, back, ok)
			}
		}
	}
}

func TestParseServe(t *testing.T) {
	tests := []struct {
		give    []string
		check   func(serveOptions) bool
		wantErr string
	}{
		{give: nil, check: func(o serveOptions) bool {
			return o.IP == "127.0.0.1" && o.Port == 7233 && o.UIPort == 8233 && o.HTTPPort == 0 &&
				o.Namespace == "default" && o.Retention == 72*time.Hour && o.LogLevel == "warn" &&
				len(o.SearchAttributes) == 4 && o.UIURL() == "http://127.0.0.1:8233/namespaces/default/workflows" &&
				o.FrontendAddress() == "127.0.0.1:7233"
		}},
		{give: []string{"--ui-port", "0", "--dynamic-config", `limit.x="s"`, "--dynamic-config", "limit.y=3"},
			check: func(o serveOptions) bool {
				return o.UIURL() == "" && o.DynamicConfig["limit.x"] == "s" && o.DynamicConfig["limit.y"] == 3.0
			}},
		{give: []string{"--port", "0"}, wantErr: "want a port"},
		{give: []string{"--ui-port", "7233"}, wantErr: "must differ"},
		{give: []string{"--ip", "::1"}, wantErr: "IPv4"},
		{give: []string{"--log-level", "loud"}, wantErr: "--log-level"},
		{give: []string{"--retention", "1m"}, wantErr: "at least 1h"},
		{give: []string{"--dynamic-config", "k=unquoted"}, wantErr: "not JSON"},
		{give: []string{"--search-attributes", "X=Nope"}, wantErr: "unknown type"},
		{give: []string{"extra"}, wantErr: "unexpected arguments"},
		{give: []string{"--postgres", "db:5432"}, check: func(o serveOptions) bool {
			return o.Postgres.enabled() && o.Postgres.User == "temporal" && o.Postgres.Database == "temporal" &&
				o.Postgres.Visibility == "temporal_visibility" && o.Postgres.Password == "pw from env"
		}},
		{give: []string{"--postgres", "db"}, wantErr: "--postgres"},
		{give: []string{"--postgres", "db:1", "--postgres-user", ""}, wantErr: "--postgres-user: empty"},
		{give: []string{"--postgres", "db:1", "--postgres-visibility-db", "temporal"}, wantErr: "must differ"},
		{give: []string{"--ip", "auto"}, check: func(o serveOptions) bool {
			return o.IP != "auto" && !o.Postgres.enabled()
		}},
	}
	t.Setenv("TEMPORAL_POSTGRES_PASSWORD", "pw from env")
	for _, tt := range tests {
		got, err := parseServe(tt.give, io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseServe(%q) error = %v, want it to contain %q", tt.give, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseServe(%q): %v", tt.give, err)
			continue
		}
		if !tt.check(got) {
			t.Errorf("parseServe(%q) = %+v", tt.give, got)
		}
	}
}

func TestParseClient(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "10.0.0.5:7000")
	o, err := parseClient("check", nil, io.Discard, "")
	if err != nil {
		t.Fatal(err)
	}
	if o.Address != "10.0.0.5:7000" || len(o.SearchAttributes) != 0 {
		t.Errorf("check defaults = %+v", o)
	}
	o, err = parseClient("register", []string{"--address", "h:1"}, io.Discard, DefaultSearchAttributes)
	if err != nil {
		t.Fatal(err)
	}
	if o.Address != "h:1" || len(o.SearchAttributes) != 4 {
		t.Errorf("register = %+v", o)
	}
	if o, err := parseClient("check", []string{"--address", "auto:7233"}, io.Discard, ""); err != nil || strings.HasPrefix(o.Address, "auto") {
		t.Errorf("--address auto:7233 = %q, %v; want this host's address", o.Address, err)
	}
	if _, err := parseClient("check", []string{"--address", "nocolon"}, io.Discard, ""); err == nil {
		t.Error("address without a port accepted")
	}
}
