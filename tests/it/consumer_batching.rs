//! Batched processing in the running consumer: per-event outcomes, isolation of a bad record
//! through the one-event path, and B = 1 as the plain SPEC §4 contract.

use std::time::Duration;

use history_consumer::domain::DuplicateCause;

use crate::support::app::{spawn_app_with, test_settings};
use crate::support::faults::Trigger;
use crate::support::helpers::{test_database, unique_name, wait_for};
use crate::support::kafka::{Broker, TestKafka, numbered_event, on_both_brokers, payload};

#[actix_web::test]
async fn a_failing_batch_is_isolated_record_by_record_so_one_bad_row_blocks_only_itself() {
    let db = test_database().await;
    // The database refuses one event id with an error that may pass (not a rejection for good,
    // which would dead-letter it: see poison.rs): any transaction holding it fails.
    let poison = Trigger::before("refuse_poison", "INSERT", "history_events").refusing(
        "NEW.event_id = 'event-25'",
        "'poison row %', NEW.event_id USING ERRCODE = 'lock_not_available'",
    );
    poison.install(&db).await;
    let kafka = TestKafka::start(1);
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.runtime.batch_size = 64;
    settings.runtime.batch_linger = Duration::from_millis(50);
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    for i in 0..50 {
        kafka.send(&producer, None, "k", &numbered_event(i)).await;
    }
    // Everything but the poison row resolves; the watermark stops right before it.
    let view = wait_for(
        Duration::from_secs(30),
        "all but the poison row to resolve",
        || async {
            let view = app.partition(0).await?;
            let applied = view.actor.as_ref()?.counts.applied;
            (applied == 49).then_some(view)
        },
    )
    .await;
    let actor = view.actor.unwrap();
    assert_eq!(actor.backlog.len(), 1);
    assert_eq!(actor.backlog[0].event_id.as_deref(), Some("event-25"));
    assert!(
        actor.backlog[0].last_error.contains("poison row"),
        "{}",
        actor.backlog[0].last_error
    );
    assert_eq!(view.checkpoint.unwrap().watermark, Some(25));
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 49);

    poison.remove(&db).await;
    app.wait_committed(&kafka, &[50]).await;
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 50);
    app.shutdown().await;
}

#[actix_web::test]
async fn one_record_per_transaction_gives_the_same_rows_and_causes_as_batches() {
    for batch_size in [1, 128] {
        let db = test_database().await;
        let kafka = TestKafka::start(2);
        let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
        settings.runtime.batch_size = batch_size;
        let app = spawn_app_with(settings).await;
        app.wait_assigned(2).await;
        let producer = kafka.producer();
        for i in 0..600 {
            // Every sixth record republishes the one before it: half of them to the other
            // partition, half to the same one (with B = 128, often in the same batch as the
            // first copy, whose cause is then known without asking the database).
            let n = if i % 6 == 5 { i - 1 } else { i };
            let partition = if i % 12 == 11 { n % 2 } else { i % 2 };
            kafka
                .send(&producer, Some(partition as i32), "k", &numbered_event(n))
                .await;
        }
        let ends = kafka.ends().await;
        app.wait_committed(&kafka, &ends).await;
        assert_eq!(
            db.scalar("SELECT count(*) FROM history_events").await,
            500,
            "B = {batch_size}"
        );
        let republished = app.duplicates(DuplicateCause::Republish).await;
        assert_eq!(republished, 100, "B = {batch_size}");
        app.shutdown().await;
    }
}

on_both_brokers!(of_two_copies_of_an_event_in_batches_in_flight_together_the_earlier_is_stored);

/// Two batches of a partition in flight at once: a copy of an event in the later batch (which
/// inserts it last, as an id the earlier batch may hold) meets the first copy, last among the
/// earlier batch's ids, so if the later batch could start its inserts before the earlier one
/// held its markers, it would often store the later copy. The earlier copy must be stored
/// every time, as with one batch at a time.
async fn of_two_copies_of_an_event_in_batches_in_flight_together_the_earlier_is_stored(
    broker: Broker,
) {
    const RECORDS: usize = 3_000;
    const BATCH: usize = 128;
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 1).await;
    let producer = kafka.producer();
    // Every tenth record republishes the event of `BATCH / 2` records before it with another
    // status (a producer bug), most often one the batch before it carries.
    let id = |n: usize| format!("event-{n:05}");
    let sends = (0..RECORDS).map(|i| {
        let (n, to) = if i % 10 == 9 && i >= BATCH {
            (i - BATCH / 2, "closed")
        } else {
            (i, "resolved")
        };
        let body = payload(&id(n), "ticket-1", "open", to, "2026-10-03T08:00:00Z");
        let (kafka, producer) = (&kafka, &producer);
        async move { (n, kafka.send(producer, Some(0), "ticket-1", &body).await.1) }
    });
    let delivered = futures::future::join_all(sends).await;
    let mut first_offset = std::collections::BTreeMap::new();
    for (n, offset) in &delivered {
        first_offset.entry(*n).or_insert(*offset);
    }
    let copies = RECORDS - first_offset.len();

    // Started after the records are in the topic: its batches are full, two run at once.
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.runtime.batch_size = BATCH;
    settings.runtime.batches_in_flight = 2;
    let app = spawn_app_with(settings).await;
    let ends = kafka.ends().await;
    app.wait_committed(&kafka, &ends).await;

    let stored = db
        .pool
        .get()
        .await
        .unwrap()
        .query(
            "SELECT event_id, first_offset FROM inbox ORDER BY event_id",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(stored.len(), first_offset.len());
    let misplaced: Vec<String> = stored
        .iter()
        .zip(&first_offset)
        .filter(|(row, (n, offset))| {
            row.get::<_, String>(0) != id(**n) || row.get::<_, Option<i64>>(1) != Some(**offset)
        })
        .map(|(row, _)| row.get(0))
        .collect();
    assert!(
        misplaced.is_empty(),
        "a later copy was stored: {misplaced:?}"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events WHERE to_status = 'closed'")
            .await,
        0
    );
    assert_eq!(
        app.duplicates(DuplicateCause::Conflicting).await,
        copies as u64
    );
    app.shutdown().await;
}
