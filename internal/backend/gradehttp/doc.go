// Package gradehttp is the /grade HTTP backend: a client of a remote grading
// service (backend.Grader) or of a remote world model speaking the same
// protocol (backend.WorldModel), so that users can bring their own sandbox
// or world-model server.
//
// # Protocol
//
// The protocol is the one of the reference implementation's grading
// servers (its sandbox env_server and its drop-in world-model wm_server,
// read through their client RemoteEnv), with the fields wmrl needs added.
// A service has two endpoints under its base URL:
//
//	GET  /health  -> {"capacity": N, ...}
//	POST /grade   {"items": [item, ...]} -> [result, ...]
//
// capacity is how many items the service grades at once (a scheduler keeps
// at most that many in flight); other health fields are ignored. The
// answer to /grade has one result per item, in order: a JSON array as the
// reference returns it, or an object {"results": [...]}; an object
// {"error": "..."} is the service's own failure.
//
// An item is
//
//	{"id": KEY, "request_id": KEY, "action": "execute_code",
//	 "task": "train-03", "suite": 7, "code": PROGRAM, "seed": 12,
//	 "overview": PROMPT, "budget": 0,
//	 "limits": {"memory_bytes": 536870912, "cpus": 1, "pids": 64, "deadline_seconds": 30}}
//
// id and request_id both carry the execution's idempotency key
// (backend.GradeItem.Key, e.g. "run/step-3/group-1/sample-2"): a service
// that charges or keeps state per execution grades a key once and answers
// the same result again. task and suite name the task (the service owns
// its data); code is the solution; seed drives the execution's random
// choices; overview is the task's prompt, or a sentence naming the task
// when it has none (sent on every item: the reference's world-model server
// requires it); limits and budget
// are the run's sandbox limits and cost budget (a world-model request
// carries neither). action is the turn's (backend.GradeItem.Action):
// "execute_code" for a single-shot item and a turn that runs its program,
// "request_info" for a turn that asks for the data's structure; another is
// refused before anything is sent. Fields a service does not know it
// ignores.
//
// The reference's own clients send {"task", "data_dir", "action",
// "overview", "limits", "code"}: no id, no suite, and its limit keys
// (execution_timeout and cpu_time_limit in seconds, memory_limit and
// gpu_memory_limit in GB; Limits.Resolve maps them, the stricter winning),
// and "action": "request_info" for the task's data structure, answered
// with status "info" (StatusInfo), reward 0 and the structure as feedback.
// Package gradeserve serves both shapes.
//
// A result is
//
//	{"id": KEY, "status": "valid", "reward": 0.83, "pos": 0.66,
//	 "feedback": "...", "metric": 0.91, "exec_time": 2.1, "cpu_s": 1.9}
//
// status is a rung of the reward ladder, in the reference's words or in
// wmrl's (executor.Status), with reward r_env in [0,1] on it:
//
//	reference     wmrl             reward
//	malformed     invalid_program  0          (no program, or it does not parse)
//	syntax_err    invalid_program  0
//	runtime_err   runtime_error    0.1        (it crashed)
//	              timeout          0.1        (killed at the deadline)
//	              memory           0.1        (killed for memory)
//	ran_no_sub    invalid_output   0.2        (it ran, but printed nothing valid)
//	valid         ok               0.5+0.5·pos
//
// The client keeps the reward as the score (a service may use other rungs)
// and pos, the leaderboard position in [0,1], as the position of a valid
// result. Any other status ("ungraded", the reference client's
// "grade_error", an unknown word) is no verdict: the item stays ungraded
// (backend.Grade.Graded false), never scored 0. id, when present, must
// echo the item's key. feedback, metric, exec_time (wall seconds) and cpu_s
// (CPU seconds) are optional. feedback is the observation of a turn
// (backend.Grade.Feedback, which turns.Render frames for the policy's next
// turn, as the reference's agent loop shows it); feedback_raw, the
// feedback before the service cut it, is kept as the grade's Detail (the
// feedback when absent). A world-model service's result gives the
// prediction's Status and Feedback the same way.
//
// # Errors
//
// A connection error, a 5xx or a 429 is retried a few times with backoff
// (honouring Retry-After), then returned as a plain error, which Temporal
// retries: every item carries its key, so a retry never grades twice on a
// service that honours them. A client timeout is not retried here (the
// service may still be grading). Any other 4xx means the request itself is
// wrong and is a backend.PermanentError carrying the service's message. A
// result list of the wrong length, a reward out of [0,1] or an id that does
// not match is a plain error naming the item.
//
// The bearer token (Config.Token, from $WMRL_GRADER_TOKEN) goes in the
// Authorization header only: it never appears in an error, a log line or
// the Config's printed or JSON form.
//
// Package gradeserve serves this protocol for wmrl's built-in grader and
// world model (wmrl serve).
package gradehttp
