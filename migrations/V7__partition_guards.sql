-- The guard against mass dead-lettering, per partition, where the partition's next owner sees it
-- (a restart, a rebalance or a live rewind used to start it afresh, and dead-letter another
-- --max-consecutive-rejections records each time). `dead_lettered` counts the records of the
-- partition the database rejected for good and that were dead-lettered since the last record
-- stored; it is raised in the transaction that stores each of those dead letters, after taking
-- this row's lock, so it cannot drift from `dead_letters` and two members cannot both pass the
-- bound. `engaged_at` is set when a rejected record was held instead (dead-lettering stopped)
-- and `engaged_offset` names the first one. A record stored resets the row.
CREATE TABLE partition_guards (
    topic           text        NOT NULL,
    kafka_partition integer     NOT NULL,
    dead_lettered   integer     NOT NULL DEFAULT 0
        CONSTRAINT partition_guards_dead_lettered_check CHECK (dead_lettered >= 0),
    run_started_at  timestamptz,
    engaged_at      timestamptz,
    engaged_offset  bigint,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, kafka_partition)
);
