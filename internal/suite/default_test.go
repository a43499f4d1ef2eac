package suite

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestDefaultSuiteBuild builds the whole default suite with its full panel,
// as `wmrl suite list` does on a cold cache. It takes about a minute on one
// core, so it runs only when WMRL_SUITE_FULL=1; TestDefaultSuiteShape
// checks the default sizes and families on every run.
func TestDefaultSuiteBuild(t *testing.T) {
	if os.Getenv("WMRL_SUITE_FULL") != "1" {
		t.Skip("set WMRL_SUITE_FULL=1 to build the full default suite (about a minute per core)")
	}
	start := time.Now()
	s, err := generate(context.Background(), DefaultOptions(DefaultSeed), engineScore, runtime.GOMAXPROCS(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("default suite: %d tasks in %.1fs with GOMAXPROCS=%d, hash %s",
		len(s.Tasks), time.Since(start).Seconds(), runtime.GOMAXPROCS(0), s.Hash)
	checkTasks(t, s)
	for _, tk := range s.Tasks {
		lb := tk.Leaderboard
		if len(lb) < 40 {
			t.Errorf("%s: leaderboard of %d", tk.ID, len(lb))
		}
		for i := 1; i < len(lb); i++ {
			if lb[i] > lb[i-1] {
				t.Errorf("%s: leaderboard not sorted", tk.ID)
			}
		}
		// The panel is of varied quality: a real gap between top and
		// median.
		if lb[0]-lb[len(lb)/2] < 0.005 {
			t.Errorf("%s: top %.4f, median %.4f: the panel does not discriminate", tk.ID, lb[0], lb[len(lb)/2])
		}
		t.Logf("%-24s rows %4d feats %2d  best %7.3f  median %7.3f  worst %8.3f  %s",
			tk.ID, tk.Card.TrainRows, len(tk.Card.Features), lb[0], lb[len(lb)/2], lb[len(lb)-1], tk.ExampleProgram)
	}
}
