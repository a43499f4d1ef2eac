package main

import (
	"testing"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/tinker"
)

// TestTinkerTurns runs the tiny preset with trajectory.turns: 3 and
// policy.backend tinker through wmrl run on the Temporal server, against
// the built-in policy served over the Tinker API as wmrl serve serves it
// (strict seq_id order), twice: both runs complete at the same checkpoint,
// every turn row holds its action's tokens and sampling logprobs, and every
// update is on-policy (importance ratio 1).
func TestTinkerTurns(t *testing.T) {
	const key = "tinker-turns-KEY-3"
	t.Setenv(tinker.EnvAPIKey, key)
	srv := &restartable{t: t, addr: "127.0.0.1:0"}
	e := stack(t, testNamespace+"-tinker-turns", func(a *activities.Activities) {
		pol := serveBuiltin(t, a, srv, key)
		a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol})
	})
	cfg := writeFile(t, "tinker-turns.yaml", "policy:\n  backend: tinker\ntrajectory:\n  turns: 3\n")
	final := func(name string) string {
		t.Helper()
		ctx := t.Context()
		s := e.completed(t, name)
		for step := range 3 {
			ts, err := e.st.StepTurns(ctx, name, step)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != 3*4*4 {
				t.Fatalf("run %s step %d: %d turn rows, want 48", name, step, len(ts))
			}
			for _, tr := range ts {
				if c := tr.Completion; c == nil || len(c.Tokens) == 0 || len(c.LogProbs) != len(c.Tokens) {
					t.Fatalf("%s: completion %+v, want the action's tokens and logprobs", tr.TurnKey, c)
				}
			}
		}
		e.checkOnPolicy(t, name)
		return s.Checkpoint.Hash
	}
	_, hash := e.runTwice(t, "tinker-turns", cfg, "tinker, 3 turns", final)
	t.Logf("both runs end at %s", hash)
}
