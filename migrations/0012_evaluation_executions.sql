-- wmrl schema, version 12: the executions of a held-out sample. A sample of
-- a multi-turn policy's evaluation runs its trajectory.turns turns, and one
-- under eval.best_of its N attempts (docs/design.md, "Held-out evaluation
-- over turns"); its row keeps the attempt the reduction chose (program,
-- status, score, position) and the CPU and wall seconds of all of them, and
-- counts them here. A single-shot sample is one execution.
ALTER TABLE evaluations ADD COLUMN executions integer NOT NULL DEFAULT 1 CHECK (executions >= 1);
