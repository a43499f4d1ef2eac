package workflows

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/executor"
)

// fake records the activity calls of a workflow test and answers them with
// plausible, deterministic responses.
type fake struct {
	mu    sync.Mutex
	calls map[string]int
	// heldOutHeartbeat is the heartbeat timeout of the last HeldOutTasks
	// attempt (changeShortHeartbeats).
	heldOutHeartbeat time.Duration
	// executed lists the (step, group) of every Execute call.
	executed [][2]int
	// failExec makes Execute of these groups fail as a sandbox error; with
	// recoverAfter > 0, only the first recoverAfter calls of each group fail.
	failExec     map[int]bool
	recoverAfter int
	groupCalls   map[int]int
	// fuses records the Fuse requests, scores the ScoreWorldModel ones,
	// calibrates the Calibrate ones and refreshes the RefreshWorldModel
	// ones.
	fuses      []activities.FuseRequest
	scores     []activities.ScoreRequest
	calibrates []activities.CalibrateRequest
	refreshes  []activities.RefreshRequest
	// noVersionBefore: RefreshWorldModel makes no version for steps before
	// it (too few pairs).
	noVersionBefore int
	// ungraded is the number of trajectories CalibrateAndFuse reports
	// ungraded (left without a verdict by the grader).
	ungraded int
	// emptyEval makes HeldOutScore report no evaluated task; failEval makes
	// Evaluate fail as a sandbox error.
	emptyEval, failEval bool
	// records are the RecordAnchors requests CalibrateAndFuse got;
	// fractions the anchor fraction of each finished step.
	records   []activities.RecordAnchorsRequest
	fractions []float64
	// calibrateAt > 0 marks the denoiser calibrated once it has pushed
	// that many groups.
	calibrateAt int
	// gate, when set, is the signal gate decision CalibrateAndFuse
	// reports; gates the one each FinishStep recorded.
	gate  *denoise.Gate
	gates []*denoise.Gate
	// scorings are the selective-scoring decisions the FinishSteps
	// recorded; groups is the steps' group count, from which
	// CalibrateAndFuse counts the scored world-model groups.
	scorings []*anchors.Scoring
	groups   int
	// ratio, when set, is the importance ratio mean and max Update
	// reports; ratios the ones each FinishStep recorded.
	ratio  [2]float64
	ratios [][2]float64
	// failFirst makes the first failFirst[name] calls of activity name
	// (of each group, for the activities of one group) fail as an
	// infrastructure error (a database or data-directory outage).
	failFirst  map[string]int
	faultCalls map[string]int
	// unexecuted, when set, picks the turns Execute answers without an
	// execution (ExecuteResponse.Unexecuted): a request_info turn (status
	// info) or, with malformed, a malformed one (invalid_program, 0).
	unexecuted func(r activities.ExecuteRequest) (unexecuted, malformed bool)
	// reduces are the ReduceTurns requests.
	reduces []activities.ReduceTurnsRequest
}

// fault counts a call of activity name (of group g; -1: not a group's) and
// returns the outage error while its first failFirst[name] calls last.
func (f *fake) fault(name string, g int) error {
	f.count(name)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faultCalls == nil {
		f.faultCalls = map[string]int{}
	}
	key := fmt.Sprintf("%s/%d", name, g)
	f.faultCalls[key]++
	if f.faultCalls[key] <= f.failFirst[name] {
		return fmt.Errorf("%s: write /data/runs/r/x.tmp: no space left on device (0 B free of 1.0 GiB on /data)", name)
	}
	return nil
}

// uncertaintyOf is the fake AnchorUncertainty's answer for group g.
func uncertaintyOf(g int) float64 { return 0.1 * float64(1+g%3) }

// fakeSigma0 is the fake AnchorUncertainty's run residual σ0.
const fakeSigma0 = 0.1

func (f *fake) count(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
}

