package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
	"github.com/wmrl/wmrl/workflows"
)

// The integration tests drive the commands against a real Temporal server
// ($TEMPORAL_ADDRESS, default 127.0.0.1:7233; deploy/temporal.sh start) and
// real Postgres, with workers for all five queues in this process. They use
// their own namespace, so that workers of other test processes on the same
// server never take their tasks. Without a server they skip, except in CI,
// where they fail.
//
// testNamespace is the prefix of their namespaces: wmrl-starter-test, or
// WMRL_TEST_NAMESPACE when set, so that two checkouts testing on the same
// server at once keep apart (as the workflows package's tests do).
var testNamespace = func() string {
	if v := os.Getenv("WMRL_TEST_NAMESPACE"); v != "" {
		return v + "-starter"
	}
	return "wmrl-starter-test"
}()

// smallSuites serves the small test suite for every suite seed, so that the
// presets (which name the built-in suite) run in seconds.
type smallSuites struct{}

func (smallSuites) Suite(ctx context.Context, _ uint64) (*suite.Suite, error) {
	return testenv.SmallSuite()
}

// itEnv is a running stack: Temporal client, a fresh database and workers.
type itEnv struct {
	tc    client.Client
	acts  *activities.Activities
	st    *store.Store
	dsn   string
	flags []string // --address, --namespace, --database-url, --ui-url
}

func integration(t *testing.T) *itEnv {
	t.Helper()
	e := stack(t, testNamespace)
	e.flags = append(e.flags, "--ui-url", "http://ui.test:8233")
	return e
}

// stack starts workers for all five queues in this process on a real
// Temporal server (namespace ns, registered with wmrl's search attributes)
// with a fresh Postgres database, the small test suite and the in-process
// sandbox. It skips without a server, except in CI, where it fails.
//
// configure, when given, completes the workers' activities (remote
// backends) before the workers start.
func stack(t *testing.T, ns string, configure ...func(*activities.Activities)) *itEnv {
	t.Helper()
	tc, addr := testenv.Temporal(t, ns, workflows.SearchAttributes())
	dsn := testenv.EmptyDB(t)
	st, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.SmallSuite(); err != nil {
		t.Fatal(err)
	}
	b := builtin.New(smallSuites{}, wm, &testenv.InProcess{MaxCPUs: 2})
	acts := &activities.Activities{Store: st, Tasks: b.Tasks, Policy: b.Policy, WorldModel: b.WorldModel, Grader: b.Grader, DataDir: t.TempDir()}
	for _, c := range configure {
		c(acts)
	}
	for _, name := range workflows.QueueNames() {
		q, _ := workflows.Queue(name)
		w := worker.New(tc, q, worker.Options{})
		workflows.Register(w, q, acts)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	return &itEnv{tc: tc, acts: acts, st: st, dsn: dsn, flags: []string{"--address", addr, "--namespace", ns, "--database-url", dsn}}
}

// wmrl runs a command with the stack's flags.
func (e *itEnv) wmrl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, _, err := runCmd(t.Context(), append(args, e.flags...)...)
	return out, err
}

// wmrlJSON runs a command with --json and decodes its object into v.
func (e *itEnv) wmrlJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, err := e.wmrl(t, append(args, "--json")...)
	if err != nil {
		t.Fatalf("wmrl %v: %v\n%s", args, err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("wmrl %v --json: %v\n%s", args, err, out)
	}
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%04x", prefix, time.Now().Unix(), rand.Uint32()&0xffff)
}

// runName returns a fresh run name; a run of that name still running when
// the test ends is terminated, so that it never reaches the workers of a
// later test process.
func (e *itEnv) runName(t *testing.T, prefix string) string {
	name := uniqueName(prefix)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if wf, err := temporalState(ctx, e.tc, name); err == nil && wf == wfRunning {
			_ = e.tc.TerminateWorkflow(ctx, name, "", "test ended")
		}
	})
	return name
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *itEnv) status(t *testing.T, run string) statusReport {
	t.Helper()
	var s statusReport
	e.wmrlJSON(t, &s, "status", run)
	return s
}

