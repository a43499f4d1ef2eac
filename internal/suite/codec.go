package suite

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/tabular"
)

// Version identifies the generator, the reference panel and the encoding.
// Bump it whenever any of them changes what a suite contains, so that
// cached suites built by older code are not reused.
const Version = 2

// magic opens every encoded suite.
const magic = "wmrl-suite\n"

// The canonical encoding is a flat little-endian byte stream:
//
//	magic, Version, options (seed, train, heldout, min_rows, max_rows,
//	max_features, panel_size), task count, then per task: id, index,
//	split, kind, family, seed, question, metric, example program,
//	leaderboard, and the data (kind, XTrain, YTrain, XTest, YTest).
//
// Integers are uint64, floats their IEEE-754 bits, strings and slices are
// length-prefixed, matrices are rows, columns and row-major values. Cards
// are not stored: they are recomputed from the data on decode. The suite
// hash is the sha256 of this encoding; a cache file is the encoding
// followed by the 32 raw hash bytes.

// encodeSuite returns the canonical encoding of s (without its hash).
func encodeSuite(s *Suite) []byte {
	var e encoder
	e.buf = append(e.buf, magic...)
	e.u64(Version)
	o := s.Options
	e.u64(o.Seed)
	for _, v := range []int{o.Train, o.HeldOut, o.MinRows, o.MaxRows, o.MaxFeatures, o.PanelSize} {
		e.int(v)
	}
	e.int(len(s.Tasks))
	for _, t := range s.Tasks {
		e.str(t.ID)
		e.int(t.Index)
		e.str(string(t.Split))
		e.str(string(t.Kind))
		e.str(string(t.Family))
		e.u64(t.Seed)
		e.str(t.Question)
		e.str(t.Metric)
		e.str(t.ExampleProgram)
		e.floats(t.Leaderboard)
		e.str(string(t.Data.Kind))
		e.dense(t.Data.XTrain)
		e.floats(t.Data.YTrain)
		e.dense(t.Data.XTest)
		e.floats(t.Data.YTest)
	}
	return e.buf
}

// hashSuite returns the hex sha256 of the canonical encoding of s.
func hashSuite(s *Suite) string {
	sum := sha256.Sum256(encodeSuite(s))
	return hex.EncodeToString(sum[:])
}

// marshalSuite returns the cache-file form of s: encoding, then hash.
func marshalSuite(s *Suite) []byte {
	body := encodeSuite(s)
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

// errCorrupt marks a cache file that cannot be trusted.
var errCorrupt = errors.New("corrupt suite file")

// unmarshalSuite decodes a cache file, verifying its hash, and recomputes
// the cards.
func unmarshalSuite(b []byte) (*Suite, error) {
	if len(b) < len(magic)+sha256.Size || !bytes.HasPrefix(b, []byte(magic)) {
		return nil, fmt.Errorf("%w: bad header", errCorrupt)
	}
	body, stored := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	sum := sha256.Sum256(body)
	if !bytes.Equal(sum[:], stored) {
		return nil, fmt.Errorf("%w: hash mismatch", errCorrupt)
	}
	d := decoder{buf: body[len(magic):]}
	if v := d.u64(); v != Version {
		return nil, fmt.Errorf("%w: version %d, want %d", errCorrupt, v, Version)
	}
	var o Options
	o.Seed = d.u64()
	for _, p := range []*int{&o.Train, &o.HeldOut, &o.MinRows, &o.MaxRows, &o.MaxFeatures, &o.PanelSize} {
		*p = d.int()
	}
	n := d.count(1)
	s := &Suite{Options: o, Tasks: make([]*Task, 0, n)}
	for range n {
		if d.err != nil {
			break
		}
		t := &Task{
			ID:             d.str(),
			Index:          d.int(),
			Split:          Split(d.str()),
			Kind:           tabular.Kind(d.str()),
			Family:         Family(d.str()),
			Seed:           d.u64(),
			Question:       d.str(),
			Metric:         d.str(),
			ExampleProgram: d.str(),
			Leaderboard:    d.floats(),
		}
		t.Data = &tabular.Dataset{Kind: tabular.Kind(d.str())}
		t.Data.XTrain = d.dense()
		t.Data.YTrain = d.floats()
		t.Data.XTest = d.dense()
		t.Data.YTest = d.floats()
		s.Tasks = append(s.Tasks, t)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, d.err)
	}
	if len(d.buf) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(d.buf))
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	for _, t := range s.Tasks {
		t.Card = NewCard(t.Data)
	}
	s.Hash = hex.EncodeToString(sum[:])
	return s, nil
}

