-- What became of a dead letter: `new` until an operator replays it back through the inbox
-- transaction, then `applied` (stored by the replay, or found stored already) or
-- `still_rejected`, with when, by whom and what the replay said; the dead-letter page filters
-- by it. The audit trail names the record an action was about and the operator's comment, and
-- an action over many partitions (replaying every matching letter) has no single partition.
ALTER TABLE dead_letters
    ADD COLUMN state text NOT NULL DEFAULT 'new'
        CONSTRAINT dead_letters_state_check CHECK (state IN ('new', 'applied', 'still_rejected')),
    ADD COLUMN replayed_at timestamptz,
    ADD COLUMN replayed_by text,
    ADD COLUMN replay_message text;
CREATE INDEX dead_letters_state_idx ON dead_letters (state, dead_lettered_at);
ALTER TABLE admin_actions
    ALTER COLUMN kafka_partition DROP NOT NULL,
    ADD COLUMN kafka_offset bigint,
    ADD COLUMN detail text;
