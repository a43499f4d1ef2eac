package program

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParse(t *testing.T) {
	tests := []struct {
		give string
		want string // canonical form
	}{
		{give: "ridge", want: "ridge alpha=1"},
		{give: "  mean  ", want: "mean"},
		{give: "standardize | clip z=3 | poly degree=2 | select k=8 | gbt trees=100 depth=3 lr=0.1",
			want: "standardize | clip z=3 | poly degree=2 | select k=8 | gbt trees=100 depth=3 lr=0.1"},
		{give: "standardize|knn k=7", want: "standardize | knn k=7"},
		{give: "log1p | pca k=3 | rff gamma=0.5 features=64", want: "log1p | pca k=3 | rff features=64 gamma=0.5 alpha=1"},
		{give: "logistic iters=10 alpha=1e-2", want: "logistic alpha=0.01 iters=10"},
		{give: "clip | clip | clip | clip | mean", want: "clip z=3 | clip z=3 | clip z=3 | clip z=3 | mean"},
		{give: "ridge alpha=0", want: "ridge alpha=0"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			p, err := Parse(tt.give)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := p.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "", want: "col 1: empty program"},
		{give: "   ", want: "col 1: empty program"},
		{give: "standardize | poyl degree=2 | ridge", want: `col 15: unknown step "poyl"`},
		{give: "standardize | rige", want: `col 15: unknown model "rige"`},
		{give: "standardize", want: `col 1: program must end with a model, got step "standardize"`},
		{give: "ridge | standardize", want: `col 1: model "ridge" must be last`},
		{give: "ridge | knn", want: `col 1: model "ridge" must be last`},
		{give: "standardize || ridge", want: "col 14: empty element"},
		{give: "standardize |", want: "col 14: empty element"},
		{give: "standardize | clip z=3 | poly degree=2 | gbt trees=x depth=3", want: `col 52: gbt: trees must be an integer in [1, 2000], got "x"`},
		{give: "gbt trees=2.5", want: `col 11: gbt: trees must be an integer in [1, 2000], got "2.5"`},
		{give: "gbt lr=NaN", want: `col 8: gbt: lr must be a number in [0.001, 1], got "NaN"`},
		{give: "gbt trees", want: `col 5: gbt: expected key=value, got "trees"`},
		{give: "gbt =3", want: `col 5: gbt: expected key=value, got "=3"`},
		{give: "gbt tres=3", want: `col 5: gbt: unknown parameter "tres" (want trees, depth, lr)`},
		{give: "standardize k=3 | mean", want: `col 13: standardize: unknown parameter "k" (it takes none)`},
		{give: "knn k=3 k=4", want: `col 9: knn: duplicate parameter "k"`},
		{give: "clip | clip | clip | clip | clip | mean", want: "col 29: at most 4 preprocessing steps"},
		{give: "ridge alpha=-1", want: `col 13: ridge: alpha must be a number in [0, 1e+06], got "-1"`},
		{give: "ñ | ridge", want: `col 1: unknown step "ñ"`},
		{give: "ñ | rige", want: `col 1: unknown step "ñ"`},
		{give: "standardize | ñ", want: `col 15: unknown model "ñ"`},
		{give: "ridge\u00a0alpha=x", want: `col 13: ridge: alpha must be a number`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := Parse(tt.give)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error %q", tt.give, tt.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %q, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestWrongKindIsNotAParseError(t *testing.T) {
	// The parser knows nothing of tasks: any model parses.
	for _, m := range Models() {
		if _, err := Parse("standardize | " + m); err != nil {
			t.Errorf("Parse(%q): %v", m, err)
		}
	}
}

// genProgram draws a random valid program with in-range (not necessarily
// on-grid) parameter values.
func genProgram(t *rapid.T) Program {
	steps, models := Steps(), Models()
	n := rapid.IntRange(0, MaxSteps).Draw(t, "steps")
	genOp := func(name string) Op {
		s, _ := lookup(name)
		op := Op{Name: name, Params: map[string]float64{}}
		for _, ps := range s.params {
			var v float64
			if ps.integer {
				v = float64(rapid.IntRange(int(ps.min), int(ps.max)).Draw(t, ps.key))
			} else {
				v = rapid.Float64Range(ps.min, ps.max).Draw(t, ps.key)
			}
			op.Params[ps.key] = v
		}
		return op
	}
	var p Program
	for i := 0; i < n; i++ {
		p.Steps = append(p.Steps, genOp(rapid.SampledFrom(steps).Draw(t, "step")))
	}
	p.Model = genOp(rapid.SampledFrom(models).Draw(t, "model"))
	return p
}

func TestStringRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProgram(t)
		if err := p.Validate(); err != nil {
			t.Fatalf("Validate(%v): %v", p, err)
		}
		q, err := Parse(p.String())
		if err != nil {
			t.Fatalf("Parse(%q): %v", p.String(), err)
		}
		if !reflect.DeepEqual(p.Normalize(), q) {
			t.Fatalf("round trip of %q gave %q", p, q)
		}
	})
}

