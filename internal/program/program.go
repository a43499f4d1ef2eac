package program

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MaxSteps is the largest number of preprocessing steps in a program.
const MaxSteps = 4

// Program is a pipeline: preprocessing steps applied in order, then a model.
type Program struct {
	Steps []Op `json:"steps"`
	Model Op   `json:"model"`
}

// Op is one element of a pipeline: a step or a model with all of its
// parameters (defaults filled in). Integer parameters are stored as
// integral float64 values.
type Op struct {
	Name   string             `json:"name"`
	Params map[string]float64 `json:"params"`
}

// Param returns the value of parameter key, or its default when absent.
// It panics when the operation has no such parameter (a programmer error).
func (o Op) Param(key string) float64 {
	if v, ok := o.Params[key]; ok {
		return v
	}
	s, ok := lookup(o.Name)
	if !ok {
		panic(fmt.Sprintf("program: unknown operation %q", o.Name))
	}
	for _, p := range s.params {
		if p.key == key {
			return p.def
		}
	}
	panic(fmt.Sprintf("program: %s has no parameter %q", o.Name, key))
}

// Int returns an integer parameter (see Param).
func (o Op) Int(key string) int { return int(o.Param(key)) }

// String is the canonical text of the operation: its name and every
// parameter in fixed order.
func (o Op) String() string {
	var b strings.Builder
	b.WriteString(o.Name)
	s, ok := lookup(o.Name)
	if !ok {
		return b.String()
	}
	for _, p := range s.params {
		b.WriteByte(' ')
		b.WriteString(p.key)
		b.WriteByte('=')
		b.WriteString(formatValue(o.Param(p.key)))
	}
	return b.String()
}

// String is the canonical text of the program; Parse(p.String()) gives back
// a program equal to p (after Normalize).
func (p Program) String() string {
	parts := make([]string, 0, len(p.Steps)+1)
	for _, s := range p.Steps {
		parts = append(parts, s.String())
	}
	parts = append(parts, p.Model.String())
	return strings.Join(parts, " | ")
}

// Normalize returns a copy of p whose operations carry every parameter
// explicitly (defaults filled in), the form Parse and Decode produce.
func (p Program) Normalize() Program {
	out := Program{Model: p.Model.normalize()}
	for _, s := range p.Steps {
		out.Steps = append(out.Steps, s.normalize())
	}
	return out
}

func (o Op) normalize() Op {
	out := Op{Name: o.Name, Params: map[string]float64{}}
	s, ok := lookup(o.Name)
	if !ok {
		for k, v := range o.Params {
			out.Params[k] = v
		}
		return out
	}
	for _, p := range s.params {
		out.Params[p.key] = o.Param(p.key)
	}
	return out
}

// IsModel reports whether name is a model (as opposed to a step).
func IsModel(name string) bool {
	s, ok := lookup(name)
	return ok && s.model
}

// Models lists the model names in vocabulary order.
func Models() []string {
	var out []string
	for _, s := range opSpecs {
		if s.model {
			out = append(out, s.name)
		}
	}
	return out
}

// Steps lists the preprocessing step names in vocabulary order.
func Steps() []string {
	var out []string
	for _, s := range opSpecs {
		if !s.model {
			out = append(out, s.name)
		}
	}
	return out
}

