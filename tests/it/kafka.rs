//! Kafka plumbing for tests: the librdkafka mock cluster in process, a real producer, and
//! reading committed offsets and high watermarks as the broker knows them.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// The mock cluster and a topic on it. Not `Send`: it lives on the test's thread.
pub struct TestKafka {
    pub cluster: MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    pub brokers: String,
    pub topic: String,
    pub partitions: i32,
}

impl TestKafka {
    pub fn start(partitions: i32) -> TestKafka {
        let cluster = MockCluster::new(1).expect("mock cluster");
        let topic = crate::helpers::unique_name("tickets");
        cluster
            .create_topic(&topic, partitions, 1)
            .expect("create topic");
        TestKafka {
            brokers: cluster.bootstrap_servers(),
            cluster,
            topic,
            partitions,
        }
    }

    pub fn producer(&self) -> FutureProducer {
        ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .set("message.max.bytes", "2000000")
            .set("linger.ms", "5")
            .create()
            .expect("producer")
    }

    /// Produces one record and waits for the broker's ack; returns (partition, offset).
    pub async fn send(
        &self,
        producer: &FutureProducer,
        partition: Option<i32>,
        key: &str,
        payload: &[u8],
    ) -> (i32, i64) {
        let mut record = FutureRecord::to(&self.topic).key(key).payload(payload);
        if let Some(p) = partition {
            record = record.partition(p);
        }
        let delivery = producer
            .send(record, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .expect("delivered");
        (delivery.partition, delivery.offset)
    }

    /// Committed positions of `group` per partition (-1 when none), as the broker has them.
    pub async fn committed(&self, group: &str) -> Vec<i64> {
        let (brokers, topic, partitions, group) = (
            self.brokers.clone(),
            self.topic.clone(),
            self.partitions,
            group.to_owned(),
        );
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &brokers)
                .set("group.id", &group)
                .create()
                .expect("consumer");
            let mut tpl = TopicPartitionList::new();
            for p in 0..partitions {
                tpl.add_partition(&topic, p);
            }
            let committed = consumer
                .committed_offsets(tpl, Duration::from_secs(10))
                .expect("committed offsets");
            let offsets = (0..partitions)
                .map(
                    |p| match committed.find_partition(&topic, p).map(|e| e.offset()) {
                        Some(Offset::Offset(o)) => o,
                        _ => -1,
                    },
                )
                .collect();
            // Lists must go before the consumer (dropping it otherwise hangs).
            drop(committed);
            offsets
        })
        .await
        .expect("committed offsets task")
    }

    /// High watermarks (next offset to be written) per partition.
    pub async fn ends(&self) -> Vec<i64> {
        let (brokers, topic, partitions) =
            (self.brokers.clone(), self.topic.clone(), self.partitions);
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &brokers)
                .set("isolation.level", "read_uncommitted")
                .create()
                .expect("consumer");
            (0..partitions)
                .map(|p| {
                    consumer
                        .fetch_watermarks(&topic, p, Duration::from_secs(10))
                        .expect("watermarks")
                        .1
                })
                .collect()
        })
        .await
        .expect("watermarks task")
    }
}

/// The source document's events.
pub fn payload(event_id: &str, ticket_id: &str, from: &str, to: &str, changed_at: &str) -> Vec<u8> {
    serde_json::json!({
        "event_id": event_id,
        "ticket_id": ticket_id,
        "from_status": from,
        "to_status": to,
        "changed_at": changed_at,
    })
    .to_string()
    .into_bytes()
}

/// A distinct valid event number `i` (tickets cycle so that each has several events).
pub fn numbered_event(i: usize) -> Vec<u8> {
    payload(
        &format!("event-{i}"),
        &format!("ticket-{}", i % 13),
        "open",
        "resolved",
        "2026-10-03T08:00:00Z",
    )
}

/// The source document's `event-ticket-900` as its producer sends it.
pub fn story_900() -> Vec<u8> {
    history_consumer::domain::story::event_900()
        .to_json()
        .into_bytes()
}

/// The source document's `event-ticket-901`.
pub fn story_901() -> Vec<u8> {
    history_consumer::domain::story::event_901()
        .to_json()
        .into_bytes()
}
