// Package realtasks is the task source (backend.TaskSource) of the real
// tasks imported into the data directory's task store (internal/tasks), so
// that the built-in policy and world model can be trained and scored on
// them as on the built-in suite.
//
// Tasks are listed in id order. The split is deterministic and depends on
// the set of imported ids only: the tasks are ranked by SHA-256("wmrl
// held-out\x00" + id) and the first ⌈n/4⌉ of that ranking are held out
// (none with a single task), the rest train on. Importing or removing a
// task may move others between the splits, so a run's store must not
// change while it runs.
//
// A task's Prompt is its description.md. Its Features are the built-in
// suite's card vector (suite.Card.Vector: the same length and layout, so
// the built-in policy and the frozen world model take it), computed by
// suite.NewCard from public/train.csv as the built-in suite computes it
// from its train split. What a real task's CSV holds is mapped onto the
// suite's numeric binary-or-regression data, with these approximations:
//
//   - Feature columns are every column but the id and the target. A column
//     whose every non-empty value is a number is used as it is, its empty
//     cells filled with its median; any other column is coded by the rank
//     of its value among the column's distinct values, sorted (a rendered
//     script one-hot encodes it instead).
//   - A regression target is used as it is.
//   - A binary target is 1 for the positive label (Spec.Labels[1]), 0
//     otherwise. A target of more than two classes is 1 for every class but
//     the most frequent one of train.csv (ties: the first label), so the
//     card's positive share is 1 − the majority share and its correlations
//     measure how the features separate the majority class from the rest.
//   - The number of features may exceed the built-in suite's 64 (entry 2
//     then exceeds 1 a little).
//
// Cards are computed once per task hash and kept for the process.
package realtasks

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tabular"
	"github.com/wmrl/wmrl/internal/tasks"
)

// Lister is the task store as this source reads it (tasks.Store is one).
type Lister interface {
	List() ([]*tasks.Task, error)
	Get(id string) (*tasks.Task, error)
}

var _ Lister = tasks.Store{}

// Source lists the store's tasks. It is safe for concurrent use.
type Source struct {
	Store Lister

	cards sync.Map // task hash -> []float64
}

var _ backend.TaskSource = (*Source)(nil)

// HeldOutShare is the share of the tasks held out, rounded up.
const HeldOutShare = 0.25

// Tasks returns one split of the store's tasks, in id order. The suite
// seed is carried into each Task but chooses nothing.
func (s *Source) Tasks(ctx context.Context, suiteSeed uint64, split backend.Split) ([]backend.Task, error) {
	if split != backend.Train && split != backend.HeldOut {
		return nil, backend.Permanent(fmt.Errorf("task store: unknown split %q", split))
	}
	list, err := s.Store.List()
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, backend.Permanent(errors.New("task store: no tasks imported (wmrl tasks import DIR)"))
	}
	held := heldOut(ids(list))
	var out []backend.Task
	for _, t := range list {
		sp := backend.Train
		if held[t.Spec.ID] {
			sp = backend.HeldOut
		}
		if sp != split {
			continue
		}
		bt, err := s.task(ctx, suiteSeed, t, sp)
		if err != nil {
			return nil, err
		}
		out = append(out, bt)
	}
	return out, nil
}

// Task returns one task; an id the store lacks is a permanent error.
func (s *Source) Task(ctx context.Context, suiteSeed uint64, id string) (backend.Task, error) {
	list, err := s.Store.List()
	if err != nil {
		return backend.Task{}, err
	}
	i := slices.IndexFunc(list, func(t *tasks.Task) bool { return t.Spec.ID == id })
	if i < 0 {
		return backend.Task{}, backend.Permanent(fmt.Errorf("task store: %w: %q", tasks.ErrNotFound, id))
	}
	sp := backend.Train
	if heldOut(ids(list))[id] {
		sp = backend.HeldOut
	}
	return s.task(ctx, suiteSeed, list[i], sp)
}

