-- wmrl schema, version 8: the on-policy world model (world_model.refresh).
-- Every refresh of a run's world model retrains it on its original training
-- data plus the run's anchor executions of steps 0..step; the new version is
-- an artefact file in the run's data directory, identified by the sha256 of
-- its bytes, and scores the steps after step. A retried refresh finds its
-- row here and writes nothing again.
CREATE TABLE world_model_versions (
    run_id          text             NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    -- The last step whose anchor pairs the version was trained on; it
    -- scores steps step+1 onwards (until the next refresh).
    step            integer          NOT NULL CHECK (step >= 0),
    hash            text             NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
    location        text             NOT NULL CHECK (location <> ''),
    -- The checksum of the frozen model the version extends.
    base            text             NOT NULL CHECK (base <> ''),
    -- Training data: the base model's own examples and the run's anchor
    -- pairs added to them.
    base_examples   integer          NOT NULL CHECK (base_examples >= 0),
    pairs           integer          NOT NULL CHECK (pairs >= 0),
    -- Training metrics of the refit (over all its examples).
    train_mse       double precision NOT NULL,
    train_spearman  double precision NOT NULL,
    created_at      timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step)
);
CREATE INDEX world_model_versions_hash_idx ON world_model_versions (run_id, hash);
