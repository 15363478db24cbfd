//! The consumer's librdkafka configuration: the service's defaults, then the operator's
//! `--kafka-option`s on top.

use rdkafka::ClientConfig;

use crate::config::KafkaSettings;

/// How much librdkafka may prefetch for each assigned partition. Every partition is read from
/// its own queue, so these limits apply per partition: a partition whose actor takes nothing
/// (database down, operator pause) stops being fetched once its queue holds this much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefetch {
    /// Records (`queued.min.messages`).
    pub records: usize,
    /// KiB (`queued.max.messages.kbytes`, and the most one fetch brings: `max.partition.fetch.bytes`).
    pub kbytes: usize,
}

/// librdkafka properties for the group member.
pub fn consumer_config(kafka: &KafkaSettings, client_id: &str, prefetch: Prefetch) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &kafka.brokers)
        .set("group.id", &kafka.group)
        .set("client.id", client_id)
        // Offsets move only past resolved records (SPEC §5): we commit them ourselves.
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("isolation.level", "read_committed")
        // A damaged batch must hold its partition, not be read as records (docs/contract.md).
        .set("check.crcs", "true")
        .set("enable.partition.eof", "false")
        // High watermarks and committed offsets for the status page come from statistics.
        .set("statistics.interval.ms", "1000")
        // Prefetch is memory, and with a queue per partition it is per partition.
        .set("queued.min.messages", prefetch.records.to_string())
        .set("queued.max.messages.kbytes", prefetch.kbytes.to_string())
        .set(
            "max.partition.fetch.bytes",
            (prefetch.kbytes * 1024).to_string(),
        )
        // A partition whose prefetch queue was full is looked at again only after
        // fetch.queue.backoff.ms (1 s by default): far too long once its actor has room.
        .set("fetch.wait.max.ms", "100")
        .set("fetch.queue.backoff.ms", "10");
    kafka.options.apply_to(&mut config);
    config
}
