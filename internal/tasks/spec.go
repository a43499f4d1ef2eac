package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Kind is what a task predicts.
type Kind string

// The kinds.
const (
	Classification Kind = "classification"
	Regression     Kind = "regression"
)

// Direction says whether a higher or a lower metric is better.
type Direction string

// The directions.
const (
	Maximize Direction = "maximize"
	Minimize Direction = "minimize"
)

// Metric names how a submission is scored against the private answers.
type Metric string

// The metrics. Label metrics score predicted labels; probability metrics
// (binary tasks only) score the predicted probability of the positive
// label, labels[1]; the others score numbers.
const (
	Accuracy         Metric = "accuracy"
	BalancedAccuracy Metric = "balanced_accuracy"
	MacroF1          Metric = "macro_f1"
	ROCAUC           Metric = "roc_auc"
	LogLoss          Metric = "log_loss"
	RMSE             Metric = "rmse"
	MAE              Metric = "mae"
	R2               Metric = "r2"
)

// metricInfo is what a metric implies.
type metricInfo struct {
	kind        Kind
	direction   Direction
	probability bool // the submission holds P(labels[1]), not a label
}

// metrics are the known metrics, in the order of messages.
var metrics = []struct {
	name Metric
	info metricInfo
}{
	{Accuracy, metricInfo{Classification, Maximize, false}},
	{BalancedAccuracy, metricInfo{Classification, Maximize, false}},
	{MacroF1, metricInfo{Classification, Maximize, false}},
	{ROCAUC, metricInfo{Classification, Maximize, true}},
	{LogLoss, metricInfo{Classification, Minimize, true}},
	{RMSE, metricInfo{Regression, Minimize, false}},
	{MAE, metricInfo{Regression, Minimize, false}},
	{R2, metricInfo{Regression, Maximize, false}},
}

func lookupMetric(m Metric) (metricInfo, bool) {
	for _, x := range metrics {
		if x.name == m {
			return x.info, true
		}
	}
	return metricInfo{}, false
}

func metricNames() string {
	names := make([]string, len(metrics))
	for i, x := range metrics {
		names[i] = string(x.name)
	}
	return strings.Join(names, ", ")
}

// Direction is the metric's direction ("" for an unknown metric).
func (m Metric) Direction() Direction {
	info, _ := lookupMetric(m)
	return info.direction
}

// Probability reports whether a submission for m holds the probability of
// the positive label rather than a label.
func (m Metric) Probability() bool {
	info, _ := lookupMetric(m)
	return info.probability
}

// Better reports whether score a is strictly better than b under d.
func (d Direction) Better(a, b float64) bool {
	if d == Minimize {
		return a < b
	}
	return a > b
}

// Bounds of task.yaml's fields.
const (
	MaxIDLen     = 64
	maxTitle     = 200
	maxSource    = 2000
	maxLabels    = 1000
	maxLabelLen  = 200
	MinTimeLimit = time.Second
	MaxTimeLimit = 24 * time.Hour
	MinMemory    = 16 << 20  // 16 MiB
	MaxMemory    = 256 << 30 // 256 GiB
	MinCPUs      = 0.1
	MaxCPUs      = 64
)

// Spec is a task's task.yaml.
type Spec struct {
	// ID names the task: 1..64 of a-z, 0-9, '.', '_', '-', starting with a
	// letter or digit.
	ID string `json:"id"`
	// Title is one line for people.
	Title string `json:"title"`
	Kind  Kind   `json:"kind"`
	// Metric and Direction: Direction must be the metric's (it is stated
	// so that a reader of task.yaml need not know the metric).
	Metric    Metric    `json:"metric"`
	Direction Direction `json:"direction"`
	// TimeLimit bounds one solution's run (wall clock), 1s..24h; written
	// as a Go duration ("10m").
	TimeLimit time.Duration `json:"time_limit_ns"`
	// MemoryLimit bounds one solution's memory in bytes, 16 MiB..256 GiB;
	// written with a unit ("2GiB", "512MiB").
	MemoryLimit int64 `json:"memory_limit_bytes"`
	// CPUs is the solution's CPU quota, 0.1..64 (default 1).
	CPUs float64 `json:"cpus"`
	// IDColumn names the row-id column of every CSV file; Target the
	// column to predict (in train.csv, answers and submissions).
	IDColumn string `json:"id_column"`
	Target   string `json:"target"`
	// Labels are a classification task's labels (2..1000, distinct); a
	// binary task's positive label is Labels[1]. Empty for regression.
	Labels []string `json:"labels,omitempty"`
	// Source says where the data come from (package, version, loader).
	Source string `json:"source"`
	// License of the data, if known.
	License string `json:"license,omitempty"`
	// Seed is the seed of the train/test split, if it was made by a seed.
	Seed *uint64 `json:"seed,omitempty"`
}

var (
	idPattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	columnPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	memoryPattern = regexp.MustCompile(`^([0-9]{1,12})(KiB|MiB|GiB)$`)
)

