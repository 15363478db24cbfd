//! Records librdkafka cannot read (issue 21): a batch whose CRC does not match its bytes and a
//! batch that claims a codec its bytes are not, written into the log with a Produce request of
//! our own (`support/raw_batch.rs`; both brokers store a produced batch as it came). The
//! partition is held at the batch with the cause shown, and nothing after it is stored or
//! committed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use history_consumer::domain::HeldCause;
use history_consumer::domain::Trouble;
use history_consumer::domain::fetch_error::Unreadable;
use history_consumer::kafka::queue::PartitionQueue;
use rdkafka::consumer::{BaseConsumer, Consumer, DefaultConsumerContext};
use rdkafka::{Offset, TopicPartitionList};

use crate::support::app::{TestApp, spawn_app};
use crate::support::helpers::{test_database, wait_for};
use crate::support::http::get;
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka, numbered_event};
use crate::support::raw_batch::{Fault, produce_spoilt};

on_both_brokers!(
    a_batch_failing_its_crc_holds_its_partition_with_the_cause_and_nothing_after_it_is_committed =
        a_batch_the_consumer_cannot_read_holds_its_partition(Fault::Crc)
);

on_both_brokers!(a_batch_that_cannot_be_decompressed_holds_its_partition_with_the_cause_and_nothing_after_it_is_committed = a_batch_the_consumer_cannot_read_holds_its_partition(Fault::NotGzip));

/// Three records, a spoilt batch of three at offsets 3 to 5, three more records. Before issue
/// 21 the service logged the error and went on: a CRC mismatch went unnoticed (`check.crcs`
/// was off), and a batch it could not decompress stalled the partition with no cause shown.
async fn a_batch_the_consumer_cannot_read_holds_its_partition(broker: Broker, fault: Fault) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 1).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    for i in 0..3 {
        kafka
            .send(&producer, Some(0), "k", &numbered_event(i))
            .await;
    }
    app.wait_committed(&kafka, &[3]).await;
    assert_eq!(
        spoil_3_to_5(&kafka, fault),
        3,
        "the spoilt batch follows the first three records"
    );
    for i in 6..9 {
        kafka
            .send(&producer, Some(0), "k", &numbered_event(i))
            .await;
    }

    let held = wait_for(
        Duration::from_secs(30),
        "the partition to be held",
        || async {
            match app.partition(0).await?.fetch? {
                Trouble::Held(held) => Some(held),
                Trouble::Failing(_) => None,
            }
        },
    )
    .await;
    let expected = match fault {
        Fault::Crc => Unreadable::Crc,
        Fault::NotGzip => Unreadable::Compression,
    };
    assert_eq!(held.offset, Some(3), "held at the spoilt batch: {held:?}");
    assert_eq!(
        held.cause,
        HeldCause::Unreadable {
            unreadable: expected
        }
    );

    // Shown as stuck, with the cause, on the page and in the API.
    let admin = app.handle.admin_addr.to_string();
    let status = wait_for(
        Duration::from_secs(10),
        "the partition shown stuck",
        || async {
            let status = get(&admin, "/api/partitions/0").await;
            (status.status == 200 && status.json()["state"] == "stuck").then_some(status.json())
        },
    )
    .await;
    let reason = status["state_reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("held at offset 3"), "{reason}");
    let page = get(&admin, "/partitions/0").await;
    assert!(page.body.contains("held at offset 3"), "{}", page.body);
    assert!(page.body.contains("What to do"), "{}", page.body);

    // Nothing after the batch is stored or committed, however long it waits.
    never_past(&app, &kafka, &db).await;
    app.shutdown().await;
}

/// Over a few seconds: the committed offset stays at the spoilt batch, and only the first
/// three events are stored.
async fn never_past(app: &TestApp, kafka: &TestKafka, db: &crate::support::helpers::TestDb) {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(kafka.committed(&app.group).await, vec![3]);
        assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 3);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

on_both_brokers!(
    a_round_ends_at_an_unreadable_batch_and_what_the_queue_gave_after_it_comes_next_in_order =
        a_round_ends_at_an_error_and_the_rest_comes_next()
);

