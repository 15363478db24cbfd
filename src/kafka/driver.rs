//! The driver thread: the only thread that calls librdkafka's consumer.
//!
//! Each assigned partition is read from its own librdkafka queue (split off before the
//! partition is assigned) and handed to its actor only as far as the actor asked for
//! ([`KafkaRequest::Demand`]). A partition whose actor asks for nothing (its backlog of Unknown
//! records is at its bound, or an operator paused it) is simply not read: its queue fills up
//! to `queued.min.messages` / `queued.max.messages.kbytes` and librdkafka stops fetching it by
//! itself. There is no application-side pause, buffer or shared counter to get wrong.
//!
//! The same loop serves the main queue (rebalances, statistics, errors), carries out the
//! rebalances it noted (see [`super::context`]), sends offset commits one at a time (see
//! [`super::commits`]) and steps the watermark over offsets without records. It sleeps on one
//! channel, woken by the actors' requests and by librdkafka whenever one of its queues
//! becomes non-empty. It also carries out live rewinds ([`rewind`]): a revoke and re-assign
//! of the same partitions without a rebalance.

mod position;
mod reset;
mod rewind;
mod trouble;

pub use rewind::TEST_REWIND_FAIL;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use actix::Recipient;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::commits::{CommitLedger, CommitQueue};
use super::context::{KafkaContext, Rebalance, acknowledge, member_id, pending_events};
use crate::actors::messages::driver::{
    CommitCompleted, DrainForRewind, DriverStopped, FetchTrouble, Fetched, GroupJoined, KafkaLink,
    KafkaRequest, OffsetResetFound, OffsetResetResumed, PartitionsAssigned, PartitionsRestarted,
    PartitionsRevoked, PartitionsRewound,
};
use crate::domain::Held;
use crate::domain::connection::is_connection_error;
use crate::domain::offset_reset::ResetPolicy;
use crate::domain::{Assignment, CommitPosition};
use crate::kafka::timeouts::{FINAL_COMMIT_TIMEOUT, LEAVE_TIMEOUT, START_OFFSETS_TIMEOUT};
use position::{PositionTrust, believable, passed_offsets_without_records};

type Consumer_ = BaseConsumer<KafkaContext>;
type PartitionQueue = super::queue::PartitionQueue<KafkaContext>;

/// How long the loop sleeps when nothing wakes it (a safety net: librdkafka's wake-ups and
/// the actors' requests normally end the sleep at once).
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// The most main-queue events served in one turn of the loop.
const MAIN_QUEUE_EVENTS_PER_TURN: usize = 10_000;
/// The least time between two looks at the consumer's positions.
const POSITION_CHECK_EVERY: Duration = Duration::from_millis(20);
/// A commit without an answer for this long is reported in the log.
const SLOW_COMMIT: Duration = Duration::from_secs(30);
/// How long the loop sleeps while leaving: nothing wakes it when librdkafka leaves.
const LEAVING_WAIT: Duration = Duration::from_millis(10);

/// Where the driver thread reports to.
pub struct DriverPorts {
    pub assigned: Recipient<PartitionsAssigned>,
    pub revoked: Recipient<PartitionsRevoked>,
    pub commits: Recipient<CommitCompleted>,
    pub joined: Recipient<GroupJoined>,
    pub stopped: Recipient<DriverStopped>,
    /// What reading a partition ran into, for its status.
    pub fetch: Recipient<FetchTrouble>,
    /// A live rewind's drain, restart and result.
    pub rewinding: Recipient<DrainForRewind>,
    pub restarted: Recipient<PartitionsRestarted>,
    pub rewound: Recipient<PartitionsRewound>,
    /// Positions found out of their partition's log, to be recorded, and held gaps passed.
    pub resets: Recipient<OffsetResetFound>,
    pub resets_resumed: Recipient<OffsetResetResumed>,
}

/// How the driver thread behaves.
#[derive(Debug, Clone, Copy)]
pub struct DriverSettings {
    /// Records a new partition actor may be sent before it asks (its window).
    pub initial_credit: usize,
    /// How long leaving the group may take before the consumer is closed anyway.
    pub shutdown_deadline: Duration,
    /// What a partition whose position left its log does (`--offset-reset-policy`).
    pub reset_policy: ResetPolicy,
    /// A static member (`group.instance.id`): on shutdown it gives its partitions up itself
    /// and closes without leaving the group, so that the same member restarted within the
    /// session timeout gets them back without a rebalance.
    pub static_member: bool,
}

