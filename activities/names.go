package activities

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
)

// Activity names. Workflows schedule activities by these names and workers
// register each method under its name explicitly (Register), so renaming a
// Go method never changes a name that running workflows' histories record.
// The names are the methods' original names: histories recorded before the
// explicit registration replay unchanged.
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
)

// Register registers every activity of a on r under its name.
func Register(r worker.ActivityRegistry, a *Activities) {
	for name, fn := range map[string]any{
		NameCreateRun: a.CreateRun, NameResumeRun: a.ResumeRun, NameSetRunState: a.SetRunState,
		NameStartStep: a.StartStep, NameFinishStep: a.FinishStep, NameGenerate: a.Generate,
		NameScoreWorldModel: a.ScoreWorldModel, NameExecute: a.Execute, NameRecordAnchors: a.RecordAnchors,
		NameCalibrate: a.Calibrate, NameFuse: a.Fuse, NameCalibrateAndFuse: a.CalibrateAndFuse,
		NameUpdate: a.Update, NameHeldOutTasks: a.HeldOutTasks, NameEvaluate: a.Evaluate,
		NameHeldOutScore: a.HeldOutScore, NamePreflight: a.Preflight, NamePreflightBackends: a.PreflightBackends,
		NameGraderCapacity:    a.GraderCapacity,
		NameAnchorUncertainty: a.AnchorUncertainty,
		NameRefreshWorldModel: a.RefreshWorldModel,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}
