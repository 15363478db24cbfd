//! A live rewind, carried out by the driver thread: a revoke and re-assign of the same
//! partitions without a rebalance.
//!
//! The partitions' actors drain while nothing is read from their queues; the commit in flight
//! is answered; each partition is sought to its rewound offset, or, when it keeps its position,
//! back to the first record it did not resolve (the drained actor dropped whatever it held); new
//! assignments start with fresh actors and watermarks; and the rewound positions are committed
//! ahead of anything queued. Only then does the driver read the partitions again.
//!
//! A partition whose seek fails has its fetching restarted at the offset instead (take it out
//! of the consumer's assignment and put it back there; a partition librdkafka stopped at an
//! offset reset can only be restarted so). If that fails too, it is not fed: a new actor would
//! be given records after those the drained one dropped, and its watermark would commit past
//! them. It gets a new actor all the same, held at the offset with the error, so it stays on
//! the status page, in the checkpoint and the metrics, and the next live rewind tries again.
//!
//! A rewound offset is committed ahead of anything queued once the commit in flight is
//! answered; when that one stays unanswered, or the rewound commit fails or is not answered in
//! time, the result says it is pending (and it is queued to be sent), never done.

use super::position::PositionTrust;
use std::collections::BTreeMap;
use std::time::Instant;

use actix::Recipient;
use rdkafka::Offset;
use rdkafka::consumer::Consumer;

use super::{Driver, Reader};
use crate::actors::messages::commands::LiveRewound;
use crate::actors::messages::driver::{
    DrainForRewind, Fetched, PartitionsRestarted, PartitionsRewound,
};
use crate::actors::messages::driver::{OffsetResetResumed, RewindTarget};
use crate::domain::HeldCause;
use crate::domain::rewind::{Restart, restart, restart_past_gap};
use crate::domain::{Assignment, CommitPosition, Held};
use crate::kafka::timeouts::{COMMITTED_TIMEOUT, FINAL_COMMIT_TIMEOUT, SEEK_TIMEOUT};

/// A fault for the tests of the binary, in debug builds only: with
/// `HISTORY_TEST_REWIND_FAIL=once` in the environment when the service starts, the first live
/// rewind that must move a partition fails to (its seek and the restart of its fetching both
/// fail), as a broker that does not answer would make them. Release builds ignore it.
pub const TEST_REWIND_FAIL: &str = "HISTORY_TEST_REWIND_FAIL";

