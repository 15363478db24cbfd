//! The partition actor: resolves its partition's records through the inbox (a batch at a time,
//! the next full batch sent while the previous commits), reports each outcome to the checkpoint
//! in offset order, and keeps Unknown records in a bounded backlog that is retried with capped
//! exponential backoff while later records go on.
//!
//! The decisions live in [`schedule`] (pure); this actor carries them out: it runs the work
//! against the database, asks the driver thread for records as its window empties, and keeps
//! the counts and recent outcomes its status shows. Backpressure is the window: a partition
//! that takes no new records (backlog at its bound, operator pause) asks for none, so its
//! librdkafka queue fills and fetching stops, and memory stays bounded while the database is
//! down.

pub mod failures;
pub mod guard;
pub mod queued;
pub mod schedule;
pub mod transactions;

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use transactions::TransactionsInFlight;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use tokio::sync::oneshot;

use super::checkpoint::Checkpoint;
use super::messages::{
    ApplyAction, Assignment, BacklogResolved, DeadLetterRecord, Drain, Fetched, GetPartitionStatus,
    KafkaLink, KafkaRequest, OutcomesReported, PartitionAction, PartitionKeepingUp, SkipOutcome,
    SkipRefused, SkipReported, SkipTicket,
};
use super::status::{
    BacklogDetail, BacklogEntry, GuardStatus, OutcomeCounts, PartitionState, PartitionStatus,
    RecentOutcome,
};
use crate::backoff::Backoff;
use crate::domain::{DuplicateCause, Outcome, RejectReason, Rejection, TicketEvent, UnknownCause};
use crate::inbox::MarkersHeld;
use crate::inbox::PgInboxError;
use crate::inbox::batch::HeldElsewhere;
use crate::inbox::batch::Shape;
use crate::inbox::guards::{self, GuardRow};
use crate::inbox::recently_applied::{Copies, RecentlyApplied};
use crate::metrics::{Metrics, PartitionMetrics};
use crate::work::{Executed, Policy, Work, execute_batch};
use failures::{FailureLog, Line, SUMMARY_EVERY};
use guard::{Change, Guard};
use queued::{Ahead, Queued, Source};
use schedule::{Failure, Limits, Next, Pass, Phase, Schedule};

const RECENT_OUTCOMES: usize = 50;

/// What every partition actor shares.
pub struct PartitionDeps {
    pub topic: String,
    pub pool: Pool,
    pub checkpoint: Addr<Checkpoint>,
    pub kafka: KafkaLink,
    pub metrics: Metrics,
    pub limits: Limits,
    /// The member's transactions in flight, which bound pipelining.
    pub transactions: TransactionsInFlight,
    pub retry: Backoff,
    pub max_payload_bytes: usize,
    /// The longest one unit of database work may take before it counts as Unknown.
    pub work_timeout: Duration,
    /// Records rejected by the database in a row that may be dead-lettered (see [`guard`]).
    pub max_consecutive_rejections: u32,
}

/// How often a partition's guard is read again while the database does not answer.
const GUARD_READ_RETRY: Duration = Duration::from_secs(1);

/// How often a failing partition's summary is checked for being due.
const FAILURE_TICK: Duration = Duration::from_secs(1);

