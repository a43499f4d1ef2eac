// Package policy is the built-in suite's policy: a small autoregressive model
// over a program's tokens, conditioned on the task's data card, sampled with
// an explicit seed and trained by the fused GRPO update (docs/design.md,
// "GRPO advantages and the fused update").
//
// The model. At position t the previous token p, the position t, the tokens
// emitted so far (a bag of counts b_t) and the card c give a hidden layer
//
//	h_t = tanh(Wc·c + b1 + Eprev[p] + Epos[t] + Wbag·b_t)
//
// and the next-token logits
//
//	z_t[j] = U[j]·h_t + B[p][j] + Wcl[j]·c + b2[j]
//
// The grammar mask keeps only the tokens the grammar allows after the prefix:
// the softmax runs over the legal tokens, so an illegal token has probability
// exactly 0. The first position's "previous token" is a start row of its own.
// All parameters live in one flat float64 vector; the gradients are analytic
// (backpropagation through the one hidden layer, written out by hand).
//
// The update. Given trajectories τ_i with advantages A_i and non-negative
// weights w_i (the inverse-variance weights of docs/design.md), Update ascends
//
//	L(θ) = Σ_i w_i [A_i log π(τ_i) − β Σ_t KL(π(·|s_t) ‖ π_ref(·|s_t))] / Σ_i w_i
//
// with Adam, after optional clipping of the gradient's global norm. The KL
// term is the exact KL divergence between the two masked next-token
// distributions, summed over the states s_t the trajectory visits (a
// per-state, full-distribution estimate of KL(π‖π_ref) that needs no extra
// samples and has no sampling noise at a visited state; the dependence of
// the visited states on θ is ignored, as usual). π_ref is the initial policy,
// kept in every checkpoint. A trajectory with weight 0 has no influence.
//
// Off-policy updates. UpdateOffPolicy takes a batch sampled from another
// (older) checkpoint, each example with its sampling logprobs, and replaces
// each token's A_i log π(τ_t) by PPO's clipped surrogate
// min(r_t A_i, clip(r_t, 1−ε, 1+ε) A_i) of its importance ratio
// r_t = π(τ_t)/π_sample(τ_t); at r_t = 1 its gradient is Update's, bit for
// bit (docs/design.md, "Asynchronous pipeline").
//
// Determinism. Sampling uses a PCG generator seeded from the caller's seed;
// every sum runs in a fixed order on one goroutine, so the same seed gives the
// same samples, the same updates and the same checkpoint hash, bit for bit,
// for a given build target (GOARCH and its feature level such as GOAMD64).
// Across targets the last bit may differ: gonum's vector kernels and
// math.Exp have architecture-specific assembly, and the compiler may fuse
// multiply-adds on some targets.
//
// Checkpoints are versioned by the update step, encoded in a fixed binary
// layout (magic, format version, payload length, payload, sha256 of all of
// that), written atomically, and refused on load when the magic, version,
// length or hash is wrong.
package policy
