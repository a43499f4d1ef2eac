package activities

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/mode"
)

// TestUpdateSampledFromOlderCheckpoint: an Update naming an older
// sampling checkpoint (UpdateRequest.Sampled, the asynchronous pipeline's)
// reaches the policy with it and the clip: the update of step 0 (no
// sampler) is the sequential run's, the later ones differ from it and
// report the importance ratio's mean and max, which a retried Update
// returns again from the stored stats; without a sampler the stats have no
// ratio. (Generate samples from the step's own checkpoint here, so the
// ratios are those of checkpoint s against s−1 on its samples.)
func TestUpdateSampledFromOlderCheckpoint(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	cfg.Mode = mode.GRPO
	cfg.Steps = 3
	seq, seqUps := driveRunSampled(t, a, "sequential", cfg, nil, 0)
	older := func(s int, cks []CheckpointRef) *CheckpointRef {
		if s == 0 {
			return nil
		}
		return &cks[s-1]
	}
	off, ups := driveRunSampled(t, a, "off-policy", cfg, older, 0.2)
	if seq[0] != off[0] || seq[1] != off[1] {
		t.Errorf("checkpoints 0 and 1 %v, want the sequential run's %v", off[:2], seq[:2])
	}
	if seq[2] == off[2] {
		t.Errorf("checkpoint 2 %s is the sequential run's: the sampling checkpoint did nothing", off[2])
	}
	for s, up := range seqUps {
		if up.Stats.RatioMean != 0 || up.Stats.RatioMax != 0 {
			t.Errorf("sequential step %d: ratio mean %v, max %v; want none", s, up.Stats.RatioMean, up.Stats.RatioMax)
		}
	}
	if st := ups[0].Stats; st.RatioMean != 0 {
		t.Errorf("step 0 (no sampler): ratio mean %v, want none", st.RatioMean)
	}
	for s := 1; s < cfg.Steps; s++ {
		st := ups[s].Stats
		if st.RatioMean <= 0 || st.RatioMax < st.RatioMean {
			t.Errorf("step %d: ratio mean %v, max %v; want a ratio", s, st.RatioMean, st.RatioMax)
		}
		t.Logf("step %d: ratio mean %.4f, max %.4f", s, st.RatioMean, st.RatioMax)
	}
	// A retry of step 2's Update returns the recorded checkpoint and stats.
	again, err := a.Update(ctx, UpdateRequest{RunID: "off-policy", Step: 2, SuiteSeed: cfg.SuiteSeed,
		Checkpoint: ups[1].Checkpoint, Sampled: &ups[0].Checkpoint, RatioClip: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || again.Checkpoint != ups[2].Checkpoint || again.Stats != ups[2].Stats {
		t.Errorf("retried Update = %+v, want the recorded %+v", again, ups[2])
	}
}

// TestGenerateFromOlderCheckpoint: Generate samples step 1 from checkpoint
// 0 only in a run whose pipeline does (pipeline.max_off_policy 1); a
// sequential run refuses it, naming the checkpoint the step samples from.
func TestGenerateFromOlderCheckpoint(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	for _, d := range []int{0, 1} {
		cfg := tinyConfig(t)
		cfg.Pipeline.MaxOffPolicy = d
		run := fmt.Sprintf("older-%d", d)
		created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Generate(ctx, GenerateRequest{RunID: run, Step: 1, Group: 0, Samples: cfg.Samples, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint})
		switch {
		case d == 1 && err != nil:
			t.Errorf("d = 1: step 1 from checkpoint 0: %v", err)
		case d == 0 && (err == nil || !strings.Contains(err.Error(), "samples step 1 from checkpoint 1")):
			t.Errorf("d = 0: step 1 from checkpoint 0: %v, want refused", err)
		}
	}
}
