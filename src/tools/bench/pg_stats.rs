//! What PostgreSQL itself counts around a run: the primary-key indexes' sizes, blocks found in
//! shared buffers or read from the kernel (`pg_stat_database`, `pg_statio_user_indexes`), the
//! WAL written (`pg_current_wal_lsn()`), its full-page images (`pg_stat_wal`) and the
//! checkpoints (`pg_stat_bgwriter`). A backend hands its counts to the statistics when it goes
//! idle (at most once a second) and when it exits, so a reading first waits for the run's
//! connections to be gone.

use std::time::{Duration, Instant};

use super::BenchError;
use super::report::{DbActivity, IndexSizes};

/// How long a reading waits for the run's connections to close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);

const OTHER_BACKENDS: &str = "SELECT count(*) FROM pg_stat_activity \
     WHERE datname = current_database() AND pid <> pg_backend_pid() \
     AND backend_type = 'client backend'";

const COUNTERS: &str = "SELECT d.blks_hit, d.blks_read, \
       coalesce((SELECT sum(idx_blks_hit) FROM pg_statio_user_indexes \
                 WHERE indexrelname IN ('inbox_pkey', 'history_events_pkey')), 0)::bigint, \
       coalesce((SELECT sum(idx_blks_read) FROM pg_statio_user_indexes \
                 WHERE indexrelname IN ('inbox_pkey', 'history_events_pkey')), 0)::bigint, \
       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, \
       (SELECT wal_fpi FROM pg_stat_wal), \
       (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter), \
       coalesce(pg_relation_size(to_regclass('inbox_pkey')), 0), \
       coalesce(pg_relation_size(to_regclass('history_events_pkey')), 0), \
       (SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers') \
     FROM pg_stat_database d WHERE d.datname = current_database()";

/// PostgreSQL's counters at one moment, seen from one database.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub blocks_hit: u64,
    pub blocks_read: u64,
    pub index_hit: u64,
    pub index_read: u64,
    /// The WAL's insert position, in bytes from its start.
    pub wal_position: u64,
    pub wal_fpi: u64,
    pub checkpoints: u64,
    pub indexes: IndexSizes,
    pub shared_buffers: u64,
}

impl Counters {
    /// Reads them in the database at `url` once its other client connections are gone (or
    /// after [`CLOSE_WAIT`]).
    pub async fn read(url: &str) -> Result<Counters, BenchError> {
        let client = crate::db::Database::new(url, None)?
            .connect()
            .await
            .map_err(BenchError::Query)?;
        let read = async {
            let started = Instant::now();
            while started.elapsed() < CLOSE_WAIT {
                let others: i64 = client.query_one(OTHER_BACKENDS, &[]).await?.get(0);
                if others == 0 {
                    break;
                }
                tokio::time::sleep(POLL).await;
            }
            let row = client.query_one(COUNTERS, &[]).await?;
            let n = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(0);
            Ok::<_, tokio_postgres::Error>(Counters {
                blocks_hit: n(0),
                blocks_read: n(1),
                index_hit: n(2),
                index_read: n(3),
                wal_position: n(4),
                wal_fpi: n(5),
                checkpoints: n(6),
                indexes: IndexSizes {
                    inbox: n(7),
                    history: n(8),
                },
                shared_buffers: n(9),
            })
        };
        read.await.map_err(BenchError::Query)
    }

    /// What happened between `self` and `later`, over `events` events.
    pub fn until(&self, later: &Counters, events: u64) -> DbActivity {
        DbActivity {
            events,
            blocks_hit: later.blocks_hit.saturating_sub(self.blocks_hit),
            blocks_read: later.blocks_read.saturating_sub(self.blocks_read),
            index_hit: later.index_hit.saturating_sub(self.index_hit),
            index_read: later.index_read.saturating_sub(self.index_read),
            wal_bytes: later.wal_position.saturating_sub(self.wal_position),
            wal_fpi: later.wal_fpi.saturating_sub(self.wal_fpi),
            checkpoints: later.checkpoints.saturating_sub(self.checkpoints),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_is_the_difference_of_two_readings() {
        let before = Counters {
            blocks_hit: 1_000,
            blocks_read: 10,
            index_hit: 500,
            index_read: 5,
            wal_position: 1 << 30,
            wal_fpi: 7,
            checkpoints: 2,
            ..Counters::default()
        };
        let after = Counters {
            blocks_hit: 10_000,
            blocks_read: 1_010,
            index_hit: 4_500,
            index_read: 505,
            wal_position: (1 << 30) + 2_000_000,
            wal_fpi: 1_007,
            checkpoints: 3,
            ..Counters::default()
        };
        let activity = before.until(&after, 10_000);
        assert_eq!(activity.hit_ratio(), Some(0.9));
        assert_eq!(activity.index_hit_ratio(), Some(4_000.0 / 4_500.0));
        assert_eq!(activity.wal_per_event(), Some(200.0));
        assert_eq!(activity.fpi_per_event(), Some(0.1));
        assert_eq!(activity.checkpoints, 1);
        assert_eq!(DbActivity::default().hit_ratio(), None);
    }
}
