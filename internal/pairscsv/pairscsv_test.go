package pairscsv

import (
	"errors"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/wmrl/wmrl/internal/debias"
)

func TestReadPairs(t *testing.T) {
	tests := []struct {
		name        string
		give        string
		want        []debias.Pair
		wantGrouped bool
	}{
		{
			name: "plain",
			give: "wm,env\n0.1,0.2\n0.5,1\n",
			want: []debias.Pair{{WM: 0.1, Env: 0.2}, {WM: 0.5, Env: 1}},
		},
		{
			name: "columns in any order, no trailing newline",
			give: "env,wm\n0.2,0.1\n0,0.75",
			want: []debias.Pair{{WM: 0.1, Env: 0.2}, {WM: 0.75, Env: 0}},
		},
		{
			name:        "group, CRLF, spaces, BOM, upper-case header",
			give:        "\ufeffGroup, WM ,env\r\ng1, 0.25 ,0.5\r\n\"g,2\",1,1e-1\r\n",
			want:        []debias.Pair{{WM: 0.25, Env: 0.5, Group: "g1"}, {WM: 1, Env: 0.1, Group: "g,2"}},
			wantGrouped: true,
		},
		{
			name: "blank lines skipped",
			give: "wm,env\n\n0.1,0.2\n\n",
			want: []debias.Pair{{WM: 0.1, Env: 0.2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, grouped, err := ReadPairs(strings.NewReader(tt.give))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) || grouped != tt.wantGrouped {
				t.Fatalf("ReadPairs = %+v, %v; want %+v, %v", got, grouped, tt.want, tt.wantGrouped)
			}
		})
	}
}

func TestReadPairsErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string // the whole message
	}{
		{"empty", "", "line 1: empty file, want a header with wm, env and optionally group"},
		{"only blank lines", "\n\n", "line 1: empty file, want a header with wm, env and optionally group"},
		{"header only", "wm,env\n", "line 1: no data rows after the header"},
		{"missing env", "wm\n0.1\n", `line 1: header: missing column "env", want wm, env and optionally group`},
		{"unknown column", "wm,env,score\n0.1,0.2,3\n", `line 1: header: unknown column "score", want wm, env and optionally group`},
		{"duplicate column", "wm,env,wm\n", `line 1: header: column "wm" appears twice`},
		{"unnamed column", "wm,,env\n", "line 1: header: column 2 has no name, want wm, env and optionally group"},
		{"not a number", "wm,env\n0.1,0.2\n0.3,0.4\n0.1,0.2\n0.3,0.4\n0.1,0.2\n0.5,abc\n", `line 7: env: "abc" is not a number`},
		{"line after blank", "wm,env\n\n0.1,x\n", `line 3: env: "x" is not a number`},
		{"crlf line number", "wm,env\r\n0.1,0.2\r\n7,0.2\r\n", `line 3: wm: "7" is outside [0, 1]`},
		{"negative", "env,wm\n0.1,-0.5\n", `line 2: wm: "-0.5" is outside [0, 1]`},
		{"nan", "wm,env\nNaN,0.5\n", `line 2: wm: "NaN" is not a finite number`},
		{"inf", "wm,env\n0.5,+Inf\n", `line 2: env: "+Inf" is not a finite number`},
		{"overflow", "wm,env\n0.5,1e999\n", `line 2: env: "1e999" is not a finite number`},
		{"empty value", "wm,env\n0.5,\n", "line 2: env: empty value"},
		{"too many values", "wm,env\n0.1,0.2,0.3\n", "line 2: 3 values, but the header has 2 columns"},
		{"too few values", "wm,env,group\n0.1,0.2,a\n0.1,0.2\n", "line 3: 2 values, but the header has 3 columns"},
		{"empty group", "wm,env,group\n0.1,0.2, \n", "line 2: group: empty group name"},
		{"bad quote", "wm,env\n0.1,0\"2\n", `line 2: bare " in non-quoted-field (byte 6)`},
		{"long value clipped", "wm,env\n0.1," + strings.Repeat("9", 60) + "x\n", `line 2: env: "` + strings.Repeat("9", 40) + `..." is not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := ReadPairs(strings.NewReader(tt.give))
			if err == nil {
				t.Fatalf("ReadPairs = %+v, want error %q", got, tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("error %q, want %q", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Line < 1 {
				t.Fatalf("error %v is not an *Error with a line", err)
			}
		})
	}
}

func TestReadPairsReadError(t *testing.T) {
	r := iotest.ErrReader(errors.New("disk on fire"))
	if _, _, err := ReadPairs(r); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("ReadPairs = %v, want the read error", err)
	}
}

// zeros is an endless stream of NUL bytes, like /dev/zero.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// newlines is an endless stream of blank lines, which csv skips.
type newlines struct{}

func (newlines) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '\n'
	}
	return len(p), nil
}

func TestReadBounds(t *testing.T) {
	small := limits{lineBytes: 16, rows: 3, bytes: 64}
	tests := []struct {
		name string
		give io.Reader
		lim  limits
		want string // the whole message
	}{
		{"endless NULs", zeros{}, defaultLimits(), "line 1: line longer than 4096 bytes (is this a CSV file?)"},
		{"endless blank lines", newlines{}, defaultLimits(), "line 67108865: the file is larger than 67108864 bytes"},
		{"long header", strings.NewReader("wm,env" + strings.Repeat(" ", 20) + "\n"), small, "line 1: line longer than 16 bytes (is this a CSV file?)"},
		{"long data line", strings.NewReader("wm,env\n0.1,0.2\n0.1," + strings.Repeat("0", 20) + "\n"), small, "line 3: line longer than 16 bytes (is this a CSV file?)"},
		{"long quoted field", strings.NewReader("wm,env\n0.1,\"" + strings.Repeat("\n", 70) + "\"\n"), small, "line 54: the file is larger than 64 bytes"},
		{"too many rows", strings.NewReader("wm,env\n0,0\n0,0\n0,0\n0,0\n"), small, "line 5: more than 3 data rows"},
		{"too many bytes", strings.NewReader("wm,env\n" + strings.Repeat("\n", 60) + "0,0\n"), small, "line 59: the file is larger than 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readPairs(tt.give, tt.lim)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("readPairs error %v, want %q", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
		})
	}
	// The bounds are inclusive.
	in := "wm,env\n0,0\n0,0\n0.1,0.123456789\n"
	if _, _, err := readPairs(strings.NewReader(in), limits{lineBytes: 15, rows: 3, bytes: len(in)}); err != nil {
		t.Fatalf("readPairs at the bounds: %v", err)
	}
	if _, err := ReadScores(zeros{}); err == nil || !strings.Contains(err.Error(), "line 1: line longer than") {
		t.Fatalf("ReadScores(zeros) = %v", err)
	}
}

func TestReadScores(t *testing.T) {
	got, err := ReadScores(strings.NewReader("wm\r\n0.1\r\n1\r\n0\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0.1, 1, 0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadScores = %v, want %v", got, want)
	}
	errs := []struct {
		name string
		give string
		want string
	}{
		{"empty", "", "line 1: empty file, want a header with wm"},
		{"header only", "wm\n", "line 1: no data rows after the header"},
		{"pairs file", "wm,env\n0.1,0.2\n", `line 1: header: unknown column "env", want wm`},
		{"bad value", "wm\n0.1\n0.2\n1.5\n", `line 4: wm: "1.5" is outside [0, 1]`},
		{"two values", "wm\n0.1\n0.2,0.3\n", "line 3: 2 values, but the header has 1 columns"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadScores(strings.NewReader(tt.give))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("ReadScores error %v, want %q", err, tt.want)
			}
		})
	}
}

// FuzzReadPairs checks that the reader never panics, that whatever it
// accepts is valid, and that whatever it rejects is rejected with a line.
// The seeds below also run in a plain `go test`.
func FuzzReadPairs(f *testing.F) {
	for _, s := range []string{
		"wm,env\n0.1,0.2\n",
		"env,wm,group\r\n0.5,0.25,a\r\n1,0,b\r\n",
		"\ufeffwm,env\n0,1",
		"wm,env\n\n0.1,0.2\n\n",
		"",
		"wm,env\n",
		"wm,env\nNaN,0.1\n",
		"wm,env\n0.1,1e999\n",
		"wm,env,group\n0.1,0.2,\"a\"\"b\"\n",
		"wm,env\n\"0.1\n,0.2\n",
		"wm,env\n0x1p-2,0.5\n",
		"wm,env,x\n1,2,3\n",
		"wm,env\n0.1,0.2,0.3\n",
		"wm,env\r0.1,0.2\r",
		"group,wm,env\n,0.1,0.2\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		// Small bounds, so that the fuzzer reaches them too.
		small := limits{lineBytes: 32, rows: 8, bytes: 256}
		if _, _, err := readPairs(strings.NewReader(in), small); err == nil && (len(in) > small.bytes || longestLine(in) > small.lineBytes) {
			t.Fatalf("input of %d bytes, longest line %d, accepted within %+v", len(in), longestLine(in), small)
		}
		pairs, grouped, err := ReadPairs(strings.NewReader(in))
		if err != nil {
			if !strings.Contains(err.Error(), "line ") {
				t.Fatalf("error without a line: %v", err)
			}
			if pairs != nil {
				t.Fatalf("pairs %v returned with error %v", pairs, err)
			}
			return
		}
		if len(pairs) == 0 {
			t.Fatal("success with no pairs")
		}
		for i, p := range pairs {
			for _, v := range []float64{p.WM, p.Env} {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1 {
					t.Fatalf("pair %d: value %v accepted", i, v)
				}
			}
			if grouped != (p.Group != "") {
				t.Fatalf("pair %d: group %q, grouped %v", i, p.Group, grouped)
			}
		}
	})
}

// FuzzReadScores is the same check for the one-column reader.
func FuzzReadScores(f *testing.F) {
	for _, s := range []string{"wm\n0.5\n", "", "wm\n", "wm\n2\n", "wm\r\n0\r\n1", "wm,env\n0,1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		small := limits{lineBytes: 32, rows: 8, bytes: 256}
		if vs, err := readScores(strings.NewReader(in), small); err == nil && (len(vs) > small.rows || len(in) > small.bytes || longestLine(in) > small.lineBytes) {
			t.Fatalf("%d scores in %d bytes, longest line %d, accepted within %+v", len(vs), len(in), longestLine(in), small)
		} else if err != nil && !strings.Contains(err.Error(), "line ") {
			t.Fatalf("error without a line: %v", err)
		}
		vs, err := ReadScores(strings.NewReader(in))
		if err != nil {
			if !strings.Contains(err.Error(), "line ") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		if len(vs) == 0 {
			t.Fatal("success with no scores")
		}
		for i, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1 {
				t.Fatalf("score %d: value %v accepted", i, v)
			}
		}
	})
}

// longestLine is the length of the longest line of s, without its \n.
func longestLine(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		n = max(n, len(l))
	}
	return n
}

func TestExampleFiles(t *testing.T) {
	f, err := os.Open("testdata/example_pairs.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pairs, grouped, err := ReadPairs(f)
	if err != nil || !grouped || len(pairs) != 48 {
		t.Fatalf("example pairs: %d pairs, grouped %v, err %v", len(pairs), grouped, err)
	}
	g, err := os.Open("testdata/example_wm.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := ReadScores(g); err != nil {
		t.Fatal(err)
	}
}