/// The actor of one assignment of a partition.
pub struct PartitionActor {
    assignment: Assignment,
    deps: Arc<PartitionDeps>,
    /// New records wait unparsed (a parsed record is about three times the size); a batch is
    /// parsed when it starts, or ahead of it while the batches before it run (`prepare`).
    schedule: Schedule<Work, Queued>,
    guard: Guard,
    timer: Option<(Instant, SpawnHandle)>,
    drained: Vec<oneshot::Sender<()>>,
    counts: OutcomeCounts,
    recent: VecDeque<RecentOutcome>,
    last_offset: Option<i64>,
    last_record_time: Option<DateTime<Utc>>,
    intake_stopped: bool,
    /// Whether the schedule was idle at the end of the last `drive` (see `PartitionKeepingUp`).
    idle: bool,
    /// `units_done` when the checkpoint was last told the partition keeps up.
    units_told: u64,
    /// Operators waiting for the outcome of their skip, by offset. Dropped with the actor (a
    /// revoke, a live rewind), they learn that the skip never ran.
    skips: BTreeMap<i64, Vec<oneshot::Sender<SkipOutcome>>>,
    /// What the log was told about the partition's failures (see [`failures`]).
    failures: FailureLog,
    /// Units of work started and not yet accounted for, oldest first. A unit is accounted for
    /// only after every unit started before it, so outcomes count in offset order even when
    /// batches commit out of order.
    units: VecDeque<Unit>,
    /// The number of units accounted for since the actor started (the first in `units`).
    units_done: u64,
    /// First outcomes `(offset, resolved)` not yet sent to the checkpoint: gathered over a
    /// unit of work, sent in one message before anything else goes to the checkpoint.
    reports: Vec<(i64, bool)>,
    /// The partition's outcome series, looked up once.
    series: PartitionMetrics,
    /// The events this assignment applied lately, shared by its batches in flight, which
    /// classify their duplicates from it (see [`RecentlyApplied`]).
    applied: Rc<RefCell<RecentlyApplied>>,
    /// Whether the unit accounted for last applied an event: new events are flowing, and the
    /// next batch goes in one round trip. Otherwise (the assignment's first batch, a replay of
    /// stored events) it inserts its markers first ([`Shape`]).
    applying: bool,
    /// Whether the database gave an outcome for the unit accounted for last: only then is the
    /// next batch parsed ahead of its start (a partition that cannot reach the database keeps
    /// its queue unparsed, as small as it is).
    answering: bool,
    /// Whether a `prepare` is spawned and has not run yet.
    preparing: bool,
    /// The works of the queued records parsed ahead.
    ahead: Ahead,
}

/// A unit of work started and not yet accounted for.
enum Unit {
    /// Still running, with the hashed ids of the events it inserts: a unit started beside it
    /// inserts those ids last (see [`HeldElsewhere`]). Kept only when several batches may be
    /// in flight (empty otherwise).
    Running(Vec<u32>),
    /// Finished, waiting for the units started before it.
    Done(UnitDone),
}

impl Unit {
    fn running_ids(&self) -> &[u32] {
        match self {
            Unit::Running(ids) => ids,
            Unit::Done(_) => &[],
        }
    }

    /// The oldest unit's result, taken from `units` if it has finished.
    fn pop_done(units: &mut VecDeque<Unit>) -> Option<UnitDone> {
        if !matches!(units.front()?, Unit::Done(_)) {
            return None;
        }
        match units.pop_front()? {
            Unit::Done(done) => Some(done),
            Unit::Running(_) => None,
        }
    }
}

/// A finished unit of work, waiting for its turn to be accounted for.
struct UnitDone {
    batch: Vec<(i64, Work)>,
    pass: Pass,
    executed: Vec<Executed>,
    released: Option<Result<bool, PgInboxError>>,
}

impl PartitionActor {
    pub fn new(assignment: Assignment, deps: Arc<PartitionDeps>, paused: bool) -> Self {
        PartitionActor {
            series: deps.metrics.partition(assignment.partition),
            applied: Rc::default(),
            applying: false,
            answering: false,
            preparing: false,
            ahead: Ahead::default(),
            assignment,
            schedule: Schedule::new(deps.limits, deps.retry, paused),
            guard: Guard::new(deps.max_consecutive_rejections),
            deps,
            timer: None,
            drained: Vec::new(),
            counts: OutcomeCounts::default(),
            recent: VecDeque::new(),
            last_offset: None,
            last_record_time: None,
            intake_stopped: false,
            idle: true,
            skips: BTreeMap::new(),
            failures: FailureLog::new(SUMMARY_EVERY),
            units: VecDeque::new(),
            units_done: 0,
            units_told: 0,
            reports: Vec::new(),
        }
    }

    fn partition(&self) -> i32 {
        self.assignment.partition
    }

