package workflows

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/mode"
)

// summaryLog records, through a workflow interceptor, the summary of every
// activity, local activity and child workflow the workflows schedule: what
// the SDK puts in the commands' user metadata.
type summaryLog struct {
	interceptor.WorkerInterceptorBase
	mu       sync.Mutex
	calls    []summaryCall
	children []string
	details  []string // children's static details
}

type summaryCall struct {
	kind, activity, summary string
}

func (l *summaryLog) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &summaryInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, log: l}
}

type summaryInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	log *summaryLog
}

func (i *summaryInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&summaryOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, log: i.log})
}

type summaryOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	log *summaryLog
}

func (o *summaryOutbound) add(c summaryCall) {
	o.log.mu.Lock()
	defer o.log.mu.Unlock()
	o.log.calls = append(o.log.calls, c)
}

func (o *summaryOutbound) ExecuteActivity(ctx workflow.Context, name string, args ...any) workflow.Future {
	o.add(summaryCall{"activity", name, workflow.GetActivityOptions(ctx).Summary})
	return o.Next.ExecuteActivity(ctx, name, args...)
}

func (o *summaryOutbound) ExecuteLocalActivity(ctx workflow.Context, name string, args ...any) workflow.Future {
	o.add(summaryCall{"local", name, workflow.GetLocalActivityOptions(ctx).Summary})
	return o.Next.ExecuteLocalActivity(ctx, name, args...)
}

func (o *summaryOutbound) ExecuteChildWorkflow(ctx workflow.Context, name string, args ...any) workflow.ChildWorkflowFuture {
	co := workflow.GetChildWorkflowOptions(ctx)
	o.log.mu.Lock()
	o.log.children = append(o.log.children, co.StaticSummary)
	o.log.details = append(o.log.details, co.StaticDetails)
	o.log.mu.Unlock()
	return o.Next.ExecuteChildWorkflow(ctx, name, args...)
}

// TestSummaries runs a 2-step wmrl run with a held-out evaluation on the
// test environment and checks that every activity it schedules has a
// one-line summary built from the run's own data, that each step child
// has its static summary, and that the run's and a step's current details
// (what the UI's __temporal_workflow_metadata query shows) hold the
// step's result line.
func TestSummaries(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := newEnv(t, &s)
	l := &summaryLog{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{l}})
	f := &fake{}
	f.register(env, 0)
	cfg := tiny(t, mode.WMRL)
	cfg.Steps, cfg.Eval.Every, cfg.Eval.Tasks = 2, 0, 2
	env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "audit", Config: cfg})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(l.calls) < 20 {
		t.Fatalf("only %d activity calls seen: %+v", len(l.calls), l.calls)
	}
	for _, c := range l.calls {
		if c.summary == "" || strings.Contains(c.summary, "\n") || len(c.summary) > maxSummary {
			t.Errorf("%s %s: summary %q, want one non-empty line of at most %d bytes", c.kind, c.activity, c.summary, maxSummary)
		}
	}
	want := []struct {
		activity string
		re       *regexp.Regexp
	}{
		{"CreateRun", regexp.MustCompile(`^run audit: wmrl, 2 steps, seed \d+$`)},
		{"StartStep", regexp.MustCompile(`^step 1$`)},
		{"Generate", regexp.MustCompile(`^step 0 g3: 4 samples from checkpoint 0$`)},
		{"ScoreWorldModel", regexp.MustCompile(`^step 1 g2: 4 programs task-2$`)},
		{"Execute", regexp.MustCompile(`^g\d/s3 task-\d$`)},
		{"CalibrateAndFuse", regexp.MustCompile(`^step 0: wmrl, 1 anchor groups$`)},
		{"Update", regexp.MustCompile(`^step 1 -> checkpoint 2$`)},
		{"FinishStep", regexp.MustCompile(`^step 1: ρ 1\.200, bias \+0\.0000 → \+0\.0000 \(8 pairs\), 4 executed, mean reward 0\.0000, checkpoint 2$`)},
		{"HeldOutTasks", regexp.MustCompile(`^checkpoint 2: 2 tasks$`)},
		{"Evaluate", regexp.MustCompile(`^checkpoint 2 h1: \d+ samples$`)},
		{"HeldOutScore", regexp.MustCompile(`^checkpoint 2$`)},
		{"SetRunState", regexp.MustCompile(`^completed at step 2$`)},
	}
	for _, w := range want {
		found := false
		for _, c := range l.calls {
			found = found || c.activity == w.activity && w.re.MatchString(c.summary)
		}
		if !found {
			t.Errorf("no %s summary matches %s", w.activity, w.re)
		}
	}
	if len(l.children) != 2 || l.children[0] != "step 0 wmrl" || l.children[1] != "step 1 wmrl" {
		t.Errorf("step summaries %q, want step 0 wmrl, step 1 wmrl", l.children)
	}
	if len(l.details) != 2 || !strings.Contains(l.details[1], "checkpoint 1 (hash-1)") {
		t.Errorf("step details %q", l.details)
	}
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	if err != nil {
		t.Fatal(err)
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"run **audit**: completed, 2 of 2 steps done, checkpoint 2 (hash-2)",
		"last step 1: ρ 1.200, 4 executed", "held-out 0.2700 at checkpoint 2"} {
		if !strings.Contains(md.GetCurrentDetails(), w) {
			t.Errorf("run's current details %q lack %q", md.GetCurrentDetails(), w)
		}
	}
}

