package openaiwm

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strings"
	"time"
)

// Field is the run-config prefix of this package's settings: errors name
// fields as Field + ".model" and so on.
const Field = "world_model.openai"

// The environment variables the API key is read from, in this order (a
// configured APIKeyFile comes first).
const (
	EnvAPIKey    = "WMRL_WORLD_MODEL_API_KEY"
	EnvOpenAIKey = "OPENAI_API_KEY"
)

// Config is the world model's run-config section (world_model.openai). It
// holds no secret: the API key comes from the environment or a file
// (LoadKey), so that a run's configuration, which Postgres and Temporal
// history record, never carries it.
type Config struct {
	// BaseURL is the server's OpenAI-compatible API root, the URL that
	// /chat/completions is appended to, e.g. http://127.0.0.1:8000/v1.
	BaseURL string
	// Model is the served model's name (the request's "model").
	Model string
	// Temperature is the sampling temperature; 0 (the default) makes a
	// frozen model's answers reproducible.
	Temperature float64
	// MaxTokens bounds the completion (max_completion_tokens); 0 leaves
	// it to the server.
	MaxTokens int
	// Seed is the request's seed, sent unless NoSeed (for a server that
	// rejects the field).
	Seed   int64
	NoSeed bool
	// Concurrency bounds the requests in flight from one WorldModel.
	Concurrency int
	// Timeout bounds one HTTP attempt (an attempt that times out is not
	// retried by the client: the error goes to Temporal's retries);
	// MaxRetries is how many times the client (openai-go's own retry
	// loop) retries an attempt that failed on the connection, 408, 409,
	// 429 or 5xx, after the server's Retry-After or Retry-After-Ms (up to
	// 2 minutes) or else an exponential backoff (0.5 s, 1 s, 2 s, ... up
	// to 8 s, less up to 25% jitter).
	Timeout    time.Duration
	MaxRetries int
	// APIKeyFile, when set, is a file holding the API key (surrounding
	// white space ignored); otherwise the key is EnvAPIKey, else
	// EnvOpenAIKey, else none (a server without authentication).
	APIKeyFile string
	// Template is the text/template of the user message (see
	// TemplateData); "" is DefaultTemplate.
	Template string
}

// DefaultConfig returns the defaults of everything but BaseURL and Model.
func DefaultConfig() Config {
	return Config{Concurrency: 4, Timeout: 2 * time.Minute, MaxRetries: 3}
}

// Maximums Validate accepts.
const (
	maxConcurrency = 1024
	maxRetries     = 20
	maxTimeout     = time.Hour
)

// Validate reports every invalid field, each error naming it
// (world_model.openai.<field>).
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", Field, field, fmt.Sprintf(format, args...)))
	}
	if c.BaseURL == "" {
		bad("base_url", "is required (the server's OpenAI-compatible root, e.g. http://127.0.0.1:8000/v1)")
	} else if u, err := url.Parse(c.BaseURL); err != nil {
		bad("base_url", "is not a URL")
	} else {
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			bad("base_url", "scheme %q, want http or https", u.Scheme)
		case u.Host == "":
			bad("base_url", "has no host")
		case u.User != nil:
			bad("base_url", "holds credentials; put the API key in %s or api_key_file", EnvAPIKey)
		case u.RawQuery != "" || u.Fragment != "":
			bad("base_url", "has a query or fragment")
		}
	}
	if strings.TrimSpace(c.Model) == "" {
		bad("model", "is required (the served model's name)")
	}
	if math.IsNaN(c.Temperature) || c.Temperature < 0 || c.Temperature > 2 {
		bad("temperature", "%v is outside [0,2]", c.Temperature)
	}
	if c.MaxTokens < 0 {
		bad("max_tokens", "%d is negative (0 leaves it to the server)", c.MaxTokens)
	}
	if c.Concurrency < 1 || c.Concurrency > maxConcurrency {
		bad("concurrency", "%d is outside [1,%d]", c.Concurrency, maxConcurrency)
	}
	if c.Timeout <= 0 || c.Timeout > maxTimeout {
		bad("timeout_seconds", "%v is outside (0s,%v]", c.Timeout.Seconds(), maxTimeout.Seconds())
	}
	if c.MaxRetries < 0 || c.MaxRetries > maxRetries {
		bad("max_retries", "%d is outside [0,%d]", c.MaxRetries, maxRetries)
	}
	if _, err := parseTemplate(c.Template); err != nil {
		bad("template", "%v", err)
	}
	return errors.Join(errs...)
}