/// Starts the driver thread. It owns the consumer and closes it on its way out, after the
/// last partition was revoked (or the shutdown deadline passed).
pub fn spawn_driver(
    consumer: Consumer_,
    requests: Receiver<KafkaRequest>,
    link: KafkaLink,
    ports: DriverPorts,
    settings: DriverSettings,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("kafka-driver".into())
        .spawn(move || {
            let stopped = ports.stopped.clone();
            let mut consumer = consumer;
            let main_link = link.clone();
            consumer.set_nonempty_callback(move || {
                main_link.send(KafkaRequest::Wake);
            });
            let consumer = Arc::new(consumer);
            let commit_link = link.clone();
            let commit_queue = CommitQueue::new(&consumer, move || {
                commit_link.send(KafkaRequest::Wake);
            });
            let mut driver = Driver {
                topic: consumer.context().topic.clone(),
                consumer: consumer.clone(),
                requests,
                link,
                ports,
                settings,
                readers: BTreeMap::new(),
                next_generation: 1,
                ledger: CommitLedger::new(),
                commit_queue,
                closing_since: None,
                drained_since: None,
                positions_checked: Instant::now(),
                panic_on_first_record: panic_on_first_record(),
                fail_next_rewind: rewind::fail_first_rewind(),
                deferred: Vec::new(),
                fatal: None,
            };
            // A panic must not leave the process waiting for a driver that is gone: it is
            // reported at once (the service then exits with an error), and the consumer is
            // still closed as on a normal stop, so the group hands the partitions on at once
            // instead of after the session timeout.
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| driver.run()));
            let panicked = ran.err().map(|panic| panic_text(panic.as_ref()));
            if let Some(text) = &panicked {
                tracing::error!(error = %text, "the kafka driver thread panicked; closing the consumer");
                stopped.do_send(DriverStopped {
                    error: Some(format!("the kafka driver thread panicked: {text}")),
                });
            }
            // A fatal error: reported before the close, which may not get far.
            let fatal = driver.fatal.take();
            if let Some(error) = &fatal {
                stopped.do_send(DriverStopped {
                    error: Some(error.clone()),
                });
            }
            let failed = panicked.is_some() || fatal.is_some();
            driver.close();
            drop(driver);
            // The last reference: closing the consumer blocks, which is fine on this thread.
            drop(consumer);
            if !failed {
                stopped.do_send(DriverStopped { error: None });
            }
        })
}

/// The message a panic was raised with.
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// A fault for the tests of the binary, in debug builds only: with
/// `HISTORY_TEST_DRIVER_PANIC=first-record` in the environment when the service starts, the
/// driver thread panics as it is about to hand the first record to a partition actor. Read
/// once, when the driver thread starts; release builds ignore it.
pub const TEST_DRIVER_PANIC: &str = "HISTORY_TEST_DRIVER_PANIC";

/// A fault for the tests of the binary, in debug builds only: with
/// `HISTORY_TEST_KAFKA_FATAL=fenced` the driver has librdkafka raise the fatal error a fenced
/// static member gets (`rd_kafka_test_fatal_error`, librdkafka's own test hook) as it starts.
pub const TEST_KAFKA_FATAL: &str = "HISTORY_TEST_KAFKA_FATAL";

fn test_fatal_error(consumer: &Consumer_) {
    if cfg!(debug_assertions) && std::env::var(TEST_KAFKA_FATAL).is_ok_and(|v| v == "fenced") {
        let reason = std::ffi::CString::new("test: fenced by another instance").expect("no NUL");
        // SAFETY: a valid client handle and a NUL-terminated string that outlives the call.
        unsafe {
            rdkafka::bindings::rd_kafka_test_fatal_error(
                consumer.client().native_ptr(),
                rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID,
                reason.as_ptr(),
            );
        }
    }
}

fn panic_on_first_record() -> bool {
    cfg!(debug_assertions)
        && std::env::var(TEST_DRIVER_PANIC).is_ok_and(|value| value == "first-record")
}