func TestIntegration(t *testing.T) {
	e := integration(t)
	t.Run("tiny", func(t *testing.T) { testTiny(t, e) })
	t.Run("control", func(t *testing.T) { testControl(t, e) })
	t.Run("detach", func(t *testing.T) { testDetach(t, e) })
	t.Run("resume-from", func(t *testing.T) { testResumeFrom(t, e) })
	t.Run("refused", func(t *testing.T) { testRefused(t, e) })
}

// testRefused: a run whose sandbox settings the sandbox worker cannot meet
// is refused at wmrl run, with the field named, and nothing is started or
// recorded.
func testRefused(t *testing.T, e *itEnv) {
	cfg := writeFile(t, "cpus.yaml", "sandbox:\n  cpus: 4\n")
	name := e.runName(t, "refused")
	out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", name)
	if err == nil || !strings.Contains(err.Error(), "refused, nothing started: sandbox.cpus: 4 exceeds the 2 CPUs") {
		t.Fatalf("run with sandbox.cpus 4: %v\n%s", err, out)
	}
	if exitStatus(err) != 1 {
		t.Errorf("exit status %d, want 1", exitStatus(err))
	}
	if _, err := e.st.Run(t.Context(), name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refused run recorded in Postgres: %v", err)
	}
	if wf, err := temporalState(t.Context(), e.tc, name); err != nil || wf != "" {
		t.Errorf("refused run: workflow %q, %v; want none", wf, err)
	}
}

