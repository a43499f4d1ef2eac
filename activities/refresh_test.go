package activities

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// anchorStep runs one step's rollout of a wmrl run up to its anchor pairs:
// every group generated and scored (by the version named, "" the frozen
// model), group 0 executed and recorded as the anchor group.
func anchorStep(t *testing.T, a *Activities, run string, cfg runconfig.Config, step int, version string) {
	t.Helper()
	ctx := t.Context()
	// The step samples from checkpoint 0's policy, recorded as the
	// step's version: the pairs are what matters here, not training.
	ck, err := a.Store.Checkpoint(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	ck.Version = step
	if err := a.Store.PutCheckpoint(ctx, ck); err != nil {
		t.Fatal(err)
	}
	for g := range cfg.Groups {
		if _, err := a.Generate(ctx, GenerateRequest{RunID: run, Step: step, Group: g, Samples: cfg.Samples, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Checkpoint: CheckpointRef{Version: step, Hash: ck.Hash}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: step, Group: g, SuiteSeed: cfg.SuiteSeed,
			WorldModel: version}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range cfg.Samples {
		if _, err := a.Execute(ctx, ExecuteRequest{RunID: run, Step: step, Group: 0, Sample: i, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.RecordAnchors(ctx, RecordAnchorsRequest{RunID: run, Step: step, Groups: []int{0}}); err != nil {
		t.Fatal(err)
	}
}

// RefreshWorldModel is keyed by (run, step): below min_pairs it makes no
// version; a retry returns the recorded one; a worker that lost its work
// before recording it (and any other worker) makes the same bytes again.
// ScoreWorldModel scores with the version a request names, checking its
// file against the hash.
func TestRefreshWorldModel(t *testing.T) {
	a, _, dsn := newTestActivitiesDB(t)
	base := testenv.SmallBase(t)
	setBuiltin(a, testenv.Suites{}, base, &testenv.InProcess{})
	ctx := t.Context()
	cfg := tinyConfig(t)
	cfg.WorldModel.Refresh = runconfig.Refresh{Every: 1, MinPairs: 2 * cfg.Samples}
	run := "wmr"
	if _, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	anchorStep(t, a, run, cfg, 0, "")
	req := RefreshRequest{RunID: run, Step: 0, SuiteSeed: cfg.SuiteSeed, MinPairs: cfg.WorldModel.Refresh.MinPairs}
	r, err := a.RefreshWorldModel(ctx, req)
	if err != nil || r.Version != nil || r.Pairs != cfg.Samples {
		t.Fatalf("refresh below min_pairs = %+v, %v; want no version over %d pairs", r, err, cfg.Samples)
	}
	anchorStep(t, a, run, cfg, 1, "")
	req.Step = 1
	r1, err := a.RefreshWorldModel(ctx, req)
	if err != nil || r1.Version == nil || r1.Version.Step != 1 || r1.Pairs != 2*cfg.Samples {
		t.Fatalf("refresh = %+v, %v", r1, err)
	}
	v, err := a.Store.WorldModelVersionAt(ctx, run, 1)
	if err != nil || v.Hash != r1.Version.Hash {
		t.Fatalf("recorded %+v, %v", v, err)
	}
	artefact, err := os.ReadFile(v.Location)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.Location, "worldmodels") || !strings.Contains(v.Location, run) {
		t.Errorf("artefact at %s, want under the run's worldmodels/", v.Location)
	}
	// A retry returns the recorded version.
	if again, err := a.RefreshWorldModel(ctx, req); err != nil || *again.Version != *r1.Version {
		t.Fatalf("retry = %+v, %v", again, err)
	}
	// A worker lost after writing the file, before recording it: another
	// worker (fresh caches, another data directory) makes the same bytes.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `DELETE FROM world_model_versions WHERE run_id = $1`, run); err != nil {
		t.Fatal(err)
	}
	other := fresh(a, t.TempDir(), a.RunsKey)
	setBuiltin(other, testenv.Suites{}, base, &testenv.InProcess{})
	r2, err := other.RefreshWorldModel(ctx, req)
	if err != nil || *r2.Version != *r1.Version {
		t.Fatalf("refresh on another worker = %+v, %v; first %+v", r2, err, r1)
	}
	v2, _ := other.Store.WorldModelVersionAt(ctx, run, 1)
	if b, err := os.ReadFile(v2.Location); err != nil || !bytes.Equal(b, artefact) {
		t.Fatalf("the other worker's artefact differs (%v)", err)
	}

	// Step 2 scored by the version: its r_wm are the refreshed model's.
	anchorStep(t, other, run, cfg, 2, r1.Version.Hash)
	m, err := worldmodel.Load(artefact)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := a.Store.StepTrajectories(ctx, run, 2)
	if err != nil {
		t.Fatal(err)
	}
	differs := 0
	for _, tr := range ts {
		task, err := a.task(ctx, run, cfg.SuiteSeed, tr.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := m.PredictText(task.Features, tr.Program)
		frozen, _ := base.PredictText(task.Features, tr.Program)
		if *tr.WMScore != want {
			t.Errorf("step 2 %s: r_wm %v, the refreshed model says %v", tr.Key, *tr.WMScore, want)
		}
		if want != frozen {
			differs++
		}
	}
	if differs == 0 {
		t.Error("the refreshed model scores step 2 as the frozen one does")
	}

	// Versions that are not recorded, or whose file was damaged, are
	// invalid input; a missing file is retried.
	sreq := ScoreRequest{RunID: run, Step: 2, Group: 1, SuiteSeed: cfg.SuiteSeed, WorldModel: strings.Repeat("0", 64)}
	if _, err := other.ScoreWorldModel(ctx, sreq); !isInvalid(err) || !strings.Contains(err.Error(), "not recorded") {
		t.Errorf("unrecorded version: %v", err)
	}
	sreq.WorldModel = "ABC"
	if _, err := other.ScoreWorldModel(ctx, sreq); !isInvalid(err) {
		t.Errorf("malformed version: %v", err)
	}
	sreq.WorldModel = r1.Version.Hash
	cold := fresh(a, t.TempDir(), a.RunsKey)
	setBuiltin(cold, testenv.Suites{}, base, &testenv.InProcess{})
	if err := os.WriteFile(v2.Location, append(bytes.Clone(artefact), ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cold.ScoreWorldModel(ctx, sreq); !isInvalid(err) || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged artefact: %v", err)
	}
	if err := os.Remove(v2.Location); err != nil {
		t.Fatal(err)
	}
	if _, err := cold.ScoreWorldModel(ctx, sreq); err == nil || isInvalid(err) {
		t.Errorf("missing artefact: %v, want a retryable error", err)
	}
	// The worker that scored step 2 keeps the version in memory.
	if _, err := other.ScoreWorldModel(ctx, sreq); err != nil {
		t.Errorf("cached version: %v", err)
	}

	// A world model that cannot be retrained fails the refresh naming the field.
	plain := fresh(a, t.TempDir(), a.RunsKey)
	plain.WorldModel = &builtin.WorldModel{Model: predictorFunc(func([]float64, string) (float64, error) { return 0.5, nil })}
	req.Step = 2
	if _, err := plain.RefreshWorldModel(ctx, req); !isInvalid(err) || !strings.Contains(err.Error(), "cannot be retrained") {
		t.Errorf("refresh of a model that cannot be retrained: %v", err)
	}
	if err := (RefreshRequest{RunID: run, Step: 1, MinPairs: -1}).Validate(); err == nil {
		t.Error("negative min pairs: valid")
	}
}

type predictorFunc func([]float64, string) (float64, error)

func (f predictorFunc) PredictText(card []float64, text string) (float64, error) {
	return f(card, text)
}

// A run with world_model.features v2 is scored by the worker's v2 model and
// refreshed from it; with world_model.refresh.half_life its older anchor
// executions weigh less, exactly as worldmodel.Refit with those weights.
// A worker without a v2 model refuses the run naming the field.
func TestRefreshWorldModelV2HalfLife(t *testing.T) {
	a, _ := newTestActivities(t)
	base := testenv.SmallBase(t)
	s, err := testenv.SmallSuite()
	if err != nil {
		t.Fatal(err)
	}
	fc := worldmodel.DefaultFitConfig()
	fc.SamplesPerTask, fc.Features = 6, worldmodel.FeaturesV2
	v2, recs, err := worldmodel.Fit(t.Context(), s, fc, worldmodel.ExecutorRun)
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := v2.Marshal()
	if v2, err = worldmodel.Load(sealed); err != nil {
		t.Fatal(err)
	}
	setBuiltin(a, testenv.Suites{}, base, &testenv.InProcess{})
	a.WorldModelV2 = &builtin.WorldModel{Model: v2, Suites: testenv.Suites{}}
	ctx := t.Context()
	cfg := tinyConfig(t)
	cfg.WorldModel.Features = runconfig.FeaturesV2
	cfg.WorldModel.Refresh = runconfig.Refresh{Every: 1, HalfLife: 1}
	run := "wmv2"
	if _, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	anchorStep(t, a, run, cfg, 0, "")
	ts, err := a.Store.StepTrajectories(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		task, err := a.task(ctx, run, cfg.SuiteSeed, tr.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := v2.PredictText(task.Features, tr.Program); *tr.WMScore != want {
			t.Fatalf("%s: r_wm %v, the v2 model says %v", tr.Key, *tr.WMScore, want)
		}
	}
	anchorStep(t, a, run, cfg, 1, "")
	r, err := a.RefreshWorldModel(ctx, RefreshRequest{RunID: run, Step: 1, SuiteSeed: cfg.SuiteSeed})
	if err != nil || r.Version == nil {
		t.Fatalf("refresh = %+v, %v", r, err)
	}
	v, err := a.Store.WorldModelVersionAt(ctx, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(v.Location)
	if err != nil {
		t.Fatal(err)
	}
	// The same refit by hand: step 0's anchor executions at weight 0.5.
	data, err := worldmodel.BaseExamples(v2, s, recs)
	if err != nil {
		t.Fatal(err)
	}
	anchors, err := a.Store.AnchorTrajectories(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var ex []worldmodel.RunExample
	for _, tr := range anchors {
		task, err := a.task(ctx, run, cfg.SuiteSeed, tr.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		w := 1.0
		if tr.Step == 0 {
			w = 0.5
		}
		ex = append(ex, worldmodel.RunExample{Group: strconv.Itoa(tr.Step) + "/" + strconv.Itoa(tr.Group), Card: task.Features,
			Program: tr.Program, Score: tr.Exec.Score, Weight: w})
	}
	m, err := worldmodel.Refit(v2, data, ex)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.Marshal()
	if !bytes.Equal(got, want) {
		t.Fatal("the refreshed version is not Refit of the v2 model with half-life weights")
	}
	for i := range ex {
		ex[i].Weight = 0
	}
	unweighted, _ := worldmodel.Refit(v2, data, ex)
	if b, _ := unweighted.Marshal(); bytes.Equal(b, got) {
		t.Fatal("the half-life leaves the refresh unweighted")
	}
	loaded, err := worldmodel.Load(got)
	if err != nil || loaded.FeatureSet() != worldmodel.FeaturesV2 {
		t.Fatalf("refreshed version: %v", err)
	}

	// A worker without a v2 model.
	none := fresh(a, t.TempDir(), a.RunsKey)
	if _, err := none.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: 1, Group: 1, SuiteSeed: cfg.SuiteSeed}); !isInvalid(err) ||
		!strings.Contains(err.Error(), "world_model.features") {
		t.Errorf("score on a worker without a v2 model: %v", err)
	}
}
