package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/backend/realtasks"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/prompt"
	"github.com/wmrl/wmrl/internal/pyrender"
	"github.com/wmrl/wmrl/internal/pysandbox"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/tasks"
	"github.com/wmrl/wmrl/internal/tokenizer"
)

// registration is one backend a worker can have: the name a run gives
// it, the port it serves (its kind: the run-config field that names it),
// the section of the --backends file that configures it ("" for none) and
// how its adapter is built. A new backend is its adapter package and one
// registration here; nothing else names it (the run config accepts any
// well-formed name, and the workers, through the preflight, say which
// they have).
type registration struct {
	name    string
	kind    backend.Kind
	section string
	// build returns the adapter, or nil when this worker has no such
	// backend (its section is absent, or the worker does not serve its
	// queue). s is the section, absent when the file has none.
	build func(ctx context.Context, w *wiring, s section) (any, error)
}

// registrations are every backend a worker can have, built in this order
// (a program grader after its grader).
//
// The --backends file holds their sections; no key is ever in it: keys come
// from the environment (TINKER_API_KEY or TINKER_API_KEY_FILE,
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
func registrations() []registration {
	return []registration{
		{name: backend.Tinker, kind: backend.KindPolicy, section: "tinker", build: buildTinker},
		{name: backend.OpenAI, kind: backend.KindWorldModel, section: "world_model.openai", build: buildOpenAI},
		{name: backend.GradeHTTP, kind: backend.KindWorldModel, section: "world_model.grade_http", build: buildGradeHTTP},
		// The simulated world model, for studying the method: the real
		// score, degraded as the run's world_model.simulated says.
		{name: backend.Simulated, kind: backend.KindWorldModel, build: buildSimulated},
		{name: backend.GradeHTTP, kind: backend.KindGrader, section: "sandbox.grade_http", build: buildGradeHTTP},
		{name: backend.Python, kind: backend.KindGrader, section: "sandbox.python", build: buildPython},
		// The built-in policy writes pipeline programs: its runs get them
		// rendered as Python first.
		{name: backend.Python, kind: backend.KindProgramGrader, section: "sandbox.python", build: buildPythonPrograms},
		// Every worker reads the task store of the shared data directory,
		// for runs with tasks: store (it may be empty: such a run then
		// fails saying so).
		{name: backend.TaskStore, kind: backend.KindTasks, build: buildTaskStore},
	}
}

// wiring is what a registration builds from: the worker's own pieces and
// the registry built so far.
type wiring struct {
	st      *store.Store
	getenv  func(string) string
	dataDir string
	logger  *zap.Logger
	// tasks are the built-in task source, and servesWorldModel whether the
	// worker serves the worldmodel queue (the simulated world model needs
	// both).
	tasks            backend.TaskSource
	servesWorldModel bool
	reg              *backend.Registry
	// closers release what the adapters hold, at the worker's stop.
	closers []func() error
}

func (w *wiring) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		if err := w.closers[i](); err != nil && w.logger != nil {
			w.logger.Warn("close backend", zap.Error(err))
		}
	}
}

// buildBackends builds the registry of f's backends (and those built from
// the worker's own pieces), once, for the whole process.
func buildBackends(ctx context.Context, w *wiring, f backendsFile, regs []registration) (*backend.Registry, error) {
	w.reg = &backend.Registry{}
	for _, r := range regs {
		x, err := r.build(ctx, w, f.section(r.section))
		if err != nil {
			return nil, err
		}
		if x == nil {
			continue
		}
		if err := w.reg.Add(r.kind, r.name, x); err != nil {
			return nil, err
		}
	}
	return w.reg, nil
}

// backendsFile is a --backends file: its sections by path
// ("world_model.openai").
type backendsFile struct {
	path     string
	sections map[string]*yaml.Node
}

// section is one section of the file; absent when node is nil.
type section struct {
	path string // "world_model.openai"
	file string
	node *yaml.Node
}

func (f backendsFile) section(path string) section {
	if path == "" {
		return section{}
	}
	return section{path: path, file: f.path, node: f.sections[path]}
}

func (s section) present() bool { return s.node != nil }

