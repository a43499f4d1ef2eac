package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/tabular"
)

// smallOptions is a suite that covers every (kind, family) in both splits
// but builds in well under a second: few rows, few features, a short panel.
func smallOptions(seed uint64) Options {
	return Options{Seed: seed, Train: 13, HeldOut: 13, MinRows: 150, MaxRows: 260, MaxFeatures: 8, PanelSize: 6}
}

var small struct {
	once sync.Once
	s    *Suite
	err  error
}

// smallSuite builds smallOptions(7) once for the tests that only read it.
func smallSuite(t *testing.T) *Suite {
	t.Helper()
	small.once.Do(func() { small.s, small.err = Generate(context.Background(), smallOptions(7)) })
	if small.err != nil {
		t.Fatal(small.err)
	}
	return small.s
}

func TestGenerateDeterministic(t *testing.T) {
	ctx := context.Background()
	a := smallSuite(t)
	b, err := generate(ctx, smallOptions(7), engineScore, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash || !bytes.Equal(encodeSuite(a), encodeSuite(b)) {
		t.Fatalf("same options, different suites: %s vs %s", a.Hash, b.Hash)
	}
	if !reflect.DeepEqual(a.Tasks[5].Card, b.Tasks[5].Card) || a.Tasks[5].Question != b.Tasks[5].Question {
		t.Fatal("same options, different cards or questions")
	}
	c, err := Generate(ctx, smallOptions(8))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash == a.Hash {
		t.Fatal("different seeds gave the same hash")
	}
	same := 0
	for i := range a.Tasks {
		if mat.Equal(a.Tasks[i].Data.XTrain, c.Tasks[i].Data.XTrain) {
			same++
		}
		if a.Tasks[i].ID != c.Tasks[i].ID {
			t.Errorf("task %d: id %s vs %s: ids should depend on the position only", i, a.Tasks[i].ID, c.Tasks[i].ID)
		}
	}
	if same != 0 {
		t.Fatalf("%d tasks have the same training data under different seeds", same)
	}
	if TaskSeed(7, 0) == TaskSeed(7, 1) || TaskSeed(7, 0) == TaskSeed(8, 0) {
		t.Fatal("task seeds collide")
	}
}

func TestDefaultSuiteShape(t *testing.T) {
	// The default sizes and families, with a one-program panel so that the
	// test stays fast; TestDefaultSuiteBuild covers the full panel.
	opts := DefaultOptions(DefaultSeed)
	opts.PanelSize = 1
	s, err := Generate(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Split(Train)) != 48 || len(s.Split(HeldOut)) != 16 {
		t.Fatalf("got %d train, %d held-out tasks", len(s.Split(Train)), len(s.Split(HeldOut)))
	}
	checkTasks(t, s)
	minRows, maxRows, minFeat, maxFeat := math.MaxInt, 0, math.MaxInt, 0
	for _, tk := range s.Tasks {
		n := tk.Card.TrainRows + tk.Card.TestRows
		p := len(tk.Card.Features)
		minRows, maxRows = min(minRows, n), max(maxRows, n)
		minFeat, maxFeat = min(minFeat, p), max(maxFeat, p)
	}
	if minRows < DefaultMinRows || maxRows > DefaultMaxRows || maxRows < 1500 || minRows > 600 {
		t.Errorf("rows span [%d, %d], want a spread within [%d, %d]", minRows, maxRows, DefaultMinRows, DefaultMaxRows)
	}
	if minFeat < 4 || maxFeat > 64 || minFeat > 6 || maxFeat < 40 {
		t.Errorf("features span [%d, %d], want a spread within [4, 64]", minFeat, maxFeat)
	}
}

// checkTasks verifies the invariants every suite has.
func checkTasks(t *testing.T, s *Suite) {
	t.Helper()
	idPattern := regexp.MustCompile(`^(reg|clf)-(linear|sparse|interactions|nonlinear|outliers|imbalance|irrelevant)-\d{3}$`)
	seen := map[string]bool{}
	cover := map[Split]map[combo]bool{Train: {}, HeldOut: {}}
	for i, tk := range s.Tasks {
		if !idPattern.MatchString(tk.ID) || seen[tk.ID] {
			t.Errorf("task %d: bad or duplicate id %q", i, tk.ID)
		}
		seen[tk.ID] = true
		cover[tk.Split][combo{tk.Kind, tk.Family}] = true
		if tk.Family == Imbalance && tk.Kind != tabular.Classification {
			t.Errorf("%s: imbalance on a regression task", tk.ID)
		}
		lo, hi := featureRange(tk.Family)
		hi = min(hi, s.Options.MaxFeatures)
		lo = min(lo, hi)
		if p := len(tk.Card.Features); p < lo || p > hi {
			t.Errorf("%s: %d features outside [%d, %d]", tk.ID, p, lo, hi)
		}
		if err := tk.Data.Check(); err != nil {
			t.Errorf("%s: %v", tk.ID, err)
		}
		if tk.Card.TestRows < minTestRows {
			t.Errorf("%s: %d test rows", tk.ID, tk.Card.TestRows)
		}
		if tk.Kind == tabular.Classification {
			for name, y := range map[string][]float64{"train": tk.Data.YTrain, "test": tk.Data.YTest} {
				pos := 0
				for _, v := range y {
					if v == 1 {
						pos++
					}
				}
				if pos < 2 || pos > len(y)-2 {
					t.Errorf("%s: %s split has %d positives of %d", tk.ID, name, pos, len(y))
				}
			}
		}
		if tk.Question == "" || tk.Metric != MetricFor(tk.Kind) {
			t.Errorf("%s: question %q, metric %q", tk.ID, tk.Question, tk.Metric)
		}
		if v := tk.Card.Vector(); len(v) != VectorLen || slices.ContainsFunc(v, func(x float64) bool { return math.IsNaN(x) || math.Abs(x) > 2 }) {
			t.Errorf("%s: card vector %v", tk.ID, v)
		}
	}
	for _, sp := range []Split{Train, HeldOut} {
		if want := min(len(combos), len(s.Split(sp))); len(cover[sp]) != want {
			t.Errorf("%s split covers %d (kind, family) pairs, want %d", sp, len(cover[sp]), want)
		}
	}
}

func TestSmallSuiteInvariants(t *testing.T) {
	checkTasks(t, smallSuite(t))
}

func TestCardExcludesTestLabels(t *testing.T) {
	s := smallSuite(t)
	for _, tk := range s.Tasks {
		want := NewCard(tk.Data)
		d := *tk.Data
		d.YTest = slices.Clone(d.YTest)
		for i := range d.YTest {
			if d.Kind == tabular.Classification {
				d.YTest[i] = 1 - d.YTest[i]
			} else {
				d.YTest[i] = -1000 * d.YTest[i]
			}
		}
		if got := NewCard(&d); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the card changes with the test labels", tk.ID)
		}
		if !reflect.DeepEqual(tk.Card, want) {
			t.Fatalf("%s: stored card differs from the recomputed one", tk.ID)
		}
		b, err := json.Marshal(tk)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("YTest")) || bytes.Contains(b, []byte("XTest")) {
			t.Fatalf("%s: JSON form carries the test split", tk.ID)
		}
	}
}

