package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
)

// runBackends are the backend names of one run's configuration.
type runBackends struct {
	policy, worldModel, sandbox, tasks string
}

func backendsOf(cfg runconfig.Config) runBackends {
	return runBackends{policy: cfg.Policy.Backend, worldModel: cfg.WorldModel.Backend, sandbox: cfg.Sandbox.Kind, tasks: cfg.Tasks}
}

// runBackendsOf returns the backend names of a run's recorded
// configuration.
func (a *Activities) runBackendsOf(ctx context.Context, run string) (runBackends, error) {
	cfg, err := a.runConfig(ctx, run)
	if err != nil {
		return runBackends{}, err
	}
	return backendsOf(cfg), nil
}

// runConfig returns a run's recorded configuration. It never changes once
// recorded, so it is kept per run after the first read.
func (a *Activities) runConfig(ctx context.Context, run string) (runconfig.Config, error) {
	if v, ok := a.configCache.Load(run); ok {
		return v.(runconfig.Config), nil
	}
	r, err := a.Store.Run(ctx, run)
	if errors.Is(err, store.ErrNotFound) {
		return runconfig.Config{}, invalid(err)
	}
	if err != nil {
		return runconfig.Config{}, err
	}
	var cfg runconfig.Config
	if err := json.Unmarshal(r.Config, &cfg); err != nil {
		return runconfig.Config{}, invalid(fmt.Errorf("run %s: recorded config: %w", run, err))
	}
	a.configCache.Store(run, cfg)
	return cfg, nil
}

// missing is the error of a run naming a backend this worker lacks.
func (a *Activities) missing(field, name string) error {
	has := a.Backends.Names()
	if len(has) == 0 {
		has = []string{"only the built-in backends"}
	}
	return invalid(fmt.Errorf("%s: %q, but this worker has no such backend (it has %v); start the worker with "+
		"that backend's endpoint (docs/design.md, \"Backends\")", field, name, has))
}

// policyOf returns the policy adapter a run's policy.backend names.
func (a *Activities) policyOf(ctx context.Context, run string) (backend.Policy, error) {
	b, err := a.runBackendsOf(ctx, run)
	if err != nil {
		return nil, err
	}
	return a.policyNamed(b.policy)
}

func (a *Activities) policyNamed(name string) (backend.Policy, error) {
	return named(a, backend.KindPolicy, name, a.Policy)
}

// named returns the adapter of a backend name: builtin ("" or "builtin"),
// or the one registered under that name (a.Backends); kind names the
// run-config field for messages.
func named[T comparable](a *Activities, kind backend.Kind, name string, builtin T) (T, error) {
	var zero T
	if name == "" || name == backend.Builtin {
		if builtin == zero {
			return zero, fmt.Errorf("this worker has no built-in adapter for %s", kind)
		}
		return builtin, nil
	}
	if x, ok := backend.Lookup[T](a.Backends, kind, name); ok {
		return x, nil
	}
	return zero, a.missing(string(kind), name)
}

// worldModelOf returns the world model a run's world_model.backend names.
func (a *Activities) worldModelOf(ctx context.Context, run string) (backend.WorldModel, error) {
	b, err := a.runBackendsOf(ctx, run)
	if err != nil {
		return nil, err
	}
	return a.worldModelNamed(b.worldModel)
}

func (a *Activities) worldModelNamed(name string) (backend.WorldModel, error) {
	return named(a, backend.KindWorldModel, name, a.WorldModel)
}

// runWorldModel returns the world model a run's configuration names: its
// world_model.backend, or, with world_model.features v2 (built-in only,
// runconfig checks), the worker's built-in v2 model.
func (a *Activities) runWorldModel(cfg runconfig.Config) (backend.WorldModel, error) {
	if !cfg.WorldModel.FeaturesV2On() {
		return a.worldModelNamed(cfg.WorldModel.Backend)
	}
	if a.WorldModelV2 == nil {
		return nil, invalid(fmt.Errorf("world_model.features: %q, but this worker has no built-in world model on that feature set "+
			"(a wmrl-worker serving the worldmodel queue has one: --world-model-v2, default the embedded default-v2.json)", cfg.WorldModel.Features))
	}
	return a.WorldModelV2, nil
}

// graderOf returns the grader a run's sandbox.kind names.
func (a *Activities) graderOf(ctx context.Context, run string) (backend.Grader, error) {
	b, err := a.runBackendsOf(ctx, run)
	if err != nil {
		return nil, err
	}
	if b.policy == "" || b.policy == backend.Builtin {
		if g, ok := backend.Lookup[backend.Grader](a.Backends, backend.KindProgramGrader, b.sandbox); ok {
			return g, nil
		}
	}
	g, _, err := a.graderNamed(b.sandbox)
	return g, err
}

// taskSourceOf returns the task source a run's tasks names; the built-in
// suite for run "" (a request of a workflow recorded before requests named
// their run).
func (a *Activities) taskSourceOf(ctx context.Context, run string) (backend.TaskSource, error) {
	name := ""
	if run != "" {
		b, err := a.runBackendsOf(ctx, run)
		if err != nil {
			return nil, err
		}
		name = b.tasks
	}
	return a.taskSourceNamed(name)
}

func (a *Activities) taskSourceNamed(name string) (backend.TaskSource, error) {
	if name == "" || name == backend.Builtin {
		if a.Tasks == nil {
			return nil, errors.New("this worker has no task source")
		}
		return a.Tasks, nil
	}
	if s, ok := backend.Lookup[backend.TaskSource](a.Backends, backend.KindTasks, name); ok {
		return s, nil
	}
	return nil, a.missing("tasks", name)
}

// graderNamed returns the grader of a sandbox.kind: the worker's own
// sandbox for "", auto, docker and process (Preflight checks that the kind
// is the worker's), a remote grader otherwise; own reports which.
func (a *Activities) graderNamed(kind string) (g backend.Grader, own bool, err error) {
	switch kind {
	case "", runconfig.SandboxAuto, runconfig.SandboxDocker, runconfig.SandboxProcess:
		if a.Grader == nil {
			return nil, true, errors.New("this worker has no sandbox")
		}
		return a.Grader, true, nil
	}
	if g, ok := backend.Lookup[backend.Grader](a.Backends, backend.KindGrader, kind); ok {
		return g, false, nil
	}
	return nil, false, a.missing("sandbox.kind", kind)
}