// Validate checks a program built by other means than Parse (for example
// decoded from JSON): known operations in the right places, at most MaxSteps
// steps, known parameters with values in range.
func (p Program) Validate() error {
	if len(p.Steps) > MaxSteps {
		return fmt.Errorf("at most %d preprocessing steps, got %d", MaxSteps, len(p.Steps))
	}
	for i, s := range p.Steps {
		if IsModel(s.Name) {
			return fmt.Errorf("step %d: model %q must be last", i+1, s.Name)
		}
		if err := s.validate(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	if !IsModel(p.Model.Name) {
		if _, ok := lookup(p.Model.Name); ok {
			return fmt.Errorf("model: %q is a step, not a model", p.Model.Name)
		}
	}
	if err := p.Model.validate(); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

func (o Op) validate() error {
	s, ok := lookup(o.Name)
	if !ok {
		return fmt.Errorf("unknown operation %q", o.Name)
	}
	for k, v := range o.Params {
		ps, ok := s.param(k)
		if !ok {
			return fmt.Errorf("%s: unknown parameter %q", o.Name, k)
		}
		if !ps.inRange(v) {
			return fmt.Errorf("%s: %s", o.Name, ps.rangeText(formatValue(v)))
		}
	}
	return nil
}

// opSpec describes one operation. The tables below are read-only.
type opSpec struct {
	name   string
	model  bool
	params []paramSpec
}

type paramSpec struct {
	key     string
	integer bool
	min     float64
	max     float64
	def     float64
	grid    []float64 // token-form values, increasing; def is one of them
}

func (s opSpec) param(key string) (paramSpec, bool) {
	for _, p := range s.params {
		if p.key == key {
			return p, true
		}
	}
	return paramSpec{}, false
}

func (p paramSpec) inRange(v float64) bool {
	if !(v >= p.min && v <= p.max) { // also rejects NaN
		return false
	}
	return !p.integer || v == math.Trunc(v)
}

func (p paramSpec) rangeText(got string) string {
	kind := "a number"
	if p.integer {
		kind = "an integer"
	}
	return fmt.Sprintf("%s must be %s in [%s, %s], got %q", p.key, kind, formatValue(p.min), formatValue(p.max), got)
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// opSpecs is the language: steps first, then models, in vocabulary order.
// Parameters are listed in canonical order.
var opSpecs = []opSpec{
	{name: "standardize"},
	{name: "clip", params: []paramSpec{
		{key: "z", min: 0.5, max: 10, def: 3, grid: []float64{1.5, 2, 2.5, 3, 4}},
	}},
	{name: "log1p"},
	{name: "poly", params: []paramSpec{
		{key: "degree", integer: true, min: 2, max: 3, def: 2, grid: []float64{2, 3}},
	}},
	{name: "select", params: []paramSpec{
		{key: "k", integer: true, min: 1, max: 1024, def: 8, grid: []float64{1, 2, 4, 8, 16, 32}},
	}},
	{name: "pca", params: []paramSpec{
		{key: "k", integer: true, min: 1, max: 1024, def: 8, grid: []float64{2, 4, 8, 16, 32}},
	}},
	{name: "mean", model: true},
	{name: "ridge", model: true, params: []paramSpec{
		{key: "alpha", min: 0, max: 1e6, def: 1, grid: []float64{0.001, 0.01, 0.1, 1, 10, 100}},
	}},
	{name: "logistic", model: true, params: []paramSpec{
		{key: "alpha", min: 0, max: 1e6, def: 1, grid: []float64{0.001, 0.01, 0.1, 1, 10, 100}},
		{key: "iters", integer: true, min: 1, max: 1000, def: 25, grid: []float64{5, 10, 25, 50}},
	}},
	{name: "knn", model: true, params: []paramSpec{
		{key: "k", integer: true, min: 1, max: 1000, def: 5, grid: []float64{1, 3, 5, 10, 20, 50}},
	}},
	{name: "gbt", model: true, params: []paramSpec{
		{key: "trees", integer: true, min: 1, max: 2000, def: 100, grid: []float64{10, 25, 50, 100, 200, 400}},
		{key: "depth", integer: true, min: 1, max: 10, def: 3, grid: []float64{1, 2, 3, 4, 5, 6}},
		{key: "lr", min: 0.001, max: 1, def: 0.1, grid: []float64{0.01, 0.03, 0.1, 0.3}},
	}},
	{name: "rff", model: true, params: []paramSpec{
		{key: "features", integer: true, min: 1, max: 4096, def: 128, grid: []float64{16, 32, 64, 128, 256, 512}},
		{key: "gamma", min: 1e-4, max: 1e4, def: 1, grid: []float64{0.1, 0.3, 1, 3, 10}},
		{key: "alpha", min: 0, max: 1e6, def: 1, grid: []float64{0.001, 0.01, 0.1, 1, 10, 100}},
	}},
}

func lookup(name string) (opSpec, bool) {
	for _, s := range opSpecs {
		if s.name == name {
			return s, true
		}
	}
	return opSpec{}, false
}

// ParamInfo describes one parameter of an operation: its accepted range in
// the text form, its default and its token grid.
type ParamInfo struct {
	Key     string    `json:"key"`
	Integer bool      `json:"integer"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Default float64   `json:"default"`
	Grid    []float64 `json:"grid"`
}

// Params describes the parameters of operation name in canonical order; ok
// is false for an unknown operation.
func Params(name string) (params []ParamInfo, ok bool) {
	s, ok := lookup(name)
	if !ok {
		return nil, false
	}
	params = []ParamInfo{}
	for _, p := range s.params {
		params = append(params, ParamInfo{Key: p.key, Integer: p.integer, Min: p.min, Max: p.max, Default: p.def, Grid: slices.Clone(p.grid)})
	}
	return params, true
}