func TestCardVectorFixedLength(t *testing.T) {
	s := smallSuite(t)
	for _, p := range []int{1, 4, 64} {
		d := &tabular.Dataset{
			Kind:   tabular.Regression,
			XTrain: mat.NewDense(50, p, nil),
			YTrain: make([]float64, 50),
			XTest:  mat.NewDense(10, p, nil),
			YTest:  make([]float64, 10),
		}
		r := newRNG(uint64(p))
		for i := range d.YTrain {
			for j := range p {
				d.XTrain.Set(i, j, r.norm())
			}
			d.YTrain[i] = d.XTrain.At(i, 0) + r.norm()
		}
		if v := NewCard(d).Vector(); len(v) != VectorLen {
			t.Errorf("%d features: vector of %d", p, len(v))
		}
	}
	// The vector reflects the kind and the class balance.
	for _, tk := range s.Tasks {
		v := tk.Card.Vector()
		if (v[0] == 1) != (tk.Kind == tabular.Classification) || v[31] != 1 {
			t.Errorf("%s: kind or bias entry wrong: %v", tk.ID, v)
		}
		if tk.Family == Imbalance && v[5] > 0.4 {
			t.Errorf("%s: class balance entry %g for an imbalanced task", tk.ID, v[5])
		}
	}
}

func TestPosition(t *testing.T) {
	lb := []float64{0.9, 0.8, 0.8, 0.5} // N = 4
	tests := []struct {
		name string
		give float64
		want float64
	}{
		{"beats all", 1.0, 1},
		{"ties best", 0.9, 1},
		{"between first and second", 0.85, 0.75},
		{"ties the two seconds", 0.8, 0.75},
		{"below the seconds", 0.7, 0.25},
		{"ties worst", 0.5, 0.25},
		{"worse than all", 0.1, 0.25},
		{"minus infinity", math.Inf(-1), 0.25},
		{"plus infinity", math.Inf(1), 1},
		{"NaN counts as worst", math.NaN(), 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PositionIn(lb, tt.give); got != tt.want {
				t.Fatalf("PositionIn(%v, %v) = %v, want %v", lb, tt.give, got, tt.want)
			}
		})
	}
	if got := PositionIn(nil, 1); got != 0 {
		t.Fatalf("empty leaderboard: %v", got)
	}
	// Order of the leaderboard does not matter; Position reads the task's.
	tk := &Task{Leaderboard: []float64{0.5, 0.9, 0.8, 0.8}}
	if got := Position(tk, 0.85); got != 0.75 {
		t.Fatalf("Position on an unsorted leaderboard = %v", got)
	}
}

