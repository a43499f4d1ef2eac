package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveRoot is wmrl with only serve, on the small suite.
func serveRoot() *cobra.Command {
	root := &cobra.Command{Use: "wmrl", SilenceUsage: true, SilenceErrors: true}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{Err: err} })
	root.AddCommand(newServeCmdWith(addConnFlags(root, deployenv.Read()), smallSuiteOptions))
	guardArgs(root)
	return root
}

func TestServeUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "8089"}, `wmrl: --listen "8089": want HOST:PORT, e.g. 127.0.0.1:8089`},
		{[]string{"--listen", "localhost:http"}, `wmrl: --listen "localhost:http": port "http" is not a number in 0..65535`},
		{[]string{"--listen", "127.0.0.1:70000"}, `port "70000" is not a number in 0..65535`},
		{[]string{"--listen", ""}, `wmrl: --listen "": want HOST:PORT`},
		{[]string{"--capacity", "-1"}, "wmrl: --capacity -1: want 1..65536"},
		{[]string{"--wm-capacity", "100000"}, "wmrl: --wm-capacity 100000: want 1..65536"},
		{[]string{"--sandbox", "vm"}, `wmrl: --sandbox: "vm" is not docker, process or auto`},
		{[]string{"--update-time", "-1s"}, "wmrl: --update-time -1s: want a duration in [0, 1h0m0s]"},
		{[]string{"--grade-time", "2h"}, "wmrl: --grade-time 2h0m0s: want a duration in [0, 1h0m0s]"},
		{[]string{"--grade-time", "fast"}, `invalid argument "fast" for "--grade-time"`},
		{[]string{"extra"}, "wmrl: serve: unknown command"},
		{[]string{"--port", "1"}, "wmrl: unknown flag: --port"},
	} {
		var out, errOut bytes.Buffer
		status := run(serveRoot, append([]string{"serve"}, tt.args...), &out, &errOut)
		if status != exitUsage || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%q: status %d, stderr %q; want %d with %q", tt.args, status, errOut.String(), exitUsage, tt.want)
		}
	}
	// The real command tree has serve.
	var out, errOut bytes.Buffer
	if status := run(newRootCmd, []string{"serve", "--listen", "x"}, &out, &errOut); status != exitUsage {
		t.Errorf("wmrl serve --listen x: status %d, %s", status, errOut.String())
	}
}

