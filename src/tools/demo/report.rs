//! What the demo prints: progress totals from the service's status snapshot, the one-line
//! progress report, whether everything produced has been processed, and the final summary.
//! No I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::actors::status::ServiceStatus;
use crate::domain::DuplicateCause;

use super::traffic::Tally;

/// Outcome totals over every partition this instance owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub applied: u64,
    pub already_applied: u64,
    pub dead_lettered: u64,
    pub duplicates: BTreeMap<DuplicateCause, u64>,
    /// Unknown records waiting for a retry, summed over partitions.
    pub unknown_backlog: usize,
    /// Partitions holding Unknown records.
    pub stuck: Vec<i32>,
}

impl Progress {
    pub fn of(status: &ServiceStatus) -> Progress {
        let mut progress = Progress::default();
        for actor in status.partitions.iter().filter_map(|p| p.actor.as_ref()) {
            let counts = &actor.counts;
            progress.applied += counts.applied;
            progress.already_applied += counts.already_applied;
            progress.dead_lettered += counts.dead_lettered;
            for (cause, n) in &counts.duplicates {
                *progress.duplicates.entry(*cause).or_default() += n;
            }
            progress.unknown_backlog += actor.backlog.len();
            if !actor.backlog.is_empty() {
                progress.stuck.push(actor.partition);
            }
        }
        progress
    }

    /// Records resolved for the first time (every outcome but Unknown).
    pub fn resolved(&self) -> u64 {
        self.applied + self.already_applied + self.dead_lettered
    }

    pub fn duplicates_of(&self, cause: DuplicateCause) -> u64 {
        self.duplicates.get(&cause).copied().unwrap_or(0)
    }
}

/// Whether the consumer is done with everything produced: no Unknown record anywhere, nothing
/// in flight, and each partition committed up to `ends` (the offset after its last record), as
/// this instance or, failing that, the broker's statistics report it.
pub fn settled(status: &ServiceStatus, ends: &BTreeMap<i32, i64>) -> bool {
    let idle = status.partitions.iter().all(|view| {
        view.actor
            .as_ref()
            .is_some_and(|a| a.backlog.is_empty() && a.in_flight == 0)
    });
    let committed = ends.iter().all(|(partition, end)| {
        status
            .partitions
            .iter()
            .find(|view| view.partition == *partition)
            .is_some_and(|view| view.committed() == Some(*end))
    });
    idle && committed
}

/// What keeps each unsettled partition from being done, for people.
pub fn unsettled(status: &ServiceStatus, ends: &BTreeMap<i32, i64>) -> Vec<String> {
    let mut partitions: Vec<i32> = ends.keys().copied().collect();
    partitions.extend(status.partitions.iter().map(|view| view.partition));
    partitions.sort_unstable();
    partitions.dedup();
    partitions
        .into_iter()
        .filter_map(|partition| {
            let view = status.partitions.iter().find(|v| v.partition == partition);
            let Some(view) = view else {
                return Some(format!("partition {partition}: not assigned"));
            };
            let actor = view.actor.as_ref();
            let committed = view.committed();
            let end = ends.get(&partition).copied();
            let backlog = actor.map_or(0, |a| a.backlog.len());
            let in_flight = actor.map_or(0, |a| a.in_flight);
            let done = backlog == 0
                && in_flight == 0
                && actor.is_some()
                && end.is_none_or(|e| committed == Some(e));
            (!done).then(|| {
                format!(
                    "partition {partition}: committed {committed:?} of {end:?}, {backlog} Unknown, \
                     {in_flight} in flight"
                )
            })
        })
        .collect()
}

/// One progress line: rates over the last `interval`, then running totals.
pub fn progress_line(
    elapsed: Duration,
    interval: Duration,
    sent: (u64, u64),
    resolved: (u64, u64),
    progress: &Progress,
) -> String {
    let per_second = |(before, now): (u64, u64)| {
        now.saturating_sub(before) as f64 / interval.as_secs_f64().max(0.001)
    };
    let stuck = if progress.stuck.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = progress.stuck.iter().map(i32::to_string).collect();
        format!(" (stuck partitions: {})", list.join(","))
    };
    format!(
        "[{:>4}s] sent {:.0}/s, processed {:.0}/s | applied {} | duplicates: {} | dead letters {} | unknown backlog {}{}",
        elapsed.as_secs(),
        per_second(sent),
        per_second(resolved),
        progress.applied,
        duplicates_text(progress),
        progress.dead_lettered,
        progress.unknown_backlog,
        stuck,
    )
}