// CheckID refuses what cannot be a task id.
func CheckID(id string) error {
	switch {
	case id == "":
		return errors.New("must not be empty")
	case len(id) > MaxIDLen:
		return fmt.Errorf("at most %d characters, got %d", MaxIDLen, len(id))
	case !idPattern.MatchString(id):
		return fmt.Errorf("a-z, 0-9, '.', '_' and '-' only, starting with a letter or digit, got %q", id)
	}
	return nil
}

// ParseMemory parses a memory size with a binary unit: "512MiB", "2GiB".
func ParseMemory(s string) (int64, error) {
	m := memoryPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q: want a whole number with KiB, MiB or GiB (\"2GiB\")", clip(s))
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	shift := map[string]uint{"KiB": 10, "MiB": 20, "GiB": 30}[m[2]]
	if n > MaxMemory>>shift {
		return 0, fmt.Errorf("%q: more than %s", s, FormatMemory(MaxMemory))
	}
	return n << shift, nil
}

// FormatMemory writes a memory size with the largest binary unit that
// divides it.
func FormatMemory(b int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if b > 0 && b%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", b>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%dB", b)
}

// specFields are task.yaml's fields, in the order of messages.
var specFields = []string{"id", "title", "kind", "metric", "direction", "time_limit", "memory_limit",
	"cpus", "id_column", "target", "labels", "source", "license", "seed"}

// required are the fields task.yaml must have.
var required = map[string]bool{"id": true, "title": true, "kind": true, "metric": true, "direction": true,
	"time_limit": true, "memory_limit": true, "id_column": true, "target": true, "source": true}

// ParseSpec parses and checks task.yaml. Every problem is reported, each
// with its field and, where the YAML gives it, its line.
func ParseSpec(data []byte) (Spec, error) {
	s, problems := parseSpec(data)
	if len(problems) > 0 {
		return Spec{}, &Invalid{Problems: problems}
	}
	return s, nil
}

