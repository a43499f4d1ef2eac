package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// runWorldModelCmd runs wmrl worldmodel ARGS in-process on the small suite
// with its cache in dir.
func runWorldModelCmd(t *testing.T, cache string, args ...string) (stdout string, err error) {
	t.Helper()
	t.Setenv(suite.CacheEnv, cache)
	root := &cobra.Command{Use: "wmrl", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newWorldModelCmdWith(addConnFlags(root, deployenv.Read()), smallSuiteOptions))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"worldmodel"}, args...))
	err = root.Execute()
	return out.String(), err
}

func TestWorldModelFitEval(t *testing.T) {
	if testing.Short() {
		t.Skip("real executions")
	}
	cache, dir := t.TempDir(), t.TempDir()
	art := filepath.Join(dir, "wm.json")
	out, err := runWorldModelCmd(t, cache, "fit", "--samples-per-task", "6", "--out", art, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var fs fitSummary
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if fs.Fit.Tasks != 13 || fs.Fit.Samples != 13*6 || fs.Out != art {
		t.Fatalf("fit summary %+v, want 13 training tasks, 78 samples, out %s", fs, art)
	}
	b, err := os.ReadFile(art)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := worldmodel.Load(b); err != nil {
		t.Fatalf("written artefact does not load: %v", err)
	}

	out, err = runWorldModelCmd(t, cache, "eval", "--model", art, "--samples-per-task", "6", "--json")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"spearman_within_group"`, `"mean_bias"`, `"calibration"`, `"mean_env"`} {
		if !strings.Contains(out, key) {
			t.Errorf("eval JSON lacks %s:\n%s", key, out)
		}
	}
	var rep evalReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Split != "heldout" || rep.Tasks != 13 || rep.Samples != 13*6 || len(rep.Calibration) == 0 || !(rep.PredictSecondsMean > 0) {
		t.Fatalf("eval report %+v", rep)
	}
	n := 0
	for _, b := range rep.Calibration {
		n += b.N
	}
	if n != rep.Samples {
		t.Fatalf("calibration bins hold %d samples, want %d", n, rep.Samples)
	}

	txt, err := runWorldModelCmd(t, cache, "eval", "--model", art, "--samples-per-task", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"spearman_within_group", "mean_bias", "r_wm bin"} {
		if !strings.Contains(txt, want) {
			t.Errorf("eval text lacks %q:\n%s", want, txt)
		}
	}
}

func TestWorldModelEvalRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	var edited map[string]any
	if err := json.Unmarshal(worldmodel.DefaultArtefact(), &edited); err != nil {
		t.Fatal(err)
	}
	edited["intercept"] = edited["intercept"].(float64) + 0.1
	art, err := json.Marshal(edited)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, art, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		give []string
		want string
	}{
		{"corrupted model", []string{"eval", "--model", bad}, "checksum mismatch"},
		{"missing model", []string{"eval", "--model", filepath.Join(dir, "none.json")}, "read world model"},
		{"bad split", []string{"eval", "--split", "test"}, "--split"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runWorldModelCmd(t, t.TempDir(), tt.give...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// worldmodel onpolicy on the small suite: v1 and v2 models fitted on the
// same executions, a 2-step reference loop, the frozen and refreshed
// replays; --load of the saved trajectories gives the same report.
func TestWorldModelOnPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("real executions")
	}
	cache, dir := t.TempDir(), t.TempDir()
	v1, v2, log := filepath.Join(dir, "v1.json"), filepath.Join(dir, "v2.json"), filepath.Join(dir, "log.jsonl")
	if _, err := runWorldModelCmd(t, cache, "fit", "--samples-per-task", "4", "--out", v1, "--log", log); err != nil {
		t.Fatal(err)
	}
	if _, err := runWorldModelCmd(t, cache, "fit", "--samples-per-task", "4", "--features", "v2", "--out", v2); err != nil {
		t.Fatal(err)
	}
	if _, err := runWorldModelCmd(t, cache, "fit", "--features", "v3"); err == nil || !strings.Contains(err.Error(), "--features") {
		t.Fatalf("fit --features v3: %v", err)
	}
	traj := filepath.Join(dir, "traj.jsonl")
	args := []string{"onpolicy", "--model", v1, "--model-v2", v2, "--base-log", log, "--steps", "2", "--every", "1",
		"--refresh-every", "1", "--half-life", "1", "--json"}
	out, err := runWorldModelCmd(t, cache, append(args, "--save", traj)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep onPolicyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	var names []string
	for _, v := range rep.Variants {
		names = append(names, v.Name)
		if len(v.Ranges) != 2 || v.Ranges[0].Groups != 8 || v.Ranges[0].Pairs != 64 {
			t.Fatalf("variant %s ranges %+v, want 2 ranges of 8 groups", v.Name, v.Ranges)
		}
	}
	if got := strings.Join(names, ","); got != "v1,v1+r,v1+r1,v2,v2+r,v2+r1" {
		t.Fatalf("variants %s", got)
	}
	// Step 0 is scored by the frozen model in every replay; step 1 by a
	// refit on step 0's anchors, which differs from it.
	if rep.Variants[0].Ranges[0] != rep.Variants[1].Ranges[0] || rep.Variants[3].Ranges[0] != rep.Variants[4].Ranges[0] {
		t.Error("step 0 of a refreshed replay differs from the frozen model's")
	}
	again, err := runWorldModelCmd(t, cache, append(args, "--load", traj)...)
	if err != nil || again != out {
		t.Fatalf("report from the saved trajectories differs (%v):\n%s\n%s", err, out, again)
	}
	// --memory adds each replay with execution memory, the same as it on
	// step 0 (nothing was executed before it).
	mout, err := runWorldModelCmd(t, cache, append(args, "--load", traj, "--memory")...)
	if err != nil {
		t.Fatal(err)
	}
	var mrep onPolicyReport
	if err := json.Unmarshal([]byte(mout), &mrep); err != nil {
		t.Fatalf("decode %q: %v", mout, err)
	}
	names = nil
	for i, v := range mrep.Variants {
		names = append(names, v.Name)
		if i%2 == 1 && (!v.Memory || v.Ranges[0] != mrep.Variants[i-1].Ranges[0]) {
			t.Errorf("variant %s: memory %v, step 0 %+v, without memory %+v", v.Name, v.Memory, v.Ranges[0], mrep.Variants[i-1].Ranges[0])
		}
	}
	if got := strings.Join(names, ","); got != "v1,v1+m,v1+r,v1+r+m,v1+r1,v1+r1+m,v2,v2+m,v2+r,v2+r+m,v2+r1,v2+r1+m" {
		t.Fatalf("variants with --memory: %s", got)
	}
	// Models fitted on other executions are refused; so is a v1 model as v2.
	other := filepath.Join(dir, "other.json")
	if _, err := runWorldModelCmd(t, cache, "fit", "--samples-per-task", "4", "--seed", "9", "--features", "v2", "--out", other); err != nil {
		t.Fatal(err)
	}
	if _, err := runWorldModelCmd(t, cache, "onpolicy", "--model", v1, "--model-v2", other, "--base-log", log, "--load", traj); err == nil ||
		!strings.Contains(err.Error(), "checksum") {
		t.Errorf("v2 model of other executions: %v", err)
	}
	if _, err := runWorldModelCmd(t, cache, "onpolicy", "--model", v1, "--model-v2", v1, "--load", traj); err == nil ||
		!strings.Contains(err.Error(), "--model-v2") {
		t.Errorf("a v1 model as --model-v2: %v", err)
	}
	if _, err := runWorldModelCmd(t, cache, "onpolicy", "--model", v1, "--model-v2", v2, "--load", traj, "--suite-seed", "3"); err == nil ||
		!strings.Contains(err.Error(), "--suite-seed is 3") {
		t.Errorf("trajectories of another suite: %v", err)
	}
	if _, err := runWorldModelCmd(t, cache, "onpolicy", "--steps", "0"); err == nil || !strings.Contains(err.Error(), "steps") {
		t.Errorf("--steps 0: %v", err)
	}
}

// rememberPairs scores a trajectory by an anchor's real score of its task
// and program at an earlier step, never at its own step, never another
// task's or a world-model group's.
func TestRememberPairs(t *testing.T) {
	trs := []policyTrajectory{
		{Step: 0, Task: "a", Program: "p", Score: 0.7, Anchor: true},
		{Step: 0, Task: "a", Program: "p", Score: 0.7},               // same step
		{Step: 0, Task: "b", Program: "q", Score: 0.2},               // a world-model group's
		{Step: 1, Task: "a", Program: "p", Score: 0.5, Anchor: true}, // remembered (a grader that varies)
		{Step: 1, Task: "a", Program: "p", Score: 0.7},               // remembered
		{Step: 1, Task: "b", Program: "p", Score: 0.4},               // another task
		{Step: 1, Task: "b", Program: "q", Score: 0.2},               // never anchored
		{Step: 2, Task: "a", Program: "p", Score: 0.1},               // mean of steps 0 and 1
	}
	pairs := make([]worldmodel.Pair, len(trs))
	for i := range pairs {
		pairs[i] = worldmodel.Pair{Step: trs[i].Step, WM: -1, Env: trs[i].Score}
	}
	got := rememberPairs(pairs, trs)
	want := []float64{-1, -1, -1, 0.7, 0.7, -1, -1, 0.6}
	for i := range got {
		if got[i].WM != want[i] || pairs[i].WM != -1 {
			t.Errorf("trajectory %d: %v (input %v), want %v", i, got[i].WM, pairs[i].WM, want[i])
		}
	}
}
