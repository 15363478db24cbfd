CREATE TABLE inbox (event_id text PRIMARY KEY);
CREATE TABLE history_events (
    event_id    text        PRIMARY KEY REFERENCES inbox(event_id),
    ticket_id   text        NOT NULL,
    from_status text        NOT NULL,
    to_status   text        NOT NULL,
    changed_at  timestamptz NOT NULL
);
