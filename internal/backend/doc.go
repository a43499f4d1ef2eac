// Package backend holds the four ports a training step talks to, as small
// interfaces owned by the activities that use them:
//
//   - Policy: checkpoint 0 of a run (Init), n completions of a prompt from a
//     checkpoint (Sample, with token ids and logprobs when the backend has
//     them), and the next checkpoint from a fused batch (Update);
//   - WorldModel: a score in [0,1], or ungraded, for each (task, solution)
//     of a batch, without running anything (Score);
//   - Grader: the real execution and grading of solutions (Grade): a status,
//     a score on the reward ladder or ungraded, and what it cost;
//   - TaskSource: the tasks of a suite, by split and by id.
//
// A backend (the built-in CPU pieces in package builtin, the Tinker training
// API, an OpenAI-compatible world model, /grade HTTP graders, the Python
// sandbox) is one adapter package satisfying some of them. The worker builds
// the adapters once, in main, one registration each, into a Registry by
// kind (the run-config field that names them: policy.backend,
// world_model.backend, sandbox.kind, tasks) and name; the activities and the
// preflight look a run's backends up there and import this package only.
// A run's settings of a backend travel with the requests to it
// (PolicySettings in a SampleRequest, WorldModelSettings in a ScoreRequest).
//
// Every request carries what a remote adapter needs to be safe under
// Temporal's retries: the seeds that make sampling deterministic, and an
// idempotency key (SampleKey, StepKey, EvalKey) so that an activity retried
// after a timeout never does non-idempotent remote work (an optimiser step, a
// paid grading) twice. Errors follow one rule: an adapter returns an error it
// knows retrying cannot help (a corrupt checkpoint, an unknown task, an
// unparsable request) as a *PermanentError (Permanent, IsPermanent), which the
// activities turn into a non-retryable failure, and every other error (network,
// 429, 5xx, a missing file) as a plain error, which Temporal retries. A
// solution's own failure is never an error: it is a Grade.
//
// This package imports nothing of wmrl but internal/fielderr (a leaf), so
// that adapters and the packages they wrap can depend on it.
package backend
