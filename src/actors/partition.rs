//! The partition actor: resolves its partition's records serially through the inbox, reports
//! each outcome to the checkpoint, and keeps Unknown records in a bounded backlog that is
//! retried with capped exponential backoff while later records go on.
//!
//! Backpressure: the actor takes a record from its queue only while the backlog is below its
//! bound and no operator paused it; the driver thread pauses the partition at the consumer as
//! soon as the queue is full, so memory stays bounded during a database outage.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use actix::prelude::*;
use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use rdkafka::message::{Message as _, OwnedMessage};
use tokio::sync::oneshot;

use super::checkpoint::Checkpoint;
use super::messages::{
    ApplyAction, BacklogResolved, Drain, GetPartitionStatus, OutcomeReported, PartitionAction,
    Record,
};
use super::status::{BacklogEntry, OutcomeCounts, PartitionState, PartitionStatus, RecentOutcome};
use super::work::{Executed, Work, execute, execute_batch};
use crate::backoff::Backoff;
use crate::domain::Outcome;
use crate::metrics::Metrics;

const RECENT_OUTCOMES: usize = 50;

/// What every partition actor shares.
pub struct PartitionDeps {
    pub topic: String,
    pub pool: Pool,
    pub checkpoint: Addr<Checkpoint>,
    pub metrics: Metrics,
    pub max_unresolved: usize,
    pub retry: Backoff,
    pub max_payload_bytes: usize,
    /// Records per inbox transaction (1: the SPEC §4 contract, one event at a time).
    pub batch_size: usize,
    pub batch_linger: Duration,
}

struct Unresolved {
    work: Work,
    attempts: u32,
    last_error: String,
    first_seen: DateTime<Utc>,
    next_retry: Instant,
    next_retry_at: DateTime<Utc>,
}

/// What the actor is executing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Busy {
    Idle,
    /// One Unknown record, retried alone.
    Retry,
    /// This many new records in one transaction.
    Batch(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    Running,
    Draining,
}

/// The actor of one assigned partition.
pub struct PartitionActor {
    partition: i32,
    deps: Arc<PartitionDeps>,
    queued: Arc<AtomicUsize>,
    pending: VecDeque<OwnedMessage>,
    backlog: BTreeMap<i64, Unresolved>,
    busy: Busy,
    linger_timer: Option<SpawnHandle>,
    /// The linger for the current batch has passed: take what is there.
    lingered: bool,
    lifecycle: Lifecycle,
    operator_paused: bool,
    retry_timer: Option<SpawnHandle>,
    drained: Vec<oneshot::Sender<()>>,
    counts: OutcomeCounts,
    recent: VecDeque<RecentOutcome>,
    last_offset: Option<i64>,
    last_record_time: Option<DateTime<Utc>>,
}

impl PartitionActor {
    pub fn new(partition: i32, deps: Arc<PartitionDeps>, queued: Arc<AtomicUsize>) -> Self {
        PartitionActor {
            partition,
            deps,
            queued,
            pending: VecDeque::new(),
            backlog: BTreeMap::new(),
            busy: Busy::Idle,
            linger_timer: None,
            lingered: false,
            lifecycle: Lifecycle::Running,
            operator_paused: false,
            retry_timer: None,
            drained: Vec::new(),
            counts: OutcomeCounts::default(),
            recent: VecDeque::new(),
            last_offset: None,
            last_record_time: None,
        }
    }

    fn state(&self) -> PartitionState {
        if self.lifecycle == Lifecycle::Draining {
            PartitionState::Draining
        } else if self.operator_paused {
            PartitionState::Paused
        } else if self.backlog.len() >= self.deps.max_unresolved {
            PartitionState::BacklogFull
        } else if !self.backlog.is_empty() {
            PartitionState::Retrying
        } else {
            PartitionState::Running
        }
    }

