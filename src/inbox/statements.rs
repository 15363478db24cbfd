//! The inbox's writes, each written once: an event's marker and history row, and a dead letter.
//!
//! Each takes arrays, one element per row. The SPEC §4 path runs [`TRY_INBOX`] and
//! [`SAVE_HISTORY`] one by one, with arrays of one, and so does a batch sent markers first; a
//! batch sent in one round trip runs the same two inserts as one statement, [`STORE_EVENTS`].

/// SPEC §3 step 1, plus where each marker was first seen (migration V2): the ids in the one
/// row that comes back (an array, NULL when empty) are the markers this transaction inserted.
/// One array rather than a row per id: reading a row costs the client an allocation and a
/// message of its own.
pub const TRY_INBOX: &str = "WITH inserted AS (\
     INSERT INTO inbox (event_id, first_partition, first_offset, first_seen_at) \
     SELECT event_id, first_partition, first_offset, now() \
     FROM unnest($1::text[], $2::int[], $3::bigint[]) \
          AS batch (event_id, first_partition, first_offset) \
     ON CONFLICT (event_id) DO NOTHING \
     RETURNING event_id) \
     SELECT array_agg(event_id) FROM inserted";

/// SPEC §3 steps 1 and 2 in one statement, for a batch: the markers as [`TRY_INBOX`] inserts
/// them, and the history rows of exactly the ids whose marker this statement inserted (a
/// data-modifying `WITH` runs once, to completion, and its `RETURNING` rows are what the history
/// insert joins). One statement is atomic on its own, and needs no reply between its two
/// inserts: a batch's transaction can go in one round trip.
pub const STORE_EVENTS: &str = "WITH batch AS MATERIALIZED (\
     SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], \
                          $4::text[], $5::text[], $6::text[], $7::timestamptz[]) \
          AS batch (event_id, first_partition, first_offset, \
                    ticket_id, from_status, to_status, changed_at)), \
     inserted AS (\
     INSERT INTO inbox (event_id, first_partition, first_offset, first_seen_at) \
     SELECT event_id, first_partition, first_offset, now() FROM batch \
     ON CONFLICT (event_id) DO NOTHING \
     RETURNING event_id), \
     saved AS (\
     INSERT INTO history_events (event_id, ticket_id, from_status, to_status, changed_at) \
     SELECT event_id, ticket_id, from_status, to_status, changed_at \
     FROM batch JOIN inserted USING (event_id)) \
     SELECT array_agg(event_id) FROM inserted";

/// SPEC §3 step 2, for the events whose marker is new (the SPEC §4 path passes one).
pub const SAVE_HISTORY: &str = "INSERT INTO history_events \
     (event_id, ticket_id, from_status, to_status, changed_at) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])";

/// Records that can never succeed, idempotently on their position: the rows affected are the
/// letters that are new.
pub const STORE_DEAD_LETTERS: &str = "INSERT INTO dead_letters \
     (topic, kafka_partition, kafka_offset, record_key, payload, reason, message) \
     SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bytea[], $5::bytea[], \
                          $6::text[], $7::text[]) \
     ON CONFLICT (topic, kafka_partition, kafka_offset) DO NOTHING";
