//! One run's Kafka: a fresh embedded broker (the demo's) with a topic of its own, records
//! published through the demo's publisher as fast as it goes or at a steady rate, the check that
//! the broker's retention kept them all, and ceiling 1 — reading them back with no database.
//!
//! The mock broker keeps about 5 MiB per partition and silently drops older records past that,
//! so the producer compresses (LZ4): 200,000 events over 4 partitions then fit with room to
//! spare, and every run checks that each partition still starts at offset 0.

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::{Offset, TopicPartitionList};
use tokio::time::MissedTickBehavior;

use super::BenchError;
use super::measure::Sent;
use crate::config::KafkaSettings;
use crate::tools::demo::kafka::{EmbeddedKafka, Publisher};
use crate::tools::demo::traffic::{Pacer, PlannedRecord, Tally};

/// Records handed to the producer at once when publishing as fast as possible.
const CHUNK: usize = 5_000;
/// How often a steady producer publishes what is due.
const TICK: Duration = Duration::from_millis(10);
/// How long the raw reader may see nothing new before it gives up.
const READ_STALL: Duration = Duration::from_secs(30);
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// A fresh broker with one topic, and a publisher to it.
pub struct Topic {
    kafka: EmbeddedKafka,
    pub name: String,
    pub partitions: i32,
    producer: FutureProducer,
    publisher: Publisher,
}