// testTiny runs the tiny preset to its end and reads it back with status,
// list and inspect.
func testTiny(t *testing.T, e *itEnv) {
	name := e.runName(t, "tiny")
	out, err := e.wmrl(t, "run", "--preset", "tiny", "--name", name, "--poll", "100ms")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	t.Logf("wmrl run --preset tiny --name %s:\n%s", name, out)
	for _, w := range []string{"started run " + name, "step 0: rho", "step 2: rho", "[3/3, ETA",
		"run " + name + " ended: completed", "held-out", "ui           http://ui.test:8233/namespaces/" + testNamespace + "/workflows/" + name} {
		if !strings.Contains(out, w) {
			t.Errorf("run output lacks %q", w)
		}
	}

	s := e.status(t, name)
	if s.Run != name || s.State != "completed" || s.Workflow != wfCompleted || s.Mode != "wmrl" || s.Step != 3 || s.Steps != 3 ||
		s.Result == nil || s.Result.Steps != 3 || s.HeldOut == nil || s.Checkpoint.Version != 3 || s.Last == nil || s.Last.Step != 2 {
		t.Errorf("status %+v", s)
	}
	if s.Calibration == nil || s.Calibration.Step != 2 || s.Calibration.Pairs == 0 {
		t.Errorf("calibration %+v", s.Calibration)
	}
	// Without Temporal, status comes from Postgres.
	var off statusReport
	out, _, err = runCmd(t.Context(), "status", name, "--json", "--database-url", e.dsn, "--address", "127.0.0.1:1")
	if err != nil || json.Unmarshal([]byte(out), &off) != nil {
		t.Fatalf("status without Temporal: %v\n%s", err, out)
	}
	if off.Source != sourcePostgres || off.Workflow != "" || off.State != "completed" || off.Step != 3 || off.Rho != s.Rho ||
		off.Last == nil || !reflect.DeepEqual(off.Last.Metrics, s.Last.Metrics) || !strings.Contains(off.Note, "connect to temporal") {
		t.Errorf("status without Temporal %+v", off)
	}
	// A duplicate name is refused, before anything starts.
	if _, err := e.wmrl(t, "run", "--preset", "tiny", "--name", name); err == nil || !strings.Contains(err.Error(), "taken by an earlier run") {
		t.Errorf("second run named %s: %v", name, err)
	}

	var l listReport
	e.wmrlJSON(t, &l, "list")
	found := false
	for _, r := range l.Runs {
		if r.Run == name {
			found = true
			if r.State != "completed" || r.Workflow != wfCompleted || r.Step != 3 || r.Steps != 3 || r.Mode != "wmrl" {
				t.Errorf("list entry %+v", r)
			}
		}
	}
	if !found {
		t.Errorf("list lacks %s: %+v", name, l)
	}

	var in inspectReport
	e.wmrlJSON(t, &in, "inspect", name)
	if in.Step != 2 || in.Status != store.StepCompleted || len(in.Trajectories) != 16 || in.Rho == nil || in.Calibration == nil ||
		in.Checkpoint == nil || in.Checkpoint.Version != 3 || in.Cost.Trajectories != 16 {
		t.Errorf("inspect: step %d status %s, %d trajectories, rho %v, calibration %v, checkpoint %v, cost %+v",
			in.Step, in.Status, len(in.Trajectories), in.Rho, in.Calibration, in.Checkpoint, in.Cost)
	}
	// Stage times: every stage of a single-shot wmrl step, none overlapped
	// (steps one after another).
	stages := map[string]stepsummary.StageTime{}
	for _, x := range in.Stages {
		stages[x.Stage] = x
		if x.Overlapped != 0 || x.Seconds < 0 {
			t.Errorf("inspect: stage %+v, want no overlap", x)
		}
	}
	for _, n := range []string{"generate", "score", "execute", "calibrate_fuse", "update", "step"} {
		if _, ok := stages[n]; !ok {
			t.Errorf("inspect: no stage %s in %+v", n, in.Stages)
		}
	}
	if stages["step"].Seconds < stages["update"].Seconds || stages["step"].Seconds <= 0 {
		t.Errorf("inspect: step %+v shorter than its update %+v", stages["step"], stages["update"])
	}
	executedAnchors := 0
	for _, tr := range in.Trajectories {
		if tr.Anchor && tr.Real != nil {
			executedAnchors++
		}
		if tr.WM == nil || tr.Calibrated == nil || tr.Program == "" {
			t.Errorf("trajectory without scores: %+v", tr)
		}
	}
	if executedAnchors == 0 || len(in.AnchorPairs) != executedAnchors {
		t.Errorf("%d anchor pairs, %d executed anchor trajectories", len(in.AnchorPairs), executedAnchors)
	}
	text, err := e.wmrl(t, "inspect", name, "--step", "0", "--limit", "3")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wmrl inspect %s --step 0 --limit 3:\n%s", name, text)
	for _, w := range []string{"step 0: completed", "trajectories (16):", "... 13 more", "anchor pairs (",
		"stages       generate ", "calibrate+fuse ", "0.000 s of the step overlapped other steps"} {
		if !strings.Contains(text, w) {
			t.Errorf("inspect text lacks %q", w)
		}
	}
	if _, err := e.wmrl(t, "inspect", name, "--step", "7"); err == nil || !strings.Contains(err.Error(), "no step 7") {
		t.Errorf("inspect --step 7: %v", err)
	}
	// The report of the real run: every section, a row per step.
	page := filepath.Join(t.TempDir(), "tiny.html")
	if out, err := e.wmrl(t, "report", name, "--out", page); err != nil || !strings.Contains(out, "3 of 3 steps completed") {
		t.Errorf("report: %v\n%s", err, out)
	} else if b, err := os.ReadFile(page); err != nil {
		t.Error(err)
	} else {
		checkReportPage(t, b, 3, in.Calibration != nil && len(in.Calibration.Map.X) > 0)
	}
	if _, err := e.wmrl(t, "status", "no-such-run"); err == nil || !strings.Contains(err.Error(), `no run "no-such-run"`) {
		t.Errorf("status of an unknown run: %v", err)
	}
}

