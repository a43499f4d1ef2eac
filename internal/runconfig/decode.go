package runconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/wmrl/wmrl/internal/fielderr"
	"github.com/wmrl/wmrl/internal/mode"
)

// MaxBytes bounds a YAML configuration: a real one has a few hundred bytes.
const MaxBytes = 1 << 20

// Parse reads a YAML configuration over base: fields the document omits keep
// base's values. Unknown fields are rejected. The result is validated, and
// the error reports every invalid field (see Load).
func Parse(base Config, data []byte) (Config, error) {
	cfg, err := Load(base, data, Overrides{})
	if err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Overrides are fields set after the document (by command-line flags); nil
// leaves the field as the document set it.
type Overrides struct {
	Name *string
	Seed *uint64
}

// Load reads a YAML configuration over base as Decode does (no document
// when data is nil), applies the overrides, clears the denoiser's defaults
// the run would not read (FitDenoise) and validates the result, refusing
// a denoise.estimator or denoise.memory the document set where the run
// would not read it (checkDenoiseSet). A
// configuration with invalid fields is an *Invalid error naming every one,
// with its line in the document when the document set it.
func Load(base Config, data []byte, o Overrides) (Config, error) {
	cfg := base
	var doc *document
	var problems []error
	if data != nil {
		var err error
		cfg, doc, err = decode(base, data)
		var inv *Invalid
		switch {
		case errors.As(err, &inv):
			problems = inv.Problems
		case err != nil:
			return cfg, err
		}
	}
	overridden := map[string]bool{}
	if o.Name != nil {
		cfg.Name, overridden["name"] = *o.Name, true
	}
	if o.Seed != nil {
		cfg.Seed, overridden["seed"] = *o.Seed, true
	}
	set := func(path string) bool {
		_, ok := doc.lines[path]
		return ok && !overridden[path]
	}
	if doc == nil {
		set = func(string) bool { return false }
	}
	cfg.FitDenoise(set)
	for _, p := range append(cfg.Problems(), cfg.checkDenoiseSet(set)...) {
		if fe, ok := fielderr.As(p); ok && doc != nil && fe.Line == 0 && !overridden[fe.Path] {
			if line, ok := doc.lines[fe.Path]; ok {
				p = fielderr.AtLine(fe.Path, line, "%s", fe.Msg)
			}
		}
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return cfg, &Invalid{Problems: problems}
	}
	return cfg, nil
}

// Invalid is a configuration with invalid fields: every problem, those of
// the document first (in its order), then those of the values (in
// Validate's order).
type Invalid struct {
	Problems []error
}

func (e *Invalid) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "; ")
}

// Decode reads a YAML configuration over base as Parse does, strictly, but
// does not validate the result, so that a caller can change fields (a name
// or seed from flags) and then report every problem at once (Problems, or
// Load). A field the document cannot set (an unknown field, a value of the
// wrong type, an unknown mode) does not stop the others: they are all
// reported in an *Invalid error, each with its path and line, and the
// configuration has every other field of the document.
func Decode(base Config, data []byte) (Config, error) {
	cfg, _, err := decode(base, data)
	return cfg, err
}

// document is where a configuration document sets its fields: the line of
// each field path ("anchors.fraction"), and the path of the value at each
// line.
type document struct {
	lines  map[string]int
	byLine map[int]string
}

func decode(base Config, data []byte) (Config, *document, error) {
	if len(data) > MaxBytes {
		return base, nil, fmt.Errorf("config: larger than %d bytes", MaxBytes)
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return base, nil, errors.New("config: empty document")
		}
		return base, nil, fmt.Errorf("config: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return base, nil, errors.New("config: more than one YAML document")
	}
	doc := &document{lines: map[string]int{}, byLine: map[int]string{}}
	var problems []error
	if len(root.Content) == 1 && root.Content[0].Kind == yaml.MappingNode {
		problems = doc.walk(root.Content[0], reflect.TypeOf(Config{}), "")
		problems = append(problems, checkMode(root.Content[0], base.Mode)...)
	}
	cfg := base
	if err := root.Decode(&cfg); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return base, nil, fmt.Errorf("config: %w", err)
		}
		for _, msg := range te.Errors {
			problems = append(problems, doc.typeError(msg))
		}
	}
	if len(problems) > 0 {
		sort.SliceStable(problems, func(i, j int) bool { return lineOf(problems[i]) < lineOf(problems[j]) })
		return cfg, doc, &Invalid{Problems: problems}
	}
	return cfg, doc, nil
}

// walk records the lines of the fields of a mapping decoded into t and
// reports the keys t does not have (the decoder, not strict, skips them).
// It follows aliases; its depth is that of Config's sections, so a cyclic
// alias cannot loop.
//
// It also checks every number as written (checkNumber) and takes a field
// whose number is refused out of the mapping, so that the decoder neither
// reads it its own way (2.9 as 2, 0x10 as 16) nor reports it again: the
// field keeps base's value and the problem names it.
func (d *document) walk(m *yaml.Node, t reflect.Type, prefix string) []error {
	var problems []error
	kept := m.Content[:0:0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		path := prefix + k.Value
		f, ok := yamlField(t, k.Value)
		if !ok {
			problems = append(problems, fielderr.AtLine(path, k.Line, "field %s not found", k.Value))
			kept = append(kept, k, v)
			continue
		}
		d.lines[path] = k.Line
		// A deeper field's value is the one the decoder's message at a
		// line is about ("sandbox:\n  memory_mb: x" has both at line 2).
		if at, dup := d.byLine[v.Line]; !dup || strings.HasPrefix(path, at+".") {
			d.byLine[v.Line] = path
		}
		for v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if v.Kind == yaml.ScalarNode {
			if err := checkNumber(v, f.Type); err != nil {
				problems = append(problems, fielderr.AtLine(path, v.Line, "%v", err))
				continue
			}
		}
		kept = append(kept, m.Content[i], m.Content[i+1])
		if v.Kind == yaml.MappingNode && f.Type.Kind() == reflect.Struct {
			problems = append(problems, d.walk(v, f.Type, path+".")...)
		}
	}
	m.Content = kept
	return problems
}

