//! A live rewind, carried out by the driver thread: a revoke and re-assign of the same
//! partitions without a rebalance.
//!
//! The partitions' actors drain while nothing is read from their queues; the commit in flight
//! is answered; each partition is sought to its rewound offset, or, when it keeps its position,
//! back to the first record it did not resolve (the drained actor dropped whatever it held); new
//! assignments start with fresh actors and watermarks; and the rewound positions are committed
//! ahead of anything queued. Only then does the driver read the partitions again.
//!
//! A partition whose seek fails is not restarted: a new actor would be fed records after those
//! the drained one dropped, and its watermark would commit past them. It stays idle instead,
//! its queue unread (it fills and fetching stops), its committed offset where it was, until a
//! rebalance or a restart assigns it afresh.

use super::position::PositionTrust;
use super::*;
use crate::actors::messages::{LiveRewound, RewindTarget};
use crate::domain::rewind::{Restart, restart};

/// How long a seek may take (it is carried out by librdkafka's own threads).
const SEEK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long asking the group coordinator for committed offsets may take.
const COMMITTED_TIMEOUT: Duration = Duration::from_secs(10);

impl Driver {
    /// Rewinds `targets` and reports [`PartitionsRewound`] with `id`.
    pub(super) fn rewind(&mut self, id: u64, targets: Vec<RewindTarget>) {
        let mut results = Vec::new();
        let mut held = Vec::new();
        for target in targets {
            let partition = target.assignment.partition;
            if self.closing_since.is_some() {
                results.push(LiveRewound::failed(
                    partition,
                    "the service is shutting down",
                ));
            } else if self.reader_of(target.assignment).is_some() {
                held.push(target);
            } else {
                results.push(LiveRewound::failed(
                    partition,
                    "the partition was revoked meanwhile",
                ));
            }
        }
        if !held.is_empty() {
            results.extend(self.rewind_held(&held));
        }
        self.ports
            .rewound
            .do_send(PartitionsRewound { id, results });
    }

