package anchors

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestCount(t *testing.T) {
	tests := []struct {
		name                string
		groups              int
		fraction            float64
		minAnchors, freeCap int
		want                int
	}{
		{name: "ten percent", groups: 64, fraction: 0.1, minAnchors: 1, freeCap: -1, want: 6},
		{name: "round half up", groups: 25, fraction: 0.1, minAnchors: 0, freeCap: -1, want: 3},
		{name: "round down", groups: 24, fraction: 0.1, minAnchors: 0, freeCap: -1, want: 2},
		{name: "floor wins", groups: 8, fraction: 0.1, minAnchors: 2, freeCap: -1, want: 2},
		{name: "zero fraction no floor", groups: 8, fraction: 0, minAnchors: 0, freeCap: -1, want: 0},
		{name: "zero fraction with floor", groups: 8, fraction: 0, minAnchors: 1, freeCap: -1, want: 1},
		{name: "all", groups: 8, fraction: 1, minAnchors: 0, freeCap: -1, want: 8},
		{name: "floor capped at groups", groups: 3, fraction: 0.1, minAnchors: 5, freeCap: -1, want: 3},
		{name: "capacity cap", groups: 64, fraction: 0.5, minAnchors: 1, freeCap: 10, want: 10},
		{name: "capacity beats floor", groups: 64, fraction: 0.1, minAnchors: 4, freeCap: 2, want: 2},
		{name: "no capacity", groups: 64, fraction: 0.1, minAnchors: 4, freeCap: 0, want: 0},
		{name: "capacity above need", groups: 64, fraction: 0.1, minAnchors: 1, freeCap: 100, want: 6},
		{name: "one group", groups: 1, fraction: 0.1, minAnchors: 0, freeCap: -1, want: 0},
		{name: "one group floor", groups: 1, fraction: 0.1, minAnchors: 1, freeCap: -1, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Count(tt.groups, tt.fraction, tt.minAnchors, tt.freeCap)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Count = %d, want %d", got, tt.want)
			}
			sel, err := Select(1, 0, tt.groups, tt.fraction, tt.minAnchors, tt.freeCap)
			if err != nil {
				t.Fatal(err)
			}
			if len(sel) != tt.want {
				t.Errorf("len(Select) = %d, want %d", len(sel), tt.want)
			}
		})
	}
}

func TestSelectInvalid(t *testing.T) {
	tests := []struct {
		name         string
		step, groups int
		fraction     float64
		minAnchors   int
		wantField    string
	}{
		{name: "no groups", groups: 0, fraction: 0.1, wantField: "groups"},
		{name: "negative fraction", groups: 4, fraction: -0.1, wantField: "fraction"},
		{name: "fraction above one", groups: 4, fraction: 1.5, wantField: "fraction"},
		{name: "NaN fraction", groups: 4, fraction: math.NaN(), wantField: "fraction"},
		{name: "negative floor", groups: 4, fraction: 0.1, minAnchors: -1, wantField: "minAnchors"},
		{name: "negative step", step: -1, groups: 4, fraction: 0.1, wantField: "step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Select(1, tt.step, tt.groups, tt.fraction, tt.minAnchors, -1)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), tt.wantField+":") {
				t.Errorf("error %q does not name %s", err, tt.wantField)
			}
		})
	}
}

func TestSelectPinned(t *testing.T) {
	// Regression guard: a change here changes the anchors of every resumed run.
	got, err := Select(42, 3, 20, 0.25, 1, -1)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{3, 5, 6, 7, 10}
	if !slices.Equal(got, want) {
		t.Errorf("Select(42, 3, 20, 0.25, 1, -1) = %v, want %v", got, want)
	}
}

