-- Placeholder for version 4, which another branch adds (so that 0005 applies
-- in this branch). DELETE THIS FILE when merging with that branch's 0004.
SELECT 1;