// decode decodes the section into v, a pointer to a struct, strictly: a
// key v has no field for is an error naming its line.
func (s section) decode(v any) error {
	if s.node.Kind == yaml.MappingNode {
		t := reflect.TypeOf(v).Elem()
		for i := 0; i+1 < len(s.node.Content); i += 2 {
			k := s.node.Content[i]
			if !hasYAMLField(t, k.Value) {
				return fmt.Errorf("--backends %s: line %d: field %s not found in %s", s.file, k.Line, k.Value, s.path)
			}
		}
	}
	if err := s.node.Decode(v); err != nil {
		return fmt.Errorf("--backends %s: %s: %w", s.file, s.path, err)
	}
	return nil
}

func hasYAMLField(t reflect.Type, name string) bool {
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag == name {
			return true
		}
	}
	return false
}

// readBackendsFile reads a --backends file strictly: a key that is no
// registration's section (nor a group of them, world_model or sandbox) is
// an error naming its line.
func readBackendsFile(path string, regs []registration) (backendsFile, error) {
	f := backendsFile{path: path, sections: map[string]*yaml.Node{}}
	if path == "" {
		return f, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("--backends: %w", err)
	}
	known := map[string]bool{}
	for _, r := range regs {
		if r.section != "" {
			known[r.section] = true
		}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return f, fmt.Errorf("--backends %s: %w", path, err)
	}
	if len(root.Content) == 0 {
		return f, nil
	}
	var walk func(m *yaml.Node, prefix string) error
	walk = func(m *yaml.Node, prefix string) error {
		if m.Kind != yaml.MappingNode {
			return fmt.Errorf("--backends %s: line %d: %s is not a mapping", path, m.Line, strings.TrimSuffix(prefix, "."))
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			p := prefix + k.Value
			switch {
			case known[p]:
				f.sections[p] = v
			case isGroup(known, p) && v.Kind == yaml.MappingNode:
				if err := walk(v, p+"."); err != nil {
					return err
				}
			case isGroup(known, p) && v.ShortTag() == "!!null":
			default:
				return fmt.Errorf("--backends %s: line %d: field %s not found", path, k.Line, p)
			}
		}
		return nil
	}
	return f, walk(root.Content[0], "")
}

// isGroup reports whether p is the parent of a known section.
func isGroup(known map[string]bool, p string) bool {
	for s := range known {
		if strings.HasPrefix(s, p+".") {
			return true
		}
	}
	return false
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

func buildTinker(_ context.Context, w *wiring, s section) (any, error) {
	var t tinkerSection
	if s.present() {
		if err := s.decode(&t); err != nil {
			return nil, err
		}
	} else if w.getenv(tinker.EnvBaseURL) == "" {
		return nil, nil // no section and no $TINKER_BASE_URL: no Tinker policy
	}
	return tinkerPolicy(&t, w.st, w.getenv)
}

func buildOpenAI(_ context.Context, w *wiring, s section) (any, error) {
	if !s.present() {
		return nil, nil
	}
	var o openaiSection
	if err := s.decode(&o); err != nil {
		return nil, err
	}
	return openaiWorldModel(o, w.st, w.getenv)
}

// buildGradeHTTP builds a /grade client, a world model or a grader by its
// section.
func buildGradeHTTP(_ context.Context, w *wiring, s section) (any, error) {
	if !s.present() {
		return nil, nil
	}
	var g gradeSection
	if err := s.decode(&g); err != nil {
		return nil, err
	}
	return gradeClient(g, s.path, w.getenv)
}

func buildSimulated(_ context.Context, w *wiring, _ section) (any, error) {
	t, ok := w.tasks.(*builtin.Tasks)
	if !w.servesWorldModel || !ok {
		return nil, nil
	}
	return &builtin.SimulatedWorldModel{Tasks: t}, nil
}

func buildPython(ctx context.Context, w *wiring, s section) (any, error) {
	if !s.present() {
		return nil, nil
	}
	var p pythonSection
	if err := s.decode(&p); err != nil {
		return nil, err
	}
	py, err := openPython(ctx, p, w.dataDir, w.logger)
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, py.Close)
	return &pysandbox.Grader{Sandbox: py, Tasks: tasks.Store{Dir: tasks.StoreDir(w.dataDir)}}, nil
}

func buildPythonPrograms(_ context.Context, w *wiring, _ section) (any, error) {
	g, ok := backend.Lookup[*pysandbox.Grader](w.reg, backend.KindGrader, backend.Python)
	if !ok {
		return nil, nil
	}
	return &pyrender.Grader{Python: g}, nil
}

func buildTaskStore(_ context.Context, w *wiring, _ section) (any, error) {
	return &realtasks.Source{Store: tasks.Store{Dir: tasks.StoreDir(w.dataDir)}}, nil
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