    /// Carries out the schedule's decisions until something runs or nothing is left to do,
    /// then asks the driver for records if the window has room.
    fn drive(&mut self, ctx: &mut Context<Self>) {
        self.send_reports();
        loop {
            self.schedule
                .set_pipeline_room(self.deps.transactions.has_room());
            match self.schedule.next(Instant::now()) {
                Next::Skip { after, position } => {
                    self.deps.checkpoint.do_send(SkipReported {
                        assignment: self.assignment,
                        after,
                        position,
                    });
                    continue;
                }
                Next::Retry(retries) => {
                    self.run(retries, Pass::Retry, ctx);
                    continue;
                }
                // The next full batch may join it while it commits (`schedule`'s pipelining).
                Next::Batch(records) => {
                    let source = Source::of(&self.deps, self.assignment.partition);
                    let batch = self.ahead.take(records, source);
                    self.run(batch, Pass::First, ctx);
                    continue;
                }
                Next::WaitUntil(at) => self.wake_at(at, ctx),
                Next::Idle | Next::Busy => {}
            }
            break;
        }
        if self.answering
            && !self.preparing
            && self
                .schedule
                .upcoming(Instant::now())
                .is_some_and(|records| !self.ahead.holds(records))
        {
            // Once the runtime has run the other tasks woken so far: the database connection's
            // task then has written the batch just started before its successor is parsed.
            self.preparing = true;
            let turn = fut::wrap_future::<_, Self>(tokio::task::yield_now());
            ctx.spawn(turn.map(|(), actor, _| {
                actor.preparing = false;
                actor.prepare();
            }));
        }
        if self.schedule.drained() {
            for done in self.drained.drain(..) {
                let _ = done.send(());
            }
        }
        if let Some(records) = self.schedule.demand() {
            self.deps.kafka.send(KafkaRequest::Demand {
                assignment: self.assignment,
                records,
            });
        }
        // Keeping up with its log: the checkpoint may commit now instead of at its next tick
        // (after the outcomes, which `send_reports` sent ahead of this on the same mailbox).
        // Said when a unit was accounted for since it was last said, and when the partition
        // runs out of work (a skip or a resolved retry moves the watermark too). A partition
        // behind its log says nothing and is committed on the ticks.
        let idle = self.schedule.idle();
        if idle || !self.answering {
            self.ahead.release();
        }
        let accounted = self.units_done > self.units_told;
        if self.schedule.keeping_up() && (accounted || (idle && !self.idle)) {
            self.units_told = self.units_done;
            self.deps.checkpoint.do_send(PartitionKeepingUp {
                assignment: self.assignment,
            });
        }
        self.idle = idle;
        let stopped = self.schedule.intake_stopped();
        if stopped != self.intake_stopped {
            self.intake_stopped = stopped;
            self.deps
                .metrics
                .set_fetch_paused(self.partition(), stopped);
        }
    }

    /// Parses the batch that runs next while the batches before it run, so that its start
    /// costs only its send: a partition that waits on its own transaction (the member has no
    /// room for another) then hands the database its next batch as soon as that one commits.
    fn prepare(&mut self) {
        if !self.answering {
            return;
        }
        let Some(records) = self.schedule.upcoming(Instant::now()) else {
            return;
        };
        let source = Source::of(&self.deps, self.assignment.partition);
        self.ahead.parse(self.schedule.queued_mut(records), source);
    }

    fn wake_at(&mut self, at: Instant, ctx: &mut Context<Self>) {
        if self.timer.as_ref().is_some_and(|(when, _)| *when == at) {
            return;
        }
        if let Some((_, handle)) = self.timer.take() {
            ctx.cancel_future(handle);
        }
        let wait = at.saturating_duration_since(Instant::now());
        let handle = ctx.run_later(wait, |actor, ctx| {
            actor.timer = None;
            actor.drive(ctx);
        });
        self.timer = Some((at, handle));
    }

