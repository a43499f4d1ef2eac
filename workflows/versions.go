package workflows

// Workflow changes, checked with workflow.GetVersion so that histories
// recorded before a change replay with the code that made them: the one
// registry of change IDs (docs/design.md, "Determinism"). A new change adds
// its constant here, says what it changed, and gets a recorded history
// under testdata/ that TestReplay replays.
const (
	// changeStepV2 (version 1): StartStep and FinishStep run as local
	// activities; RecordAnchors, Calibrate and Fuse run as one activity
	// (CalibrateAndFuse); an execution is retried until it has a verdict
	// (for at most sandbox.retry_hours), so an infrastructure outage never
	// leaves a trajectory ungraded; a step whose ungraded share exceeds
	// max_ungraded fails.
	changeStepV2 = "step-v2"
	// changeEvalV2 (version 1): a held-out evaluation is retried until it
	// has a verdict (for at most sandbox.retry_hours) instead of leaving a
	// task out, and an evaluation of no task is an error, never a score.
	changeEvalV2 = "eval-v2"
	// changeEvalTasksOfRun (version 1): HeldOutTasks names the run, so the
	// held-out tasks come from the run's task source (tasks: store);
	// before it, from the built-in suite of the suite seed.
	changeEvalTasksOfRun = "eval-tasks-of-run"
	// changeResumeV2 (version 1): a resumed run starts with the old run's
	// anchor fraction (as its last completed step used it), that step's
	// anchor groups and the held-out score of the checkpoint it resumes
	// from, as the ResumeRun activity rebuilds them; before it, with the
	// config's fraction, no anchor groups and no held-out score.
	changeResumeV2 = "resume-v2"
	// changeStepPipeline (version 1, with changeStepV2): the anchor groups
	// are chosen first, and each group's ScoreWorldModel and executions
	// start as soon as its Generate is done, under one bound of
	// parallelism activities, instead of each stage waiting for every group
	// of the one before; CalibrateAndFuse runs as a local activity.
	changeStepPipeline = "step-pipeline"
	// changeRunSignalsAtCAN (version 1): before continuing as new, the run
	// lets its signal listeners apply the signals of the current workflow
	// task, so a stop (or pause) that arrives with the step completion
	// that triggers continue-as-new is carried over; before it, such a
	// signal could be lost.
	changeRunSignalsAtCAN = "run-signals-at-can"
	// changePreflightBackends (version 1): the preflight also asks a
	// rollout, a gpu and (when the mode uses it) a worldmodel worker
	// whether it has the policy and world-model backends the run names,
	// and whether they answer.
	changePreflightBackends = "preflight-backends"
	// changeGraderCapacity (version 1, with anchors.from_grader only): the
	// anchor groups are also capped by the grader's capacity, asked at
	// the step's start (activity GraderCapacity on the sandbox queue).
	changeGraderCapacity = "grader-capacity"
	// changeActiveAnchors (version 1, asked only in runs with
	// anchors.active enabled): the step asks AnchorUncertainty (a local
	// activity) for each group's uncertainty and chooses its anchor groups
	// by anchors.SelectActive, whose weights go with the anchor pairs and
	// the denoiser's s².
	changeActiveAnchors = "active-anchors"
	// changeSignalGate (version 1, asked only in steps whose fusion
	// returned a signal gate decision, denoise.signal_window > 0): the
	// decision is recorded in the step's metrics and shown in its line.
	changeSignalGate = "signal-gate"
	// changeAdaptiveAnchors (version 1, asked only in runs with
	// anchors.adaptive set): after a step whose denoiser is calibrated,
	// the run moves its anchor fraction by anchors.Adapt; a resumed run
	// moves the fraction of the old run's last step by that step's ρ, as
	// the old run would have.
	changeAdaptiveAnchors = "adaptive-anchors"
	// changeWorldModelRefresh (version 1): a run with world_model.refresh
	// retrains its world model every refresh.every steps (activity
	// RefreshWorldModel on the worldmodel queue), and its steps are scored
	// by the latest version (ScoreRequest.WorldModel) and calibrated on
	// the pairs that version scored (CalibrateRequest.FromStep). Only runs
	// with the section reach the check, so no earlier history meets it.
	changeWorldModelRefresh = "world-model-refresh"
	// changeUISummaries (version 1): an audit a person can read in the
	// Temporal Web UI (summary.go): every activity carries a one-line
	// summary, each step child workflow a static summary and details, and
	// the step and run workflows set their current details (the step's
	// result line, the run's progress). User metadata adds no command, so
	// it changes no replay; it is behind the change all the same, so a
	// replayed history shows what its run showed.
	changeUISummaries = "ui-summaries"
	// changeImportanceRatio (version 1, asked only in steps whose Update
	// reports an importance ratio: a Tinker policy's): the step's summary
	// records the update's importance ratio mean and max
	// (stepsummary.Step.ImportanceRatioMean/Max). It adds no command; the
	// built-in policy reports none, so the histories of built-in runs do
	// not ask it. testdata/step_tinker.json is a step of a Tinker run that
	// does (TestRecordTinkerStep, TestTinkerStepHistoryRecordsRatio).
	changeImportanceRatio = "importance-ratio"
	// changeTurns (version 1, asked only in steps of runs with
	// trajectory.turns > 1, with changeStepPipeline): the step's rollout
	// runs every group's K turns as a chain (Generate, Execute and
	// ScoreWorldModel with a turn), then ReduceTurns (a local activity)
	// per group (turns.go). Single-shot steps never reach the check, so
	// no earlier history meets it.
	changeTurns = "turns"
	// changeStageTimes (version 1, asked by steps with
	// changeStepPipeline): the step records its stages' wall-clock spans
	// (workflow.Now when a stage's first activity is scheduled and when
	// its last is done) in its metrics (stepsummary.Stages, stagetimes.go),
	// which FinishStep stores. It adds no command but the marker and
	// changes no input of any activity but FinishStep's metrics: the
	// training, and so every checkpoint, is the same.
	changeStageTimes = "stage-times"
	// changeAsyncPipeline (version 1, asked only in runs with
	// pipeline.max_off_policy d > 0): the run keeps up to d+1 step
	// children in flight (pipeline.go); step t samples from checkpoint
	// max(0, t−d) (StepInput.Sampler), waits for step t−1's checkpoint and
	// denoiser state (StepInput.AwaitPrevious, signal SignalPreviousStep)
	// before CalibrateAndFuse, and its Update names the sampling
	// checkpoint and the clip. Sequential runs never reach the check.
	changeAsyncPipeline = "async-pipeline"
	// changeEvalAttempts (version 1, asked only in held-out evaluations of
	// runs with trajectory.turns > 1 or eval.best_of > 1): a held-out
	// sample is the run's K real turns, or best_of attempts
	// (EvaluateRequest.Turns, Reward, BestOf), with a timeout that many
	// times longer. Single-shot evaluations never reach the check; before
	// it a multi-turn policy was evaluated on its turn 1.
	changeEvalAttempts = "eval-attempts"
	// changeSelectiveScoring (version 1, asked only in runs with
	// anchors.selective enabled, after the anchor groups are chosen): the
	// step asks AnchorUncertainty (once, shared with active anchor
	// selection), leaves out of the update the world-model groups
	// anchors.Selective.LeftOut names (FuseRequest.Selective), and records
	// the counts in its metrics (stepsummary.Step.Scoring). Runs without
	// the section never reach the check, so no earlier history meets it.
	changeSelectiveScoring = "selective-scoring"
	// changePipelineActiveAnchors (version 1, asked only in steps of runs
	// with pipeline.max_off_policy d > 0 and anchors.active, with
	// changeActiveAnchors): the step's AnchorUncertainty reads the anchor
	// pairs of steps 0..s−d−1 and the map of step s−d−1
	// (AnchorUncertaintyRequest.Lag = d), the steps complete before step s
	// starts. Before it validation refused the combination, so no earlier
	// history meets it.
	changePipelineActiveAnchors = "pipeline-active-anchors"
	// changePipelineResume (version 1, asked only by runs with
	// pipeline.max_off_policy d > 0 started with ResumeFrom): the run
	// continues the old run's pipeline (pipeline.go, resumePipeline): steps
	// S..S+d start with the copied samplers, the anchor fractions ResumeRun
	// rebuilds and the world-model versions of their refreshes, made again.
	// Before it such a run was refused, so no earlier history meets it.
	changePipelineResume = "pipeline-resume"
	// changeUnexecutedTurns (version 1, asked only in multi-turn steps,
	// with changeTurns): a real turn that executed nothing (a request_info
	// or malformed turn: ExecuteResponse.Unexecuted) is counted in the
	// step's metrics as Unexecuted, not as an execution, and adds no CPU or
	// wall seconds; before it, every real turn counted in Executed. It adds
	// no command but the marker and changes no activity's input but
	// FinishStep's metrics: the training is the same. Recorded:
	// testdata/v8_turns_*.json (TestIntegrationTurns).
	changeUnexecutedTurns = "unexecuted-turns"
	// changePipelineCarry (version 1, asked only in runs with
	// pipeline.max_off_policy d > 0, with changeAsyncPipeline): the run's
	// continue-as-new carries the steps in flight instead of draining them
	// (pipeline.go). Step children start with the parent close policy
	// abandon and StepInput.Report, and report by signal SignalStepReport
	// to the run's workflow ID; RunState.InFlight carries them (step,
	// sampler, whether step t−1's outcome was delivered, a report received
	// and not folded yet), and the next execution folds them in step order
	// and hands step t−1's outcome to a step it did not start by signalling
	// its workflow ID. Before it, continue-as-new waited for the steps in
	// flight to complete. Recorded: testdata/pipe_carry_*.json
	// (TestIntegrationPipelineCarry).
	changePipelineCarry = "pipeline-carry"
	// changeShortHeartbeats (version 1): the control, rollout and world-model
	// activities (withControl, withRollout, withWorldModel: 2-minute
	// start-to-close) get a heartbeat timeout of shortHeartbeat, and their
	// workers heartbeat while they run (activities.Register): an attempt
	// held by a killed worker is retried after the heartbeat timeout
	// instead of the start-to-close. Activity options change no command:
	// the version only keeps recorded histories' options as they were.
	// Recorded: testdata/beat_*.json.
	changeShortHeartbeats = "short-heartbeats"
)

// Not a change: execution memory (denoise.memory) is read by Fuse from the
// request's denoiser configuration, and a step of a run with it copies
// Fuse's count into its metrics (stepsummary.Step.Remembered). It adds no
// command, and no history recorded before the field existed has it set.
