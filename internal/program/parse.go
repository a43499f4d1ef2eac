package program

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// ParseError is a syntax or value error at a 1-based column (in runes) of
// the program text.
type ParseError struct {
	Col int    `json:"col"`
	Msg string `json:"msg"`
}

func (e *ParseError) Error() string { return fmt.Sprintf("col %d: %s", e.Col, e.Msg) }

// word is a run of non-space characters and the column of its first rune.
type word struct {
	text string
	col  int
}

// element is the text between two '|' (or the ends), split into words.
type element struct {
	words []word
	col   int // column of the element's first rune (its '|' + 1 or 1)
}

func split(text string) []element {
	var (
		elems = []element{{col: 1}}
		cur   strings.Builder
		start int
		col   int
	)
	flush := func() {
		if cur.Len() > 0 {
			e := &elems[len(elems)-1]
			e.words = append(e.words, word{text: cur.String(), col: start})
			cur.Reset()
		}
	}
	for _, r := range text {
		col++
		switch {
		case r == '|':
			flush()
			elems = append(elems, element{col: col + 1})
		case unicode.IsSpace(r):
			flush()
		default:
			if cur.Len() == 0 {
				start = col
			}
			cur.WriteRune(r)
		}
	}
	flush()
	return elems
}

// Parse reads a program in text form. Omitted parameters take their
// defaults; the result carries every parameter explicitly. Errors are
// *ParseError values naming the column of the offending word.
func Parse(text string) (Program, error) {
	elems := split(text)
	if len(elems) == 1 && len(elems[0].words) == 0 {
		return Program{}, &ParseError{Col: 1, Msg: "empty program"}
	}
	var p Program
	last := len(elems) - 1
	for i, e := range elems {
		if len(e.words) == 0 {
			return Program{}, &ParseError{Col: e.col, Msg: "empty element, want a step or a model"}
		}
		head := e.words[0]
		s, known := lookup(head.text)
		switch {
		case !known && i < last:
			return Program{}, &ParseError{Col: head.col, Msg: fmt.Sprintf("unknown step %q (want one of %s)", head.text, strings.Join(Steps(), ", "))}
		case !known:
			return Program{}, &ParseError{Col: head.col, Msg: fmt.Sprintf("unknown model %q (want one of %s)", head.text, strings.Join(Models(), ", "))}
		case s.model && i < last:
			return Program{}, &ParseError{Col: head.col, Msg: fmt.Sprintf("model %q must be last", head.text)}
		case !s.model && i == last:
			return Program{}, &ParseError{Col: head.col, Msg: fmt.Sprintf("program must end with a model, got step %q", head.text)}
		case !s.model && i >= MaxSteps:
			return Program{}, &ParseError{Col: head.col, Msg: fmt.Sprintf("at most %d preprocessing steps", MaxSteps)}
		}
		op, err := parseParams(s, e.words[1:])
		if err != nil {
			return Program{}, err
		}
		if s.model {
			p.Model = op
		} else {
			p.Steps = append(p.Steps, op)
		}
	}
	return p, nil
}

func parseParams(s opSpec, words []word) (Op, error) {
	op := Op{Name: s.name, Params: map[string]float64{}}
	for _, w := range words {
		key, val, ok := strings.Cut(w.text, "=")
		if !ok || key == "" {
			return Op{}, &ParseError{Col: w.col, Msg: fmt.Sprintf("%s: expected key=value, got %q", s.name, w.text)}
		}
		ps, ok := s.param(key)
		if !ok {
			return Op{}, &ParseError{Col: w.col, Msg: fmt.Sprintf("%s: unknown parameter %q%s", s.name, key, wantKeys(s))}
		}
		if _, dup := op.Params[key]; dup {
			return Op{}, &ParseError{Col: w.col, Msg: fmt.Sprintf("%s: duplicate parameter %q", s.name, key)}
		}
		valCol := w.col + len([]rune(key)) + 1
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || !ps.inRange(v) {
			return Op{}, &ParseError{Col: valCol, Msg: fmt.Sprintf("%s: %s", s.name, ps.rangeText(val))}
		}
		op.Params[key] = v
	}
	for _, ps := range s.params {
		if _, ok := op.Params[ps.key]; !ok {
			op.Params[ps.key] = ps.def
		}
	}
	return op, nil
}

func wantKeys(s opSpec) string {
	if len(s.params) == 0 {
		return " (it takes none)"
	}
	keys := make([]string, len(s.params))
	for i, p := range s.params {
		keys[i] = p.key
	}
	return " (want " + strings.Join(keys, ", ") + ")"
}
