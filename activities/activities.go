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

	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
)

// ErrInvalidInput is the application error type of a request that fails
// validation; workflows list it as non-retryable.
const ErrInvalidInput = "InvalidInput"

// WorldModel predicts the reward of a program on a task from the task's card
// vector and the program's text, without running it.
type WorldModel interface {
	PredictText(card []float64, text string) (float64, error)
}

// Suites returns the built-in suite of a suite seed.
type Suites interface {
	Suite(ctx context.Context, suiteSeed uint64) (*suite.Suite, error)
}

// Activities carries the dependencies of every activity. Fill it in once
// per worker process; it is safe for concurrent use.
type Activities struct {
	Store      *store.Store
	Suites     Suites
	WorldModel WorldModel
	Sandbox    sandbox.Sandbox
	// SandboxKind is Sandbox's kind ("docker" or "process"), for Preflight.
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

	mu       sync.Mutex
	policies []cachedPolicy // most recently used last
}

type cachedPolicy struct {
	path, hash string
	p          *policy.Policy
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

// suite returns the suite of a seed.
func (a *Activities) suite(ctx context.Context, suiteSeed uint64) (*suite.Suite, error) {
	s, err := a.Suites.Suite(ctx, suiteSeed)
	if err != nil {
		return nil, fmt.Errorf("suite %d: %w", suiteSeed, err)
	}
	return s, nil
}

// policyConfig is the built-in policy's configuration for a run.
func policyConfig(cfg runconfig.Config, cardDim int) policy.Config {
	c := policy.DefaultConfig(policy.ProgramGrammar{}, cardDim)
	c.Hidden = cfg.Policy.Hidden
	c.LearningRate = cfg.Policy.LearningRate
	c.KLCoef = cfg.Policy.KLCoef
	return c
}

// loadPolicy returns checkpoint ref of run, verified against its hash. The
// few most recent checkpoints are kept in memory; callers must not modify
// the returned policy (Update works on a Clone).
func (a *Activities) loadPolicy(ctx context.Context, run string, ref CheckpointRef) (*policy.Policy, error) {
	c, err := a.Store.Checkpoint(ctx, run, ref.Version)
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalid(fmt.Errorf("checkpoint %d of run %s is not recorded", ref.Version, run))
	}
	if err != nil {
		return nil, err
	}
	if c.Hash != ref.Hash {
		return nil, invalid(fmt.Errorf("checkpoint %d of run %s has hash %s, request says %s", ref.Version, run, c.Hash, ref.Hash))
	}
	a.mu.Lock()
	for i, cp := range a.policies {
		if cp.path == c.Location && cp.hash == c.Hash {
			a.policies = append(append(a.policies[:i:i], a.policies[i+1:]...), cp)
			a.mu.Unlock()
			return cp.p, nil
		}
	}
	a.mu.Unlock()
	// A checkpoint file is written once, atomically (a synced temporary
	// file renamed into place), before its hash is recorded, and nothing
	// rewrites a recorded version: a reader sees the whole file or none of
	// it. A file that does not decode, or decodes to another hash, was
	// damaged or overwritten afterwards (by another deployment sharing the
	// data directory, say); retrying cannot repair it, so the step fails
	// instead of retrying for ever. A missing file stays retryable: a
	// shared volume may not be mounted yet.
	p, err := policy.Load(c.Location, policy.ProgramGrammar{})
	if errors.Is(err, policy.ErrCorrupt) {
		return nil, invalid(fmt.Errorf("checkpoint %d of run %s is unusable (%w): the run cannot go on from it", ref.Version, run, err))
	}
	if err != nil {
		return nil, err
	}
	if h := p.Hash(); h != c.Hash {
		return nil, invalid(fmt.Errorf("checkpoint %d of run %s: file %s has hash %s, Postgres records %s: "+
			"the file was overwritten (by another run or deployment sharing the data directory?) and the run cannot go on from it",
			ref.Version, run, c.Location, h, c.Hash))
	}
	a.mu.Lock()
	a.policies = append(a.policies, cachedPolicy{path: c.Location, hash: c.Hash, p: p})
	if len(a.policies) > 4 {
		a.policies = a.policies[1:]
	}
	a.mu.Unlock()
	return p, nil
}

// writeJSON writes v to path atomically (temporary file, then rename).
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
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
	return err
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// SuiteCache loads each suite once per process.
type SuiteCache struct {
	// Load builds or reads a suite (suite.Load in the worker).
	Load func(ctx context.Context, suiteSeed uint64) (*suite.Suite, error)

	mu     sync.Mutex
	suites map[uint64]*suite.Suite
}

var _ Suites = (*SuiteCache)(nil)

// Suite returns the suite of suiteSeed, loading it on first use. Loads run
// one at a time: the first build of a suite takes a minute of CPU.
func (c *SuiteCache) Suite(ctx context.Context, suiteSeed uint64) (*suite.Suite, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.suites[suiteSeed]; ok {
		return s, nil
	}
	s, err := c.Load(ctx, suiteSeed)
	if err != nil {
		return nil, err
	}
	if c.suites == nil {
		c.suites = map[uint64]*suite.Suite{}
	}
	c.suites[suiteSeed] = s
	return s, nil
}

func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

func logRun(run string) zap.Field { return zap.String("run", run) }
func logStep(step int) zap.Field  { return zap.Int("step", step) }
func zapVersion(v int) zap.Field  { return zap.Int("version", v) }
func zapHash(h string) zap.Field  { return zap.String("hash", h) }