/// One assigned partition, as the driver reads it.
struct Reader {
    assignment: Assignment,
    queue: PartitionQueue,
    sink: Recipient<Fetched>,
    /// Records the actor asked for and has not been sent yet.
    demand: usize,
    /// The highest offset the watermark will have seen once the actor reported everything
    /// sent so far: the last record sent, or the end of the last skip.
    accounted: Option<i64>,
    /// The first offset handed to the actor in this assignment (a record's, or where a skip
    /// ended): where a live rewind resumes a partition that resolved nothing yet.
    first: Option<i64>,
    /// Whether the consumer's position can be believed before any record was delivered (see
    /// [`position`]).
    trust: PositionTrust,
    /// The queue was read since the position was last looked at.
    unchecked: bool,
    /// Why nothing more of this assignment is read (see [`trouble`]).
    held: Option<Held>,
    /// A fetch failure was reported for its status and no record came since.
    failing: bool,
    /// A position librdkafka found out of range although it is in the log, read again once
    /// (see [`reset`]).
    read_again: Option<i64>,
}

impl Reader {
    /// A new assignment's reader: `demand` records may be sent before its actor asks, nothing
    /// was handed over yet, and its position is looked at before the first read.
    fn new(
        assignment: Assignment,
        queue: PartitionQueue,
        sink: Recipient<Fetched>,
        demand: usize,
        trust: PositionTrust,
    ) -> Reader {
        Reader {
            assignment,
            queue,
            sink,
            demand,
            accounted: None,
            first: None,
            trust,
            unchecked: true,
            held: None,
            failing: false,
            read_again: None,
        }
    }
}

struct Driver {
    topic: String,
    consumer: Arc<Consumer_>,
    requests: Receiver<KafkaRequest>,
    link: KafkaLink,
    ports: DriverPorts,
    settings: DriverSettings,
    readers: BTreeMap<i32, Reader>,
    next_generation: u64,
    ledger: CommitLedger,
    commit_queue: CommitQueue,
    closing_since: Option<Instant>,
    /// While closing: since when no partition is held any more.
    drained_since: Option<Instant>,
    positions_checked: Instant,
    /// See [`TEST_DRIVER_PANIC`].
    panic_on_first_record: bool,
    /// See [`TEST_REWIND_FAIL`].
    fail_next_rewind: bool,
    /// Restarts of partitions' fetching for the next turn of the loop (see [`reset`]).
    deferred: Vec<reset::Deferred>,
    /// librdkafka's fatal error, once it raised one: the consumer is unusable and the loop ends.
    fatal: Option<String>,
}

impl Driver {
    fn run(&mut self) {
        test_fatal_error(&self.consumer);
        loop {
            self.serve_main_queue();
            self.run_deferred();
            // A fatal error (a static member fenced by another process with its
            // group.instance.id, say) leaves a consumer that will never fetch or commit again:
            // stop, and the process exits with the error instead of idling unready for ever.
            if let Some((code, reason)) = self.consumer.client().fatal_error() {
                let error = format!("librdkafka raised a fatal error: {reason} ({code:?})");
                tracing::error!(error = %error, "the kafka consumer cannot go on; stopping");
                self.fatal = Some(error);
                return;
            }
            self.collect_commit_answers(Duration::ZERO);
            while let Ok(request) = self.requests.try_recv() {
                self.handle(request);
            }
            self.feed_partitions();
            self.check_positions();
            self.send_next_commit();
            if self.finished() {
                return;
            }
            // Restarts noted in this turn are carried out in the next, at once.
            let wait = if !self.deferred.is_empty() {
                Duration::ZERO
            } else if self.closing_since.is_some() {
                LEAVING_WAIT
            } else {
                IDLE_WAIT
            };
            match self.requests.recv_timeout(wait) {
                Ok(request) => self.handle(request),
                Err(RecvTimeoutError::Timeout) => {}
                // Every sender is gone: nobody is left to process records.
                Err(RecvTimeoutError::Disconnected) => self.begin_closing(),
            }
        }
    }

    fn handle(&mut self, request: KafkaRequest) {
        match request {
            KafkaRequest::Demand {
                assignment,
                records,
            } => {
                if let Some(reader) = self.reader_of(assignment) {
                    reader.demand += records;
                }
            }
            KafkaRequest::Commit(positions) => self.ledger.request(positions),
            KafkaRequest::Rewind { id, targets } => self.rewind(id, targets),
            KafkaRequest::ResumeAfterReset {
                assignment,
                from,
                at,
            } => self.deferred.push(reset::Deferred::Resume {
                assignment,
                from,
                at,
            }),
            KafkaRequest::Shutdown => self.begin_closing(),
            KafkaRequest::Wake => {}
        }
    }