func parseSpec(data []byte) (Spec, []Problem) {
	const file = FileSpec
	var problems []Problem
	bad := func(field string, line int, format string, args ...any) {
		problems = append(problems, Problem{File: file, Field: field, Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	if !utf8.Valid(data) {
		bad("", 0, "not UTF-8")
		return Spec{}, problems
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err == io.EOF {
		bad("", 0, "empty; want a mapping of fields (id: ..., metric: ...)")
		return Spec{}, problems
	} else if err != nil {
		bad("", yamlLine(err), "%s", yamlMsg(err))
		return Spec{}, problems
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		bad("", extra.Line, "a second YAML document; want one")
		return Spec{}, problems
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		bad("", doc.Line, "want a mapping of fields (id: ..., metric: ...)")
		return Spec{}, problems
	}
	m := doc.Content[0]
	s := Spec{CPUs: 1}
	seen := map[string]int{}
	lines := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		name := k.Value
		if prev, dup := seen[name]; dup {
			bad(clip(name), k.Line, "repeated (first at line %d)", prev)
			continue
		}
		seen[name] = k.Line
		lines[name] = v.Line
		if k.Kind != yaml.ScalarNode || !known(name) {
			bad(clip(name), k.Line, "unknown field (want %s)", strings.Join(specFields, ", "))
			continue
		}
		if msg := s.set(name, v); msg != "" {
			bad(name, v.Line, "%s", msg)
		}
	}
	for _, f := range specFields {
		if _, ok := seen[f]; !ok && required[f] {
			bad(f, 0, "missing")
		}
	}
	// Checks across fields, once each field is valid on its own.
	failed := map[string]bool{}
	for _, p := range problems {
		failed[p.Field] = true
	}
	info, metricOK := lookupMetric(s.Metric)
	if metricOK && !failed["kind"] && s.Kind != "" && info.kind != s.Kind {
		bad("metric", lines["metric"], "%s is a %s metric, but kind is %s", s.Metric, info.kind, s.Kind)
	}
	if metricOK && !failed["direction"] && s.Direction != "" && info.direction != s.Direction {
		bad("direction", lines["direction"], "%s for metric %s, want %s", s.Direction, s.Metric, info.direction)
	}
	if !failed["target"] && !failed["id_column"] && s.Target != "" && s.Target == s.IDColumn {
		bad("target", lines["target"], "the same column as id_column (%q)", s.Target)
	}
	if !failed["labels"] && !failed["kind"] {
		switch {
		case s.Kind == Classification && len(s.Labels) == 0:
			bad("labels", lines["labels"], "missing: a classification task lists its labels")
		case s.Kind == Regression && len(s.Labels) > 0:
			bad("labels", lines["labels"], "a regression task has no labels")
		case metricOK && info.probability && len(s.Labels) != 2 && len(s.Labels) > 0:
			bad("labels", lines["labels"], "%d labels; metric %s needs a binary task (2 labels)", len(s.Labels), s.Metric)
		}
	}
	return s, problems
}

func known(name string) bool {
	for _, f := range specFields {
		if f == name {
			return true
		}
	}
	return false
}

// set decodes field name from v into s, returning a message on a bad value.
func (s *Spec) set(name string, v *yaml.Node) string {
	if name == "labels" {
		return s.setLabels(v)
	}
	if v.Kind != yaml.ScalarNode {
		return "want a single value, not a list or mapping"
	}
	str := v.Value
	switch name {
	case "id":
		if err := CheckID(str); err != nil {
			return err.Error()
		}
		s.ID = str
	case "title":
		if msg := checkText(str, maxTitle, true); msg != "" {
			return msg
		}
		s.Title = str
	case "kind":
		switch k := Kind(str); k {
		case Classification, Regression:
			s.Kind = k
		default:
			return fmt.Sprintf("%q: want classification or regression", clip(str))
		}
	case "metric":
		if _, ok := lookupMetric(Metric(str)); !ok {
			return fmt.Sprintf("unknown metric %q (want one of %s)", clip(str), metricNames())
		}
		s.Metric = Metric(str)
	case "direction":
		switch d := Direction(str); d {
		case Maximize, Minimize:
			s.Direction = d
		default:
			return fmt.Sprintf("%q: want maximize or minimize", clip(str))
		}
	case "time_limit":
		d, err := time.ParseDuration(str)
		if err != nil {
			return fmt.Sprintf("%q: want a duration (\"10m\", \"90s\")", clip(str))
		}
		if d < MinTimeLimit || d > MaxTimeLimit {
			return fmt.Sprintf("%v: want %v..%v", d, MinTimeLimit, MaxTimeLimit)
		}
		s.TimeLimit = d
	case "memory_limit":
		b, err := ParseMemory(str)
		if err != nil {
			return err.Error()
		}
		if b < MinMemory {
			return fmt.Sprintf("%s: want at least %s", str, FormatMemory(MinMemory))
		}
		s.MemoryLimit = b
	case "cpus":
		f, err := strconv.ParseFloat(str, 64)
		if err != nil || v.Tag == "!!str" || math.IsNaN(f) || f < MinCPUs || f > MaxCPUs {
			return fmt.Sprintf("%q: want a number in [%v, %v]", clip(str), MinCPUs, MaxCPUs)
		}
		s.CPUs = f
	case "id_column", "target":
		if len(str) > 64 || !columnPattern.MatchString(str) {
			return fmt.Sprintf("%q: want a column name of letters, digits and '_' (at most 64), not starting with a digit", clip(str))
		}
		if name == "target" {
			s.Target = str
		} else {
			s.IDColumn = str
		}
	case "source":
		if msg := checkText(str, maxSource, false); msg != "" {
			return msg
		}
		s.Source = str
	case "license":
		if msg := checkText(str, maxSource, false); msg != "" {
			return msg
		}
		s.License = str
	case "seed":
		n, err := strconv.ParseUint(str, 10, 64)
		if err != nil || v.Tag == "!!str" {
			return fmt.Sprintf("%q: want a whole number in [0, 2^64)", clip(str))
		}
		s.Seed = &n
	}
	return ""
}

func (s *Spec) setLabels(v *yaml.Node) string {
	if v.Kind != yaml.SequenceNode {
		return "want a list of labels ([no, yes])"
	}
	if len(v.Content) < 2 || len(v.Content) > maxLabels {
		return fmt.Sprintf("%d labels, want 2..%d", len(v.Content), maxLabels)
	}
	seen := map[string]bool{}
	labels := make([]string, 0, len(v.Content))
	for i, e := range v.Content {
		if e.Kind != yaml.ScalarNode {
			return fmt.Sprintf("label %d: want a value, not a list or mapping", i+1)
		}
		l := e.Value
		if msg := checkText(l, maxLabelLen, true); msg != "" {
			return fmt.Sprintf("label %d: %s", i+1, msg)
		}
		if strings.TrimSpace(l) != l || strings.ContainsAny(l, ",\"") {
			return fmt.Sprintf("label %q: no surrounding spaces, commas or quotes", clip(l))
		}
		if seen[l] {
			return fmt.Sprintf("label %q: repeated", clip(l))
		}
		seen[l] = true
		labels = append(labels, l)
	}
	s.Labels = labels
	return ""
}

// checkText refuses empty, overlong or control-character text; oneLine
// also refuses line breaks.
func checkText(s string, max int, oneLine bool) string {
	if strings.TrimSpace(s) == "" {
		return "must not be empty"
	}
	if len(s) > max {
		return fmt.Sprintf("%d bytes, want at most %d", len(s), max)
	}
	for _, r := range s {
		if r == '\n' && !oneLine {
			continue
		}
		if r < 0x20 || r == 0x7f {
			return fmt.Sprintf("control character %U", r)
		}
	}
	return ""
}

var yamlLineRe = regexp.MustCompile(`line ([0-9]+)`)

// yamlLine is the line a yaml error names, or 0.
func yamlLine(err error) int {
	m := yamlLineRe.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// yamlMsg is a yaml error without its prefix and line, which the problem
// carries.
func yamlMsg(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = yamlLineRe.ReplaceAllString(msg, "")
	msg = strings.TrimPrefix(strings.TrimSpace(msg), ":")
	return strings.TrimSpace(msg)
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
