//! The partition actor's scheduling as a pure state machine: what to run next, how many records
//! to ask the driver for, when to retry. No I/O and no clock of its own (callers pass `now`).
//!
//! Rules, in priority order when nothing is running:
//! 1. a skip (offsets without records) at the head of the queue is reported at once: every
//!    record before it has been reported already, since nothing is running;
//! 2. a record an operator asked to dead-letter runs next, alone, as its dead letter; then due
//!    retries of Unknown records, lowest offset first: together, as one batch, when they failed
//!    because the database was unavailable (the records were not the cause); alone when the
//!    database refused them, so that one bad record cannot hold back another;
//! 3. new records run as one batch of at most `batch_size`, and only while the backlog of
//!    Unknown records has room and no operator paused the partition; a short batch waits up to
//!    `linger` for more records while more are on their way;
//! 4. otherwise wait for the next retry or for new input.
//!
//! Pipelining: while batches of new records run, and nothing else does, the next full batch
//! starts too, up to `batches_in_flight` at once, so that a partition with a full batch ready
//! never waits on its own transaction; it starts once every running batch holds its markers
//! (the statement that inserts them returned, see `inbox::markers_held`), so that a copy of
//! an event in the next batch waits at the inbox's unique index for the copy in the running
//! one, never the other way round: the earlier copy is stored, as with one batch at a time.
//! It starts only while the member has room for another transaction (its owner says so, from
//! `--transactions-in-flight`): with every partition busy, each runs one transaction at a time
//! and the database is not given more at once than it can work on; its records are named
//! meanwhile (`upcoming`), so that their owner prepares them and the batch costs only its send
//! when the running one ends. Everything else (a skip, a retry, an operator's replacement, a
//! short batch) waits until nothing runs, as above. Units finish in the order they started
//! (the actor holds a finished unit back until those before it have finished), so every first
//! outcome reaches the checkpoint in offset order, and an Unknown record still holds the
//! position at its offset whatever ran after it. Records of two batches in flight that carry
//! the same event id meet at the inbox's unique index: the later batch's transaction waits for
//! the earlier one's and takes the outcome it left (one row either way).
//!
//! When the database answers again after being unavailable, every record that waits only for
//! it is due at once: after an outage the backlog drains in batches, not at its backoff pace.
//!
//! Credit: the actor asks the driver for records only while `window` is not full (records
//! queued here, running, and asked for but not yet received). A paused or full partition asks
//! for nothing, so its librdkafka queue fills and fetching stops.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backoff::Backoff;
use crate::domain::UnknownCause;

/// The bounds of one partition's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Records queued, running or asked for, at most.
    pub window: usize,
    /// Records per batch, at most.
    pub batch_size: usize,
    /// Unknown records held for retrying, at most; at the bound no new record is taken.
    pub max_unresolved: usize,
    /// How long a short batch waits for more records.
    pub linger: Duration,
    /// Batches of new records that may run at once (1: one unit of work at a time).
    pub batches_in_flight: usize,
}

/// A queued item, in offset order.
#[derive(Debug, Clone, PartialEq)]
enum Item<Q> {
    Record { offset: i64, work: Q },
    Skip { after: Option<i64>, position: i64 },
}

/// An Unknown record waiting for its retry.
#[derive(Debug, Clone, PartialEq)]
pub struct Unresolved<W> {
    pub work: W,
    /// Why its last attempt was Unknown; all but `Unavailable` are retried alone.
    pub cause: UnknownCause,
    /// What an operator asked to run instead (its dead letter), next and alone. Boxed: it is
    /// rare, and inline it would double every entry's size.
    pub replacement: Option<Box<W>>,
    pub attempts: u32,
    pub first_seen: Instant,
    pub next_retry: Instant,
    /// Shared by the records of the unit of work that failed with it.
    pub last_error: Arc<str>,
}

impl<W> Unresolved<W> {
    /// Whether it is retried on its own (the record may be the cause).
    fn alone(&self) -> bool {
        self.cause != UnknownCause::Unavailable || self.replacement.is_some()
    }
}

/// Why a record is Unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// One text for every record of a failed unit of work (a failed batch of 256 records
    /// holds it once, not 256 times).
    pub error: Arc<str>,
    pub cause: UnknownCause,
}

/// A unit of work that is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Running {
    /// Retries of this many Unknown records.
    Retry(usize),
    /// A batch of new records; `holds_markers` once its transaction's marker insert (or the
    /// statement that inserts markers and history rows) returned.
    Batch { records: usize, holds_markers: bool },
}

/// Whether a unit of work runs records for the first time or Unknown ones again: a first
/// outcome goes to the checkpoint, a retry's only when it resolves a backlog entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    First,
    Retry,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next<W, Q = W> {
    /// Report that the offsets after `after` and below `position` hold no record for us.
    Skip { after: Option<i64>, position: i64 },
    /// Retry these Unknown records together (often just one).
    Retry(Vec<(i64, W)>),
    /// Run these new records together, as they were received.
    Batch(Vec<(i64, Q)>),
    /// Nothing to run before this instant (a linger ends or a retry is due) or new input.
    WaitUntil(Instant),
    /// Nothing to run until new input arrives.
    Idle,
    /// Something is running already; ask again when it finished.
    Busy,
}

/// What a partition is doing, as an operator would say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Running,
    Retrying,
    BacklogFull,
    Paused,
    Draining,
}