// TestSignalGateRecorded: a step whose fusion closed the signal gate
// records the decision in its metrics and says so in its FinishStep line;
// a run without a gate records none.
func TestSignalGateRecorded(t *testing.T) {
	for _, gate := range []*denoise.Gate{{Groups: 6, Mean: 0.05, Low: -0.21}, nil} {
		var s testsuite.WorkflowTestSuite
		env := newEnv(t, &s)
		l := &summaryLog{}
		env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{l}})
		f := &fake{gate: gate}
		f.register(env, 0)
		cfg := tiny(t, mode.WMRL)
		cfg.Steps, cfg.Eval.Every = 1, 0
		env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "gate", Config: cfg})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if len(f.gates) != 1 || !reflect.DeepEqual(f.gates[0], gate) {
			t.Errorf("FinishStep recorded gates %v, want [%v]", f.gates, gate)
		}
		var line string
		for _, c := range l.calls {
			if c.activity == "FinishStep" {
				line = c.summary
			}
		}
		if closed := strings.Contains(line, "gate closed: world model unweighted (signal 0.05, low -0.21, 6 groups)"); closed != (gate != nil) {
			t.Errorf("FinishStep summary %q with gate %v", line, gate)
		}
	}
}

// TestStepCurrentDetails checks a step's current details: its result line.
func TestStepCurrentDetails(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := newEnv(t, &s)
	f := &fake{}
	f.register(env, 0)
	cfg := tiny(t, mode.WMRL)
	env.ExecuteWorkflow(TrainingStep, StepInput{RunID: "r", Step: 3, Config: cfg, AnchorFraction: cfg.Anchors.Fraction,
		Checkpoint: activities.CheckpointRef{Version: 3, Hash: hashOf(3)}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	if err != nil {
		t.Fatal(err)
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		t.Fatal(err)
	}
	if want := "step 3: ρ 1.100, bias +0.0000 → +0.0000 (16 pairs), 4 executed, mean reward 0.0000, checkpoint 4"; md.GetCurrentDetails() != want {
		t.Errorf("current details %q, want %q", md.GetCurrentDetails(), want)
	}
}

// TestNoSummariesBeforeChange: a workflow replaying a history recorded
// before changeUISummaries schedules its activities without summaries, as
// it did then.
func TestNoSummariesBeforeChange(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := newEnv(t, &s)
	l := &summaryLog{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{l}})
	env.OnGetVersion(changeUISummaries, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	f := &fake{}
	f.register(env, 0)
	cfg := tiny(t, mode.WMRL)
	cfg.Steps, cfg.Eval.Every = 1, 0
	env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "old", Config: cfg})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(l.calls) == 0 {
		t.Fatal("no activity calls seen")
	}
	for _, c := range l.calls {
		if c.summary != "" {
			t.Errorf("%s %s has summary %q before changeUISummaries", c.kind, c.activity, c.summary)
		}
	}
	for _, c := range l.children {
		if c != "" {
			t.Errorf("step summary %q before changeUISummaries", c)
		}
	}
}

// TestReplayIgnoresUserMetadata replays recorded histories of
// changeUISummaries with every summary changed, and with every user
// metadata removed: replay does not compare them, so a summary's text can
// change without breaking a running workflow. The control, an activity
// renamed in the history, must fail to replay.
func TestReplayIgnoresUserMetadata(t *testing.T) {
	for _, f := range []string{"testdata/v6_step_wmrl.json", "testdata/v6_run_wmrl.json"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, edit := range []string{"changed", "removed", "control"} {
			t.Run(filepath.Base(f)+"/"+edit, func(t *testing.T) {
				var h struct {
					Events []map[string]any `json:"events"`
				}
				if err := json.Unmarshal(raw, &h); err != nil {
					t.Fatal(err)
				}
				n, renamed := 0, false
				for _, e := range h.Events {
					if a, ok := e["activityTaskScheduledEventAttributes"].(map[string]any); ok && edit == "control" && !renamed {
						a["activityType"] = map[string]any{"name": "NoSuchActivity"}
						renamed = true
					}
					md, ok := e["userMetadata"].(map[string]any)
					if !ok {
						continue
					}
					n++
					if edit == "removed" {
						delete(e, "userMetadata")
						continue
					}
					if s, ok := md["summary"].(map[string]any); ok {
						s["data"] = base64.StdEncoding.EncodeToString([]byte(`"another summary"`))
					}
				}
				if n < 5 {
					t.Fatalf("%s: %d events with user metadata", f, n)
				}
				b, err := json.Marshal(h)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "history.json")
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				r := worker.NewWorkflowReplayer()
				r.RegisterWorkflow(TrainingRun)
				r.RegisterWorkflow(TrainingStep)
				err = r.ReplayWorkflowHistoryFromJSONFile(quietLogger(), path)
				switch {
				case edit == "control" && err == nil:
					t.Fatal("replay of a history with an activity renamed succeeded")
				case edit != "control" && err != nil:
					t.Fatalf("replay with user metadata %s: %v", edit, err)
				}
			})
		}
	}
}

// TestImportanceRatioRecorded: the importance ratio an Update reports (a
// Tinker policy's) reaches the step's summary; a step whose Update reports
// none (the built-in policy) records none and asks no version.
func TestImportanceRatioRecorded(t *testing.T) {
	for _, ratio := range [][2]float64{{1.02, 1.5}, {}} {
		var s testsuite.WorkflowTestSuite
		env := newEnv(t, &s)
		f := &fake{ratio: ratio}
		f.register(env, 0)
		cfg := tiny(t, mode.WMRL)
		cfg.Steps, cfg.Eval.Every = 1, 0
		env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "ratio", Config: cfg})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if len(f.ratios) != 1 || f.ratios[0] != ratio {
			t.Errorf("FinishStep recorded ratios %v, want [%v]", f.ratios, ratio)
		}
	}
}