    /// Runs records in one unit of work: new ones, or Unknown ones again. Its result is
    /// accounted for once every unit started before it has been (see `units`).
    fn run(&mut self, batch: Vec<(i64, Work)>, pass: Pass, ctx: &mut Context<Self>) {
        if let (Pass::First, Some((offset, work))) = (pass, batch.last()) {
            self.last_offset = Some(*offset);
            self.last_record_time = work.timestamp();
        }
        let deps = self.deps.clone();
        let in_flight = self.deps.transactions.enter();
        let applied = self.applied.clone();
        let partition = self.partition();
        let wants_release = self.guard.wants_release();
        let unit = self.units_done + self.units.len() as u64;
        let elsewhere = HeldElsewhere::new(
            self.units
                .iter()
                .flat_map(|u| u.running_ids().iter().copied())
                .collect(),
        );
        let ids = if self.deps.limits.batches_in_flight > 1 {
            batch
                .iter()
                .filter_map(|(_, w)| w.event().map(TicketEvent::id_hash))
                .collect()
        } else {
            Vec::new()
        };
        // A first pass is copied now, while its records' payloads are in the caches from their
        // parse: the duplicates are classified from these copies once the transaction has
        // committed. A retry's payloads waited in the backlog and are cold anyway; it is copied
        // only if its transaction commits (a database that stays down costs no copies).
        let copies = (pass == Pass::First)
            .then(|| Copies::of(batch.iter().map(|(_, work)| work.event_at())));
        self.units.push_back(Unit::Running(ids));
        // A retry (its batch failed or timed out) goes markers first too: if a lock on the
        // history table held it up, the duplicates among its records resolve without it.
        let shape = if pass == Pass::First && self.applying {
            Shape::OneRoundTrip
        } else {
            Shape::MarkersFirst
        };
        let (held, heard) = MarkersHeld::channel();
        ctx.spawn(heard.into_actor(self).map(move |_, actor, ctx| {
            // Unless it was accounted for already.
            if let Some(slot) = unit.checked_sub(actor.units_done) {
                let slot = usize::try_from(slot).expect("a unit in the queue");
                actor.schedule.holds_markers(slot);
                actor.drive(ctx);
            }
        }));
        ctx.spawn(
            async move {
                let policy = Policy {
                    topic: &deps.topic,
                    timeout: deps.work_timeout,
                    max_consecutive_rejections: deps.max_consecutive_rejections,
                };
                let works: Vec<&Work> = batch.iter().map(|(_, w)| w).collect();
                let executed = execute_batch(
                    &deps.pool, &works, copies, &policy, &applied, held, &elsewhere, shape,
                )
                .await;
                // A record stored ends the partition's run of rejected records, for whoever
                // owns the partition next too. Run after the record's own commit: cut off in
                // between, the run outlives the stored record, and the next record stored ends
                // it (never the other way round, which could let a run dead-letter too much).
                let stored = executed.iter().any(|e| e.outcome == Outcome::Applied);
                let released = if wants_release && stored {
                    Some(guards::release(&deps.pool, &deps.topic, partition).await)
                } else {
                    None
                };
                drop(in_flight);
                UnitDone {
                    batch,
                    pass,
                    executed,
                    released,
                }
            }
            .into_actor(self)
            .map(move |done, actor, ctx| {
                let slot = usize::try_from(unit - actor.units_done).expect("a unit in the queue");
                actor.units[slot] = Unit::Done(done);
                while let Some(done) = Unit::pop_done(&mut actor.units) {
                    actor.units_done += 1;
                    actor.account(done);
                }
                actor.drive(ctx);
            }),
        );
    }

    /// Accounts for a finished unit of work, in the order units started: the schedule, the
    /// counts, the checkpoint, the backlog and the metrics.
    fn account(&mut self, done: UnitDone) {
        let UnitDone {
            batch,
            pass,
            executed,
            released,
        } = done;
        self.schedule.finished();
        debug_assert_eq!(batch.len(), executed.len());
        let answered = executed.iter().any(|e| e.outcome.is_resolved());
        self.answering = answered;
        self.applying = executed.iter().any(|e| e.outcome == Outcome::Applied);
        self.observe(&executed);
        // Only the newest outcomes stay in `recent`: the rest of a batch is not kept.
        let kept_from = batch.len().saturating_sub(RECENT_OUTCOMES);
        // One instant for the unit: its outcomes are accounted for together.
        let now = Utc::now();
        if pass == Pass::First {
            // The reports were handed to the checkpoint with their buffer: one allocation per
            // unit, not a growth from empty.
            self.reports.reserve(batch.len());
        }
        // The works are looked at where they lie (about 200 bytes each, not moved out one by
        // one) and dropped with the batch; an Unknown one is copied into the schedule.
        for (i, (&(offset, ref work), executed)) in batch.iter().zip(executed).enumerate() {
            if i >= kept_from {
                self.remember(offset, work.event_id().map(str::to_owned), &executed, now);
            }
            self.finish(offset, pass, work, executed);
        }
        if let Some(released) = released {
            self.guard_released(released);
        }
        let backlog = self.schedule.backlog_len();
        if let Some(line) = self.failures.settled(Instant::now(), backlog) {
            self.write_failures(line, None);
        }
        let partition = self.partition();
        self.deps.metrics.set_backlog(
            partition,
            self.schedule.backlog_len(),
            self.oldest_unknown_age(),
        );
        if answered {
            self.schedule.database_answered(Instant::now());
        }
    }

