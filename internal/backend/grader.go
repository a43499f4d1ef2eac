package backend

import "context"

// StatusUngraded is the status of a Grade that holds no verdict.
const StatusUngraded = "ungraded"

// The actions of a turn (the reference's agent loop): execute a script,
// or ask for the task data's structure without executing anything.
// GradeItem.Action and ScoreItem.Action carry them; "" is ActionExecuteCode.
const (
	ActionExecuteCode = "execute_code"
	ActionRequestInfo = "request_info"
)

// StatusInfo is the status of the answer to an ActionRequestInfo item
// (the reference's "info"): the data's structure as its Feedback, no
// reward (Score 0); the turn is no execute turn, left out of the
// trajectory's reward (turns.ReduceTurns).
const StatusInfo = "info"

// ActionMalformed is the action of a language model's completion that
// holds neither a script nor a request_info action (the reference's
// "malformed"): it is answered without executing anything, with the
// ladder's invalid_program reward. It is never sent to a grader.
const ActionMalformed = "malformed"

// GradeItem is one solution to execute and grade.
type GradeItem struct {
	Task     Task
	Solution string
	// Action is the turn's action: "" or ActionExecuteCode runs Solution;
	// ActionRequestInfo asks for the data's structure (files, schemas, row
	// counts) and executes nothing. Single-shot items leave it "".
	Action string
	// Seed drives the execution's random choices (plan.ExecSeed,
	// plan.EvalExecSeed).
	Seed uint64
	// Key is the execution's idempotency key (SampleKey, EvalKey): a
	// remote grader that charges or keeps state per execution grades a key
	// once.
	Key string
}

// GradeRequest is a batch of executions under one set of limits.
type GradeRequest struct {
	Items  []GradeItem
	Limits Limits
	// Budget refuses solutions whose estimated cost exceeds it (0: none),
	// for graders that can estimate cost before running; a refusal is a
	// timeout verdict.
	Budget float64
}

// Grade is the verdict on one solution.
type Grade struct {
	// Graded is false when the grader gave no verdict on this item (a
	// remote grader's ungraded item): the trajectory stays ungraded,
	// never scored 0. Status is then StatusUngraded.
	Graded bool
	// Status is the ladder's status ("ok", "invalid_program",
	// "runtime_error", "timeout", "memory", "invalid_output",
	// executor.Status) and Score r_env in [0,1] on the reward ladder.
	Status string
	Score  float64
	// Metric is the task's metric and Position the leaderboard position in
	// [0,1] (status ok only); Detail says what happened, as feedback.
	Metric   float64
	Position float64
	Detail   string
	// Feedback is the grader's own text for the policy's next turn (a
	// /grade reply's feedback, the Python sandbox's output tail); ""
	// leaves the observation to the ladder's description of Status
	// (turns.GraderAnswer).
	Feedback string
	// CPUSeconds and WallSeconds are the execution's cost, as measured by
	// the grader (0 when it does not say).
	CPUSeconds  float64
	WallSeconds float64
}

// Grader executes solutions for real and grades them.
type Grader interface {
	// Grade returns one Grade per item, in order. A solution's own
	// failure (it does not parse, crashes, times out, runs out of memory,
	// prints nothing valid) is a Grade, never an error; an error means the
	// grader itself failed (engine down, network, 5xx) and the whole batch
	// is retried. Grades depend only on the items and limits, up to what
	// timing changes (a deadline kill).
	Grade(ctx context.Context, req GradeRequest) ([]Grade, error)
	// Preflight reports whether executions under l can run here at all. A
	// limit that cannot be met is a *LimitError naming its run-config
	// field (retrying will not help); any other error is the grader's own
	// failure.
	Preflight(ctx context.Context, l Limits) error
}

// CapacityReporter is a grader that can say how many executions it takes
// at once (a /grade service's GET /health): the anchor scheduler's free
// capacity when the run asks for it (anchors.from_grader).
type CapacityReporter interface {
	Capacity(ctx context.Context) (int, error)
}