    fn reader_of(&mut self, assignment: Assignment) -> Option<&mut Reader> {
        self.readers
            .get_mut(&assignment.partition)
            .filter(|r| r.assignment == assignment)
    }

    fn begin_closing(&mut self) {
        if self.closing_since.is_none() {
            self.closing_since = Some(Instant::now());
            if self.settings.static_member {
                // An unsubscribe would send a LeaveGroup naming the instance, and the
                // coordinator would hand its partitions to the others at once. Instead the
                // partitions are drained and their final positions committed here, and the
                // consumer is closed still subscribed: librdkafka sends no LeaveGroup for a
                // static member that terminates (KIP-345), and the coordinator keeps the
                // member (and its partitions) until session.timeout.ms.
                tracing::info!("stopping as a static member: the group keeps its partitions");
                let partitions: Vec<i32> = self.readers.keys().copied().collect();
                self.revoke(&partitions, false);
            } else {
                tracing::info!("leaving the group");
                // librdkafka revokes the assignment through the usual rebalance path.
                self.consumer.unsubscribe();
            }
        }
    }

    /// Whether the consumer may be closed: every partition was given up and librdkafka has
    /// left the group (or a deadline passed).
    ///
    /// librdkafka 2.12 (classic protocol, cooperative assignor) sends the LeaveGroup of an
    /// unsubscribe only once the incremental unassign it started is complete; a consumer
    /// closed before that takes the terminate path of `rd_kafka_cgrp_incr_unassign_done`,
    /// which never leaves. The member then stays in the group until the coordinator expires
    /// it (tansu 0.6 only does so when another member talks to it), so closing waits for
    /// librdkafka to clear the member id, which it does as it sends the LeaveGroup.
    fn finished(&mut self) -> bool {
        let Some(since) = self.closing_since else {
            return false;
        };
        if !self.readers.is_empty() {
            return since.elapsed() > self.settings.shutdown_deadline;
        }
        if self.settings.static_member {
            return true;
        }
        let drained_since = *self.drained_since.get_or_insert_with(Instant::now);
        if member_id(&self.consumer).is_none() {
            tracing::debug!(waited = ?drained_since.elapsed(), "group left");
            return true;
        }
        if drained_since.elapsed() > LEAVE_TIMEOUT {
            tracing::warn!(
                timeout = ?LEAVE_TIMEOUT,
                "librdkafka did not leave the group in time; closing anyway: the coordinator \
                 keeps the member until session.timeout.ms"
            );
            return true;
        }
        false
    }

    /// Polls the main queue until it is empty, carrying out every rebalance it delivers.
    fn serve_main_queue(&mut self) {
        // Bounded, so that an event the poll leaves in the queue cannot make this spin.
        for _ in 0..MAIN_QUEUE_EVENTS_PER_TURN {
            match self.consumer.poll(Duration::ZERO) {
                Some(Ok(message)) => {
                    // Every assigned partition has its own queue; this is a partition the
                    // group gave us that we did not split (should not happen): its records
                    // are left to the next owner.
                    tracing::warn!(
                        partition = message.partition(),
                        offset = message.offset(),
                        "record on the main queue ignored"
                    );
                }
                // A connection error already reached the context's error callback, with its
                // text, on its way here: it is reported once per change of the connection's
                // health there, not once per retry here.
                Some(Err(error)) if error.rdkafka_error_code().is_some_and(is_connection_error) => {
                    tracing::debug!(error = %error, "kafka connection error on the main queue");
                }
                Some(Err(error)) => {
                    self.consumer.context().metrics.observe_kafka_error();
                    tracing::warn!(error = %error, "kafka consumer error");
                }
                None => {
                    let rebalances = self.consumer.context().take_rebalances();
                    // `None` also follows an event served inside the poll (statistics, a log
                    // line): the queue wakes the loop only when it turns non-empty, so what
                    // is left must be served now, or it waits for the next wake-up, one event
                    // per wake-up (with librdkafka's debug logs on, a rebalance waited
                    // seconds behind them).
                    if rebalances.is_empty() && pending_events(&self.consumer) == 0 {
                        return;
                    }
                    for rebalance in rebalances {
                        self.carry_out(rebalance);
                    }
                }
            }
        }
    }