    /// The metrics of a unit of work's outcomes, counted once per outcome and cause through
    /// the partition's held series (no label lookup).
    fn observe(&mut self, executed: &[Executed]) {
        for &outcome in Outcome::ALL {
            let mut of_outcome = executed.iter().filter(|e| e.outcome == outcome);
            if let Some(first) = of_outcome.next() {
                let count = 1 + of_outcome.count() as u64;
                self.series.observe_outcomes(outcome, count, first.elapsed);
            }
        }
        let mut causes: Vec<(DuplicateCause, u64)> = Vec::new();
        for cause in executed.iter().filter_map(|e| e.duplicate) {
            match causes.iter_mut().find(|(c, _)| *c == cause) {
                Some((_, count)) => *count += 1,
                None => causes.push((cause, 1)),
            }
        }
        for (cause, count) in causes {
            self.series.observe_duplicates(cause, count);
        }
    }

    /// Counts, logs and reports one record's outcome: a first outcome goes to the checkpoint,
    /// an Unknown one to the backlog, a retried one that resolved leaves the backlog.
    fn finish(&mut self, offset: i64, pass: Pass, work: &Work, executed: Executed) {
        let partition = self.partition();
        match executed.outcome {
            Outcome::Applied => self.counts.applied += 1,
            Outcome::AlreadyApplied => self.counts.already_applied += 1,
            Outcome::DeadLettered => self.counts.dead_lettered += 1,
            Outcome::Unknown => self.counts.unknown_attempts += 1,
        }
        if let Some(cause) = executed.duplicate {
            *self.counts.duplicates.entry(cause).or_default() += 1;
        }
        if let (Outcome::DeadLettered, Some(reason)) = (executed.outcome, executed.reason) {
            *self
                .counts
                .dead_letters
                .entry(reason.as_str().to_owned())
                .or_default() += 1;
            self.deps.metrics.observe_dead_letter(partition, reason);
            if reason == RejectReason::RejectedByDatabase {
                tracing::warn!(
                    partition,
                    offset,
                    event_id = work.event_id(),
                    error = executed.error.as_deref().unwrap_or_default(),
                    "record rejected by the database for good; dead-lettered"
                );
            } else {
                tracing::info!(
                    partition,
                    offset,
                    reason = reason.as_str(),
                    "record dead-lettered"
                );
            }
        }
        self.watch_rejections(offset, &executed);

        let resolved = executed.outcome.is_resolved();
        if pass == Pass::First {
            self.reports.push((offset, resolved));
        }
        if resolved {
            if pass == Pass::Retry && self.schedule.resolved(offset) {
                self.settle_skips(offset, &executed);
                self.failures.resolved();
                let event_id = work.event_id();
                tracing::debug!(partition, offset, event_id, outcome = %executed.outcome, "unknown record resolved");
                self.send_reports();
                self.deps.checkpoint.do_send(BacklogResolved {
                    assignment: self.assignment,
                    offset,
                });
            }
        } else {
            let error = executed.error.unwrap_or_default();
            let cause = executed.cause.unwrap_or(UnknownCause::Refused);
            let failure = Failure {
                error: error.clone(),
                cause,
            };
            let event_id = work.event_id().map(str::to_owned);
            let now = Instant::now();
            let (attempt, delay) =
                self.schedule
                    .unknown(offset, work.clone(), failure, now, rand::random());
            // Per attempt at debug only: the log tells when the partition starts failing, a
            // summary per interval, and when it recovers (`failures`).
            tracing::debug!(
                partition,
                offset,
                event_id,
                attempt,
                cause = cause.as_str(),
                retry_in_ms = delay.as_millis() as u64,
                error = %error,
                "record outcome unknown; will retry"
            );
            if let Some(line) = self.failures.unknown(now, offset, cause, &error) {
                self.write_failures(line, event_id.as_deref());
            }
        }
    }

    /// Sends the first outcomes gathered so far to the checkpoint, in offset order, ahead of
    /// whatever the actor tells it next.
    fn send_reports(&mut self) {
        if !self.reports.is_empty() {
            self.deps.checkpoint.do_send(OutcomesReported {
                assignment: self.assignment,
                outcomes: std::mem::take(&mut self.reports),
            });
        }
    }

    /// Feeds the guard against mass dead-lettering with the database's verdict on a rejected
    /// record; logs and publishes its changes.
    fn watch_rejections(&mut self, offset: i64, executed: &Executed) {
        if let Some(row) = executed.guard {
            let held = executed.outcome == Outcome::Unknown;
            let change = self.guard.decided(offset, row, held);
            self.publish_guard(change, Some(offset));
        }
    }

