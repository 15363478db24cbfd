-- Every operator action taken through the admin UI or API, for the audit trail on the page.
CREATE TABLE admin_actions (
    id            bigserial   PRIMARY KEY,
    acted_at      timestamptz NOT NULL DEFAULT now(),
    kafka_partition integer   NOT NULL,
    action        text        NOT NULL,
    actor         text        NOT NULL,
    result        text        NOT NULL
);
CREATE INDEX admin_actions_time_idx ON admin_actions (acted_at DESC);
