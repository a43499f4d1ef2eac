-- wmrl schema, version 2: run control recorded in Postgres (wmrl terminate)
-- and the identity of the deployment's database.

-- Why and when a run was terminated (wmrl terminate); the run's state is
-- then 'terminated'. One row per run: a second terminate keeps the first.
CREATE TABLE run_terminations (
    run_id         text        PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    reason         text        NOT NULL CHECK (btrim(reason) <> ''),
    terminated_at  timestamptz NOT NULL DEFAULT now()
);

-- The identity of this database, made once when it is migrated: workers key
-- the files of their runs by it (runs/<namespace>/<database>-<id>/<run> in
-- the data directory), so that two deployments sharing a data directory
-- never write over each other's checkpoints, whatever their run names.
CREATE TABLE deployment (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    id   text    NOT NULL DEFAULT replace(gen_random_uuid()::text, '-', ''),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO deployment DEFAULT VALUES;
