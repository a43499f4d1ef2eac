package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	"github.com/wmrl/wmrl/internal/testenv"
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
	// The static summary is on the run's first execution; continue-as-new
	// carries the memo over.
	first, err := e.tc.DescribeWorkflowExecution(ctx, name, d.GetWorkflowExecutionInfo().GetFirstRunId())
	if err != nil {
		t.Fatal(err)
	}
	wantRun := runSummary(workflows.RunInput{RunID: name, Config: cfg})
	if got := decodeString(t, first.GetExecutionConfig().GetUserMetadata().GetSummary()); got != wantRun {
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
	// Every activity's summary, by its type: ActivityTaskScheduled events,
	// and the markers of local activities (their type is in the marker's
	// data).
	summaries := map[string][]string{}
	for _, ev := range history(t, e.tc, stepID) {
		var kind string
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			kind = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enums.EVENT_TYPE_MARKER_RECORDED:
			m := ev.GetMarkerRecordedEventAttributes()
			if m.GetMarkerName() != "LocalActivity" {
				continue
			}
			var data struct{ ActivityType string }
			if err := converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["data"], &data); err != nil {
				t.Fatalf("event %d: %v", ev.GetEventId(), err)
			}
			kind = data.ActivityType
		default:
			continue
		}
		s := decodeString(t, ev.GetUserMetadata().GetSummary())
		if s == "" {
			t.Errorf("event %d (%s) has no summary", ev.GetEventId(), kind)
		}
		summaries[kind] = append(summaries[kind], s)
	}
	t.Logf("step 1's summaries: %q", summaries)
	for _, k := range []string{"StartStep", "Generate", "ScoreWorldModel", "Execute", "CalibrateAndFuse", "Update", "FinishStep"} {
		if len(summaries[k]) == 0 {
			t.Errorf("no %s in step 1's history", k)
		}
	}
	update, finish := strings.Join(summaries["Update"], ""), strings.Join(summaries["FinishStep"], "")
	if update != "step 1 -> checkpoint 2" {
		t.Errorf("Update summary %q", update)
	}
	if !strings.HasPrefix(finish, "step 1: ρ ") || !strings.Contains(finish, "executed, mean reward") {
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
	if line != finish {
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
		// heading is the heading scrolled to the top for the screenshot.
		heading string
		want    []string
	}{
		// The event history and the timeline: the activities' summaries.
		{"/history", "", "", []string{update, finish, summaries["Execute"][0]}},
		{"/timeline", "step-timeline.png", "Timeline", []string{update, summaries["Execute"][0]}},
		// The user metadata tab: summary, details and current details.
		{"/user-metadata", "step-metadata.png", "", []string{"step 1 wmrl", "run " + name + ", mode wmrl, step 1 of 3", line}},
	}
	for _, p := range pages {
		shot := ""
		if p.shot != "" {
			shot = filepath.Join(shots, p.shot)
		}
		text := render(t, browser, base+p.path, shot, p.heading, p.want)
		for _, w := range p.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: rendered page lacks %q", p.path, w)
			}
		}
	}
}

