package executor

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/tabular"
)

func TestReward(t *testing.T) {
	tests := []struct {
		give     Status
		position float64
		want     float64
	}{
		{StatusInvalidProgram, 1, 0},
		{StatusRuntimeError, 1, 0.1},
		{StatusTimeout, 1, 0.1},
		{StatusMemory, 1, 0.1},
		{StatusInvalidOutput, 1, 0.2},
		{StatusOK, 0, 0.5},
		{StatusOK, 0.5, 0.75},
		{StatusOK, 1, 1},
		{StatusOK, 2, 1},    // clamped
		{StatusOK, -1, 0.5}, // clamped
		{StatusOK, math.NaN(), 0.2},
		{Status("bogus"), 1, 0},
	}
	for _, tt := range tests {
		if got := Reward(tt.give, tt.position); got != tt.want {
			t.Errorf("Reward(%s, %v) = %v, want %v", tt.give, tt.position, got, tt.want)
		}
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		give    string
		want    Result
		wantErr string
	}{
		{
			give: `{"status":"ok","score":0.99,"metric":0.8,"position":0.5,"cpu_seconds":1,"wall_seconds":2}`,
			want: Result{Status: StatusOK, Score: 0.75, Metric: 0.8, Position: 0.5, CPUSeconds: 1, WallSeconds: 2},
		},
		{
			give: `{"status":"runtime_error","score":1,"detail":"boom"}` + "\n",
			want: Result{Status: StatusRuntimeError, Score: 0.1, Detail: "boom"},
		},
		{give: ``, wantErr: "empty"},
		{give: `hello world`, wantErr: "decode"},
		{give: `{"status":"ok"}` + "\n" + `{"status":"ok"}`, wantErr: "more than one"},
		{give: `{"status":"great"}`, wantErr: "unknown status"},
		{give: `{"status":"ok","position":1.5}`, wantErr: "position"},
		{give: `{"status":"ok","extra":1}`, wantErr: "unknown field"},
		{give: `{"status":"ok"} {}`, wantErr: "trailing"},
		{give: `{"status":"ok","cpu_seconds":-1}`, wantErr: "negative"},
	}
	for _, tt := range tests {
		got, err := ParseLine([]byte(tt.give))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseLine(%q) error = %v, want containing %q", tt.give, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseLine(%q) = %+v, %v, want %+v", tt.give, got, err, tt.want)
		}
	}
}

func TestResultLineRoundTrip(t *testing.T) {
	for _, s := range Statuses() {
		r := NewResult(s, 0.25, 0.75, strings.Repeat("x", 2*MaxDetail))
		got, err := ParseLine(r.Line())
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		r.Detail = r.Detail[:MaxDetail]
		if got != r {
			t.Errorf("round trip %s: got %+v, want %+v", s, got, r)
		}
	}
	// A non-finite metric cannot be encoded; the line says so instead.
	bad := Result{Status: StatusOK, Metric: math.Inf(1)}
	got, err := ParseLine(bad.Line())
	if err != nil || got.Status != StatusInvalidOutput {
		t.Errorf("non-finite result line parsed as %+v, %v", got, err)
	}
}

func testJob(rows, cols int) *Job {
	x := func(r int) *mat.Dense {
		d := mat.NewDense(r, cols, nil)
		for i := 0; i < r; i++ {
			for j := 0; j < cols; j++ {
				d.Set(i, j, float64(i*cols+j)/7)
			}
		}
		return d
	}
	y := func(r int) []float64 {
		v := make([]float64, r)
		for i := range v {
			v[i] = float64(i % 2)
		}
		return v
	}
	return &Job{
		TaskID:      "t1",
		Program:     "standardize | ridge(alpha=1)",
		Data:        &tabular.Dataset{Kind: tabular.Classification, XTrain: x(rows), YTrain: y(rows), XTest: x(rows / 2), YTest: y(rows / 2)},
		Leaderboard: []float64{0.9, 0.8, 0.7},
		Seed:        42,
	}
}

func TestJobRoundTrip(t *testing.T) {
	j := testJob(3000, 64)
	b, err := j.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// 4500 x 64 float64 is 2.3 MB; the encoding adds little.
	if raw := 4500 * 64 * 8; len(b) > raw+raw/20+4096 {
		t.Errorf("encoded job is %d bytes for %d bytes of matrices", len(b), raw)
	}
	got, err := DecodeJob(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got.TaskID != j.TaskID || got.Program != j.Program || got.Seed != j.Seed || got.Data.Kind != j.Data.Kind {
		t.Errorf("scalars differ: got %+v", got)
	}
	if !mat.Equal(got.Data.XTrain, j.Data.XTrain) || !mat.Equal(got.Data.XTest, j.Data.XTest) {
		t.Error("matrices differ after round trip")
	}
	if len(got.Data.YTest) != len(j.Data.YTest) || got.Leaderboard[2] != 0.7 {
		t.Error("vectors differ after round trip")
	}
}

func TestDecodeJobRejects(t *testing.T) {
	j := testJob(10, 3)
	j.Data.YTrain = j.Data.YTrain[:9]
	b, err := j.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeJob(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "train labels") {
		t.Errorf("DecodeJob with short labels: %v", err)
	}
	if _, err := DecodeJob(strings.NewReader("garbage")); err == nil {
		t.Error("DecodeJob(garbage) succeeded")
	}
}