// testControl pauses, changes the anchor fraction, resumes and stops a run.
func testControl(t *testing.T, e *itEnv) {
	name := e.runName(t, "ctl")
	cfg := writeFile(t, "ctl.yaml", "steps: 40\n")
	var started runReport
	e.wmrlJSON(t, &started, "run", "--preset", "tiny", "--config", cfg, "--name", name, "--detach")
	if !started.Detached || started.Run != name || started.TemporalRunID == "" || started.Status.Steps != 40 {
		t.Errorf("run --detach: %+v", started)
	}
	if _, err := e.wmrl(t, "run", "--preset", "tiny", "--name", name); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("a second run with a running name: %v", err)
	}

	out, err := e.wmrl(t, "pause", name)
	if err != nil || !strings.Contains(out, "sent pause to run "+name) {
		t.Fatalf("pause: %v %q", err, out)
	}
	waitFor(t, "paused in Postgres", func() bool {
		r, err := e.st.Run(t.Context(), name)
		return err == nil && r.State == store.RunPaused
	})
	s := e.status(t, name)
	if s.State != workflows.StatePaused || s.Source != sourceQuery {
		t.Errorf("status while paused: %+v", s)
	}
	time.Sleep(500 * time.Millisecond)
	if again := e.status(t, name); again.Step != s.Step {
		t.Errorf("a paused run went on: step %d -> %d", s.Step, again.Step)
	}

	// The command refuses a fraction outside [0,1] before sending it; the
	// run's validator refuses it too, changing nothing.
	out, err = e.wmrl(t, "set-anchor-fraction", name, "1.5", "--json")
	if exitStatus(err) != exitUsage || out != "" || !strings.Contains(err.Error(), `anchor fraction "1.5": want a number in [0,1]`) {
		t.Errorf("set-anchor-fraction 1.5: %q, %v", out, err)
	}
	rej, err := setAnchorFraction(t.Context(), e.tc, name, 1.5)
	if !errors.Is(err, errRejected) || rej.Accepted || !strings.Contains(rej.Reason, "anchor fraction must be in [0,1], got 1.5") {
		t.Errorf("the run's validator on 1.5: %+v, %v", rej, err)
	}
	var acc fractionReport
	e.wmrlJSON(t, &acc, "set-anchor-fraction", name, "0.5")
	if !acc.Accepted || acc.Previous == nil || *acc.Previous != 0.25 || acc.Fraction != 0.5 {
		t.Errorf("accepted %+v", acc)
	}
	// Paused between steps: the fraction applies from the next step.
	if acc.FromStep == nil || *acc.FromStep != s.Step {
		t.Errorf("accepted %+v: from step %v, want %d", acc, acc.FromStep, s.Step)
	}
	if s := e.status(t, name); s.AnchorFraction != 0.5 {
		t.Errorf("anchor fraction after the update: %v", s.AnchorFraction)
	}

	if out, err := e.wmrl(t, "resume", name); err != nil || !strings.Contains(out, "sent resume") {
		t.Fatalf("resume: %v %q", err, out)
	}
	waitFor(t, "a step after resume", func() bool { return e.status(t, name).Step > s.Step })
	if out, err := e.wmrl(t, "stop", name); err != nil || !strings.Contains(out, "stops after its current step") {
		t.Fatalf("stop: %v %q", err, out)
	}
	waitFor(t, "completion after stop", func() bool { return e.status(t, name).Workflow == wfCompleted })
	s = e.status(t, name)
	if s.Result == nil || !s.Result.Stopped || s.Step >= 40 || s.State != "completed" {
		t.Errorf("stopped run: %+v, result %+v", s, s.Result)
	}
	if s.AnchorFraction != 0.5 {
		t.Errorf("anchor fraction of the finished run: %v, want the 0.5 set during it", s.AnchorFraction)
	}
	if _, err := e.wmrl(t, "pause", name); err == nil || !strings.Contains(err.Error(), "is not running (workflow completed)") {
		t.Errorf("pause of a completed run: %v", err)
	}
}