/// The scheduling state of one partition (see the module docs).
#[derive(Debug)]
pub struct Schedule<W, Q = W> {
    limits: Limits,
    retry: Backoff,
    /// New records as received (`Q`: the actor queues them unparsed, a fraction of a parsed
    /// record's size; it parses a batch when it starts it, or the next one ahead of its start,
    /// see [`Schedule::upcoming`]).
    queue: VecDeque<Item<Q>>,
    queued_records: usize,
    requested: usize,
    /// Each entry boxed: a B-tree filled in offset order keeps its leaves about half full, so
    /// inline entries (hundreds of bytes) would cost nearly twice their size.
    backlog: BTreeMap<i64, Box<Unresolved<W>>>,
    /// Units started and not finished, oldest first.
    running: VecDeque<Running>,
    paused: bool,
    draining: bool,
    /// Whether the member has room for another transaction: without it, no batch joins a
    /// running one (the owner says, before each [`Schedule::next`]).
    pipeline_room: bool,
    linger_until: Option<Instant>,
}

impl<W: Clone, Q> Schedule<W, Q> {
    /// A fresh partition: the driver sends up to `window` records before being asked.
    pub fn new(limits: Limits, retry: Backoff, paused: bool) -> Self {
        debug_assert!(limits.window >= 1 && limits.batch_size >= 1 && limits.max_unresolved >= 1);
        debug_assert!(limits.batches_in_flight >= 1);
        Schedule {
            limits,
            retry,
            queue: VecDeque::new(),
            queued_records: 0,
            requested: limits.window,
            backlog: BTreeMap::new(),
            running: VecDeque::new(),
            paused,
            draining: false,
            pipeline_room: true,
            linger_until: None,
        }
    }

    /// Whether the member has room for another transaction (see `--transactions-in-flight`):
    /// without it, the next batch waits for the running one instead of joining it.
    pub fn set_pipeline_room(&mut self, room: bool) {
        self.pipeline_room = room;
    }

    /// Records from the driver, in offset order.
    pub fn receive(&mut self, records: impl IntoIterator<Item = (i64, Q)>) {
        for (offset, work) in records {
            self.requested = self.requested.saturating_sub(1);
            if self.draining {
                continue;
            }
            self.queue.push_back(Item::Record { offset, work });
            self.queued_records += 1;
        }
    }

    /// Offsets without records after everything received so far.
    pub fn receive_skip(&mut self, after: Option<i64>, position: i64) {
        if !self.draining {
            self.queue.push_back(Item::Skip { after, position });
        }
    }

    /// How many more records to ask the driver for, if it is worth asking now.
    pub fn demand(&mut self) -> Option<usize> {
        if self.draining {
            return None;
        }
        let held = self.queued_records + self.running_records() + self.requested;
        let room = self.limits.window.saturating_sub(held);
        let worth = self.limits.batch_size.min(self.limits.window / 2).max(1);
        if room < worth {
            return None;
        }
        self.requested += room;
        Some(room)
    }

    /// The next thing to do (see the module docs); `unit` picks the jitter of retry delays.
    pub fn next(&mut self, now: Instant) -> Next<W, Q> {
        if !self.running.is_empty() {
            return self.next_in_pipeline(now);
        }
        if let Some(Item::Skip { after, position }) = self.queue.front() {
            let next = Next::Skip {
                after: *after,
                position: *position,
            };
            self.queue.pop_front();
            return next;
        }
        if self.draining {
            return Next::Idle;
        }
        let replaced = self
            .backlog
            .iter_mut()
            .find(|(_, e)| e.replacement.is_some());
        if let Some((&offset, entry)) = replaced {
            // From now on its retries are of the replacement, at their backoff pace.
            entry.work = *entry.replacement.take().expect("found with a replacement");
            entry.cause = UnknownCause::Refused;
            self.running.push_back(Running::Retry(1));
            return Next::Retry(vec![(offset, entry.work.clone())]);
        }
        if let Some((&offset, first)) = self.backlog.iter().find(|(_, e)| e.next_retry <= now) {
            let retries: Vec<(i64, W)> = if first.alone() {
                vec![(offset, first.work.clone())]
            } else {
                self.backlog
                    .range(offset..)
                    .filter(|(_, e)| e.next_retry <= now && !e.alone())
                    .take(self.limits.batch_size)
                    .map(|(offset, e)| (*offset, e.work.clone()))
                    .collect()
            };
            self.running.push_back(Running::Retry(retries.len()));
            return Next::Retry(retries);
        }
        let room = self
            .limits
            .max_unresolved
            .saturating_sub(self.backlog.len());
        if !self.paused && room > 0 && self.queued_records > 0 {
            let wanted = self.limits.batch_size.min(room);
            let ready = self.ready(wanted);
            let more_coming = ready == self.queued_records && self.requested > 0;
            if ready < wanted && more_coming && !self.limits.linger.is_zero() {
                let until = *self.linger_until.get_or_insert(now + self.limits.linger);
                if now < until {
                    return Next::WaitUntil(self.earliest_retry().map_or(until, |r| r.min(until)));
                }
            }
            self.linger_until = None;
            return Next::Batch(self.start_batch(ready));
        }
        match self.earliest_retry() {
            Some(at) => Next::WaitUntil(at),
            None => Next::Idle,
        }
    }

    /// While batches run: the next full batch joins them once they all hold their markers, if
    /// the bounds and the member's room allow it and nothing else waits for its turn (see the
    /// module docs and [`Schedule::upcoming`]); otherwise wait for them.
    fn next_in_pipeline(&mut self, now: Instant) -> Next<W, Q> {
        let all_hold_markers = self.running.iter().all(|u| {
            matches!(
                u,
                Running::Batch {
                    holds_markers: true,
                    ..
                }
            )
        });
        if !all_hold_markers
            || self.running.len() >= self.limits.batches_in_flight
            || !self.pipeline_room
        {
            return Next::Busy;
        }
        match self.upcoming(now) {
            Some(ready) => Next::Batch(self.start_batch(ready)),
            None => Next::Busy,
        }
    }