// TestServe starts wmrl serve on a free port with the process sandbox and a
// token, grades through both services with the gradehttp client, and stops
// it with SIGTERM.
func TestServe(t *testing.T) {
	bin := testenv.BuildExecutor(t)
	cache := t.TempDir()
	t.Setenv(suite.CacheEnv, cache)
	const token = "serve-test-TOKEN-42"
	t.Setenv(gradehttp.TokenEnv, token)
	t.Setenv(openaiwm.EnvAPIKey, token+"-openai")
	t.Setenv(tinker.EnvAPIKey, token+"-tinker")
	_, dsn := testenv.FreshDB(t)
	s, err := suite.Loader{Dir: cache}.Load(t.Context(), smallSuiteOptions(suite.DefaultSeed))
	if err != nil {
		t.Fatal(err)
	}

	var stdout bytes.Buffer
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(serveRoot, []string{"serve", "--listen", "127.0.0.1:0", "--sandbox", "process", "--executor", bin,
			"--capacity", "2", "--wm-capacity", "3", "--database-url", dsn}, &stdout, stderr)
	}()
	urlRE := regexp.MustCompile(`"url": "(http://127\.0\.0\.1:\d+)"`)
	var url string
	for deadline := time.Now().Add(2 * time.Minute); url == ""; {
		if m := urlRE.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case status := <-done:
			t.Fatalf("wmrl serve exited %d before listening: %s", status, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("wmrl serve not listening after 2 minutes: %s", stderr.String())
		}
	}
	for _, e := range []string{"GET /health", "POST /grade", "GET /worldmodel/health", "POST /worldmodel/grade",
		"POST /v1/chat/completions", "POST /api/v1/... (Tinker)"} {
		if !strings.Contains(stderr.String(), e) {
			t.Errorf("the startup line does not list %s: %s", e, stderr.String())
		}
	}

	// /health over plain HTTP, without the token.
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Capacity int }
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || h.Capacity != 2 {
		t.Errorf("GET /health: %d, capacity %d, %v", resp.StatusCode, h.Capacity, err)
	}

	task := s.Tasks[0]
	item := backend.GradeItem{Task: backend.Task{Suite: suite.DefaultSeed, ID: task.ID}, Solution: task.ExampleProgram, Seed: 1,
		Key: backend.SampleKey("serve-test", 0, 0, 0)}
	grader, err := gradehttp.New(gradehttp.DefaultConfig(url))
	if err != nil {
		t.Fatal(err)
	}
	if err := grader.Preflight(t.Context(), backend.DefaultLimits()); err != nil {
		t.Error(err)
	}
	gs, err := grader.Grade(t.Context(), backend.GradeRequest{Items: []backend.GradeItem{item}, Limits: backend.DefaultLimits()})
	if err != nil || !gs[0].Graded || gs[0].Status != "ok" || gs[0].Score < 0.5 {
		t.Errorf("grade the example program: %+v, %v", gs, err)
	}
	// The reference's item shape (no suite, no id, its limit keys) is
	// graded against --suite-seed's suite: the same verdict; request_info
	// answers the data structure.
	refBody, _ := json.Marshal(map[string]any{"items": []map[string]any{
		{"task": task.ID, "data_dir": "/data/" + task.ID + "/data", "action": "execute_code", "overview": "o",
			"limits": map[string]any{"execution_timeout": 600, "cpu_time_limit": 3000, "memory_limit": 64}, "code": task.ExampleProgram},
		{"task": task.ID, "data_dir": "/data/" + task.ID + "/data", "action": "request_info", "overview": "o"}}, "workers": 1})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/grade", bytes.NewReader(refBody))
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		var res []gradehttp.Result
		err := json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(res) != 2 || res[0].Reward == nil || len(gs) != 1 || *res[0].Reward != gs[0].Score ||
			res[1].Status != gradehttp.StatusInfo || !strings.Contains(res[1].Feedback, "rows") {
			t.Errorf("the reference's items: %d %+v %v; want reward %v and the data structure", resp.StatusCode, res, err, gs)
		}
	}
	wm, err := gradehttp.New(gradehttp.DefaultConfig(url + "/worldmodel"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := wm.Capacity(t.Context()); err != nil || n != 3 {
		t.Errorf("world model capacity %d, %v; want 3", n, err)
	}
	ps, err := wm.Score(t.Context(), []backend.ScoreItem{{Task: item.Task, Solution: item.Solution, Key: item.Key}})
	if err != nil || !ps[0].Graded || !(ps[0].Score >= 0 && ps[0].Score <= 1) {
		t.Errorf("world model: %+v, %v", ps, err)
	}

	// The same world model over chat completions, through the OpenAI
	// client: the same score.
	cfg := openaiwm.DefaultConfig()
	cfg.BaseURL, cfg.Model = url+"/v1", "wmrl-builtin"
	key, err := openaiwm.LoadKey(cfg, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	owm, err := openaiwm.New(cfg, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := owm.Score(t.Context(), []backend.ScoreItem{{Task: item.Task, Solution: item.Solution, Key: item.Key}})
	if err != nil || len(ops) != 1 || !ops[0].Graded || ops[0].Score != ps[0].Score {
		t.Errorf("world model over chat completions: %+v, %v; over /grade %+v", ops, err, ps)
	}

	// The built-in policy over the Tinker API: a model, its checkpoint 0,
	// samples that are programs.
	tcfg, err := tinker.Config{BaseURL: url, BaseModel: tinker.BuiltinBaseModel}.FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := tinker.New(tcfg, tinker.BuiltinTokenizer{}, &tinker.MemJournal{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := pol.Init(t.Context(), backend.InitRequest{Run: "serve-test", Suite: suite.DefaultSeed, Seed: 3,
		Settings: backend.PolicySettings{LearningRate: 0.01, Hidden: 16}})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := pol.Sample(t.Context(), backend.SampleRequest{Run: "serve-test", Checkpoint: ck, Task: item.Task,
		Seeds: []uint64{1, 2}, Key: backend.SampleKey("serve-test", 0, 0, -1)})
	if err != nil || len(cs) != 2 {
		t.Fatalf("sample over the Tinker API: %v, %v", cs, err)
	}
	for _, c := range cs {
		if _, err := program.Parse(c.Text); err != nil || len(c.LogProbs) != len(c.Tokens) {
			t.Errorf("sampled %q (%d tokens, %d logprobs): %v", c.Text, len(c.Tokens), len(c.LogProbs), err)
		}
	}

	noToken, err := gradehttp.New(gradehttp.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noToken.Grade(t.Context(), backend.GradeRequest{Items: []backend.GradeItem{item}, Limits: backend.DefaultLimits()}); !backend.IsPermanent(err) ||
		!strings.Contains(err.Error(), "401") {
		t.Errorf("without the token: %v, want a permanent 401", err)
	}

	// The address is taken now: a second server fails to start (status 1).
	var errOut bytes.Buffer
	addr := strings.TrimPrefix(url, "http://")
	if status := run(serveRoot, []string{"serve", "--listen", addr, "--sandbox", "process", "--executor", bin}, io.Discard, &errOut); status != exitRuntime ||
		!strings.Contains(errOut.String(), "wmrl: --listen "+addr+": listen tcp "+addr+": bind: address already in use") {
		t.Errorf("second server on %s: status %d, %s", addr, status, errOut.String())
	}

	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case status := <-done:
		if status != exitOK {
			t.Errorf("after SIGTERM: status %d, %s", status, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("wmrl serve still running a minute after SIGTERM: %s", stderr.String())
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Errorf("%s still accepts connections after the stop", addr)
	}
	logs := stderr.String()
	if !strings.Contains(logs, "wmrl serve: stopped") || strings.Contains(logs, token) { // also the -openai and -tinker keys
		t.Errorf("logs: %s", logs)
	}
	t.Log(firstLine(logs, "listening"))
}

// firstLine returns the first line of s containing sub.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return fmt.Sprintf("(no line with %q)", sub)
}