// check verifies the invariants a decoded suite must satisfy before it is
// used: valid options, the right number of tasks, consistent shapes.
func (s *Suite) check() error {
	if err := s.Options.Validate(); err != nil {
		return err
	}
	if want := s.Options.Train + s.Options.HeldOut; len(s.Tasks) != want {
		return fmt.Errorf("%d tasks, want %d", len(s.Tasks), want)
	}
	for i, t := range s.Tasks {
		d := t.Data
		if d.XTrain == nil || d.XTest == nil {
			return fmt.Errorf("task %d: missing matrices", i)
		}
		rTrain, cTrain := d.XTrain.Dims()
		rTest, cTest := d.XTest.Dims()
		switch {
		case t.Index != i:
			return fmt.Errorf("task %d: index %d", i, t.Index)
		case t.Kind != tabular.Regression && t.Kind != tabular.Classification, d.Kind != t.Kind:
			return fmt.Errorf("task %s: bad kind %q/%q", t.ID, t.Kind, d.Kind)
		case cTrain != cTest || len(d.YTrain) != rTrain || len(d.YTest) != rTest:
			return fmt.Errorf("task %s: inconsistent shapes", t.ID)
		case len(t.Leaderboard) == 0:
			return fmt.Errorf("task %s: empty leaderboard", t.ID)
		}
	}
	return nil
}

type encoder struct{ buf []byte }

func (e *encoder) u64(v uint64) { e.buf = binary.LittleEndian.AppendUint64(e.buf, v) }
func (e *encoder) int(v int)    { e.u64(uint64(v)) }
func (e *encoder) f64(v float64) {
	e.u64(math.Float64bits(v))
}

func (e *encoder) str(s string) {
	e.int(len(s))
	e.buf = append(e.buf, s...)
}

func (e *encoder) floats(xs []float64) {
	e.int(len(xs))
	for _, v := range xs {
		e.f64(v)
	}
}

func (e *encoder) dense(m *mat.Dense) {
	r, c := m.Dims()
	e.int(r)
	e.int(c)
	for i := range r {
		for _, v := range m.RawRowView(i) {
			e.f64(v)
		}
	}
}

// decoder reads the encoder's format; the first error sticks and every
// later read returns zero values.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.buf) < 8 {
		d.err = errors.New("unexpected end")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.buf)
	d.buf = d.buf[8:]
	return v
}

func (d *decoder) int() int {
	v := d.u64()
	if v > math.MaxInt32 {
		d.fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

// count reads a length whose elements take at least size bytes each, and
// refuses lengths the remaining input cannot hold.
func (d *decoder) count(size int) int {
	n := d.int()
	if d.err == nil && n*size > len(d.buf) {
		d.fail("length %d exceeds the input", n)
		return 0
	}
	return n
}

func (d *decoder) str() string {
	n := d.count(1)
	if d.err != nil {
		return ""
	}
	s := string(d.buf[:n])
	d.buf = d.buf[n:]
	return s
}

func (d *decoder) floats() []float64 {
	n := d.count(8)
	if d.err != nil {
		return nil
	}
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = math.Float64frombits(d.u64())
	}
	return xs
}

func (d *decoder) dense() *mat.Dense {
	r := d.int()
	c := d.int()
	if d.err != nil {
		return nil
	}
	if r == 0 || c == 0 || r*c > len(d.buf)/8 {
		d.fail("matrix %dx%d does not fit the input", r, c)
		return nil
	}
	data := make([]float64, r*c)
	for i := range data {
		data[i] = math.Float64frombits(d.u64())
	}
	return mat.NewDense(r, c, data)
}
