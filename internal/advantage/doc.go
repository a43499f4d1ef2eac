// Package advantage computes GRPO advantages and the inverse-variance fused
// weights of a WMRL training step.
//
// Group standardises the rewards of one group (the n trajectories sampled
// for one task) over its graded trajectories only:
//
//	A_i = (r_i − mean r) / (std r + ε)   (population std, ε = 1e-4)
//
// An ungraded trajectory (an infrastructure failure that persisted after
// retries) is excluded from the mean and the std and gets advantage 0; it is
// never scored 0. Groups with fewer than MinGraded graded trajectories are
// skipped (all advantages 0). With Standardize off the rewards are only
// centred. Standardisation cancels any increasing affine map of the rewards
// (up to ε), which is why the world-model scores are debiased by a monotone,
// non-affine map; a monotone map never reorders a group's advantages.
//
// The step's update fuses two streams: anchor trajectories, scored by real
// execution, and world-model trajectories. Each trajectory gets weight ρ
// (anchor) or 1 (world model), and the gradient is
//
//	g = Σ w_i A_i ∇log π(τ_i) / Σ w_i
//
// over all trajectories of the step batch. Weights returns w_i/Σw and Fuse
// returns the per-trajectory coefficient w_i A_i/Σw that multiplies
// ∇log π(τ_i). ρ comes from package denoise; with ρ = 1 every trajectory
// counts the same, and as ρ grows the update falls back towards plain GRPO
// on the anchor groups.
package advantage
