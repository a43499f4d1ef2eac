package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/diskspace"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/telemetry"
)

// ErrInvalidInput is the application error type of a request that fails
// validation; workflows list it as non-retryable.
const ErrInvalidInput = "InvalidInput"

// Activities carries the dependencies of every activity: the store, the
// data directory and the four ports of a step (package backend), whose
// adapters the worker picks once, in main. Fill it in once per worker
// process; it is safe for concurrent use.
type Activities struct {
	Store *store.Store
	// Tasks lists the suite's tasks (every queue).
	Tasks backend.TaskSource
	// Policy samples (rollout queue, Evaluate), creates checkpoint 0
	// (control) and updates (gpu).
	Policy backend.Policy
	// WorldModel scores trajectories (worldmodel queue).
	WorldModel backend.WorldModel
	// WorldModelV2 is the built-in world model on feature set v2, for runs
	// with world_model.features: v2 (worldmodel queue); nil on a worker
	// without one.
	WorldModelV2 backend.WorldModel
	// Grader executes and grades (sandbox queue); nil on a worker that
	// serves no sandbox.
	Grader backend.Grader
	// Backends are the worker's named backends (its registrations), which
	// a run picks by name (policy.backend, world_model.backend,
	// sandbox.kind, tasks); the fields above are the built-in ones. A run
	// naming a backend its worker lacks fails with the field named
	// (Preflight tells before the run starts).
	Backends *backend.Registry
	// SandboxKind is the grader's sandbox kind ("docker" or "process"),
	// which Preflight checks against the run config's sandbox.kind.
	SandboxKind string
	// DataDir holds checkpoints and fused batches, under
	// runs/<RunsKey>/<run id>/. Workers serving the control (CreateRun
	// writes checkpoint 0, Fuse the batch), rollout, gpu and sandbox queues
	// on different machines must share it (a network file system or a
	// synced volume).
	DataDir string
	// RunsKey keeps the deployment's runs apart from those of other
	// deployments sharing DataDir (deployenv.RunsKey); "" puts them
	// directly under runs/, as before deployments were keyed. Checkpoints
	// are found through their Location in Postgres, so runs whose files
	// were written under another key keep working.
	RunsKey string
	Logger  *zap.Logger
	// Metrics records wmrl's Prometheus series (wmrl-worker
	// --metrics-addr); nil records nothing.
	Metrics *telemetry.Recorder

	// configCache maps a run id to its recorded runconfig.Config.
	configCache sync.Map
	// wmLoaded are the refreshed world models loaded last, most recent
	// first (refreshedWorldModel).
	wmMu     sync.Mutex
	wmLoaded []loadedWM
}

// CheckpointRef names a stored policy checkpoint: its version (the number of
// updates applied) and its content hash.
type CheckpointRef struct {
	Version int    `json:"version"`
	Hash    string `json:"hash"`
}

func (c CheckpointRef) validate() error {
	if c.Version < 0 || c.Hash == "" {
		return fmt.Errorf("checkpoint: want a version >= 0 and a hash, got %+v", c)
	}
	return nil
}

// invalid wraps a validation failure as a non-retryable application error.
func invalid(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidInput, err)
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func checkRun(run string) error {
	if !runIDPattern.MatchString(run) || len(run) > 200 {
		return fmt.Errorf("run id %q: want letters, digits, '.', '_' and '-' (at most 200)", run)
	}
	return nil
}

func checkStep(step int) error {
	if step < 0 {
		return fmt.Errorf("step %d: want >= 0", step)
	}
	return nil
}

func (a *Activities) log() *zap.Logger {
	if a.Logger == nil {
		return zap.NewNop()
	}
	return a.Logger
}

// heartbeat records progress when ctx is an activity context (it is not in
// direct calls from tests).
func heartbeat(ctx context.Context, details ...any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details...)
	}
}

// metricsRun labels a run's series: its id and mode (the recorded
// config's; "unknown" when it cannot be read). Without a recorder it reads
// nothing.
func (a *Activities) metricsRun(ctx context.Context, run string) telemetry.Run {
	if a.Metrics == nil {
		return telemetry.Run{}
	}
	m := "unknown"
	if cfg, err := a.runConfig(ctx, run); err == nil {
		m = string(cfg.Mode)
	}
	return telemetry.Run{ID: run, Mode: m}
}

