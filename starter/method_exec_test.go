package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/wmrl/wmrl/internal/testlock"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
)

func runExecCmd(t *testing.T, cache string, args ...string) (string, error) {
	t.Helper()
	t.Setenv(suite.CacheEnv, cache)
	root := &cobra.Command{Use: "wmrl", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newExecCmdWith(smallSuiteOptions))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"exec"}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestExecCommand(t *testing.T) {
	bin := testenv.BuildExecutor(t)
	cache := t.TempDir()
	s, err := suite.Loader{Dir: cache}.Load(context.Background(), smallSuiteOptions(suite.DefaultSeed))
	if err != nil {
		t.Fatal(err)
	}
	task := s.Tasks[0]
	sandboxes := []string{"process"}
	if dockerAnswers() {
		testlock.DockerImages(t, false)
		sandboxes = append(sandboxes, "docker")
	} else {
		t.Log("no Docker engine answers: exec checked with the process sandbox only")
	}
	tests := []struct {
		give      string
		want      string
		wantScore float64 // -1: the example program's score, at least 0.5
	}{
		{give: task.ExampleProgram, want: "ok", wantScore: -1},
		{give: "ridge alpha=", want: "invalid_program", wantScore: 0},
		{give: "poly degree=3 | gbt trees=2000 depth=10 lr=0.001", want: "timeout", wantScore: 0.1},
	}
	for _, sb := range sandboxes {
		for _, tt := range tests {
			out, err := runExecCmd(t, cache, "--task", task.ID, "--program", tt.give, "--sandbox", sb,
				"--executor", bin, "--deadline", "300ms", "--json")
			if err != nil {
				t.Fatalf("%s %q: %v", sb, tt.give, err)
			}
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			var rep execReport
			if err := dec.Decode(&rep); err != nil {
				t.Fatalf("decode %q: %v", out, err)
			}
			okScore := tt.wantScore == -1 && rep.Score >= 0.5
			if rep.Status != tt.want || !(okScore || rep.Score == tt.wantScore) || rep.WallSeconds <= 0 || rep.Task != task.ID {
				t.Errorf("%s %q: %+v, want %s", sb, tt.give, rep, tt.want)
			}
		}
	}
	// The text form says the same.
	out, err := runExecCmd(t, cache, "--task", task.ID, "--program", "ridge alpha=", "--sandbox", "process", "--executor", bin)
	if err != nil || !strings.Contains(out, "invalid_program") || !strings.Contains(out, "col 13") {
		t.Errorf("text output %q, %v", out, err)
	}
	// A sandbox that cannot start is an error, not a score.
	if _, err := runExecCmd(t, cache, "--task", task.ID, "--program", "mean", "--sandbox", "process",
		"--executor", filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("exec with a missing executor succeeded")
	}
	if _, err := runExecCmd(t, cache, "--task", "nope", "--program", "mean", "--executor", bin); err == nil {
		t.Error("exec of an unknown task succeeded")
	}
}

func dockerAnswers() bool {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx)
	return err == nil
}
