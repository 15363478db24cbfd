//! Offset commits, strictly one after another.
//!
//! [`CommitLedger`] (pure) decides what to commit: the newest requested position of each
//! partition of the assignment it was requested for, never a position of an earlier assignment
//! of that partition, and nothing while the previous commit has no result yet. One commit in
//! flight at a time is what keeps the group's offsets from moving backwards: a commit reaches
//! the broker only after the one before it was answered (librdkafka retries inside a commit, so
//! two commits in flight could land in either order), and a revoked partition's final commit
//! waits for the commit in flight before it is sent.
//!
//! [`CommitQueue`] sends a commit without blocking and collects its result. librdkafka reports
//! nothing for a plain asynchronous commit made by the application (rust-rdkafka installs no
//! `offset_commit_cb`), so commits go through `rd_kafka_commit_queue` with a queue of our own,
//! which the driver thread polls like its other queues.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::ptr;
use std::time::{Duration, Instant};

use rdkafka::bindings as rdsys;
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};

use crate::domain::{Assignment, CommitPosition};

/// The positions of one commit and when it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    pub positions: Vec<CommitPosition>,
    pub since: Instant,
}

/// What to commit next (pure; see the module docs).
#[derive(Debug, Default)]
pub struct CommitLedger {
    /// The newest requested position per partition, not yet sent.
    pending: BTreeMap<i32, CommitPosition>,
    in_flight: Option<InFlight>,
    /// The commit in flight was reported overdue already.
    overdue_reported: bool,
}

impl CommitLedger {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records requested positions; per partition the newest assignment wins, and within one
    /// assignment the highest offset.
    pub fn request(&mut self, positions: impl IntoIterator<Item = CommitPosition>) {
        for position in positions {
            let partition = position.assignment.partition;
            match self.pending.get(&partition) {
                Some(queued)
                    if (queued.assignment.generation, queued.offset)
                        >= (position.assignment.generation, position.offset) => {}
                _ => {
                    self.pending.insert(partition, position);
                }
            }
        }
    }

    /// Drops whatever is queued for these partitions (they were revoked).
    pub fn forget(&mut self, partitions: &[i32]) {
        for partition in partitions {
            self.pending.remove(partition);
        }
    }

    /// The next commit to send, if none is in flight: the queued positions whose assignment is
    /// still held. Positions of assignments no longer held are dropped.
    pub fn next(&mut self, held: impl Fn(Assignment) -> bool, now: Instant) -> Option<&InFlight> {
        if self.in_flight.is_some() || self.pending.is_empty() {
            return None;
        }
        let positions: Vec<CommitPosition> = std::mem::take(&mut self.pending)
            .into_values()
            .filter(|position| held(position.assignment))
            .collect();
        if positions.is_empty() {
            return None;
        }
        self.in_flight = Some(InFlight {
            positions,
            since: now,
        });
        self.in_flight.as_ref()
    }

    /// Sends `positions` next, ahead of anything queued for the same partitions (a revoked
    /// partition's final position). Refused while a commit is in flight.
    pub fn send_now(&mut self, positions: Vec<CommitPosition>, now: Instant) -> Option<&InFlight> {
        if self.in_flight.is_some() || positions.is_empty() {
            return None;
        }
        for position in &positions {
            self.pending.remove(&position.assignment.partition);
        }
        self.in_flight = Some(InFlight {
            positions,
            since: now,
        });
        self.in_flight.as_ref()
    }

    /// The commit in flight got its answer (or could not be sent): it is no longer in flight.
    pub fn complete(&mut self) -> Option<InFlight> {
        self.overdue_reported = false;
        self.in_flight.take()
    }

    /// The commit in flight, once: the first time it is asked for after it has waited longer
    /// than `after` for its answer (a warning per commit, not per look).
    pub fn overdue(&mut self, after: Duration, now: Instant) -> Option<&InFlight> {
        let in_flight = self.in_flight.as_ref()?;
        if self.overdue_reported || now.saturating_duration_since(in_flight.since) <= after {
            return None;
        }
        self.overdue_reported = true;
        Some(in_flight)
    }

    pub fn in_flight(&self) -> Option<&InFlight> {
        self.in_flight.as_ref()
    }
}

/// The answer to one commit: per partition, the error if it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitAnswer {
    /// An error of the whole request (no coordinator, the member left the group...).
    pub error: Option<String>,
    /// Per-partition errors, by partition.
    pub failed: BTreeMap<i32, String>,
}

impl CommitAnswer {
    /// The result of `position` under this answer.
    pub fn result_of(&self, position: &CommitPosition) -> Option<String> {
        self.failed
            .get(&position.assignment.partition)
            .or(self.error.as_ref())
            .cloned()
    }
}