/// `republish=N redelivery=N`, plus the rarer causes when they happened.
fn duplicates_text(progress: &Progress) -> String {
    const SHOWN: [(DuplicateCause, bool); 4] = [
        (DuplicateCause::Republish, true),
        (DuplicateCause::Redelivery, true),
        (DuplicateCause::Conflicting, false),
        (DuplicateCause::Unclassified, false),
    ];
    SHOWN
        .iter()
        .map(|(cause, always)| (cause, always, progress.duplicates_of(*cause)))
        .filter(|(_, always, n)| **always || *n > 0)
        .map(|(cause, _, n)| format!("{}={n}", cause.as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The final, machine-readable line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub sent: Tally,
    /// Rows in `history_events` of the events this run sent.
    pub rows: i64,
    pub progress: Progress,
    pub hiccups: u32,
    pub interrupted: bool,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.progress;
        write!(
            f,
            "demo summary: sent_unique_valid={} rows={} applied={} republish={} redelivery={} \
             conflicting={} unclassified={} dead_letters={} unknown_backlog={} sent_total={} \
             sent_republished={} sent_malformed={} send_failures={} hiccups={} interrupted={}",
            self.sent.unique_valid,
            self.rows,
            p.applied,
            p.duplicates_of(DuplicateCause::Republish),
            p.duplicates_of(DuplicateCause::Redelivery),
            p.duplicates_of(DuplicateCause::Conflicting),
            p.duplicates_of(DuplicateCause::Unclassified),
            p.dead_lettered,
            p.unknown_backlog,
            self.sent.total(),
            self.sent.republished,
            self.sent.malformed,
            self.sent.failed,
            self.hiccups,
            self.interrupted,
        )
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::actors::status::{
        BacklogEntry, CheckpointStatus, GuardStatus, OutcomeCounts, PartitionState,
        PartitionStatus, PartitionView,
    };
    use crate::domain::UnknownCause;

    fn view(partition: i32, applied: u64, backlog: usize, committed: Option<i64>) -> PartitionView {
        let entry = BacklogEntry {
            offset: 0,
            event_id: None,
            attempts: 1,
            cause: UnknownCause::Unavailable,
            last_error: "db down".into(),
            first_seen: Utc::now(),
            next_retry: Utc::now(),
            dead_letter_requested: false,
        };
        let mut counts = OutcomeCounts {
            applied,
            already_applied: 2,
            dead_lettered: 1,
            ..OutcomeCounts::default()
        };
        counts.duplicates.insert(DuplicateCause::Republish, 2);
        PartitionView {
            partition,
            actor: Some(PartitionStatus {
                partition,
                generation: 1,
                state: PartitionState::Running,
                operator_paused: false,
                in_flight: 0,
                requested: 0,
                unknown: backlog,
                oldest_unknown_since: None,
                backlog: vec![entry; backlog],
                guard: GuardStatus {
                    engaged: false,
                    consecutive: 0,
                    limit: 10,
                    dead_lettered: 0,
                    engaged_at: None,
                    known: true,
                },
                counts,
                last_offset: None,
                last_record_time: None,
                recent: Vec::new(),
            }),
            checkpoint: Some(CheckpointStatus {
                partition,
                generation: 1,
                watermark: committed,
                committed,
                unresolved: backlog,
                first_unresolved: None,
                commits_ok: 1,
                commits_failed: 0,
                last_commit_error: None,
            }),
            observed: None,
            fetch: None,
        }
    }

    fn status(partitions: Vec<PartitionView>) -> ServiceStatus {
        ServiceStatus {
            group: "g".into(),
            topic: "t".into(),
            member_id: None,
            host: "h".into(),
            started_at: Utc::now(),
            shutting_down: false,
            partitions,
        }
    }

    #[test]
    fn progress_sums_the_partitions_and_names_the_stuck_ones() {
        let progress = Progress::of(&status(vec![
            view(0, 10, 0, Some(13)),
            view(1, 5, 3, Some(2)),
        ]));
        assert_eq!(progress.applied, 15);
        assert_eq!(progress.resolved(), 15 + 4 + 2);
        assert_eq!(progress.duplicates_of(DuplicateCause::Republish), 4);
        assert_eq!(progress.unknown_backlog, 3);
        assert_eq!(progress.stuck, vec![1]);
    }

    #[test]
    fn the_demo_is_settled_only_when_every_partition_committed_its_end_without_unknowns() {
        let ends = BTreeMap::from([(0, 13), (1, 8)]);
        let done = status(vec![view(0, 10, 0, Some(13)), view(1, 5, 0, Some(8))]);
        assert!(settled(&done, &ends));
        let behind = status(vec![view(0, 10, 0, Some(13)), view(1, 5, 0, Some(7))]);
        assert!(!settled(&behind, &ends));
        let stuck = status(vec![view(0, 10, 0, Some(13)), view(1, 5, 1, Some(8))]);
        assert!(!settled(&stuck, &ends));
        let unassigned = status(vec![view(0, 10, 0, Some(13))]);
        assert!(!settled(&unassigned, &ends));
    }

    #[test]
    fn the_progress_line_shows_rates_totals_and_stuck_partitions() {
        let progress = Progress::of(&status(vec![view(2, 10, 4, None)]));
        let line = progress_line(
            Duration::from_secs(15),
            Duration::from_secs(5),
            (0, 1000),
            (0, 500),
            &progress,
        );
        assert_eq!(
            line,
            "[  15s] sent 200/s, processed 100/s | applied 10 | duplicates: republish=2 \
             redelivery=0 | dead letters 1 | unknown backlog 4 (stuck partitions: 2)"
        );
    }

    #[test]
    fn the_summary_is_one_line_of_key_value_pairs() {
        let summary = Summary {
            sent: Tally {
                unique_valid: 7,
                republished: 1,
                malformed: 1,
                failed: 0,
            },
            rows: 7,
            progress: Progress::of(&status(vec![view(0, 7, 0, Some(9))])),
            hiccups: 1,
            interrupted: false,
        };
        let line = summary.to_string();
        assert!(!line.contains('\n'));
        assert!(line.starts_with("demo summary: sent_unique_valid=7 rows=7 applied=7 republish=2"));
        assert!(line.contains(" dead_letters=1 unknown_backlog=0 "));
    }
}
