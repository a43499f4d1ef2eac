-- wmrl schema, version 1: runs, their steps, and everything a step produces.
-- Every row is keyed by what identifies it in a run (run, step, group, sample),
-- so that a retried activity finds its row instead of adding a second one.
-- Trajectories and checkpoints live here, never in workflow history.

-- A training run. id is the run's Temporal workflow id.
CREATE TABLE runs (
    id            text        PRIMARY KEY CHECK (id <> ''),
    name          text        NOT NULL,
    mode          text        NOT NULL CHECK (mode IN ('grpo', 'wm', 'wmrl', 'mix', 'debias', 'denoise')),
    config        jsonb       NOT NULL,
    -- The run seed, a uint64 stored bit for bit in a signed bigint.
    seed          bigint      NOT NULL,
    steps         integer     NOT NULL CHECK (steps >= 0),  -- planned number of steps
    state         text        NOT NULL CHECK (state IN ('running', 'paused', 'stopping', 'completed', 'failed', 'terminated')),
    -- Set when this run was started from the last completed step of another.
    resumed_from  text        REFERENCES runs (id) ON DELETE SET NULL,
    resumed_step  integer     CHECK (resumed_step >= 0),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((resumed_from IS NULL) = (resumed_step IS NULL))
);
CREATE INDEX runs_created_at_idx ON runs (created_at DESC, id);
CREATE INDEX runs_name_idx ON runs (name);

-- One row per training step, written when the step starts and completed with
-- its metrics (name -> value) when it ends.
CREATE TABLE steps (
    run_id       text        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step         integer     NOT NULL CHECK (step >= 0),
    status       text        NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    metrics      jsonb       NOT NULL DEFAULT '{}',
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    PRIMARY KEY (run_id, step),
    CHECK ((status = 'running') = (finished_at IS NULL))
);
CREATE INDEX steps_completed_idx ON steps (run_id, step DESC) WHERE status = 'completed';

-- Every sampled solution. Filled in stages by separate activities: the
-- program (Generate), the world model's score (ScoreWorldModel), the anchor
-- flag (anchor choice) and the real execution (Execute). Execution columns are
-- all NULL until the trajectory is executed.
CREATE TABLE trajectories (
    run_id        text        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step          integer     NOT NULL CHECK (step >= 0),
    grp           integer     NOT NULL CHECK (grp >= 0),
    sample        integer     NOT NULL CHECK (sample >= 0),
    task_id       text        NOT NULL,
    program       text        NOT NULL,
    anchor        boolean     NOT NULL DEFAULT false,
    wm_score      double precision,
    status        text,       -- executor status: ok, invalid_program, runtime_error, timeout, memory, invalid_output
    env_score     double precision,
    metric        double precision,
    position      double precision,
    detail        text,
    cpu_seconds   double precision CHECK (cpu_seconds >= 0),
    wall_seconds  double precision CHECK (wall_seconds >= 0),
    created_at    timestamptz NOT NULL DEFAULT now(),
    executed_at   timestamptz,
    PRIMARY KEY (run_id, step, grp, sample),
    CHECK ((status IS NULL) = (env_score IS NULL)
       AND (status IS NULL) = (cpu_seconds IS NULL)
       AND (status IS NULL) = (wall_seconds IS NULL)
       AND (status IS NULL) = (executed_at IS NULL))
);
CREATE INDEX trajectories_task_idx ON trajectories (task_id);

-- Anchor pairs: (world-model score, real score) of the executed anchor
-- trajectories, the data the calibration map is fitted on. The calibration
-- window reads them in (step, grp, sample) order, served by the primary key.
CREATE TABLE anchor_pairs (
    run_id      text             NOT NULL,
    step        integer          NOT NULL,
    grp         integer          NOT NULL,
    sample      integer          NOT NULL,
    wm          double precision NOT NULL,
    env         double precision NOT NULL,
    created_at  timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step, grp, sample),
    FOREIGN KEY (run_id, step, grp, sample) REFERENCES trajectories (run_id, step, grp, sample) ON DELETE CASCADE
);

-- The calibration map fitted at a step (isotonic knots as JSON {"x":[],"y":[]};
-- no knots = identity), with the number of pairs it was fitted on and the
-- mean bias of the window before and after applying it (NULL when undefined).
CREATE TABLE calibration_maps (
    run_id       text             NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step         integer          NOT NULL CHECK (step >= 0),
    knots        jsonb            NOT NULL,
    n_pairs      integer          NOT NULL CHECK (n_pairs >= 0),
    bias_before  double precision,
    bias_after   double precision,
    created_at   timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step)
);

-- The denoiser's state after a step (JSON of denoise.State) and the rho it gave.
CREATE TABLE fusion_states (
    run_id      text             NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step        integer          NOT NULL CHECK (step >= 0),
    state       jsonb            NOT NULL,
    rho         double precision NOT NULL,
    created_at  timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step)
);

-- Policy checkpoints: version v is the policy after v updates; the weights
-- are at location (blob store), identified by their content hash.
CREATE TABLE checkpoints (
    run_id      text        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    version     integer     NOT NULL CHECK (version >= 0),
    hash        text        NOT NULL CHECK (hash <> ''),
    location    text        NOT NULL CHECK (location <> ''),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, version)
);
CREATE INDEX checkpoints_hash_idx ON checkpoints (run_id, hash);

-- Held-out evaluation: the sample-th program for a held-out task at a step,
-- really executed. The held-out score of a step is the mean over its tasks of
-- the mean leaderboard position of their samples, counting 0 for a sample
-- that did not run (status other than ok). score is the training reward
-- ladder's value, kept for comparison.
CREATE TABLE evaluations (
    run_id        text             NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step          integer          NOT NULL CHECK (step >= 0),
    task_id       text             NOT NULL CHECK (task_id <> ''),
    sample        integer          NOT NULL CHECK (sample >= 0),
    program       text             NOT NULL,
    status        text             NOT NULL,
    score         double precision NOT NULL,
    metric        double precision NOT NULL,
    position      double precision NOT NULL CHECK (position >= 0 AND position <= 1),
    detail        text             NOT NULL DEFAULT '',
    cpu_seconds   double precision NOT NULL CHECK (cpu_seconds >= 0),
    wall_seconds  double precision NOT NULL CHECK (wall_seconds >= 0),
    created_at    timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step, task_id, sample)
);
