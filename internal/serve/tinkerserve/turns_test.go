package tinkerserve_test

import (
	"encoding/json"
	"math"
	"net/http"
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
	batch := threeTurns(t, p, ck, set, task)
	n := len(batch)
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
		Key: "single/turn-2", History: [][]backend.Exchange{{batch[0].Turns[0].Exchange}}})
	if err == nil || !strings.Contains(err.Error(), "single-shot policy") {
		t.Fatalf("single-shot model sampled from earlier turns: %v", err)
	}
}

// threeTurns samples three turns of len(seeds) trajectories from ck,
// answering each with a rendered observation, and returns them as a batch
// of 3-turn datums.
func threeTurns(t *testing.T, p *tinker.Policy, ck backend.Checkpoint, set backend.PolicySettings, task backend.Task) []backend.Datum {
	t.Helper()
	ctx := t.Context()
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
	return batch
}

// TestTurnsWire: a 3-turn datum sent as protobuf is the same request as
// its JSON (same loss outputs and metrics on two models of the same seed),
// and the server refuses, naming the field, a datum with an advantage on
// an observation position, one ending with an observation, one whose
// observation is not a rendered one, and a sampling prompt that ends with
// an action.
func TestTurnsWire(t *testing.T) {
	e := newEnv(t, nil, tinkerserve.Options{})
	ctx := t.Context()
	p := e.client(t, &tinker.MemJournal{}, "")
	task := trainTask(t)
	set := settings
	set.Turns = 3
	var models []string
	var cks []backend.Checkpoint
	for _, run := range []string{"json", "proto"} {
		ck, err := p.Init(ctx, backend.InitRequest{Run: run, Suite: testenv.SuiteSeed, Seed: 1, Settings: set})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := tinker.ModelOf(ck.Location)
		models, cks = append(models, m), append(cks, ck)
	}
	batch := threeTurns(t, p, cks[0], set, task)
	for i := range batch {
		// float32 logprobs, so both encodings carry the same.
		for j := range batch[i].Turns {
			batch[i].Turns[j].LogProbs = asFloat32(batch[i].Turns[j].LogProbs)
		}
	}
	datums, err := tinker.BuildDatums(tinker.BuiltinTokenizer{}, batch)
	if err != nil {
		t.Fatal(err)
	}
	if fb := forwardBackwardBoth(t, e.srv.URL, models[0], models[1], datums); fb.out.Metrics["logprob_diff:max"] > 1e-5 {
		t.Fatalf("JSON body's result %s\nprotobuf body's %s", fb.jsonRes, fb.pbRes)
	}

	refused := func(what, path string, body any, field string) {
		t.Helper()
		st, _, out := exchange(t, e.srv.URL, path, "application/json", "", []byte(must(body)))
		var er struct {
			Field string `json:"field"`
		}
		_ = json.Unmarshal(out, &er)
		if st != http.StatusBadRequest || er.Field != field {
			t.Errorf("%s: HTTP %d %s, want 400 naming %s", what, st, out, field)
		}
	}
	fb := func(d tinker.Datum) tinker.ForwardBackwardRequest {
		s := int64(2000)
		return tinker.ForwardBackwardRequest{ModelID: models[0], SeqID: &s, ForwardBackwardInput: tinker.ForwardBackwardInput{Data: []tinker.Datum{d}, LossFn: tinker.LossImportanceSampling}}
	}
	clone := func(d tinker.Datum) tinker.Datum {
		c := tinker.Datum{ModelInput: tinker.ModelInput{Chunks: []tinker.ModelInputChunk{{Type: tinker.ChunkEncodedText,
			Tokens: append([]int(nil), d.ModelInput.Chunks[0].Tokens...)}}}, LossFnInputs: map[string]tinker.TensorData{}}
		for k, v := range d.LossFnInputs {
			v.Data = append([]float64(nil), v.Data...)
			c.LossFnInputs[k] = v
		}
		return c
	}
	d0 := datums[0]
	toks := d0.ModelInput.Chunks[0].Tokens
	// The first observation's first byte: the token after turn 1's action.
	prompt, _ := tinker.BuiltinTokenizer{}.Prompt(task)
	o1 := len(prompt) + len(batch[0].Turns[0].Tokens)
	if toks[o1] >= tinker.ProgramTokenOffset || toks[o1-1] < tinker.ProgramTokenOffset {
		t.Fatalf("token %d is not the first observation's first byte: %v", o1, toks)
	}
	d := clone(d0)
	d.LossFnInputs["advantages"].Data[o1] = 0.5 // predicts an observation byte
	refused("advantage on an observation", tinker.PathForwardBackward, fb(d), "forward_backward_input.data[0].loss_fn_inputs.advantages")
	// Cut after the first observation's bytes: the datum ends with one.
	d = clone(d0)
	cut := o1 + 3
	d.ModelInput.Chunks[0].Tokens = d.ModelInput.Chunks[0].Tokens[:cut]
	for k, v := range d.LossFnInputs {
		v.Data, v.Shape = v.Data[:cut], []int{cut}
		d.LossFnInputs[k] = v
	}
	refused("ends with an observation", tinker.PathForwardBackward, fb(d), "forward_backward_input.data[0].model_input")
	// An observation that is not a rendered one.
	d = clone(d0)
	d.ModelInput.Chunks[0].Tokens[o1] = 'X'
	d.LossFnInputs["target_tokens"].Data[o1-1] = 'X'
	refused("not an observation", tinker.PathForwardBackward, fb(d), "forward_backward_input.data[0].model_input")
	// A sampling prompt ending with an action.
	seed := int64(3)
	refused("prompt ends with an action", tinker.PathAsample, tinker.SampleRequest{NumSamples: 1, ModelPath: cks[0].Location,
		Prompt:         tinker.ModelInput{Chunks: []tinker.ModelInputChunk{{Type: tinker.ChunkEncodedText, Tokens: toks[:o1]}}},
		SamplingParams: tinker.SamplingParams{Seed: &seed, Temperature: 1}}, "prompt")
}
