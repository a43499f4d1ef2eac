// Package turns is what a multi-turn trajectory's turns share, whoever
// answers them (docs/design.md, "Multi-turn trajectories"): an answer of the
// environment (status, reward, feedback), the one renderer that makes it the
// observation the policy reads next, and the reduction of a trajectory's
// turn rewards to its reward.
//
// The renderer is one function for every environment, so that the policy
// cannot tell the real grader from the world model by the form of what it
// reads: a header naming the result, the status, the score bucket (the
// reward quantised on the ladder: 0 for a failure, 1-4 for the quarters of
// a valid output's leaderboard position) and the feedback text, capped at a
// number of tokens of the policy's tokenizer with its head and tail kept.
// The built-in environments answer through GraderAnswer and
// WorldModelAnswer: both give the ladder's description of the status as
// feedback, since the built-in world model cannot predict the executor's own
// detail text, which would otherwise tell who answered.
package turns
