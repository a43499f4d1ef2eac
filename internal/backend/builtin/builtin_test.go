package builtin

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/tokenizer"
	"github.com/wmrl/wmrl/internal/turns"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// Compliance: each adapter satisfies its port.
var (
	_ backend.TaskSource = (*Tasks)(nil)
	_ backend.Policy     = (*Policy)(nil)
	_ backend.WorldModel = (*WorldModel)(nil)
	_ backend.Grader     = (*Grader)(nil)
)

func newBackend(t *testing.T) (Backend, *testenv.InProcess, *suite.Suite) {
	t.Helper()
	s, err := testenv.SmallSuite()
	if err != nil {
		t.Fatal(err)
	}
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	sb := &testenv.InProcess{}
	return New(testenv.Suites{}, wm, sb), sb, s
}

func settings() backend.PolicySettings {
	c := runconfig.Default()
	return backend.PolicySettings{LearningRate: c.Policy.LearningRate, KLCoef: c.Policy.KLCoef, Hidden: c.Policy.Hidden}
}

func TestTasksAreTheSuites(t *testing.T) {
	b, _, s := newBackend(t)
	ctx := t.Context()
	for _, split := range []backend.Split{backend.Train, backend.HeldOut} {
		got, err := b.Tasks.Tasks(ctx, testenv.SuiteSeed, split)
		if err != nil {
			t.Fatal(err)
		}
		want := s.Split(suite.Split(split))
		if len(got) != len(want) || len(got) == 0 {
			t.Fatalf("%s: %d tasks, want %d", split, len(got), len(want))
		}
		for i, g := range got {
			if g.ID != want[i].ID || g.Split != split || g.Suite != testenv.SuiteSeed || !slices.Equal(g.Features, want[i].Card.Vector()) {
				t.Errorf("%s task %d = %+v, want %s", split, i, g, want[i].ID)
			}
		}
	}
	if _, err := b.Tasks.Task(ctx, testenv.SuiteSeed, "no-such-task"); err == nil || !backend.IsPermanent(err) {
		t.Errorf("unknown task: %v, want a permanent error", err)
	}
	// A suite that cannot be loaded may load later: retried.
	if _, err := b.Tasks.Tasks(ctx, testenv.SuiteSeed+1, backend.Train); err == nil || backend.IsPermanent(err) {
		t.Errorf("unknown suite: %v, want a retryable error", err)
	}
}

