//! Kafka: the consumer's client configuration, its context (what librdkafka calls back), the
//! connection's health ([`health`], with a [`tls_probe`] for refused certificates), the
//! offset commits and the driver thread that is the only caller of the consumer. Above the
//! actors: it delivers to them through their recipients and serves their requests. Beside the
//! group member, for recovery and the group page: a throwaway [`reader`] of the topic and the
//! group's offsets and members as an outside tool sees them ([`group`], its members' assignments
//! decoded by [`assignment`]).

pub mod assignment;
pub mod client;
pub mod commits;
pub mod context;
pub mod driver;
pub mod group;
pub mod health;
pub mod queue;
pub mod reader;
pub mod timeouts;
pub mod tls_probe;

pub use client::consumer_config;
pub use context::KafkaContext;
pub use driver::{DriverPorts, DriverSettings, spawn_driver};

/// Copies a record out of librdkafka.
pub(crate) fn fetched(
    message: &rdkafka::message::BorrowedMessage<'_>,
) -> crate::domain::FetchedRecord {
    use rdkafka::message::Message;
    crate::domain::FetchedRecord {
        offset: message.offset(),
        key: message.key().map(crate::domain::RecordKey::new),
        payload: message.payload().map(bytes::Bytes::copy_from_slice),
        timestamp: message
            .timestamp()
            .to_millis()
            .and_then(chrono::DateTime::from_timestamp_millis),
    }
}

/// The group's committed offset of each of `partitions` of `topic`, as the coordinator has
/// them (`None`: nothing committed).
pub(crate) fn committed_of<C: rdkafka::consumer::ConsumerContext>(
    consumer: &rdkafka::consumer::BaseConsumer<C>,
    topic: &str,
    partitions: &[i32],
    timeout: std::time::Duration,
) -> rdkafka::error::KafkaResult<std::collections::BTreeMap<i32, Option<i64>>> {
    use rdkafka::consumer::Consumer;
    let mut query = rdkafka::TopicPartitionList::new();
    for &partition in partitions {
        query.add_partition(topic, partition);
    }
    let answer = consumer.committed_offsets(query, timeout)?;
    let committed = partitions
        .iter()
        .map(|&p| {
            let offset = match answer.find_partition(topic, p).map(|e| e.offset()) {
                Some(rdkafka::Offset::Offset(offset)) if offset >= 0 => Some(offset),
                _ => None,
            };
            (p, offset)
        })
        .collect();
    // Lists from the consumer must go before the consumer does.
    drop(answer);
    Ok(committed)
}
