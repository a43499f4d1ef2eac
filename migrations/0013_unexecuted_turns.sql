-- wmrl schema, version 13: the turns that executed nothing. A request_info
-- turn (answered from the task's files) and a malformed one (no action;
-- the ladder's invalid_program reward) are answered without an execution
-- or a world-model call, whichever source answers their group; they are
-- counted apart from the executions (turns.unexecuted), and a held-out
-- sample counts its own (evaluations.unexecuted: of its executions, the
-- turns that executed nothing). Rows written before: the request_info
-- turns (status 'info') are marked; a malformed one cannot be told from
-- an executed invalid program and stays counted as executed, as it was.
ALTER TABLE turns ADD COLUMN unexecuted boolean NOT NULL DEFAULT false;
UPDATE turns SET unexecuted = true WHERE status = 'info';
ALTER TABLE turns ADD CHECK (NOT unexecuted OR status IS NOT NULL);
ALTER TABLE evaluations ADD COLUMN unexecuted integer NOT NULL DEFAULT 0;
ALTER TABLE evaluations ADD CHECK (unexecuted >= 0 AND unexecuted <= executions);
