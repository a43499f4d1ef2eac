package activities

import (
	"reflect"
	"testing"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/fusion"
	"github.com/wmrl/wmrl/internal/store"
)

func TestTrajectoriesOf(t *testing.T) {
	wm := 0.25
	ts := []store.Trajectory{
		{Solution: store.Solution{Key: store.Key{Run: "r", Step: 2, Group: 1, Sample: 0}, TaskID: "t", Program: "mean"},
			WMScore: &wm, Exec: &executor.Result{Status: executor.StatusOK, Score: 0.75}},
		{Solution: store.Solution{Key: store.Key{Run: "r", Step: 2, Group: 1, Sample: 1}, TaskID: "t", Program: "knn"}},
	}
	env := 0.75
	want := []fusion.Trajectory{
		{Group: 1, Sample: 0, TaskID: "t", Program: "mean", WM: &wm, Env: &env},
		{Group: 1, Sample: 1, TaskID: "t", Program: "knn"},
	}
	if got := trajectoriesOf(ts); !reflect.DeepEqual(got, want) {
		t.Errorf("trajectoriesOf = %+v, want %+v", got, want)
	}
}
