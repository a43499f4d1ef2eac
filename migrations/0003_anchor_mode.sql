-- wmrl schema, version 3: the anchor mode (GRPO on wmrl's anchor groups
-- alone, the control of wmrl) is a valid run mode.

ALTER TABLE runs DROP CONSTRAINT runs_mode_check;
ALTER TABLE runs ADD CONSTRAINT runs_mode_check
    CHECK (mode IN ('grpo', 'wm', 'wmrl', 'mix', 'debias', 'denoise', 'anchor'));