func TestJSONRoundTrip(t *testing.T) {
	p, err := Parse("standardize | select k=4 | gbt trees=10")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q Program
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("JSON round trip: got %+v, want %+v", q, p)
	}
	if q.Model.Name != "gbt" || q.Model.Int("trees") != 10 || q.Model.Int("depth") != 3 {
		t.Errorf("model = %+v", q.Model)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		give Program
		want string
	}{
		{give: Program{Model: Op{Name: "ridge"}}, want: ""},
		{give: Program{Model: Op{Name: "nope"}}, want: `model: unknown operation "nope"`},
		{give: Program{Model: Op{Name: "clip"}}, want: `model: "clip" is a step, not a model`},
		{give: Program{Steps: []Op{{Name: "ridge"}}, Model: Op{Name: "ridge"}}, want: `step 1: model "ridge" must be last`},
		{give: Program{Model: Op{Name: "knn", Params: map[string]float64{"k": 0}}}, want: `model: knn: k must be an integer in [1, 1000], got "0"`},
		{give: Program{Model: Op{Name: "knn", Params: map[string]float64{"j": 1}}}, want: `model: knn: unknown parameter "j"`},
		{give: Program{Steps: make([]Op, 5), Model: Op{Name: "mean"}}, want: "at most 4 preprocessing steps, got 5"},
	}
	for _, tt := range tests {
		err := tt.give.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("Validate(%+v) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestVocab(t *testing.T) {
	v := Vocab()
	if len(v) != VocabSize() {
		t.Fatalf("len(Vocab()) = %d, VocabSize() = %d", len(v), VocabSize())
	}
	if v[BOS] != "<bos>" || v[EOS] != "<eos>" {
		t.Errorf("special tokens = %q, %q", v[BOS], v[EOS])
	}
	seen := map[string]bool{}
	for _, s := range v {
		if seen[s] {
			t.Errorf("duplicate token %q", s)
		}
		seen[s] = true
	}
	for _, s := range opSpecs {
		if !seen[s.name] {
			t.Errorf("operation %q has no token", s.name)
		}
		for _, p := range s.params {
			if !slices.Contains(p.grid, p.def) {
				t.Errorf("%s.%s: default %v is off its grid %v", s.name, p.key, p.def, p.grid)
			}
			for _, g := range p.grid {
				if !p.inRange(g) {
					t.Errorf("%s.%s: grid value %v out of range", s.name, p.key, g)
				}
			}
		}
	}
	if TokenOp(BOS) != "" || TokenOp(len(v)) != "" || TokenOp(slices.Index(v, "gbt.depth=2")) != "gbt" {
		t.Errorf("TokenOp wrong")
	}
}

func TestLegal(t *testing.T) {
	v := Vocab()
	tok := func(s string) int {
		i := slices.Index(v, s)
		if i < 0 {
			t.Fatalf("no token %q", s)
		}
		return i
	}
	names := func(ids []int) []string {
		var out []string
		for _, i := range ids {
			out = append(out, v[i])
		}
		return out
	}
	if got := Legal(nil); !slices.Equal(got, []int{BOS}) {
		t.Errorf("Legal(nil) = %v", names(got))
	}
	if got := names(Legal([]int{BOS})); !slices.Contains(got, "standardize") || !slices.Contains(got, "gbt") || slices.Contains(got, "<eos>") {
		t.Errorf("Legal(BOS) = %v", got)
	}
	if got := names(Legal([]int{BOS, tok("gbt")})); !slices.Equal(got, []string{"gbt.trees=10", "gbt.trees=25", "gbt.trees=50", "gbt.trees=100", "gbt.trees=200", "gbt.trees=400"}) {
		t.Errorf("Legal(BOS gbt) = %v", got)
	}
	if got := Legal([]int{BOS, tok("mean")}); !slices.Equal(got, []int{EOS}) {
		t.Errorf("Legal(BOS mean) = %v", names(got))
	}
	four := []int{BOS, tok("standardize"), tok("log1p"), tok("standardize"), tok("clip"), tok("clip.z=2")}
	for _, n := range names(Legal(four)) {
		if !IsModel(n) {
			t.Errorf("after %d steps, step %q is legal", MaxSteps, n)
		}
	}
	if got := Legal([]int{BOS, tok("mean"), EOS}); got != nil {
		t.Errorf("Legal after EOS = %v", names(got))
	}
	if got := Legal([]int{BOS, tok("gbt.trees=10")}); got != nil {
		t.Errorf("Legal of illegal prefix = %v", names(got))
	}
	if got := Legal([]int{-1}); got != nil {
		t.Errorf("Legal of bad id = %v", names(got))
	}
}

func TestEncode(t *testing.T) {
	p, err := Parse("standardize | clip z=2 | gbt trees=50 depth=2")
	if err != nil {
		t.Fatal(err)
	}
	toks, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	v := Vocab()
	var got []string
	for _, i := range toks {
		got = append(got, v[i])
	}
	want := []string{"<bos>", "standardize", "clip", "clip.z=2", "gbt", "gbt.trees=50", "gbt.depth=2", "gbt.lr=0.1", "<eos>"}
	if !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	// Defaults are on the grid, so omitted parameters encode.
	if _, err := Encode(Program{Model: Op{Name: "rff"}}); err != nil {
		t.Errorf("Encode(rff with defaults): %v", err)
	}
	off, err := Parse("knn k=7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Encode(off); err == nil || !strings.Contains(err.Error(), "knn k=7 is not on the grid") {
		t.Errorf("Encode(off-grid) error = %v", err)
	}
	if _, err := Encode(Program{Model: Op{Name: "bogus"}}); err == nil {
		t.Error("Encode(invalid) succeeded")
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		give []int
	}{
		{"empty", nil},
		{"no bos", []int{EOS}},
		{"no eos", []int{BOS, slices.Index(Vocab(), "mean")}},
		{"eos early", []int{BOS, EOS}},
		{"after eos", []int{BOS, slices.Index(Vocab(), "mean"), EOS, EOS}},
		{"out of range", []int{BOS, 10000}},
	}
	for _, tt := range tests {
		if _, err := Decode(tt.give); err == nil {
			t.Errorf("%s: Decode(%v) succeeded", tt.name, tt.give)
		}
	}
}

// TestLegalWalk: always picking a legal token ends in EOS within MaxTokens,
// and the sequence decodes to a valid program that re-encodes to itself.
func TestLegalWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var toks []int
		for len(toks) == 0 || toks[len(toks)-1] != EOS {
			if len(toks) >= MaxTokens {
				t.Fatalf("no EOS within %d tokens: %v", MaxTokens, toks)
			}
			legal := Legal(toks)
			if len(legal) == 0 {
				t.Fatalf("no legal token after %v", toks)
			}
			toks = append(toks, rapid.SampledFrom(legal).Draw(t, "tok"))
		}
		p, err := Decode(toks)
		if err != nil {
			t.Fatalf("Decode(%v): %v", toks, err)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("decoded program invalid: %v", err)
		}
		again, err := Encode(p)
		if err != nil {
			t.Fatalf("Encode(%v): %v", p, err)
		}
		if !slices.Equal(again, toks) {
			t.Fatalf("re-encoded %v, want %v", again, toks)
		}
		q, err := Parse(p.String())
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("text round trip of %q: %v %v", p, q, err)
		}
	})
}