func (s *Source) task(_ context.Context, suiteSeed uint64, t *tasks.Task, sp backend.Split) (backend.Task, error) {
	v, ok := s.cards.Load(t.Hash)
	if !ok {
		c, err := Card(t)
		if err != nil {
			return backend.Task{}, backend.Permanent(fmt.Errorf("task store: task %s: %w", t.Spec.ID, err))
		}
		v, _ = s.cards.LoadOrStore(t.Hash, c.Vector())
	}
	return backend.Task{Suite: suiteSeed, ID: t.Spec.ID, Split: sp, Prompt: t.Description,
		Features: slices.Clone(v.([]float64))}, nil
}

func ids(list []*tasks.Task) []string {
	out := make([]string, len(list))
	for i, t := range list {
		out[i] = t.Spec.ID
	}
	return out
}

// heldOut returns the held-out ids of a set of task ids (see the package
// doc).
func heldOut(ids []string) map[string]bool {
	n := len(ids)
	k := int(math.Ceil(HeldOutShare * float64(n)))
	if n < 2 {
		k = 0
	}
	ranked := slices.Clone(ids)
	key := func(id string) string {
		h := sha256.Sum256([]byte("wmrl held-out\x00" + id))
		return string(h[:])
	}
	slices.SortFunc(ranked, func(a, b string) int { return cmp.Or(cmp.Compare(key(a), key(b)), cmp.Compare(a, b)) })
	out := map[string]bool{}
	for _, id := range ranked[:k] {
		out[id] = true
	}
	return out
}

// Card is the data card of a real task, from its public/train.csv (see the
// package doc for how its columns become the card's data).
func Card(t *tasks.Task) (suite.Card, error) {
	d, err := Dataset(t)
	if err != nil {
		return suite.Card{}, err
	}
	c := suite.NewCard(d)
	c.TestRows = t.TestRows
	c.Metric = string(t.Spec.Metric)
	return c, nil
}

// Dataset reads a task's public/train.csv as the built-in suite's data:
// the features and the target coded as the package doc says. XTest is
// empty: the card never looks at the test rows.
func Dataset(t *tasks.Task) (*tabular.Dataset, error) {
	f, err := os.Open(t.Path(tasks.FileTrain))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tasks.FileTrain, err)
	}
	if len(rows) < 2 {
		return nil, fmt.Errorf("%s: no rows", tasks.FileTrain)
	}
	header, rows := rows[0], rows[1:]
	ti := slices.Index(header, t.Spec.Target)
	if ti < 0 {
		return nil, fmt.Errorf("%s: no column %s", tasks.FileTrain, t.Spec.Target)
	}
	var cols []int
	for j, h := range header {
		if h != t.Spec.IDColumn && h != t.Spec.Target {
			cols = append(cols, j)
		}
	}
	n, p := len(rows), len(cols)
	if p == 0 {
		return nil, fmt.Errorf("%s: no feature columns", tasks.FileTrain)
	}
	x := mat.NewDense(n, p, nil)
	for k, j := range cols {
		col := make([]string, n)
		for i, r := range rows {
			col[i] = r[j]
		}
		for i, v := range column(col) {
			x.Set(i, k, v)
		}
	}
	y := make([]float64, n)
	kind := tabular.Regression
	if t.Spec.Kind == tasks.Classification {
		kind = tabular.Classification
		positive := ""
		if len(t.Spec.Labels) == 2 {
			positive = t.Spec.Labels[1]
		}
		majority := ""
		if positive == "" {
			majority = mostFrequent(rows, ti, t.Spec.Labels)
		}
		for i, r := range rows {
			if (positive != "" && r[ti] == positive) || (positive == "" && r[ti] != majority) {
				y[i] = 1
			}
		}
	} else {
		for i, r := range rows {
			v, err := strconv.ParseFloat(r[ti], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s: row %d: target %q is not a finite number", tasks.FileTrain, i+2, r[ti])
			}
			y[i] = v
		}
	}
	return &tabular.Dataset{Kind: kind, XTrain: x, YTrain: y, XTest: &mat.Dense{}}, nil
}

