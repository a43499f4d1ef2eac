package grpoloop

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/budget"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/suite"
)

func tinyOptions() suite.Options {
	return suite.Options{Seed: 5, Train: 2, HeldOut: 2, MinRows: 120, MaxRows: 200, MaxFeatures: 6, PanelSize: 10}
}

func TestExecuteStatusesInOrder(t *testing.T) {
	s := smallSuite(t, tinyOptions())
	reg, err := s.Task("reg-linear-000")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		give       string
		wantStatus executor.Status
		wantScore  float64 // < 0: any score of a valid run (>= 0.5)
	}{
		{give: "standardize | ridge alpha=1", wantStatus: executor.StatusOK, wantScore: -1},
		{give: "ridge alpha=", wantStatus: executor.StatusInvalidProgram, wantScore: 0},
		{give: "logistic", wantStatus: executor.StatusRuntimeError, wantScore: 0.1},
		{give: "gbt trees=2000 depth=10", wantStatus: executor.StatusTimeout, wantScore: 0.1}, // over the budget
		{give: "mean", wantStatus: executor.StatusOK, wantScore: -1},
	}
	jobs := make([]*executor.Job, len(tests))
	for i, tt := range tests {
		jobs[i] = executor.NewJob(reg, tt.give, 1)
	}
	cfg := ExecConfig{Budget: 1e7, DeadlineSeconds: 60, Workers: 3}
	res, cost, err := Execute(context.Background(), cfg, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		r := res[i]
		if r.Status != tt.wantStatus {
			t.Errorf("%q: status %s (%s), want %s", tt.give, r.Status, r.Detail, tt.wantStatus)
			continue
		}
		if tt.wantScore >= 0 && r.Score != tt.wantScore {
			t.Errorf("%q: score %v, want %v", tt.give, r.Score, tt.wantScore)
		}
		if tt.wantScore < 0 && !(r.Score >= 0.5 && r.Score <= 1) {
			t.Errorf("%q: score %v, want in [0.5, 1]", tt.give, r.Score)
		}
	}
	if !strings.Contains(res[3].Detail, "exceeds the budget") {
		t.Errorf("refused program detail %q: want it to name the budget", res[3].Detail)
	}
	if res[0].WallSeconds <= 0 || res[3].WallSeconds != 0 {
		t.Errorf("wall seconds %v (run) and %v (refused): want > 0 and 0", res[0].WallSeconds, res[3].WallSeconds)
	}
	if cost.Executions != 4 || cost.Refused != 1 {
		t.Errorf("cost %+v: want 4 executions and 1 refused", cost)
	}
	// The position of a valid run is the task's leaderboard position of
	// its metric.
	if want := suite.Position(reg, res[0].Metric); res[0].Position != want {
		t.Errorf("position %v, want %v", res[0].Position, want)
	}
}

func TestExecuteErrors(t *testing.T) {
	s := smallSuite(t, tinyOptions())
	tk := s.Tasks[0]
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := Execute(ctx, DefaultExecConfig(), []*executor.Job{executor.NewJob(tk, "mean", 1)})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	})
	t.Run("malformed job", func(t *testing.T) {
		job := executor.NewJob(tk, "mean", 1)
		job.Leaderboard = nil
		if _, _, err := Execute(context.Background(), DefaultExecConfig(), []*executor.Job{job}); err == nil {
			t.Error("no error for a job without a leaderboard")
		}
	})
	t.Run("bad config", func(t *testing.T) {
		for _, cfg := range []ExecConfig{{Budget: -1}, {Budget: math.NaN()}, {DeadlineSeconds: -1}, {Workers: -1}} {
			if _, _, err := Execute(context.Background(), cfg, nil); err == nil {
				t.Errorf("no error for %+v", cfg)
			}
		}
	})
}

// TestHeldOutMatchesDefinition recomputes the held-out score from its parts
// by executing the recorded programs directly with executor.Run.
func TestHeldOutMatchesDefinition(t *testing.T) {
	ctx := context.Background()
	s := smallSuite(t, tinyOptions())
	p := newPolicy(t, 3)
	held := ids(s, suite.HeldOut)
	cfg := EvalConfig{Seed: 4, Samples: HeldOutSamples, Exec: ExecConfig{Budget: 1e7, DeadlineSeconds: 60}}
	got, err := HeldOut(ctx, s, p, held, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != len(held) || got.Cost.Executions+got.Cost.Refused != len(held)*HeldOutSamples {
		t.Fatalf("%d tasks, cost %+v: want %d tasks of %d programs", len(got.Tasks), got.Cost, len(held), HeldOutSamples)
	}
	var total float64
	var failed int
	for ti, ts := range got.Tasks {
		tk, err := s.Task(held[ti])
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for i, text := range ts.Programs {
			want := 0.0
			job := executor.NewJob(tk, text, HeldOutExecSeed(HeldOutSeed(cfg.Seed, tk.ID, i)))
			if _, over := budget.OverBudget(job, cfg.Exec.Budget); !over {
				r, err := executor.Run(ctx, job)
				if err != nil {
					t.Fatal(err)
				}
				if r.Status == executor.StatusOK {
					want = r.Position
				}
			}
			if want == 0 {
				failed++
			}
			if ts.Positions[i] != want {
				t.Errorf("%s program %d %q: position %v, want %v", tk.ID, i, text, ts.Positions[i], want)
			}
			sum += want
		}
		if want := sum / float64(len(ts.Programs)); math.Abs(ts.Score-want) > 1e-15 {
			t.Errorf("%s: score %v, want %v", tk.ID, ts.Score, want)
		}
		total += sum / float64(len(ts.Programs))
	}
	if want := total / float64(len(held)); math.Abs(got.Score-want) > 1e-15 {
		t.Errorf("score %v, want %v", got.Score, want)
	}
	if failed == 0 {
		t.Errorf("no failed program among %d: the initial policy should produce some (e.g. ridge on classification)", len(held)*HeldOutSamples)
	}
	if _, err := HeldOut(ctx, s, p, []string{"no-such-task"}, cfg); err == nil {
		t.Error("no error for an unknown task")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give func(*Config)
		ok   bool
	}{
		{name: "default", give: func(*Config) {}, ok: true},
		{name: "one sample", give: func(c *Config) { c.Samples = 1 }},
		{name: "no groups", give: func(c *Config) { c.Groups = 0 }},
		{name: "bad eps", give: func(c *Config) { c.Advantage.Eps = 0 }},
		{name: "bad budget", give: func(c *Config) { c.Exec.Budget = math.Inf(1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig(1)
			tt.give(&c)
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
