-- wmrl schema, version 7: the weight of an anchor pair. Under active anchor
-- selection (internal/anchors) a group is an anchor with probability π_g,
-- and its pairs carry the weight (k/G)/π_g, so that the weighted
-- calibration fit and noise estimates describe every group, not the groups
-- chosen more often. Uniform selection, and every pair stored before this
-- version, has weight 1.
ALTER TABLE anchor_pairs
    ADD COLUMN weight double precision NOT NULL DEFAULT 1 CHECK (weight > 0 AND weight < 'Infinity');
