package tinkerserve_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/tokenizer"
	"github.com/wmrl/wmrl/internal/turns"
)

// TestTurns: a multi-turn run's model (wmrl_turns 3) samples turn t from
// the token sequence so far (the prompt, each earlier action and its
// observation), deterministically, and conditioned on the observation;
// its update trains each trajectory as one datum of three actions, whose
// logprobs at the update are the sampling ones (importance ratio 1: every
// action is scored under the input it was sampled from). A single-shot
// model refuses a sequence with earlier turns.
func TestTurns(t *testing.T) {
	e := newEnv(t, nil, tinkerserve.Options{StrictSeq: true})
	p := e.client(t, &tinker.MemJournal{}, "")
	ctx := t.Context()
	task := trainTask(t)
	set := settings
	set.Turns = 3
	ck, err := p.Init(ctx, backend.InitRequest{Run: "turns", Suite: testenv.SuiteSeed, Seed: initSeed, Settings: set})
	if err != nil {
		t.Fatal(err)
	}
	obs := func(status string, score float64) string {
		text, err := turns.Render(turns.Answer{Graded: true, Status: status, Score: score, Feedback: turns.Describe(status)}, 200, tokenizer.Bytes{})
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	n := len(seeds)
	hist := make([][]backend.Exchange, n)
	var all [][]backend.Completion
	for turn := 1; turn <= 3; turn++ {
		req := backend.SampleRequest{Run: "turns", Checkpoint: ck, Task: task, Settings: set, Key: backend.SampleKey("turns", 0, 0, -1)}
		for i := range n {
			req.Seeds = append(req.Seeds, seeds[i]+uint64(turn)<<40)
		}
		if turn > 1 {
			req.History = hist
		}
		comps, err := p.Sample(ctx, req)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		again, err := p.Sample(ctx, req)
		if err != nil || !reflect.DeepEqual(again, comps) {
			t.Fatalf("turn %d sampled again: %v; not the same completions", turn, err)
		}
		if turn == 2 {
			// Another observation of turn 1 is another input.
			other := make([][]backend.Exchange, n)
			for i := range other {
				other[i] = []backend.Exchange{{Tokens: hist[i][0].Tokens, LogProbs: hist[i][0].LogProbs, Observation: obs("invalid_program", 0)}}
			}
			req.History = other
			diff, err := p.Sample(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if reflect.DeepEqual(diff, comps) {
				t.Error("turn 2 sampled the same completions and logprobs after another observation of turn 1")
			}
		}
		all = append(all, comps)
		for i, c := range comps {
			hist[i] = append(hist[i], backend.Exchange{Tokens: c.Tokens, LogProbs: c.LogProbs,
				Observation: obs([]string{"ok", "runtime_error", "invalid_output", "ok"}[(i+turn)%4], 0.3+0.2*float64((i+turn)%3))})
		}
	}
	batch := make([]backend.Datum, n)
	for i := range n {
		d := backend.Datum{Task: task, Sample: i, Text: all[0][i].Text, Tokens: all[0][i].Tokens, LogProbs: all[0][i].LogProbs,
			Advantage: []float64{1, -1, 0.5, -0.5}[i], Weight: 0.25}
		for j := range 3 {
			x := hist[i][j]
			if j == 2 {
				x.Observation = ""
			}
			d.Turns = append(d.Turns, backend.DatumTurn{Text: all[j][i].Text, Exchange: x})
		}
		batch[i] = d
	}
	next, stats, err := p.Update(ctx, backend.UpdateRequest{Run: "turns", Step: 0, Base: ck, Batch: batch, Settings: set, Key: backend.StepKey("turns", 0)})
	if err != nil {
		t.Fatal(err)
	}
	if next.Hash == ck.Hash || stats.Trajectories != n || math.Abs(stats.RatioMean-1) > 1e-9 || math.Abs(stats.RatioMax-1) > 1e-9 || !(stats.GradNorm > 0) {
		t.Fatalf("update: %+v, stats %+v; want a new checkpoint, %d trajectories, importance ratio 1, a gradient", next, stats, n)
	}
	t.Logf("3-turn update: grad norm %.4g, objective %.4g, ratio mean %v max %v", stats.GradNorm, stats.Objective, stats.RatioMean, stats.RatioMax)

	// A single-shot model takes no earlier turns.
	single, err := p.Init(ctx, backend.InitRequest{Run: "single", Suite: testenv.SuiteSeed, Seed: initSeed, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Sample(ctx, backend.SampleRequest{Run: "single", Checkpoint: single, Task: task, Seeds: seeds[:1], Settings: settings,
		Key: "single/turn-2", History: hist[:1]})
	if err == nil || !strings.Contains(err.Error(), "single-shot policy") {
		t.Fatalf("single-shot model sampled from earlier turns: %v", err)
	}
}
