// Package denoise implements Inverse-Variance Denoising: it estimates how
// noisy the world model's (calibrated) scores are, relative to real
// execution, and turns that into ρ, the weight of an anchor trajectory
// relative to a world-model trajectory in the fused GRPO update.
//
// For each anchor group with calibrated world-model scores d and real scores
// y, GroupS2 measures the within-group disagreement after removing each
// side's group mean, relative to the spread of the real scores:
//
//	s² = mean(((d − mean d) − (y − mean y))²) / var(y)
//
// Groups whose real scores barely vary (var(y) < 1e-9) carry no information
// and are skipped, never pushed as zero. State keeps η̂², an exponential
// moving average of s² with a half-life in groups. After a warm-up of W
// groups the current η̂² is frozen as the calibration level η̂²_cal, and from
// then on
//
//	ρ = 1 + η̂²/max(η̂²_cal, floor)   (optionally capped at ρ_max; ρ = 1 before warm-up)
//
// The floor (Config.Eta2Floor, DefaultEta2Floor = 0.01 in new runs) keeps a
// warm-up in which the world model agreed exactly with the anchors from
// freezing a calibration level of about 0, after which any disagreement at
// all would send ρ to its cap.
//
// so ρ is about 2 while the world model stays as noisy as during warm-up and
// grows as it gets worse. Note what the frozen calibration implies: ρ
// measures the world model against its own warm-up level, not against the
// real executions. A world model that is pure noise from the first group
// gives η̂² ≈ η̂²_cal and so ρ ≈ 2, not a large ρ; ρ becomes large only when
// the world model degrades after warm-up (or was accurate during it).
//
// All state is a plain JSON-serialisable struct; nothing here does I/O or
// draws random numbers.
package denoise
