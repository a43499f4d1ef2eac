package pairscsv

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/wmrl/wmrl/internal/debias"
)

// Column names.
const (
	ColWM    = "wm"
	ColEnv   = "env"
	ColGroup = "group"
)

// Error is a problem at one line of the input. Column is the column name for
// a bad value, "" for a problem with the line as a whole.
type Error struct {
	Line   int
	Column string
	Msg    string
}

func (e *Error) Error() string {
	if e.Column != "" {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

var _ error = (*Error)(nil)

// Bounds of an input file, generous for a calibration audit but finite, so
// that a hostile or mistaken input (/dev/zero, a binary, a huge log) fails
// fast with an *Error instead of exhausting memory.
const (
	MaxLineBytes = 4096     // bytes of one line, without its \n
	MaxRows      = 1 << 20  // data rows
	MaxBytes     = 64 << 20 // bytes of the whole file
)

// limits are the bounds a read enforces; tests and fuzzing use small ones.
type limits struct {
	lineBytes, rows, bytes int
}

func defaultLimits() limits { return limits{lineBytes: MaxLineBytes, rows: MaxRows, bytes: MaxBytes} }

// ReadPairs reads anchor pairs from a CSV file with the columns wm and env
// (any order) and an optional group column. grouped reports whether the
// group column is present; when it is, every pair has a non-empty Group.
// The file is bounded by MaxLineBytes, MaxRows and MaxBytes.
func ReadPairs(r io.Reader) (pairs []debias.Pair, grouped bool, err error) {
	return readPairs(r, defaultLimits())
}

func readPairs(r io.Reader, lim limits) (pairs []debias.Pair, grouped bool, err error) {
	t, err := newTable(r, lim, []string{ColWM, ColEnv}, []string{ColGroup})
	if err != nil {
		return nil, false, err
	}
	wm, env := t.cols[ColWM], t.cols[ColEnv]
	g, grouped := t.cols[ColGroup]
	for {
		rec, line, err := t.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false, err
		}
		var p debias.Pair
		if p.WM, err = score(rec[wm], line, ColWM); err != nil {
			return nil, false, err
		}
		if p.Env, err = score(rec[env], line, ColEnv); err != nil {
			return nil, false, err
		}
		if grouped {
			p.Group = strings.TrimSpace(rec[g])
			if p.Group == "" {
				return nil, false, &Error{Line: line, Column: ColGroup, Msg: "empty group name"}
			}
		}
		pairs = append(pairs, p)
	}
	if len(pairs) == 0 {
		return nil, false, &Error{Line: t.header, Msg: "no data rows after the header"}
	}
	return pairs, grouped, nil
}

// ReadScores reads a one-column CSV file of world-model scores: the header
// wm, then one score in [0,1] per line. The file is bounded as ReadPairs'.
func ReadScores(r io.Reader) ([]float64, error) {
	return readScores(r, defaultLimits())
}

func readScores(r io.Reader, lim limits) ([]float64, error) {
	t, err := newTable(r, lim, []string{ColWM}, nil)
	if err != nil {
		return nil, err
	}
	var out []float64
	for {
		rec, line, err := t.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		v, err := score(rec[0], line, ColWM)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, &Error{Line: t.header, Msg: "no data rows after the header"}
	}
	return out, nil
}

// table is a CSV reader positioned after a validated header.
type table struct {
	r      *csv.Reader
	br     *boundedReader
	cols   map[string]int // column name -> field index
	width  int
	header int // line of the header
	rows   int // data rows read
	maxRow int
}

func newTable(r io.Reader, lim limits, required, optional []string) (*table, error) {
	br := &boundedReader{r: r, lim: lim, line: 1}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1 // checked here, with a clearer message
	cr.ReuseRecord = true
	rec, err := cr.Read()
	if err == io.EOF {
		return nil, &Error{Line: 1, Msg: "empty file, want a header with " + want(required, optional)}
	}
	if err != nil {
		return nil, br.csvError(err)
	}
	line, _ := cr.FieldPos(0)
	t := &table{r: cr, br: br, cols: make(map[string]int), width: len(rec), header: line, maxRow: lim.rows}
	for i, name := range rec {
		if i == 0 {
			name = strings.TrimPrefix(name, "\ufeff")
		}
		name = strings.ToLower(strings.TrimSpace(name))
		known := slices.Contains(required, name) || slices.Contains(optional, name)
		switch {
		case name == "":
			return nil, &Error{Line: line, Msg: fmt.Sprintf("header: column %d has no name, want %s", i+1, want(required, optional))}
		case !known:
			return nil, &Error{Line: line, Msg: fmt.Sprintf("header: unknown column %q, want %s", clip(name), want(required, optional))}
		}
		if _, dup := t.cols[name]; dup {
			return nil, &Error{Line: line, Msg: fmt.Sprintf("header: column %q appears twice", name)}
		}
		t.cols[name] = i
	}
	for _, name := range required {
		if _, ok := t.cols[name]; !ok {
			return nil, &Error{Line: line, Msg: fmt.Sprintf("header: missing column %q, want %s", name, want(required, optional))}
		}
	}
	return t, nil
}

// next returns the next data record and its line, or io.EOF.
func (t *table) next() ([]string, int, error) {
	rec, err := t.r.Read()
	if err == io.EOF {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, 0, t.br.csvError(err)
	}
	line, _ := t.r.FieldPos(0)
	if t.rows++; t.rows > t.maxRow {
		return nil, 0, &Error{Line: line, Msg: fmt.Sprintf("more than %d data rows", t.maxRow)}
	}
	if len(rec) != t.width {
		return nil, 0, &Error{Line: line, Msg: fmt.Sprintf("%d values, but the header has %d columns", len(rec), t.width)}
	}
	return rec, line, nil
}

// score parses one value: a finite number in [0,1].
func score(s string, line int, col string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, &Error{Line: line, Column: col, Msg: "empty value"}
	}
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, &Error{Line: line, Column: col, Msg: fmt.Sprintf("%q is not a number", clip(s))}
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, &Error{Line: line, Column: col, Msg: fmt.Sprintf("%q is not a finite number", clip(s))}
	case v < 0 || v > 1:
		return 0, &Error{Line: line, Column: col, Msg: fmt.Sprintf("%q is outside [0, 1]", clip(s))}
	}
	return v, nil
}

