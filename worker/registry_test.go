package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/runconfig"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A --backends file gives the worker its remote adapters, by the names runs
// use; keys come from the environment only and appear in no error.
func TestRemoteBackends(t *testing.T) {
	const key = "sk-very-secret-4242"
	env := map[string]string{"TINKER_API_KEY": key, "WMRL_WORLD_MODEL_API_KEY": key, "WMRL_GRADER_TOKEN": key}
	getenv := func(k string) string { return env[k] }
	path := writeFile(t, "backends.yaml", `
tinker:
  base_url: http://127.0.0.1:1
  base_model: wmrl/builtin-policy
world_model:
  openai:
    base_url: http://127.0.0.1:1/v1
    model: Qwen/Qwen3-4B
  grade_http:
    url: http://127.0.0.1:1/worldmodel
sandbox:
  grade_http:
    url: http://127.0.0.1:1
`)
	build := func(path string) (*backend.Registry, error) {
		f, err := readBackendsFile(path, registrations())
		if err != nil {
			return nil, err
		}
		return buildBackends(t.Context(), &wiring{getenv: getenv}, f, registrations())
	}
	r, err := build(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"policy.backend: tinker", "sandbox.kind: grade-http", "tasks: store", "world_model.backend: grade-http",
		"world_model.backend: openai"}
	if got := r.Names(); !slices.Equal(got, want) {
		t.Errorf("backends %v, want %v", got, want)
	}

	// Only $TINKER_BASE_URL: a Tinker policy with its defaults.
	env["TINKER_BASE_URL"] = "http://127.0.0.1:1"
	r, err = build("")
	if err != nil || !slices.Equal(r.Names(), []string{"policy.backend: tinker", "tasks: store"}) {
		t.Errorf("from the environment: %v, %v", r.Names(), err)
	}
	delete(env, "TINKER_BASE_URL")
	if r, err := build(""); err != nil || !slices.Equal(r.Names(), []string{"tasks: store"}) {
		t.Errorf("no file, no environment: %v, %v", r.Names(), err)
	}

	for _, tt := range []struct{ text, want string }{
		{"tinker:\n  base_url: http://x\n  rank: 3\n", "field rank not found"},
		{"world_model:\n  openai:\n    model: m\n", "world_model.openai.base_url"},
		{"world_model:\n  openai:\n    base_url: http://sk-very-secret-4242@x/v1\n    model: m\n", "world_model.openai.base_url"},
		{"sandbox:\n  grade_http:\n    timeout_seconds: 3\n", "sandbox.grade_http.url: empty"},
		{"tinker:\n  base_url: http://x\n  language: python\n", "need a tokenizer"},
		{"tinker:\n  base_url: http://x\n  tokenizer: /nonexistent/tokenizer.json\n", "tinker.tokenizer"},
		{"world_model:\n  llama:\n    url: http://x\n", "line 2: field world_model.llama not found"},
		{"policy: {}\n", "line 1: field policy not found"},
	} {
		_, err := build(writeFile(t, "b.yaml", tt.text))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error with %q", tt.text, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), key) {
			t.Errorf("%q: the error shows the key: %v", tt.text, err)
		}
	}
}

// constantWM is a trivial world-model backend: every solution scores its
// section's score. It stands for a new backend's adapter package.
type constantWM struct{ score float64 }

func (w constantWM) Score(_ context.Context, items []backend.ScoreItem) ([]backend.Prediction, error) {
	out := make([]backend.Prediction, len(items))
	for i := range out {
		out[i] = backend.Prediction{Graded: true, Score: w.score}
	}
	return out, nil
}

// A new world-model backend is its adapter and one registration: its
// section of the --backends file builds it, the worker has it by its name,
// a run config naming it is valid, and the activities reach it by that
// name (activities TestRunPicksItsBackends: any registered name).
func TestNewBackendIsOneRegistration(t *testing.T) {
	regs := append(registrations(), registration{name: "constant", kind: backend.KindWorldModel, section: "world_model.constant",
		build: func(_ context.Context, _ *wiring, s section) (any, error) {
			if !s.present() {
				return nil, nil
			}
			var c struct {
				Score float64 `yaml:"score"`
			}
			if err := s.decode(&c); err != nil {
				return nil, err
			}
			return constantWM{c.Score}, nil
		}})
	f, err := readBackendsFile(writeFile(t, "b.yaml", "world_model:\n  constant:\n    score: 0.5\n"), regs)
	if err != nil {
		t.Fatal(err)
	}
	r, err := buildBackends(t.Context(), &wiring{getenv: func(string) string { return "" }}, f, regs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.Names(), "world_model.backend: constant") {
		t.Fatalf("backends %v", r.Names())
	}
	wm, ok := backend.Lookup[backend.WorldModel](r, backend.KindWorldModel, "constant")
	if !ok {
		t.Fatal("no world model constant")
	}
	ps, err := backend.Score(t.Context(), wm, backend.ScoreRequest{Items: []backend.ScoreItem{{Key: "k"}}})
	if err != nil || len(ps) != 1 || ps[0].Score != 0.5 {
		t.Errorf("scores %+v, %v", ps, err)
	}
	cfg := runconfig.Default()
	cfg.WorldModel.Backend = "constant"
	if err := cfg.Validate(); err != nil {
		t.Errorf("a run naming the new backend: %v", err)
	}
	f, err = readBackendsFile(writeFile(t, "b.yaml", "world_model:\n  constant:\n    scor: 0.5\n"), regs)
	if err == nil {
		_, err = buildBackends(t.Context(), &wiring{getenv: func(string) string { return "" }}, f, regs)
	}
	if err == nil || !strings.Contains(err.Error(), "line 3: field scor not found in world_model.constant") {
		t.Errorf("a misspelt field of the new section: %v", err)
	}
}
