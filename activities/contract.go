package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Activity is the contract of one activity: its registered name, the
// request it takes (Req) and the response it returns (Resp). Workflows
// schedule an activity through its contract (Generate.Execute(ctx, req)),
// so the compiler checks the request at the call site and the response
// where it is read; Register binds each contract to its method, so a method
// whose signature drifts from its contract does not compile. (As in
// coinbase/chainstorage's internal/workflow/activity: one typed Execute per
// activity.)
type Activity[Req, Resp any] struct{ name string }

// None is the response of an activity that returns only an error.
type None struct{}

// Name is the activity's registered name: the one its workflows' histories
// record. It never changes.
func (d Activity[Req, Resp]) Name() string { return d.name }

// Execute schedules the activity with ctx's activity options.
func (d Activity[Req, Resp]) Execute(ctx workflow.Context, req Req) Future[Resp] {
	return Future[Resp]{workflow.ExecuteActivity(ctx, d.name, req)}
}

// ExecuteLocal runs the activity as a local activity of the workflow's
// worker, with ctx's local activity options.
func (d Activity[Req, Resp]) ExecuteLocal(ctx workflow.Context, req Req) Future[Resp] {
	return Future[Resp]{workflow.ExecuteLocalActivity(ctx, d.name, req)}
}

// Future is a scheduled activity's outcome. Its embedded workflow.Future
// still waits without decoding (Get(ctx, nil)); a selector or a chained
// future takes the embedded one (f.Future), the SDK's own.
type Future[Resp any] struct{ workflow.Future }

// Result waits for the activity and returns its response.
func (f Future[Resp]) Result(ctx workflow.Context) (Resp, error) {
	var r Resp
	err := f.Get(ctx, &r)
	return r, err
}

// Wait waits for the activity and returns its error, without decoding a
// response.
func (f Future[Resp]) Wait(ctx workflow.Context) error { return f.Get(ctx, nil) }

// The contracts, by activity. The names are the methods' original names:
// histories recorded before the explicit registration replay unchanged, and
// renaming a Go method never changes them.
var (
	CreateRun   = Activity[CreateRunRequest, CreateRunResponse]{NameCreateRun}
	ResumeRun   = Activity[ResumeRunRequest, ResumeRunResponse]{NameResumeRun}
	SetRunState = Activity[SetRunStateRequest, None]{NameSetRunState}
	StartStep   = Activity[StepRequest, None]{NameStartStep}
	FinishStep  = Activity[FinishStepRequest, None]{NameFinishStep}
	Generate    = Activity[GenerateRequest, GenerateResponse]{NameGenerate}
	// ScoreWorldModel is scheduled on the worldmodel queue.
	ScoreWorldModel  = Activity[ScoreRequest, ScoreResponse]{NameScoreWorldModel}
	Execute          = Activity[ExecuteRequest, ExecuteResponse]{NameExecute}
	RecordAnchors    = Activity[RecordAnchorsRequest, RecordAnchorsResponse]{NameRecordAnchors}
	Calibrate        = Activity[CalibrateRequest, CalibrationSummary]{NameCalibrate}
	Fuse             = Activity[FuseRequest, FuseResponse]{NameFuse}
	CalibrateAndFuse = Activity[CalibrateAndFuseRequest, CalibrateAndFuseResponse]{NameCalibrateAndFuse}
	// AnchorUncertainty runs as a local activity of a step with active
	// anchor selection or selective scoring.
	AnchorUncertainty = Activity[AnchorUncertaintyRequest, AnchorUncertaintyResponse]{NameAnchorUncertainty}
	Update            = Activity[UpdateRequest, UpdateResponse]{NameUpdate}
	HeldOutTasks      = Activity[HeldOutTasksRequest, HeldOutTasksResponse]{NameHeldOutTasks}
	Evaluate          = Activity[EvaluateRequest, EvaluateResponse]{NameEvaluate}
	HeldOutScore      = Activity[HeldOutScoreRequest, HeldOutScoreResponse]{NameHeldOutScore}
	Preflight         = Activity[PreflightRequest, PreflightResponse]{NamePreflight}
	// PreflightBackends is scheduled on the rollout, gpu and worldmodel
	// queues.
	PreflightBackends = Activity[PreflightBackendsRequest, PreflightBackendsResponse]{NamePreflightBackends}
	GraderCapacity    = Activity[GraderCapacityRequest, int]{NameGraderCapacity}
	// RefreshWorldModel is scheduled on the worldmodel queue.
	RefreshWorldModel = Activity[RefreshRequest, RefreshResponse]{NameRefreshWorldModel}
	// ReduceTurns runs as a local activity of a multi-turn step.
	ReduceTurns = Activity[ReduceTurnsRequest, ReduceTurnsResponse]{NameReduceTurns}
)

// Register registers every activity of a on r under its contract's name.
// Each registration checks the method against its contract at compile time.
func Register(r worker.ActivityRegistry, a *Activities) {
	register(r, CreateRun, a.CreateRun)
	register(r, ResumeRun, a.ResumeRun)
	registerNone(r, SetRunState, a.SetRunState)
	registerNone(r, StartStep, a.StartStep)
	registerNone(r, FinishStep, a.FinishStep)
	register(r, Generate, a.Generate)
	register(r, ScoreWorldModel, a.ScoreWorldModel)
	register(r, Execute, a.Execute)
	register(r, RecordAnchors, a.RecordAnchors)
	register(r, Calibrate, a.Calibrate)
	register(r, Fuse, a.Fuse)
	register(r, CalibrateAndFuse, a.CalibrateAndFuse)
	register(r, AnchorUncertainty, a.AnchorUncertainty)
	register(r, Update, a.Update)
	register(r, HeldOutTasks, a.HeldOutTasks)
	register(r, Evaluate, a.Evaluate)
	register(r, HeldOutScore, a.HeldOutScore)
	register(r, Preflight, a.Preflight)
	register(r, PreflightBackends, a.PreflightBackends)
	register(r, GraderCapacity, a.GraderCapacity)
	register(r, RefreshWorldModel, a.RefreshWorldModel)
	register(r, ReduceTurns, a.ReduceTurns)
}

func register[Req, Resp any](r worker.ActivityRegistry, d Activity[Req, Resp], fn func(context.Context, Req) (Resp, error)) {
	r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: d.name})
}

func registerNone[Req any](r worker.ActivityRegistry, d Activity[Req, None], fn func(context.Context, Req) error) {
	r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: d.name})
}