var (
	// decimalInt is an integer as a configuration writes it: decimal
	// digits, no leading zero (which the YAML decoder reads as octal).
	decimalInt = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)
	// decimalFloat is a number in decimal notation, with an optional
	// fraction and exponent.
	decimalFloat = regexp.MustCompile(`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$`)
	// leadingZero is an integer the YAML decoder reads as octal (010 is 8).
	leadingZero = regexp.MustCompile(`^[-+]?0[0-9_]+$`)
)

// checkNumber checks a scalar that sets a field of type t when t is a
// number: an integer must be written in decimal digits and be in the range
// of t (600.7, 1e30, 0x10, 0b11, 010 and 2^64 for a uint64 are refused,
// where the YAML decoder would truncate, wrap or convert them), and a float
// in decimal notation and finite. A null leaves the field to the decoder
// (its zero value), as does a type that is not a number.
func checkNumber(v *yaml.Node, t reflect.Type) error {
	if v.ShortTag() == "!!null" {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(reflect.TypeFor[yaml.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	s := v.Value
	// A string (quoted, or a block) is shown quoted, as is a plain
	// scalar that needs escapes to fit in one line.
	str := v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	written := s
	if q := strconv.Quote(s); str || q[1:len(q)-1] != s {
		written = q
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if err := checkIntForm(str, written, s); err != nil {
			return err
		}
		if _, err := strconv.ParseInt(s, 10, t.Bits()); err != nil {
			lo, hi := -int64(1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1
			return fmt.Errorf("%s is out of range [%d,%d]", written, lo, hi)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if err := checkIntForm(str, written, s); err != nil {
			return err
		}
		if _, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, t.Bits()); err != nil && s != "-0" {
			return fmt.Errorf("%s is out of range [0,%d]", written, uint64(1)<<(t.Bits()-1)<<1-1)
		}
	case reflect.Float32, reflect.Float64:
		switch {
		case str:
			return fmt.Errorf("%s is a string, not a number", written)
		case isNonFinite(s):
			return fmt.Errorf("%s is not a finite number", written)
		case leadingZero.MatchString(s):
			return fmt.Errorf("%s is not a decimal number (a leading 0 reads as octal)", written)
		case decimalFloat.MatchString(s):
		case nonDecimalInt(s) || parsesAsFloat(s):
			return fmt.Errorf("%s is not a decimal number", written)
		default:
			return fmt.Errorf("%s is not a number", written)
		}
		if f, err := strconv.ParseFloat(s, t.Bits()); err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("%s is out of range for a %d-bit float", written, t.Bits())
		}
	}
	return nil
}

// checkIntForm checks that s, shown as written (str: a string), is an
// integer in decimal digits.
func checkIntForm(str bool, written, s string) error {
	switch {
	case str:
		return fmt.Errorf("%s is a string, not an integer", written)
	case decimalInt.MatchString(s):
		return nil
	case leadingZero.MatchString(s):
		return fmt.Errorf("%s is not a decimal integer (a leading 0 reads as octal)", written)
	case nonDecimalInt(s):
		return fmt.Errorf("%s is not a decimal integer", written)
	}
	return fmt.Errorf("%s is not an integer", written)
}

// nonDecimalInt reports whether s is an integer in another base or with
// digit separators, as Go and YAML write them (0x10, 0o17, 0b11, 1_000).
func nonDecimalInt(s string) bool {
	_, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
	if err != nil {
		_, err = strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 0, 64)
	}
	return err == nil || errors.Is(err, strconv.ErrRange)
}

// parsesAsFloat reports whether s is a number in a notation Go reads but a
// configuration does not write (0x1p-2, Inf).
func parsesAsFloat(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}

// isNonFinite reports whether s is one of YAML's infinities or NaN.
func isNonFinite(s string) bool {
	switch strings.TrimLeft(strings.ToLower(s), "+-") {
	case ".inf", ".nan":
		return true
	}
	return false
}

// yamlField is the field of struct type t with the YAML key name.
func yamlField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// typeError names the field of one of the YAML decoder's messages
// ("line 3: cannot unmarshal !!str `ten` into int"), by the path of the
// value at its line ("config" when none is known).
func (d *document) typeError(msg string) error {
	msg = strings.ReplaceAll(msg, "\n", `\n`) // the decoder quotes values as they are
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err == nil {
		_, rest, _ := strings.Cut(msg, ": ")
		path, ok := d.byLine[line]
		if !ok {
			path = "config"
		}
		return fielderr.AtLine(path, line, "%s", rest)
	}
	return fmt.Errorf("config: %s", msg)
}

// lineOf is the line of the document a problem names, or 0.
func lineOf(err error) int {
	if fe, ok := fielderr.As(err); ok {
		return fe.Line
	}
	return 0
}

// checkMode reports an invalid top-level mode with its field path and line
// and puts base's mode in its place, so that the YAML decoder (which would
// stop at mode.Mode's error, without path or line) decodes the rest.
func checkMode(top *yaml.Node, base mode.Mode) []error {
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "mode" || v.Kind != yaml.ScalarNode {
			continue
		}
		if _, err := mode.Parse(v.Value); err != nil {
			v.Value, v.Tag, v.Style = string(base), "!!str", 0
			return []error{fielderr.AtLine("mode", v.Line, "%v", err)}
		}
	}
	return nil
}
