package activities

import (
	"context"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/store"
)

// The activities depend on the ports only: no file of the package (tests
// aside, which wire the built-in backend) imports an adapter or the pieces
// the built-in adapters wrap.
func TestActivitiesImportNoAdapter(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"internal/backend/builtin", "internal/policy", "internal/worldmodel", "internal/sandbox",
		"internal/suite", "internal/budget", "internal/tabular", "internal/program"}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == "github.com/wmrl/wmrl/"+bad {
					t.Errorf("%s imports %s: activities use the ports of internal/backend", f, path)
				}
			}
		}
	}
}

// ungradedWM answers like its world model but leaves sample 0 ungraded.
type ungradedWM struct{ backend.WorldModel }

func (w ungradedWM) Score(ctx context.Context, items []backend.ScoreItem) ([]backend.Prediction, error) {
	ps, err := w.WorldModel.Score(ctx, items)
	if err == nil {
		ps[0] = backend.Prediction{}
	}
	return ps, err
}

// ungradedGrader gives no verdict.
type ungradedGrader struct{ backend.Grader }

func (ungradedGrader) Grade(ctx context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	out := make([]backend.Grade, len(req.Items))
	for i := range out {
		out[i] = backend.Grade{Status: backend.StatusUngraded, CPUSeconds: 1}
	}
	return out, nil
}

// A world model's or grader's ungraded answer stores no score: the
// trajectory stays ungraded, never scored 0.
func TestUngradedAnswersStoreNoScore(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: "ug", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Generate(ctx, GenerateRequest{RunID: "ug", Step: 0, Group: 0, Samples: cfg.Samples, Seed: cfg.Seed,
		SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint})
	if err != nil {
		t.Fatal(err)
	}
	a.WorldModel = ungradedWM{a.WorldModel}
	sc, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: "ug", Step: 0, Group: 0, SuiteSeed: cfg.SuiteSeed})
	if err != nil || sc.Scored != cfg.Samples-1 {
		t.Fatalf("ScoreWorldModel = %+v, %v, want %d scored", sc, err, cfg.Samples-1)
	}
	a.Grader = ungradedGrader{a.Grader}
	ex, err := a.Execute(ctx, ExecuteRequest{RunID: "ug", Step: 0, Group: 0, Sample: 1, Seed: cfg.Seed,
		SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget})
	if err != nil || ex.Status != backend.StatusUngraded || ex.Reused {
		t.Fatalf("Execute = %+v, %v, want ungraded", ex, err)
	}
	for i, want := range []struct{ wm, exec bool }{{false, false}, {true, false}} {
		tr, err := a.Store.Trajectory(ctx, store.Key{Run: "ug", Step: 0, Group: 0, Sample: i})
		if err != nil {
			t.Fatal(err)
		}
		if (tr.WMScore != nil) != want.wm || (tr.Exec != nil) != want.exec {
			t.Errorf("sample %d: r_wm %v, execution %v", i, tr.WMScore, tr.Exec)
		}
	}
}