    /// The run of rejected records was ended in the database (or could not be).
    fn guard_released(&mut self, released: Result<bool, PgInboxError>) {
        match released {
            Ok(_) => {
                let change = self.guard.released();
                self.publish_guard(change, None);
            }
            // The run stays engaged in the database: the next record stored ends it.
            Err(error) => tracing::warn!(
                partition = self.partition(),
                error = %error.text(),
                "could not end the run of rejected records in the database; the next record \
                 stored does"
            ),
        }
    }

    /// Logs a change of the guard and sets its metric.
    fn publish_guard(&self, change: Option<Change>, offset: Option<i64>) {
        let partition = self.partition();
        match change {
            Some(Change::Engaged) => {
                tracing::error!(
                    partition,
                    offset,
                    dead_lettered = self.guard.dead_lettered(),
                    consecutive = self.guard.consecutive(),
                    limit = self.guard.limit(),
                    since = ?self.guard.engaged_at(),
                    "too many records in a row rejected by the database: dead-lettering \
                     stopped, the partition holds them as Unknown until the database is fixed"
                );
                self.deps.metrics.set_dead_letter_guard(partition, true);
            }
            Some(Change::Released) => {
                tracing::info!(
                    partition,
                    "the database stores records again: dead-lettering of rejected records resumes"
                );
                self.deps.metrics.set_dead_letter_guard(partition, false);
            }
            None => {}
        }
    }

    /// Reads the partition's guard from the database (again every [`GUARD_READ_RETRY`] until
    /// it answers): an earlier owner may have left it engaged.
    fn read_guard(&mut self, ctx: &mut Context<Self>) {
        let deps = self.deps.clone();
        let partition = self.partition();
        ctx.spawn(
            async move { guards::load(&deps.pool, &deps.topic, partition).await }
                .into_actor(self)
                .map(move |loaded, actor, ctx| actor.guard_read(loaded, ctx)),
        );
    }

    fn guard_read(&mut self, loaded: Result<GuardRow, PgInboxError>, ctx: &mut Context<Self>) {
        let partition = self.partition();
        match loaded {
            Ok(row) => {
                if self.guard.loaded(row) == Some(Change::Engaged) {
                    tracing::warn!(
                        partition,
                        dead_lettered = self.guard.dead_lettered(),
                        limit = self.guard.limit(),
                        since = ?self.guard.engaged_at(),
                        "dead-lettering stays stopped: an earlier owner of the partition found too \
                         many records in a row rejected by the database; they stay Unknown until \
                         a record is stored"
                    );
                }
                self.deps
                    .metrics
                    .set_dead_letter_guard(partition, self.guard.engaged());
            }
            // Its verdicts teach the actor as well; the read matters for the status of an
            // idle partition, so it is tried again quietly.
            Err(error) if !self.guard.known() => {
                tracing::debug!(partition, error = %error.text(), "could not read the partition's guard; trying again");
                ctx.run_later(GUARD_READ_RETRY, |actor, ctx| {
                    if !actor.guard.known() {
                        actor.read_guard(ctx);
                    }
                });
            }
            Err(_) => {}
        }
    }

    /// Writes a line about the partition's failures (see [`failures`]); `event_id` is the
    /// record's whose attempt started a failure.
    fn write_failures(&self, line: Line, event_id: Option<&str>) {
        let partition = self.partition();
        match line {
            Line::Failing {
                offset,
                cause,
                error,
            } => tracing::warn!(
                partition,
                offset,
                event_id,
                cause = cause.as_str(),
                error = %error,
                summary_every_s = SUMMARY_EVERY.as_secs(),
                "partition failing: a record's outcome is Unknown; it and the next ones are \
                 retried until they resolve"
            ),
            Line::StillFailing {
                failing_for,
                backlog,
                causes,
            } => {
                let main = causes.first();
                tracing::warn!(
                    partition,
                    failing_for_s = failing_for.as_secs(),
                    backlog,
                    attempts = Line::attempts(&causes),
                    unavailable = Line::attempts_of(&causes, UnknownCause::Unavailable),
                    refused = Line::attempts_of(&causes, UnknownCause::Refused),
                    rejected = Line::attempts_of(&causes, UnknownCause::Rejected),
                    cause = main.map(|c| c.cause.as_str()),
                    error = main.map(|c| tracing::field::display(c.last_error.clone())),
                    "partition still failing: attempts ended Unknown in the last interval, by cause"
                );
            }
            Line::Recovered {
                failed_for,
                attempts,
                resolved,
            } => tracing::info!(
                partition,
                failed_for_s = failed_for.as_secs(),
                attempts,
                resolved,
                "partition recovered: every Unknown record resolved"
            ),
        }
    }

