package builtin

import "github.com/wmrl/wmrl/internal/sandbox"

// Backend is the built-in backend: one adapter per port, sharing one task
// source. WorldModel is nil without a model and Grader nil without a
// sandbox (a worker that serves neither queue).
type Backend struct {
	Tasks      *Tasks
	Policy     *Policy
	WorldModel *WorldModel
	Grader     *Grader
}

// New returns the built-in adapters over suites, a world model (nil: none)
// and a sandbox (nil: none).
func New(suites Suites, model Predictor, sb sandbox.Sandbox) Backend {
	t := &Tasks{Suites: suites}
	b := Backend{Tasks: t, Policy: &Policy{Tasks: t}}
	if model != nil {
		b.WorldModel = &WorldModel{Model: model, Suites: suites}
	}
	if sb != nil {
		b.Grader = &Grader{Tasks: t, Sandbox: sb}
	}
	return b
}
