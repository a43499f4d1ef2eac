// Package workflows holds the two Temporal workflows of wmrl, one per file:
// TrainingRun, the parent of a run, and TrainingStep, its child for one
// training step (workflow ID "<run>/step-<n>").
//
// TrainingStep runs the stages of docs/design.md ("The step workflow"):
// StartStep (a local activity), GraderCapacity (sandbox queue, when the
// anchors follow a grader's free capacity) and, under active anchors or
// selective scoring, AnchorUncertainty (local, once) before the
// deterministic anchor choice and the selection of the world-model groups
// whose scores enter the update (here, in the workflow); then each group through its own pipeline,
// at most the config's parallelism activities at a time and with no barrier
// between groups: Generate (rollout queue), ScoreWorldModel (worldmodel
// queue, unless the mode is grpo) and Execute for every trajectory that
// needs a real score (sandbox queue: all of them in grpo, the anchor groups'
// in the anchor modes, none in wm). CalibrateAndFuse (local: records the
// anchor pairs, fits the calibration map, runs the signal gate and the
// denoiser and writes the fused batch), Update (gpu queue) and FinishStep
// (local: the step's metrics) end it. Histories recorded before
// changeStepPipeline ran the stages one after another, with RecordAnchors,
// Calibrate and Fuse as activities on the control queue; they still replay.

// TrainingRun runs the steps one after another, carrying a small state
// (RunState: next step, checkpoint, denoiser state, anchor tracker, anchor
// fraction, last metrics), evaluates the held-out tasks every E steps and at
// the end, and continues as new every K steps or when Temporal suggests it.
// It answers the query "status", the signals "pause", "resume" and "stop"
// (after the current step) and the update "set-anchor-fraction". A run
// started with RunInput.ResumeFrom copies another run's history up to its
// last completed step (activity ResumeRun) and continues from there, as
// `wmrl continue` starts it.
//
// Both keep an audit a person can read in the Temporal Web UI (summary.go):
// a one-line summary on every activity, a static summary on each step
// child, and the step's result line and the run's progress as their
// current details.
//
// The code here must replay deterministically: no time.Now, no rand, no
// native go statements, channels or selects (workflow.Go, workflow channels
// and selectors instead), no ranging over maps (workflowcheck runs in
// `make test`), and every seed comes from (run seed, step, group, sample).
// Change workflow logic behind workflow.GetVersion (its change IDs are in
// versions.go) and keep the recorded histories in testdata/ replaying.
// Activities are scheduled through their typed contracts
// (activities.Generate.Execute(ctx, req)), whose requests and responses
// are the activities package's types: this package imports no store.
package workflows