    fn rewind_held(&mut self, targets: &[RewindTarget]) -> Vec<LiveRewound> {
        let assignments: Vec<Assignment> = targets.iter().map(|t| t.assignment).collect();
        let partitions: Vec<i32> = assignments.iter().map(|a| a.partition).collect();
        tracing::info!(?partitions, "live rewind: draining");
        let resumes: BTreeMap<i32, Option<i64>> =
            futures::executor::block_on(self.ports.rewinding.send(DrainForRewind { assignments }))
                .unwrap_or_default()
                .into_iter()
                .map(|(assignment, resume)| (assignment.partition, resume))
                .collect();
        self.ledger.forget(&partitions);
        // The rewound position must reach the broker after whatever is in flight.
        let ordered = self.settle_commit_in_flight(Instant::now() + FINAL_COMMIT_TIMEOUT);
        let mut drained: BTreeMap<i32, Reader> = partitions
            .iter()
            .filter_map(|p| self.readers.remove(p).map(|reader| (*p, reader)))
            .collect();
        let resume_of = |partition: i32, reader: &Reader| {
            resumes.get(&partition).copied().flatten().or(reader.first)
        };
        let unfed: Vec<i32> = drained
            .iter()
            .filter(|(p, reader)| resume_of(**p, reader).is_none())
            .map(|(p, _)| *p)
            .collect();
        let committed = self.committed_offsets(&unfed);

        let mut results = Vec::new();
        let mut restarts: Vec<(Reader, Restart)> = Vec::new();
        for target in targets {
            let partition = target.assignment.partition;
            let Some(reader) = drained.remove(&partition) else {
                continue;
            };
            let resume = resume_of(partition, &reader);
            let committed = committed.get(&partition).copied().flatten();
            let plan = restart(resume, committed, target.target);
            if let Some(offset) = plan.seek {
                let sought = self.consumer.seek(
                    &self.topic,
                    partition,
                    Offset::Offset(offset),
                    SEEK_TIMEOUT,
                );
                if let Err(error) = sought {
                    tracing::error!(
                        partition,
                        offset,
                        error = %error,
                        "live rewind: seek failed; the partition stays idle until it is reassigned"
                    );
                    self.readers.insert(
                        partition,
                        Reader {
                            demand: 0,
                            ..reader
                        },
                    );
                    results.push(LiveRewound::failed(
                        partition,
                        &format!(
                            "seek to offset {offset} failed ({error}); the partition stays idle \
                             until it is reassigned or the service restarts"
                        ),
                    ));
                    continue;
                }
            }
            tracing::info!(partition, ?resume, committed, decision = ?plan.decision, "live rewind: restarting");
            restarts.push((reader, plan));
        }

        let mut assignments = Vec::new();
        for (reader, _) in &restarts {
            assignments.push(Assignment {
                partition: reader.assignment.partition,
                generation: self.next_generation,
            });
            self.next_generation += 1;
        }
        let sinks: BTreeMap<i32, (Assignment, Recipient<Fetched>)> = futures::executor::block_on(
            self.ports
                .restarted
                .send(PartitionsRestarted { assignments }),
        )
        .unwrap_or_default()
        .into_iter()
        .map(|(assignment, sink)| (assignment.partition, (assignment, sink)))
        .collect();
        let mut positions = Vec::new();
        for (reader, plan) in restarts {
            let partition = reader.assignment.partition;
            let Some((assignment, sink)) = sinks.get(&partition).cloned() else {
                results.push(LiveRewound::failed(
                    partition,
                    "no new actor: the service is stopping",
                ));
                continue;
            };
            // A seek made the position invalid before it returned: whatever comes next is
            // ours. Without one, the position is what the drained assignment knew of it.
            let trust = match plan.seek {
                Some(_) => PositionTrust::Current,
                None => reader.trust,
            };
            self.readers.insert(
                partition,
                Reader {
                    assignment,
                    queue: reader.queue,
                    sink,
                    demand: self.settings.initial_credit,
                    accounted: None,
                    first: None,
                    trust,
                    unchecked: true,
                    held: None,
                    failing: false,
                },
            );
            if let Some(offset) = plan.commit {
                positions.push(CommitPosition { assignment, offset });
            }
            results.push(LiveRewound {
                partition,
                decision: Some(plan.decision),
                error: None,
            });
        }
        if !positions.is_empty() {
            let failure = if ordered {
                self.commit_ahead(positions.clone())
            } else {
                Some(
                    "the rewound offset is not committed yet (the commit before it is still \
                     unanswered); it is committed as the partition moves on"
                        .to_owned(),
                )
            };
            if let Some(why) = failure {
                tracing::warn!(?positions, error = %why, "live rewind: commit failed");
                for result in &mut results {
                    if positions
                        .iter()
                        .any(|p| p.assignment.partition == result.partition)
                    {
                        result.error = Some(why.clone());
                    }
                }
            }
        }
        results
    }

    /// Commits `positions` now, ahead of anything queued, and waits for the answer; the error,
    /// if it failed.
    fn commit_ahead(&mut self, positions: Vec<CommitPosition>) -> Option<String> {
        if !self.send_final(positions) {
            return Some("the rewound offset could not be committed".to_owned());
        }
        match self.collect_commit_answers(FINAL_COMMIT_TIMEOUT) {
            None => Some("the commit of the rewound offset was not answered in time".to_owned()),
            Some(first_error) => first_error,
        }
    }

    /// The group's committed offsets of `partitions`, as the coordinator has them (empty when
    /// it does not answer).
    fn committed_offsets(&self, partitions: &[i32]) -> BTreeMap<i32, Option<i64>> {
        if partitions.is_empty() {
            return BTreeMap::new();
        }
        match crate::kafka::committed_of(&self.consumer, &self.topic, partitions, COMMITTED_TIMEOUT)
        {
            Ok(committed) => committed,
            Err(error) => {
                tracing::warn!(?partitions, error = %error, "committed offsets not known");
                BTreeMap::new()
            }
        }
    }
}
