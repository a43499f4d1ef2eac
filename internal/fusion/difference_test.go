package fusion

import (
	"testing"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
)

// diffFixture is a step of 6 groups of 4 in which every group holds the
// same four (real, world-model) score pairs, rotated over its samples, so
// that each group's within-group correlation (and so the gate's mean and λ)
// is the same whichever groups are the anchors. grad gives each trajectory
// a fixed stand-in for ∇log π, in R³, so that a batch's update is the
// vector Σ Weight·Advantage·grad.
func diffFixture() (ts []Trajectory, grad func(g, s int) [3]float64) {
	pairs := [4][2]float64{{0.1, 0.5}, {0.4, 0.3}, {0.5, 0.6}, {0.9, 0.8}}
	for g := range 6 {
		for s := range 4 {
			p := pairs[(s+g)%4]
			ts = append(ts, Trajectory{Group: g, Sample: s, TaskID: "t", Program: "mean", Env: fp(p[0]), WM: fp(p[1])})
		}
	}
	grad = func(g, s int) [3]float64 {
		x := uint64(g*4+s)*2654435761 + 12345
		var v [3]float64
		for k := range v {
			x = x*6364136223846793005 + 1442695040888963407
			v[k] = float64(x>>40)/float64(1<<24) - 0.5
		}
		v[0] += 0.3 * float64(s%2) // odd samples share a direction
		return v
	}
	return ts, grad
}

func update(b Batch, grad func(g, s int) [3]float64) [3]float64 {
	var u [3]float64
	for _, it := range b.Items {
		d := grad(it.Group, it.Sample)
		for k := range u {
			u[k] += it.Weight * it.Advantage * d[k]
		}
	}
	return u
}

