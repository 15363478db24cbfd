//! The consumer context: what librdkafka calls back on the driver thread while it polls.
//!
//! Statistics, errors and logs are passed on at once; errors and statistics also feed the
//! connection's health ([`super::health`]). Rebalances are not carried out inside
//! the callback: the context only takes note of them, and the driver loop carries them out
//! right after the poll returns (split the partition queues and start the actors, or drain
//! them and commit, then tell librdkafka), owning all of its state instead of sharing it with
//! a callback. librdkafka waits for that answer before it fetches or gives up anything.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::Recipient;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, TopicPartitionList};

use super::health::HealthReporter;
use crate::actors::messages::driver::OffsetsObserved;
use crate::domain::ObservedOffsets;
use crate::metrics::Metrics;

/// A rebalance librdkafka asked for, to be carried out by the driver loop.
#[derive(Debug)]
pub enum Rebalance {
    Assign(TopicPartitionList),
    Revoke(TopicPartitionList),
    /// A failed rebalance: the listed partitions are given up without a final commit.
    Error(TopicPartitionList, String),
}

/// The context of the group member.
pub struct KafkaContext {
    pub topic: String,
    pub observed: Recipient<OffsetsObserved>,
    pub metrics: Metrics,
    /// The connection's health, fed by errors, statistics and assignments.
    pub health: HealthReporter,
    /// Rebalances noted during a poll, for the driver loop.
    rebalances: Mutex<Vec<Rebalance>>,
    /// While true, rebalances wait for the driver loop; once it stopped (the consumer is being
    /// closed), librdkafka's own default answer is given at once.
    deferred: AtomicBool,
}

impl KafkaContext {
    pub fn new(
        topic: String,
        observed: Recipient<OffsetsObserved>,
        metrics: Metrics,
        health: HealthReporter,
    ) -> Self {
        KafkaContext {
            topic,
            observed,
            metrics,
            health,
            rebalances: Mutex::new(Vec::new()),
            deferred: AtomicBool::new(true),
        }
    }

    /// The rebalances noted since the last call, oldest first.
    pub fn take_rebalances(&self) -> Vec<Rebalance> {
        std::mem::take(&mut *self.rebalances.lock().expect("rebalances lock"))
    }

    /// From now on, rebalances are answered inside the callback (the driver loop has ended).
    pub fn stop_deferring(&self) {
        self.deferred.store(false, Ordering::Release);
    }
}

/// Gives librdkafka the answer a rebalance needs once the application is done with it.
pub fn acknowledge<C: ConsumerContext>(consumer: &BaseConsumer<C>, rebalance: &Rebalance) {
    let cooperative = matches!(
        consumer.rebalance_protocol(),
        RebalanceProtocol::Cooperative
    );
    let result = match (rebalance, cooperative) {
        (Rebalance::Assign(tpl), true) => consumer.incremental_assign(tpl),
        (Rebalance::Assign(tpl), false) => consumer.assign(tpl),
        (Rebalance::Revoke(tpl) | Rebalance::Error(tpl, _), true) => {
            consumer.incremental_unassign(tpl)
        }
        (Rebalance::Revoke(_) | Rebalance::Error(..), false) => consumer.unassign(),
    };
    if let Err(error) = result {
        tracing::warn!(error = %error, ?rebalance, "librdkafka refused the rebalance answer");
    }
}

impl ClientContext for KafkaContext {
    fn stats(&self, statistics: Statistics) {
        self.health.statistics(&statistics);
        let Some(topic) = statistics.topics.get(&self.topic) else {
            return;
        };
        let observed_at = chrono::Utc::now();
        let partitions = topic
            .partitions
            .values()
            .filter(|p| p.partition >= 0 && p.desired)
            .map(|p| ObservedOffsets {
                partition: p.partition,
                high_watermark: p.hi_offset,
                last_stable: p.ls_offset,
                committed: p.committed_offset,
                observed_at,
            })
            .collect::<Vec<_>>();
        if !partitions.is_empty() {
            self.observed.do_send(OffsetsObserved { partitions });
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.metrics.observe_kafka_error();
        // Connection errors are logged once per change of the connection's health, not once
        // per retry.
        let reported = error
            .rdkafka_error_code()
            .is_some_and(|code| self.health.error(code, reason));
        if !reported {
            tracing::warn!(error = %error, reason, "kafka client error");
        }
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        use rdkafka::config::RDKafkaLogLevel::*;
        // A broker failure logged as an error is also an error event, with the same text,
        // which `error` reports (a connection failure once per change of the connection's
        // health): logged here too it would repeat at every retry.
        let level = match (fac, level) {
            ("FAIL", Emerg | Alert | Critical | Error) => Debug,
            ("FAIL", Warning | Notice | Info) => {
                self.health.logged_failure(message);
                level
            }
            _ => level,
        };
        match level {
            Emerg | Alert | Critical | Error => {
                tracing::error!(target: "librdkafka", fac, "{message}")
            }
            Warning => tracing::warn!(target: "librdkafka", fac, "{message}"),
            Notice | Info => tracing::info!(target: "librdkafka", fac, "{message}"),
            Debug => tracing::debug!(target: "librdkafka", fac, "{message}"),
        }
    }
}

impl ConsumerContext for KafkaContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        // The list belongs to the event; the driver gets a copy.
        let rebalance = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => Rebalance::Assign(tpl.clone()),
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => Rebalance::Revoke(tpl.clone()),
            other => Rebalance::Error(tpl.clone(), format!("{other:?}")),
        };
        if self.deferred.load(Ordering::Acquire) {
            self.rebalances
                .lock()
                .expect("rebalances lock")
                .push(rebalance);
        } else {
            acknowledge(consumer, &rebalance);
        }
    }
}

/// Events waiting on the consumer's main queue (rebalances, statistics, errors, logs).
///
/// rust-rdkafka's `poll` answers `None` both when the queue is empty and when it served one
/// event that is not a record; this tells the two apart.
pub fn pending_events<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> usize {
    // SAFETY: rd_kafka_queue_get_consumer returns a new reference to the consumer queue (or
    // null for a client that is not a group member), released with rd_kafka_queue_destroy.
    unsafe {
        let queue = rdkafka::bindings::rd_kafka_queue_get_consumer(consumer.client().native_ptr());
        if queue.is_null() {
            return 0;
        }
        let length = rdkafka::bindings::rd_kafka_queue_length(queue);
        rdkafka::bindings::rd_kafka_queue_destroy(queue);
        length
    }
}

/// The member id the coordinator gave this consumer (not exposed by rust-rdkafka).
pub fn member_id<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> Option<String> {
    // SAFETY: rd_kafka_memberid returns a string we own (or null), freed with rd_kafka_mem_free.
    unsafe {
        let native = consumer.client().native_ptr();
        let raw = rdkafka::bindings::rd_kafka_memberid(native);
        if raw.is_null() {
            return None;
        }
        let id = std::ffi::CStr::from_ptr(raw).to_string_lossy().into_owned();
        rdkafka::bindings::rd_kafka_mem_free(native, raw.cast());
        (!id.is_empty()).then_some(id)
    }
}
