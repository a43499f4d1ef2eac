-- wmrl schema, version 9: the training state of a checkpoint. A policy
-- whose state a training service keeps (policy.backend: tinker) saves, after
-- each optimiser step, the model's training weights with their optimiser
-- state (Tinker save_weights) besides the sampler weights the checkpoint's
-- location names; state is their tinker:// path. wmrl continue loads them
-- into a new model (load_weights). Empty for the built-in policy, whose
-- checkpoint file holds its optimiser state, and for checkpoints recorded
-- before this version.
ALTER TABLE checkpoints ADD COLUMN state text NOT NULL DEFAULT '';
