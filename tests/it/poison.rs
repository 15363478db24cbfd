//! Poison records end to end: a record the database will never accept does not freeze its
//! partition (it is dead-lettered and the partition commits past it), a database outage
//! dead-letters nothing, and a burst of rejections — a fault of the database, not of the
//! records — engages the guard: the partition blocks instead of draining into `dead_letters`.

use std::time::Duration;

use history_consumer::actors::messages::PartitionAction;

use crate::rejections::incompressible;
use crate::support::app::{spawn_app, spawn_app_with, test_settings};
use crate::support::faults::{refuse_rows, stop_refusing};
use crate::support::helpers::{TestDb, test_database, unique_name, wait_for};
use crate::support::http::get;
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka, numbered_event, payload};
use crate::support::metrics;

/// The dead letters as (offset, reason, message, payload), in offset order.
pub async fn dead_letters(db: &TestDb) -> Vec<(i64, String, String, Option<Vec<u8>>)> {
    let client = db.pool.get().await.unwrap();
    client
        .query(
            "SELECT kafka_offset, reason, message, payload FROM dead_letters ORDER BY kafka_offset",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect()
}

on_both_brokers!(
    a_long_ticket_and_a_row_a_trigger_rejects_are_dead_lettered_and_the_partition_commits_past_them
);

async fn a_long_ticket_and_a_row_a_trigger_rejects_are_dead_lettered_and_the_partition_commits_past_them(
    broker: Broker,
) {
    let db = test_database().await;
    refuse_rows(&db, "NEW.ticket_id = 'poison'").await;
    let kafka = TestKafka::start_on(broker, 1).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    let at = "2026-10-03T08:00:00Z";
    let long = payload("event-long", &incompressible(3000), "open", "resolved", at);
    let poison = payload("event-poison", "poison", "open", "resolved", at);
    let records = [
        numbered_event(0),
        long.clone(),
        numbered_event(1),
        poison.clone(),
        numbered_event(2),
    ];
    for body in &records {
        kafka.send(&producer, Some(0), "k", body).await;
    }

    app.wait_committed(&kafka, &[5]).await;
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 3);
    let letters = dead_letters(&db).await;
    assert_eq!(letters.len(), 2, "{letters:?}");
    let (offset, reason, message, bytes) = &letters[0];
    assert_eq!((*offset, reason.as_str()), (1, "oversized_field"));
    assert!(
        message.contains("ticket_id has 3000 characters, the limit is 200"),
        "{message}"
    );
    assert_eq!(bytes.as_deref(), Some(long.as_slice()), "raw bytes kept");
    let (offset, reason, message, bytes) = &letters[1];
    assert_eq!((*offset, reason.as_str()), (3, "rejected_by_database"));
    assert!(
        message.starts_with("inserting the history row failed: ")
            && message.contains("ticket poison is refused (SQLSTATE P0001)"),
        "{message}"
    );
    assert_eq!(bytes.as_deref(), Some(poison.as_slice()), "raw bytes kept");
    assert_eq!(
        metrics::of(
            &app,
            "history_dead_letters_total{partition=\"0\",reason=\"rejected_by_database\"}"
        ),
        Some(1.0)
    );
    let actor = app.partition(0).await.unwrap().actor.unwrap();
    assert!(actor.backlog.is_empty());
    assert!(!actor.guard.engaged);
    assert_eq!(
        actor.counts.dead_letters.get("rejected_by_database"),
        Some(&1)
    );
    app.shutdown().await;
}

on_both_brokers!(
    a_burst_of_rejections_engages_the_guard_blocks_the_partition_and_releases_once_fixed
);

async fn a_burst_of_rejections_engages_the_guard_blocks_the_partition_and_releases_once_fixed(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 1).await;
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.runtime.max_consecutive_rejections = 3;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    kafka
        .send(&producer, Some(0), "k", &numbered_event(0))
        .await;
    app.wait_committed(&kafka, &[1]).await;

    // A trigger gone wrong: every row is refused.
    refuse_rows(&db, "true").await;
    for i in 1..11 {
        kafka
            .send(&producer, Some(0), "k", &numbered_event(i))
            .await;
    }
    let actor = wait_for(Duration::from_secs(30), "the guard to engage", || async {
        let actor = app.partition(0).await?.actor?;
        (actor.guard.engaged && actor.backlog.len() == 7).then_some(actor)
    })
    .await;
    // Three dead-lettered, the fourth held: engaged; the held ones count as they are retried.
    assert!(actor.guard.consecutive >= 4, "{:?}", actor.guard);
    // Retries run lowest offset first among those due (their delays have jitter).
    let mut offsets: Vec<i64> = dead_letters(&db).await.iter().map(|l| l.0).collect();
    assert_eq!(offsets.len(), 3);
    let first_held = actor.backlog[0].offset;
    offsets.extend(actor.backlog.iter().map(|e| e.offset));
    offsets.sort_unstable();
    assert_eq!(offsets, (1..11).collect::<Vec<i64>>());
    assert!(
        actor
            .backlog
            .iter()
            .all(|e| e.last_error.contains("is refused")),
        "{:?}",
        actor.backlog
    );
    let addr = app.handle.admin_addr.to_string();
    let summary = wait_for(
        Duration::from_secs(10),
        "the partition to be stuck",
        || async {
            let summary = get(&addr, "/api/partitions/0").await.json();
            (summary["state"] == "stuck").then_some(summary)
        },
    )
    .await;
    assert_eq!(summary["stuck"]["kind"], "rejections_held");
    assert!(
        summary["state_reason"]
            .as_str()
            .unwrap()
            .starts_with("dead-lettering stopped: "),
        "{summary}"
    );
    assert_eq!(
        metrics::of(
            &app,
            "history_partition_dead_letter_guard_engaged{partition=\"0\"}"
        ),
        Some(1.0)
    );
    // Blocked, not drained: retried, the held records stay Unknown and nothing more is
    // dead-lettered; the committed offset stays before the first of them.
    app.operator(0, PartitionAction::RetryNow).await;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(dead_letters(&db).await.len(), 3);
        assert_eq!(kafka.committed(&app.group).await, vec![first_held]);
    }
    let held = app.partition(0).await.unwrap().actor.unwrap();
    assert_eq!(held.backlog.len(), 7, "still held");
    assert_eq!(
        held.guard.consecutive, 10,
        "every held record was rejected again"
    );
    assert!(
        held.backlog
            .iter()
            .all(|e| e.cause == history_consumer::domain::UnknownCause::Rejected),
        "{:?}",
        held.backlog
    );

    // The DBA drops the trigger: the held records are stored, the guard lets go.
    stop_refusing(&db).await;
    app.operator(0, PartitionAction::RetryNow).await;
    app.wait_committed(&kafka, &[11]).await;
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 8);
    assert_eq!(dead_letters(&db).await.len(), 3);
    let actor = app.partition(0).await.unwrap().actor.unwrap();
    assert!(!actor.guard.engaged && actor.backlog.is_empty());
    assert_eq!(
        metrics::of(
            &app,
            "history_partition_dead_letter_guard_engaged{partition=\"0\"}"
        ),
        Some(0.0)
    );
    app.shutdown().await;
}
