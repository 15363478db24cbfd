//! The two ceilings a case is compared with: Kafka alone (ceiling 1: its records read back by a
//! plain consumer) and the database alone (ceiling 2: its events through the batched inbox
//! transaction, no Kafka, no actors).

use std::collections::{BTreeMap, HashSet};

use super::database::{self, RunRows, expect_run_rows};
use super::measure::{self, Sent};
use super::probe::{self, CpuSnapshot};
use super::report::{CeilingResult, IdKind};
use super::topic::Topic;
use super::workload::{Workload, event_of};
use super::{BenchError, Plan};
use crate::domain::TicketEvent;
use crate::inbox::Origin;
use crate::inbox::batch::Shape;

/// Ceiling 1 on `topic`, up to where the records `sent` end.
pub async fn kafka(topic: &Topic, sent: &[Sent]) -> Result<CeilingResult, BenchError> {
    let ends = ends_of(sent, topic.partitions);
    probe::reset_peak_rss();
    let cpu_before = CpuSnapshot::take();
    let read = topic.read_raw(&ends).await?;
    let cpu = cpu_before.usage_until(&CpuSnapshot::take());
    Ok(CeilingResult {
        records: read.records,
        tasks: 1,
        connections: 0,
        elapsed: read.elapsed,
        rate: measure::rate(read.records, read.elapsed),
        peak_rss: probe::peak_rss(),
        cpu,
    })
}

/// A case's events for ceiling 2: made again from the seed under ids of their own, split into
/// the partitions' shares (in offset order) where the case's records landed.
pub struct DatabaseWork {
    shares: Vec<Vec<(TicketEvent, Origin)>>,
    records: u64,
    unique: u64,
    rows: RunRows,
}

impl DatabaseWork {
    pub fn new(
        plan: &Plan,
        run_id: &str,
        duplicates: f64,
        ids: IdKind,
        sent: &[Sent],
    ) -> DatabaseWork {
        // `evt-db<run>-`: not under the end-to-end run's prefix `evt-<run>-`, which may share
        // the database (random ids: other ids, as another run id seeds them).
        let workload = Workload::with_ids(plan.seed, &format!("db{run_id}"), duplicates, ids);
        let prefix = workload.id_prefix();
        let mut shares: BTreeMap<i32, Vec<(TicketEvent, Origin)>> = BTreeMap::new();
        let mut unique = HashSet::new();
        for (record, at) in workload.zip(sent) {
            let Some(event) = event_of(record) else {
                continue;
            };
            unique.insert(event.event_id().to_owned());
            let origin = Origin {
                partition: at.partition,
                offset: at.offset,
            };
            shares
                .entry(at.partition)
                .or_default()
                .push((event, origin));
        }
        let mut shares: Vec<Vec<(TicketEvent, Origin)>> = shares.into_values().collect();
        for share in &mut shares {
            share.sort_by_key(|(_, origin)| origin.offset);
        }
        let rows = match ids {
            IdKind::Ordered => RunRows::Prefix(prefix),
            IdKind::Random => RunRows::Ids(unique.iter().map(ToString::to_string).collect()),
        };
        DatabaseWork {
            records: sent.len() as u64,
            unique: unique.len() as u64,
            shares,
            rows,
        }
    }

    /// Runs the events through the batched transaction into the migrated database at `url`,
    /// in batches of `batch_size`, on at most `connections` connections. `fresh`: none of
    /// these events is stored yet (else all are, and none may be applied again). Each batch's
    /// transaction goes in `shape`. The rows are checked afterwards.
    pub async fn run(
        &self,
        url: &str,
        batch_size: usize,
        connections: usize,
        fresh: bool,
        shape: Shape,
        phase: &str,
    ) -> Result<CeilingResult, BenchError> {
        let result = self
            .run_unchecked(url, batch_size, connections, fresh, shape, phase)
            .await?;
        self.check(url, phase).await?;
        Ok(result)
    }

    /// Fails unless the database at `url` holds exactly these events' rows; then settles the
    /// run's tables (see [`database::settle`]).
    pub async fn check(&self, url: &str, phase: &str) -> Result<(), BenchError> {
        let pool = crate::db::pool(url, 1)?;
        expect_run_rows(&pool, &self.rows, self.unique, phase).await?;
        database::settle(&pool).await
    }

    /// [`DatabaseWork::run`] without counting the rows afterwards (so that PostgreSQL's
    /// counters can be read first); the caller then calls [`DatabaseWork::check`].
    pub async fn run_unchecked(
        &self,
        url: &str,
        batch_size: usize,
        connections: usize,
        fresh: bool,
        shape: Shape,
        phase: &str,
    ) -> Result<CeilingResult, BenchError> {
        let connections = connections.clamp(1, self.shares.len().max(1));
        probe::reset_peak_rss();
        let cpu_before = CpuSnapshot::take();
        let ceiling = database::ceiling(url, &self.shares, batch_size, connections, shape).await?;
        let cpu = cpu_before.usage_until(&CpuSnapshot::take());
        let peak_rss = probe::peak_rss();
        let expected = if fresh { self.unique } else { 0 };
        if ceiling.applied != expected {
            return Err(BenchError::Mismatch {
                phase: format!("{phase} (applied by the batched transaction)"),
                rows: ceiling.applied,
                unique: expected,
            });
        }
        Ok(CeilingResult {
            records: self.records,
            tasks: self.shares.len(),
            connections,
            elapsed: ceiling.elapsed,
            rate: measure::rate(ceiling.records, ceiling.elapsed),
            peak_rss,
            cpu,
        })
    }
}

/// Per partition, the offset after the last of `sent`.
fn ends_of(sent: &[Sent], partitions: i32) -> Vec<i64> {
    let mut ends = vec![0; usize::try_from(partitions).unwrap_or(0)];
    for s in sent {
        if let Some(end) = usize::try_from(s.partition)
            .ok()
            .and_then(|p| ends.get_mut(p))
        {
            *end = (*end).max(s.offset + 1);
        }
    }
    ends
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn ends_are_one_past_the_last_offset_of_each_partition() {
        let at = Instant::now();
        let sent = |partition, offset| Sent {
            partition,
            offset,
            at,
        };
        let ends = ends_of(&[sent(0, 0), sent(2, 5), sent(0, 1), sent(2, 3)], 4);
        assert_eq!(ends, vec![2, 0, 6, 0]);
    }
}
