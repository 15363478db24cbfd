-- Where each event id was first seen, so that a later duplicate can be classified as a
-- redelivery (same partition and offset) or a republish (elsewhere). Nullable: rows written by
-- other tools, or before this migration, carry no origin.
ALTER TABLE inbox
    ADD COLUMN first_partition integer,
    ADD COLUMN first_offset    bigint,
    ADD COLUMN first_seen_at   timestamptz;
