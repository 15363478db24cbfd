//! The consumer's librdkafka configuration: the service's defaults, then the operator's
//! `--kafka-option`s on top.

use rdkafka::ClientConfig;

use crate::config::KafkaSettings;

/// librdkafka properties for the group member.
pub fn consumer_config(kafka: &KafkaSettings, client_id: &str) -> ClientConfig {
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
        .set("enable.partition.eof", "false")
        // High watermarks and committed offsets for the status page come from statistics.
        .set("statistics.interval.ms", "1000")
        // Prefetch is memory: keep it modest, the database is the bottleneck anyway.
        .set("queued.max.messages.kbytes", "16384")
        // A resumed partition waits for the broker's outstanding long poll, and a partition
        // whose prefetch queue was full waits fetch.queue.backoff.ms (1 s by default) before
        // its next fetch: both stall a partition that pauses and resumes under load.
        .set("fetch.wait.max.ms", "100")
        .set("fetch.queue.backoff.ms", "20");
    for (key, value) in &kafka.options {
        config.set(key, value);
    }
    config
}
