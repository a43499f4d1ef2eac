// Package runconfig is the configuration of one training run: what the
// `wmrl run` command reads from YAML (or takes from a named preset), checks
// once, and hands to the TrainingRun workflow as a typed value.
//
// Parsing is strict: an unknown field, a duplicate field or a second YAML
// document is an error, and every validation error names the field by its
// path, as in "anchors.fraction: must be in [0,1], got 1.5". Parse and Load
// report every invalid field of a document at once (an *Invalid error), each
// with its line when the document set it: "mode: line 1: unknown mode ...;
// steps: line 2: must be in [1,1000000], got 0". Omitted fields keep the
// value of the base configuration (Default, or a preset), so a file only
// needs the fields it changes. A document has at most MaxBytes.
//
// Numbers are read as written, by one check of every number field before the
// YAML decoder (which would read 2.9 as 2, 0x10 as 16 and 010 as 8): an
// integer is decimal digits within its Go type's range, a float a finite
// number in decimal notation; anything else is refused under the field's
// path and line ("sandbox.memory_mb: line 2: 600.7 is not an integer") and
// the field keeps the base's value.
//
// The debias, denoise and advantage sections are validated by their owners
// (debias.Config, which is the debias section itself, denoise.Config and
// advantage.Config), one field at a time so that every invalid field is
// still reported under its path; anchors.active and anchors.adaptive by
// anchors.Active and anchors.Adaptive, world_model.simulated by
// backend.Simulation, and the sandbox limits against backend.Limits'
// bounds, so each field's bounds are written once. Every problem is a
// *fielderr.Error (path, line, message): an owner's error is put under the
// section's path by its fields, never by parsing its message.
//
// The files: schema.go (the types and what they derive: limits, the
// debiaser's, denoiser's and advantages' configurations), decode.go (the
// strict YAML decoder, which records each field's line and checks numbers
// as written) and validate.go (one check per field, and the bounds).
//
// Presets: tiny (tests: a few small groups, seconds), demo (a short run that
// finishes in minutes on two cores), small and default.
//
// A Config is a plain value with json tags equal to its yaml names, so
// Temporal carries it in workflow inputs and Postgres stores it as JSONB.
package runconfig
