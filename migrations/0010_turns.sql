-- wmrl schema, version 10: the turns of multi-turn trajectories
-- (trajectory.turns > 1; docs/design.md, "Multi-turn trajectories"). A
-- trajectory of K turns has K rows here, turn 1..K, beside its one row in
-- trajectories (which keeps the reduced rewards fusion reads). A row is
-- written in two stages by two activities: the action (Generate of the
-- turn: insert-once, the same seeds give the same action) and the
-- environment's answer (Execute or ScoreWorldModel of the turn:
-- first-write-wins, as an execution's result). The world model's own grade
-- of a real turn (wm_reward) is deterministic: set once. Single-shot runs
-- write no row.
CREATE TABLE turns (
    run_id        text             NOT NULL,
    step          integer          NOT NULL CHECK (step >= 0),
    grp           integer          NOT NULL CHECK (grp >= 0),
    sample        integer          NOT NULL CHECK (sample >= 0),
    turn          integer          NOT NULL CHECK (turn >= 1),
    -- The policy's action: the program, or a language model's whole
    -- completion; its token ids and sampling logprobs when the policy gives
    -- them ({"tokens": [...], "logprobs": [...]}, first write wins).
    action        text             NOT NULL,
    completion    jsonb            CHECK (completion IS NULL OR (jsonb_typeof(completion -> 'tokens') = 'array')),
    -- Who answers the group's turns, for all of them: the real grader or
    -- the world model.
    source        text             NOT NULL CHECK (source IN ('real', 'world_model')),
    -- The answer: NULL until the turn is answered. reward stays NULL when
    -- the answer holds no score (status 'ungraded').
    observation   text,
    status        text,
    reward        double precision CHECK (reward >= 0 AND reward <= 1),
    -- The world model's grade of a real turn, for the per-turn anchor pairs.
    wm_reward     double precision CHECK (wm_reward >= 0 AND wm_reward <= 1),
    -- The answer's cost: an execution's CPU and wall seconds, a world-model
    -- call's tokens.
    cpu_seconds   double precision CHECK (cpu_seconds >= 0),
    wall_seconds  double precision CHECK (wall_seconds >= 0),
    wm_tokens     integer          CHECK (wm_tokens >= 0),
    created_at    timestamptz      NOT NULL DEFAULT now(),
    answered_at   timestamptz,
    PRIMARY KEY (run_id, step, grp, sample, turn),
    FOREIGN KEY (run_id, step, grp, sample) REFERENCES trajectories (run_id, step, grp, sample) ON DELETE CASCADE,
    CHECK (wm_reward IS NULL OR source = 'real'),
    CHECK ((status IS NULL) = (observation IS NULL)
       AND (status IS NULL) = (answered_at IS NULL)
       AND (status IS NOT NULL OR reward IS NULL))
);