/// The driver's partition queue under the same spoilt log, read by a consumer of its own: a
/// round takes every message the queue holds in one call, so the messages after the error
/// leave librdkafka's queue in the round that meets it. That round hands over only the records
/// before the error, and the error; the others are carried, and the next rounds hand them over
/// in order, before anything read later. What librdkafka reads after a batch it cannot read is
/// its business: on both brokers here, errors about the bytes it misread and no record (the
/// records after it are checked by the mock's test below). Whatever it is, every carried
/// message comes out once, records in offset order, none of the spoilt batch.
async fn a_round_ends_at_an_error_and_the_rest_comes_next(broker: Broker) {
    let kafka = TestKafka::start_on(broker, 1).await;
    kafka.send_numbered(0..3, 0).await;
    assert_eq!(spoil_3_to_5(&kafka, Fault::Crc), 3);
    kafka.send_numbered(6..9, 0).await;

    let (consumer, mut queue) = partition_0_from_the_start(&kafka, ("check.crcs", "true"));
    // Until librdkafka has fetched everything it will: the queue's length stands still.
    let (mut held, mut since) = (0, Instant::now());
    while since.elapsed() < Duration::from_secs(2) {
        let _ = consumer.poll(Duration::from_millis(50));
        if queue.events_held() != held {
            (held, since) = (queue.events_held(), Instant::now());
        }
    }
    assert!(
        held > 4,
        "the queue holds the records and the error: {held}"
    );

    let mut records = Vec::new();
    let error = queue
        .poll_round(1000, &mut records)
        .expect("the round ends at the error");
    let offsets = |records: &[history_consumer::domain::FetchedRecord]| {
        records.iter().map(|r| r.offset).collect::<Vec<_>>()
    };
    assert_eq!(
        offsets(&records),
        vec![0, 1, 2],
        "only the records before it"
    );
    assert_eq!(error.offset, Some(3), "{error:?}");
    assert!(
        queue.carries(),
        "the messages after the error are carried: {held} held"
    );

    // Everything librdkafka held was taken in that round: what is held now is carried.
    let carried = queue.events_held();
    assert!(carried > 0);

    // The next rounds hand over what came after, in order, before the queue is read again.
    let mut after = Vec::new();
    let mut errors = Vec::new();
    for _ in 0..held {
        let mut round = Vec::new();
        if let Some(error) = queue.poll_round(1000, &mut round) {
            errors.push(error);
        }
        after.extend(offsets(&round));
        if !queue.carries() && round.is_empty() {
            break;
        }
    }
    assert!(!queue.carries(), "everything carried was handed over");
    assert!(
        after.windows(2).all(|w| w[0] < w[1]),
        "in offset order, none twice: {after:?}"
    );
    assert!(
        after.iter().all(|&o| !(3..6).contains(&o)),
        "no record of the spoilt batch: {after:?}"
    );
    assert!(
        after.iter().all(|&o| (6..9).contains(&o)),
        "only the records after it: {after:?} (errors {errors:?})"
    );
    // Each carried message came out once: an error ends its round, a record is handed over.
    assert_eq!(
        errors.len() + after.len(),
        carried,
        "errors {errors:?}, records {after:?}"
    );
    drop(queue);
}

