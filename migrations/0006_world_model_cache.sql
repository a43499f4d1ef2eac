-- wmrl schema, version 6: the answers of a language-model world model
-- (internal/backend/openaiwm), cached so that a retried ScoreWorldModel
-- activity does not pay for the same request twice. A row is keyed by the
-- model and the SHA-256 of the whole request body (rendered messages and
-- sampling parameters): a frozen model at temperature 0 answers it the same,
-- so the first stored answer is the answer. No API key is ever stored.
CREATE TABLE world_model_cache (
    model             text             NOT NULL CHECK (model <> ''),
    request_sha256    text             NOT NULL CHECK (request_sha256 ~ '^[0-9a-f]{64}$'),
    -- graded is false when the answer held no usable score; score is r_wm.
    graded            boolean          NOT NULL,
    score             double precision CHECK (score >= 0 AND score <= 1),
    prompt_tokens     integer          NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens integer          NOT NULL CHECK (completion_tokens >= 0),
    created_at        timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (model, request_sha256),
    CHECK (graded = (score IS NOT NULL))
);
