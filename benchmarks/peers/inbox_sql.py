"""The inbox statements the peers run: the service's own (src/inbox/batch.rs), so that every
consumer writes the same inbox and history_events rows (SPEC §2, §3; migration V2's origin
columns)."""

# SPEC §3 step 1 for one event.
TRY_INBOX_ONE = (
    "INSERT INTO inbox (event_id, first_partition, first_offset, first_seen_at) "
    "VALUES (%s, %s, %s, now()) "
    "ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
)

# SPEC §3 step 2 for one event.
SAVE_HISTORY_ONE = (
    "INSERT INTO history_events (event_id, ticket_id, from_status, to_status, changed_at) "
    "VALUES (%s, %s, %s, %s, %s)"
)

# Step 1 for many events: one multi-row insert, the ids whose marker is new come back.
TRY_INBOX_MANY = (
    "INSERT INTO inbox (event_id, first_partition, first_offset, first_seen_at) "
    "SELECT event_id, first_partition, first_offset, now() "
    "FROM unnest(%s::text[], %s::int[], %s::bigint[]) "
    "AS batch (event_id, first_partition, first_offset) "
    "ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
)

# Step 2 for the returned ids.
SAVE_HISTORY_MANY = (
    "INSERT INTO history_events (event_id, ticket_id, from_status, to_status, changed_at) "
    "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[])"
)

FIELDS = ("event_id", "ticket_id", "from_status", "to_status", "changed_at")


def event_of(value):
    """The five fields of a decoded record, or ValueError when one is missing or empty (the
    workload has no malformed records; a peer that met one would stop rather than guess)."""
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object: {value!r}")
    out = []
    for name in FIELDS:
        field = value.get(name)
        if not isinstance(field, str) or not field.strip():
            raise ValueError(f"{name} missing or empty in {value!r}")
        out.append(field)
    return out


def peer_arguments(description):
    """The command line every peer shares: where to read from and where to write to."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--session-timeout-ms", type=int, default=10000)
    return parser


def report(**fields):
    """One JSON line on stdout for the harness (scripts/bench-peers)."""
    import json
    import sys

    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()
