package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/store"
)

// WorldModelRef names a refreshed world model of a run: the last step whose
// anchor pairs it was trained on, and the sha256 of its artefact. The steps
// after Step are scored by it (until the next refresh).
type WorldModelRef struct {
	Step int    `json:"step"`
	Hash string `json:"hash"`
}

// RefreshRequest asks for the run's world model retrained on its anchor
// executions of steps 0..Step (world_model.refresh).
type RefreshRequest struct {
	RunID     string `json:"run_id"`
	Step      int    `json:"step"`
	SuiteSeed uint64 `json:"suite_seed"`
	// MinPairs is world_model.refresh.min_pairs: with fewer anchor pairs
	// (at least one is needed), no version is made.
	MinPairs int `json:"min_pairs"`
}

// Validate checks the request.
func (r RefreshRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	if r.MinPairs < 0 {
		return fmt.Errorf("min pairs %d: want >= 0", r.MinPairs)
	}
	return nil
}

// RefreshResponse is the run's world model after the refresh.
type RefreshResponse struct {
	// Version is the refreshed model; nil when the run has fewer than
	// MinPairs anchor pairs, so the frozen model goes on scoring.
	Version *WorldModelRef `json:"version,omitempty"`
	// Pairs is the number of the run's anchor pairs of steps 0..Step.
	Pairs int `json:"pairs"`
}

// RefreshWorldModel retrains the run's world model on its original training
// data plus the run's anchor executions of steps 0..Step (in (step, group,
// sample) order), writes the artefact under the run's directory
// (worldmodels/), named by its sha256, and records it (world_model_versions).
// Deterministic and keyed by (run, step): a retry finds the recorded
// version, or recomputes the same bytes.
func (a *Activities) RefreshWorldModel(ctx context.Context, req RefreshRequest) (RefreshResponse, error) {
	if err := req.Validate(); err != nil {
		return RefreshResponse{}, invalid(err)
	}
	if v, err := a.Store.WorldModelVersionAt(ctx, req.RunID, req.Step); err == nil {
		return RefreshResponse{Version: &WorldModelRef{Step: v.Step, Hash: v.Hash}, Pairs: v.Pairs}, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return RefreshResponse{}, err
	}
	cfg, err := a.runConfig(ctx, req.RunID)
	if err != nil {
		return RefreshResponse{}, err
	}
	items, err := a.refreshItems(ctx, req, cfg.Trajectory.MultiTurn())
	if err != nil {
		return RefreshResponse{}, err
	}
	// world_model.refresh.half_life: older anchor executions weigh less
	// (every weight is 1 without it, the unweighted refit).
	for i := range items {
		items[i].Weight = cfg.WorldModel.Refresh.Weight(items[i].Step, req.Step)
	}
	resp := RefreshResponse{Pairs: len(items)}
	if len(items) == 0 || len(items) < req.MinPairs {
		return resp, nil
	}
	wm, err := a.runWorldModel(cfg)
	if err != nil {
		return RefreshResponse{}, err
	}
	rf, ok := wm.(backend.Refresher)
	if !ok {
		return RefreshResponse{}, invalid(fmt.Errorf("world_model.refresh.every: world_model.backend %q cannot be retrained on this worker",
			cfg.WorldModel.Backend))
	}
	stop := keepBeating(ctx, req.Step)
	r, err := rf.Refresh(ctx, items)
	stop()
	if err != nil {
		return RefreshResponse{}, fromPort(fmt.Errorf("refresh world model of %s after step %d: %w", req.RunID, req.Step, err))
	}
	sum := sha256.Sum256(r.Artefact)
	hash := hex.EncodeToString(sum[:])
	path := a.worldModelPath(req.RunID, req.Step, hash)
	if err := writeFile(path, r.Artefact); err != nil {
		return RefreshResponse{}, fmt.Errorf("write world model %s: %w", path, err)
	}
	v := store.WorldModelVersion{Run: req.RunID, Step: req.Step, Hash: hash, Location: path, Base: r.Base,
		BaseExamples: r.BaseExamples, Pairs: len(items), TrainMSE: r.TrainMSE, TrainSpearman: r.TrainSpearman}
	if err := a.Store.SaveWorldModelVersion(ctx, v); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return RefreshResponse{}, invalid(fmt.Errorf("%w: the same anchor pairs gave another world model", err))
		}
		return RefreshResponse{}, err
	}
	a.log().Info("world model refreshed", logRun(req.RunID), logStep(req.Step), zapHash(hash), zap.Int("pairs", len(items)))
	resp.Version = &WorldModelRef{Step: req.Step, Hash: hash}
	return resp, nil
}

