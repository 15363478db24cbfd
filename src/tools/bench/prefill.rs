//! A database that has been running for a while: its inbox and history tables filled with the
//! rows of earlier runs, straight in SQL (`generate_series`), not through the service, then
//! vacuumed and checkpointed so that the run measured next pays neither for the load's dirty
//! pages nor for the autovacuum a bulk load would soon trigger.
//!
//! The rows look like what earlier runs of the benchmark's producer would have left: event ids
//! `evt-<8 hex digits>-<sequence>`, one hex prefix per earlier run of [`ROWS_PER_RUN`] events,
//! the prefixes spread evenly over the hex range, so a new run's ids (a random prefix) land
//! between them. They are generated in key order and with ever later timestamps, so each
//! index is filled at its right end (fast), and the first-seen origin and the ticket ids are
//! as varied as the service's own.
//!
//! For the random-id cases the rows' ids are random UUIDv4 text (`gen_random_uuid()::text`, as
//! the events' own), the history rows inserted in the inbox's heap order (as random). The
//! primary keys are built after the load with `fillfactor = 70` (then reset to the default),
//! which is how full random inserts leave a B-tree's leaf pages (about 69 %, ln 2): inserted
//! with the index in place, 1 M random ids made a 73 MB index where one built at the default
//! 90 % is 56 MB. Growing the indexes row by row is what production does, but on the
//! benchmark's 2-core machine (shared, 128 MB of shared buffers) 10 M rows took 5 min 19 s for
//! the inbox table alone, where loading both tables and building both keys took 5 min 2 s
//! (at a load average of 7 to 9). The foreign
//! key from history to inbox comes back `NOT VALID`: it is checked for every new row as
//! before, only the loaded rows (consistent by construction) are not re-checked.

use std::time::{Duration, Instant};

use super::BenchError;
use super::report::IdKind;

/// Events of one earlier run.
pub const ROWS_PER_RUN: u64 = 200_000;

/// Trigger-free bulk load: the rows are consistent by construction (every history row's
/// marker is inserted first), so the foreign key's per-row check is skipped. Needs a superuser,
/// as the benchmark's own cluster has.
const LOAD_MODE: &str = "SET session_replication_role = replica";
const NORMAL_MODE: &str = "RESET session_replication_role";

/// `$1` rows, `$2` per earlier run, `$3` between two runs' prefixes.
const FILL_INBOX: &str = "INSERT INTO inbox (event_id, first_partition, first_offset, first_seen_at) \
     SELECT format('evt-%s-%s', lpad(to_hex((n / $2::bigint) * $3::bigint), 8, '0'), lpad((n % $2::bigint)::text, 7, '0')), \
            (n % 64)::int, n / 64, timestamptz '2026-01-01 00:00:00+00' + n * interval '1 millisecond' \
     FROM generate_series(0::bigint, $1::bigint - 1) AS n";

const FILL_HISTORY: &str = "INSERT INTO history_events \
     (event_id, ticket_id, from_status, to_status, changed_at) \
     SELECT format('evt-%s-%s', lpad(to_hex((n / $2::bigint) * $3::bigint), 8, '0'), lpad((n % $2::bigint)::text, 7, '0')), \
            'ticket-' || (1000 + n % 1000), 'open', 'in_progress', \
            timestamptz '2025-06-01 00:00:00+00' + n * interval '1 millisecond' \
     FROM generate_series(0::bigint, $1::bigint - 1) AS n";

/// Without the primary keys (and the foreign key that needs the inbox's), for a fast load.
const DROP_KEYS: &str = "ALTER TABLE history_events DROP CONSTRAINT history_events_event_id_fkey; \
     ALTER TABLE history_events DROP CONSTRAINT history_events_pkey; \
     ALTER TABLE inbox DROP CONSTRAINT inbox_pkey";

/// The keys again, as full as random inserts leave them; the reloption then reset, so that
/// later splits behave as in production.
const BUILD_KEYS: &str = "ALTER TABLE inbox ADD CONSTRAINT inbox_pkey PRIMARY KEY (event_id) \
         WITH (fillfactor = 70); \
     ALTER TABLE history_events ADD CONSTRAINT history_events_pkey PRIMARY KEY (event_id) \
         WITH (fillfactor = 70); \
     ALTER INDEX inbox_pkey RESET (fillfactor); \
     ALTER INDEX history_events_pkey RESET (fillfactor); \
     ALTER TABLE history_events ADD CONSTRAINT history_events_event_id_fkey \
         FOREIGN KEY (event_id) REFERENCES inbox (event_id) NOT VALID";

/// `$1` rows with random ids.
const FILL_INBOX_RANDOM: &str = "INSERT INTO inbox (event_id, first_partition, first_offset, first_seen_at) \
     SELECT gen_random_uuid()::text, (n % 64)::int, n / 64, \
            timestamptz '2026-01-01 00:00:00+00' + n * interval '1 millisecond' \
     FROM generate_series(0::bigint, $1::bigint - 1) AS n";

/// A history row for every inbox row, in the inbox's (random) heap order.
const FILL_HISTORY_RANDOM: &str = "INSERT INTO history_events \
     (event_id, ticket_id, from_status, to_status, changed_at) \
     SELECT event_id, 'ticket-' || (1000 + (first_offset * 64 + first_partition) % 1000), \
            'open', 'in_progress', \
            timestamptz '2025-06-01 00:00:00+00' + (first_offset * 64 + first_partition) * interval '1 millisecond' \
     FROM inbox";

/// Fills the (migrated, empty) database at `url` with `rows` inbox markers and as many
/// history rows, their ids of kind `ids`; returns how long it took.
pub async fn fill(url: &str, rows: u64, ids: IdKind) -> Result<Duration, BenchError> {
    let started = Instant::now();
    let client = crate::db::Database::new(url, None)?
        .connect()
        .await
        .map_err(BenchError::Query)?;
    let filled = async {
        let rows = i64::try_from(rows).unwrap_or(i64::MAX);
        let per_run = i64::try_from(ROWS_PER_RUN).unwrap_or(i64::MAX);
        let runs = (rows + per_run - 1) / per_run;
        let stride = (1_i64 << 32) / runs.max(1);
        client.batch_execute(LOAD_MODE).await?;
        match ids {
            IdKind::Ordered => {
                client
                    .execute(FILL_INBOX, &[&rows, &per_run, &stride])
                    .await?;
                client
                    .execute(FILL_HISTORY, &[&rows, &per_run, &stride])
                    .await?;
            }
            IdKind::Random => {
                client.batch_execute(DROP_KEYS).await?;
                client.execute(FILL_INBOX_RANDOM, &[&rows]).await?;
                client.execute(FILL_HISTORY_RANDOM, &[]).await?;
                client.batch_execute(BUILD_KEYS).await?;
            }
        }
        client.batch_execute(NORMAL_MODE).await?;
        // One statement each: VACUUM refuses to run inside a transaction block.
        for statement in [
            "VACUUM (ANALYZE) inbox",
            "VACUUM (ANALYZE) history_events",
            "CHECKPOINT",
        ] {
            client.batch_execute(statement).await?;
        }
        Ok::<_, tokio_postgres::Error>(())
    };
    let result = filled.await;
    drop(client);
    result.map_err(BenchError::Query)?;
    Ok(started.elapsed())
}
