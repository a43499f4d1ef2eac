package worldmodel

import (
	"math"
	"strings"
	"testing"
)

func TestOnPolicy(t *testing.T) {
	var pairs []Pair
	add := func(group string, step int, wm, env []float64) {
		for i := range wm {
			pairs = append(pairs, Pair{Group: group, Step: step, WM: wm[i], Env: env[i]})
		}
	}
	// Steps 0-9: one group ranked perfectly, one inversely.
	add("a", 1, []float64{0.1, 0.2, 0.3}, []float64{0.2, 0.4, 0.6})
	add("b", 3, []float64{0.1, 0.2, 0.3}, []float64{0.6, 0.4, 0.2})
	// Steps 10-19: one ranked group, one with tied real scores (no rank).
	add("c", 12, []float64{0.5, 0.6, 0.7}, []float64{0.1, 0.3, 0.2})
	add("d", 19, []float64{0.5, 0.6, 0.9}, []float64{0.5, 0.5, 0.5})
	// Step 25 only: constant world model, so no group is ranked.
	add("e", 25, []float64{0.4, 0.4}, []float64{0.1, 0.9})

	got, err := OnPolicy(pairs, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d ranges: %+v", len(got), got)
	}
	r0, r1, r2 := got[0], got[1], got[2]
	if r0.From != 0 || r0.To != 9 || r0.Pairs != 6 || r0.Groups != 2 || r0.Ranked != 2 || r0.Tied != 0 || math.Abs(r0.Spearman) > 1e-12 {
		t.Errorf("steps 0-9: %+v", r0)
	}
	if want := (1.2 - 2.4) / 6; math.Abs(r0.Bias-want) > 1e-12 {
		t.Errorf("steps 0-9 bias %v, want %v", r0.Bias, want)
	}
	if r1.From != 10 || r1.To != 19 || r1.Groups != 2 || r1.Ranked != 1 || r1.Tied != 1 || math.Abs(r1.Spearman-0.5) > 1e-12 {
		t.Errorf("steps 10-19: %+v", r1)
	}
	if r2.From != 20 || r2.Groups != 1 || r2.Ranked != 0 || r2.Spearman != 0 || r2.Tied != 0 {
		t.Errorf("steps 20-29: %+v", r2)
	}

	// Ranges of one step each, and bad input.
	one, err := OnPolicy(pairs, 1)
	if err != nil || len(one) != 5 || one[4].From != 25 || one[4].To != 25 {
		t.Errorf("every 1: %+v %v", one, err)
	}
	if _, err := OnPolicy(pairs, 0); err == nil {
		t.Error("every 0 accepted")
	}
	bad := append([]Pair(nil), pairs...)
	bad[3].Env = math.NaN()
	if _, err := OnPolicy(bad, 10); err == nil || !strings.Contains(err.Error(), "pair 3 (group b)") {
		t.Errorf("NaN: %v", err)
	}
	if got, err := OnPolicy(nil, 10); err != nil || len(got) != 0 {
		t.Errorf("no pairs: %v %v", got, err)
	}
}
