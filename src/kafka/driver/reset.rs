//! An offset out of range, carried out by the driver thread (what to do is decided in
//! [`crate::domain::offset_reset`]).
//!
//! The consumer runs with `auto.offset.reset=error`, so librdkafka never moves a position in
//! silence: it puts an `_AUTO_OFFSET_RESET` error on the partition's queue and stops fetching
//! the partition (a seek cannot start it again; only an assignment can). Two cases arrive so:
//! - a partition the group never committed (no offset named, "no previously committed offset
//!   available"): it starts at its earliest offset, as `auto.offset.reset=earliest` did, with
//!   nothing recorded, since nothing was skipped;
//! - a position librdkafka fetched and the broker answered `OFFSET_OUT_OF_RANGE` for (the
//!   offset named): the records between it and the log's start are gone. The partition is held
//!   at once (nothing after the position reaches its actor, so nothing past it is committed),
//!   the gap is handed to the supervisor to be recorded, and only once it is in the database
//!   does the partition read on from the log's start (`--offset-reset-policy continue`); with
//!   `hold` it stays held, in plain sight, until an operator's live rewind.
//!
//! The partition is started again by taking it out of the consumer's assignment and putting it
//! back at the offset ([`Driver::restart_fetch`]): a local change, the group is not told.

use rdkafka::consumer::Consumer;

use rdkafka::{Offset, TopicPartitionList};

use super::Driver;
use super::position::PositionTrust;
use crate::actors::messages::driver::OffsetResetFound;
use crate::actors::messages::driver::{FetchTrouble, Fetched};
use crate::domain::HeldCause;
use crate::domain::offset_reset::{OffsetReset, ResetPlan, ResetPolicy, plan};
use crate::domain::{Assignment, Held};
use crate::kafka::queue::QueueError;
use crate::kafka::timeouts::WATERMARKS_TIMEOUT;

/// A restart of a partition's fetching, carried out at the next turn of the driver's loop (see
/// [`Driver::run_deferred`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Deferred {
    /// Start fetching `assignment`'s partition at `offset`; if that fails, hold it at `hold_at`.
    Start {
        assignment: Assignment,
        offset: Offset,
        hold_at: Option<i64>,
    },
    /// The gap at `from` is recorded: read on from `at`.
    Resume {
        assignment: Assignment,
        from: i64,
        at: i64,
    },
}

/// How librdkafka names the start of a partition the group never committed (its
/// `rd_kafka_offset_reset` reason, followed by the error's text).
const NEVER_COMMITTED: &str = "no previously committed offset";

impl Driver {
    pub(super) fn offset_out_of_range(&mut self, assignment: Assignment, error: QueueError) {
        let partition = assignment.partition;
        let policy = self.settings.reset_policy;
        let Some(reader) = self.reader_of(assignment) else {
            return;
        };
        if reader.held.is_some() {
            return;
        }
        let Some(from) = error.offset else {
            if error.text.starts_with(NEVER_COMMITTED) {
                tracing::info!(
                    partition,
                    "the group has no committed offset for the partition: reading it from its \
                     earliest offset"
                );
                self.deferred.push(Deferred::Start {
                    assignment,
                    offset: Offset::Beginning,
                    hold_at: None,
                });
                return;
            }
            // An offset reset librdkafka names no position for (a log truncation it detected):
            // held where the assignment is, with librdkafka's words.
            let at = reader.accounted.map(|last| last + 1);
            self.hold_stopped(assignment, at, error.text);
            return;
        };
        let read_again = reader.read_again == Some(from);
        let log = match self
            .consumer
            .fetch_watermarks(&self.topic, partition, WATERMARKS_TIMEOUT)
        {
            Ok(bounds) => Some(bounds),
            Err(error) => {
                tracing::warn!(partition, error = %error, "the partition's log bounds are not known");
                None
            }
        };
        match plan(from, log, policy, read_again) {
            ResetPlan::ReadAgain => {
                tracing::warn!(
                    partition,
                    from,
                    ?log,
                    error = %error.text,
                    "offset out of range, but it is in the partition's log: reading it again"
                );
                if let Some(reader) = self.reader_of(assignment) {
                    reader.read_again = Some(from);
                }
                self.deferred.push(Deferred::Start {
                    assignment,
                    offset: Offset::Offset(from),
                    hold_at: Some(from),
                });
            }
            decided => {
                let (log_start, log_end) = log.map_or((None, None), |(s, e)| (Some(s), Some(e)));
                let (to_offset, applied) = match decided {
                    ResetPlan::Continue { at } => (Some(at), ResetPolicy::Continue),
                    _ => (None, ResetPolicy::Hold),
                };
                let reason = match (decided, log) {
                    (_, None) => format!(
                        "{}; the partition's log bounds could not be read, so it is held",
                        error.text
                    ),
                    (_, Some((_, end))) if from > end => format!(
                        "{}; the log ends at {end}, before the position: it was truncated or \
                         made again, so it is held whatever the policy",
                        error.text
                    ),
                    _ => error.text.clone(),
                };
                let detail = match to_offset {
                    Some(at) => format!(
                        "{reason}; reading goes on from offset {at} once the gap is recorded"
                    ),
                    None => reason.clone(),
                };
                self.hold(
                    assignment,
                    Held {
                        offset: Some(from),
                        cause: HeldCause::OffsetOutOfRange { log_start, log_end },
                        detail,
                        since: chrono::Utc::now(),
                    },
                );
                self.ports.resets.do_send(OffsetResetFound {
                    assignment,
                    reset: OffsetReset {
                        topic: self.topic.clone(),
                        partition,
                        from_offset: from,
                        to_offset,
                        log_start,
                        log_end,
                        policy: applied,
                        reason,
                    },
                });
            }
        }
    }

