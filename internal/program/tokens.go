package program

import (
	"fmt"
	"slices"
	"sync"
)

// Special tokens. Token ids index Vocab().
const (
	BOS = 0
	EOS = 1
)

// MaxTokens bounds the length of a token sequence, BOS and EOS included:
// MaxSteps steps with at most one parameter each, a model with at most three.
const MaxTokens = 1 + 2*MaxSteps + 4 + 1

// tokenInfo says what a token id stands for: an operation (param == -1) or
// one grid value of one of its parameters.
type tokenInfo struct {
	op    int // index into opSpecs, -1 for BOS/EOS
	param int // index into opSpecs[op].params, -1 for the name token
	value float64
	text  string
}

// vocab builds the token table: BOS, EOS, every operation name, then every
// key=value grid pair, operation by operation in canonical order.
// vocab returns the token table. It is built once: opSpecs never changes, so
// the table is immutable and every caller shares it (read-only).
var vocab = sync.OnceValue(buildVocab)

func buildVocab() []tokenInfo {
	out := []tokenInfo{{op: -1, param: -1, text: "<bos>"}, {op: -1, param: -1, text: "<eos>"}}
	for i, s := range opSpecs {
		out = append(out, tokenInfo{op: i, param: -1, text: s.name})
	}
	for i, s := range opSpecs {
		for j, p := range s.params {
			for _, v := range p.grid {
				out = append(out, tokenInfo{op: i, param: j, value: v, text: s.name + "." + p.key + "=" + formatValue(v)})
			}
		}
	}
	return out
}

// Vocab returns the token strings indexed by token id: "<bos>", "<eos>", the
// operation names, then "op.key=value" for every grid value.
func Vocab() []string {
	v := vocab()
	out := make([]string, len(v))
	for i, t := range v {
		out[i] = t.text
	}
	return out
}

// VocabSize is len(Vocab()).
func VocabSize() int { return len(vocab()) }

// TokenOp returns the operation name a token belongs to ("" for BOS/EOS or
// an out-of-range id); useful for features of a policy or world model.
func TokenOp(tok int) string {
	v := vocab()
	if tok < 0 || tok >= len(v) || v[tok].op < 0 {
		return ""
	}
	return opSpecs[v[tok].op].name
}

// state is where a token prefix leaves the grammar.
type state struct {
	started  bool
	done     bool // EOS seen
	steps    int  // completed or current step count
	op       int  // current operation, -1 when between operations
	nextPar  int  // index of the next parameter of op
	inModel  bool // current op is the model
	finished bool // model and all its params emitted, only EOS may follow
}

// advance applies one token; ok is false when it is illegal.
func (st *state) advance(v []tokenInfo, tok int) bool {
	if tok < 0 || tok >= len(v) || st.done {
		return false
	}
	if !st.started {
		if tok != BOS {
			return false
		}
		st.started = true
		st.op = -1
		return true
	}
	if !slices.Contains(st.legal(v), tok) {
		return false
	}
	t := v[tok]
	switch {
	case tok == EOS:
		st.done = true
	case t.param < 0:
		st.op, st.nextPar = t.op, 0
		st.inModel = opSpecs[t.op].model
		if !st.inModel {
			st.steps++
		}
	default:
		st.nextPar++
	}
	if st.op >= 0 && st.nextPar == len(opSpecs[st.op].params) {
		if st.inModel {
			st.finished = true
		}
		st.op = -1
	}
	return true
}

// legal lists the tokens allowed next, in increasing order.
func (st *state) legal(v []tokenInfo) []int {
	switch {
	case st.done:
		return nil
	case !st.started:
		return []int{BOS}
	case st.finished:
		return []int{EOS}
	}
	var out []int
	if st.op >= 0 {
		for i, t := range v {
			if t.op == st.op && t.param == st.nextPar {
				out = append(out, i)
			}
		}
		return out
	}
	for i, t := range v {
		if t.op < 0 || t.param >= 0 {
			continue
		}
		if opSpecs[t.op].model || st.steps < MaxSteps {
			out = append(out, i)
		}
	}
	return out
}

// Legal returns the token ids allowed after prefix, in increasing order.
// An empty prefix allows only BOS; a prefix ending in EOS, or one that
// breaks the grammar, allows nothing (nil).
func Legal(prefix []int) []int {
	v := vocab()
	var st state
	for _, tok := range prefix {
		if !st.advance(v, tok) {
			return nil
		}
	}
	return st.legal(v)
}

// Decode turns a complete token sequence (BOS ... EOS) into a program.
func Decode(tokens []int) (Program, error) {
	v := vocab()
	var st state
	var p Program
	for i, tok := range tokens {
		if !st.advance(v, tok) {
			return Program{}, fmt.Errorf("token %d (%d): not allowed here", i, tok)
		}
		t := v[tok]
		switch {
		case t.op < 0:
		case t.param < 0 && opSpecs[t.op].model:
			p.Model = Op{Name: opSpecs[t.op].name, Params: map[string]float64{}}
		case t.param < 0:
			p.Steps = append(p.Steps, Op{Name: opSpecs[t.op].name, Params: map[string]float64{}})
		default:
			key := opSpecs[t.op].params[t.param].key
			if opSpecs[t.op].model {
				p.Model.Params[key] = t.value
			} else {
				p.Steps[len(p.Steps)-1].Params[key] = t.value
			}
		}
	}
	if !st.done {
		return Program{}, fmt.Errorf("token sequence does not end with EOS")
	}
	return p, nil
}

// Encode turns a program into its token sequence, BOS and EOS included.
// Missing parameters take their defaults; it fails when the program is
// invalid or a value is not on its parameter's grid.
func Encode(p Program) ([]int, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	v := vocab()
	out := []int{BOS}
	ops := append(slices.Clone(p.Steps), p.Model)
	for _, o := range ops {
		oi := slices.IndexFunc(opSpecs, func(s opSpec) bool { return s.name == o.Name })
		out = append(out, slices.IndexFunc(v, func(t tokenInfo) bool { return t.op == oi && t.param < 0 }))
		for pi, ps := range opSpecs[oi].params {
			val := o.Param(ps.key)
			tok := slices.IndexFunc(v, func(t tokenInfo) bool { return t.op == oi && t.param == pi && t.value == val })
			if tok < 0 {
				return nil, fmt.Errorf("encode: %s %s=%s is not on the grid %v", o.Name, ps.key, formatValue(val), ps.grid)
			}
			out = append(out, tok)
		}
	}
	return append(out, EOS), nil
}