    /// Tells the operators waiting for a skip of the record at `offset`, which just resolved,
    /// what became of it: their dead letter stored it, or a retry running already did first.
    fn settle_skips(&mut self, offset: i64, executed: &Executed) {
        let Some(waiting) = self.skips.remove(&offset) else {
            return;
        };
        let skipped = executed.outcome == Outcome::DeadLettered
            && executed.reason == Some(RejectReason::SkippedByOperator);
        let outcome = if skipped {
            SkipOutcome::Done
        } else {
            SkipOutcome::Overtaken(executed.outcome)
        };
        tracing::info!(
            partition = self.partition(),
            offset,
            outcome = outcome.as_str(),
            "an operator's skip settled"
        );
        for operator in waiting {
            let _ = operator.send(outcome);
        }
    }

    /// Replaces an Unknown record's work by its dead letter, run next (an operator's skip).
    fn dead_letter_record(&mut self, request: DeadLetterRecord) -> Result<SkipTicket, SkipRefused> {
        let partition = self.partition();
        let refused = SkipRefused::NotInBacklog {
            partition,
            offset: request.offset,
        };
        let entry = self
            .schedule
            .unresolved(request.offset)
            .ok_or(refused.clone())?;
        let last_error = entry
            .last_error
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        let message = format!(
            "{} (dead-lettered by {} after {} attempts; last error: {last_error})",
            request.comment, request.by, entry.attempts
        );
        let rejection = Rejection::new(RejectReason::SkippedByOperator, message);
        let topic = &self.deps.topic;
        if !self
            .schedule
            .replace(request.offset, |work| work.as_dead_letter(topic, rejection))
        {
            return Err(refused);
        }
        tracing::info!(
            partition,
            offset = request.offset,
            by = %request.by,
            "an operator dead-letters an Unknown record"
        );
        let (tell, ticket) = SkipTicket::new();
        self.skips.entry(request.offset).or_default().push(tell);
        Ok(ticket)
    }

    fn remember(
        &mut self,
        offset: i64,
        event_id: Option<String>,
        executed: &Executed,
        at: DateTime<Utc>,
    ) {
        if self.recent.len() == RECENT_OUTCOMES {
            self.recent.pop_back();
        }
        self.recent.push_front(RecentOutcome {
            offset,
            event_id,
            outcome: executed.outcome,
            duplicate: executed.duplicate,
            detail: executed.error.as_deref().map(str::to_owned),
            at,
        });
    }

    fn oldest_unknown_age(&self) -> Duration {
        self.schedule
            .backlog()
            .map(|(_, e)| e.first_seen.elapsed())
            .max()
            .unwrap_or_default()
    }

    fn snapshot(&self, detail: BacklogDetail) -> PartitionStatus {
        let now = Instant::now();
        let wall = Utc::now();
        // Instants shown as wall-clock times.
        let at = |instant: Instant| {
            if instant >= now {
                wall + chrono::Duration::from_std(instant - now).unwrap_or_default()
            } else {
                wall - chrono::Duration::from_std(now - instant).unwrap_or_default()
            }
        };
        PartitionStatus {
            partition: self.partition(),
            generation: self.assignment.generation,
            state: match self.schedule.phase() {
                Phase::Running => PartitionState::Running,
                Phase::Retrying => PartitionState::Retrying,
                Phase::BacklogFull => PartitionState::BacklogFull,
                Phase::Paused => PartitionState::Paused,
                Phase::Draining => PartitionState::Draining,
            },
            operator_paused: self.schedule.is_paused(),
            in_flight: self.schedule.in_flight(),
            requested: self.schedule.requested(),
            unknown: self.schedule.backlog_len(),
            oldest_unknown_since: self
                .schedule
                .backlog()
                .map(|(_, entry)| entry.first_seen)
                .min()
                .map(at),
            backlog: match detail {
                BacklogDetail::Summary => Vec::new(),
                BacklogDetail::Entries => self
                    .schedule
                    .backlog()
                    .map(|(offset, entry)| BacklogEntry {
                        offset,
                        event_id: entry.work.event_id().map(str::to_owned),
                        attempts: entry.attempts,
                        cause: entry.cause,
                        last_error: entry.last_error.clone(),
                        first_seen: at(entry.first_seen),
                        next_retry: at(entry.next_retry),
                        dead_letter_requested: entry.replacement.is_some(),
                    })
                    .collect(),
            },
            guard: GuardStatus {
                engaged: self.guard.engaged(),
                consecutive: self.guard.consecutive(),
                limit: self.guard.limit(),
                dead_lettered: self.guard.dead_lettered(),
                engaged_at: self.guard.engaged_at(),
                known: self.guard.known(),
            },
            counts: self.counts.clone(),
            last_offset: self.last_offset,
            last_record_time: self.last_record_time,
            recent: self.recent.iter().cloned().collect(),
        }
    }
}