func TestParams(t *testing.T) {
	ps, ok := Params("gbt")
	if !ok || len(ps) != 3 || ps[0].Key != "trees" || !ps[0].Integer || ps[0].Default != 100 || ps[2].Key != "lr" || ps[2].Integer {
		t.Errorf("Params(gbt) = %+v, %v", ps, ok)
	}
	ps[0].Grid[0] = -1 // a copy: the language is unchanged
	if again, _ := Params("gbt"); again[0].Grid[0] != 10 {
		t.Errorf("Params shares its grid")
	}
	if ps, ok := Params("mean"); !ok || len(ps) != 0 {
		t.Errorf("Params(mean) = %+v, %v", ps, ok)
	}
	if _, ok := Params("nope"); ok {
		t.Error("Params(nope) ok")
	}
}

// FuzzParse checks that Parse never panics on any text, that it rejects
// with a *ParseError at a column of the text, and that a program it
// accepts prints (String) to a text that parses to the same program.
// The seeds below also run in a plain `go test`.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"standardize | ridge alpha=1",
		"ridge",
		"",
		"|",
		"ridge | ridge",
		"standardize",
		"ridge alpha=NaN",
		"ridge alpha=1e999",
		"ridge alpha=0x1p-3",
		"ridge alpha=1 alpha=2",
		"ridge =1",
		"ridge\talpha=1\u00a0",
		"standardize | standardize | standardize | standardize | standardize | standardize | standardize | standardize | ridge",
		"\xff | ridge",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := Parse(text)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): %v is not a *ParseError", text, err)
			}
			if n := len([]rune(text)); pe.Col < 1 || pe.Col > n+1 {
				t.Fatalf("Parse(%q): column %d outside 1..%d", text, pe.Col, n+1)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse(%q) accepted an invalid program: %v", text, err)
		}
		q, err := Parse(p.String())
		if err != nil {
			t.Fatalf("Parse(%q) of the printed Parse(%q): %v", p.String(), text, err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("Parse(%q) = %v, but its text parses to %v", text, p, q)
		}
	})
}