func TestLeaderboards(t *testing.T) {
	ctx := context.Background()
	s := smallSuite(t)
	for _, tk := range s.Tasks {
		lb := tk.Leaderboard
		if len(lb) != s.Options.PanelSize {
			t.Fatalf("%s: %d scores, want %d", tk.ID, len(lb), s.Options.PanelSize)
		}
		for i := 1; i < len(lb); i++ {
			if lb[i] > lb[i-1] {
				t.Fatalf("%s: leaderboard not sorted best first: %v", tk.ID, lb)
			}
		}
		if lb[0] == lb[len(lb)-1] {
			t.Errorf("%s: every reference scores %g", tk.ID, lb[0])
		}
		// The example program is valid, canonical and really scores the top.
		p, err := program.Parse(tk.ExampleProgram)
		if err != nil || p.String() != tk.ExampleProgram {
			t.Fatalf("%s: example program %q: %v", tk.ID, tk.ExampleProgram, err)
		}
		j := panelIndex(tk.Kind, s.Options.PanelSize, tk.ExampleProgram)
		v, err := engineScore(ctx, tk.ExampleProgram, tk.Data, panelSeed(tk.Seed, j))
		if err != nil || v != lb[0] {
			t.Fatalf("%s: example program scores %v (%v), leaderboard top %v", tk.ID, v, err, lb[0])
		}
		if Position(tk, v) != 1 || Position(tk, lb[len(lb)-1]) != 1/float64(len(lb)) {
			t.Fatalf("%s: positions of the best and worst reference are wrong", tk.ID)
		}
	}
}

func TestPanel(t *testing.T) {
	if panelLen() < 40 {
		t.Fatalf("panel has %d programs, want at least 40", panelLen())
	}
	for _, k := range []tabular.Kind{tabular.Regression, tabular.Classification} {
		ps := Panel(k, 0)
		seen := map[string]bool{}
		for _, p := range ps {
			if seen[p] {
				t.Errorf("%s panel: duplicate %q", k, p)
			}
			seen[p] = true
		}
		for _, text := range ps {
			p, err := program.Parse(text)
			if err != nil {
				t.Fatalf("%s panel: %q: %v", k, text, err)
			}
			if _, err := program.Encode(p); err != nil {
				t.Errorf("%s panel: %q has no token form: %v", k, text, err)
			}
		}
		if got := Panel(k, 3); !slices.Equal(got, ps[:3]) {
			t.Errorf("%s: Panel(k, 3) = %v", k, got)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		give func(*Options)
		ok   bool
	}{
		{"default", func(*Options) {}, true},
		{"no tasks", func(o *Options) { o.Train, o.HeldOut = 0, 0 }, false},
		{"negative", func(o *Options) { o.HeldOut = -1 }, false},
		{"rows reversed", func(o *Options) { o.MinRows, o.MaxRows = 500, 400 }, false},
		{"too few rows", func(o *Options) { o.MinRows = 50 }, false},
		{"too many features", func(o *Options) { o.MaxFeatures = 65 }, false},
		{"too few features", func(o *Options) { o.MaxFeatures = 3 }, false},
		{"panel too big", func(o *Options) { o.PanelSize = panelLen() + 1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions(1)
			tt.give(&o)
			if err := o.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok {
				if _, err := Generate(context.Background(), o); err == nil {
					t.Fatal("Generate accepted invalid options")
				}
			}
		})
	}
}

func TestSuiteTaskLookup(t *testing.T) {
	s := smallSuite(t)
	id := s.Tasks[3].ID
	if tk, err := s.Task(id); err != nil || tk != s.Tasks[3] {
		t.Fatalf("Task(%q) = %v, %v", id, tk, err)
	}
	if _, err := s.Task("reg-nothing-999"); err == nil || !regexp.MustCompile(`reg-nothing-999`).MatchString(err.Error()) {
		t.Fatalf("unknown task error %v does not name the task", err)
	}
	if got := s.IDs(); len(got) != len(s.Tasks) || got[3] != id {
		t.Fatalf("IDs() = %v", got)
	}
}
