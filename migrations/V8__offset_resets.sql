-- Every offset reset: a partition's position that was not in its log any more (retention or
-- DeleteRecords moved the log's start past it, or the log ends before it). The offsets from
-- `from_offset` to `to_offset` were never read by the group and are gone; `to_offset` is NULL
-- while the partition is held (--offset-reset-policy hold) and set when reading goes on. One
-- row per position: finding the same one again (after a restart) changes nothing.
CREATE TABLE offset_resets (
    topic           text        NOT NULL,
    kafka_partition integer     NOT NULL,
    from_offset     bigint      NOT NULL,
    to_offset       bigint,
    log_start       bigint,
    log_end         bigint,
    policy          text        NOT NULL
        CONSTRAINT offset_resets_policy_check CHECK (policy IN ('continue', 'hold')),
    reason          text        NOT NULL,
    detected_at     timestamptz NOT NULL DEFAULT now(),
    resumed_at      timestamptz,
    resumed_by      text,
    PRIMARY KEY (topic, kafka_partition, from_offset)
);
CREATE INDEX offset_resets_time_idx ON offset_resets (detected_at);