func (a *Activities) runDir(run string) string {
	return filepath.Join(a.DataDir, "runs", a.RunsKey, run)
}

func (a *Activities) checkpointDir(run string) string {
	return filepath.Join(a.runDir(run), "checkpoints")
}

func (a *Activities) batchPath(run string, step int) string {
	return filepath.Join(a.runDir(run), "batches", fmt.Sprintf("step-%08d.json", step))
}

func (a *Activities) updateStatsPath(run string, version int) string {
	return filepath.Join(a.runDir(run), "checkpoints", fmt.Sprintf("policy-%08d.stats.json", version))
}

// fromPort returns a port's error as the activity's: a permanent one
// (backend.IsPermanent) is non-retryable, any other is retried.
func fromPort(err error) error {
	if err != nil && backend.IsPermanent(err) {
		return invalid(err)
	}
	return err
}

// tasks returns a split of a suite, from the task source of the run's
// tasks (the built-in suite for run "").
func (a *Activities) tasks(ctx context.Context, run string, suiteSeed uint64, split backend.Split) ([]backend.Task, error) {
	src, err := a.taskSourceOf(ctx, run)
	if err != nil {
		return nil, err
	}
	ts, err := src.Tasks(ctx, suiteSeed, split)
	return ts, fromPort(err)
}

// task returns one task of a suite, from the task source of the run's
// tasks; an unknown task is invalid input.
func (a *Activities) task(ctx context.Context, run string, suiteSeed uint64, id string) (backend.Task, error) {
	src, err := a.taskSourceOf(ctx, run)
	if err != nil {
		return backend.Task{}, err
	}
	t, err := src.Task(ctx, suiteSeed, id)
	return t, fromPort(err)
}

// worldModelSettings are the world-model settings of a run's config, for
// the world models that take any (backend.Score).
func worldModelSettings(cfg runconfig.Config) backend.WorldModelSettings {
	s := cfg.WorldModel.Simulated
	return backend.WorldModelSettings{Simulation: backend.Simulation{Noise: s.Noise, Bias: s.Bias, Seed: cfg.Seed}}
}

// policySettings are the run's policy settings for the policy port.
func policySettings(cfg runconfig.Config) backend.PolicySettings {
	return backend.PolicySettings{LearningRate: cfg.Policy.LearningRate, KLCoef: cfg.Policy.KLCoef, Hidden: cfg.Policy.Hidden,
		Model: cfg.Policy.Tinker.Settings(),
		Turns: cfg.Trajectory.TurnCount()}
}

// checkpoint returns checkpoint ref of run as recorded in Postgres, for the
// policy port (which verifies the content against the hash). A version
// that is not recorded, or recorded with another hash, is invalid input.
func (a *Activities) checkpoint(ctx context.Context, run string, ref CheckpointRef) (backend.Checkpoint, error) {
	c, err := a.Store.Checkpoint(ctx, run, ref.Version)
	if errors.Is(err, store.ErrNotFound) {
		return backend.Checkpoint{}, invalid(fmt.Errorf("checkpoint %d of run %s is not recorded", ref.Version, run))
	}
	if err != nil {
		return backend.Checkpoint{}, err
	}
	if c.Hash != ref.Hash {
		return backend.Checkpoint{}, invalid(fmt.Errorf("checkpoint %d of run %s has hash %s, request says %s", ref.Version, run, c.Hash, ref.Hash))
	}
	return backend.Checkpoint{Version: c.Version, Hash: c.Hash, Location: c.Location, State: c.State}, nil
}

// writeJSON writes v to path atomically (temporary file, then rename).
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFile(path, b)
}

// writeFile writes b to path atomically (a synced temporary file, then
// rename). A full or read-only data directory's error names the path and
// the space left (diskspace.Annotate); it is retried like any other.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return diskspace.Annotate(err, path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return diskspace.Annotate(err, path)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return diskspace.Annotate(err, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, diskspace.Annotate(err, dir))
	}
	return nil
}

func logRun(run string) zap.Field { return zap.String("run", run) }
func logStep(step int) zap.Field  { return zap.Int("step", step) }
func zapVersion(v int) zap.Field  { return zap.Int("version", v) }
func zapHash(h string) zap.Field  { return zap.String("hash", h) }