    /// Starts the next unit of work if idle: a due retry first, alone (it blocks the
    /// watermark, and alone it cannot be held back by another record); else a batch of new
    /// records if the backlog has room, after a short linger for the batch to fill; otherwise
    /// arms a timer for the next retry.
    fn schedule(&mut self, ctx: &mut Context<Self>) {
        if self.busy != Busy::Idle {
            return;
        }
        if self.lifecycle == Lifecycle::Draining {
            for done in self.drained.drain(..) {
                let _ = done.send(());
            }
            return;
        }
        let now = Instant::now();
        let due = self
            .backlog
            .iter()
            .find(|(_, entry)| entry.next_retry <= now)
            .map(|(offset, entry)| (*offset, entry.work.clone()));
        if let Some((offset, work)) = due {
            self.busy = Busy::Retry;
            let pool = self.deps.pool.clone();
            ctx.spawn(execute(pool, work.clone()).into_actor(self).map(
                move |executed, actor, ctx| {
                    actor.busy = Busy::Idle;
                    actor.finish(offset, true, work, executed);
                    actor.schedule(ctx);
                },
            ));
            return;
        }
        let room = self.deps.max_unresolved.saturating_sub(self.backlog.len());
        if self.operator_paused || room == 0 || self.pending.is_empty() {
            self.arm_retry_timer(ctx);
            return;
        }
        let wanted = self.deps.batch_size.min(room);
        if self.pending.len() < wanted && !self.deps.batch_linger.is_zero() && !self.lingered {
            if self.linger_timer.is_none() {
                self.linger_timer = Some(ctx.run_later(self.deps.batch_linger, |actor, ctx| {
                    actor.linger_timer = None;
                    actor.lingered = true;
                    actor.schedule(ctx);
                }));
            }
            return;
        }
        self.lingered = false;
        if let Some(handle) = self.linger_timer.take() {
            ctx.cancel_future(handle);
        }
        let take = wanted.min(self.pending.len());
        let mut offsets = Vec::with_capacity(take);
        let mut works = Vec::with_capacity(take);
        for record in self.pending.drain(..take) {
            offsets.push(record.offset());
            works.push(Work::from_record(
                &self.deps.topic,
                &record,
                self.deps.max_payload_bytes,
            ));
            self.last_offset = Some(record.offset());
            self.last_record_time = record
                .timestamp()
                .to_millis()
                .and_then(DateTime::from_timestamp_millis);
        }
        self.queued.fetch_sub(take, Ordering::AcqRel);
        self.busy = Busy::Batch(take);
        let pool = self.deps.pool.clone();
        ctx.spawn(
            async move {
                let executed = execute_batch(pool, &works).await;
                (works, executed)
            }
            .into_actor(self)
            .map(move |(works, executed), actor, ctx| {
                actor.busy = Busy::Idle;
                debug_assert_eq!(works.len(), executed.len());
                for ((offset, work), executed) in offsets.into_iter().zip(works).zip(executed) {
                    actor.finish(offset, false, work, executed);
                }
                actor.schedule(ctx);
            }),
        );
    }

    fn arm_retry_timer(&mut self, ctx: &mut Context<Self>) {
        if let Some(handle) = self.retry_timer.take() {
            ctx.cancel_future(handle);
        }
        let Some(earliest) = self.backlog.values().map(|e| e.next_retry).min() else {
            return;
        };
        let wait = earliest.saturating_duration_since(Instant::now());
        self.retry_timer = Some(ctx.run_later(wait, |actor, ctx| {
            actor.retry_timer = None;
            actor.schedule(ctx);
        }));
    }

    fn finish(&mut self, offset: i64, retry: bool, work: Work, executed: Executed) {
        let partition = self.partition;
        let event_id = work.event_id().map(str::to_owned);
        let dead_letter_reason = match &work {
            Work::DeadLetter(letter) => Some(letter.rejection.reason),
            Work::Event { .. } => None,
        };
        self.deps
            .metrics
            .observe_outcome(partition, executed.outcome, executed.elapsed);
        match executed.outcome {
            Outcome::Applied => self.counts.applied += 1,
            Outcome::AlreadyApplied => self.counts.already_applied += 1,
            Outcome::DeadLettered => self.counts.dead_lettered += 1,
            Outcome::Unknown => self.counts.unknown_attempts += 1,
        }
        if let Some(cause) = executed.duplicate {
            *self.counts.duplicates.entry(cause).or_default() += 1;
            self.deps.metrics.observe_duplicate(partition, cause);
        }
        if let (Outcome::DeadLettered, Some(reason)) = (executed.outcome, dead_letter_reason) {
            *self
                .counts
                .dead_letters
                .entry(reason.as_str().to_owned())
                .or_default() += 1;
            self.deps.metrics.observe_dead_letter(partition, reason);
            tracing::info!(
                partition,
                offset,
                reason = reason.as_str(),
                "record dead-lettered"
            );
        }
        self.remember(offset, event_id.clone(), &executed);

        let resolved = executed.outcome.is_resolved();
        if !retry {
            self.deps.checkpoint.do_send(OutcomeReported {
                partition,
                offset,
                resolved,
            });
        }
        if resolved {
            if retry && self.backlog.remove(&offset).is_some() {
                tracing::info!(partition, offset, event_id, outcome = %executed.outcome, "unknown record resolved");
                self.deps
                    .checkpoint
                    .do_send(BacklogResolved { partition, offset });
            }
        } else {
            let error = executed.error.unwrap_or_default();
            let now = Instant::now();
            let entry = self.backlog.entry(offset).or_insert_with(|| Unresolved {
                work,
                attempts: 0,
                last_error: String::new(),
                first_seen: Utc::now(),
                next_retry: now,
                next_retry_at: Utc::now(),
            });
            entry.attempts += 1;
            let delay = self.deps.retry.delay_random(entry.attempts);
            entry.next_retry = now + delay;
            entry.next_retry_at =
                Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default();
            tracing::warn!(
                partition,
                offset,
                event_id,
                attempt = entry.attempts,
                retry_in_ms = delay.as_millis() as u64,
                error = %error,
                "record outcome unknown; will retry"
            );
            entry.last_error = error;
        }
        self.deps
            .metrics
            .set_backlog(partition, self.backlog.len(), self.oldest_unknown_age());
    }

