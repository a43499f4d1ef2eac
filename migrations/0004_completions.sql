-- wmrl schema, version 4: a trajectory keeps its completion's token ids and
-- sampling logprobs, when the policy backend gives them (a remote policy
-- trained through the Tinker API needs them for its update):
-- {"tokens": [int, ...], "logprobs": [float, ...]}, or NULL (the built-in
-- policy, which re-encodes the program). First write wins: a retried
-- Generate compares only the task and the program.

ALTER TABLE trajectories ADD COLUMN completion jsonb
    CHECK (completion IS NULL OR (jsonb_typeof(completion -> 'tokens') = 'array'));
