package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// TestWorldModelAnchors stores a run whose anchor groups were scored by the
// default world model and executed with known real scores, then measures
// the world model on them: with the recorded scores and re-scored by the
// same artefact (the same numbers), per step and over both steps.
func TestWorldModelAnchors(t *testing.T) {
	dsn := testenv.EmptyDB(t)
	ctx := t.Context()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	t.Setenv(suite.CacheEnv, cache)
	const suiteSeed = 7
	s, err := (suite.Loader{}).Load(ctx, smallSuiteOptions(suiteSeed))
	if err != nil {
		t.Fatal(err)
	}
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := runconfig.BenchPreset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name, cfg.Mode, cfg.Seed, cfg.SuiteSeed = "anchors-test", mode.WMRL, 1, suiteSeed
	raw, _ := json.Marshal(cfg)
	run := store.Run{ID: "anchors-test", Name: cfg.Name, Mode: mode.WMRL, Config: raw, Seed: 1, Steps: 2, State: store.RunCompleted}
	if err := st.UpsertRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	// Two steps, group 1 the anchor group of each: its four programs get
	// real positions in the world model's order at step 0 and in the reverse
	// order at step 1, so the within-group Spearman is +1 and then -1.
	progs := []string{"ridge alpha=1", "gbt trees=100 depth=2 lr=0.1", "standardize | ridge alpha=10", "gbt trees=400 depth=6 lr=0.01"}
	task := s.Split(suite.Train)[0]
	preds := make([]float64, len(progs))
	for i, p := range progs {
		if preds[i], err = wm.PredictText(task.Card.Vector(), p); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 2 {
		var sols []store.Solution
		var scores []store.Score
		var execs []store.Execution
		for g := range 2 {
			for i, p := range progs {
				k := store.Key{Run: run.ID, Step: step, Group: g, Sample: i}
				sols = append(sols, store.Solution{Key: k, TaskID: task.ID, Program: p})
				scores = append(scores, store.Score{Key: k, WM: preds[i]})
				if g == 1 {
					rank := 0 // the rank of preds[i] among preds
					for _, q := range preds {
						if q < preds[i] {
							rank++
						}
					}
					if step == 1 {
						rank = len(progs) - 1 - rank
					}
					pos := float64(rank) / float64(len(progs))
					execs = append(execs, store.Execution{Key: k, Result: executor.NewResult(executor.StatusOK, pos, pos, "")})
				}
			}
		}
		if _, err := st.InsertTrajectories(ctx, sols); err != nil {
			t.Fatal(err)
		}
		if err := st.SetWMScores(ctx, scores); err != nil {
			t.Fatal(err)
		}
		if err := st.SetAnchors(ctx, run.ID, step, []int{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordExecutions(ctx, execs); err != nil {
			t.Fatal(err)
		}
	}
	art := filepath.Join(t.TempDir(), "wm.json")
	if err := os.WriteFile(art, worldmodel.DefaultArtefact(), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, model := range []string{"", art} {
		args := []string{"anchors", "--database-url", dsn, "--every", "1", "--json", run.ID}
		if model != "" {
			args = append(args, "--model", model)
		}
		out, err := runWorldModelCmd(t, cache, args...)
		if err != nil {
			t.Fatal(err)
		}
		var rep anchorsReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("decode %q: %v", out, err)
		}
		if len(rep.Ranges) != 2 || rep.Every != 1 {
			t.Fatalf("model %q: %+v", model, rep)
		}
		for step, want := range []float64{1, -1} {
			r := rep.Ranges[step]
			if r.From != step || r.Pairs != 4 || r.Groups != 1 || r.Ranked != 1 || r.Tied != 0 || r.Spearman != want {
				t.Errorf("model %q step %d: %+v, want spearman %v", model, step, r, want)
			}
		}
	}
	out, err := runWorldModelCmd(t, cache, "anchors", "--database-url", dsn, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "world model: recorded; runs: anchors-test") || !strings.Contains(out, "0-9") || !strings.Contains(out, "0.000") {
		t.Errorf("text report:\n%s", out)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"nope"}, `no run "nope"`},
		{[]string{"--every", "0", run.ID}, "--every 0"},
		{[]string{"--model", filepath.Join(t.TempDir(), "missing.json"), run.ID}, "--model"},
	} {
		_, err := runWorldModelCmd(t, cache, append([]string{"anchors", "--database-url", dsn}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
	// A refreshed run: its recorded scores are a version's, which orders
	// the programs the other way (1 − the frozen score); the frozen
	// model's Spearman on the same pairs is shown next to it.
	ref := run
	ref.ID = "anchors-refreshed"
	if err := st.UpsertRun(ctx, ref); err != nil {
		t.Fatal(err)
	}
	ts, err := st.AnchorTrajectories(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 2 {
		var sols []store.Solution
		var scores []store.Score
		var execs []store.Execution
		for _, tr := range ts {
			if tr.Step != step {
				continue
			}
			k := tr.Key
			k.Run = ref.ID
			sols = append(sols, store.Solution{Key: k, TaskID: tr.TaskID, Program: tr.Program})
			scores = append(scores, store.Score{Key: k, WM: 1 - *tr.WMScore})
			execs = append(execs, store.Execution{Key: k, Result: *tr.Exec})
		}
		if _, err := st.InsertTrajectories(ctx, sols); err != nil {
			t.Fatal(err)
		}
		if err := st.SetWMScores(ctx, scores); err != nil {
			t.Fatal(err)
		}
		if err := st.SetAnchors(ctx, ref.ID, step, []int{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordExecutions(ctx, execs); err != nil {
			t.Fatal(err)
		}
	}
	v := store.WorldModelVersion{Run: ref.ID, Step: 0, Hash: strings.Repeat("1f", 32), Location: "/x/wm.json", Base: wm.Checksum,
		BaseExamples: 1536, Pairs: 4, TrainMSE: 0.01, TrainSpearman: 0.8}
	if err := st.SaveWorldModelVersion(ctx, v); err != nil {
		t.Fatal(err)
	}
	out, err = runWorldModelCmd(t, cache, "anchors", "--database-url", dsn, "--every", "1", "--json", ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	var rep anchorsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if len(rep.Ranges) != 2 || len(rep.Frozen) != 2 || len(rep.Versions) != 1 || rep.Versions[0] != v {
		t.Fatalf("refreshed run: %+v", rep)
	}
	for step, want := range []float64{-1, 1} {
		if r, f := rep.Ranges[step], rep.Frozen[step]; r.Spearman != want || f.Spearman != -want || f.Pairs != r.Pairs {
			t.Errorf("step %d: refreshed %+v, frozen %+v; want spearman %v and %v", step, r, f, want, -want)
		}
	}
	out, err = runWorldModelCmd(t, cache, "anchors", "--database-url", dsn, "--every", "1", ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "frozen") || !strings.Contains(out, "refreshed after step 0 of anchors-refreshed") ||
		!strings.Contains(out, "-1.000") {
		t.Errorf("text report of a refreshed run:\n%s", out)
	}
	// Another frozen model than the one the versions extend is refused.
	other := filepath.Join(t.TempDir(), "other.json")
	m2 := *wm
	m2.Intercept += 0.1
	b2, _ := m2.Marshal()
	if err := os.WriteFile(other, b2, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runWorldModelCmd(t, cache, "anchors", "--database-url", dsn, "--frozen", other, ref.ID); err == nil ||
		!strings.Contains(err.Error(), "was refreshed from world model") {
		t.Errorf("another frozen model: %v", err)
	}
	// By default the frozen model is the stored one of the runs'
	// world_model.features.
	v2cfg := cfg
	v2cfg.WorldModel.Features = runconfig.FeaturesV2
	v2raw, _ := json.Marshal(v2cfg)
	v2rows := []anchorRow{{run: store.Run{ID: "a", Config: v2raw}}, {run: store.Run{ID: "a", Config: v2raw}}}
	if m, err := frozenModel("", v2rows); err != nil || m.FeatureSet() != worldmodel.FeaturesV2 {
		t.Errorf("frozen model of a v2 run: %v", err)
	}
	if m, err := frozenModel("", []anchorRow{{run: run}}); err != nil || m.Checksum != wm.Checksum {
		t.Errorf("frozen model of a v1 run: %v", err)
	}
	if _, err := frozenModel("", append(v2rows, anchorRow{run: run})); err == nil || !strings.Contains(err.Error(), "measure them apart") {
		t.Errorf("frozen model of v1 and v2 runs: %v", err)
	}

	// A run without anchors (grpo) has nothing to measure.
	run.ID, run.Mode = "anchors-grpo", mode.GRPO
	if err := st.UpsertRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if _, err := runWorldModelCmd(t, cache, "anchors", "--database-url", dsn, run.ID); err == nil || !strings.Contains(err.Error(), "no executed anchor trajectories") {
		t.Errorf("grpo run: %v", err)
	}
	if _, err := runWorldModelCmd(t, cache, "anchors", "--database-url", dsn, "--executed", run.ID); err == nil || !strings.Contains(err.Error(), "no executed trajectories") {
		t.Errorf("grpo run without trajectories, --executed: %v", err)
	}
	// --executed: a grpo run's every executed trajectory, no world-model
	// score recorded, re-scored by the embedded model. Both groups are
	// executed in the model's order (Spearman +1 each); one more
	// trajectory, never executed, is left out.
	var sols []store.Solution
	var execs []store.Execution
	for g := range 2 {
		for i, p := range progs {
			k := store.Key{Run: run.ID, Step: 0, Group: g, Sample: i}
			sols = append(sols, store.Solution{Key: k, TaskID: task.ID, Program: p})
			rank := 0
			for _, q := range preds {
				if q < preds[i] {
					rank++
				}
			}
			pos := float64(rank) / float64(len(progs))
			execs = append(execs, store.Execution{Key: k, Result: executor.NewResult(executor.StatusOK, pos, pos, "")})
		}
	}
	sols = append(sols, store.Solution{Key: store.Key{Run: run.ID, Step: 0, Group: 2, Sample: 0}, TaskID: task.ID, Program: progs[0]})
	if _, err := st.InsertTrajectories(ctx, sols); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordExecutions(ctx, execs); err != nil {
		t.Fatal(err)
	}
	out, err = runWorldModelCmd(t, cache, "anchors", "--database-url", dsn, "--executed", "--json", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	rep = anchorsReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if len(rep.Ranges) != 1 || rep.Model != "default" {
		t.Fatalf("--executed: %+v", rep)
	}
	if r := rep.Ranges[0]; r.Pairs != 8 || r.Groups != 2 || r.Ranked != 2 || r.Spearman != 1 {
		t.Errorf("--executed: %+v, want 8 pairs in 2 groups, spearman 1", r)
	}
}

// turnAnchors measures each turn index on its own pairs, within (run,
// step, group): a world model that orders turn 1's programs right and
// turn 2's in reverse has Spearman +1 at turn 1 and -1 at turn 2.
func TestTurnAnchors(t *testing.T) {
	var pairs []store.TurnPair
	for _, run := range []string{"a", "b"} {
		for i := range 4 {
			x := float64(i) / 4
			pairs = append(pairs,
				store.TurnPair{TurnKey: store.TurnKey{Key: store.Key{Run: run, Step: 3, Group: 1, Sample: i}, Turn: 2}, WM: x, Env: 1 - x},
				store.TurnPair{TurnKey: store.TurnKey{Key: store.Key{Run: run, Step: 3, Group: 1, Sample: i}, Turn: 1}, WM: x, Env: x + 0.125})
		}
	}
	got, err := turnAnchors(pairs, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Turn != 1 || got[1].Turn != 2 || len(got[0].Ranges) != 1 || len(got[1].Ranges) != 1 {
		t.Fatalf("turn ranges %+v, want turns 1 and 2 with one range each", got)
	}
	for i, want := range []worldmodel.StepRange{
		{From: 0, To: 9, Pairs: 8, Groups: 2, Ranked: 2, Spearman: 1, Bias: -0.125},
		{From: 0, To: 9, Pairs: 8, Groups: 2, Ranked: 2, Spearman: -1, Bias: 0.75 - 1},
	} {
		r := got[i].Ranges[0]
		if r.From != want.From || r.To != want.To || r.Pairs != want.Pairs || r.Groups != want.Groups || r.Ranked != want.Ranked ||
			math.Abs(r.Spearman-want.Spearman) > 1e-12 || math.Abs(r.Bias-want.Bias) > 1e-12 {
			t.Errorf("turn %d: %+v, want %+v", i+1, r, want)
		}
	}
	if got, err := turnAnchors(nil, 10); err != nil || len(got) != 0 {
		t.Errorf("no pairs: %+v, %v", got, err)
	}
}