    fn remember(&mut self, offset: i64, event_id: Option<String>, executed: &Executed) {
        if self.recent.len() == RECENT_OUTCOMES {
            self.recent.pop_back();
        }
        self.recent.push_front(RecentOutcome {
            offset,
            event_id,
            outcome: executed.outcome,
            duplicate: executed.duplicate,
            detail: executed.error.clone(),
            at: Utc::now(),
        });
    }

    fn oldest_unknown_age(&self) -> Duration {
        self.backlog
            .values()
            .map(|e| e.first_seen)
            .min()
            .map(|first| (Utc::now() - first).to_std().unwrap_or_default())
            .unwrap_or_default()
    }

    fn snapshot(&self) -> PartitionStatus {
        PartitionStatus {
            partition: self.partition,
            state: self.state(),
            operator_paused: self.operator_paused,
            in_flight: self.pending.len()
                + match self.busy {
                    Busy::Batch(records) => records,
                    Busy::Idle | Busy::Retry => 0,
                },
            backlog: self
                .backlog
                .iter()
                .map(|(offset, entry)| BacklogEntry {
                    offset: *offset,
                    event_id: entry.work.event_id().map(str::to_owned),
                    attempts: entry.attempts,
                    last_error: entry.last_error.clone(),
                    first_seen: entry.first_seen,
                    next_retry: entry.next_retry_at,
                })
                .collect(),
            counts: self.counts.clone(),
            last_offset: self.last_offset,
            last_record_time: self.last_record_time,
            recent: self.recent.iter().cloned().collect(),
        }
    }
}

impl Actor for PartitionActor {
    type Context = Context<Self>;

    fn started(&mut self, _ctx: &mut Context<Self>) {
        tracing::info!(partition = self.partition, "partition actor started");
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.deps.metrics.forget_partition(self.partition);
        tracing::info!(
            partition = self.partition,
            unresolved = self.backlog.len(),
            "partition actor stopped"
        );
    }
}

impl Handler<Record> for PartitionActor {
    type Result = ();

    fn handle(&mut self, Record(record): Record, ctx: &mut Context<Self>) {
        if self.lifecycle == Lifecycle::Draining {
            // Not ours to process any more; the next owner reads it from the committed offset.
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        debug_assert_eq!(record.partition(), self.partition);
        self.pending.push_back(record);
        self.schedule(ctx);
    }
}

impl Handler<Drain> for PartitionActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, drain: Drain, ctx: &mut Context<Self>) -> Self::Result {
        self.lifecycle = Lifecycle::Draining;
        let dropped = self.pending.len();
        self.queued.fetch_sub(dropped, Ordering::AcqRel);
        self.pending.clear();
        if let Some(handle) = self.retry_timer.take() {
            ctx.cancel_future(handle);
        }
        let (done, finished) = oneshot::channel();
        self.drained.push(done);
        self.schedule(ctx);
        let partition = self.partition;
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

    fn handle(&mut self, _: GetPartitionStatus, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.snapshot())
    }
}

impl Handler<ApplyAction> for PartitionActor {
    type Result = ();

    fn handle(&mut self, ApplyAction(action): ApplyAction, ctx: &mut Context<Self>) {
        tracing::info!(
            partition = self.partition,
            action = action.as_str(),
            "operator action"
        );
        match action {
            PartitionAction::RetryNow => {
                let now = Instant::now();
                for entry in self.backlog.values_mut() {
                    entry.next_retry = now;
                    entry.next_retry_at = Utc::now();
                }
            }
            PartitionAction::Pause => self.operator_paused = true,
            PartitionAction::Resume => self.operator_paused = false,
        }
        self.schedule(ctx);
    }
}
