package activities

// Activity names, the contracts' (contract.go). Workers register each
// method under its name explicitly (Register), so renaming a Go method never
// changes a name that running workflows' histories record. The names are
// the methods' original names: histories recorded before the explicit
// registration replay unchanged.
const (
	NameCreateRun        = "CreateRun"
	NameResumeRun        = "ResumeRun"
	NameSetRunState      = "SetRunState"
	NameStartStep        = "StartStep"
	NameFinishStep       = "FinishStep"
	NameGenerate         = "Generate"
	NameScoreWorldModel  = "ScoreWorldModel"
	NameExecute          = "Execute"
	NameRecordAnchors    = "RecordAnchors"
	NameCalibrate        = "Calibrate"
	NameFuse             = "Fuse"
	NameCalibrateAndFuse = "CalibrateAndFuse"
	// NameAnchorUncertainty runs as a local activity of a step with active
	// anchor selection.
	NameAnchorUncertainty = "AnchorUncertainty"
	NameUpdate            = "Update"
	NameHeldOutTasks      = "HeldOutTasks"
	NameEvaluate          = "Evaluate"
	NameHeldOutScore      = "HeldOutScore"
	NamePreflight         = "Preflight"
	// NamePreflightBackends is scheduled on the rollout, gpu and
	// worldmodel queues.
	NamePreflightBackends = "PreflightBackends"
	NameGraderCapacity    = "GraderCapacity"
	// NameRefreshWorldModel is scheduled on the worldmodel queue.
	NameRefreshWorldModel = "RefreshWorldModel"
	// NameReduceTurns closes a group's turns of a multi-turn step.
	NameReduceTurns = "ReduceTurns"
)