/// librdkafka's side of the commits: a queue of our own that receives commit results.
pub struct CommitQueue {
    queue: *mut rdsys::rd_kafka_queue_t,
    client: *mut rdsys::rd_kafka_t,
    /// Kept alive while librdkafka may call it (until the queue is dropped).
    _wake: Option<Box<Box<dyn Fn() + Send + Sync>>>,
}

// SAFETY: librdkafka queues are thread-safe; the raw pointers are only used through its API.
unsafe impl Send for CommitQueue {}

impl CommitQueue {
    /// A result queue on `consumer`; `wake` is called whenever a result arrives in an empty
    /// queue. The queue must be dropped before the consumer.
    pub fn new<C: ConsumerContext>(
        consumer: &BaseConsumer<C>,
        wake: impl Fn() + Send + Sync + 'static,
    ) -> CommitQueue {
        use rdkafka::consumer::Consumer;

        unsafe extern "C" fn trampoline(_: *mut rdsys::rd_kafka_t, opaque: *mut std::ffi::c_void) {
            // SAFETY: `opaque` is the boxed closure below, alive until the queue is dropped.
            let wake = unsafe { &*(opaque as *const Box<dyn Fn() + Send + Sync>) };
            wake();
        }

        let client = consumer.client().native_ptr();
        // SAFETY: `client` is a live consumer handle; the queue is destroyed in Drop.
        let queue = unsafe { rdsys::rd_kafka_queue_new(client) };
        let wake: Box<Box<dyn Fn() + Send + Sync>> = Box::new(Box::new(wake));
        // SAFETY: the closure outlives the registration: Drop disables it before freeing.
        unsafe {
            rdsys::rd_kafka_queue_cb_event_enable(
                queue,
                Some(trampoline),
                &*wake as *const Box<dyn Fn() + Send + Sync> as *mut std::ffi::c_void,
            )
        };
        CommitQueue {
            queue,
            client,
            _wake: Some(wake),
        }
    }

    /// Sends a commit of `positions` on `topic`; its answer arrives through [`Self::poll`].
    pub fn send(&self, topic: &str, positions: &[CommitPosition]) -> Result<(), String> {
        let mut tpl = TopicPartitionList::new();
        for position in positions {
            tpl.add_partition_offset(
                topic,
                position.assignment.partition,
                Offset::Offset(position.offset),
            )
            .map_err(|e| e.to_string())?;
        }
        // SAFETY: the list is copied by librdkafka before this returns; the queue is alive.
        let err = unsafe {
            rdsys::rd_kafka_commit_queue(self.client, tpl.ptr(), self.queue, None, ptr::null_mut())
        };
        if err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            Ok(())
        } else {
            Err(error_name(err))
        }
    }

    /// The next commit answer, waiting at most `timeout`.
    pub fn poll(&self, timeout: Duration) -> Option<CommitAnswer> {
        let deadline = Instant::now() + timeout;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let millis = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
            // SAFETY: the queue is alive; the event is destroyed below.
            let event = unsafe { rdsys::rd_kafka_queue_poll(self.queue, millis) };
            if event.is_null() {
                return None;
            }
            // SAFETY: `event` is a live event until destroyed.
            let answer = unsafe {
                let answer = (rdsys::rd_kafka_event_type(event)
                    == rdsys::RD_KAFKA_EVENT_OFFSET_COMMIT)
                    .then(|| read_answer(event));
                rdsys::rd_kafka_event_destroy(event);
                answer
            };
            if answer.is_some() || Instant::now() >= deadline {
                return answer;
            }
        }
    }
}

/// Reads an offset-commit event's error and per-partition errors.
///
/// # Safety
/// `event` must be a live `RD_KAFKA_EVENT_OFFSET_COMMIT` event.
unsafe fn read_answer(event: *mut rdsys::rd_kafka_event_t) -> CommitAnswer {
    let err = unsafe { rdsys::rd_kafka_event_error(event) };
    let error =
        (err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR).then(|| error_name(err));
    let mut failed = BTreeMap::new();
    let list = unsafe { rdsys::rd_kafka_event_topic_partition_list(event) };
    if !list.is_null() {
        let list = unsafe { &*list };
        for i in 0..usize::try_from(list.cnt).unwrap_or(0) {
            let element = unsafe { &*list.elems.add(i) };
            if element.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                failed.insert(element.partition, error_name(element.err));
            }
        }
    }
    CommitAnswer { error, failed }
}

fn error_name(err: rdsys::rd_kafka_resp_err_t) -> String {
    // SAFETY: rd_kafka_err2str returns a static string for every code.
    unsafe { CStr::from_ptr(rdsys::rd_kafka_err2str(err)) }
        .to_string_lossy()
        .into_owned()
}

