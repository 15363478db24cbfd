-- Records that can never succeed (malformed payloads). Idempotent on the record's position, so
-- a replayed malformed record is stored once.
CREATE TABLE dead_letters (
    topic            text        NOT NULL,
    kafka_partition  integer     NOT NULL,
    kafka_offset     bigint      NOT NULL,
    record_key       bytea,
    payload          bytea,
    reason           text        NOT NULL,
    message          text        NOT NULL,
    dead_lettered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, kafka_partition, kafka_offset)
);
CREATE INDEX dead_letters_reason_idx ON dead_letters (reason, dead_lettered_at);
CREATE INDEX dead_letters_time_idx ON dead_letters (dead_lettered_at);
