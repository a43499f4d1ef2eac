package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
)

// TestReplay replays the recorded histories in testdata/ (written by
// TestIntegrationRun with WMRL_RECORD_HISTORIES=1) against the current
// workflow code: a change that breaks determinism fails here. Change
// workflow logic behind workflow.GetVersion and keep these replaying.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(TrainingRun)
			r.RegisterWorkflow(TrainingStep)
			if _, err := os.Stat(f); err != nil {
				t.Fatal(err)
			}
			if err := r.ReplayWorkflowHistoryFromJSONFile(quietLogger(), f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