impl Topic {
    /// Starts a broker and creates a topic of `partitions` partitions on it.
    pub fn create(partitions: i32) -> Result<Topic, BenchError> {
        let kafka = EmbeddedKafka::start().map_err(BenchError::Kafka)?;
        let name = format!("bench-{:08x}", rand::random::<u32>());
        kafka
            ._cluster
            .create_topic(&name, partitions, 1)
            .map_err(BenchError::Kafka)?;
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &kafka.brokers)
            .set("linger.ms", "5")
            .set("batch.num.messages", "10000")
            .set("compression.type", "lz4")
            .set("message.timeout.ms", "30000")
            .create()
            .map_err(BenchError::Kafka)?;
        let publisher = Publisher::to_topic(producer.clone(), &name);
        Ok(Topic {
            kafka,
            name,
            partitions,
            producer,
            publisher,
        })
    }

    pub fn brokers(&self) -> &str {
        &self.kafka.brokers
    }

    /// What the broker acknowledged so far.
    pub fn tally(&self) -> Tally {
        self.publisher.sent().tally
    }

    /// Per partition, the offset after the last acknowledged record (0 for none).
    pub fn ends(&self) -> Vec<i64> {
        let sent = self.publisher.sent();
        (0..self.partitions)
            .map(|p| sent.ends.get(&p).copied().unwrap_or(0))
            .collect()
    }

    /// Publishes `count` records as fast as the producer takes them.
    pub async fn flood(
        &self,
        records: &mut impl Iterator<Item = PlannedRecord>,
        count: u64,
    ) -> Result<Vec<Sent>, BenchError> {
        let mut sent = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
        let mut remaining = count;
        while remaining > 0 {
            let take = remaining.min(CHUNK as u64);
            remaining -= take;
            let chunk: Vec<PlannedRecord> = records.by_ref().take(take as usize).collect();
            self.publish(&chunk, &mut sent).await?;
        }
        Ok(sent)
    }

    /// Publishes `rate` records per second for `window`.
    pub async fn steady(
        &self,
        records: &mut impl Iterator<Item = PlannedRecord>,
        rate: u32,
        window: Duration,
    ) -> Result<Vec<Sent>, BenchError> {
        let mut pacer = Pacer::new(rate);
        let mut ticker = tokio::time::interval(TICK);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let started = Instant::now();
        let mut last = started;
        let mut sent = Vec::new();
        while started.elapsed() < window {
            ticker.tick().await;
            let now = Instant::now();
            let due = pacer.due(now - last);
            last = now;
            let chunk: Vec<PlannedRecord> = records.by_ref().take(due).collect();
            self.publish(&chunk, &mut sent).await?;
        }
        Ok(sent)
    }

    /// Publishes `chunk`, noting when each record was handed over and where it landed.
    async fn publish(
        &self,
        chunk: &[PlannedRecord],
        sent: &mut Vec<Sent>,
    ) -> Result<(), BenchError> {
        let at = Instant::now();
        let landed = self.publisher.publish(chunk).await;
        let missing = landed.iter().filter(|l| l.is_none()).count();
        if missing > 0 {
            return Err(BenchError::Undelivered(missing));
        }
        sent.extend(landed.into_iter().flatten().map(|l| Sent {
            partition: l.partition,
            offset: l.offset,
            at,
        }));
        Ok(())
    }

    /// Fails when the broker dropped records of a partition to stay within its retention.
    pub async fn check_retention(&self) -> Result<(), BenchError> {
        let (producer, topic, partitions) =
            (self.producer.clone(), self.name.clone(), self.partitions);
        let lows = tokio::task::spawn_blocking(move || {
            (0..partitions)
                .map(|p| {
                    producer
                        .client()
                        .fetch_watermarks(&topic, p, METADATA_TIMEOUT)
                        .map(|(low, _)| (p, low))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(BenchError::Task)?
        .map_err(BenchError::Kafka)?;
        match lows.into_iter().find(|(_, low)| *low > 0) {
            Some((partition, low)) => Err(BenchError::Retention { partition, low }),
            None => Ok(()),
        }
    }

    /// Ceiling 1: reads every partition from the beginning up to `ends` with a plain consumer
    /// configured as the service's, on a blocking thread, doing nothing with the records but
    /// copying them out of librdkafka (as the service's driver thread does).
    pub async fn read_raw(&self, ends: &[i64]) -> Result<RawRead, BenchError> {
        let settings = KafkaSettings {
            brokers: self.kafka.brokers.clone(),
            topic: self.name.clone(),
            group: format!("bench-raw-{:08x}", rand::random::<u32>()),
            group_instance_id: None,
            options: Default::default(),
        };
        let ends = ends.to_vec();
        tokio::task::spawn_blocking(move || read_raw(&settings, &ends))
            .await
            .map_err(BenchError::Task)?
    }

    /// Drops the producer and the broker (the producer's drop blocks: off the actix thread).
    pub async fn close(self) {
        let Topic {
            kafka,
            producer,
            publisher,
            ..
        } = self;
        publisher.close().await;
        let _ = tokio::task::spawn_blocking(move || drop(producer)).await;
        drop(kafka);
    }
}

/// What the raw reader did.
#[derive(Debug, Clone, Copy)]
pub struct RawRead {
    pub records: u64,
    /// From the first record received to the last one below the ends.
    pub elapsed: Duration,
}

fn read_raw(settings: &KafkaSettings, ends: &[i64]) -> Result<RawRead, BenchError> {
    let defaults = crate::config::RuntimeSettings::default();
    let prefetch = crate::kafka::client::Prefetch {
        records: defaults.partition_queue,
        kbytes: defaults.partition_fetch_kb,
    };
    let consumer: BaseConsumer =
        crate::kafka::consumer_config(settings, "history-bench-raw", prefetch)
            .create()
            .map_err(BenchError::Kafka)?;
    let mut assignment = TopicPartitionList::new();
    for partition in 0..ends.len() as i32 {
        assignment
            .add_partition_offset(&settings.topic, partition, Offset::Beginning)
            .map_err(BenchError::Kafka)?;
    }
    consumer.assign(&assignment).map_err(BenchError::Kafka)?;
    let mut next = vec![0_i64; ends.len()];
    let mut open = ends.iter().filter(|end| **end > 0).count();
    let (mut records, mut first, mut last) = (0_u64, None, Instant::now());
    while open > 0 {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let message = message.detach();
                let now = Instant::now();
                first.get_or_insert(now);
                last = now;
                let p = message.partition() as usize;
                let end = ends.get(p).copied().unwrap_or(0);
                if next[p] == 0 && message.offset() > 0 {
                    return Err(BenchError::Retention {
                        partition: message.partition(),
                        low: message.offset(),
                    });
                }
                if message.offset() < end {
                    records += 1;
                    next[p] = message.offset() + 1;
                    if next[p] == end {
                        open -= 1;
                    }
                }
            }
            Some(Err(error)) => return Err(BenchError::Kafka(error)),
            None if last.elapsed() > READ_STALL => {
                return Err(BenchError::Stalled {
                    phase: "ceiling 1 (raw consume)".into(),
                    detail: format!("read up to {next:?} of {ends:?}"),
                });
            }
            None => {}
        }
    }
    let elapsed = first.map_or(Duration::ZERO, |first| last - first);
    drop(assignment);
    drop(consumer);
    Ok(RawRead { records, elapsed })
}
