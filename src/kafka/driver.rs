//! The driver thread: polls the consumer (which serves rebalance, commit and statistics
//! callbacks), routes each record to its partition actor, pauses a partition whose actor's
//! queue is full and resumes it when there is room, and executes commit commands.
//! librdkafka is never called from an actix thread.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};

use super::context::{HistoryContext, Route};
use crate::actors::messages::{CommitCompleted, DriverStopped, GapObserved, Record};

const POLL_TIMEOUT: Duration = Duration::from_millis(50);
/// The poll timeout while records wait in a stash, so they move on as soon as there is room.
const POLL_TIMEOUT_STASHED: Duration = Duration::from_millis(2);
/// How often the consumer's position is compared with the last delivered records.
const GAP_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// How many records the driver may hold for each partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Records handed to the partition actor and not yet taken up by it.
    pub queue: usize,
    /// Bytes of records the driver may hold back, over all partitions, while their queues are
    /// full; a partition holding its share pauses. Pausing makes librdkafka drop its prefetch,
    /// and a resumed partition is fetched again only at the broker thread's next wake-up (up
    /// to a second later), so the buffer absorbs ordinary bursts and only a partition that
    /// stays behind (a database outage) is paused.
    pub buffer_bytes: usize,
}

/// What the actors ask of the driver thread.
#[derive(Debug)]
pub enum DriverCommand {
    /// Commit these positions (next offset to read) for partitions still assigned.
    Commit(Vec<(i32, i64)>),
    /// Leave the group: revoke (drain and commit) every partition, then close.
    Shutdown,
}

/// Starts the driver thread; it owns the consumer and drops it (closing it) on its way out.
pub fn spawn_driver(
    consumer: BaseConsumer<HistoryContext>,
    commands: Receiver<DriverCommand>,
    limits: Limits,
    shutdown_deadline: Duration,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("kafka-driver".into())
        .spawn(move || {
            let supervisor = consumer.context().supervisor.clone();
            let result = drive(&consumer, &commands, limits, shutdown_deadline);
            // Closing leaves the group; any partitions still assigned are revoked through the
            // context first. Done here, never on an actix thread: it blocks.
            drop(consumer);
            supervisor.do_send(DriverStopped {
                error: result.err(),
            });
        })
}

fn drive(
    consumer: &BaseConsumer<HistoryContext>,
    commands: &Receiver<DriverCommand>,
    limits: Limits,
    shutdown_deadline: Duration,
) -> Result<(), String> {
    // librdkafka reports no result for a manual asynchronous commit (rust-rdkafka sets no
    // offset_commit_cb), so commits are synchronous, on a thread of their own: a slow broker
    // never stops this thread from routing records and serving rebalances.
    std::thread::scope(|scope| {
        let (jobs, pending_jobs) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("kafka-committer".into())
            .spawn_scoped(scope, move || committer(consumer, pending_jobs))
            .map_err(|e| format!("could not start the committer thread: {e}"))?;
        poll_loop(consumer, commands, &jobs, limits, shutdown_deadline);
        Ok(())
    })
}

fn poll_loop(
    consumer: &BaseConsumer<HistoryContext>,
    commands: &Receiver<DriverCommand>,
    jobs: &std::sync::mpsc::Sender<Vec<(i32, i64)>>,
    limits: Limits,
    shutdown_deadline: Duration,
) {
    let context = consumer.context();
    let mut closing_since: Option<Instant> = None;
    let mut gaps_checked = Instant::now();
    loop {
        for command in commands.try_iter() {
            match command {
                DriverCommand::Commit(offsets) => {
                    let _ = jobs.send(offsets);
                }
                DriverCommand::Shutdown => {
                    if closing_since.is_none() {
                        closing_since = Some(Instant::now());
                        consumer.unsubscribe();
                    }
                }
            }
        }
        feed_stashed(
            consumer,
            &mut context.routes.lock().expect("routes lock"),
            limits,
        );
        if gaps_checked.elapsed() >= GAP_CHECK_INTERVAL {
            gaps_checked = Instant::now();
            report_gaps(consumer);
        }
        if let Some(since) = closing_since {
            let drained = context.routes.lock().expect("routes lock").is_empty();
            if drained || since.elapsed() > shutdown_deadline {
                return;
            }
        }
        let stashed = context
            .routes
            .lock()
            .expect("routes lock")
            .values()
            .any(|r| !r.stash.is_empty());
        let timeout = if stashed {
            POLL_TIMEOUT_STASHED
        } else {
            POLL_TIMEOUT
        };
        match consumer.poll(timeout) {
            Some(Ok(message)) => route(consumer, message.detach(), limits),
            Some(Err(error)) => {
                context.metrics.observe_kafka_error();
                tracing::warn!(error = %error, "kafka consumer error");
            }
            None => {}
        }
    }
}

