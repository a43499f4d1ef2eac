package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/fusion"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
)

// UpdateRequest asks for checkpoint s+1 from checkpoint s and the step's
// fused batch.
type UpdateRequest struct {
	RunID      string        `json:"run_id"`
	Step       int           `json:"step"`
	SuiteSeed  uint64        `json:"suite_seed"`
	Checkpoint CheckpointRef `json:"checkpoint"`
	// Sampled is the checkpoint the step's rollouts were sampled from when
	// it is an older one than Checkpoint (an asynchronous pipeline's
	// max(0, step − d), docs/design.md, "Asynchronous pipeline (design)");
	// nil for the sequential step. RatioClip is then ε of the clipped
	// importance ratio (pipeline.clip). Both are left out of the JSON when
	// unset, so recorded requests keep their bytes.
	Sampled   *CheckpointRef `json:"sampled,omitempty"`
	RatioClip float64        `json:"ratio_clip,omitempty"`
}

// Validate checks the request: the checkpoint must be the step's, and a
// sampling checkpoint one of the runconfig.MaxOffPolicy before it.
func (r UpdateRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	if r.Checkpoint.Version != r.Step {
		return fmt.Errorf("checkpoint version %d at step %d: want the step's checkpoint", r.Checkpoint.Version, r.Step)
	}
	if err := r.Checkpoint.validate(); err != nil {
		return err
	}
	if r.Sampled == nil {
		if r.RatioClip != 0 {
			return fmt.Errorf("ratio clip %v without a sampling checkpoint", r.RatioClip)
		}
		return nil
	}
	if v := r.Sampled.Version; v >= r.Step || v < r.Step-runconfig.MaxOffPolicy {
		return fmt.Errorf("sampled from checkpoint %d at step %d: want one of the %d before the step's (none: the step's own)",
			v, r.Step, runconfig.MaxOffPolicy)
	}
	if !(r.RatioClip > 0 && r.RatioClip < 1) {
		return fmt.Errorf("ratio clip %v: want in (0, 1)", r.RatioClip)
	}
	return r.Sampled.validate()
}

// UpdateResponse names checkpoint s+1.
type UpdateResponse struct {
	Checkpoint CheckpointRef       `json:"checkpoint"`
	Stats      backend.UpdateStats `json:"stats"`
	// Reused is true when checkpoint s+1 was already recorded (a retry).
	Reused bool `json:"reused"`
}

// Update applies the step's fused GRPO update to checkpoint s and records
// checkpoint s+1. If s+1 is recorded it is returned as is; otherwise it is
// recomputed from the stored checkpoint s, never from a live policy, so a
// retried Update cannot apply a gradient twice. It heartbeats while the
// gradient is computed.
func (a *Activities) Update(ctx context.Context, req UpdateRequest) (UpdateResponse, error) {
	if err := req.Validate(); err != nil {
		return UpdateResponse{}, invalid(err)
	}
	next := req.Step + 1
	if c, err := a.Store.Checkpoint(ctx, req.RunID, next); err == nil {
		var stats backend.UpdateStats
		if err := readJSON(a.updateStatsPath(req.RunID, next), &stats); err != nil && !errors.Is(err, os.ErrNotExist) {
			return UpdateResponse{}, fmt.Errorf("read update stats: %w", err)
		}
		return UpdateResponse{Checkpoint: CheckpointRef{Version: next, Hash: c.Hash}, Stats: stats, Reused: true}, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return UpdateResponse{}, err
	}
	base, err := a.checkpoint(ctx, req.RunID, req.Checkpoint)
	if err != nil {
		return UpdateResponse{}, err
	}
	var sampler *backend.Checkpoint
	if req.Sampled != nil {
		c, err := a.checkpoint(ctx, req.RunID, *req.Sampled)
		if err != nil {
			return UpdateResponse{}, err
		}
		sampler = &c
	}
	var batch fusion.Batch
	if err := readJSON(a.batchPath(req.RunID, req.Step), &batch); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return UpdateResponse{}, invalid(fmt.Errorf("step %d of %s has no fused batch: Fuse runs before Update", req.Step, req.RunID))
		}
		return UpdateResponse{}, fmt.Errorf("read batch: %w", err)
	}
	data, err := a.data(ctx, req.RunID, req.SuiteSeed, batch)
	if err != nil {
		return UpdateResponse{}, err
	}
	if err := a.withCompletions(ctx, req.RunID, req.Step, data); err != nil {
		return UpdateResponse{}, err
	}
	if err := a.withTurns(ctx, req.RunID, req.Step, data); err != nil {
		return UpdateResponse{}, err
	}
	settings, err := a.runSettings(ctx, req.RunID)
	if err != nil {
		return UpdateResponse{}, err
	}
	policy, err := a.policyOf(ctx, req.RunID)
	if err != nil {
		return UpdateResponse{}, err
	}
	var ck backend.Checkpoint
	var stats backend.UpdateStats
	err = withHeartbeat(ctx, func() error {
		var err error
		ck, stats, err = policy.Update(ctx, backend.UpdateRequest{Run: req.RunID, Step: req.Step, Base: base, Batch: data,
			Settings: settings, Dir: a.checkpointDir(req.RunID), Key: backend.StepKey(req.RunID, req.Step),
			Sampler: sampler, RatioClip: req.RatioClip})
		return err
	})
	if err != nil {
		return UpdateResponse{}, fromPort(err)
	}
	if ck.Version != next {
		return UpdateResponse{}, invalid(fmt.Errorf("update step %d: the policy returned checkpoint %d, want %d", req.Step, ck.Version, next))
	}
	if err := writeJSON(a.updateStatsPath(req.RunID, next), stats); err != nil {
		return UpdateResponse{}, fmt.Errorf("write update stats: %w", err)
	}
	ref := CheckpointRef{Version: next, Hash: ck.Hash}
	err = a.Store.PutCheckpoint(ctx, store.Checkpoint{Run: req.RunID, Version: next, Hash: ref.Hash, Location: ck.Location, State: ck.State})
	if errors.Is(err, store.ErrConflict) {
		return UpdateResponse{}, invalid(err)
	}
	if err != nil {
		return UpdateResponse{}, err
	}
	a.log().Info("checkpoint", logRun(req.RunID), logStep(req.Step), zapVersion(next), zapHash(ref.Hash))
	return UpdateResponse{Checkpoint: ref, Stats: stats}, nil
}