    /// Carries out the restarts noted since the last turn of the loop, right after the main
    /// queue was served: taking a partition out of the assignment and putting it back while a
    /// rebalance waits in the main queue would be taken by librdkafka for the application's
    /// answer to that rebalance.
    pub(super) fn run_deferred(&mut self) {
        for deferred in std::mem::take(&mut self.deferred) {
            match deferred {
                Deferred::Start {
                    assignment,
                    offset,
                    hold_at,
                } => {
                    if self
                        .reader_of(assignment)
                        .is_none_or(|reader| reader.held.is_some())
                    {
                        continue;
                    }
                    if let Err(why) = self.restart_fetch(assignment.partition, offset) {
                        self.hold_stopped(
                            assignment,
                            hold_at,
                            format!("could not start fetching the partition at {offset:?}: {why}"),
                        );
                    }
                }
                Deferred::Resume {
                    assignment,
                    from,
                    at,
                } => self.resume_after_reset(assignment, from, at),
            }
        }
    }

    /// The gap at `from` is recorded: `assignment`'s partition reads on from `at`, and its
    /// watermark steps over the gap.
    fn resume_after_reset(&mut self, assignment: Assignment, from: i64, at: i64) {
        let partition = assignment.partition;
        let held_here = self.reader_of(assignment).is_some_and(|reader| {
            reader.held.as_ref().is_some_and(|held| {
                held.offset == Some(from)
                    && matches!(held.cause, HeldCause::OffsetOutOfRange { .. })
            })
        });
        if !held_here {
            return;
        }
        if let Err(why) = self.restart_fetch(partition, Offset::Offset(at)) {
            if let Some(reader) = self.reader_of(assignment) {
                reader.held = None;
            }
            self.hold_stopped(
                assignment,
                Some(from),
                format!("the gap is recorded, but reading on from offset {at} failed: {why}"),
            );
            return;
        }
        let Some(reader) = self.reader_of(assignment) else {
            return;
        };
        tracing::warn!(
            partition,
            from,
            at,
            "offset reset recorded: reading on from the log's start"
        );
        reader.held = None;
        reader.failing = false;
        reader.trust = PositionTrust::Current;
        reader.unchecked = true;
        reader.sink.do_send(Fetched::Skipped {
            after: reader.accounted,
            position: at,
        });
        reader.first.get_or_insert(at);
        reader.accounted = Some(at - 1);
        self.ports.fetch.do_send(FetchTrouble {
            assignment,
            trouble: None,
        });
    }

    /// Holds `assignment` for a reason librdkafka or the service names.
    fn hold_stopped(&mut self, assignment: Assignment, offset: Option<i64>, detail: String) {
        self.hold(
            assignment,
            Held {
                offset,
                cause: HeldCause::Stopped,
                detail,
                since: chrono::Utc::now(),
            },
        );
    }

    /// Starts fetching an assigned partition again at `offset`, whatever state librdkafka left
    /// it in: it is taken out of the consumer's assignment and put back at the offset (a local
    /// change: the group is not told, the partition's queue and its forwarding stay).
    ///
    /// librdkafka takes an incremental (un)assign made while a rebalance waits for the
    /// application's answer for that answer, so this runs right after the main queue was served
    /// ([`Driver::run_deferred`]), or in a live rewind (which serves no rebalance until it is
    /// done: only a rebalance librdkafka starts during the rewind's few calls can meet it).
    pub(super) fn restart_fetch(&mut self, partition: i32, offset: Offset) -> Result<(), String> {
        // What was read after the old position is outdated (a reader being rewound is out of
        // `readers`: the rewind drops its carried messages itself).
        if let Some(reader) = self.readers.get_mut(&partition) {
            reader.queue.discard_carried();
        }
        if !matches!(
            self.consumer.rebalance_protocol(),
            rdkafka::consumer::RebalanceProtocol::Cooperative
        ) {
            return Err(
                "the eager assignment strategy cannot restart one partition (only the whole \
                 assignment); use cooperative-sticky, the default, or restart the service"
                    .to_owned(),
            );
        }
        let mut list = TopicPartitionList::new();
        list.add_partition(&self.topic, partition);
        self.consumer.incremental_unassign(&list).map_err(|error| {
            format!("taking the partition out of the assignment failed: {error}")
        })?;
        list.set_all_offsets(offset)
            .map_err(|error| format!("{error}"))?;
        // Once more if the first attempt fails: a partition left out of the assignment would
        // make the revoke of the whole list fail at the next rebalance.
        self.consumer
            .incremental_assign(&list)
            .or_else(|_| self.consumer.incremental_assign(&list))
            .map_err(|error| {
                format!("putting the partition back into the assignment failed: {error}")
            })
    }
}
