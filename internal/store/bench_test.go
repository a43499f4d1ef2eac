package store

import (
	"fmt"
	"testing"

	"github.com/wmrl/wmrl/internal/executor"
)

// BenchmarkStepWrites measures the store's share of a training step with n
// trajectories (groups of 8): insert the solutions, set their world-model
// scores, mark a quarter of the groups as anchors, record their executions
// and anchor pairs, and read the calibration window.
func BenchmarkStepWrites(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			if env.err != nil {
				b.Skipf("postgres unusable: %v", env.err)
			}
			s, err := Open(b.Context(), env.shared)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			run := Run{ID: b.Name(), Mode: "wmrl", Config: []byte(`{}`), State: RunRunning}
			if err := s.UpsertRun(b.Context(), run); err != nil {
				b.Fatal(err)
			}
			const samples = 8
			groups := n / samples
			step := 0
			for b.Loop() {
				sols := solutions(run.ID, step, groups, samples)
				if _, err := s.InsertTrajectories(b.Context(), sols); err != nil {
					b.Fatal(err)
				}
				var scores []Score
				for i, x := range sols {
					scores = append(scores, Score{Key: x.Key, WM: float64(i%97) / 97})
				}
				if err := s.SetWMScores(b.Context(), scores); err != nil {
					b.Fatal(err)
				}
				var anchors []int
				for g := 0; g < groups; g += 4 {
					anchors = append(anchors, g)
				}
				if err := s.SetAnchors(b.Context(), run.ID, step, anchors); err != nil {
					b.Fatal(err)
				}
				var execs []Execution
				var pairs []AnchorPair
				for _, x := range sols {
					if x.Group%4 != 0 {
						continue
					}
					res := executor.NewResult(executor.StatusOK, 0.5, float64(x.Sample)/samples, "")
					execs = append(execs, Execution{Key: x.Key, Result: res})
					pairs = append(pairs, AnchorPair{Key: x.Key, WM: float64(x.Sample) / samples, Env: res.Score})
				}
				if _, err := s.RecordExecutions(b.Context(), execs); err != nil {
					b.Fatal(err)
				}
				if _, err := s.RecordAnchorPairs(b.Context(), pairs); err != nil {
					b.Fatal(err)
				}
				if _, err := s.AnchorPairs(b.Context(), run.ID, step, 2048); err != nil {
					b.Fatal(err)
				}
				step++
			}
		})
	}
}