    fn partitions_of(&self, tpl: &TopicPartitionList) -> Vec<i32> {
        tpl.elements()
            .iter()
            .filter(|e| e.topic() == self.topic)
            .map(|e| e.partition())
            .collect()
    }

    fn carry_out(&mut self, rebalance: Rebalance) {
        match &rebalance {
            Rebalance::Assign(tpl) => {
                self.consumer.context().health.assigned();
                let partitions = self.partitions_of(tpl);
                self.assign(&partitions);
                let rebalance = Rebalance::Assign(self.with_start_offsets(tpl));
                acknowledge(&self.consumer, &rebalance);
                if let Some(member_id) = member_id(&self.consumer) {
                    self.ports.joined.do_send(GroupJoined { member_id });
                }
            }
            Rebalance::Revoke(tpl) => {
                let partitions = self.partitions_of(tpl);
                let lost = self.consumer.assignment_lost();
                self.revoke(&partitions, lost);
                acknowledge(&self.consumer, &rebalance);
            }
            Rebalance::Error(tpl, error) => {
                tracing::warn!(error, "rebalance failed; giving up the partitions");
                let partitions = self.partitions_of(tpl);
                self.revoke(&partitions, true);
                acknowledge(&self.consumer, &rebalance);
            }
        }
    }

    /// `tpl` with the earliest offset set for every partition of our topic the group never
    /// committed: with `auto.offset.reset=error`, librdkafka would otherwise stop it with an
    /// error (the driver then starts it at the earliest offset itself, see [`reset`]; with the
    /// eager protocol it cannot, so this is where such partitions start). When the committed
    /// offsets cannot be read, `tpl` as it is.
    fn with_start_offsets(&self, tpl: &TopicPartitionList) -> TopicPartitionList {
        let partitions = self.partitions_of(tpl);
        let out = tpl.clone();
        if partitions.is_empty() {
            return out;
        }
        let committed = match crate::kafka::committed_of(
            &self.consumer,
            &self.topic,
            &partitions,
            START_OFFSETS_TIMEOUT,
        ) {
            Ok(committed) => committed,
            Err(error) => {
                tracing::warn!(?partitions, error = %error, "committed offsets not known at assignment");
                return out;
            }
        };
        for (partition, offset) in committed {
            if offset.is_none()
                && let Some(mut element) = out.find_partition(&self.topic, partition)
                && matches!(element.offset(), Offset::Invalid | Offset::Stored)
            {
                let _ = element.set_offset(Offset::Beginning);
            }
        }
        out
    }

    /// Splits the partitions' queues and starts their actors, before librdkafka is told to
    /// fetch them, so that no record ever reaches the main queue.
    fn assign(&mut self, partitions: &[i32]) {
        if partitions.is_empty() {
            return;
        }
        tracing::info!(?partitions, "partitions assigned");
        let mut queues = BTreeMap::new();
        for &partition in partitions {
            let Some(mut queue) = PartitionQueue::split(&self.consumer, &self.topic, partition)
            else {
                tracing::error!(partition, "could not split the partition's queue");
                continue;
            };
            let link = self.link.clone();
            queue.set_nonempty_callback(move || {
                link.send(KafkaRequest::Wake);
            });
            let assignment = Assignment {
                partition,
                generation: self.next_generation,
            };
            self.next_generation += 1;
            queues.insert(partition, (assignment, queue));
        }
        // Before librdkafka fetches them: a valid position now is the previous assignment's.
        let positions = self.positions_of(partitions);
        let assignments = queues.values().map(|(a, _)| *a).collect();
        let sinks = futures::executor::block_on(
            self.ports.assigned.send(PartitionsAssigned { assignments }),
        )
        .unwrap_or_default();
        for (assignment, sink) in sinks {
            let Some((_, queue)) = queues.remove(&assignment.partition) else {
                continue;
            };
            let trust = PositionTrust::at_assignment(
                positions.get(&assignment.partition).copied().flatten(),
            );
            let initial_credit = self.settings.initial_credit;
            self.readers.insert(
                assignment.partition,
                Reader::new(assignment, queue, sink, initial_credit, trust),
            );
        }
    }