// testResumeFrom terminates a run mid-way and resumes it; the resumed run
// ends with the checkpoint of an uninterrupted run with the same seed.
func testResumeFrom(t *testing.T, e *itEnv) {
	cfg := writeFile(t, "rf.yaml", "steps: 4\n")
	whole := e.runName(t, "whole")
	var w runReport
	e.wmrlJSON(t, &w, "run", "--preset", "tiny", "--config", cfg, "--name", whole, "--poll", "100ms")
	if w.Detached || w.Status.State != "completed" || w.Status.Step != 4 {
		t.Fatalf("uninterrupted run: %+v", w)
	}

	name := e.runName(t, "cut")
	var started runReport
	e.wmrlJSON(t, &started, "run", "--preset", "tiny", "--config", cfg, "--name", name, "--detach")
	waitFor(t, "two completed steps", func() bool {
		last, ok, err := e.st.LastCompletedStep(t.Context(), name)
		return err == nil && ok && last >= 1
	})
	// resume-from, the deprecated alias of continue, still works.
	if _, err := e.wmrl(t, "resume-from", name); err == nil || !strings.Contains(err.Error(), "is still running") {
		t.Errorf("resume-from a running run: %v", err)
	}
	out, err := e.wmrl(t, "terminate", name, "--reason", "test of resume-from")
	if err != nil && strings.Contains(err.Error(), "nothing to terminate") {
		t.Skipf("run %s completed before it was terminated", name)
	}
	if err != nil || !strings.Contains(out, "terminated") {
		t.Fatalf("terminate: %v\n%s", err, out)
	}
	last, _, err := e.st.LastCompletedStep(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if last >= 3 {
		t.Skipf("run %s completed before it was terminated", name)
	}
	s := e.status(t, name)
	if s.Workflow != wfTerminated || s.State != wfTerminated || s.Source != sourcePostgres || s.Step != last+1 {
		t.Errorf("status of a terminated run: %+v", s)
	}

	out, err = e.wmrl(t, "continue", name, "--poll", "100ms")
	if err != nil {
		t.Fatalf("continue: %v\n%s", err, out)
	}
	t.Logf("wmrl continue %s:\n%s", name, out)
	next := fmt.Sprintf("%s-resume-%d", name, last+1)
	if !strings.Contains(out, fmt.Sprintf("started run %s from run %s after step %d", next, name, last)) ||
		strings.Contains(out, fmt.Sprintf("step %d: rho", last)) || !strings.Contains(out, "step 3: rho") {
		t.Errorf("resume-from output:\n%s", out)
	}
	r := e.status(t, next)
	if r.State != "completed" || r.Step != 4 || r.ResumedFrom != name || r.ResumedStep == nil || *r.ResumedStep != last {
		t.Errorf("resumed run status %+v", r)
	}
	if r.Checkpoint != w.Status.Checkpoint {
		t.Errorf("resumed run ends at checkpoint %+v, the uninterrupted one at %+v", r.Checkpoint, w.Status.Checkpoint)
	}
	ck, err := e.st.Checkpoints(t.Context(), next)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range ck {
		if c.Version != i {
			t.Errorf("checkpoint versions of %s not contiguous: %+v", next, ck)
			break
		}
	}
	if old, err := e.st.Run(t.Context(), name); err != nil || old.State != store.RunTerminated ||
		old.Termination == nil || old.Termination.Reason != "test of resume-from" {
		t.Errorf("old run's recorded state: %+v %v", old, err)
	}
	if _, err := e.wmrl(t, "continue", whole); err == nil || !strings.Contains(err.Error(), "completed all its 4 steps") {
		t.Errorf("continue a completed run: %v", err)
	}
	if _, err := e.wmrl(t, "continue", name); err == nil || !strings.Contains(err.Error(), "taken by an earlier run") {
		t.Errorf("continue twice to the same name: %v", err)
	}
}

// testDetach interrupts wmrl run (as Ctrl-C does, by cancelling its
// context): the command detaches and the run goes on.
func testDetach(t *testing.T, e *itEnv) {
	name := e.runName(t, "detach")
	cfg := writeFile(t, "d.yaml", "steps: 40\n")
	ctx, cancel := context.WithCancel(t.Context())
	// Interrupt once the command has printed step 0's line (not after a
	// fixed delay, which a loaded machine can miss).
	var buf syncBuffer
	go func() {
		for !strings.Contains(buf.String(), "step 0: rho") && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}()
	root := newRootCmd()
	root.SetOut(&buf)
	root.SetErr(io.Discard)
	root.SetArgs(append([]string{"run", "--preset", "tiny", "--config", cfg, "--name", name, "--poll", "100ms"}, e.flags...))
	err := root.ExecuteContext(ctx)
	cancel()
	out := buf.String()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	t.Logf("wmrl run interrupted:\n%s", out)
	for _, w := range []string{"step 0: rho", "detached from run " + name + " at step", "it goes on", "wmrl stop " + name,
		"wmrl status " + name + " --follow"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	s := e.status(t, name)
	if s.Workflow != wfRunning {
		t.Errorf("run after detaching: %+v", s)
	}
	if _, err := e.wmrl(t, "stop", name); err != nil {
		t.Fatal(err)
	}
	// status --follow follows it again, to its end.
	var f runReport
	e.wmrlJSON(t, &f, "status", name, "--follow", "--poll", "100ms")
	if f.Detached || f.Run != name || f.TemporalRunID == "" || f.Status.Workflow != wfCompleted || f.Status.Result == nil ||
		!f.Status.Result.Stopped {
		t.Errorf("status --follow: %+v", f)
	}
}
