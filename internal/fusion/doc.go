// Package fusion computes the fused update batch of one training step from
// the step's scored trajectories: the per-step part of the method that sits
// between the scores and the policy update.
//
// Step takes the trajectories of a step in (group, sample) order and, per
// mode (internal/mode): picks each trajectory's training reward (r_env for
// executed trajectories in grpo and in anchor groups, r_wm otherwise, through
// the step's calibration map when the mode debiases); when the mode
// denoises, pushes each anchor group's s² (calibrated r_wm against r_env)
// into the denoiser's state and takes ρ from it; standardises the rewards
// within each group (advantage.Group) and gives every graded trajectory its
// normalised weight (advantage.Weights: ρ for anchors, 1 otherwise, over
// Σw). A trajectory without the score its mode needs is ungraded: advantage
// 0, weight 0, excluded, never scored 0.
//
// Examples turns a Batch into the policy's update examples, re-encoding each
// program's canonical text, so that the update is Σ Weight·Advantage·∇log π.
//
// Nothing here does I/O or draws random numbers; the orchestrated path's
// Fuse and Update activities and the in-process reference loop
// (internal/grpoloop) share this code.
package fusion