impl Actor for PartitionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        tracing::info!(
            partition = self.partition(),
            generation = self.assignment.generation,
            paused = self.schedule.is_paused(),
            "partition actor started"
        );
        // The guard's series appears once the guard was read: a 0 before it could be wrong
        // for a partition an earlier owner left engaged.
        self.read_guard(ctx);
        ctx.run_interval(FAILURE_TICK, |actor, _ctx| {
            let backlog = actor.schedule.backlog_len();
            if let Some(line) = actor.failures.tick(Instant::now(), backlog) {
                actor.write_failures(line, None);
            }
        });
        self.drive(ctx);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.deps.metrics.forget_partition(self.partition());
        tracing::info!(
            partition = self.partition(),
            unresolved = self.schedule.backlog_len(),
            "partition actor stopped"
        );
    }
}

impl Handler<Fetched> for PartitionActor {
    type Result = ();

    fn handle(&mut self, fetched: Fetched, ctx: &mut Context<Self>) {
        match fetched {
            Fetched::Records(records) => self.schedule.receive(
                records
                    .into_iter()
                    .map(|record| (record.offset, Queued::Received(record))),
            ),
            Fetched::Skipped { after, position } => self.schedule.receive_skip(after, position),
        }
        self.drive(ctx);
    }
}

impl Handler<Drain> for PartitionActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, drain: Drain, ctx: &mut Context<Self>) -> Self::Result {
        self.schedule.drain();
        self.ahead.clear();
        if let Some((_, handle)) = self.timer.take() {
            ctx.cancel_future(handle);
        }
        let (done, finished) = oneshot::channel();
        self.drained.push(done);
        self.drive(ctx);
        let partition = self.partition();
        let wait = drain.deadline.saturating_duration_since(Instant::now());
        Box::pin(
            async move {
                if tokio::time::timeout(wait, finished).await.is_err() {
                    tracing::warn!(
                        partition,
                        "drain deadline passed with a transaction in flight"
                    );
                }
            }
            .into_actor(self)
            .map(|(), _actor, ctx| ctx.stop()),
        )
    }
}

impl Handler<GetPartitionStatus> for PartitionActor {
    type Result = MessageResult<GetPartitionStatus>;

    fn handle(
        &mut self,
        GetPartitionStatus(detail): GetPartitionStatus,
        _ctx: &mut Context<Self>,
    ) -> Self::Result {
        MessageResult(self.snapshot(detail))
    }
}

impl Handler<ApplyAction> for PartitionActor {
    type Result = ();

    fn handle(&mut self, ApplyAction(action): ApplyAction, ctx: &mut Context<Self>) {
        tracing::info!(
            partition = self.partition(),
            action = action.as_str(),
            "operator action"
        );
        match action {
            PartitionAction::RetryNow => self.schedule.retry_all_now(Instant::now()),
            PartitionAction::Pause => self.schedule.set_paused(true),
            PartitionAction::Resume => self.schedule.set_paused(false),
        }
        self.drive(ctx);
    }
}

impl Handler<DeadLetterRecord> for PartitionActor {
    type Result = Result<SkipTicket, SkipRefused>;

    fn handle(&mut self, request: DeadLetterRecord, ctx: &mut Context<Self>) -> Self::Result {
        let ticket = self.dead_letter_record(request)?;
        self.drive(ctx);
        Ok(ticket)
    }
}
