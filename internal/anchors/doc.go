// Package anchors chooses the anchor groups of a training step: the groups
// whose solutions are really executed as well as scored by the world model.
//
// How many: k = max(minAnchors, round(fraction·groups)), capped at the number
// of groups and at the free sandbox capacity (in groups). Which: every group
// index g gets the keyed hash seed.Derive(runSeed, domain, step, g) and the k
// groups with the smallest hashes are the anchors, returned in ascending
// order. The choice is a pure function of (run seed, step, groups, k), with
// no random number generator, so workflow replay and a resumed run choose the
// same groups, and each group is an anchor in about a fraction of the steps.
// Because the ranking does not depend on k, a smaller k always chooses a
// subset of what a larger k would choose at the same step.
//
// Active selection (SelectActive, off by default) keeps the count k but
// chooses the groups with probabilities π_g that grow with the world
// model's uncertainty about each group (Uncertainty: the root-mean-square
// past residual of the group's task, shrunk toward the run's), drawn by
// systematic sampling so that each group is an anchor with probability
// exactly π_g; each anchor group carries the weight (k/G)/π_g, with which
// the calibration and the noise estimates stay unbiased for all groups.
// Adapt is the controller that moves the anchor fraction toward a target ρ.
//
// Tracker accumulates the realised anchor fraction of a run, which can
// differ from the requested one through rounding, the floor and the
// capacity cap.
package anchors
