package sandbox

import (
	"context"
	"math"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/tabular"
)

// realJob is a regression task of rows x cols with a non-linear target, for
// the real executor.
func realJob(rows, cols int, program string) *executor.Job {
	x := mat.NewDense(rows, cols, nil)
	y := make([]float64, rows)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			x.Set(i, j, math.Sin(float64(i*(j+1))+float64(j)))
		}
		y[i] = 2*x.At(i, 0) - x.At(i, 1) + x.At(i, 2)*x.At(i, 3)
	}
	tr := rows * 3 / 4
	return &executor.Job{
		TaskID:  "real",
		Program: program,
		Data: &tabular.Dataset{
			Kind:   tabular.Regression,
			XTrain: mat.DenseCopyOf(x.Slice(0, tr, 0, cols)), YTrain: y[:tr],
			XTest: mat.DenseCopyOf(x.Slice(tr, rows, 0, cols)), YTest: y[tr:],
		},
		Leaderboard: []float64{0.99, 0.9, 0.5, 0.1},
		Seed:        3,
	}
}

// realCase is a real program with the limits it runs under and the status
// it must get.
type realCase struct {
	name       string
	rows, cols int
	program    string
	memory     int64
	deadline   time.Duration
	want       executor.Status
}

func realCases() []realCase {
	return []realCase{
		{name: "ok", rows: 200, cols: 6, program: "standardize | poly degree=2 | ridge alpha=0.01", want: executor.StatusOK},
		{name: "invalid", rows: 200, cols: 6, program: "ridge alpha=", want: executor.StatusInvalidProgram},
		{name: "wrong kind", rows: 200, cols: 6, program: "logistic", want: executor.StatusRuntimeError},
		// 989 polynomial features of 6000 rows: 47 MB for one copy.
		{name: "memory", rows: 6000, cols: 43, program: "poly degree=2 | ridge", memory: 40 << 20, want: executor.StatusMemory},
		{name: "deadline", rows: 3000, cols: 40, program: "gbt trees=2000 depth=10 lr=0.01", deadline: 700 * time.Millisecond, want: executor.StatusTimeout},
	}
}

func checkReal(t *testing.T, sb Sandbox, tc realCase) {
	t.Helper()
	job := realJob(tc.rows, tc.cols, tc.program)
	lim := testLimits()
	if tc.memory > 0 {
		lim.MemoryBytes = tc.memory
	}
	if tc.deadline > 0 {
		lim.Deadline = tc.deadline
	}
	req, err := NewRequest(job, lim)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sb.Execute(context.Background(), req)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	t.Logf("%q: %+v", tc.program, got)
	if got.Status != tc.want || got.Score != executor.Reward(tc.want, got.Position) {
		t.Fatalf("%q: got %+v, want %s", tc.program, got, tc.want)
	}
	if tc.memory > 0 || tc.deadline > 0 {
		return
	}
	// Without limits in the way, the sandbox gives what an in-process run
	// gives, bit for bit.
	want, err := executor.Run(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if got.Metric != want.Metric || got.Position != want.Position || got.Score != want.Score {
		t.Errorf("%q: sandbox %+v, in process %+v", tc.program, got, want)
	}
}

func TestProcessRealExecutor(t *testing.T) {
	p, err := NewProcess(realBinary)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range realCases() {
		t.Run(tc.name, func(t *testing.T) { checkReal(t, p, tc) })
	}
}

func TestDockerRealExecutor(t *testing.T) {
	d := newTestDocker(t, realBinary)
	t.Run("group", func(t *testing.T) {
		for _, tc := range realCases() {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				checkReal(t, d, tc)
			})
		}
	})
	if left := sandboxContainers(t, d); len(left) > 0 {
		t.Errorf("%d sandbox containers left behind", len(left))
	}
}
