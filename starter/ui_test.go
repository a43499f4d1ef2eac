package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/workflows"
)

// The audit in the Temporal Web UI (docs/design.md, "Audit"): a tiny run
// started by wmrl run carries its configuration in its memo and a static
// summary; its steps, their activities and their results carry summaries.
// TestUIAudit checks them through the Temporal API (the recorded user
// metadata), then renders the step workflow's pages of the real Web UI in
// headless Chromium and finds the summaries in the rendered page.

const uiNamespace = "wmrl-ui-test"

// uiRun runs the tiny preset through wmrl run on the test stack and returns
// its name.
func uiRun(t *testing.T) (*itEnv, string) {
	e := stack(t, uiNamespace)
	name := e.runName(t, "audit")
	if out, err := e.wmrl(t, "run", "--preset", "tiny", "--name", name, "--poll", "100ms"); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	return e, name
}

func decodeString(t *testing.T, p *commonpb.Payload) string {
	t.Helper()
	if p == nil {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// history returns a workflow's events.
func history(t *testing.T, tc client.Client, id string) []*historypb.HistoryEvent {
	t.Helper()
	it := tc.GetWorkflowHistory(t.Context(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var evs []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return evs
}

func TestUIAudit(t *testing.T) {
	e, name := uiRun(t)
	ctx := t.Context()
	cfg, err := runconfig.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name = name

	// The run: its memo holds the configuration, its static summary what it is.
	d, err := e.tc.DescribeWorkflowExecution(ctx, name, "")
	if err != nil {
		t.Fatal(err)
	}
	wantRun := runSummary(workflows.RunInput{RunID: name, Config: cfg})
	if got := decodeString(t, d.GetExecutionConfig().GetUserMetadata().GetSummary()); got != wantRun {
		t.Errorf("run summary %q, want %q", got, wantRun)
	}
	var memo runconfig.Config
	if err := converter.GetDefaultDataConverter().FromPayload(d.GetWorkflowExecutionInfo().GetMemo().GetFields()[memoConfig], &memo); err != nil {
		t.Fatalf("memo %s: %v", memoConfig, err)
	}
	a, _ := json.Marshal(memo)
	b, _ := json.Marshal(cfg)
	if string(a) != string(b) {
		t.Errorf("memo config\n%s\nwant\n%s", a, b)
	}

	// Step 1: its static summary, a summary on every activity it ran, the
	// result line on FinishStep and as its current details.
	stepID := workflows.StepWorkflowID(name, 1)
	sd, err := e.tc.DescribeWorkflowExecution(ctx, stepID, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeString(t, sd.GetExecutionConfig().GetUserMetadata().GetSummary()); got != "step 1 wmrl" {
		t.Errorf("step summary %q, want %q", got, "step 1 wmrl")
	}
	var update, finish string
	activitiesSeen := 0
	for _, ev := range history(t, e.tc, stepID) {
		var kind string
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			kind = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enums.EVENT_TYPE_MARKER_RECORDED:
			if ev.GetMarkerRecordedEventAttributes().GetMarkerName() != "LocalActivity" {
				continue
			}
			kind = "local activity"
		default:
			continue
		}
		activitiesSeen++
		s := decodeString(t, ev.GetUserMetadata().GetSummary())
		if s == "" {
			t.Errorf("event %d (%s) has no summary", ev.GetEventId(), kind)
		}
		switch {
		case strings.HasPrefix(s, "Update "):
			update = s
		case strings.HasPrefix(s, "FinishStep "):
			finish = s
		}
	}
	if activitiesSeen < 10 {
		t.Errorf("%d activities in step 1's history", activitiesSeen)
	}
	if update != "Update step 1 -> checkpoint 2" {
		t.Errorf("Update summary %q", update)
	}
	if !strings.HasPrefix(finish, "FinishStep step 1: ρ ") || !strings.Contains(finish, "executed, mean reward") {
		t.Errorf("FinishStep summary %q", finish)
	}
	v, err := e.tc.QueryWorkflow(ctx, stepID, "", "__temporal_workflow_metadata")
	if err != nil {
		t.Fatal(err)
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		t.Fatal(err)
	}
	line := md.GetCurrentDetails()
	if "FinishStep "+line != finish {
		t.Errorf("step current details %q, FinishStep summary %q", line, finish)
	}
	t.Logf("step 1: %s", line)

	// The Web UI, rendered by headless Chromium.
	browser := chromium(t)
	ui := uiURL(t)
	shots := os.Getenv("WMRL_UI_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	base := fmt.Sprintf("%s/namespaces/%s/workflows/%s/%s", ui, uiNamespace, url.PathEscape(stepID),
		sd.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	pages := []struct {
		path, shot string
		want       []string
	}{
		// The history: the step's summary in its header, the activities'
		// summaries in the event list.
		{"/history", "step.png", []string{"step 1 wmrl", update}},
		// The metadata tab: summary, details and current details.
		{"/metadata", "step-metadata.png", []string{"step 1 wmrl", "run **" + name + "**", line}},
	}
	for _, p := range pages {
		dom := render(t, browser, base+p.path, filepath.Join(shots, p.shot))
		for _, w := range p.want {
			if !strings.Contains(dom, w) {
				t.Errorf("%s: rendered page lacks %q", p.path, w)
			}
		}
	}
}

// chromium is the path of Debian's chromium; the test skips without it,
// except under CI (.ci/run installs it), where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (apt-get install chromium): the Web UI is not rendered"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// uiURL is the Temporal Web UI's address ($WMRL_UI_URL, default
// deploy/temporal.sh's 127.0.0.1:8233); the test skips when it does not
// answer, except under CI.
func uiURL(t *testing.T) string {
	t.Helper()
	u := deployenv.Read().UIURL
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("%s %q: %v", deployenv.EnvUIURL, u, err)
	}
	if c, err := net.DialTimeout("tcp", pu.Host, 2*time.Second); err != nil {
		msg := fmt.Sprintf("no Temporal Web UI at %s (deploy/temporal.sh start, or set %s): %v", u, deployenv.EnvUIURL, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	} else {
		c.Close()
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return strings.TrimSuffix(u, "/")
}

// render loads page in headless Chromium until its scripts have rendered
// it, saves a screenshot to shot and returns the rendered DOM, its HTML
// entities and its URL-encoded attributes (the UI renders Markdown in an
// iframe whose src holds the text) decoded.
func render(t *testing.T, browser, page, shot string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	profile := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
			"--user-data-dir=" + profile, "--window-size=1440,1000", "--virtual-time-budget=20000"}, append(extra, page)...)
	}
	out, err := exec.CommandContext(ctx, browser, args("--dump-dom")...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v", page, err)
	}
	if err := os.MkdirAll(filepath.Dir(shot), 0o755); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.CommandContext(ctx, browser, args("--screenshot="+shot)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot %s: %v\n%s", page, err, msg)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (%d bytes)", shot, err, sizeOf(fi))
	}
	t.Logf("%s: %d bytes of DOM, screenshot %s", page, len(out), shot)
	dom := html.UnescapeString(string(out))
	for _, m := range encodedContent.FindAllStringSubmatch(dom, -1) {
		if dec, err := url.QueryUnescape(m[1]); err == nil {
			dom += "\n" + dec
		}
	}
	return dom
}

// encodedContent finds the Markdown the UI hands its render iframes.
var encodedContent = regexp.MustCompile(`content=([^"&]*)`)

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.Size()
}