    /// How many records the next batch will take from the head of the queue, when it waits
    /// only for the batches running now (for their markers, their end or the member's room):
    /// a full batch, nothing else due before it, the bounds allowing it. Its owner may prepare
    /// those records meanwhile ([`Schedule::queued_mut`]), so that starting it costs only its
    /// send. `None` while anything else runs or waits, or nothing does (the batch then starts
    /// at once).
    pub fn upcoming(&self, now: Instant) -> Option<usize> {
        let only_batches = self
            .running
            .iter()
            .all(|u| matches!(u, Running::Batch { .. }));
        if self.running.is_empty()
            || !only_batches
            || self.draining
            || self.paused
            || self
                .backlog
                .values()
                .any(|e| e.replacement.is_some() || e.next_retry <= now)
        {
            return None;
        }
        let room = self
            .limits
            .max_unresolved
            .saturating_sub(self.backlog.len() + self.running_records());
        let full = self.limits.batch_size;
        (room >= full && self.ready(full) == full).then_some(full)
    }

    /// The first `n` queued records (at most: up to the first skip), for their owner to
    /// prepare in place; what the schedule does with them is unchanged.
    pub fn queued_mut(&mut self, n: usize) -> impl Iterator<Item = &mut Q> + '_ {
        self.queue.iter_mut().take(n).map_while(|item| match item {
            Item::Record { work, .. } => Some(work),
            Item::Skip { .. } => None,
        })
    }

    /// How many records, at most `wanted`, are queued ahead of the first skip.
    fn ready(&self, wanted: usize) -> usize {
        self.queue
            .iter()
            .take(wanted)
            .take_while(|item| matches!(item, Item::Record { .. }))
            .count()
    }

    /// Takes the first `ready` queued items (all records) as a running batch.
    fn start_batch(&mut self, ready: usize) -> Vec<(i64, Q)> {
        self.linger_until = None;
        let batch: Vec<(i64, Q)> = self
            .queue
            .drain(..ready)
            .map(|item| match item {
                Item::Record { offset, work } => (offset, work),
                Item::Skip { .. } => unreachable!("only records were counted"),
            })
            .collect();
        self.queued_records -= batch.len();
        self.running.push_back(Running::Batch {
            records: batch.len(),
            holds_markers: false,
        });
        batch
    }

    /// Records of the batches running (retried records are counted in the backlog).
    fn running_records(&self) -> usize {
        self.running
            .iter()
            .map(|unit| match unit {
                Running::Batch { records, .. } => *records,
                Running::Retry(_) => 0,
            })
            .sum()
    }

    fn earliest_retry(&self) -> Option<Instant> {
        self.backlog.values().map(|e| e.next_retry).min()
    }

    /// The running unit at `slot` (0: the oldest) holds its events' markers: a batch started
    /// after it waits for it at the inbox's unique index, so the next batch may start.
    pub fn holds_markers(&mut self, slot: usize) {
        if let Some(Running::Batch { holds_markers, .. }) = self.running.get_mut(slot) {
            *holds_markers = true;
        }
    }

    /// The oldest running unit finished (units finish in the order they started); report
    /// each of its records' results with [`Self::unknown`] or [`Self::resolved`].
    pub fn finished(&mut self) {
        let finished = self.running.pop_front();
        debug_assert!(finished.is_some(), "finished while nothing ran");
    }

    /// The record at `offset` is Unknown (again): it waits in the backlog for its next retry,
    /// alone unless the database was unavailable. Returns the attempts so far and the delay
    /// before the next. `unit` in `[0, 1)` picks the jitter.
    pub fn unknown(
        &mut self,
        offset: i64,
        work: W,
        failure: Failure,
        now: Instant,
        unit: f64,
    ) -> (u32, Duration) {
        let Failure { error, cause } = failure;
        let entry = self.backlog.entry(offset).or_insert_with(|| {
            Box::new(Unresolved {
                work,
                cause,
                replacement: None,
                attempts: 0,
                first_seen: now,
                next_retry: now,
                last_error: Arc::from(""),
            })
        });
        entry.attempts += 1;
        entry.cause = cause;
        let delay = self.retry.delay(entry.attempts, unit);
        entry.next_retry = now + delay;
        entry.last_error = error;
        (entry.attempts, delay)
    }

    /// The record at `offset` resolved; true if it was in the backlog.
    pub fn resolved(&mut self, offset: i64) -> bool {
        self.backlog.remove(&offset).is_some()
    }

    /// The database answered: every record that waits only for it is due now.
    pub fn database_answered(&mut self, now: Instant) {
        for entry in self.backlog.values_mut().filter(|e| !e.alone()) {
            entry.next_retry = entry.next_retry.min(now);
        }
    }

    /// Every Unknown record is due now.
    pub fn retry_all_now(&mut self, now: Instant) {
        for entry in self.backlog.values_mut() {
            entry.next_retry = now;
        }
    }

    /// An operator asks that the Unknown record at `offset` be resolved by `replacement` (its
    /// dead letter): it runs next, alone (after the unit running now, which may still resolve
    /// the record itself). False when the record is not in the backlog or the partition drains.
    pub fn replace(&mut self, offset: i64, replacement: impl FnOnce(&W) -> W) -> bool {
        if self.draining {
            return false;
        }
        match self.backlog.get_mut(&offset) {
            Some(entry) => {
                entry.replacement = Some(Box::new(replacement(&entry.work)));
                true
            }
            None => false,
        }
    }

    /// The Unknown record at `offset`, if there is one.
    pub fn unresolved(&self, offset: i64) -> Option<&Unresolved<W>> {
        self.backlog.get(&offset).map(Box::as_ref)
    }

    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Stops taking work: queued records are dropped (the next owner reads them from the
    /// committed offset); what is running finishes.
    pub fn drain(&mut self) {
        self.draining = true;
        self.queue.retain(|item| matches!(item, Item::Skip { .. }));
        self.queued_records = 0;
        self.linger_until = None;
    }

    /// Draining and nothing running: the actor may stop.
    pub fn drained(&self) -> bool {
        self.draining && self.running.is_empty()
    }

    /// Nothing queued, running or unresolved: every record received so far has its outcome.
    pub fn idle(&self) -> bool {
        self.queue.is_empty() && self.running.is_empty() && self.backlog.is_empty()
    }

    /// Keeping up with its log: nothing unresolved and less than a full batch queued. A
    /// partition behind its log (a backlog in Kafka, a slow database) has a full batch waiting
    /// whenever a unit of work ends; one that keeps up takes what arrived meanwhile.
    pub fn keeping_up(&self) -> bool {
        self.backlog.is_empty() && self.queued_records < self.limits.batch_size
    }

    pub fn phase(&self) -> Phase {
        if self.draining {
            Phase::Draining
        } else if self.paused {
            Phase::Paused
        } else if self.backlog.len() >= self.limits.max_unresolved {
            Phase::BacklogFull
        } else if !self.backlog.is_empty() {
            Phase::Retrying
        } else {
            Phase::Running
        }
    }

    /// Whether new records are held back (paused, or the backlog is at its bound).
    pub fn intake_stopped(&self) -> bool {
        self.paused || self.backlog.len() >= self.limits.max_unresolved
    }

    pub fn is_paused(&self) -> bool {
        self.paused
    }

    pub fn backlog(&self) -> impl Iterator<Item = (i64, &Unresolved<W>)> {
        self.backlog
            .iter()
            .map(|(offset, entry)| (*offset, entry.as_ref()))
    }

    pub fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// Records received and not yet resolved for the first time (queued or running).
    pub fn in_flight(&self) -> usize {
        self.queued_records + self.running_records()
    }

    /// Records asked for and not received yet.
    pub fn requested(&self) -> usize {
        self.requested
    }

    /// Units running, oldest first.
    #[cfg(test)]
    pub fn running(&self) -> impl Iterator<Item = Running> + '_ {
        self.running.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINGER: Duration = Duration::from_millis(2);

    /// A partition that cannot reach the database keeps one boxed entry per record it holds
    /// (64 partitions of a backlog: tens of thousands of them). At most 256 bytes, the entry
    /// takes jemalloc's 256-byte size class, not the 320-byte one it took when the event's
    /// four fields were four shared strings of 32 bytes each.
    #[test]
    fn a_backlog_entry_of_the_service_fits_the_256_byte_size_class() {
        assert!(std::mem::size_of::<Unresolved<crate::work::Work>>() <= 256);
    }

    fn limits(window: usize, batch_size: usize, max_unresolved: usize) -> Limits {
        Limits {
            window,
            batch_size,
            max_unresolved,
            linger: LINGER,
            batches_in_flight: 1,
        }
    }

    fn no_jitter() -> Backoff {
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            multiplier: 2.0,
            jitter: 0.0,
        }
    }

    fn schedule(window: usize, batch_size: usize, max_unresolved: usize) -> Schedule<&'static str> {
        Schedule::new(
            limits(window, batch_size, max_unresolved),
            no_jitter(),
            false,
        )
    }

    fn unavailable() -> Failure {
        Failure {
            error: "db down".into(),
            cause: UnknownCause::Unavailable,
        }
    }

    fn rejected() -> Failure {
        Failure {
            error: "value too long".into(),
            cause: UnknownCause::Refused,
        }
    }

    fn retry_offsets(next: Next<&str>) -> Vec<i64> {
        match next {
            Next::Retry(retries) => retries.into_iter().map(|(o, _)| o).collect(),
            other => panic!("expected retries, got {other:?}"),
        }
    }

    fn records(offsets: std::ops::Range<i64>) -> Vec<(i64, &'static str)> {
        offsets.map(|o| (o, "work")).collect()
    }

    fn batch_offsets(next: Next<&str>) -> Vec<i64> {
        match next {
            Next::Batch(batch) => batch.into_iter().map(|(o, _)| o).collect(),
            other => panic!("expected a batch, got {other:?}"),
        }
    }

    #[test]
    fn the_driver_may_send_a_whole_window_before_the_actor_asks() {
        let mut s = schedule(8, 4, 10);
        assert_eq!(s.requested(), 8);
        assert_eq!(
            s.demand(),
            None,
            "nothing to ask while the window is promised"
        );
        s.receive(records(0..8));
        assert_eq!(s.requested(), 0);
        assert_eq!(s.demand(), None, "the window is full of queued records");
        let now = Instant::now();
        assert_eq!(batch_offsets(s.next(now)), vec![0, 1, 2, 3]);
        assert_eq!(s.demand(), None, "the running batch still counts");
        s.finished();
        assert_eq!(s.demand(), Some(4));
        assert_eq!(s.demand(), None, "asked once");
    }

    #[test]
    fn a_short_batch_lingers_only_while_more_records_are_coming() {
        let mut s = schedule(8, 4, 10);
        let now = Instant::now();
        s.receive(records(0..2));
        assert_eq!(s.next(now), Next::WaitUntil(now + LINGER));
        assert_eq!(s.next(now + LINGER / 2), Next::WaitUntil(now + LINGER));
        assert_eq!(batch_offsets(s.next(now + LINGER)), vec![0, 1]);
        s.finished();
        // Nothing more was asked for: no point waiting.
        let mut s = schedule(2, 4, 10);
        s.receive(records(0..2));
        assert_eq!(batch_offsets(s.next(now)), vec![0, 1]);
    }

    #[test]
    fn a_partition_keeps_up_while_less_than_a_full_batch_waits_and_nothing_is_unresolved() {
        let mut s = schedule(16, 4, 10);
        let now = Instant::now();
        assert!(s.keeping_up() && s.idle());
        s.receive(records(0..8));
        assert!(!s.keeping_up(), "two full batches wait");
        assert_eq!(batch_offsets(s.next(now)), vec![0, 1, 2, 3]);
        assert!(!s.keeping_up(), "a full batch waits for the running one");
        s.finished();
        assert_eq!(batch_offsets(s.next(now)), vec![4, 5, 6, 7]);
        s.receive(records(8..11));
        assert!(
            s.keeping_up(),
            "what arrived meanwhile is less than a batch"
        );
        assert!(!s.idle());
        s.unknown(4, "work", unavailable(), now, 0.5);
        s.finished();
        assert!(!s.keeping_up(), "a record waits for its retry");
    }

    #[test]
    fn one_thing_runs_at_a_time() {
        let mut s = schedule(8, 4, 10);
        let now = Instant::now();
        s.receive(records(0..8));
        assert!(matches!(s.next(now), Next::Batch(_)));
        assert_eq!(s.next(now), Next::Busy);
        s.finished();
        assert!(matches!(s.next(now), Next::Batch(_)));
    }

    #[test]
    fn a_skip_is_reported_after_the_records_before_it_and_splits_batches() {
        let mut s = schedule(8, 4, 10);
        let now = Instant::now();
        s.receive(records(0..2));
        s.receive_skip(Some(1), 5);
        s.receive(records(5..7));
        assert_eq!(
            batch_offsets(s.next(now)),
            vec![0, 1],
            "no lingering before a skip"
        );
        assert_eq!(s.next(now), Next::Busy, "the skip waits for the batch");
        s.finished();
        assert_eq!(
            s.next(now),
            Next::Skip {
                after: Some(1),
                position: 5
            }
        );
        let Next::WaitUntil(until) = s.next(now) else {
            panic!("records 5 and 6 linger: more were asked for");
        };
        assert_eq!(batch_offsets(s.next(until)), vec![5, 6]);
    }

    #[test]
    fn an_unknown_record_is_retried_before_new_records_with_growing_delays() {
        let mut s = schedule(8, 4, 10);
        let now = Instant::now();
        s.receive(records(0..8));
        let batch = s.next(now);
        assert!(matches!(batch, Next::Batch(_)));
        s.finished();
        assert_eq!(
            s.unknown(2, "work", rejected(), now, 0.5),
            (1, Duration::from_millis(100))
        );
        assert_eq!(s.phase(), Phase::Retrying);
        // Not due yet: new records go on.
        assert_eq!(batch_offsets(s.next(now)), vec![4, 5, 6, 7]);
        s.finished();
        let later = now + Duration::from_millis(100);
        assert_eq!(s.next(later), Next::Retry(vec![(2, "work")]));
        s.finished();
        assert_eq!(
            s.unknown(2, "work", rejected(), later, 0.5),
            (2, Duration::from_millis(200))
        );
        assert_eq!(
            s.next(later),
            Next::WaitUntil(later + Duration::from_millis(200))
        );
        s.retry_all_now(later);
        assert_eq!(retry_offsets(s.next(later)), vec![2]);
        s.finished();
        assert!(s.resolved(2));
        assert_eq!(s.phase(), Phase::Running);
    }

    #[test]
    fn records_that_waited_for_the_database_are_retried_together_and_rejected_ones_alone() {
        let mut s = schedule(8, 4, 10);
        let now = Instant::now();
        s.receive(records(0..8));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.finished();
        for offset in 0..4 {
            let failure = if offset == 1 {
                rejected()
            } else {
                unavailable()
            };
            s.unknown(offset, "work", failure, now, 0.5);
        }
        let due = now + Duration::from_millis(100);
        assert_eq!(
            retry_offsets(s.next(due)),
            vec![0, 2, 3],
            "the rejected one waits"
        );
        s.finished();
        for offset in [0, 2, 3] {
            assert!(s.resolved(offset));
        }
        assert_eq!(retry_offsets(s.next(due)), vec![1], "then alone");
    }

    #[test]
    fn once_the_database_answers_every_record_that_waited_for_it_is_due_at_once() {
        let mut s = schedule(8, 4, 10);
        let now = Instant::now();
        s.receive(records(0..8));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.finished();
        for _ in 0..5 {
            s.unknown(0, "work", unavailable(), now, 0.5);
        }
        s.unknown(1, "work", rejected(), now, 0.5);
        s.unknown(2, "work", unavailable(), now, 0.5);
        s.database_answered(now);
        assert_eq!(
            retry_offsets(s.next(now)),
            vec![0, 2],
            "not the rejected one"
        );
    }

    #[test]
    fn a_full_backlog_takes_no_new_records_and_asks_for_none() {
        let mut s = schedule(4, 2, 2);
        let now = Instant::now();
        s.receive(records(0..4));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.finished();
        s.unknown(0, "w", unavailable(), now, 0.5);
        s.unknown(1, "w", unavailable(), now, 0.5);
        assert_eq!(s.phase(), Phase::BacklogFull);
        assert!(s.intake_stopped());
        assert_eq!(
            s.next(now),
            Next::WaitUntil(now + Duration::from_millis(100))
        );
        assert_eq!(s.demand(), Some(2), "only what fills the window");
        s.receive(records(4..6));
        assert_eq!(s.demand(), None, "the window is full");
        assert_eq!(
            s.next(now),
            Next::WaitUntil(now + Duration::from_millis(100))
        );
        assert_eq!(s.in_flight(), 4);
    }

    #[test]
    fn a_paused_partition_retries_its_backlog_but_takes_no_new_records() {
        let mut s: Schedule<&str> = Schedule::new(limits(4, 2, 10), no_jitter(), true);
        let now = Instant::now();
        s.receive(records(0..4));
        assert_eq!(s.phase(), Phase::Paused);
        assert_eq!(s.next(now), Next::Idle);
        s.set_paused(false);
        assert!(matches!(s.next(now), Next::Batch(_)));
    }

    #[test]
    fn draining_drops_queued_records_and_waits_for_the_running_work() {
        let mut s = schedule(8, 4, 10);
        let now = Instant::now();
        s.receive(records(0..8));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.drain();
        assert!(!s.drained(), "the batch is still running");
        assert_eq!(s.demand(), None);
        s.finished();
        assert!(s.drained());
        assert_eq!(s.next(now), Next::Idle);
        s.receive(records(8..10));
        assert_eq!(s.in_flight(), 0, "records after the drain are dropped");
    }

    #[test]
    fn a_record_an_operator_dead_letters_runs_next_alone_as_its_replacement_then_as_a_retry() {
        let mut s = schedule(8, 4, 10);
        let now = Instant::now();
        s.receive(records(0..4));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.finished();
        for offset in 0..3 {
            s.unknown(offset, "work", unavailable(), now, 0.5);
        }
        assert!(!s.replace(5, |_| "letter"), "not in the backlog");
        assert!(s.replace(1, |work| {
            assert_eq!(*work, "work");
            "letter"
        }));
        assert_eq!(
            s.next(now),
            Next::Retry(vec![(1, "letter")]),
            "before anything else, though not due"
        );
        s.finished();
        // The database was down: from now on the dead letter waits for it with the others.
        s.unknown(1, "stale", unavailable(), now, 0.5);
        assert_eq!(
            s.next(now),
            Next::WaitUntil(now + Duration::from_millis(100)),
            "at its backoff pace"
        );
        s.database_answered(now);
        assert_eq!(
            s.next(now),
            Next::Retry(vec![(0, "work"), (1, "letter"), (2, "work")])
        );
        s.finished();
        assert!(s.resolved(1));
    }

    #[test]
    fn a_draining_partition_takes_no_operator_replacement() {
        let mut s = schedule(8, 4, 10);
        let now = Instant::now();
        s.receive(records(0..8));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.finished();
        s.unknown(0, "work", rejected(), now, 0.5);
        s.drain();
        assert!(!s.replace(0, |_| "letter"));
    }

    fn pipelined(
        window: usize,
        batch_size: usize,
        max_unresolved: usize,
    ) -> Schedule<&'static str> {
        Schedule::new(
            Limits {
                batches_in_flight: 2,
                ..limits(window, batch_size, max_unresolved)
            },
            no_jitter(),
            false,
        )
    }

    #[test]
    fn the_next_full_batch_runs_while_the_previous_one_commits() {
        let mut s = pipelined(12, 4, 20);
        let now = Instant::now();
        s.receive(records(0..10));
        assert_eq!(batch_offsets(s.next(now)), vec![0, 1, 2, 3]);
        assert_eq!(
            s.next(now),
            Next::Busy,
            "not before the running batch holds its markers"
        );
        s.holds_markers(0);
        assert_eq!(batch_offsets(s.next(now)), vec![4, 5, 6, 7]);
        s.holds_markers(1);
        assert_eq!(s.next(now), Next::Busy, "two batches in flight at most");
        assert_eq!(s.in_flight(), 10);
        s.finished();
        assert_eq!(
            s.next(now),
            Next::Busy,
            "a short batch waits until nothing runs, not beside a running one"
        );
        s.finished();
        assert!(matches!(s.next(now), Next::WaitUntil(_)), "then lingers");
        assert_eq!(s.running().count(), 0);
    }

    #[test]
    fn the_next_full_batch_is_upcoming_while_it_waits_only_for_the_running_ones() {
        let now = Instant::now();
        for in_flight in [1, 2] {
            let mut s = Schedule::<&str>::new(
                Limits {
                    batches_in_flight: in_flight,
                    ..limits(16, 4, 20)
                },
                no_jitter(),
                false,
            );
            s.receive(records(0..7));
            assert_eq!(
                s.upcoming(now),
                None,
                "nothing runs: the batch starts at once"
            );
            assert_eq!(batch_offsets(s.next(now)), vec![0, 1, 2, 3]);
            assert_eq!(s.upcoming(now), None, "three queued: not a full batch");
            s.receive(records(7..8));
            assert_eq!(s.upcoming(now), Some(4), "{in_flight} in flight");
            let upcoming: Vec<&mut &str> = s.queued_mut(4).collect();
            assert_eq!(upcoming.len(), 4);
            s.set_paused(true);
            assert_eq!(s.upcoming(now), None, "paused");
            s.set_paused(false);
            s.set_pipeline_room(false);
            assert_eq!(
                s.upcoming(now),
                Some(4),
                "the member's room makes no difference"
            );
        }
    }

    #[test]
    fn nothing_is_upcoming_while_a_retry_runs_or_is_due() {
        let now = Instant::now();
        let mut s = pipelined(16, 4, 20);
        s.receive(records(0..12));
        assert_eq!(batch_offsets(s.next(now)), vec![0, 1, 2, 3]);
        s.finished();
        s.unknown(0, "work", rejected(), now, 0.5);
        let retried = now + Duration::from_secs(3600);
        assert_eq!(s.upcoming(retried), None, "nothing runs");
        assert!(matches!(s.next(retried), Next::Retry(_)));
        assert_eq!(s.upcoming(retried), None, "a retry runs");
        s.finished();
        s.unknown(0, "work", rejected(), retried, 0.5);
        assert_eq!(batch_offsets(s.next(retried)), vec![4, 5, 6, 7]);
        assert_eq!(s.upcoming(retried), Some(4), "the retry is not due yet");
        let due = retried + Duration::from_secs(3600);
        assert_eq!(s.upcoming(due), None, "a due retry goes first");
    }

    #[test]
    fn the_queued_records_stop_at_the_first_skip() {
        let mut s = pipelined(16, 4, 20);
        s.receive(records(0..2));
        s.receive_skip(Some(1), 5);
        s.receive(records(5..7));
        assert_eq!(s.queued_mut(4).count(), 2);
    }

    #[test]
    fn without_room_for_another_transaction_the_next_batch_waits_for_the_running_one() {
        let mut s = pipelined(12, 4, 20);
        let now = Instant::now();
        s.receive(records(0..12));
        s.set_pipeline_room(false);
        assert_eq!(
            batch_offsets(s.next(now)),
            vec![0, 1, 2, 3],
            "a first batch is never held back"
        );
        s.holds_markers(0);
        assert_eq!(s.next(now), Next::Busy, "no room: it does not join");
        s.set_pipeline_room(true);
        assert_eq!(batch_offsets(s.next(now)), vec![4, 5, 6, 7], "room again");
        s.holds_markers(1);
        s.finished();
        s.set_pipeline_room(false);
        assert_eq!(s.next(now), Next::Busy, "one still runs");
        s.finished();
        assert_eq!(
            batch_offsets(s.next(now)),
            vec![8, 9, 10, 11],
            "nothing runs"
        );
    }

    #[test]
    fn a_skip_a_due_retry_or_a_replacement_waits_until_nothing_runs() {
        let now = Instant::now();
        // A skip behind a running batch: nothing overtakes it.
        let mut s = pipelined(16, 2, 20);
        s.receive(records(0..2));
        s.receive_skip(Some(1), 3);
        s.receive(records(3..7));
        assert_eq!(batch_offsets(s.next(now)), vec![0, 1]);
        s.holds_markers(0);
        assert_eq!(s.next(now), Next::Busy);
        s.finished();
        assert!(matches!(s.next(now), Next::Skip { .. }));
        assert_eq!(batch_offsets(s.next(now)), vec![3, 4]);
        s.holds_markers(0);
        assert_eq!(batch_offsets(s.next(now)), vec![5, 6], "pipelined again");
        s.finished();
        s.finished();

        // A due retry: no new batch joins the running one; the retry runs alone after it.
        let mut s = pipelined(16, 2, 20);
        s.receive(records(0..8));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.finished();
        s.unknown(0, "work", rejected(), now, 0.5);
        assert_eq!(batch_offsets(s.next(now)), vec![2, 3], "not due yet");
        s.holds_markers(0);
        let due = now + Duration::from_millis(100);
        assert_eq!(s.next(due), Next::Busy, "due: the pipeline is not refilled");
        s.finished();
        assert_eq!(retry_offsets(s.next(due)), vec![0]);
        assert_eq!(s.next(due), Next::Busy, "nothing runs beside a retry");
        s.finished();
        assert!(s.resolved(0));

        // An operator's replacement waits for the running batches, then runs first.
        let mut s = pipelined(16, 2, 20);
        s.receive(records(0..8));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.finished();
        s.unknown(1, "work", rejected(), now, 0.5);
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.holds_markers(0);
        assert!(s.replace(1, |_| "letter"));
        assert_eq!(s.next(now), Next::Busy);
        s.finished();
        assert_eq!(s.next(now), Next::Retry(vec![(1, "letter")]));
    }

    #[test]
    fn batches_in_flight_leave_room_in_the_backlog_for_all_their_records() {
        let now = Instant::now();
        let mut s = pipelined(16, 4, 6);
        s.receive(records(0..12));
        assert_eq!(batch_offsets(s.next(now)), vec![0, 1, 2, 3]);
        s.holds_markers(0);
        assert_eq!(
            s.next(now),
            Next::Busy,
            "4 running and 4 more could not all be held as Unknown (bound 6)"
        );
        let mut s = pipelined(16, 4, 8);
        s.receive(records(0..12));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.holds_markers(0);
        assert!(matches!(s.next(now), Next::Batch(_)));
    }

    #[test]
    fn a_paused_or_draining_partition_starts_no_batch_beside_a_running_one() {
        let now = Instant::now();
        let mut s = pipelined(16, 2, 20);
        s.receive(records(0..8));
        assert!(matches!(s.next(now), Next::Batch(_)));
        s.holds_markers(0);
        s.set_paused(true);
        assert_eq!(s.next(now), Next::Busy);
        s.set_paused(false);
        s.drain();
        assert_eq!(s.next(now), Next::Busy);
        s.finished();
        assert!(s.drained());
    }

    /// A tiny deterministic generator for the simulation below.
    struct Dice(u64);

    impl Dice {
        fn roll(&mut self, sides: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % sides
        }
    }

    /// Runs a partition of `records` records (with gaps reported as skips) through a schedule
    /// with `depth` batches in flight, units finishing oldest first as the actor accounts for
    /// them, outcomes drawn by `dice`; checks the rules at every step and returns the
    /// watermark's final position and the most units that ran at once.
    fn simulate(
        depth: usize,
        batch_size: usize,
        max_unresolved: usize,
        seed: u64,
    ) -> (Option<i64>, usize) {
        use crate::watermark::Watermark;
        let limits = Limits {
            window: batch_size * (depth + 1),
            batch_size,
            max_unresolved,
            linger: LINGER,
            batches_in_flight: depth,
        };
        let mut s: Schedule<i64> = Schedule::new(limits, no_jitter(), false);
        // The partition's log: 200 records, some after a gap (a transaction marker), and
        // sometimes a marker at its end; the same log for every schedule of one seed.
        let mut layout = Dice(seed | 1);
        let mut log = Vec::new();
        let mut offset = 0i64;
        for _ in 0..200 {
            let gap = layout.roll(10) == 0;
            if gap {
                offset += 1 + layout.roll(2) as i64;
            }
            log.push((offset, gap));
            offset += 1;
        }
        let trailing_marker = layout.roll(2) == 0;
        let mut dice = Dice(seed.rotate_left(17) | 1);
        let mut watermark = Watermark::new();
        let mut now = Instant::now();
        let total = log.len();
        let (mut delivered, mut sent) = (0usize, 0usize);
        let mut last_delivered: Option<i64> = None;
        let mut granted = limits.window;
        // Per running unit: its offsets, its pass, whether it holds its markers.
        let mut running: VecDeque<(Vec<i64>, Pass, bool)> = VecDeque::new();
        let mut first_reports = Vec::new();
        let mut most_running = 0;
        for step in 0..200_000 {
            let settling = delivered >= total;
            match dice.roll(5) {
                0 if granted > 0 && delivered < total => {
                    let n = (1 + dice.roll(6) as usize)
                        .min(granted)
                        .min(total - delivered);
                    for &(offset, gap) in &log[delivered..delivered + n] {
                        if gap {
                            // The driver reports the gap before the record after it.
                            s.receive_skip(last_delivered, offset);
                        }
                        s.receive([(offset, offset)]);
                        last_delivered = Some(offset);
                    }
                    delivered += n;
                    granted -= n;
                    if delivered == total && trailing_marker {
                        s.receive_skip(last_delivered, offset + 1);
                    }
                }
                1 => match s.next(now) {
                    Next::Skip { after, position } => {
                        assert!(running.is_empty(), "a skip beside running work");
                        assert_eq!(
                            watermark.highest_reported(),
                            after,
                            "a skip overtook records"
                        );
                        assert!(watermark.skip_gap(after, position));
                    }
                    Next::Batch(batch) => {
                        assert!(batch.len() <= batch_size);
                        assert!(
                            running
                                .iter()
                                .all(|(_, pass, held)| *pass == Pass::First && *held),
                            "a batch beside one that does not hold its markers yet"
                        );
                        let offsets = batch.iter().map(|(o, _)| *o).collect();
                        running.push_back((offsets, Pass::First, false));
                        sent += batch.len();
                    }
                    Next::Retry(retries) => {
                        assert!(running.is_empty(), "a retry beside running work");
                        let offsets = retries.iter().map(|(o, _)| *o).collect();
                        running.push_back((offsets, Pass::Retry, false));
                    }
                    Next::Idle if delivered == total && running.is_empty() => {
                        assert_eq!(s.backlog_len(), 0, "idle with Unknown records");
                        assert_eq!(s.in_flight(), 0);
                        break;
                    }
                    Next::WaitUntil(_) | Next::Idle | Next::Busy => {}
                },
                // A running unit's marker insert returns, in any order.
                3 if !running.is_empty() => {
                    let slot = dice.roll(running.len() as u64) as usize;
                    running[slot].2 = true;
                    s.holds_markers(slot);
                }
                2 if !running.is_empty() => {
                    let (offsets, pass, _) = running.pop_front().expect("a running unit");
                    s.finished();
                    // After all records arrived, the database recovers so everything resolves.
                    let down = !settling && dice.roll(8) == 0;
                    for offset in offsets {
                        let resolved = settling || (!down && dice.roll(10) != 0);
                        if pass == Pass::First {
                            assert!(watermark.report(offset, resolved), "out of order: {offset}");
                            first_reports.push(offset);
                        }
                        if resolved {
                            if pass == Pass::Retry {
                                assert!(s.resolved(offset));
                                assert!(watermark.resolve(offset));
                            }
                        } else {
                            let failure = if down { unavailable() } else { rejected() };
                            s.unknown(offset, offset, failure, now, 0.5);
                        }
                    }
                    if !down {
                        s.database_answered(now);
                    }
                }
                _ => now += Duration::from_millis(1 + dice.roll(40)),
            }
            most_running = most_running.max(s.running().count());
            assert!(s.running().count() <= depth, "step {step}: too many units");
            if s.running().any(|u| matches!(u, Running::Retry(_))) {
                assert_eq!(s.running().count(), 1, "a retry runs alone");
            }
            assert!(
                s.backlog_len() <= max_unresolved,
                "the backlog outgrew its bound"
            );
            if let Some(more) = s.demand() {
                granted += more;
            }
        }
        assert_eq!(sent, total, "every record ran once as new");
        assert_eq!(first_reports.len(), total);
        assert!(first_reports.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(watermark.unresolved_count(), 0);
        (watermark.position(), most_running)
    }

    #[test]
    fn the_simulation_finishes_a_partition_at_its_end() {
        for depth in 1..=3 {
            let runs: Vec<(Option<i64>, usize)> =
                (1..=8).map(|seed| simulate(depth, 4, 12, seed)).collect();
            assert!(runs.iter().all(|(position, _)| position.is_some()));
            let most_running = runs.iter().map(|(_, most)| *most).max();
            assert_eq!(most_running, Some(depth), "the pipeline filled");
        }
    }

    proptest::proptest! {
        /// Pipelining changes when units run, never what the watermark makes of them: every
        /// record is reported once, in offset order, Unknown ones hold the position until they
        /// resolve, skips wait for the records before them, the backlog stays bounded, and the
        /// partition ends at the same position as with one unit at a time.
        #[test]
        fn pipelined_units_keep_the_watermark_rules(
            seed in proptest::prelude::any::<u64>(),
            depth in 2usize..=4,
            batch_size in 1usize..=8,
            extra_backlog in 0usize..=16,
        ) {
            let max_unresolved = batch_size * depth + extra_backlog;
            let (pipelined, _) = simulate(depth, batch_size, max_unresolved, seed);
            let (serial, _) = simulate(1, batch_size, max_unresolved, seed);
            proptest::prop_assert!(pipelined.is_some());
            proptest::prop_assert_eq!(pipelined, serial);
        }
    }
}