impl Drop for CommitQueue {
    fn drop(&mut self) {
        // SAFETY: disable the callback before the closure and the queue go away.
        unsafe {
            rdsys::rd_kafka_queue_cb_event_enable(self.queue, None, ptr::null_mut());
            rdsys::rd_kafka_queue_destroy(self.queue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(partition: i32, generation: u64, offset: i64) -> CommitPosition {
        CommitPosition {
            assignment: Assignment {
                partition,
                generation,
            },
            offset,
        }
    }

    #[test]
    fn the_newest_position_of_a_partition_is_committed_once() {
        let mut ledger = CommitLedger::new();
        let now = Instant::now();
        ledger.request([at(0, 1, 10), at(1, 1, 5)]);
        ledger.request([at(0, 1, 30), at(0, 1, 20)]);
        let sent = ledger
            .next(|_| true, now)
            .expect("a commit")
            .positions
            .clone();
        assert_eq!(sent, vec![at(0, 1, 30), at(1, 1, 5)]);
        ledger.complete();
        assert!(
            ledger.next(|_| true, now).is_none(),
            "nothing new to commit"
        );
    }

    #[test]
    fn a_commit_unanswered_for_too_long_is_reported_once_and_the_next_one_again() {
        let mut ledger = CommitLedger::new();
        let t0 = Instant::now();
        let slow = Duration::from_secs(30);
        ledger.request([at(0, 1, 10)]);
        ledger.next(|_| true, t0).unwrap();
        assert!(ledger.overdue(slow, t0 + slow).is_none(), "not overdue yet");
        let late = t0 + slow + Duration::from_secs(1);
        assert_eq!(
            ledger.overdue(slow, late).map(|c| c.positions.clone()),
            Some(vec![at(0, 1, 10)])
        );
        for seconds in 2..100 {
            let later = late + Duration::from_secs(seconds);
            assert!(ledger.overdue(slow, later).is_none(), "reported once");
        }
        ledger.complete();
        ledger.request([at(0, 1, 20)]);
        ledger.next(|_| true, late).unwrap();
        assert!(
            ledger.overdue(slow, late + slow * 2).is_some(),
            "the next commit is a commit of its own"
        );
    }

    #[test]
    fn nothing_is_sent_while_a_commit_is_in_flight() {
        let mut ledger = CommitLedger::new();
        let now = Instant::now();
        ledger.request([at(0, 1, 10)]);
        assert!(ledger.next(|_| true, now).is_some());
        ledger.request([at(0, 1, 20)]);
        assert!(ledger.next(|_| true, now).is_none(), "one in flight");
        assert!(
            ledger.send_now(vec![at(0, 1, 25)], now).is_none(),
            "a final commit waits too"
        );
        assert_eq!(ledger.complete().unwrap().positions, vec![at(0, 1, 10)]);
        assert_eq!(
            ledger.next(|_| true, now).unwrap().positions,
            vec![at(0, 1, 20)]
        );
    }

    #[test]
    fn a_commit_requested_before_a_revoke_never_lands_after_its_final_commit() {
        let mut ledger = CommitLedger::new();
        let now = Instant::now();
        // The checkpoint asked for 100 while 80 was in flight.
        ledger.request([at(3, 1, 80)]);
        ledger.next(|_| true, now);
        ledger.request([at(3, 1, 100)]);
        // The revoke: the final position 120 goes out once 80 is answered, 100 never does.
        ledger.forget(&[3]);
        ledger.complete();
        assert_eq!(
            ledger.send_now(vec![at(3, 1, 120)], now).unwrap().positions,
            vec![at(3, 1, 120)]
        );
        ledger.complete();
        // The partition comes back (generation 2); a stale request of generation 1 arrives.
        ledger.request([at(3, 1, 90)]);
        let held = |a: Assignment| a.generation == 2;
        assert!(
            ledger.next(held, now).is_none(),
            "the stale position is dropped"
        );
        ledger.request([at(3, 2, 130), at(3, 1, 140)]);
        assert_eq!(
            ledger.next(held, now).unwrap().positions,
            vec![at(3, 2, 130)],
            "a newer assignment's position wins over an older one's"
        );
    }

    #[test]
    fn a_final_commit_goes_ahead_of_what_was_queued_for_its_partition() {
        let mut ledger = CommitLedger::new();
        let now = Instant::now();
        ledger.request([at(0, 1, 10), at(1, 1, 10)]);
        ledger.send_now(vec![at(0, 1, 15)], now);
        ledger.complete();
        assert_eq!(
            ledger.next(|_| true, now).unwrap().positions,
            vec![at(1, 1, 10)]
        );
    }

    #[test]
    fn a_partition_error_wins_over_the_request_error() {
        let answer = CommitAnswer {
            error: Some("request".into()),
            failed: BTreeMap::from([(1, "partition".into())]),
        };
        assert_eq!(answer.result_of(&at(1, 1, 5)).as_deref(), Some("partition"));
        assert_eq!(answer.result_of(&at(0, 1, 5)).as_deref(), Some("request"));
    }
}