// TestUIRefusesWrites asks the Web UI of the test stack ($WMRL_UI_URL), from
// a plain HTTP client with no client certificate, to terminate a running
// workflow the way the UI's own frontend does: the _csrf cookie of one GET,
// sent back as the X-CSRF-TOKEN header, and a POST to the ui-server's route
// of TerminateWorkflowExecution. The UI is read-only (temporal-dev without
// --ui-write-actions): it answers 405 and the workflow still runs.
// deploy/devserver's TestUIReadOnly and TestUIAuthOIDC test the same server
// options in process, cancel, signal and reset too, and the OIDC login.
func TestUIRefusesWrites(t *testing.T) {
	ui := uiURL(t)
	tc, _ := testenv.Temporal(t, uiNamespace, workflows.SearchAttributes())
	ctx := t.Context()
	id := fmt.Sprintf("ui-write-probe-%d", time.Now().UnixNano())
	// No worker polls this task queue: the workflow stays running.
	wr, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "wmrl-ui-write-probe"}, "UIWriteProbe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), id, "", "TestUIRefusesWrites cleanup") })

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	resp, err := hc.Get(ui + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pu, _ := url.Parse(ui)
	var token string
	for _, c := range jar.Cookies(pu) {
		if c.Name == "_csrf" {
			token = c.Value
		}
	}
	if token == "" {
		t.Fatalf("GET %s/: no _csrf cookie", ui)
	}
	terminate := fmt.Sprintf("%s/api/v1/namespaces/%s/workflows/%s/terminate?execution.runId=%s",
		ui, uiNamespace, url.PathEscape(id), wr.GetRunID())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, terminate, strings.NewReader(`{"reason":"TestUIRefusesWrites"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-TOKEN", token)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("POST %s: %s %.120s", terminate, resp.Status, body)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("the UI answered the terminate %s %.200s, want 405 Method Not Allowed", resp.Status, body)
	}
	d, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("after the UI's terminate the workflow is %v, want running", st)
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

// render loads page in headless Chromium, driven over the DevTools
// protocol on a pipe (--remote-debugging-pipe), until the text of the page
// and of its iframes (the UI renders every summary's Markdown in an
// iframe, which --dump-dom leaves out) holds every string of want or a
// minute passes; it scrolls the heading (h1-h3) of that text, if any, to the
// top, saves a screenshot to shot (none if "") and returns the page's text.
func render(t *testing.T, browser, page, shot, heading string, want []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := startBrowser(ctx, t, browser)
	defer b.close()
	var target struct {
		TargetID string `json:"targetId"`
	}
	b.call(t, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	b.call(t, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	sid := attached.SessionID
	b.call(t, sid, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 1280, "height": 820, "deviceScaleFactor": 1, "mobile": false}, nil)
	b.call(t, sid, "Page.navigate", map[string]any{"url": page}, nil)
	const text = `(() => {
		const parts = [document.body ? document.body.innerText : ""];
		for (const f of document.querySelectorAll("iframe")) {
			try { parts.push(f.contentDocument.body.innerText); } catch (e) {}
		}
		return parts.join("\n");
	})()`
	var got string
	for deadline := time.Now().Add(time.Minute); ; {
		var r struct {
			Result struct {
				Value string `json:"value"`
			} `json:"result"`
		}
		b.call(t, sid, "Runtime.evaluate", map[string]any{"expression": text, "returnByValue": true}, &r)
		got = r.Result.Value
		missing := slices.IndexFunc(want, func(w string) bool { return !strings.Contains(got, w) })
		if missing < 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if shot == "" {
		t.Logf("%s: %d bytes of text", page, len(got))
		return got
	}
	if heading != "" {
		h, _ := json.Marshal(heading)
		scroll := `(() => {
			const h = [...document.querySelectorAll("h1,h2,h3")].find(e => e.textContent.trim() === ` + string(h) + `);
			if (h) { h.scrollIntoView({block: "start"}); }
			return !!h;
		})()`
		var r struct {
			Result struct {
				Value bool `json:"value"`
			} `json:"result"`
		}
		b.call(t, sid, "Runtime.evaluate", map[string]any{"expression": scroll, "returnByValue": true}, &r)
		if !r.Result.Value {
			t.Errorf("%s: no heading %q", page, heading)
		}
	}
	time.Sleep(time.Second) // let the last frames paint
	var png struct {
		Data []byte `json:"data"` // base64 in JSON
	}
	b.call(t, sid, "Page.captureScreenshot", map[string]any{"format": "png"}, &png)
	if err := os.MkdirAll(filepath.Dir(shot), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shot, png.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes of text, screenshot %s (%d bytes)", page, len(got), shot, len(png.Data))
	return got
}

// cdpBrowser is a headless Chromium spoken to over the DevTools protocol on
// a pipe: JSON messages ended by a NUL byte, Chromium reading fd 3 and
// writing fd 4.
type cdpBrowser struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	nextID int
}

func startBrowser(ctx context.Context, t *testing.T, browser string) *cdpBrowser {
	t.Helper()
	toChrome, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, browser, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--remote-debugging-pipe", "--user-data-dir="+t.TempDir(), "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fds 3 and 4
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}
	toChrome.Close()
	fromChrome.Close()
	return &cdpBrowser{cmd: cmd, in: in, out: bufio.NewReader(out)}
}

// call sends method to the session sid ("" the browser) and decodes its
// result into res, skipping the events that come before it.
func (b *cdpBrowser) call(t *testing.T, sid, method string, params, res any) {
	t.Helper()
	b.nextID++
	msg := map[string]any{"id": b.nextID, "method": method, "params": params}
	if sid != "" {
		msg["sessionId"] = sid
	}
	data, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.in.Write(append(data, 0)); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	for {
		line, err := b.out.ReadBytes(0)
		if err != nil {
			t.Fatalf("%s: read: %v", method, err)
		}
		var reply struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line[:len(line)-1], &reply); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if reply.ID != b.nextID {
			continue // an event, or another reply
		}
		if reply.Error != nil {
			t.Fatalf("%s: %s", method, reply.Error.Message)
		}
		if res != nil {
			if err := json.Unmarshal(reply.Result, res); err != nil {
				t.Fatalf("%s: %v", method, err)
			}
		}
		return
	}
}

func (b *cdpBrowser) close() {
	b.in.Close() // Chromium exits when its pipe closes
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}
