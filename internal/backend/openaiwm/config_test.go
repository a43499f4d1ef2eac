package openaiwm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	c := DefaultConfig()
	c.BaseURL, c.Model = "http://127.0.0.1:8000/v1", "qwen"
	return c
}

func TestValidate(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no base url", func(c *Config) { c.BaseURL = "" }, "world_model.openai.base_url: is required"},
		{"scheme", func(c *Config) { c.BaseURL = "ftp://h/v1" }, "world_model.openai.base_url: scheme \"ftp\""},
		{"not a url", func(c *Config) { c.BaseURL = "http://[::1" }, "world_model.openai.base_url: is not a URL"},
		{"no host", func(c *Config) { c.BaseURL = "http:///v1" }, "world_model.openai.base_url: has no host"},
		{"credentials", func(c *Config) { c.BaseURL = "https://u:sk-secret@h/v1" }, "world_model.openai.base_url: holds credentials"},
		{"query", func(c *Config) { c.BaseURL = "https://h/v1?key=x" }, "world_model.openai.base_url: has a query"},
		{"no model", func(c *Config) { c.Model = " " }, "world_model.openai.model: is required"},
		{"temperature", func(c *Config) { c.Temperature = 3 }, "world_model.openai.temperature: 3 is outside [0,2]"},
		{"max tokens", func(c *Config) { c.MaxTokens = -1 }, "world_model.openai.max_tokens: -1 is negative"},
		{"concurrency", func(c *Config) { c.Concurrency = 0 }, "world_model.openai.concurrency: 0 is outside [1,1024]"},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "world_model.openai.timeout_seconds: 0 is outside"},
		{"retries", func(c *Config) { c.MaxRetries = -1 }, "world_model.openai.max_retries: -1 is outside [0,20]"},
		{"template syntax", func(c *Config) { c.Template = "{{.TaskID" }, "world_model.openai.template:"},
		{"template field", func(c *Config) { c.Template = "{{.Nope}}" }, "world_model.openai.template:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "sk-secret") {
				t.Errorf("error shows the credentials: %v", err)
			}
			if _, err := New(c, Key{}, nil); err == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
	// Every error at once.
	err := Config{}.Validate()
	for _, f := range []string{"base_url", "model", "concurrency", "timeout_seconds"} {
		if err == nil || !strings.Contains(err.Error(), "world_model.openai."+f) {
			t.Errorf("Config{}.Validate() = %v, want an error on %s", err, f)
		}
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadKey(t *testing.T) {
	const secret = "sk-test-0123456789abcdef"
	c := validConfig()
	k, err := LoadKey(c, env(map[string]string{EnvAPIKey: secret, EnvOpenAIKey: "other"}))
	if err != nil || k.value() != secret || k.Source() != EnvAPIKey {
		t.Errorf("LoadKey = %v (%q), %v; want the key of %s", k, k.value(), err, EnvAPIKey)
	}
	k, err = LoadKey(c, env(map[string]string{EnvOpenAIKey: secret}))
	if err != nil || k.value() != secret || k.Source() != EnvOpenAIKey {
		t.Errorf("LoadKey = %v, %v; want the key of %s", k, err, EnvOpenAIKey)
	}
	k, err = LoadKey(c, env(nil))
	if err != nil || k.Set() || k.String() != "no API key" {
		t.Errorf("LoadKey without a key = %v, %v", k, err)
	}
	f := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(f, []byte("  "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.APIKeyFile = f
	k, err = LoadKey(c, env(map[string]string{EnvAPIKey: "ignored"}))
	if err != nil || k.value() != secret || k.Source() != "file "+f {
		t.Errorf("LoadKey from a file = %v, %v", k, err)
	}
	if err := os.WriteFile(f, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(c, env(nil)); err == nil || !strings.Contains(err.Error(), "world_model.openai.api_key_file: "+f+" is empty") {
		t.Errorf("empty key file: %v", err)
	}
	c.APIKeyFile = filepath.Join(t.TempDir(), "missing")
	if _, err := LoadKey(c, env(nil)); err == nil || !strings.Contains(err.Error(), "world_model.openai.api_key_file") {
		t.Errorf("missing key file: %v", err)
	}
	c.APIKeyFile = ""
	_, err = LoadKey(c, env(map[string]string{EnvAPIKey: "sk-with\nnewline"}))
	if err == nil || !strings.Contains(err.Error(), EnvAPIKey) || strings.Contains(err.Error(), "sk-with") {
		t.Errorf("key with a newline: %v", err)
	}
}

// The key appears in no formatting of a Key, a Config or a WorldModel.
func TestKeyRedacted(t *testing.T) {
	const secret = "sk-test-0123456789abcdef"
	c := validConfig()
	k, err := LoadKey(c, env(map[string]string{EnvAPIKey: secret}))
	if err != nil {
		t.Fatal(err)
	}
	wm, err := New(c, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, v := range []any{k, &k, c, wm, struct{ K Key }{k}, struct{ k Key }{k}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			shown = append(shown, fmt.Sprintf(verb, v))
		}
	}
	b, err := json.Marshal(struct{ K Key }{k})
	if err != nil {
		t.Fatal(err)
	}
	shown = append(shown, string(b))
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("loaded", "key", k, "config", c)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("loaded", "key", k)
	shown = append(shown, logged.String())
	for _, s := range shown {
		if strings.Contains(s, secret) || strings.Contains(s, fmt.Sprintf("%x", secret)) {
			t.Errorf("the key shows in %q", s)
		}
	}
	if !strings.Contains(fmt.Sprint(k), EnvAPIKey) || !strings.Contains(logged.String(), EnvAPIKey) {
		t.Errorf("a formatted key does not say where it came from: %v / %s", k, logged.String())
	}
	if got := k.redact("echo " + secret + "!"); got != "echo [redacted]!" {
		t.Errorf("redact = %q", got)
	}
	if s := c.String(); !strings.Contains(s, "qwen") || !strings.Contains(s, c.BaseURL) || !strings.Contains(s, (2*time.Minute).String()) {
		t.Errorf("Config.String() = %q", s)
	}
}
