// Package seed derives deterministic 64-bit seeds by hashing.
//
// Workflow code must not draw random numbers, so every seed a run needs is a
// pure function of values the run already has: the run seed, the step, the
// group, the sample. Derive folds those parts through the splitmix64 mixer,
// so the same parts always give the same seed, a change in any part gives an
// unrelated seed, and the order of the parts matters. String hashes a name
// (for example a run name) to a uint64 with 64-bit FNV-1a, so a run can take
// its seed from its name.
//
// Nothing here is cryptographic; the hashes only have to spread inputs well
// and stay fixed forever, because changing them would change which anchors
// and samples a resumed or replayed run chooses. The tests pin known values.
package seed