func TestSelectDeterministicAndStepDependent(t *testing.T) {
	const groups, steps = 64, 200
	var prev []int
	same := 0
	for step := range steps {
		a, err := Select(7, step, groups, 0.1, 1, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Select(7, step, groups, 0.1, 1, -1)
		if !slices.Equal(a, b) {
			t.Fatalf("step %d: %v then %v", step, a, b)
		}
		if slices.Equal(a, prev) {
			same++
		}
		prev = a
	}
	// Two independent 6-of-64 choices coincide with probability
	// 1/C(64,6) ~ 1.3e-8; allow none.
	if same != 0 {
		t.Errorf("%d consecutive steps chose the same groups", same)
	}
	// Different run seeds choose differently at the same step.
	a, _ := Select(1, 5, groups, 0.1, 1, -1)
	b, _ := Select(2, 5, groups, 0.1, 1, -1)
	if slices.Equal(a, b) {
		t.Errorf("run seeds 1 and 2 chose the same groups %v", a)
	}
}

func TestSelectFrequency(t *testing.T) {
	// Over many steps each group is an anchor in about fraction of them.
	const groups, steps, fraction = 20, 4000, 0.25
	counts := make([]int, groups)
	for step := range steps {
		sel, err := Select(99, step, groups, fraction, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range sel {
			counts[g]++
		}
	}
	// Each count is Binomial(4000, 0.25): mean 1000, sd ~27.4. Allow 5 sd.
	mean := float64(steps) * fraction
	sd := math.Sqrt(float64(steps) * fraction * (1 - fraction))
	for g, c := range counts {
		if math.Abs(float64(c)-mean) > 5*sd {
			t.Errorf("group %d chosen %d times of %d, want about %.0f", g, c, steps, mean)
		}
	}
}

func TestSelectProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		runSeed := rapid.Uint64().Draw(t, "runSeed")
		step := rapid.IntRange(0, 1_000_000).Draw(t, "step")
		groups := rapid.IntRange(1, 200).Draw(t, "groups")
		fraction := rapid.Float64Range(0, 1).Draw(t, "fraction")
		minAnchors := rapid.IntRange(0, 250).Draw(t, "minAnchors")
		freeCap := rapid.IntRange(-1, 250).Draw(t, "freeCap")

		k, err := Count(groups, fraction, minAnchors, freeCap)
		if err != nil {
			t.Fatal(err)
		}
		sel, err := Select(runSeed, step, groups, fraction, minAnchors, freeCap)
		if err != nil {
			t.Fatal(err)
		}
		if len(sel) != k {
			t.Fatalf("len = %d, want %d", len(sel), k)
		}
		if k > groups || (freeCap >= 0 && k > freeCap) {
			t.Fatalf("k = %d exceeds groups %d or capacity %d", k, groups, freeCap)
		}
		if want := min(groups, max(minAnchors, int(math.Round(fraction*float64(groups))))); freeCap < 0 && k != want {
			t.Fatalf("k = %d, want %d", k, want)
		}
		for i, g := range sel {
			if g < 0 || g >= groups {
				t.Fatalf("index %d out of range [0, %d)", g, groups)
			}
			if i > 0 && g <= sel[i-1] {
				t.Fatalf("not sorted and unique: %v", sel)
			}
		}
		// Nested: fewer anchors at the same step choose a subset.
		smaller, err := Select(runSeed, step, groups, fraction, minAnchors, k/2)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range smaller {
			if _, found := slices.BinarySearch(sel, g); !found {
				t.Fatalf("k=%d choice %v not a subset of k=%d choice %v", k/2, smaller, k, sel)
			}
		}
	})
}

func TestSelectNeverNil(t *testing.T) {
	sel, err := Select(1, 0, 5, 0, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sel)
	if string(b) != "[]" {
		t.Errorf("empty selection encodes as %s, want []", b)
	}
}

func TestTracker(t *testing.T) {
	var tr Tracker
	if got := tr.Realised(); got != 0 {
		t.Errorf("empty Realised = %v, want 0", got)
	}
	tr.Add(64, 6)
	tr.Add(64, 7)
	tr.Add(32, 3)
	if got, want := tr.Realised(), 16.0/160; got != want {
		t.Errorf("Realised = %v, want %v", got, want)
	}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"groups":160,"anchors":16}` {
		t.Errorf("JSON = %s", b)
	}
	var back Tracker
	if err := json.Unmarshal(b, &back); err != nil || back != tr {
		t.Errorf("round trip = %+v, %v", back, err)
	}
}

func TestTrackerAddPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Add(4, 5) did not panic")
		}
	}()
	var tr Tracker
	tr.Add(4, 5)
}
