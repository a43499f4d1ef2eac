package workflows

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/testenv"
)

// TestRecordTinkerStep writes testdata/<prefix>step_tinker.json, the
// history of step 0 of a run whose policy is the Tinker adapter over the
// built-in Tinker server (strict seq_id order): the step whose Update
// reports an importance ratio, so that it asks change importance-ratio.
// Like TestRecordHistories it runs only with WMRL_RECORD_HISTORIES=1
// against a real server; TestReplay replays the file, and
// TestTinkerStepHistoryRecordsRatio checks what it holds.
func TestRecordTinkerStep(t *testing.T) {
	if os.Getenv("WMRL_RECORD_HISTORIES") != "1" {
		t.Skip("set WMRL_RECORD_HISTORIES=1 to record testdata/ histories")
	}
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	srv := httptest.NewServer(tinkerserve.New(st.Pool(), a.Tasks, tinkerserve.Options{StrictSeq: true}))
	t.Cleanup(srv.Close)
	pol, err := tinker.New(tinker.Config{BaseURL: srv.URL, BaseModel: tinker.BuiltinBaseModel, PollMax: 20 * time.Millisecond},
		tinker.BuiltinTokenizer{}, tinker.PostgresJournal{Store: st}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol})
	startWorkers(t, c, a)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Steps, cfg.Eval.Every = 1, 0
	cfg.Policy.Backend = backend.Tinker
	id := fmt.Sprintf("rec-tinker-%d", time.Now().UnixNano())
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl}, TrainingRun, RunInput{RunID: id, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := we.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	record(t, c, StepWorkflowID(id, 0), "", "testdata/"+os.Getenv("WMRL_RECORD_PREFIX")+"step_tinker.json")
}

// The recorded Tinker step asked change importance-ratio (a Version marker
// names it) and its result, the step's summary, holds the ratio the
// Update reported (1: the built-in server is on-policy).
func TestTinkerStepHistoryRecordsRatio(t *testing.T) {
	b, err := os.ReadFile("testdata/step_tinker.json")
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Events []struct {
			EventType string          `json:"eventType"`
			Marker    json.RawMessage `json:"markerRecordedEventAttributes"`
			Completed json.RawMessage `json:"workflowExecutionCompletedEventAttributes"`
		} `json:"events"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	// payloads are the base64 data of every payload in raw.
	data := regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]+)"`)
	payloads := func(raw json.RawMessage) []string {
		var out []string
		for _, m := range data.FindAllSubmatch(raw, -1) {
			d, err := base64.StdEncoding.DecodeString(string(m[1]))
			if err == nil {
				out = append(out, string(d))
			}
		}
		return out
	}
	marker, ratio := false, false
	for _, e := range h.Events {
		for _, p := range payloads(e.Marker) {
			marker = marker || p == strconv.Quote(changeImportanceRatio)
		}
		for _, p := range payloads(e.Completed) {
			var res StepResult
			if json.Unmarshal([]byte(p), &res) == nil && res.Metrics.ImportanceRatioMean == 1 && res.Metrics.ImportanceRatioMax == 1 {
				ratio = true
			}
		}
	}
	if !marker || !ratio {
		t.Errorf("testdata/step_tinker.json: version marker of %s %v, step result with ratio 1 %v", changeImportanceRatio, marker, ratio)
	}
}