// TestDifferenceUnbiasedOverAnchorDraws: averaged over every draw of 2
// anchor groups of 6, the difference estimator's update is the anchor
// control's, which is GRPO's with every program executed, for a world model
// whose scores disagree with the real ones; the paper's fused update is
// not (the bias the estimator removes), and the estimator's spread over the
// draws is below the control's.
func TestDifferenceUnbiasedOverAnchorDraws(t *testing.T) {
	ts, grad := diffFixture()
	m := isotonic.Map{X: []float64{0, 1}, Y: []float64{0, 1}}
	acfg := advantage.Default()
	fused := denoise.Config{HalfLife: 4, WarmUp: 2, RhoMax: 10, SignalWindow: 16}
	diff := fused
	diff.Estimator = denoise.EstimatorDifference
	// Earlier steps fill the gate's window with the groups' (equal)
	// correlations, so that the gate is open and λ the same in every draw.
	var st denoise.State
	for range 3 {
		_, st, _ = Step(ts, mode.WMRL, []int{0, 1}, m, st, diff, acfg)
	}
	grpo, _, _ := Step(ts, mode.GRPO, nil, m, denoise.State{}, fused, acfg)
	want := update(grpo, grad)

	var sumDiff, sumCtl, sumFused [3]float64
	var ssDiff, ssCtl float64
	var lambda float64
	draws := 0
	for a := range 6 {
		for b := a + 1; b < 6; b++ {
			anchors := []int{a, b}
			bd, _, stats := Step(ts, mode.WMRL, anchors, m, st, diff, acfg)
			if stats.Gate == nil || !stats.Gate.Open || stats.Gate.Lambda == nil || *stats.Gate.Lambda <= 0 {
				t.Fatalf("anchors %v: gate %+v, want open with λ > 0", anchors, stats.Gate)
			}
			if draws > 0 && !near(*stats.Gate.Lambda, lambda) {
				t.Fatalf("anchors %v: λ %v, another draw's %v", anchors, *stats.Gate.Lambda, lambda)
			}
			lambda = *stats.Gate.Lambda
			bc, _, _ := Step(ts, mode.Anchor, anchors, m, denoise.State{}, fused, acfg)
			bf, _, _ := Step(ts, mode.WMRL, anchors, m, st, fused, acfg)
			ud, uc, uf := update(bd, grad), update(bc, grad), update(bf, grad)
			for k := range 3 {
				sumDiff[k] += ud[k]
				sumCtl[k] += uc[k]
				sumFused[k] += uf[k]
				ssDiff += (ud[k] - want[k]) * (ud[k] - want[k])
				ssCtl += (uc[k] - want[k]) * (uc[k] - want[k])
			}
			draws++
		}
	}
	var fusedBias float64
	for k := range 3 {
		d, c := sumDiff[k]/float64(draws), sumCtl[k]/float64(draws)
		if !near(c, want[k]) || !near(d, want[k]) {
			t.Errorf("component %d: mean update difference %v, control %v, want GRPO's %v", k, d, c, want[k])
		}
		fusedBias += abs(sumFused[k]/float64(draws) - want[k])
	}
	if fusedBias < 1e-3 {
		t.Errorf("the fused update's mean is GRPO's too (bias %v): the fixture shows nothing", fusedBias)
	}
	if !(ssDiff < ssCtl) {
		t.Errorf("spread over the draws: difference %v, control %v; want below", ssDiff, ssCtl)
	}
	t.Logf("λ %.3f; mean squared error over %d draws: difference %.5f, control %.5f; fused bias %.4f",
		lambda, draws, ssDiff/float64(draws), ssCtl/float64(draws), fusedBias)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestDifferenceWithoutSignalIsTheControl: while λ is 0 (the window too
// short to test, or the gate closed on a world model that misranks) the
// difference estimator's examples are the anchor control's.
func TestDifferenceWithoutSignalIsTheControl(t *testing.T) {
	ts, _ := diffFixture()
	m := isotonic.Map{X: []float64{0, 1}, Y: []float64{0, 1}}
	acfg := advantage.Default()
	dcfg := denoise.Config{HalfLife: 4, WarmUp: 2, RhoMax: 10, SignalWindow: 16, Estimator: denoise.EstimatorDifference}
	reversed := append([]Trajectory(nil), ts...)
	for i := range reversed {
		reversed[i].WM = fp(1 - *ts[i].Env)
	}
	var closed denoise.State
	for range 3 {
		_, closed, _ = Step(reversed, mode.WMRL, []int{2, 4}, m, closed, dcfg, acfg)
	}
	card := func(string) ([]float64, error) { return []float64{0.5}, nil }
	for _, tt := range []struct {
		name string
		ts   []Trajectory
		st   denoise.State
	}{
		{"first step (2 groups in the window)", ts, denoise.State{}},
		{"gate closed", reversed, closed},
	} {
		b, _, stats := Step(tt.ts, mode.WMRL, []int{2, 4}, m, tt.st, dcfg, acfg)
		if stats.Gate == nil || stats.Gate.Lambda == nil || *stats.Gate.Lambda != 0 {
			t.Fatalf("%s: gate %+v, want λ 0", tt.name, stats.Gate)
		}
		ctl, _, _ := Step(tt.ts, mode.Anchor, []int{2, 4}, m, denoise.State{}, dcfg, acfg)
		got, err := Examples(b, card)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Examples(ctl, card)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(got) != 8 {
			t.Fatalf("%s: %d examples, the control %d (want 8)", tt.name, len(got), len(want))
		}
		for i := range got {
			if !near(got[i].Weight, want[i].Weight) || !near(got[i].Advantage, want[i].Advantage) {
				t.Errorf("%s: example %d weight %v advantage %v, the control's %v %v", tt.name, i,
					got[i].Weight, got[i].Advantage, want[i].Weight, want[i].Advantage)
			}
		}
		if stats.AnchorShare != 1 {
			t.Errorf("%s: anchor share %v, want 1", tt.name, stats.AnchorShare)
		}
	}
}

// TestDifferenceItems: an anchor trajectory keeps its GRPO advantage A and
// its world-model advantage Â, and trains on (1+λ)(A − λÂ) at weight
// 1/(n(1+λ)); a world-model trajectory on (1+λ)·A at λ/(m(1+λ)).
func TestDifferenceItems(t *testing.T) {
	ts, _ := diffFixture()
	m := isotonic.Map{X: []float64{0, 1}, Y: []float64{0, 1}}
	acfg := advantage.Default()
	dcfg := denoise.Config{HalfLife: 4, WarmUp: 2, RhoMax: 10, SignalWindow: 16, Estimator: denoise.EstimatorDifference}
	var st denoise.State
	for range 2 {
		_, st, _ = Step(ts, mode.WMRL, []int{0, 3}, m, st, dcfg, acfg)
	}
	b, _, stats := Step(ts, mode.WMRL, []int{0, 3}, m, st, dcfg, acfg)
	lam := *stats.Gate.Lambda
	if want := denoise.Lambda(*stats.Gate, 8, 16); !near(lam, want) || lam <= 0 {
		t.Fatalf("λ %v, want denoise.Lambda %v > 0", lam, want)
	}
	if b.Gate == nil || b.Gate.Lambda == nil || *b.Gate.Lambda != lam {
		t.Errorf("the batch's gate %+v does not carry λ %v", b.Gate, lam)
	}
	var wsum float64
	for _, it := range b.Items {
		wsum += it.Weight
		if it.Anchor {
			// Â of the anchor group's world-model scores, by hand.
			var d []float64
			for _, u := range ts {
				if u.Group == it.Group {
					d = append(d, *u.WM)
				}
			}
			ahat, _ := advantage.Group(d, nil, acfg)
			if !near(it.Control, ahat[it.Sample]) {
				t.Errorf("anchor %d/%d: control %v, want %v", it.Group, it.Sample, it.Control, ahat[it.Sample])
			}
			if !near(it.Advantage, (1+lam)*(it.GroupAdvantage-lam*it.Control)) || !near(it.Weight, 1/(8*(1+lam))) {
				t.Errorf("anchor %+v with λ %v", it, lam)
			}
			continue
		}
		if it.Control != 0 || !near(it.Advantage, (1+lam)*it.GroupAdvantage) || !near(it.Weight, lam/(16*(1+lam))) {
			t.Errorf("world-model item %+v with λ %v", it, lam)
		}
	}
	if !near(wsum, 1) || !near(stats.AnchorShare, 1/(1+lam)) {
		t.Errorf("weights sum to %v, anchor share %v; want 1 and %v", wsum, stats.AnchorShare, 1/(1+lam))
	}
}
