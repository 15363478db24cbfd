//! The demo's Kafka: librdkafka's mock cluster in process (not `Send`: it lives on the actix
//! system thread for the whole demo) and a producer that publishes planned records and keeps
//! score of what the broker acknowledged.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use rdkafka::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer, FutureRecord};

use super::traffic::{PlannedRecord, Tally};

/// The topic of the demo, as in production.
pub const TOPIC: &str = crate::config::defaults::TOPIC;
/// Partitions of the demo topic.
pub const PARTITIONS: i32 = 4;

/// The embedded broker with the demo topic.
pub struct EmbeddedKafka {
    // Kept alive: the broker exists as long as this value does.
    pub(crate) _cluster: MockCluster<'static, DefaultProducerContext>,
    pub brokers: String,
}

impl EmbeddedKafka {
    pub fn start() -> Result<EmbeddedKafka, KafkaError> {
        let cluster = MockCluster::new(1)?;
        cluster.create_topic(TOPIC, PARTITIONS, 1)?;
        Ok(EmbeddedKafka {
            brokers: cluster.bootstrap_servers(),
            _cluster: cluster,
        })
    }

    pub fn producer(&self) -> Result<FutureProducer, KafkaError> {
        ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .set("linger.ms", "5")
            .set("message.timeout.ms", "30000")
            .create()
    }
}

/// What the broker acknowledged so far.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    pub tally: Tally,
    /// Per partition, the offset after the last acknowledged record.
    pub ends: BTreeMap<i32, i64>,
}

/// Where an acknowledged record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Landed {
    pub partition: i32,
    pub offset: i64,
}

/// Publishes records to the demo topic and records acknowledgements in a [`Sent`] shared by
/// its clones.
#[derive(Clone)]
pub struct Publisher {
    producer: FutureProducer,
    topic: Rc<str>,
    sent: Rc<RefCell<Sent>>,
}

impl Publisher {
    /// A publisher to the demo topic.
    pub fn new(producer: FutureProducer) -> Publisher {
        Publisher::to_topic(producer, TOPIC)
    }

    /// A publisher to any topic (the `produce` command).
    pub fn to_topic(producer: FutureProducer, topic: &str) -> Publisher {
        Publisher {
            producer,
            topic: Rc::from(topic),
            sent: Rc::default(),
        }
    }

    /// A snapshot of what was acknowledged.
    pub fn sent(&self) -> Sent {
        self.sent.borrow().clone()
    }

    /// Publishes `records` together and waits for every acknowledgement; `None` for a record
    /// the broker did not take.
    pub async fn publish(&self, records: &[PlannedRecord]) -> Vec<Option<Landed>> {
        let deliveries: Vec<_> = records
            .iter()
            .map(|record| {
                let future = FutureRecord::to(&self.topic)
                    .key(&record.key)
                    .payload(&record.payload);
                self.producer
                    .send_result(future)
                    .map_err(|(error, _)| error)
            })
            .collect();
        let mut landed = Vec::with_capacity(records.len());
        for (record, delivery) in records.iter().zip(deliveries) {
            let result = match delivery {
                Ok(future) => match future.await {
                    Ok(Ok(delivery)) => Ok(Landed {
                        partition: delivery.partition,
                        offset: delivery.offset,
                    }),
                    Ok(Err((error, _))) => Err(error.to_string()),
                    Err(_) => Err("the producer was dropped".to_owned()),
                },
                Err(error) => Err(error.to_string()),
            };
            landed.push(self.record(record, result));
        }
        landed
    }

    fn record(&self, record: &PlannedRecord, result: Result<Landed, String>) -> Option<Landed> {
        let mut sent = self.sent.borrow_mut();
        match result {
            Ok(at) => {
                sent.tally.delivered(&record.kind);
                let end = sent.ends.entry(at.partition).or_default();
                *end = (*end).max(at.offset + 1);
                Some(at)
            }
            Err(error) => {
                sent.tally.failed += 1;
                tracing::warn!(key = %record.key, error = %error, "record not delivered");
                None
            }
        }
    }

    /// Drops this handle off the actix thread (dropping the last one joins the producer's
    /// polling thread).
    pub async fn close(self) {
        let producer = self.producer;
        let _ = tokio::task::spawn_blocking(move || drop(producer)).await;
    }
}
