package fusion

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/program"
)

func fp(v float64) *float64 { return &v }

// fuseFixture is a step of two groups of three: group 0 is the anchor group
// (all executed), group 1 a world-model group of which one trajectory was
// executed too (as in grpo, where every group is) and one failed to run.
func fuseFixture() []Trajectory {
	traj := func(g, s int, wm float64, env *float64) Trajectory {
		return Trajectory{Group: g, Sample: s, TaskID: "t", Program: "p", WM: fp(wm), Env: env}
	}
	return []Trajectory{
		traj(0, 0, 0.2, fp(0.6)), traj(0, 1, 0.4, fp(0.9)), traj(0, 2, 0.3, fp(0.5)),
		traj(1, 0, 0.1, fp(0.8)), traj(1, 1, 0.5, nil), traj(1, 2, 0.9, fp(0.7)),
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestStepRewardsPerMode(t *testing.T) {
	m := isotonic.Map{X: []float64{0, 1}, Y: []float64{0.2, 0.4}} // f̂(x) = 0.2 + 0.2x
	cal := func(x float64) float64 { return 0.2 + 0.2*x }
	tests := []struct {
		give       mode.Mode
		wantReward []float64
		wantGraded []bool
		wantAnchor []bool
	}{
		{mode.GRPO, []float64{0.6, 0.9, 0.5, 0.8, 0, 0.7}, []bool{true, true, true, true, false, true}, make([]bool, 6)},
		{mode.WM, []float64{0.2, 0.4, 0.3, 0.1, 0.5, 0.9}, []bool{true, true, true, true, true, true}, make([]bool, 6)},
		{mode.Mix, []float64{0.6, 0.9, 0.5, 0.1, 0.5, 0.9}, []bool{true, true, true, true, true, true},
			[]bool{true, true, true, false, false, false}},
		{mode.Debias, []float64{0.6, 0.9, 0.5, cal(0.1), cal(0.5), cal(0.9)}, []bool{true, true, true, true, true, true},
			[]bool{true, true, true, false, false, false}},
		{mode.Denoise, []float64{0.6, 0.9, 0.5, 0.1, 0.5, 0.9}, []bool{true, true, true, true, true, true},
			[]bool{true, true, true, false, false, false}},
		{mode.WMRL, []float64{0.6, 0.9, 0.5, cal(0.1), cal(0.5), cal(0.9)}, []bool{true, true, true, true, true, true},
			[]bool{true, true, true, false, false, false}},
	}
	dcfg := denoise.Config{HalfLife: 4, WarmUp: 1}
	acfg := advantage.Default()
	for _, tt := range tests {
		var anchors []int
		if tt.give.Pieces().Anchors {
			anchors = []int{0}
		}
		b, st, stats := Step(fuseFixture(), tt.give, anchors, m, denoise.State{}, dcfg, acfg)
		var wsum float64
		for i, it := range b.Items {
			if it.Graded != tt.wantGraded[i] || (it.Graded && !near(it.Reward, tt.wantReward[i])) || it.Anchor != tt.wantAnchor[i] {
				t.Errorf("%s item %d: %+v, want reward %v graded %v anchor %v", tt.give, i, it, tt.wantReward[i], tt.wantGraded[i], tt.wantAnchor[i])
			}
			if !it.Graded && (it.Weight != 0 || it.Advantage != 0) {
				t.Errorf("%s item %d: ungraded trajectory has weight %v advantage %v", tt.give, i, it.Weight, it.Advantage)
			}
			wsum += it.Weight
		}
		if !near(wsum, 1) {
			t.Errorf("%s: weights sum to %v", tt.give, wsum)
		}
		// Group 0's advantages by hand: rewards 0.6, 0.9, 0.5.
		mean := (0.6 + 0.9 + 0.5) / 3
		sd := math.Sqrt((math.Pow(0.6-mean, 2) + math.Pow(0.9-mean, 2) + math.Pow(0.5-mean, 2)) / 3)
		if tt.give != mode.WM && !near(b.Items[1].Advantage, (0.9-mean)/(sd+acfg.Eps)) {
			t.Errorf("%s: advantage of group 0 sample 1 = %v, want %v", tt.give, b.Items[1].Advantage, (0.9-mean)/(sd+acfg.Eps))
		}
		wantRho := 1.0
		if tt.give.Pieces().Denoise {
			// One group pushed with warm-up 1: η̂² = η̂²_cal, so ρ = 2.
			wantRho = 2
			if st.Groups != 1 || stats.S2Groups != 1 {
				t.Errorf("%s: denoiser state %+v, s2 groups %d", tt.give, st, stats.S2Groups)
			}
		} else if !reflect.DeepEqual(st, denoise.State{}) {
			t.Errorf("%s: denoiser state changed to %+v", tt.give, st)
		}
		if b.Rho != wantRho {
			t.Errorf("%s: rho %v, want %v", tt.give, b.Rho, wantRho)
		}
		// Anchor trajectories weigh ρ against 1 for the others.
		if tt.wantAnchor[0] && !near(b.Items[0].Weight/b.Items[3].Weight, wantRho) {
			t.Errorf("%s: weight ratio anchor/wm = %v, want %v", tt.give, b.Items[0].Weight/b.Items[3].Weight, wantRho)
		}
		if tt.give == mode.GRPO && (stats.Ungraded != 1 || stats.Graded != 5) {
			t.Errorf("grpo stats %+v", stats)
		}
	}
}

func TestStepDenoiseUsesCalibratedScores(t *testing.T) {
	// In wmrl the anchor group's s² compares calibrated WM scores with real
	// ones; in denoise (no debiasing) the raw scores. A map that fixes the
	// WM's distortion lowers s².
	ts := fuseFixture()
	m := isotonic.Map{X: []float64{0.2, 0.3, 0.4}, Y: []float64{0.6, 0.5, 0.9}} // exact on group 0
	dcfg := denoise.Config{HalfLife: 4, WarmUp: 5}
	_, raw, _ := Step(ts, mode.Denoise, []int{0}, m, denoise.State{}, dcfg, advantage.Default())
	_, calib, _ := Step(ts, mode.WMRL, []int{0}, m, denoise.State{}, dcfg, advantage.Default())
	if !(calib.Eta2 < raw.Eta2) || calib.Eta2 > 1e-12 {
		t.Fatalf("η̂² calibrated %v, raw %v: want the exact map to remove the disagreement", calib.Eta2, raw.Eta2)
	}
}

func TestStepAnchorOnly(t *testing.T) {
	// Four groups of three; anchors 0 and 2 are executed (one execution of
	// group 2 without a result), groups 1 and 3 are neither scored nor
	// executed, as the anchor mode leaves them (group 3's stray world-model
	// score must not make it count).
	traj := func(g, s int, wm, env *float64) Trajectory {
		return Trajectory{Group: g, Sample: s, TaskID: "t", Program: "p", WM: wm, Env: env}
	}
	ts := []Trajectory{
		traj(0, 0, nil, fp(0.6)), traj(0, 1, nil, fp(0.9)), traj(0, 2, nil, fp(0.5)),
		traj(1, 0, nil, nil), traj(1, 1, nil, nil), traj(1, 2, nil, nil),
		traj(2, 0, nil, fp(0.1)), traj(2, 1, nil, nil), traj(2, 2, nil, fp(0.7)),
		traj(3, 0, fp(0.4), nil), traj(3, 1, nil, nil), traj(3, 2, nil, nil),
	}
	anchors := []int{0, 2}
	dcfg := denoise.Config{HalfLife: 4, WarmUp: 1}
	st0 := denoise.State{Eta2: 0.3, Groups: 7, Eta2Cal: 0.2, Calibrated: true}
	b, st, stats := Step(ts, mode.Anchor, anchors, isotonic.Map{X: []float64{0, 1}, Y: []float64{0.5, 0.5}}, st0, dcfg,
		advantage.Default())
	if b.Rho != 1 || !reflect.DeepEqual(st, st0) {
		t.Errorf("rho %v, state %+v: want 1 and the state unchanged", b.Rho, st)
	}
	want := Stats{Trajectories: 12, Executed: 5, Graded: 5, Ungraded: 1, Excluded: 6, SkippedGroups: 0,
		MeanReward: (0.6 + 0.9 + 0.5 + 0.1 + 0.7) / 5, MeanEnv: (0.6 + 0.9 + 0.5 + 0.1 + 0.7) / 5, AnchorShare: 1}
	if !near(stats.MeanReward, want.MeanReward) || !near(stats.MeanEnv, want.MeanEnv) {
		t.Errorf("stats %+v, want %+v", stats, want)
	}
	stats.MeanReward, stats.MeanEnv = want.MeanReward, want.MeanEnv
	if stats != want {
		t.Errorf("stats %+v, want %+v", stats, want)
	}
	for i, it := range b.Items {
		out := it.Group == 1 || it.Group == 3
		if it.Excluded != out || it.Anchor == out {
			t.Errorf("item %d: %+v, want excluded %v, anchor %v", i, it, out, !out)
		}
		if out && (it.Graded || it.Reward != 0 || it.Advantage != 0 || it.Weight != 0) {
			t.Errorf("item %d: excluded with %+v", i, it)
		}
	}

	// The anchor groups fuse exactly as grpo on those groups alone: the
	// same rewards, advantages and weights.
	var only []Trajectory
	for _, tr := range ts {
		if tr.Group == 0 || tr.Group == 2 {
			only = append(only, tr)
		}
	}
	g, _, gstats := Step(only, mode.GRPO, nil, isotonic.Map{}, denoise.State{}, dcfg, advantage.Default())
	var k int
	for _, it := range b.Items {
		if it.Excluded {
			continue
		}
		want := g.Items[k]
		want.Anchor = true
		if it != want {
			t.Errorf("anchor item %d/%d: %+v, grpo on the anchor groups %+v", it.Group, it.Sample, it, want)
		}
		k++
	}
	if gstats.Graded != stats.Graded || gstats.Ungraded != stats.Ungraded || gstats.SkippedGroups != stats.SkippedGroups {
		t.Errorf("stats %+v, grpo on the anchor groups %+v", stats, gstats)
	}

	// The update leaves the excluded trajectories out, also when nothing
	// was graded.
	card := func(string) ([]float64, error) { return []float64{1}, nil }
	for i := range b.Items {
		b.Items[i].Program = "mean"
	}
	ex, err := Examples(b, card)
	if err != nil || len(ex) != 5 {
		t.Errorf("Examples: %d examples, %v; want the 5 graded anchor trajectories", len(ex), err)
	}
	for i := range ts {
		ts[i].Env = nil
	}
	none, _, _ := Step(ts, mode.Anchor, anchors, isotonic.Map{}, st0, dcfg, advantage.Default())
	for i := range none.Items {
		none.Items[i].Program = "mean"
	}
	ex, err = Examples(none, card)
	if err != nil || len(ex) != 6 {
		t.Errorf("Examples with nothing graded: %d examples, %v; want the 6 anchor trajectories at weight 1", len(ex), err)
	}
}

func TestStepNothingGraded(t *testing.T) {
	ts := fuseFixture()
	for i := range ts {
		ts[i].Env = nil
	}
	b, _, stats := Step(ts, mode.GRPO, nil, isotonic.Map{}, denoise.State{}, denoise.Config{HalfLife: 1, WarmUp: 1},
		advantage.Default())
	if stats.Graded != 0 || stats.SkippedGroups != 2 {
		t.Fatalf("stats %+v", stats)
	}
	for _, it := range b.Items {
		if it.Weight != 0 || it.Advantage != 0 {
			t.Fatalf("ungraded item %+v", it)
		}
	}
}

func TestExamples(t *testing.T) {
	card := func(id string) ([]float64, error) {
		if id != "t" {
			return nil, fmt.Errorf("no task %q", id)
		}
		return []float64{1, 2}, nil
	}
	item := func(s int, prog string, adv, w float64) BatchItem {
		return BatchItem{Group: 0, Sample: s, TaskID: "t", Program: prog, Graded: w > 0, Advantage: adv, Weight: w}
	}
	tokens := func(text string) []int {
		p, err := program.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := program.Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	t.Run("weights", func(t *testing.T) {
		b := Batch{Items: []BatchItem{item(0, "mean", 1, 0.5), item(1, "ridge alpha=1", 0, 0), item(2, "knn k=3", -1, 0.5)}}
		got, err := Examples(b, card)
		if err != nil {
			t.Fatal(err)
		}
		want := []policy.Example{
			{Card: []float64{1, 2}, Tokens: tokens("mean"), Advantage: 1, Weight: 0.5},
			{Card: []float64{1, 2}, Tokens: tokens("knn k=3"), Advantage: -1, Weight: 0.5},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Examples = %+v, want %+v (the weight-0 item left out)", got, want)
		}
	})
	t.Run("nothing graded", func(t *testing.T) {
		b := Batch{Items: []BatchItem{item(0, "mean", 0, 0), item(1, "knn k=3", 0, 0)}}
		got, err := Examples(b, card)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Weight != 1 || got[0].Advantage != 0 || got[1].Weight != 1 {
			t.Errorf("Examples = %+v, want both items with weight 1 and advantage 0", got)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, b := range []Batch{
			{Run: "r", Step: 3},
			{Items: []BatchItem{item(0, "not a program (", 1, 1)}},
			{Items: []BatchItem{{TaskID: "other", Program: "mean", Weight: 1}}},
		} {
			if _, err := Examples(b, card); err == nil {
				t.Errorf("Examples(%+v): no error", b)
			}
		}
	})
}

// TestStepWeighted: nil weights are Step; weights move only the denoiser,
// each anchor group pushed with its own weight.
func TestStepWeighted(t *testing.T) {
	traj := func(g, s int, wm, env float64) Trajectory {
		return Trajectory{Group: g, Sample: s, TaskID: "t", Program: "p", WM: fp(wm), Env: fp(env)}
	}
	ts := []Trajectory{
		traj(0, 0, 0.2, 0.6), traj(0, 1, 0.4, 0.9), traj(0, 2, 0.3, 0.5),
		traj(1, 0, 0.1, 0.8), traj(1, 1, 0.5, 0.2), traj(1, 2, 0.9, 0.7),
	}
	dcfg := denoise.Config{HalfLife: 2, WarmUp: 5}
	acfg := advantage.Default()
	st := denoise.State{Eta2: 0.3, Groups: 2}
	anchors := []int{0, 1}
	b0, s0, x0 := Step(ts, mode.WMRL, anchors, isotonic.Map{}, st, dcfg, acfg)
	b1, s1, x1 := StepWeighted(ts, mode.WMRL, anchors, nil, isotonic.Map{}, st, dcfg, acfg)
	if !reflect.DeepEqual(b0, b1) || !reflect.DeepEqual(s0, s1) || x0 != x1 {
		t.Fatal("StepWeighted with nil weights differs from Step")
	}
	w := []float64{0.5, 2}
	b2, s2, _ := StepWeighted(ts, mode.WMRL, anchors, w, isotonic.Map{}, st, dcfg, acfg)
	want := st
	for i, g := range anchors {
		var d, y []float64
		for _, tr := range ts[3*g : 3*g+3] {
			d, y = append(d, *tr.WM), append(y, *tr.Env)
		}
		want.ObserveWeighted(dcfg, d, y, w[i])
	}
	if !reflect.DeepEqual(s2, want) {
		t.Errorf("denoiser %+v, want %+v", s2, want)
	}
	if reflect.DeepEqual(s2, s0) {
		t.Error("weights did not change the denoiser")
	}
	if !reflect.DeepEqual(b0.Items, b2.Items) {
		t.Error("weights changed the batch's rewards or advantages")
	}
}

// TestClosedGateIsTheControl: when the anchors show a world model that
// misranks, the wmrl step's update is exactly the anchor control's: the
// anchor trajectories with the control's weights, the world-model
// trajectories with weight 0 and so out of the update; when it ranks, the
// world-model groups keep weight 1 against ρ.
func TestClosedGateIsTheControl(t *testing.T) {
	m := isotonic.Map{X: []float64{0, 1}, Y: []float64{0, 1}}
	dcfg := denoise.Config{HalfLife: 4, WarmUp: 2, RhoMax: 10, SignalWindow: 4}
	acfg := advantage.Default()
	// Group 0 (the anchor group) reversed by the world model: r = -1.
	misranks := []Trajectory{
		{Group: 0, Sample: 0, TaskID: "t", Program: "p", WM: fp(0.9), Env: fp(0.2)},
		{Group: 0, Sample: 1, TaskID: "t", Program: "p", WM: fp(0.5), Env: fp(0.5)},
		{Group: 0, Sample: 2, TaskID: "t", Program: "p", WM: fp(0.1), Env: fp(0.8)},
		{Group: 1, Sample: 0, TaskID: "t", Program: "p", WM: fp(0.3)},
		{Group: 1, Sample: 1, TaskID: "t", Program: "p", WM: fp(0.6)},
		{Group: 1, Sample: 2, TaskID: "t", Program: "p", WM: fp(0.4)},
	}
	var st denoise.State
	for range 3 { // three earlier steps of the same evidence
		_, st, _ = Step(misranks, mode.WMRL, []int{0}, m, st, dcfg, acfg)
	}
	b, _, stats := Step(misranks, mode.WMRL, []int{0}, m, st, dcfg, acfg)
	if stats.Gate == nil || stats.Gate.Open || b.Gate == nil || stats.Gate.Groups != 4 {
		t.Fatalf("gate %+v, want closed after four misranked groups", stats.Gate)
	}
	ctl, _, _ := Step(misranks, mode.Anchor, []int{0}, m, denoise.State{}, dcfg, acfg)
	for i, it := range b.Items {
		if it.Anchor {
			if !near(it.Weight, ctl.Items[i].Weight) || !near(it.Advantage, ctl.Items[i].Advantage) {
				t.Errorf("item %d: weight %v advantage %v, the control's %v %v", i, it.Weight, it.Advantage,
					ctl.Items[i].Weight, ctl.Items[i].Advantage)
			}
		} else if it.Weight != 0 || !it.Graded {
			t.Errorf("world-model item %d: weight %v graded %v, want graded with weight 0", i, it.Weight, it.Graded)
		}
	}
	if stats.AnchorShare != 1 {
		t.Errorf("anchor share %v with the gate closed, want 1", stats.AnchorShare)
	}
	// The same step with a world model that agrees: the gate opens and the
	// world-model group is weighted 1 against ρ.
	agrees := append([]Trajectory(nil), misranks...)
	agrees[0].WM, agrees[2].WM = fp(0.1), fp(0.9)
	var good denoise.State
	for range 3 {
		_, good, _ = Step(agrees, mode.WMRL, []int{0}, m, good, dcfg, acfg)
	}
	b, _, stats = Step(agrees, mode.WMRL, []int{0}, m, good, dcfg, acfg)
	if stats.Gate == nil || !stats.Gate.Open {
		t.Fatalf("gate %+v, want open", stats.Gate)
	}
	var wm float64
	for _, it := range b.Items {
		if !it.Anchor {
			wm += it.Weight
		}
	}
	if wm == 0 || !near(b.Items[3].Weight*b.Rho, b.Items[0].Weight) {
		t.Errorf("open gate: world-model weight %v, anchor weight %v, rho %v", b.Items[3].Weight, b.Items[0].Weight, b.Rho)
	}
	// Without a window (runs made before the gate) there is no decision.
	if _, _, s := Step(misranks, mode.WMRL, []int{0}, m, denoise.State{}, denoise.Config{HalfLife: 4, WarmUp: 2}, acfg); s.Gate != nil {
		t.Errorf("gate %+v without a window", s.Gate)
	}
}

// TestStepSelective: the world-model groups selective scoring leaves out
// keep their rewards and advantages but get weight 0; the other
// trajectories get the weights of the batch without them; an anchor group
// in the left-out list is trained on as always; the denoiser does not move
// with the decision; and the counts are those of the world-model groups.
func TestStepSelective(t *testing.T) {
	m := isotonic.Map{X: []float64{0, 1}, Y: []float64{0, 1}}
	dcfg := denoise.Config{HalfLife: 4, WarmUp: 1, RhoMax: 10}
	acfg := advantage.Default()
	var ts []Trajectory
	for g := range 4 {
		for i := range 3 {
			tr := Trajectory{Group: g, Sample: i, TaskID: "t", Program: "p", WM: fp(0.2*float64(i) + 0.05*float64(g))}
			if g == 0 {
				tr.Env = fp(0.3 * float64(i))
			}
			ts = append(ts, tr)
		}
	}
	var st denoise.State
	_, st, _ = Step(ts, mode.WMRL, []int{0}, m, st, dcfg, acfg) // calibrated: ρ > 1
	full, stFull, fs := Step(ts, mode.WMRL, []int{0}, m, st, dcfg, acfg)
	if fs.Scoring != nil {
		t.Fatalf("scoring %+v without a selection", fs.Scoring)
	}
	sel := &Selection{LeftOut: []int{0, 2}, Cut: 0.2}
	b, stSel, stats := StepSelective(ts, mode.WMRL, []int{0}, nil, sel, m, st, dcfg, acfg)
	if !reflect.DeepEqual(stSel, stFull) || b.Rho != full.Rho {
		t.Errorf("the selection moved the denoiser: %+v ρ %v, without %+v ρ %v", stSel, b.Rho, stFull, full.Rho)
	}
	if stats.Scoring == nil || *stats.Scoring != (Scoring{Scored: 2, LeftOut: 1, Cut: 0.2}) {
		t.Errorf("scoring %+v, want 2 scored, 1 left out (group 0 is an anchor)", stats.Scoring)
	}
	// The control: the same batch with group 2's trajectories removed.
	var kept []Trajectory
	for _, tr := range ts {
		if tr.Group != 2 {
			kept = append(kept, tr)
		}
	}
	ctl, _, _ := Step(kept, mode.WMRL, []int{0}, m, st, dcfg, acfg)
	var sum float64
	j := 0
	for i, it := range b.Items {
		sum += it.Weight
		if !near(it.Advantage, full.Items[i].Advantage) || it.Reward != full.Items[i].Reward || it.Graded != full.Items[i].Graded {
			t.Errorf("item %d: reward %v advantage %v, without the selection %v %v", i, it.Reward, it.Advantage,
				full.Items[i].Reward, full.Items[i].Advantage)
		}
		if it.Group == 2 {
			if it.Weight != 0 {
				t.Errorf("left-out item %d has weight %v", i, it.Weight)
			}
			continue
		}
		if !near(it.Weight, ctl.Items[j].Weight) {
			t.Errorf("item %d (group %d): weight %v, the batch without group 2 gives %v", i, it.Group, it.Weight, ctl.Items[j].Weight)
		}
		j++
	}
	if !near(sum, 1) || !(b.Items[0].Weight > full.Items[0].Weight) {
		t.Errorf("weights sum to %v; anchor weight %v, %v without the selection", sum, b.Items[0].Weight, full.Items[0].Weight)
	}
	if !near(stats.AnchorShare, ctl.Items[0].Weight*3) {
		t.Errorf("anchor share %v, want %v", stats.AnchorShare, ctl.Items[0].Weight*3)
	}
	// Everything left out: the step trains on its anchor group alone.
	all := &Selection{LeftOut: []int{0, 1, 2, 3}}
	b, _, stats = StepSelective(ts, mode.WMRL, []int{0}, nil, all, m, st, dcfg, acfg)
	if *stats.Scoring != (Scoring{Scored: 0, LeftOut: 3}) || stats.AnchorShare != 1 {
		t.Errorf("all left out: scoring %+v anchor share %v", stats.Scoring, stats.AnchorShare)
	}
	// Nothing left out: the batch is the one without a selection.
	none := &Selection{LeftOut: []int{}}
	b, _, stats = StepSelective(ts, mode.WMRL, []int{0}, nil, none, m, st, dcfg, acfg)
	for i := range b.Items {
		if b.Items[i] != full.Items[i] {
			t.Fatalf("empty selection: item %d %+v, without %+v", i, b.Items[i], full.Items[i])
		}
	}
	if *stats.Scoring != (Scoring{Scored: 3}) {
		t.Errorf("empty selection: scoring %+v", stats.Scoring)
	}
	// In the anchor mode the non-anchor groups are excluded by the mode,
	// not counted as world-model groups.
	_, _, stats = StepSelective(ts, mode.Anchor, []int{0}, nil, sel, m, denoise.State{}, dcfg, acfg)
	if *stats.Scoring != (Scoring{Cut: 0.2}) {
		t.Errorf("anchor mode: scoring %+v", stats.Scoring)
	}
}