// column codes one feature column: numbers as they are (empty cells the
// median), or, when any non-empty value is not a finite number, each value
// by its rank among the sorted distinct values.
func column(vals []string) []float64 {
	out := make([]float64, len(vals))
	var nums []float64
	numeric := true
	for i, v := range vals {
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			numeric = false
			break
		}
		out[i] = f
		nums = append(nums, f)
	}
	if !numeric {
		distinct := slices.Clone(vals)
		slices.Sort(distinct)
		distinct = slices.Compact(distinct)
		for i, v := range vals {
			r, _ := slices.BinarySearch(distinct, v)
			out[i] = float64(r)
		}
		return out
	}
	if len(nums) == len(vals) {
		return out
	}
	med := 0.0
	if len(nums) > 0 {
		slices.Sort(nums)
		m := len(nums)
		med = nums[m/2]
		if m%2 == 0 {
			med = (nums[m/2-1] + nums[m/2]) / 2
		}
	}
	for i, v := range vals {
		if v == "" {
			out[i] = med
		}
	}
	return out
}

// mostFrequent is the label most rows of column ti hold (ties: the first
// in labels order).
func mostFrequent(rows [][]string, ti int, labels []string) string {
	count := map[string]int{}
	for _, r := range rows {
		count[r[ti]]++
	}
	best := ""
	for _, l := range labels {
		if best == "" || count[l] > count[best] {
			best = l
		}
	}
	return best
}

// DescribeData describes a task's data as the reference's request_info
// answers it: the files of public/ (what a solution reads at
// /data/public) with their sizes, and for each CSV its columns and row
// count; the task's kind, metric, id column and target first. private/
// is never listed.
func (s *Source) DescribeData(_ context.Context, _ uint64, id string) (string, error) {
	t, err := s.Store.Get(id)
	if errors.Is(err, tasks.ErrNotFound) {
		return "", backend.Permanent(fmt.Errorf("task store: %w: %q", tasks.ErrNotFound, id))
	}
	if err != nil {
		return "", err
	}
	return Describe(t), nil
}

// Describe is the description DescribeData gives of t (the Python
// sandbox's answer to a request_info action too): read from the task's
// files, nothing executed.
func Describe(t *tasks.Task) string {
	var b strings.Builder
	sp := t.Spec
	fmt.Fprintf(&b, "DATA STRUCTURE (read-only info):\n")
	fmt.Fprintf(&b, "Task %s: %s, metric %s (%s), id column %s, target %s", sp.ID, sp.Kind, sp.Metric, sp.Direction, sp.IDColumn, sp.Target)
	if len(sp.Labels) > 0 {
		fmt.Fprintf(&b, ", labels %v", sp.Labels)
	}
	fmt.Fprintf(&b, ".\nFiles in DATA_DIR (/data/public):\n")
	for _, f := range t.Files {
		name, ok := strings.CutPrefix(f.Path, "public/")
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "  %s (%d bytes)\n", name, f.Size)
		if !strings.HasSuffix(name, ".csv") {
			continue
		}
		header, rows, err := csvShape(t.Path(f.Path))
		if err != nil {
			fmt.Fprintf(&b, "      (not readable as CSV: %v)\n", err)
			continue
		}
		fmt.Fprintf(&b, "      %d rows, columns: %v\n", rows, header)
	}
	return b.String()
}

// csvShape returns a CSV file's header and its number of data rows.
func csvShape(path string) ([]string, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = true
	header, err := r.Read()
	if err != nil {
		return nil, 0, err
	}
	header = slices.Clone(header)
	rows := 0
	for {
		_, err := r.Read()
		if errors.Is(err, io.EOF) {
			return header, rows, nil
		}
		if err != nil {
			return nil, 0, err
		}
		rows++
	}
}
