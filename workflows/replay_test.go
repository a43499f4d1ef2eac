package workflows

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/wmrl/wmrl/activities"
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

// TestShortHeartbeatsRecorded reads step histories the server recorded:
// from changeShortHeartbeats on (testdata/beat_step_wmrl.json) every
// Generate and ScoreWorldModel was scheduled with a 30 s heartbeat
// timeout; before it (testdata/step_wmrl.json) with none.
func TestShortHeartbeatsRecorded(t *testing.T) {
	for _, tt := range []struct {
		file string
		want time.Duration
	}{{"testdata/beat_step_wmrl.json", 30 * time.Second}, {"testdata/step_wmrl.json", 0}} {
		f, err := os.Open(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		seen := map[string]int{}
		for _, e := range h.GetEvents() {
			a := e.GetActivityTaskScheduledEventAttributes()
			if a == nil {
				continue
			}
			name := a.GetActivityType().GetName()
			if name != activities.NameGenerate && name != activities.NameScoreWorldModel {
				continue
			}
			seen[name]++
			if got := a.GetHeartbeatTimeout().AsDuration(); got != tt.want {
				t.Errorf("%s: %s scheduled with heartbeat timeout %v, want %v", tt.file, name, got, tt.want)
			}
		}
		if seen[activities.NameGenerate] == 0 || seen[activities.NameScoreWorldModel] == 0 {
			t.Errorf("%s: scheduled %v: want Generate and ScoreWorldModel", tt.file, seen)
		}
	}
}
