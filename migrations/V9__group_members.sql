-- The members of a consumer group as they publish themselves, every --member-heartbeat, to the
-- database they share, so that any member's admin shows the whole group; and the operator
-- actions one member carries to another (the partition's owner) through it. Kafka assigns the
-- partitions; these tables only tell what the members say about theirs.

-- One row per member process, upserted by the member itself. `heartbeat_at` is the database's
-- clock (every member compares ages with the same clock); `left_at` is set by a member that
-- left the group gracefully. Rows of members gone longer than --member-forget-after are
-- removed by whichever member notices first.
CREATE TABLE group_members (
    member_id        text        PRIMARY KEY,
    consumer_group   text        NOT NULL,
    topic            text        NOT NULL,
    host             text        NOT NULL,
    pid              integer     NOT NULL,
    version          text        NOT NULL,
    -- The Kafka client id (history-consumer-<host>-<pid>) and the member id the group
    -- coordinator gave it: how the group's own description names this member.
    client_id        text        NOT NULL,
    kafka_member_id  text,
    admin_url        text,
    started_at       timestamptz NOT NULL,
    heartbeat_at     timestamptz NOT NULL,
    left_at          timestamptz
);
CREATE INDEX group_members_group_idx ON group_members (consumer_group, topic);

-- One row per partition a member owns, as of its last heartbeat (rows of partitions it no
-- longer owns are deleted in the same transaction).
CREATE TABLE group_member_partitions (
    member_id        text        NOT NULL REFERENCES group_members (member_id) ON DELETE CASCADE,
    kafka_partition  integer     NOT NULL,
    -- running, retrying, paused, stuck, draining (the member's own overview)
    state            text        NOT NULL,
    watermark        bigint,
    committed_offset bigint,
    end_offset       bigint,
    lag_records      bigint,
    lag_seconds      double precision,
    unknown_records  integer     NOT NULL,
    stuck_reason     text,
    paused           boolean     NOT NULL,
    guard_engaged    boolean     NOT NULL,
    -- The member's own count of the times it was given the partition: a command carries the
    -- generation it was asked for, and the owner refuses it once the partition went away and
    -- came back in between.
    generation       bigint,
    PRIMARY KEY (member_id, kafka_partition)
);

-- An operator action on a partition, asked on one member and carried out by the member that
-- owns the partition: inserted with a NOTIFY on channel history_group_commands, taken by the
-- owner at most once (`UPDATE ... WHERE taken_at IS NULL ... RETURNING`), answered with what it
-- did (or why it refused). A command nobody took within the asker's wait is answered
-- `expired` by the asker, so that it can never run late. Rows older than
-- --member-forget-after are removed.
CREATE TABLE group_commands (
    id                 bigserial   PRIMARY KEY,
    consumer_group     text        NOT NULL,
    topic              text        NOT NULL,
    -- NULL: the partitions are in `arguments` (a rewind of several partitions of one owner)
    kafka_partition    integer,
    owner_member_id    text        NOT NULL,
    action             text        NOT NULL,
    arguments          jsonb       NOT NULL DEFAULT '{}',
    asked_by           text        NOT NULL,
    asked_from_member  text        NOT NULL,
    asked_from_address text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    taken_at           timestamptz,
    answered_at        timestamptz,
    answer             jsonb
);
CREATE INDEX group_commands_waiting_idx ON group_commands (owner_member_id, id)
    WHERE taken_at IS NULL AND answered_at IS NULL;
CREATE INDEX group_commands_time_idx ON group_commands (created_at);