/// On the mock, which can fail one Fetch: records, the failed fetch's error (librdkafka tries
/// again after a backoff) and records after it, all in the partition's queue before a round
/// reads it. The round hands over the records before the error and ends; the consumer's
/// position is already past the records after it, which the next round hands over, in order.
#[actix_web::test]
async fn records_after_a_failed_fetch_taken_in_the_same_round_come_next_in_order_on_the_mock() {
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

    let kafka = TestKafka::start_on(Broker::Mock, 1).await;
    kafka.send_numbered(0..3, 0).await;
    let (consumer, mut queue) =
        partition_0_from_the_start(&kafka, ("fetch.error.backoff.ms", "10"));
    /// Waits until the queue holds `n` messages, serving the consumer's main queue meanwhile.
    fn held_at_least(
        queue: &PartitionQueue<DefaultConsumerContext>,
        consumer: &BaseConsumer<DefaultConsumerContext>,
        n: usize,
        what: &str,
    ) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while queue.events_held() < n {
            assert!(
                Instant::now() < deadline,
                "{what}: {} held",
                queue.events_held()
            );
            let _ = consumer.poll(Duration::from_millis(10));
        }
    }
    held_at_least(&queue, &consumer, 3, "the first records");
    // Every partition's answer to the next Fetch is an error librdkafka hands to the
    // application (any code it does not handle itself).
    kafka.mock().request_errors(
        RDKafkaApiKey::Fetch,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_POLICY_VIOLATION],
    );
    held_at_least(&queue, &consumer, 4, "the failed fetch's error");
    kafka.send_numbered(3..6, 0).await;
    held_at_least(&queue, &consumer, 7, "the records after it");

    let offsets = |records: &[history_consumer::domain::FetchedRecord]| {
        records.iter().map(|r| r.offset).collect::<Vec<_>>()
    };
    let mut records = Vec::new();
    let error = queue
        .poll_round(1000, &mut records)
        .expect("the round ends at the error");
    assert_eq!(
        offsets(&records),
        vec![0, 1, 2],
        "only the records before it"
    );
    assert_eq!(
        error.code,
        rdkafka::error::RDKafkaErrorCode::PolicyViolation,
        "{error:?}"
    );
    assert!(queue.carries(), "the records after it are carried");
    let position = consumer.position().unwrap();
    assert_eq!(
        position.find_partition(&kafka.topic, 0).unwrap().offset(),
        Offset::Offset(6),
        "the consumer's position is past what the round carried"
    );

    let mut next = Vec::new();
    assert!(
        queue.poll_round(1000, &mut next).is_none(),
        "no error in the next round"
    );
    assert_eq!(
        offsets(&next),
        vec![3, 4, 5],
        "the carried records, in order"
    );
    assert!(!queue.carries());
    let mut after = Vec::new();
    assert!(queue.poll_round(1000, &mut after).is_none());
    assert!(after.is_empty(), "nothing twice: {:?}", offsets(&after));

    // A failed fetch as the last message a round takes: the position moves past its offset
    // although nothing there was read. The queue says how far errors alone moved it.
    assert_eq!(
        queue.error_reach(),
        Some(4),
        "the first error named offset 3"
    );
    kafka.mock().request_errors(
        RDKafkaApiKey::Fetch,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_POLICY_VIOLATION],
    );
    held_at_least(&queue, &consumer, 1, "the second error");
    let mut none = Vec::new();
    let error = queue.poll_round(1000, &mut none).expect("the error");
    assert!(none.is_empty(), "{:?}", offsets(&none));
    assert_eq!(error.offset, Some(6), "{error:?}");
    let position = consumer.position().unwrap();
    assert_eq!(
        position.find_partition(&kafka.topic, 0).unwrap().offset(),
        Offset::Offset(7),
        "librdkafka's position is past the failed fetch's offset"
    );
    assert_eq!(queue.error_reach(), Some(7), "and the queue says so");
}

/// A consumer of its own (no group membership: an assignment) reading partition 0 from its
/// start through the driver's partition queue, with one more property.
fn partition_0_from_the_start(
    kafka: &TestKafka,
    (key, value): (&str, &str),
) -> (
    Arc<BaseConsumer<DefaultConsumerContext>>,
    PartitionQueue<DefaultConsumerContext>,
) {
    let consumer: BaseConsumer<DefaultConsumerContext> = kafka
        .client()
        .set("group.id", "queue-rounds")
        .set("enable.auto.commit", "false")
        .set(key, value)
        .create()
        .expect("a consumer");
    let consumer = Arc::new(consumer);
    let queue = PartitionQueue::split(&consumer, &kafka.topic, 0).expect("the queue");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&kafka.topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    (consumer, queue)
}

/// Events 3 to 5 as one batch spoilt by `fault`, produced to partition 0 on its leader (the
/// first broker); the batch's base offset.
fn spoil_3_to_5(kafka: &TestKafka, fault: Fault) -> i64 {
    let leader = kafka.brokers.split(',').next().expect("a broker");
    let spoilt: Vec<Vec<u8>> = (3..6).map(numbered_event).collect();
    produce_spoilt(leader, &kafka.topic, 0, &spoilt, fault)
}