// data turns a fused batch into the policy port's batch, every item with
// its task.
func (a *Activities) data(ctx context.Context, run string, suiteSeed uint64, b fusion.Batch) ([]backend.Datum, error) {
	tasks := map[string]backend.Task{}
	out := make([]backend.Datum, len(b.Items))
	for i, it := range b.Items {
		task, ok := tasks[it.TaskID]
		if !ok {
			var err error
			if task, err = a.task(ctx, run, suiteSeed, it.TaskID); err != nil {
				return nil, err
			}
			tasks[it.TaskID] = task
		}
		out[i] = backend.Datum{Task: task, Group: it.Group, Sample: it.Sample, Text: it.Program,
			Advantage: it.Advantage, Weight: it.Weight}
	}
	return out, nil
}

// withCompletions fills in the token ids and logprobs a remote policy
// sampled for the step's trajectories (store.Completion); the built-in
// policy re-encodes the text and needs none, so its runs skip the read.
func (a *Activities) withCompletions(ctx context.Context, run string, step int, data []backend.Datum) error {
	b, err := a.runBackendsOf(ctx, run)
	if err != nil {
		return err
	}
	if b.policy == "" || b.policy == backend.Builtin {
		return nil
	}
	ts, err := a.Store.StepTrajectories(ctx, run, step)
	if err != nil {
		return err
	}
	type gs struct{ group, sample int }
	byKey := make(map[gs]*store.Completion, len(ts))
	for _, t := range ts {
		byKey[gs{t.Group, t.Sample}] = t.Completion
	}
	for i := range data {
		c := byKey[gs{data[i].Group, data[i].Sample}]
		if c == nil {
			if data[i].Weight == 0 {
				continue
			}
			return invalid(fmt.Errorf("%s: policy.backend %q needs the completion's tokens and logprobs, and none were stored",
				backend.SampleKey(run, step, data[i].Group, data[i].Sample), b.policy))
		}
		data[i].Tokens, data[i].LogProbs = c.Tokens, c.LogProbs
	}
	return nil
}

// withTurns fills in the turns of a multi-turn step's trajectories: each
// turn's action and the previous attempt it was sampled from. A
// single-shot step has no turn rows and skips this after one read of its
// configuration.
func (a *Activities) withTurns(ctx context.Context, run string, step int, data []backend.Datum) error {
	cfg, err := a.runConfig(ctx, run)
	if err != nil {
		return err
	}
	if !cfg.Trajectory.MultiTurn() {
		return nil
	}
	ts, err := a.Store.StepTurns(ctx, run, step)
	if err != nil {
		return err
	}
	type gs struct{ group, sample int }
	byKey := map[gs][]store.Turn{}
	for _, t := range ts {
		k := gs{t.Group, t.Sample}
		byKey[k] = append(byKey[k], t)
	}
	for i := range data {
		turns := byKey[gs{data[i].Group, data[i].Sample}]
		if len(turns) == 0 {
			continue // a group without an environment (mode anchor's others): one action, excluded
		}
		data[i].Turns = make([]backend.DatumTurn, len(turns))
		for j, t := range turns {
			data[i].Turns[j] = backend.DatumTurn{Text: t.Action, Exchange: exchangeOf(t)}
			if j == len(turns)-1 {
				// The sequence ends with the last action: what answered
				// it is never an input.
				data[i].Turns[j].Observation = ""
			}
			if j > 0 {
				if turns[j-1].Answer == nil {
					return invalid(fmt.Errorf("%s is not answered", turns[j-1].TurnKey))
				}
				p := previousOf(turns[j-1])
				data[i].Turns[j].Previous = &p
			}
		}
	}
	return nil
}

// runSettings returns the policy settings of a run's recorded
// configuration.
func (a *Activities) runSettings(ctx context.Context, run string) (backend.PolicySettings, error) {
	cfg, err := a.runConfig(ctx, run)
	if err != nil {
		return backend.PolicySettings{}, err
	}
	return policySettings(cfg), nil
}

// withHeartbeat runs fn, heartbeating every heartbeatEvery until it returns.
func withHeartbeat(ctx context.Context, fn func() error) error {
	return beating(ctx, heartbeatEvery, fn)
}

// beating runs fn heartbeating (without details) every interval.
func beating(ctx context.Context, every time.Duration, fn func() error) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				heartbeat(ctx)
			}
		}
	}()
	heartbeat(ctx)
	return fn()
}
