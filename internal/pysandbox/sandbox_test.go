package pysandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/wmrl/wmrl/internal/sandbox"
)

// logistic is a good solution: logistic regression with scikit-learn,
// reading the task's columns from /data/task.json.
const logistic = `import json
import pandas as pd
from sklearn.linear_model import LogisticRegression
spec = json.load(open("/data/task.json"))
idc, target = spec["id_column"], spec["target"]
train = pd.read_csv("/data/public/train.csv")
test = pd.read_csv("/data/public/test.csv")
features = [c for c in test.columns if c != idc]
model = LogisticRegression(max_iter=1000).fit(train[features], train[target].astype(str))
pd.DataFrame({idc: test[idc], target: model.predict(test[features])}).to_csv("submission.csv", index=False)
print("fitted", len(train), "rows")
`

func TestGood(t *testing.T) {
	e := newTestEnv(t, Options{})
	r := e.grade(t, logistic, finishDeadline)
	if r.Status != StatusValid || r.Metric < 0.8 || r.Metric > 1 {
		t.Fatalf("%s (%s), metric %v: %s\nstderr: %s", r.Status, r.Failure, r.Metric, r.Detail, r.Run.Stderr)
	}
	// The metric's place on forest 0.95, logistic 0.9, knn 0.8, prior 0.5.
	want := Position(e.a, r.Metric)
	if !near(r.Position, want) || !near(r.Score, 0.5+0.5*want) || want < 0.5 {
		t.Errorf("position %v score %v, want %v and %v", r.Position, r.Score, want, 0.5+0.5*want)
	}
	if !strings.Contains(string(r.Run.Stdout), "fitted 240 rows") {
		t.Errorf("stdout %q", r.Run.Stdout)
	}
	if r.Run.CPUSeconds <= 0 || r.Run.WallSeconds <= 0 {
		t.Errorf("cpu %v s, wall %v s", r.Run.CPUSeconds, r.Run.WallSeconds)
	}
	t.Logf("metric %v position %v score %v; cpu %.2f s wall %.2f s", r.Metric, r.Position, r.Score, r.Run.CPUSeconds, r.Run.WallSeconds)
}

// TestCleanCheckSeesProcesses: the check that nothing is left behind sees
// a running container and its processes (else it could not fail).
func TestCleanCheckSeesProcesses(t *testing.T) {
	e := newTestEnv(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.sb.Grade(ctx, e.a, "import time\ntime.sleep(3600)\n", testLimits(finishDeadline), 1)
		done <- err
	}()
	var id string
	// The grade runs until cancelled: wait as long as a loaded machine
	// takes to start it.
	for start := time.Now(); id == "" && time.Since(start) < 2*time.Minute; time.Sleep(100 * time.Millisecond) {
		list, err := e.sb.Client().ContainerList(ctx, container.ListOptions{
			Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelOwner+"="+e.sb.Owner())),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && len(processesOf(t, list[0].ID)) >= 2 {
			id = list[0].ID
		}
	}
	if id == "" {
		t.Fatal("no running container with a keeper and a solution seen")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled grade returned no error")
	}
	e.checkClean(t, id)
}