// String shows the settings (there is no secret in a Config).
func (c Config) String() string {
	seed := fmt.Sprint(c.Seed)
	if c.NoSeed {
		seed = "none"
	}
	tmpl := "default"
	if c.Template != "" {
		tmpl = "custom"
	}
	return fmt.Sprintf("openai world model %s at %s (temperature %v, max tokens %d, seed %s, concurrency %d, timeout %v, "+
		"%d retries, template %s)", c.Model, c.BaseURL, c.Temperature, c.MaxTokens, seed, c.Concurrency, c.Timeout,
		c.MaxRetries, tmpl)
}

// Key is an API key and where it came from. Formatting a Key in any way
// (%v, %+v, %#v, %s, %q, JSON, slog) shows where it came from, never the
// key itself.
type Key struct {
	// secret is behind a pointer so that printing a struct holding a Key
	// in an unexported field (which fmt reads by reflection, without
	// calling Format) shows an address, not the key.
	secret *string
	source string
}

func (k Key) value() string {
	if k.secret == nil {
		return ""
	}
	return *k.secret
}

// LoadKey reads the API key of c: the file c.APIKeyFile when set, else
// getenv(EnvAPIKey), else getenv(EnvOpenAIKey), else no key (the zero Key).
// getenv is os.Getenv outside tests.
func LoadKey(c Config, getenv func(string) string) (Key, error) {
	var k Key
	switch {
	case c.APIKeyFile != "":
		b, err := os.ReadFile(c.APIKeyFile)
		if err != nil {
			// The error names the path, never the content.
			return Key{}, fmt.Errorf("%s.api_key_file: %w", Field, err)
		}
		v := strings.TrimSpace(string(b))
		k = Key{secret: &v, source: "file " + c.APIKeyFile}
		if v == "" {
			return Key{}, fmt.Errorf("%s.api_key_file: %s is empty", Field, c.APIKeyFile)
		}
	case getenv(EnvAPIKey) != "":
		v := getenv(EnvAPIKey)
		k = Key{secret: &v, source: EnvAPIKey}
	case getenv(EnvOpenAIKey) != "":
		v := getenv(EnvOpenAIKey)
		k = Key{secret: &v, source: EnvOpenAIKey}
	default:
		return Key{}, nil
	}
	for _, r := range k.value() {
		if r <= ' ' || r > '~' {
			return Key{}, fmt.Errorf("the API key from %s has a character that is not printable ASCII", k.source)
		}
	}
	return k, nil
}

// Set reports whether there is a key.
func (k Key) Set() bool { return k.value() != "" }

// Source says where the key came from ("WMRL_WORLD_MODEL_API_KEY", "file
// /run/secrets/key"), or "" for no key.
func (k Key) Source() string { return k.source }

// String names the key's source, never the key.
func (k Key) String() string {
	if !k.Set() {
		return "no API key"
	}
	return "API key from " + k.source + " (redacted)"
}

// GoString is String, for %#v.
func (k Key) GoString() string { return k.String() }

// Format prints String for every verb.
func (k Key) Format(f fmt.State, verb rune) { fmt.Fprint(f, k.String()) }

// MarshalJSON marshals String.
func (k Key) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf("%q", k.String())), nil }

// redact replaces the key in s (a server may echo what it was sent).
func (k Key) redact(s string) string {
	if !k.Set() {
		return s
	}
	return strings.ReplaceAll(s, k.value(), "[redacted]")
}

// hint says how to fix a refused key, naming where keys come from.
func (k Key) hint() string {
	if !k.Set() {
		return fmt.Sprintf("no API key was sent: set %s (or %s, or %s.api_key_file)", EnvAPIKey, EnvOpenAIKey, Field)
	}
	return fmt.Sprintf("the API key from %s was refused: check %s (or %s, or %s.api_key_file)", k.source, EnvAPIKey,
		EnvOpenAIKey, Field)
}

// LogValue logs String.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }
