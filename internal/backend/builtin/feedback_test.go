package builtin

import (
	"slices"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
)

// TestFeedbackCard: the card, then the previous program's token bag (summing
// to 1), one-hot its status, one-hot its bucket; zeros at turn 1.
func TestFeedbackCard(t *testing.T) {
	features := []float64{0.5, -1}
	zero, err := feedbackCard(features, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(zero) != 2+FeedbackDim() || !slices.Equal(zero[:2], features) || slices.ContainsFunc(zero[2:], func(v float64) bool { return v != 0 }) {
		t.Errorf("turn 1 input %v: want the features then %d zeros", zero, FeedbackDim())
	}
	const prog = "standardize | ridge alpha=1"
	card, err := feedbackCard(features, &backend.Previous{Text: prog, Status: "ok", Graded: true, Bucket: 3})
	if err != nil {
		t.Fatal(err)
	}
	V, S := program.VocabSize(), len(feedbackStatuses)
	var bag float64
	for _, v := range card[2 : 2+V] {
		bag += v
	}
	if bag < 0.999 || bag > 1.001 {
		t.Errorf("token bag sums to %v, want 1", bag)
	}
	status, bucket := card[2+V:2+V+S], card[2+V+S:]
	if status[slices.Index(feedbackStatuses, "ok")] != 1 || bucket[3] != 1 {
		t.Errorf("status one-hot %v, bucket one-hot %v", status, bucket)
	}
	ungraded, err := feedbackCard(features, &backend.Previous{Text: "(((", Status: backend.StatusUngraded})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(ungraded[2+V+S:], func(v float64) bool { return v != 0 }) || ungraded[2+V+S-1] != 1 {
		t.Errorf("ungraded, unparsable previous attempt: %v", ungraded[2:])
	}
	if _, err := feedbackCard(features, &backend.Previous{Text: prog, Status: "fine"}); err == nil {
		t.Error("unknown status accepted")
	}
}

// TestPolicyReadsPreviousAttempt: a multi-turn policy samples turn 1
// from the task alone (with or without an empty previous list, the same
// programs) and its later turns from the previous attempt (another status
// gives other programs for the same seeds); a single-shot checkpoint
// refuses a previous attempt.
func TestPolicyReadsPreviousAttempt(t *testing.T) {
	b, _, s := newBackend(t)
	ctx := t.Context()
	multi := settings()
	multi.Turns = 3
	ck, err := b.Policy.Init(ctx, backend.InitRequest{Run: "m", Suite: testenv.SuiteSeed, Seed: 7, Settings: multi, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	single, err := b.Policy.Init(ctx, backend.InitRequest{Run: "s", Suite: testenv.SuiteSeed, Seed: 7, Settings: settings(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := policy.Init(PolicyConfig(settings(), suite.VectorLen), policy.ProgramGrammar{}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if single.Hash != ref.Hash() || ck.Hash == single.Hash {
		t.Fatalf("single-shot checkpoint %s (want %s), multi-turn %s", single.Hash, ref.Hash(), ck.Hash)
	}
	task := s.Split(suite.Train)[0]
	bt, err := b.Tasks.Task(ctx, testenv.SuiteSeed, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	seeds := make([]uint64, 16)
	for i := range seeds {
		seeds[i] = plan.TurnSampleSeed(7, 0, 0, i, 2)
	}
	texts := func(prev []backend.Previous) []string {
		cs, err := b.Policy.Sample(ctx, backend.SampleRequest{Run: "m", Checkpoint: ck, Task: bt, Seeds: seeds, Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Text
		}
		return out
	}
	first := texts(nil)
	prev := func(status string, graded bool, bucket int) []backend.Previous {
		out := make([]backend.Previous, len(seeds))
		for i := range out {
			out[i] = backend.Previous{Text: first[i], Status: status, Graded: graded, Bucket: bucket}
		}
		return out
	}
	good, bad := texts(prev("ok", true, 4)), texts(prev("runtime_error", true, 0))
	if slices.Equal(good, first) && slices.Equal(bad, first) {
		t.Error("turn 2 samples the same programs whatever the previous attempt's outcome")
	}
	if slices.Equal(good, bad) {
		t.Error("a top-bucket and a failed previous attempt give the same programs")
	}
	if !slices.Equal(texts(prev("ok", true, 4)), good) {
		t.Error("the same previous attempts and seeds gave other programs")
	}
	if _, err := b.Policy.Sample(ctx, backend.SampleRequest{Run: "s", Checkpoint: single, Task: bt, Seeds: seeds,
		Previous: prev("ok", true, 4)}); !backend.IsPermanent(err) {
		t.Errorf("single-shot checkpoint with a previous attempt: %v, want a permanent error", err)
	}
	// An update on a 3-turn datum trains every turn: the checkpoint moves.
	d := backend.Datum{Task: bt, Text: first[0], Advantage: 1, Weight: 1, Turns: []backend.DatumTurn{
		{Text: first[0]}, {Text: good[0], Previous: &prev("ok", true, 4)[0]}}}
	d2 := d
	d2.Sample, d2.Advantage = 1, -1
	next, stats, err := b.Policy.Update(ctx, backend.UpdateRequest{Run: "m", Step: 0, Base: ck, Batch: []backend.Datum{d, d2}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if next.Hash == ck.Hash || stats.Trajectories != 4 {
		t.Errorf("update of two 2-turn trajectories: %+v, %d examples, want a new checkpoint from 4 examples", next, stats.Trajectories)
	}
}

// TestOffPolicyUpdateOfTurns: the update of a multi-turn batch sampled from
// an older checkpoint (an asynchronous pipeline's, UpdateRequest.Sampler)
// weighs every turn's tokens by their ratio against the sampling logprobs
// the sampler drew them with under that turn's own input (the card and the
// previous attempt): the same checkpoint and statistics as
// policy.UpdateOffPolicy of examples built by hand from the sampler's own
// draws (Sample.TokenLogProbs), with a ratio other than 1.
func TestOffPolicyUpdateOfTurns(t *testing.T) {
	b, _, s := newBackend(t)
	ctx := t.Context()
	multi := settings()
	multi.Turns = 3
	ck0, err := b.Policy.Init(ctx, backend.InitRequest{Run: "m", Suite: testenv.SuiteSeed, Seed: 7, Settings: multi, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	task := s.Split(suite.Train)[0]
	bt, err := b.Tasks.Task(ctx, testenv.SuiteSeed, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	pol0, err := policy.Load(ck0.Location, policy.ProgramGrammar{})
	if err != nil {
		t.Fatal(err)
	}
	// Two trajectories of two turns from checkpoint 0, drawn as Sample
	// draws them (turn 2 from turn 1's program and its outcome).
	type drawn struct {
		card []float64
		smp  policy.Sample
		text string
		prev *backend.Previous
	}
	var data []backend.Datum
	var draws [][]drawn
	for i, adv := range []float64{1, -1} {
		var turns []drawn
		var prev *backend.Previous
		for turn := 1; turn <= 2; turn++ {
			card, err := feedbackCard(bt.Features, prev)
			if err != nil {
				t.Fatal(err)
			}
			seed := plan.TurnSampleSeed(7, 1, 0, i, turn)
			smp, text, err := pol0.SampleProgram(card, seed)
			if err != nil {
				t.Fatal(err)
			}
			var pv []backend.Previous
			if prev != nil {
				pv = []backend.Previous{*prev}
			}
			cs, err := b.Policy.Sample(ctx, backend.SampleRequest{Run: "m", Checkpoint: ck0, Task: bt, Seeds: []uint64{seed}, Previous: pv})
			if err != nil || cs[0].Text != text {
				t.Fatalf("turn %d: the backend sampled %v (%v), the policy %q", turn, cs, err, text)
			}
			turns = append(turns, drawn{card, smp, text, prev})
			prev = &backend.Previous{Text: text, Status: "ok", Graded: true, Bucket: 1 + 2*i}
		}
		d := backend.Datum{Task: bt, Sample: i, Text: turns[0].text, Advantage: adv, Weight: 1}
		for _, tr := range turns {
			d.Turns = append(d.Turns, backend.DatumTurn{Text: tr.text, Previous: tr.prev})
		}
		data, draws = append(data, d), append(draws, turns)
	}
	// Checkpoint 1, then step 1's update of the batch drawn from 0.
	ck1, _, err := b.Policy.Update(ctx, backend.UpdateRequest{Run: "m", Step: 0, Base: ck0, Batch: data, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ck2, stats, err := b.Policy.Update(ctx, backend.UpdateRequest{Run: "m", Step: 1, Base: ck1, Batch: data, Dir: t.TempDir(),
		Sampler: &ck0, RatioClip: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	pol1, err := policy.Load(ck1.Location, policy.ProgramGrammar{})
	if err != nil {
		t.Fatal(err)
	}
	var examples []policy.Example
	for i, turns := range draws {
		for _, tr := range turns {
			lq, err := pol0.TokenLogProbs(tr.card, tr.smp.Tokens)
			if err != nil || !slices.Equal(lq, tr.smp.TokenLogProbs) {
				t.Fatalf("sampler's logprobs recomputed %v (%v), drawn with %v", lq, err, tr.smp.TokenLogProbs)
			}
			examples = append(examples, policy.Example{Card: tr.card, Tokens: tr.smp.Tokens, Advantage: data[i].Advantage,
				Weight: 1, SampleLogProbs: tr.smp.TokenLogProbs})
		}
	}
	want := pol1.Clone()
	wstats, err := want.UpdateOffPolicy(examples, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	if ck2.Hash != want.Hash() || stats.RatioMean != wstats.RatioMean || stats.RatioMax != wstats.RatioMax {
		t.Fatalf("off-policy update of turns: checkpoint %s, ratio mean %v max %v; want %s, %v, %v", ck2.Hash, stats.RatioMean,
			stats.RatioMax, want.Hash(), wstats.RatioMean, wstats.RatioMax)
	}
	if stats.RatioMean == 1 || stats.Trajectories != 4 {
		t.Errorf("ratio mean %v over %d examples: want a ratio other than 1 over the 4 turns", stats.RatioMean, stats.Trajectories)
	}
	t.Logf("2 trajectories x 2 turns from checkpoint 0 into checkpoint 1: ratio mean %.4f, max %.4f", stats.RatioMean, stats.RatioMax)
}