func (f *fake) n(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func hashOf(v int) string { return fmt.Sprintf("hash-%d", v) }

// wmHashOf is the fake hash of the world model refreshed after step s.
func wmHashOf(s int) string { return fmt.Sprintf("%064x", s+1) }

// register mocks every activity of a on env. updateDelay delays Update on
// the workflow clock (0: none).
func (f *fake) register(env *testsuite.TestWorkflowEnvironment, updateDelay time.Duration) {
	var a *activities.Activities
	env.OnActivity(a.CreateRun, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.CreateRunRequest) (activities.CreateRunResponse, error) {
			f.count("CreateRun")
			return activities.CreateRunResponse{Checkpoint: activities.CheckpointRef{Version: 0, Hash: hashOf(0)}}, nil
		}).Maybe()
	env.OnActivity(a.SetRunState, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.SetRunStateRequest) error {
			f.count("SetRunState:" + string(r.State))
			return nil
		}).Maybe()
	env.OnActivity(a.StartStep, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.StepRequest) error { return f.fault("StartStep", -1) }).Maybe()
	env.OnActivity(a.FinishStep, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.FinishStepRequest) error {
			if err := f.fault("FinishStep", -1); err != nil {
				return err
			}
			f.mu.Lock()
			f.fractions = append(f.fractions, r.Metrics.AnchorFraction)
			f.gates = append(f.gates, r.Metrics.Gate)
			f.scorings = append(f.scorings, r.Metrics.Scoring)
			f.ratios = append(f.ratios, [2]float64{r.Metrics.ImportanceRatioMean, r.Metrics.ImportanceRatioMax})
			f.mu.Unlock()
			return nil
		}).Maybe()
	env.OnActivity(a.AnchorUncertainty, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.AnchorUncertaintyRequest) (activities.AnchorUncertaintyResponse, error) {
			if err := f.fault("AnchorUncertainty", -1); err != nil {
				return activities.AnchorUncertaintyResponse{}, err
			}
			res := activities.AnchorUncertaintyResponse{Tasks: make([]int, r.Groups), Uncertainty: make([]float64, r.Groups)}
			for g := range r.Groups {
				res.Tasks[g], res.Uncertainty[g] = g, uncertaintyOf(g)
			}
			res.Sigma0 = fakeSigma0
			return res, nil
		}).Maybe()
	env.OnActivity(a.Generate, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.GenerateRequest) (activities.GenerateResponse, error) {
			if err := f.fault("Generate", r.Group); err != nil {
				return activities.GenerateResponse{}, err
			}
			if r.Checkpoint.Hash != hashOf(r.Step) {
				return activities.GenerateResponse{}, fmt.Errorf("step %d got checkpoint %+v", r.Step, r.Checkpoint)
			}
			return activities.GenerateResponse{TaskID: fmt.Sprintf("task-%d", r.Group), Inserted: r.Samples}, nil
		}).Maybe()
	env.OnActivity(a.ScoreWorldModel, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.ScoreRequest) (activities.ScoreResponse, error) {
			if err := f.fault("ScoreWorldModel", r.Group); err != nil {
				return activities.ScoreResponse{}, err
			}
			f.mu.Lock()
			f.scores = append(f.scores, r)
			f.mu.Unlock()
			return activities.ScoreResponse{Scored: 4, Mean: 0.5}, nil
		}).Maybe()
	env.OnActivity(a.Execute, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.ExecuteRequest) (activities.ExecuteResponse, error) {
			f.count("Execute")
			f.mu.Lock()
			f.executed = append(f.executed, [2]int{r.Step, r.Group})
			if f.groupCalls == nil {
				f.groupCalls = map[int]int{}
			}
			f.groupCalls[r.Group]++
			fail := f.failExec[r.Group] && (f.recoverAfter == 0 || f.groupCalls[r.Group] <= f.recoverAfter)
			f.mu.Unlock()
			if fail {
				return activities.ExecuteResponse{}, fmt.Errorf("docker daemon down")
			}
			if f.unexecuted != nil {
				if un, malformed := f.unexecuted(r); malformed {
					return activities.ExecuteResponse{Status: executor.StatusInvalidProgram, Unexecuted: true}, nil
				} else if un {
					return activities.ExecuteResponse{Status: backend.StatusInfo, Unexecuted: true}, nil
				}
			}
			return activities.ExecuteResponse{Status: executor.StatusOK, Score: 0.75, CPUSeconds: 0.5, WallSeconds: 0.6}, nil
		}).Maybe()
	env.OnActivity(a.ReduceTurns, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.ReduceTurnsRequest) (activities.ReduceTurnsResponse, error) {
			f.count("ReduceTurns")
			f.mu.Lock()
			f.reduces = append(f.reduces, r)
			f.mu.Unlock()
			return activities.ReduceTurnsResponse{}, nil
		}).Maybe()
	env.OnActivity(a.RecordAnchors, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.RecordAnchorsRequest) (activities.RecordAnchorsResponse, error) {
			f.count("RecordAnchors")
			return activities.RecordAnchorsResponse{Pairs: 4 * len(r.Groups)}, nil
		}).Maybe()
	env.OnActivity(a.Calibrate, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.CalibrateRequest) (activities.CalibrationSummary, error) {
			f.count("Calibrate")
			return activities.CalibrationSummary{Step: r.Step, Pairs: 4 * (r.Step + 1), Knots: 2}, nil
		}).Maybe()
	env.OnActivity(a.Fuse, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.FuseRequest) (activities.FuseResponse, error) {
			f.count("Fuse")
			f.mu.Lock()
			f.fuses = append(f.fuses, r)
			f.mu.Unlock()
			st := r.Denoise
			st.Groups += len(r.Anchors)
			return activities.FuseResponse{Denoise: st, Rho: 1 + float64(st.Groups)/10,
				Stats: activities.FuseStats{Trajectories: 16, Graded: 16}}, nil
		}).Maybe()
	env.OnActivity(a.CalibrateAndFuse, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.CalibrateAndFuseRequest) (activities.CalibrateAndFuseResponse, error) {
			if err := f.fault("CalibrateAndFuse", -1); err != nil {
				return activities.CalibrateAndFuseResponse{}, err
			}
			var res activities.CalibrateAndFuseResponse
			if r.Record != nil {
				f.count("RecordAnchors")
				f.mu.Lock()
				f.records = append(f.records, *r.Record)
				f.mu.Unlock()
			}
			if r.Calibrate != nil {
				f.count("Calibrate")
				f.mu.Lock()
				f.calibrates = append(f.calibrates, *r.Calibrate)
				f.mu.Unlock()
				res.Calibration = &activities.CalibrationSummary{Step: r.Calibrate.Step, Pairs: 4 * (r.Calibrate.Step + 1), Knots: 2}
			}
			f.count("Fuse")
			f.mu.Lock()
			f.fuses = append(f.fuses, r.Fuse)
			ungraded, gate := f.ungraded, f.gate
			f.mu.Unlock()
			st := r.Fuse.Denoise
			st.Groups += len(r.Fuse.Anchors)
			if f.calibrateAt > 0 && st.Groups >= f.calibrateAt {
				st.Calibrated = true
			}
			res.Fuse = activities.FuseResponse{Denoise: st, Rho: 1 + float64(st.Groups)/10,
				Stats: activities.FuseStats{Trajectories: 16, Graded: 16 - ungraded, Ungraded: ungraded, Gate: gate}}
			if sel := r.Fuse.Selective; sel != nil {
				// The counts fusion gives when every group is in the batch.
				groups := len(r.Fuse.Anchors) + len(sel.LeftOut)
				res.Fuse.Stats.Scoring = &anchors.Scoring{LeftOut: len(sel.LeftOut), Cut: sel.Cut,
					Scored: f.groups - groups, MaxRatio: sel.MaxRatio}
			}
			return res, nil
		}).Maybe()
	up := env.OnActivity(a.Update, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.UpdateRequest) (activities.UpdateResponse, error) {
			if err := f.fault("Update", -1); err != nil {
				return activities.UpdateResponse{}, err
			}
			if r.Checkpoint.Version != r.Step || r.Checkpoint.Hash != hashOf(r.Step) {
				return activities.UpdateResponse{}, temporal.NewNonRetryableApplicationError("bad checkpoint",
					activities.ErrInvalidInput, nil)
			}
			return activities.UpdateResponse{Checkpoint: activities.CheckpointRef{Version: r.Step + 1, Hash: hashOf(r.Step + 1)},
				Stats: backend.UpdateStats{RatioMean: f.ratio[0], RatioMax: f.ratio[1]}}, nil
		}).Maybe()
	if updateDelay > 0 {
		up.After(updateDelay)
	}
	env.OnActivity(a.RefreshWorldModel, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.RefreshRequest) (activities.RefreshResponse, error) {
			f.count("RefreshWorldModel")
			f.mu.Lock()
			f.refreshes = append(f.refreshes, r)
			f.mu.Unlock()
			if r.Step < f.noVersionBefore {
				return activities.RefreshResponse{Pairs: 4 * (r.Step + 1)}, nil
			}
			return activities.RefreshResponse{Version: &activities.WorldModelRef{Step: r.Step, Hash: wmHashOf(r.Step)},
				Pairs: 4 * (r.Step + 1)}, nil
		}).Maybe()
	env.OnActivity(a.HeldOutTasks, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, r activities.HeldOutTasksRequest) (activities.HeldOutTasksResponse, error) {
			f.mu.Lock()
			f.heldOutHeartbeat = activity.GetInfo(ctx).HeartbeatTimeout
			f.mu.Unlock()
			f.count("HeldOutTasks")
			return activities.HeldOutTasksResponse{TaskIDs: []string{"h0", "h1"}}, nil
		}).Maybe()
	env.OnActivity(a.Evaluate, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.EvaluateRequest) (activities.EvaluateResponse, error) {
			f.count("Evaluate")
			if f.failEval {
				return activities.EvaluateResponse{}, fmt.Errorf("docker daemon down")
			}
			return activities.EvaluateResponse{Executed: r.Samples}, nil
		}).Maybe()
	env.OnActivity(a.HeldOutScore, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.HeldOutScoreRequest) (activities.HeldOutScoreResponse, error) {
			f.count("HeldOutScore")
			if f.emptyEval {
				return activities.HeldOutScoreResponse{}, nil
			}
			return activities.HeldOutScoreResponse{Score: 0.25 + float64(r.Version)/100, Tasks: 2, Samples: 4}, nil
		}).Maybe()
}

// executedGroups returns the distinct groups executed at a step, sorted.
func (f *fake) executedGroups(step int) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var gs []int
	for _, e := range f.executed {
		if e[0] == step && !slices.Contains(gs, e[1]) {
			gs = append(gs, e[1])
		}
	}
	slices.Sort(gs)
	return gs
}

func newEnv(t *testing.T, s *testsuite.WorkflowTestSuite) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	s.SetLogger(quietLogger())
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(TrainingRun)
	env.RegisterWorkflow(TrainingStep)
	activities.Register(env, &activities.Activities{})
	return env
}

func quietLogger() log.Logger { return log.NewStructuredLogger(slog.New(slog.DiscardHandler)) }
