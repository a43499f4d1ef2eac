-- wmrl schema, version 11: a cached world-model answer keeps the outcome it
-- predicted for a turn of a multi-turn trajectory (issue #19): the ladder
-- status and the feedback text (the reference's env_feedback) that the
-- policy's next observation shows, so that an answer read from the cache
-- gives the same observation as the call that stored it. '' for an answer
-- that predicted no outcome (a single-shot score), as for every earlier row.
ALTER TABLE world_model_cache
    ADD COLUMN status   text NOT NULL DEFAULT '',
    ADD COLUMN feedback text NOT NULL DEFAULT '';
