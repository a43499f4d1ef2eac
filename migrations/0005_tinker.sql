-- wmrl schema, version 5: the Tinker policy adapter's request journal
-- (internal/backend/tinker) and the state of the built-in policy served over
-- the Tinker API (internal/serve/tinkerserve).

-- One row per submitted Tinker request of an update or init phase, written
-- before the request is sent: a retried activity finds the request id and
-- polls the same future instead of training twice.
CREATE TABLE tinker_journal (
    key        text PRIMARY KEY,          -- idempotency key + "/" + phase
    model_id   text NOT NULL,             -- '' for create_model
    seq_id     bigint NOT NULL,
    request_id text,                      -- NULL until the server answered
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The built-in Tinker server: sessions, models (a built-in policy each, its
-- current state and accumulated gradient), saved weights and futures. Every
-- request is applied and its future written in one transaction.
CREATE TABLE tinker_sessions (
    session_id      text PRIMARY KEY,
    tags            jsonb NOT NULL DEFAULT '[]',
    heartbeats      bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_heartbeat  timestamptz
);

CREATE TABLE tinker_models (
    model_id      text PRIMARY KEY,
    session_id    text NOT NULL,
    model_seq_id  bigint NOT NULL,
    base_model    text NOT NULL,
    lora_rank     integer NOT NULL,
    user_metadata jsonb NOT NULL DEFAULT '{}',
    policy        bytea NOT NULL,         -- policy.Encode of the current state
    grad          bytea,                  -- accumulated gradient (float64 LE), NULL when none
    fb_batches    bigint NOT NULL DEFAULT 0,
    optim_steps   bigint NOT NULL DEFAULT 0,
    last_seq_id   bigint NOT NULL DEFAULT -1,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (session_id, model_seq_id)
);

CREATE TABLE tinker_weights (
    model_id   text NOT NULL REFERENCES tinker_models,
    kind       text NOT NULL CHECK (kind IN ('sampler', 'training')),
    name       text NOT NULL,
    policy     bytea NOT NULL,
    hash       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model_id, kind, name)
);

CREATE TABLE tinker_futures (
    request_id      bigserial PRIMARY KEY,
    kind            text NOT NULL,
    model_id        text,
    seq_id          bigint,
    idempotency_key text UNIQUE,
    result          jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (model_id, seq_id)
);
