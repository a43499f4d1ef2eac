package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/prompt"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/tokenizer"
)

// remoteFile is the file of wmrl-worker --backends: where this worker's
// remote backends are, and how to talk to them. A run picks one by name
// (policy.backend: tinker, world_model.backend: openai or grade-http,
// sandbox.kind: grade-http). No key is ever in it: keys come from the
// environment (TINKER_API_KEY or TINKER_API_KEY_FILE,
// WMRL_WORLD_MODEL_API_KEY or OPENAI_API_KEY or world_model.openai's
// api_key_file, WMRL_GRADER_TOKEN).
//
//	tinker:                      # policy.backend: tinker
//	  base_url: http://gpu:8000  # else $TINKER_BASE_URL
//	  base_model: Qwen/Qwen3-4B  # defaults; a run's policy.tinker overrides
//	  lora_rank: 32
//	  tokenizer: /models/qwen3/tokenizer.json   # "" = the built-in policy's tokens
//	  prompt_template: /etc/wmrl/prompt.tmpl    # "" = prompt.Default
//	  language: python                          # or builtin
//	world_model:
//	  openai:                    # world_model.backend: openai
//	    base_url: http://vllm:8000/v1
//	    model: Qwen/Qwen3-4B
//	  grade_http:                # world_model.backend: grade-http
//	    url: http://grader:8089/worldmodel
//	sandbox:
//	  grade_http:                # sandbox.kind: grade-http
//	    url: http://grader:8089
//	  python:                    # sandbox.kind: python
//	    image: wmrl-python:692af578805c0c3b
type remoteFile struct {
	Tinker     *tinkerSection `yaml:"tinker"`
	WorldModel struct {
		OpenAI    *openaiSection `yaml:"openai"`
		GradeHTTP *gradeSection  `yaml:"grade_http"`
	} `yaml:"world_model"`
	Sandbox struct {
		GradeHTTP *gradeSection  `yaml:"grade_http"`
		Python    *pythonSection `yaml:"python"`
	} `yaml:"sandbox"`
}

// pythonSection is the Python sandbox (sandbox.kind: python): agent-written
// Python solutions of the imported real tasks, one locked-down container
// each (internal/pysandbox).
type pythonSection struct {
	// Image is the wmrl-python image (deploy/pyimage.sh prints it); ""
	// is the newest one the engine has.
	Image string `yaml:"image"`
	// StagingDir is where each execution's files are staged for the
	// engine to mount ("": the system's temporary directory).
	StagingDir string `yaml:"staging_dir"`
}

type tinkerSection struct {
	BaseURL        string  `yaml:"base_url"`
	BaseModel      string  `yaml:"base_model"`
	LoRARank       int     `yaml:"lora_rank"`
	Loss           string  `yaml:"loss"`
	MaxTokens      int     `yaml:"max_tokens"`
	Temperature    float64 `yaml:"temperature"`
	Tokenizer      string  `yaml:"tokenizer"`
	PromptTemplate string  `yaml:"prompt_template"`
	Language       string  `yaml:"language"`
}

type openaiSection struct {
	BaseURL        string  `yaml:"base_url"`
	Model          string  `yaml:"model"`
	Temperature    float64 `yaml:"temperature"`
	MaxTokens      int     `yaml:"max_tokens"`
	Seed           int64   `yaml:"seed"`
	NoSeed         bool    `yaml:"no_seed"`
	Concurrency    int     `yaml:"concurrency"`
	TimeoutSeconds float64 `yaml:"timeout_seconds"`
	MaxRetries     *int    `yaml:"max_retries"`
	APIKeyFile     string  `yaml:"api_key_file"`
	TemplateFile   string  `yaml:"template_file"`
}

type gradeSection struct {
	URL            string  `yaml:"url"`
	TimeoutSeconds float64 `yaml:"timeout_seconds"`
	Retries        int     `yaml:"retries"`
}