// boundedReader passes its reader's bytes on until a line grows longer
// than lim.lineBytes or the input longer than lim.bytes; from then on it
// fails with an *Error naming the line.
type boundedReader struct {
	r       io.Reader
	lim     limits
	line    int // 1-based line of the next byte
	lineLen int // bytes of that line so far
	total   int
	err     error // the bound crossed, once it is
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	for i, c := range p[:n] {
		if b.total++; b.total > b.lim.bytes {
			b.err = &Error{Line: b.line, Msg: fmt.Sprintf("the file is larger than %d bytes", b.lim.bytes)}
			return i, nil
		}
		if c == '\n' {
			b.line++
			b.lineLen = 0
			continue
		}
		if b.lineLen++; b.lineLen > b.lim.lineBytes {
			b.err = &Error{Line: b.line, Msg: fmt.Sprintf("line longer than %d bytes (is this a CSV file?)", b.lim.lineBytes)}
			return i, nil
		}
	}
	return n, err
}

// csvError turns an error of encoding/csv into an *Error: the bound the
// input crossed, if it did (csv may first stumble on the cut line), else
// the syntax error.
func (b *boundedReader) csvError(err error) error {
	if b.err != nil {
		return b.err
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &Error{Line: pe.Line, Msg: fmt.Sprintf("%v (byte %d)", pe.Err, pe.Column)}
	}
	// Read errors of the underlying reader carry no line.
	return fmt.Errorf("read csv: %w", err)
}

func want(required, optional []string) string {
	s := strings.Join(required, ", ")
	if len(optional) > 0 {
		s += " and optionally " + strings.Join(optional, ", ")
	}
	return s
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
