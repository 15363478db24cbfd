//! The consumer context: librdkafka calls it on the driver thread. Rebalances are handed to the
//! supervisor as messages and the callback waits for the reply, so a partition is consumed
//! only after its actor exists, and given up only after its actor drained and its final
//! watermark was committed.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use actix::Addr;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::message::OwnedMessage;
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use crate::actors::messages::{
    GroupJoined, ObservedOffsets, OffsetsObserved, PartitionRoute, PartitionsAssigned,
    PartitionsRevoked,
};
use crate::actors::{Checkpoint, Supervisor};
use crate::metrics::Metrics;

/// A partition's route plus what the driver holds back while the partition is paused.
pub struct Route {
    pub route: PartitionRoute,
    pub stash: VecDeque<OwnedMessage>,
    /// Roughly the memory the stash holds.
    pub stash_bytes: usize,
    pub paused: bool,
    /// The offset of the last record polled for this partition.
    pub last_seen: Option<i64>,
}

/// The context of the group member.
pub struct HistoryContext {
    pub topic: String,
    pub supervisor: Addr<Supervisor>,
    pub checkpoint: Addr<Checkpoint>,
    pub metrics: Metrics,
    /// Touched only on the driver thread (callbacks run inside its `poll`).
    pub routes: Mutex<BTreeMap<i32, Route>>,
}

impl HistoryContext {
    fn partitions_of(&self, tpl: &TopicPartitionList) -> Vec<i32> {
        tpl.elements()
            .iter()
            .filter(|e| e.topic() == self.topic)
            .map(|e| e.partition())
            .collect()
    }

    fn assign(&self, partitions: Vec<i32>) {
        if partitions.is_empty() {
            return;
        }
        let routes =
            futures::executor::block_on(self.supervisor.send(PartitionsAssigned { partitions }))
                .unwrap_or_default();
        let mut table = self.routes.lock().expect("routes lock");
        for route in routes {
            table.insert(
                route.partition,
                Route {
                    route,
                    stash: VecDeque::new(),
                    stash_bytes: 0,
                    paused: false,
                    last_seen: None,
                },
            );
        }
    }

    fn revoke(&self, consumer: &BaseConsumer<Self>, partitions: Vec<i32>) {
        if partitions.is_empty() {
            return;
        }
        let lost = consumer.assignment_lost();
        let revoked = PartitionsRevoked {
            partitions: partitions.clone(),
            lost,
        };
        let finals = futures::executor::block_on(self.supervisor.send(revoked)).unwrap_or_default();
        if !lost && !finals.is_empty() {
            let mut tpl = TopicPartitionList::new();
            for (partition, offset) in &finals {
                let _ = tpl.add_partition_offset(&self.topic, *partition, Offset::Offset(*offset));
            }
            match consumer.commit(&tpl, CommitMode::Sync) {
                Ok(()) => tracing::info!(?finals, "final watermarks committed"),
                Err(error) => {
                    tracing::warn!(?finals, error = %error, "final commit failed; the next owner replays from the last commit")
                }
            }
        }
        let mut table = self.routes.lock().expect("routes lock");
        for partition in partitions {
            table.remove(&partition);
        }
    }
}

impl ClientContext for HistoryContext {
    fn stats(&self, statistics: Statistics) {
        let Some(topic) = statistics.topics.get(&self.topic) else {
            return;
        };
        let partitions = topic
            .partitions
            .values()
            .filter(|p| p.partition >= 0 && p.desired)
            .map(|p| ObservedOffsets {
                partition: p.partition,
                high_watermark: p.hi_offset,
                last_stable: p.ls_offset,
                committed: p.committed_offset,
            })
            .collect::<Vec<_>>();
        if !partitions.is_empty() {
            self.supervisor.do_send(OffsetsObserved { partitions });
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.metrics.observe_kafka_error();
        tracing::warn!(error = %error, reason, "kafka client error");
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        use rdkafka::config::RDKafkaLogLevel::*;
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

impl ConsumerContext for HistoryContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => self.assign(self.partitions_of(tpl)),
            Rebalance::Revoke(tpl) => self.revoke(consumer, self.partitions_of(tpl)),
            Rebalance::Error(error) => tracing::warn!(error = %error, "rebalance error"),
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, _rebalance: &Rebalance<'_>) {
        if let Some(member_id) = member_id(consumer) {
            self.supervisor.do_send(GroupJoined { member_id });
        }
    }
}

/// The member id the coordinator gave this consumer (not exposed by rust-rdkafka).
fn member_id(consumer: &BaseConsumer<HistoryContext>) -> Option<String> {
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