    /// Drains the partitions' actors, then commits their final positions (after the commit in
    /// flight, if any), before librdkafka gives them up.
    fn revoke(&mut self, partitions: &[i32], lost: bool) {
        let readers: Vec<Reader> = partitions
            .iter()
            .filter_map(|p| self.readers.remove(p))
            .collect();
        self.ledger.forget(partitions);
        if readers.is_empty() {
            return;
        }
        let assignments: Vec<Assignment> = readers.iter().map(|r| r.assignment).collect();
        tracing::info!(?partitions, lost, "partitions revoked; draining");
        let finals = futures::executor::block_on(
            self.ports
                .revoked
                .send(PartitionsRevoked { assignments, lost }),
        )
        .unwrap_or_default();
        // The queues go only now: nothing was read from them while the actors drained.
        drop(readers);
        if lost || finals.is_empty() {
            return;
        }
        self.commit_final(finals);
    }

    fn commit_final(&mut self, finals: Vec<CommitPosition>) {
        let deadline = Instant::now() + FINAL_COMMIT_TIMEOUT;
        if !self.settle_commit_in_flight(deadline) {
            tracing::warn!(
                ?finals,
                "final commit skipped: the commit before it is still unanswered; the next \
                 owner replays from the last committed offsets"
            );
            return;
        }
        if self.send_final(finals.clone()) {
            let left = deadline.saturating_duration_since(Instant::now());
            self.collect_commit_answers(left);
            match self.ledger.in_flight() {
                None => tracing::info!(?finals, "final positions committed"),
                Some(_) => tracing::warn!(?finals, "final commit not answered in time"),
            }
        }
    }

