//! Records librdkafka cannot read (issue 21): a batch whose CRC does not match its bytes and a
//! batch that claims a codec its bytes are not, written into the log with a Produce request of
//! our own (`support/raw_batch.rs`; both brokers store a produced batch as it came). The
//! partition is held at the batch with the cause shown, and nothing after it is stored or
//! committed.

use std::time::{Duration, Instant};

use history_consumer::domain::HeldCause;
use history_consumer::domain::Trouble;
use history_consumer::domain::fetch_error::Unreadable;

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
    let leader = kafka
        .brokers
        .split(',')
        .next()
        .expect("a broker")
        .to_owned();
    let spoilt: Vec<Vec<u8>> = (3..6).map(numbered_event).collect();
    let at = produce_spoilt(&leader, &kafka.topic, 0, &spoilt, fault);
    assert_eq!(at, 3, "the spoilt batch follows the first three records");
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
