package main

import (
	"strings"
	"testing"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// A worker that serves neither the worldmodel nor the sandbox queue leaves
// those ports nil (not a typed nil, which would look present); one that
// serves them gets the built-in adapters. No other backend exists.
func TestSetBackends(t *testing.T) {
	var a activities.Activities
	if err := setBackends(&a, backend.Builtin, testenv.Suites{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if a.Tasks == nil || a.Policy == nil || a.WorldModel != nil || a.Grader != nil {
		t.Errorf("without world model and sandbox: tasks %v, policy %v, world model %v, grader %v", a.Tasks, a.Policy, a.WorldModel, a.Grader)
	}
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	var b activities.Activities
	if err := setBackends(&b, "", testenv.Suites{}, wm, &testenv.InProcess{}); err != nil {
		t.Fatal(err)
	}
	if b.WorldModel == nil || b.Grader == nil {
		t.Errorf("with world model and sandbox: world model %v, grader %v", b.WorldModel, b.Grader)
	}
	if err := setBackends(&b, "tinker", testenv.Suites{}, wm, nil); err == nil || !strings.Contains(err.Error(), "builtin") {
		t.Errorf("unknown backend: %v", err)
	}
}