pub(super) fn fail_first_rewind() -> bool {
    cfg!(debug_assertions) && std::env::var(TEST_REWIND_FAIL).is_ok_and(|value| value == "once")
}

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

    /// The rewind of partitions this driver reads, in four steps: drain, position, restart,
    /// commit (see the module docs).
    fn rewind_held(&mut self, targets: &[RewindTarget]) -> Vec<LiveRewound> {
        let Drained {
            mut readers,
            resumes,
            ordered,
        } = self.drain_for_rewind(targets);
        let unfed: Vec<i32> = readers
            .iter()
            .filter(|(p, reader)| resume_of(&resumes, **p, reader).is_none())
            .map(|(p, _)| *p)
            .collect();
        let committed = self.committed_offsets(&unfed);
        // Each drained partition is restarted with a new actor: where it should read, or, when
        // it could not be positioned there, held with the error in plain sight, so it never
        // drops out of the supervisor, the checkpoint and the metrics.
        let restarts: Vec<Restarting> = targets
            .iter()
            .filter_map(|target| {
                let reader = readers.remove(&target.assignment.partition)?;
                let resume = resume_of(&resumes, target.assignment.partition, &reader);
                let committed = committed
                    .get(&target.assignment.partition)
                    .copied()
                    .flatten();
                Some(self.position_for_rewind(target, reader, resume, committed))
            })
            .collect();
        let (mut results, positions) = self.restart_readers(restarts);
        self.commit_rewound(positions, ordered, &mut results);
        results
    }

    /// Step 1: drains the targets' actors, forgets their commits, settles the commit in flight
    /// and takes their readers out.
    fn drain_for_rewind(&mut self, targets: &[RewindTarget]) -> Drained {
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
        let readers = partitions
            .iter()
            .filter_map(|p| self.readers.remove(p).map(|reader| (*p, reader)))
            .collect();
        Drained {
            readers,
            resumes,
            ordered,
        }
    }

    /// Step 2: decides where a drained partition reads from now and moves its fetch position
    /// there; the error, if it could not be moved.
    fn position_for_rewind(
        &mut self,
        target: &RewindTarget,
        mut reader: Reader,
        resume: Option<i64>,
        committed: Option<i64>,
    ) -> Restarting {
        let partition = target.assignment.partition;
        let gap = reader.held.as_ref().and_then(|held| match held.cause {
            HeldCause::OffsetOutOfRange { log_start, .. } => {
                held.offset.map(|from| (from, log_start))
            }
            _ => None,
        });
        // Records before the gap that the drained actor had not resolved were dropped with
        // it: reading must go back to them, never past them to the log's start (if they are
        // gone too, librdkafka reports that position out of range and it is recorded).
        let before_gap = match (gap, resume) {
            (Some((from, _)), Some(resume)) if resume < from => Some(resume),
            _ => None,
        };
        let plan = match gap.filter(|_| before_gap.is_none()) {
            // librdkafka stopped fetching the partition at the reset: it must be started
            // again at the log's start (or an earlier target), never left where it is.
            Some((from, known_start)) => {
                let log_start = self
                    .consumer
                    .fetch_watermarks(&self.topic, partition, SEEK_TIMEOUT)
                    .ok()
                    .map(|(start, _)| start)
                    .or(known_start);
                match log_start {
                    Some(log_start) => restart_past_gap(from, log_start, target.target),
                    None => {
                        let plan = restart(Some(from), None, target.target);
                        let why = "the partition's log start is not known".to_owned();
                        tracing::error!(partition, error = %why, "live rewind: cannot restart a held gap");
                        return Restarting {
                            reader,
                            plan,
                            positioned: Err(why),
                        };
                    }
                }
            }
            None => restart(resume, committed, target.target),
        };
        // librdkafka stopped fetching a partition at an offset reset: only a restart of its
        // fetching moves it, and it must move even when the rewind keeps its position.
        // Messages carried over after an error were read from the old position: outdated once
        // the position moves (whether or not it could be moved: the partition is held then).
        if plan.seek.is_some() || gap.is_some() {
            reader.queue.discard_carried();
        }
        let positioned = match (plan.seek, gap) {
            (Some(offset), _) => self.reposition(partition, offset, gap.is_some()),
            (None, Some((from, _))) => self.reposition(partition, resume.unwrap_or(from), true),
            (None, None) => Ok(()),
        };
        match &positioned {
            Ok(()) => {
                tracing::info!(partition, decision = ?plan.decision, seek = plan.seek, "live rewind: restarting");
                if let (Some((from, _)), Some(to), None) = (gap, plan.seek, before_gap) {
                    self.ports.resets_resumed.do_send(OffsetResetResumed {
                        partition,
                        from,
                        to,
                        by: "live rewind",
                    });
                }
            }
            Err(error) => tracing::error!(
                partition,
                offset = plan.seek,
                error = %error,
                "live rewind: the partition could not be positioned; it is held, shown with \
                 the error, until a live rewind succeeds or it is assigned again"
            ),
        }
        Restarting {
            reader,
            plan,
            positioned,
        }
    }

    /// Step 3: new assignments and actors for the positioned partitions; each partition's
    /// result, and the rewound positions to commit.
    fn restart_readers(
        &mut self,
        restarts: Vec<Restarting>,
    ) -> (Vec<LiveRewound>, Vec<CommitPosition>) {
        let mut assignments = Vec::new();
        for restarting in &restarts {
            assignments.push(Assignment {
                partition: restarting.reader.assignment.partition,
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
        let mut results = Vec::new();
        let mut positions = Vec::new();
        for Restarting {
            reader,
            plan,
            positioned,
        } in restarts
        {
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
            // A partition held for a cause the rewind did not touch stays held (a rewind
            // without a seek reads nothing again).
            let kept_hold = match (&positioned, plan.seek) {
                (Ok(()), None) => reader.held.clone(),
                _ => None,
            };
            let initial_credit = self.settings.initial_credit;
            self.readers.insert(
                partition,
                Reader::new(assignment, reader.queue, sink, initial_credit, trust),
            );
            if let Err(error) = positioned {
                let offset = plan.seek;
                self.hold(
                    assignment,
                    Held {
                        offset,
                        cause: HeldCause::Stopped,
                        detail: format!(
                            "a live rewind could not restart the partition at offset {}: {error}; \
                             nothing after it is read or committed until a live rewind succeeds \
                             or the partition is assigned again",
                            offset.map_or_else(|| "?".to_owned(), |o| o.to_string())
                        ),
                        since: chrono::Utc::now(),
                    },
                );
                results.push(LiveRewound {
                    partition,
                    decision: None,
                    error: Some(format!(
                        "not rewound: {error}; the partition is held, shown on its page, until a \
                         live rewind succeeds or it is assigned again"
                    )),
                    pending: None,
                });
                continue;
            }
            if let Some(held) = kept_hold {
                self.hold(assignment, held);
            }
            if let Some(offset) = plan.commit {
                positions.push(CommitPosition { assignment, offset });
            }
            results.push(LiveRewound {
                partition,
                decision: Some(plan.decision),
                error: None,
                pending: None,
            });
        }
        (results, positions)
    }

    /// Step 4: commits the rewound positions ahead of anything queued (`ordered`: the commit in
    /// flight was answered), or queues them behind it; marks the results pending, with why,
    /// when they are not committed yet.
    fn commit_rewound(
        &mut self,
        positions: Vec<CommitPosition>,
        ordered: bool,
        results: &mut [LiveRewound],
    ) {
        if positions.is_empty() {
            return;
        }
        let pending = if ordered {
            self.commit_ahead(positions.clone())
        } else {
            // Sent behind the unanswered commit, never before it: a late answer to that
            // one must not undo the rewound position.
            self.ledger.request(positions.clone());
            Some(
                "the rewound offset is queued behind an earlier commit that is still \
                 unanswered; it is committed once that one is answered (until then a \
                 restart would read from the offset committed before)"
                    .to_owned(),
            )
        };
        if let Some(why) = pending {
            tracing::warn!(?positions, pending = %why, "live rewind: rewound offset not committed yet");
            for result in results.iter_mut() {
                if positions
                    .iter()
                    .any(|p| p.assignment.partition == result.partition)
                {
                    result.pending = Some(why.clone());
                }
            }
        }
    }

    /// Moves `partition`'s fetch position to `offset`: a seek, and if that fails (librdkafka
    /// stopped fetching the partition, or the seek timed out), a restart of its fetching at the
    /// offset. A partition librdkafka stopped at an offset reset (`stopped`) cannot be sought and
    /// is restarted at once. The error, if neither worked.
    fn reposition(&mut self, partition: i32, offset: i64, stopped: bool) -> Result<(), String> {
        if self.fail_next_rewind {
            self.fail_next_rewind = false;
            return Err(format!(
                "{TEST_REWIND_FAIL}=once: the seek and the restart fail on purpose"
            ));
        }
        if !stopped {
            match self
                .consumer
                .seek(&self.topic, partition, Offset::Offset(offset), SEEK_TIMEOUT)
            {
                Ok(()) => return Ok(()),
                Err(error) => tracing::warn!(
                    partition,
                    offset,
                    error = %error,
                    "live rewind: seek failed; restarting the partition's fetching there instead"
                ),
            }
        }
        self.restart_fetch(partition, Offset::Offset(offset))
    }

    /// Commits `positions` now, ahead of anything queued, and waits for the answer; why they
    /// are not committed yet, if they are not (a failed commit is queued to be sent again).
    fn commit_ahead(&mut self, positions: Vec<CommitPosition>) -> Option<String> {
        if !self.send_final(positions.clone()) {
            self.ledger.request(positions);
            return Some(
                "the commit of the rewound offset could not be sent; it is sent again with the \
                 next commit"
                    .to_owned(),
            );
        }
        match self.collect_commit_answers(FINAL_COMMIT_TIMEOUT) {
            None => Some(
                "the commit of the rewound offset is not answered yet (sent; the partition's \
                 committed offset shows when it is)"
                    .to_owned(),
            ),
            Some(None) => None,
            Some(Some(error)) => {
                self.ledger.request(positions);
                Some(format!(
                    "the commit of the rewound offset failed ({error}); it is sent again with the \
                     next commit"
                ))
            }
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

/// What draining a live rewind's partitions left (step 1).
struct Drained {
    /// The drained partitions' readers.
    readers: BTreeMap<i32, Reader>,
    /// Per partition, where its drained actor says reading must resume.
    resumes: BTreeMap<i32, Option<i64>>,
    /// Whether the commit in flight was answered (a rewound position may be sent ahead).
    ordered: bool,
}

/// A drained partition on its way to a new actor (step 2's result): where it reads, and
/// whether its fetch position could be moved there.
struct Restarting {
    reader: Reader,
    plan: Restart,
    positioned: Result<(), String>,
}

/// Where a drained partition resumes: the first offset its actor did not resolve; or, fed
/// nothing in its assignment, the first offset handed to it; or, held (a failed restart, say),
/// where it is held, not what the consumer may have fetched since.
fn resume_of(resumes: &BTreeMap<i32, Option<i64>>, partition: i32, reader: &Reader) -> Option<i64> {
    resumes
        .get(&partition)
        .copied()
        .flatten()
        .or(reader.first)
        .or(reader.held.as_ref().and_then(|held| held.offset))
}
