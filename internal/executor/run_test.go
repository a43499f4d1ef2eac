package executor

import (
	"context"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/tabular"
)

// linearJob is a small regression task y = 2·x0 − x1 (+ a little structure
// in x2) whose leaderboard has one reference above any fit.
func linearJob(program string) *Job {
	const rows, cols = 120, 3
	x := mat.NewDense(rows, cols, nil)
	y := make([]float64, rows)
	for i := 0; i < rows; i++ {
		a, b, c := math.Sin(float64(i)), math.Cos(float64(3*i)), float64(i%7)/7
		x.SetRow(i, []float64{a, b, c})
		y[i] = 2*a - b + 0.1*c*c
	}
	tr, te := 80, rows-80
	return &Job{
		TaskID:  "linear",
		Program: program,
		Data: &tabular.Dataset{
			Kind:   tabular.Regression,
			XTrain: mat.DenseCopyOf(x.Slice(0, tr, 0, cols)), YTrain: y[:tr],
			XTest: mat.DenseCopyOf(x.Slice(tr, tr+te, 0, cols)), YTest: y[tr:],
		},
		Leaderboard: []float64{1.01, 0.5, 0.0},
		Seed:        7,
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		give      string
		want      Status
		wantScore float64
		detail    string
	}{
		// R² of ridge here is near 1: beaten only by the 1.01 reference,
		// rank 2 of 3, position 2/3.
		{give: "standardize | ridge alpha=0.001", want: StatusOK, wantScore: 0.5 + 0.5*2.0/3},
		{give: "mean", want: StatusOK, wantScore: 0.5 + 0.5*1.0/3},
		{give: "ridge alpha=", want: StatusInvalidProgram, wantScore: 0, detail: "col"},
		{give: "ridge | standardize", want: StatusInvalidProgram, wantScore: 0},
		{give: "logistic", want: StatusRuntimeError, wantScore: 0.1, detail: "classification"},
	}
	for _, tt := range tests {
		got, err := Run(context.Background(), linearJob(tt.give))
		if err != nil {
			t.Errorf("Run(%q): %v", tt.give, err)
			continue
		}
		if got.Status != tt.want || math.Abs(got.Score-tt.wantScore) > 1e-12 || !strings.Contains(got.Detail, tt.detail) {
			t.Errorf("Run(%q) = %+v, want %s score %v detail containing %q", tt.give, got, tt.want, tt.wantScore, tt.detail)
		}
		if got.Score != Reward(got.Status, got.Position) {
			t.Errorf("Run(%q) score %v off the ladder", tt.give, got.Score)
		}
	}
}

func TestRunOK(t *testing.T) {
	got, err := Run(context.Background(), linearJob("standardize | ridge alpha=0.001"))
	if err != nil || got.Status != StatusOK {
		t.Fatalf("Run: %+v, %v", got, err)
	}
	if got.Metric < 0.9 || got.Metric > 1 {
		t.Errorf("R² %v, want a near-perfect linear fit", got.Metric)
	}
	// Same job, same seed: the same result, bit for bit.
	again, _ := Run(context.Background(), linearJob("standardize | ridge alpha=0.001"))
	if again != got {
		t.Errorf("second run %+v differs from %+v", again, got)
	}
}

func TestRunTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := Run(ctx, linearJob("gbt trees=50"))
	if err != nil || got.Status != StatusTimeout || got.Score != 0.1 {
		t.Errorf("Run with an expired context = %+v, %v, want timeout", got, err)
	}
}

func TestRunRejectsBadJobs(t *testing.T) {
	j := linearJob("mean")
	j.Leaderboard = nil
	if _, err := Run(context.Background(), j); err == nil {
		t.Error("Run without a leaderboard succeeded")
	}
	j = linearJob("mean")
	for i := range j.Data.YTest {
		j.Data.YTest[i] = 1 // R² undefined: the task's fault, not the program's
	}
	if res, err := Run(context.Background(), j); err == nil {
		t.Errorf("Run with constant test targets scored %+v", res)
	}
}
