-- wmrl schema, version 7: reserved (another branch's migration takes this
-- number when branches merge; this file only keeps the numbers contiguous).
SELECT 1;