// refreshItems are the anchor executions of steps 0..req.Step a refresh
// learns from, in (step, group, sample[, turn]) order: a single-shot run's
// anchor trajectories (program, r_env); a multi-turn run's executed turns
// that the world model also graded (each turn's action and real reward),
// grouped by (step, group, turn) so that a ranking is learnt among the
// samples of one turn of one group. A multi-turn trajectory's row holds its
// first turn's program beside the reduced r_env, a pair no world model is
// asked to predict.
func (a *Activities) refreshItems(ctx context.Context, req RefreshRequest, multiTurn bool) ([]backend.TrainItem, error) {
	var items []backend.TrainItem
	tasks := map[string]backend.Task{}
	taskOf := func(id string) (backend.Task, error) {
		task, ok := tasks[id]
		if !ok {
			var err error
			if task, err = a.task(ctx, req.RunID, req.SuiteSeed, id); err != nil {
				return backend.Task{}, err
			}
			tasks[id] = task
		}
		return task, nil
	}
	if multiTurn {
		ts, err := a.Store.AnchorTurns(ctx, req.RunID)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if t.Step > req.Step {
				continue
			}
			task, err := taskOf(t.TaskID)
			if err != nil {
				return nil, err
			}
			items = append(items, backend.TrainItem{Task: task, Solution: t.Action, Score: t.Reward, Step: t.Step,
				Group: strconv.Itoa(t.Step) + "/" + strconv.Itoa(t.Group) + "/" + strconv.Itoa(t.Turn), Key: t.TurnKey.String()})
		}
		return items, nil
	}
	ts, err := a.Store.AnchorTrajectories(ctx, req.RunID)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Step > req.Step || t.Exec == nil {
			continue
		}
		task, err := taskOf(t.TaskID)
		if err != nil {
			return nil, err
		}
		items = append(items, backend.TrainItem{Task: task, Solution: t.Program, Score: t.Exec.Score, Step: t.Step,
			Group: strconv.Itoa(t.Step) + "/" + strconv.Itoa(t.Group), Key: t.Key.String()})
	}
	return items, nil
}

// keepBeating heartbeats every 10 s until the returned function is called:
// the first refresh of a worker regenerates the frozen model's training data,
// which takes minutes.
func keepBeating(ctx context.Context, details ...any) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				heartbeat(ctx, details...)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (a *Activities) worldModelPath(run string, step int, hash string) string {
	return filepath.Join(a.runDir(run), "worldmodels", fmt.Sprintf("wm-step-%08d-%.16s.json", step, hash))
}

// wmCacheSize is how many refreshed world models a worker keeps loaded.
const wmCacheSize = 4

type loadedWM struct {
	hash string
	wm   backend.WorldModel
}

// refreshedWorldModel returns the run's refreshed world model of the given
// hash: from memory (the last few used), or read from its recorded location,
// checked against the hash and opened by the run's frozen model. An
// unrecorded version or a file that does not hash to its name is invalid
// input; a missing file is retried (a shared volume not mounted yet).
func (a *Activities) refreshedWorldModel(ctx context.Context, run, hash string, frozen backend.WorldModel) (backend.WorldModel, error) {
	a.wmMu.Lock()
	for i, c := range a.wmLoaded {
		if c.hash == hash {
			a.wmLoaded = append(append([]loadedWM{c}, a.wmLoaded[:i]...), a.wmLoaded[i+1:]...)
			a.wmMu.Unlock()
			return c.wm, nil
		}
	}
	a.wmMu.Unlock()
	rf, ok := frozen.(backend.Refresher)
	if !ok {
		return nil, invalid(fmt.Errorf("world model %.12s of run %s: this worker's world model cannot load refreshed versions", hash, run))
	}
	v, err := a.Store.WorldModelVersionByHash(ctx, run, hash)
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalid(fmt.Errorf("world model %.12s of run %s is not recorded", hash, run))
	}
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(v.Location)
	if err != nil {
		return nil, fmt.Errorf("read world model %s: %w", v.Location, err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hash {
		return nil, invalid(fmt.Errorf("world model %s hashes to %x, recorded as %s: the file was damaged or overwritten", v.Location, sum, hash))
	}
	wm, err := rf.Open(b)
	if err != nil {
		return nil, fromPort(fmt.Errorf("open world model %s: %w", v.Location, err))
	}
	a.wmMu.Lock()
	defer a.wmMu.Unlock()
	a.wmLoaded = append([]loadedWM{{hash: hash, wm: wm}}, a.wmLoaded...)
	if len(a.wmLoaded) > wmCacheSize {
		a.wmLoaded = a.wmLoaded[:wmCacheSize]
	}
	return wm, nil
}
