package activities

import (
	"context"
	"time"

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
// The activities that do not heartbeat themselves are registered alive:
// they heartbeat while they run when their attempt has a heartbeat timeout.
// Execute, Update, Evaluate and RefreshWorldModel heartbeat themselves
// (Evaluate's details are its progress, which an alive heartbeat would
// overwrite).
func Register(r worker.ActivityRegistry, a *Activities) {
	register(r, CreateRun, alive(a.CreateRun))
	register(r, ResumeRun, alive(a.ResumeRun))
	registerNone(r, SetRunState, aliveNone(a.SetRunState))
	registerNone(r, StartStep, aliveNone(a.StartStep))
	registerNone(r, FinishStep, aliveNone(a.FinishStep))
	register(r, Generate, alive(a.Generate))
	register(r, ScoreWorldModel, alive(a.ScoreWorldModel))
	register(r, Execute, a.Execute)
	register(r, RecordAnchors, alive(a.RecordAnchors))
	register(r, Calibrate, alive(a.Calibrate))
	register(r, Fuse, alive(a.Fuse))
	register(r, CalibrateAndFuse, alive(a.CalibrateAndFuse))
	register(r, AnchorUncertainty, alive(a.AnchorUncertainty))
	register(r, Update, a.Update)
	register(r, HeldOutTasks, alive(a.HeldOutTasks))
	register(r, Evaluate, a.Evaluate)
	register(r, HeldOutScore, alive(a.HeldOutScore))
	register(r, Preflight, alive(a.Preflight))
	register(r, PreflightBackends, alive(a.PreflightBackends))
	register(r, GraderCapacity, alive(a.GraderCapacity))
	register(r, RefreshWorldModel, a.RefreshWorldModel)
	register(r, ReduceTurns, alive(a.ReduceTurns))
}

func register[Req, Resp any](r worker.ActivityRegistry, d Activity[Req, Resp], fn func(context.Context, Req) (Resp, error)) {
	r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: d.name})
}

func registerNone[Req any](r worker.ActivityRegistry, d Activity[Req, None], fn func(context.Context, Req) error) {
	r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: d.name})
}

// alive runs fn heartbeating every heartbeatEvery (at most a third of the
// attempt's heartbeat timeout) when the attempt has a heartbeat timeout
// (workflows' changeShortHeartbeats gives the control, rollout and
// world-model activities one): the heartbeats say only that the worker
// lives, so an attempt held by a killed worker is retried after the
// heartbeat timeout, not the start-to-close. Without a heartbeat timeout
// (a local activity, a history recorded before it, a direct call) it is fn.
func alive[Req, Resp any](fn func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, req Req) (Resp, error) {
		var resp Resp
		err := whileAlive(ctx, func() error {
			var err error
			resp, err = fn(ctx, req)
			return err
		})
		return resp, err
	}
}

// aliveNone is alive for an activity that returns only an error.
func aliveNone[Req any](fn func(context.Context, Req) error) func(context.Context, Req) error {
	return func(ctx context.Context, req Req) error {
		return whileAlive(ctx, func() error { return fn(ctx, req) })
	}
}

// whileAlive runs fn, heartbeating every beatEvery(ctx) when that is not 0.
func whileAlive(ctx context.Context, fn func() error) error {
	if every := beatEvery(ctx); every > 0 {
		return beating(ctx, every, fn)
	}
	return fn()
}

// beatEvery is how often an alive activity heartbeats: heartbeatEvery, at
// most a third of the attempt's heartbeat timeout; 0 when it has none.
func beatEvery(ctx context.Context) time.Duration {
	if !activity.IsActivity(ctx) {
		return 0
	}
	info := activity.GetInfo(ctx)
	if info.IsLocalActivity || info.HeartbeatTimeout <= 0 {
		return 0
	}
	return min(heartbeatEvery, info.HeartbeatTimeout/3)
}
