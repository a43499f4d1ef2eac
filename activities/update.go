package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/store"
)

// UpdateRequest asks for checkpoint s+1 from checkpoint s and the step's
// fused batch.
type UpdateRequest struct {
	RunID      string        `json:"run_id"`
	Step       int           `json:"step"`
	SuiteSeed  uint64        `json:"suite_seed"`
	Checkpoint CheckpointRef `json:"checkpoint"`
}

// Validate checks the request: the checkpoint must be the step's.
func (r UpdateRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	if r.Checkpoint.Version != r.Step {
		return fmt.Errorf("checkpoint version %d at step %d: want the step's checkpoint", r.Checkpoint.Version, r.Step)
	}
	return r.Checkpoint.validate()
}

// UpdateResponse names checkpoint s+1.
type UpdateResponse struct {
	Checkpoint CheckpointRef      `json:"checkpoint"`
	Stats      policy.UpdateStats `json:"stats"`
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
		var stats policy.UpdateStats
		if err := readJSON(a.updateStatsPath(req.RunID, next), &stats); err != nil && !errors.Is(err, os.ErrNotExist) {
			return UpdateResponse{}, fmt.Errorf("read update stats: %w", err)
		}
		return UpdateResponse{Checkpoint: CheckpointRef{Version: next, Hash: c.Hash}, Stats: stats, Reused: true}, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return UpdateResponse{}, err
	}
	base, err := a.loadPolicy(ctx, req.RunID, req.Checkpoint)
	if err != nil {
		return UpdateResponse{}, err
	}
	if int(base.Step()) != req.Step {
		return UpdateResponse{}, invalid(fmt.Errorf("checkpoint %d holds a policy after %d updates", req.Step, base.Step()))
	}
	var batch Batch
	if err := readJSON(a.batchPath(req.RunID, req.Step), &batch); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return UpdateResponse{}, invalid(fmt.Errorf("step %d of %s has no fused batch: Fuse runs before Update", req.Step, req.RunID))
		}
		return UpdateResponse{}, fmt.Errorf("read batch: %w", err)
	}
	examples, err := a.examples(ctx, req.SuiteSeed, batch)
	if err != nil {
		return UpdateResponse{}, err
	}
	p := base.Clone()
	var stats policy.UpdateStats
	err = withHeartbeat(ctx, func() error {
		var err error
		stats, err = p.Update(examples)
		return err
	})
	if err != nil {
		return UpdateResponse{}, invalid(fmt.Errorf("update step %d: %w", req.Step, err))
	}
	if err := mkdir(a.checkpointDir(req.RunID)); err != nil {
		return UpdateResponse{}, err
	}
	path, err := p.Save(a.checkpointDir(req.RunID))
	if err != nil {
		return UpdateResponse{}, err
	}
	if err := writeJSON(a.updateStatsPath(req.RunID, next), stats); err != nil {
		return UpdateResponse{}, fmt.Errorf("write update stats: %w", err)
	}
	ref := CheckpointRef{Version: next, Hash: p.Hash()}
	err = a.Store.PutCheckpoint(ctx, store.Checkpoint{Run: req.RunID, Version: next, Hash: ref.Hash, Location: path})
	if errors.Is(err, store.ErrConflict) {
		return UpdateResponse{}, invalid(err)
	}
	if err != nil {
		return UpdateResponse{}, err
	}
	a.log().Info("checkpoint", logRun(req.RunID), logStep(req.Step), zapVersion(next), zapHash(ref.Hash))
	return UpdateResponse{Checkpoint: ref, Stats: stats}, nil
}

// examples turns a fused batch into the policy's update examples. Ungraded
// trajectories (weight 0) are left out. When nothing in the step was graded
// every trajectory enters with advantage 0 and weight 1: a zero-gradient
// step that still advances the checkpoint version.
func (a *Activities) examples(ctx context.Context, suiteSeed uint64, b Batch) ([]policy.Example, error) {
	s, err := a.suite(ctx, suiteSeed)
	if err != nil {
		return nil, err
	}
	var total float64
	for _, it := range b.Items {
		total += it.Weight
	}
	var out []policy.Example
	for _, it := range b.Items {
		w, adv := it.Weight, it.Advantage
		if total == 0 {
			w, adv = 1, 0
		}
		if w == 0 {
			continue
		}
		task, err := s.Task(it.TaskID)
		if err != nil {
			return nil, invalid(err)
		}
		prog, err := program.Parse(it.Program)
		if err != nil {
			return nil, invalid(fmt.Errorf("group %d sample %d: %w", it.Group, it.Sample, err))
		}
		tokens, err := program.Encode(prog)
		if err != nil {
			return nil, invalid(fmt.Errorf("group %d sample %d: %w", it.Group, it.Sample, err))
		}
		out = append(out, policy.Example{Card: task.Card.Vector(), Tokens: tokens, Advantage: adv, Weight: w})
	}
	if len(out) == 0 {
		return nil, invalid(fmt.Errorf("step %d of %s has an empty batch", b.Step, b.Run))
	}
	return out, nil
}

// withHeartbeat runs fn, heartbeating every heartbeatEvery until it returns.
func withHeartbeat(ctx context.Context, fn func() error) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(heartbeatEvery)
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