/// Commits positions for partitions still assigned, newest job per partition first, and
/// reports each result to the checkpoint. Ends when the poll loop drops its sender.
fn committer(consumer: &BaseConsumer<HistoryContext>, jobs: Receiver<Vec<(i32, i64)>>) {
    let context = consumer.context();
    while let Ok(first) = jobs.recv() {
        // Jobs that queued up while the broker was slow: only the newest position matters.
        let mut latest: BTreeMap<i32, i64> = BTreeMap::new();
        for (partition, offset) in std::iter::once(first).chain(jobs.try_iter()).flatten() {
            let entry = latest.entry(partition).or_insert(offset);
            *entry = (*entry).max(offset);
        }
        let owned: Vec<(i32, i64)> = {
            let routes = context.routes.lock().expect("routes lock");
            latest
                .into_iter()
                .filter(|(p, _)| routes.contains_key(p))
                .collect()
        };
        if owned.is_empty() {
            continue;
        }
        let mut tpl = TopicPartitionList::new();
        for (partition, offset) in &owned {
            let _ = tpl.add_partition_offset(&context.topic, *partition, Offset::Offset(*offset));
        }
        let result = consumer.commit(&tpl, CommitMode::Sync);
        context.checkpoint.do_send(CommitCompleted {
            offsets: owned,
            error: result.err().map(|e| e.to_string()),
        });
    }
}

fn route(consumer: &BaseConsumer<HistoryContext>, message: OwnedMessage, limits: Limits) {
    let context = consumer.context();
    let mut routes = context.routes.lock().expect("routes lock");
    let partition = message.partition();
    let Some(route) = routes.get_mut(&partition) else {
        tracing::debug!(
            partition,
            offset = message.offset(),
            "record for a partition not assigned here"
        );
        return;
    };
    if route.stash.is_empty() && route.route.queued.load(Ordering::Acquire) < limits.queue {
        send(route, message);
        return;
    }
    let share = limits.buffer_bytes / routes.len().max(1);
    let route = routes.get_mut(&partition).expect("looked up above");
    route.stash_bytes += stashed_size(&message);
    route.stash.push_back(message);
    if !route.paused && route.stash_bytes >= share {
        route.paused = set_paused(consumer, &context.topic, partition, true);
    }
}

/// What a held-back record costs in memory, roughly.
fn stashed_size(message: &OwnedMessage) -> usize {
    const OVERHEAD: usize = 128;
    OVERHEAD + message.payload().map_or(0, <[u8]>::len) + message.key().map_or(0, <[u8]>::len)
}

fn send(route: &mut Route, message: OwnedMessage) {
    route.route.queued.fetch_add(1, Ordering::AcqRel);
    route.route.recipient.do_send(Record(message));
}

fn feed_stashed(
    consumer: &BaseConsumer<HistoryContext>,
    routes: &mut BTreeMap<i32, Route>,
    limits: Limits,
) {
    let topic = &consumer.context().topic;
    for (partition, route) in routes.iter_mut() {
        while !route.stash.is_empty() && route.route.queued.load(Ordering::Acquire) < limits.queue {
            let message = route.stash.pop_front().expect("not empty");
            route.stash_bytes -= stashed_size(&message);
            send(route, message);
        }
        if route.paused && route.stash.is_empty() {
            route.paused = !set_paused(consumer, topic, *partition, false);
        }
    }
}

/// Tells the checkpoint where the consumer's position has stepped over offsets that hold no
/// record (a transaction's commit marker after the last record, aborted records): only this
/// thread sees both the position and the last delivered record, so the two are consistent.
fn report_gaps(consumer: &BaseConsumer<HistoryContext>) {
    let context = consumer.context();
    let Ok(positions) = consumer.position() else {
        return;
    };
    let routes = context.routes.lock().expect("routes lock");
    for (partition, route) in routes.iter() {
        let (Some(last_delivered), true) = (route.last_seen, route.stash.is_empty()) else {
            continue;
        };
        let position = positions
            .find_partition(&context.topic, *partition)
            .map(|e| e.offset());
        if let Some(Offset::Offset(position)) = position {
            if position > last_delivered + 1 {
                context.checkpoint.do_send(GapObserved {
                    partition: *partition,
                    last_delivered,
                    position,
                });
            }
        }
    }
}

/// Pauses or resumes fetching one partition; returns whether it worked.
fn set_paused(
    consumer: &BaseConsumer<HistoryContext>,
    topic: &str,
    partition: i32,
    pause: bool,
) -> bool {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    let result = if pause {
        consumer.pause(&tpl)
    } else {
        consumer.resume(&tpl)
    };
    match result {
        Ok(()) => {
            consumer
                .context()
                .metrics
                .set_fetch_paused(partition, pause);
            tracing::debug!(partition, pause, "partition fetch state changed");
            true
        }
        Err(error) => {
            tracing::warn!(partition, pause, error = %error, "could not change the partition's fetch state");
            false
        }
    }
}