    /// Waits until the commit in flight, if any, is answered; false if it was not by
    /// `deadline`.
    fn settle_commit_in_flight(&mut self, deadline: Instant) -> bool {
        while self.ledger.in_flight().is_some() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.collect_commit_answers(left);
        }
        true
    }

    /// Hands each partition actor as many records as it asked for.
    fn feed_partitions(&mut self) {
        let mut errors = Vec::new();
        for reader in self.readers.values_mut() {
            // A held partition is not read: what follows the record it stopped at must not
            // reach the watermark.
            if reader.demand == 0 || reader.held.is_some() {
                continue;
            }
            reader.unchecked = true;
            let mut records = Vec::new();
            // Records before an error go to the actor first; the error is dealt with once they
            // are on their way, and nothing after it is read in this round.
            if let Some(error) = reader.queue.poll_round(reader.demand, &mut records) {
                errors.push((reader.assignment, error));
            }
            if reader.failing && !records.is_empty() {
                reader.failing = false;
                self.ports.fetch.do_send(FetchTrouble {
                    assignment: reader.assignment,
                    trouble: None,
                });
            }
            let (Some(first), Some(last)) = (records.first(), records.last()) else {
                continue;
            };
            assert!(
                !self.panic_on_first_record,
                "{TEST_DRIVER_PANIC}=first-record: the driver thread panics on purpose"
            );
            reader.first.get_or_insert(first.offset);
            reader.accounted = Some(last.offset);
            reader.demand -= records.len();
            reader.sink.do_send(Fetched::Records(records));
        }
        for (assignment, error) in errors {
            self.on_queue_error(assignment, error);
        }
    }

    /// The consumer's positions of `partitions`, assigned or not (`None`: invalid); empty when
    /// librdkafka cannot say.
    fn positions_of(&self, partitions: &[i32]) -> BTreeMap<i32, Option<i64>> {
        let mut list = TopicPartitionList::new();
        for &partition in partitions {
            list.add_partition(&self.topic, partition);
        }
        // SAFETY: the list is alive for the call; librdkafka fills in its offsets.
        let err = unsafe {
            rdkafka::bindings::rd_kafka_position(self.consumer.client().native_ptr(), list.ptr())
        };
        if err != rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return BTreeMap::new();
        }
        list.elements()
            .iter()
            .map(|e| {
                let position = match e.offset() {
                    Offset::Offset(position) => Some(position),
                    _ => None,
                };
                (e.partition(), position)
            })
            .collect()
    }

    /// Tells the actors about offsets the consumer stepped over without a record for us
    /// (transaction markers, aborted records) after everything they were sent.
    fn check_positions(&mut self) {
        if !self.readers.values().any(|r| r.unchecked)
            || self.positions_checked.elapsed() < POSITION_CHECK_EVERY
        {
            return;
        }
        self.positions_checked = Instant::now();
        let Ok(positions) = self.consumer.position() else {
            return;
        };
        for (partition, reader) in &mut self.readers {
            // A held partition's position says nothing about records we were handed.
            if !std::mem::take(&mut reader.unchecked) || reader.held.is_some() {
                continue;
            }
            // Nor does one past records carried over after an error, not handed over yet: the
            // round that hands them over marks the partition unchecked again.
            if reader.queue.carries() {
                continue;
            }
            let Some(observed) = positions
                .find_partition(&self.topic, *partition)
                .map(|e| match e.offset() {
                    Offset::Offset(position) => Some(position),
                    _ => None,
                })
            else {
                continue;
            };
            // A record delivered in this assignment made the position ours.
            let position = match reader.accounted {
                Some(_) => observed,
                None => reader.trust.observe(observed),
            };
            let Some(position) = position else {
                continue;
            };
            // librdkafka moved it past an error's offset, and perhaps no further.
            if !believable(position, reader.queue.error_reach()) {
                continue;
            }
            if passed_offsets_without_records(reader.accounted, position) {
                reader.sink.do_send(Fetched::Skipped {
                    after: reader.accounted,
                    position,
                });
                reader.first.get_or_insert(position);
                reader.accounted = Some(position - 1);
            }
        }
        // Lists from the consumer must go before the consumer does.
        drop(positions);
    }

    fn send_next_commit(&mut self) {
        if self.ledger.in_flight().is_some() {
            if let Some(slow) = self.ledger.overdue(SLOW_COMMIT, Instant::now()) {
                tracing::warn!(
                    positions = ?slow.positions,
                    "offset commit unanswered for a long time"
                );
            }
            return;
        }
        let readers = &self.readers;
        let held = |a: Assignment| readers.get(&a.partition).is_some_and(|r| r.assignment == a);
        let Some(positions) = self
            .ledger
            .next(held, Instant::now())
            .map(|c| c.positions.clone())
        else {
            return;
        };
        if let Err(error) = self.commit_queue.send(&self.topic, &positions) {
            self.ledger.complete();
            self.report(&positions, |_| Some(error.clone()));
        }
    }

    /// Sends a revoked partition's final positions as the next commit; false if they could
    /// not be sent.
    fn send_final(&mut self, positions: Vec<CommitPosition>) -> bool {
        let Some(in_flight) = self.ledger.send_now(positions, Instant::now()).cloned() else {
            return false;
        };
        match self.commit_queue.send(&self.topic, &in_flight.positions) {
            Ok(()) => true,
            Err(error) => {
                self.ledger.complete();
                self.report(&in_flight.positions, |_| Some(error.clone()));
                false
            }
        }
    }

    /// Collects the answer to the commit in flight, waiting at most `timeout`, and reports it to
    /// the checkpoint. `None` when nothing was answered; else the first error, if any.
    fn collect_commit_answers(&mut self, timeout: Duration) -> Option<Option<String>> {
        self.ledger.in_flight()?;
        let answer = self.commit_queue.poll(timeout)?;
        let in_flight = self.ledger.complete()?;
        Some(self.report(&in_flight.positions, |p| answer.result_of(p)))
    }

    /// Sends the results of a commit to the checkpoint; the first error, if any.
    fn report(
        &self,
        positions: &[CommitPosition],
        result_of: impl Fn(&CommitPosition) -> Option<String>,
    ) -> Option<String> {
        let results: Vec<_> = positions.iter().map(|p| (*p, result_of(p))).collect();
        let first_error = results.iter().find_map(|(_, error)| error.clone());
        self.ports.commits.do_send(CommitCompleted { results });
        first_error
    }

    /// After the loop: any rebalance still noted is answered with librdkafka's default, and
    /// from now on rebalances are answered at once (closing the consumer revokes whatever is
    /// still assigned).
    fn close(&mut self) {
        let context = self.consumer.context();
        context.stop_deferring();
        for rebalance in context.take_rebalances() {
            acknowledge(&self.consumer, &rebalance);
        }
        if !self.readers.is_empty() {
            let partitions: Vec<i32> = self.readers.keys().copied().collect();
            tracing::warn!(
                ?partitions,
                "shutdown deadline passed; closing with partitions still assigned"
            );
            self.readers.clear();
        }
    }
}