// The adapter gives exactly what the policy package gives: the same initial
// checkpoint, the same programs for the same seeds, the same update.
func TestPolicyIsThePolicyPackage(t *testing.T) {
	b, _, s := newBackend(t)
	ctx := t.Context()
	dir := t.TempDir()
	const seed = 42
	ck, err := b.Policy.Init(ctx, backend.InitRequest{Run: "r", Suite: testenv.SuiteSeed, Seed: plan.InitSeed(seed),
		Settings: settings(), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := policy.Init(PolicyConfig(settings(), suite.VectorLen), policy.ProgramGrammar{}, plan.InitSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Version != 0 || ck.Hash != ref.Hash() || !strings.HasPrefix(ck.Location, dir) {
		t.Fatalf("Init = %+v, want version 0, hash %s, in %s", ck, ref.Hash(), dir)
	}
	task := s.Split(suite.Train)[0]
	bt, err := b.Tasks.Task(ctx, testenv.SuiteSeed, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	seeds := []uint64{plan.SampleSeed(seed, 0, 0, 0), plan.SampleSeed(seed, 0, 0, 1), plan.SampleSeed(seed, 0, 0, 2)}
	cs, err := b.Policy.Sample(ctx, backend.SampleRequest{Run: "r", Checkpoint: ck, Task: bt, Seeds: seeds})
	if err != nil {
		t.Fatal(err)
	}
	var batch []backend.Datum
	var examples []policy.Example
	for i, sd := range seeds {
		smp, text, err := ref.SampleProgram(task.Card.Vector(), sd)
		if err != nil {
			t.Fatal(err)
		}
		if cs[i].Text != text || !slices.Equal(cs[i].Tokens, smp.Tokens) || cs[i].LogProbs != nil {
			t.Errorf("completion %d = %+v, want %q", i, cs[i], text)
		}
		adv := float64(i) - 1
		batch = append(batch, backend.Datum{Task: bt, Sample: i, Text: text, Advantage: adv, Weight: 1.0 / 3})
		examples = append(examples, policy.Example{Card: task.Card.Vector(), Tokens: smp.Tokens, Advantage: adv, Weight: 1.0 / 3})
	}
	next, stats, err := b.Policy.Update(ctx, backend.UpdateRequest{Run: "r", Step: 0, Base: ck, Batch: batch, Dir: dir,
		Key: backend.StepKey("r", 0)})
	if err != nil {
		t.Fatal(err)
	}
	want := ref.Clone()
	wantStats, err := want.Update(examples)
	if err != nil {
		t.Fatal(err)
	}
	if next.Version != 1 || next.Hash != want.Hash() || stats != wantStats {
		t.Errorf("Update = %+v %+v, want version 1, hash %s, %+v", next, stats, want.Hash(), wantStats)
	}
	// A retried update from the same base gives the same checkpoint.
	again, _, err := b.Policy.Update(ctx, backend.UpdateRequest{Run: "r", Step: 0, Base: ck, Batch: batch, Dir: t.TempDir()})
	if err != nil || again.Hash != next.Hash {
		t.Errorf("retried Update = %+v, %v, want hash %s", again, err, next.Hash)
	}
	// A base whose version is not its number of updates is refused.
	wrong := next
	wrong.Version = 0
	if _, _, err := (&Policy{Tasks: b.Tasks}).Update(ctx, backend.UpdateRequest{Run: "r", Base: wrong, Batch: batch, Dir: dir}); !backend.IsPermanent(err) {
		t.Errorf("Update of a mislabelled checkpoint: %v, want a permanent error", err)
	}
}

// A damaged checkpoint file is a permanent error, a missing one is not.
func TestPolicyCheckpointFiles(t *testing.T) {
	b, _, _ := newBackend(t)
	ctx := t.Context()
	ck, err := b.Policy.Init(ctx, backend.InitRequest{Run: "r", Suite: testenv.SuiteSeed, Seed: 1, Settings: settings(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	task, err := b.Tasks.Tasks(ctx, testenv.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	sample := func() error {
		_, err := (&Policy{Tasks: b.Tasks}).Sample(ctx, backend.SampleRequest{Run: "r", Checkpoint: ck, Task: task[0], Seeds: []uint64{1}})
		return err
	}
	good, err := os.ReadFile(ck.Location)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ck.Location, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sample(); !backend.IsPermanent(err) || !strings.Contains(err.Error(), "checkpoint 0 of run r is unusable") {
		t.Errorf("truncated checkpoint: %v, want a permanent error", err)
	}
	other, err := b.Policy.Init(ctx, backend.InitRequest{Run: "o", Suite: testenv.SuiteSeed, Seed: 2, Settings: settings(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := os.ReadFile(other.Location)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ck.Location, foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sample(); !backend.IsPermanent(err) || !strings.Contains(err.Error(), "Postgres records "+ck.Hash) {
		t.Errorf("foreign checkpoint: %v, want a permanent error", err)
	}
	if err := os.Remove(ck.Location); err != nil {
		t.Fatal(err)
	}
	if err := sample(); err == nil || backend.IsPermanent(err) {
		t.Errorf("missing checkpoint: %v, want a retryable error", err)
	}
}

func TestWorldModelIsTheModel(t *testing.T) {
	b, _, s := newBackend(t)
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	task, err := b.Tasks.Tasks(t.Context(), testenv.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Init(PolicyConfig(settings(), suite.VectorLen), policy.ProgramGrammar{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var items []backend.ScoreItem
	for i := range 2 {
		_, prog, err := pol.SampleProgram(task[i].Features, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, backend.ScoreItem{Task: task[i], Solution: prog})
	}
	got, err := b.WorldModel.Score(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		want, err := wm.PredictText(s.Split(suite.Train)[i].Card.Vector(), it.Solution)
		if err != nil {
			t.Fatal(err)
		}
		if !got[i].Graded || got[i].Score != want {
			t.Errorf("item %d = %+v, want graded %v", i, got[i], want)
		}
	}
	if _, err := b.WorldModel.Score(t.Context(), []backend.ScoreItem{{Task: task[0], Solution: "(((", Key: "k"}}); err == nil ||
		!backend.IsPermanent(err) || !strings.Contains(err.Error(), "k: world model") {
		t.Errorf("unreadable program: %v, want a permanent error naming the item", err)
	}
}

func TestGraderIsTheExecutor(t *testing.T) {
	b, sb, s := newBackend(t)
	ctx := t.Context()
	task := s.Split(suite.Train)[0]
	bt, err := b.Tasks.Task(ctx, testenv.SuiteSeed, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Init(PolicyConfig(settings(), suite.VectorLen), policy.ProgramGrammar{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	_, prog, err := pol.SampleProgram(task.Card.Vector(), 5)
	if err != nil {
		t.Fatal(err)
	}
	item := backend.GradeItem{Task: bt, Solution: prog, Seed: 9, Key: "k"}
	gs, err := b.Grader.Grade(ctx, backend.GradeRequest{Items: []backend.GradeItem{item, item}, Limits: backend.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	want, err := executor.Run(ctx, executor.NewJob(task, prog, 9))
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 2 || gs[0].Status != string(want.Status) || gs[0].Score != want.Score || !gs[0].Graded || gs[1].Score != gs[0].Score {
		t.Errorf("Grade = %+v, want %+v twice", gs, want)
	}
	// Over the budget: a timeout verdict without running.
	runs := sb.Runs()
	gs, err = b.Grader.Grade(ctx, backend.GradeRequest{Items: []backend.GradeItem{item}, Limits: backend.DefaultLimits(), Budget: 1e-9})
	if err != nil || gs[0].Status != string(executor.StatusTimeout) || sb.Runs() != runs {
		t.Errorf("over budget: %+v, %v, %d runs, want a timeout without running", gs, err, sb.Runs()-runs)
	}
	// The sandbox's own failure is a retryable error, not a verdict.
	sb.FailNext(1)
	if _, err := b.Grader.Grade(ctx, backend.GradeRequest{Items: []backend.GradeItem{item}, Limits: backend.DefaultLimits()}); err == nil || backend.IsPermanent(err) {
		t.Errorf("sandbox down: %v, want a retryable error", err)
	}
	unknown := item
	unknown.Task.ID = "no-such-task"
	if _, err := b.Grader.Grade(ctx, backend.GradeRequest{Items: []backend.GradeItem{unknown}, Limits: backend.DefaultLimits()}); !backend.IsPermanent(err) {
		t.Errorf("unknown task: %v, want a permanent error", err)
	}
	var le *backend.LimitError
	if err := b.Grader.Preflight(ctx, backend.Limits{}); !errors.As(err, &le) {
		t.Errorf("Preflight of zero limits: %v, want a *LimitError", err)
	}
	if g := GradeOf(want); resultOfGrade(g) != want {
		t.Errorf("GradeOf does not keep every field: %+v from %+v", g, want)
	}
}

func resultOfGrade(g backend.Grade) executor.Result {
	return executor.Result{Status: executor.Status(g.Status), Score: g.Score, Metric: g.Metric, Position: g.Position,
		Detail: g.Detail, CPUSeconds: g.CPUSeconds, WallSeconds: g.WallSeconds}
}

// New leaves the world model and the grader nil without their pieces.
func TestNewWithoutPieces(t *testing.T) {
	b := New(testenv.Suites{}, nil, nil)
	if b.WorldModel != nil || b.Grader != nil || b.Policy == nil || b.Tasks == nil {
		t.Errorf("New(suites, nil, nil) = %+v", b)
	}
}

// TestObservationsOneFormat: the built-in grader's verdicts and the
// built-in world model's predictions on the same programs render, through
// turns.Render, to observations of one form (header, status, bucket, the
// ladder's description), and the same outcome to the same text, so a
// policy reading them cannot tell who answered.
func TestObservationsOneFormat(t *testing.T) {
	b, _, s := newBackend(t)
	ctx := t.Context()
	pol, err := policy.Init(PolicyConfig(settings(), suite.VectorLen), policy.ProgramGrammar{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	form := regexp.MustCompile(`^=== Execution result ===\nstatus: (ok|invalid_program|runtime_error|timeout|memory|invalid_output)\n` +
		`score bucket: [0-4]/4\nThe [^\n]+\.\n$`)
	statuses := map[string]bool{}
	for i, task := range s.Split(suite.Train)[:4] {
		bt, err := b.Tasks.Task(ctx, testenv.SuiteSeed, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 4 {
			_, prog, err := pol.SampleProgram(task.Card.Vector(), uint64(10*i+j))
			if err != nil {
				t.Fatal(err)
			}
			gs, err := b.Grader.Grade(ctx, backend.GradeRequest{Items: []backend.GradeItem{{Task: bt, Solution: prog, Seed: 1}},
				Limits: backend.DefaultLimits()})
			if err != nil {
				t.Fatal(err)
			}
			ps, err := b.WorldModel.Score(ctx, []backend.ScoreItem{{Task: bt, Solution: prog}})
			if err != nil {
				t.Fatal(err)
			}
			real, err := turns.Render(turns.GraderAnswer(gs[0]), 1200, tokenizer.Bytes{})
			if err != nil {
				t.Fatal(err)
			}
			predicted, err := turns.Render(turns.WorldModelAnswer(ps[0]), 1200, tokenizer.Bytes{})
			if err != nil {
				t.Fatal(err)
			}
			for _, obs := range []string{real, predicted} {
				if !form.MatchString(obs) {
					t.Errorf("task %s program %d: %q is not of the observation's form", task.ID, j, obs)
				}
			}
			// The world model predicting the real score exactly answers
			// with the grader's very observation, except where the
			// ladder gives two statuses one score (timeout, memory).
			exact, err := turns.Render(turns.WorldModelAnswer(backend.Prediction{Graded: true, Score: gs[0].Score}), 1200, tokenizer.Bytes{})
			if err != nil {
				t.Fatal(err)
			}
			if gs[0].Status != string(executor.StatusTimeout) && gs[0].Status != string(executor.StatusMemory) && exact != real {
				t.Errorf("exact prediction %q, grader %q", exact, real)
			}
			statuses[gs[0].Status] = true
		}
	}
	if len(statuses) < 2 {
		t.Errorf("the programs had statuses %v: want at least two kinds of outcome to compare", statuses)
	}
}

// An update of a batch sampled from an older checkpoint (UpdateRequest.
// Sampler) is the policy package's UpdateOffPolicy with the sampler's
// logprobs of the batch's tokens: the same next checkpoint and stats, the
// ratio's mean and max reported; a sampler that is not older than the base,
// or a clip outside (0, 1), is refused for good.
func TestPolicyOffPolicyUpdate(t *testing.T) {
	b, _, s := newBackend(t)
	ctx := t.Context()
	dir := t.TempDir()
	const seed = 7
	ck0, err := b.Policy.Init(ctx, backend.InitRequest{Run: "r", Suite: testenv.SuiteSeed, Seed: plan.InitSeed(seed),
		Settings: settings(), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ref0, err := policy.Init(PolicyConfig(settings(), suite.VectorLen), policy.ProgramGrammar{}, plan.InitSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	task := s.Split(suite.Train)[0]
	bt, err := b.Tasks.Task(ctx, testenv.SuiteSeed, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Step 0's batch (sampled from and applied to checkpoint 0), then
	// step 1's, sampled from checkpoint 0 and applied to checkpoint 1.
	batchOf := func(step int) ([]backend.Datum, []policy.Example) {
		var batch []backend.Datum
		var examples []policy.Example
		for i := range 6 {
			smp, text, err := ref0.SampleProgram(task.Card.Vector(), plan.SampleSeed(seed, step, 0, i))
			if err != nil {
				t.Fatal(err)
			}
			adv := float64(i%3) - 1
			batch = append(batch, backend.Datum{Task: bt, Sample: i, Text: text, Advantage: adv, Weight: 1.0 / 6})
			examples = append(examples, policy.Example{Card: task.Card.Vector(), Tokens: smp.Tokens, Advantage: adv, Weight: 1.0 / 6,
				SampleLogProbs: smp.TokenLogProbs})
		}
		return batch, examples
	}
	batch0, _ := batchOf(0)
	ck1, _, err := b.Policy.Update(ctx, backend.UpdateRequest{Run: "r", Step: 0, Base: ck0, Batch: batch0, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ref1, err := b.Policy.load("r", ck1)
	if err != nil {
		t.Fatal(err)
	}
	batch1, examples1 := batchOf(1)
	ck2, stats, err := b.Policy.Update(ctx, backend.UpdateRequest{Run: "r", Step: 1, Base: ck1, Batch: batch1, Dir: dir,
		Sampler: &ck0, RatioClip: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	want := ref1.Clone()
	wantStats, err := want.UpdateOffPolicy(examples1, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	if ck2.Version != 2 || ck2.Hash != want.Hash() || stats != wantStats {
		t.Errorf("Update = %+v %+v, want version 2, hash %s, %+v", ck2, stats, want.Hash(), wantStats)
	}
	if stats.RatioMean == 0 || stats.RatioMean == 1 || stats.RatioMax < stats.RatioMean {
		t.Errorf("ratio mean %v, max %v: want the ratios of a policy one update on", stats.RatioMean, stats.RatioMax)
	}
	onPolicy := ref1.Clone()
	if _, err := onPolicy.Update(examples1); err != nil {
		t.Fatal(err)
	}
	if onPolicy.Hash() == ck2.Hash {
		t.Error("the off-policy update gives the on-policy checkpoint: the ratio did nothing")
	}
	t.Logf("ratio mean %.4f, max %.4f", stats.RatioMean, stats.RatioMax)
	for name, req := range map[string]backend.UpdateRequest{
		"sampler is the base": {Run: "r", Step: 1, Base: ck1, Batch: batch1, Dir: t.TempDir(), Sampler: &ck1, RatioClip: 0.2},
		"clip 0":              {Run: "r", Step: 1, Base: ck1, Batch: batch1, Dir: t.TempDir(), Sampler: &ck0},
		"clip 1":              {Run: "r", Step: 1, Base: ck1, Batch: batch1, Dir: t.TempDir(), Sampler: &ck0, RatioClip: 1},
	} {
		if _, _, err := b.Policy.Update(ctx, req); !backend.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", name, err)
		}
	}
}