// readRemoteFile reads a --backends file strictly: an unknown field is an
// error naming its line.
func readRemoteFile(path string) (remoteFile, error) {
	var f remoteFile
	if path == "" {
		return f, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("--backends: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return f, fmt.Errorf("--backends %s: %w", path, err)
	}
	return f, nil
}

// remoteBackends builds the remote adapters of f (and a Tinker policy when
// only $TINKER_BASE_URL is set), once, for the whole process. getenv is
// os.Getenv.
func remoteBackends(f remoteFile, st *store.Store, getenv func(string) string) (activities.Remote, error) {
	r := activities.Remote{Policies: map[string]backend.Policy{}, WorldModels: map[string]backend.WorldModel{},
		Graders: map[string]backend.Grader{}}
	if f.Tinker != nil || getenv(tinker.EnvBaseURL) != "" {
		p, err := tinkerPolicy(f.Tinker, st, getenv)
		if err != nil {
			return r, err
		}
		r.Policies[backend.Tinker] = p
	}
	if s := f.WorldModel.OpenAI; s != nil {
		w, err := openaiWorldModel(*s, st, getenv)
		if err != nil {
			return r, err
		}
		r.WorldModels[backend.OpenAI] = w
	}
	if s := f.WorldModel.GradeHTTP; s != nil {
		c, err := gradeClient(*s, "world_model.grade_http", getenv)
		if err != nil {
			return r, err
		}
		r.WorldModels[backend.GradeHTTP] = c
	}
	if s := f.Sandbox.GradeHTTP; s != nil {
		c, err := gradeClient(*s, "sandbox.grade_http", getenv)
		if err != nil {
			return r, err
		}
		r.Graders[backend.GradeHTTP] = c
	}
	return r, nil
}

func tinkerPolicy(s *tinkerSection, st *store.Store, getenv func(string) string) (*tinker.Policy, error) {
	if s == nil {
		s = &tinkerSection{}
	}
	cfg, err := tinker.Config{BaseURL: s.BaseURL, BaseModel: s.BaseModel, LoRARank: s.LoRARank, Loss: s.Loss,
		MaxTokens: s.MaxTokens, Temperature: s.Temperature}.FromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("--backends tinker: %w", err)
	}
	var tok tinker.Tokenizer = tinker.BuiltinTokenizer{}
	if s.Tokenizer != "" {
		t, err := tokenizer.Load(s.Tokenizer)
		if err != nil {
			return nil, fmt.Errorf("--backends tinker.tokenizer: %w", err)
		}
		tmpl, err := prompt.Load(s.PromptTemplate)
		if err != nil {
			return nil, fmt.Errorf("--backends tinker.prompt_template: %w", err)
		}
		lang := s.Language
		switch lang {
		case "":
			lang = "builtin"
		case "python", "builtin":
		default:
			return nil, fmt.Errorf("--backends tinker.language: %q, want python or builtin", lang)
		}
		tok = tinker.TextTokenizer{Tok: t, Template: tmpl, Language: lang}
	} else if s.PromptTemplate != "" || s.Language != "" {
		return nil, errors.New("--backends tinker: prompt_template and language need a tokenizer (the model's tokenizer.json)")
	}
	p, err := tinker.New(cfg, tok, tinker.PostgresJournal{Store: st}, nil)
	if err != nil {
		return nil, fmt.Errorf("--backends tinker: %w", err)
	}
	return p, nil
}

func openaiWorldModel(s openaiSection, st *store.Store, getenv func(string) string) (*openaiwm.WorldModel, error) {
	cfg := openaiwm.DefaultConfig()
	cfg.BaseURL, cfg.Model, cfg.Temperature, cfg.MaxTokens = s.BaseURL, s.Model, s.Temperature, s.MaxTokens
	cfg.Seed, cfg.NoSeed, cfg.APIKeyFile = s.Seed, s.NoSeed, s.APIKeyFile
	if s.Concurrency != 0 {
		cfg.Concurrency = s.Concurrency
	}
	if s.TimeoutSeconds != 0 {
		cfg.Timeout = time.Duration(s.TimeoutSeconds * float64(time.Second))
	}
	if s.MaxRetries != nil {
		cfg.MaxRetries = *s.MaxRetries
	}
	if s.TemplateFile != "" {
		b, err := os.ReadFile(s.TemplateFile)
		if err != nil {
			return nil, fmt.Errorf("--backends world_model.openai.template_file: %w", err)
		}
		cfg.Template = string(b)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("--backends: %w", err)
	}
	key, err := openaiwm.LoadKey(cfg, getenv)
	if err != nil {
		return nil, fmt.Errorf("--backends: %w", err)
	}
	w, err := openaiwm.New(cfg, key, openaiwm.StoreCache{Store: st})
	if err != nil {
		return nil, fmt.Errorf("--backends world_model.openai: %w", err)
	}
	return w, nil
}

func gradeClient(s gradeSection, field string, getenv func(string) string) (*gradehttp.Client, error) {
	cfg := gradehttp.Config{URL: s.URL, Token: gradehttp.Token(getenv(gradehttp.TokenEnv)), Retries: s.Retries,
		Timeout: time.Duration(s.TimeoutSeconds * float64(time.Second))}
	if s.URL == "" {
		return nil, fmt.Errorf("--backends %s.url: empty", field)
	}
	c, err := gradehttp.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--backends %s: %w", field, err)
	}
	return c, nil
}
