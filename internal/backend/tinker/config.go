package tinker

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
)

// Environment variables read by FromEnv.
const (
	EnvBaseURL    = "TINKER_BASE_URL"
	EnvAPIKey     = "TINKER_API_KEY"
	EnvAPIKeyFile = "TINKER_API_KEY_FILE"
)

// Redacted is what a Secret prints as.
const Redacted = "[redacted]"

// Secret is an API key. It prints, formats and marshals (JSON, text) as
// Redacted, so that a Config that is logged or serialised (into Temporal
// history, say) never carries the key; only this package reads the value.
type Secret struct{ v string }

// NewSecret wraps a key.
func NewSecret(key string) Secret { return Secret{v: key} }

// IsZero reports whether no key is set.
func (s Secret) IsZero() bool { return s.v == "" }

func (s Secret) String() string   { return Redacted }
func (s Secret) GoString() string { return Redacted }

// Format prints Redacted for every verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Redacted)) }

// MarshalText and MarshalJSON give Redacted.
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// Config configures the Tinker policy (the run config's policy.tinker
// section, plus the key from the environment).
type Config struct {
	// BaseURL is the service's root, e.g.
	// https://tinker.thinkingmachines.dev/services/tinker-prod or a
	// self-hosted server's http://host:8000 (TINKER_BASE_URL).
	BaseURL string `json:"base_url"`
	// APIKey is sent as X-API-Key (TINKER_API_KEY, or the first line of
	// the file TINKER_API_KEY_FILE). A server without authentication (the
	// built-in one in tests) takes none.
	APIKey Secret `json:"api_key"`
	// BaseModel is the model to train a LoRA adapter on; BuiltinBaseModel
	// names the built-in policy served by internal/serve/tinkerserve.
	BaseModel string `json:"base_model"`
	// LoRARank is the adapter's rank.
	LoRARank int `json:"lora_rank"`
	// Loss is LossImportanceSampling (default) or LossPPO.
	Loss string `json:"loss"`
	// Beta1, Beta2 and Eps are Adam's; the learning rate is the run's
	// (backend.PolicySettings.LearningRate).
	Beta1 float64 `json:"beta1"`
	Beta2 float64 `json:"beta2"`
	Eps   float64 `json:"eps"`
	// MaxTokens bounds a completion's length.
	MaxTokens int `json:"max_tokens"`
	// Temperature of sampling.
	Temperature float64 `json:"temperature"`
	// RequestTimeout bounds one HTTP request; PollMax bounds the wait
	// between two polls of a future (polls back off from 50ms to it).
	RequestTimeout time.Duration `json:"request_timeout"`
	PollMax        time.Duration `json:"poll_max"`
	// Retries is how often a request is retried after a transient failure
	// (connection error, 429, 5xx) before the call fails (retryably).
	Retries int `json:"retries"`
}

// Defaults.
const (
	BuiltinBaseModel      = "wmrl/builtin-policy"
	DefaultLoRARank       = 32
	DefaultBeta1          = 0.9
	DefaultBeta2          = 0.95
	DefaultEps            = 1e-12
	DefaultMaxTokens      = 512
	DefaultRequestTimeout = 60 * time.Second
	DefaultPollMax        = 2 * time.Second
	DefaultRetries        = 4
)

// WithDefaults fills the unset fields with the defaults (Tinker SDK's Adam
// defaults: 0.9, 0.95, 1e-12).
func (c Config) WithDefaults() Config {
	if c.LoRARank == 0 {
		c.LoRARank = DefaultLoRARank
	}
	if c.Loss == "" {
		c.Loss = LossImportanceSampling
	}
	if c.Beta1 == 0 {
		c.Beta1 = DefaultBeta1
	}
	if c.Beta2 == 0 {
		c.Beta2 = DefaultBeta2
	}
	if c.Eps == 0 {
		c.Eps = DefaultEps
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Temperature == 0 {
		c.Temperature = 1
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.PollMax == 0 {
		c.PollMax = DefaultPollMax
	}
	if c.Retries == 0 {
		c.Retries = DefaultRetries
	}
	return c
}

// FromEnv fills BaseURL (when empty) and APIKey from the environment:
// TINKER_BASE_URL, TINKER_API_KEY, else TINKER_API_KEY_FILE. getenv is
// os.Getenv in production.
func (c Config) FromEnv(getenv func(string) string) (Config, error) {
	if c.BaseURL == "" {
		c.BaseURL = getenv(EnvBaseURL)
	}
	if k := getenv(EnvAPIKey); k != "" {
		c.APIKey = NewSecret(strings.TrimSpace(k))
		return c, nil
	}
	if f := getenv(EnvAPIKeyFile); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			// The error names the file, never its content.
			return c, fmt.Errorf("policy.tinker: read key file %s (%s): %w", f, EnvAPIKeyFile, errors.Unwrap(err))
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if strings.TrimSpace(line) == "" {
			return c, fmt.Errorf("policy.tinker: key file %s (%s) is empty", f, EnvAPIKeyFile)
		}
		c.APIKey = NewSecret(strings.TrimSpace(line))
	}
	return c, nil
}

// Model is the configuration's model settings.
func (c Config) Model() backend.ModelSettings {
	return backend.ModelSettings{BaseModel: c.BaseModel, LoRARank: c.LoRARank, Loss: c.Loss, Beta1: c.Beta1, Beta2: c.Beta2,
		Eps: c.Eps, MaxTokens: c.MaxTokens, Temperature: c.Temperature}
}

// Validate checks a configuration (after WithDefaults), naming the field:
// the model settings' bounds with backend.ModelSettings.Validate (the run
// config's check of policy.tinker), then the worker's own fields.
func (c Config) Validate() error {
	if err := c.Model().Validate("policy.tinker."); err != nil {
		return err
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "":
		return fmt.Errorf("policy.tinker.base_url: empty (set it or %s)", EnvBaseURL)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("policy.tinker.base_url %q: want an http(s) URL", redactURL(c.BaseURL))
	case u.User != nil:
		return errors.New("policy.tinker.base_url: credentials in the URL are not allowed (use " + EnvAPIKey + ")")
	case c.RequestTimeout <= 0:
		return fmt.Errorf("policy.tinker.request_timeout %v: want > 0", c.RequestTimeout)
	case c.PollMax <= 0:
		return fmt.Errorf("policy.tinker.poll_max %v: want > 0", c.PollMax)
	case c.Retries < 0:
		return fmt.Errorf("policy.tinker.retries %d: want >= 0", c.Retries)
	}
	return nil
}

// redactURL drops a URL's user info and query (which may hold
// credentials).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}
