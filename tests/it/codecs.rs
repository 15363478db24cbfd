//! Every compression codec a producer may use (none, gzip, snappy, lz4, zstd), batches of each
//! interleaved in every partition of one topic, on both brokers and through the real binary:
//! the service stores every valid event once, dead-letters the malformed ones and commits every
//! partition to its end. Before librdkafka was built with zstd, the first zstd batch froze its
//! partition ("Decompression (codec 0x4) … failed: Local: Not implemented").

use std::time::{Duration, Instant};

use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use crate::support::app::spawn_app;
use crate::support::helpers::{TestDb, assert_stored_once, test_database, unique_name};
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka, payload, wait_committed};
use crate::support::service::ServiceProcess;

/// librdkafka's `compression.type` values, each a producer of its own.
const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
pub(crate) const PARTITIONS: i32 = 3;
/// Every codec writes one batch to every partition per round, so batches of all codecs
/// alternate in each partition.
const ROUNDS: usize = 3;
/// Valid events of one batch: enough repeated JSON that compression pays (librdkafka sends a
/// batch uncompressed when compressing would not make it smaller).
const PER_BATCH: usize = 8;
/// Valid events over the whole topic.
pub(crate) const VALID: usize = ROUNDS * CODECS.len() * PARTITIONS as usize * PER_BATCH;
/// One malformed record per codec and partition, in the first round's batch.
const MALFORMED: usize = CODECS.len() * PARTITIONS as usize;

fn producer(kafka: &TestKafka, codec: &str) -> FutureProducer {
    kafka
        .client()
        .set("compression.type", codec)
        // All of a batch is queued at once: the linger only has to outlast the queueing.
        .set("linger.ms", "50")
        .create()
        .unwrap_or_else(|e| panic!("a {codec} producer: {e}"))
}

/// An event whose id says its codec, so that a codec that loses records is named.
fn event(codec: &str, round: usize, partition: i32, n: usize) -> Vec<u8> {
    payload(
        &format!("event-{codec}-{round}-{partition}-{n}"),
        &format!("ticket-{}", n % 5),
        "open",
        "in_progress",
        "2026-10-03T08:00:00Z",
    )
}

/// Produces [`VALID`] events and [`MALFORMED`] records, each codec its own producer, one batch
/// per codec, partition and round, and waits for every acknowledgement.
pub(crate) async fn produce_every_codec(kafka: &TestKafka) {
    let producers: Vec<(&str, FutureProducer)> = CODECS
        .iter()
        .map(|&codec| (codec, producer(kafka, codec)))
        .collect();
    let acknowledged = kafka.acknowledged();
    for round in 0..ROUNDS {
        for (codec, producer) in &producers {
            let mut records: Vec<(i32, Vec<u8>)> = Vec::new();
            for partition in 0..PARTITIONS {
                for n in 0..PER_BATCH {
                    records.push((partition, event(codec, round, partition, n)));
                    if round == 0 && n == PER_BATCH / 2 {
                        let broken = format!("{{\"event_id\": \"broken-{codec}-{partition}\"");
                        records.push((partition, broken.into_bytes()));
                    }
                }
            }
            let deliveries: Vec<_> = records
                .iter()
                .map(|(partition, body)| {
                    let record = FutureRecord::to(&kafka.topic)
                        .partition(*partition)
                        .key("k")
                        .payload(body);
                    producer.send(record, Duration::from_secs(30))
                })
                .collect();
            for delivery in futures::future::join_all(deliveries).await {
                let delivered = delivery
                    .map_err(|(error, _)| error)
                    .unwrap_or_else(|e| panic!("a {codec} record in round {round}: {e}"));
                acknowledged.record(delivered.partition, delivered.offset);
            }
        }
    }
    for (_, producer) in producers {
        producer.flush(Duration::from_secs(10)).expect("flushed");
    }
}

/// Every valid event stored once, per codec, and every malformed record dead-lettered.
pub(crate) async fn assert_every_codec_stored_once(db: &TestDb) {
    assert_stored_once(db, VALID).await;
    for codec in CODECS {
        let stored = db
            .scalar(&format!(
                "SELECT count(*) FROM history_events WHERE event_id LIKE 'event-{codec}-%'"
            ))
            .await;
        assert_eq!(stored as usize, VALID / CODECS.len(), "{codec} events");
    }
    assert_eq!(
        db.scalar("SELECT count(*) FROM dead_letters").await as usize,
        MALFORMED
    );
}

/// What is stored so far, per codec: the message of a test that timed out.
async fn stored_per_codec(db: &TestDb) -> String {
    let mut counts = Vec::new();
    for codec in CODECS {
        let stored = db
            .scalar(&format!(
                "SELECT count(*) FROM history_events WHERE event_id LIKE 'event-{codec}-%'"
            ))
            .await;
        counts.push(format!("{codec}: {stored}"));
    }
    counts.join(", ")
}

pub(crate) async fn wait_all_stored(db: &TestDb) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while (db.scalar("SELECT count(*) FROM history_events").await as usize) < VALID {
        if Instant::now() > deadline {
            panic!(
                "not every event stored after 60 s: {}",
                stored_per_codec(db).await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

on_both_brokers!(batches_of_every_codec_are_stored_once_and_committed_to_the_end);

async fn batches_of_every_codec_are_stored_once_and_committed_to_the_end(broker: Broker) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, PARTITIONS).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(PARTITIONS as usize).await;
    produce_every_codec(&kafka).await;
    let ends = kafka.ends().await;
    assert_eq!(
        ends.iter().sum::<i64>() as usize,
        VALID + MALFORMED,
        "the log holds every record"
    );
    wait_all_stored(&db).await;
    app.wait_committed(&kafka, &ends).await;
    assert_every_codec_stored_once(&db).await;
    app.shutdown().await;
}

// The binary as an operator runs it, started after the records are in the log: it reads every
// codec from the first fetch on.
#[actix_web::test]
async fn the_binary_stores_every_codec_once_from_tansu_and_exits_cleanly() {
    let db = test_database().await;
    let kafka = TestKafka::start_on(Broker::Tansu, PARTITIONS).await;
    produce_every_codec(&kafka).await;
    let ends = kafka.ends().await;
    let group = unique_name("group");
    let mut service = ServiceProcess::spawn(&db, &kafka, &group);
    wait_all_stored(&db).await;
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    assert_every_codec_stored_once(&db).await;
    service.sigterm();
    assert_eq!(service.wait_exit(Duration::from_secs(30)).await, Some(0));
}
