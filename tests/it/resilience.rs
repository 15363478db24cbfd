//! The runtime through trouble: a database outage, offset gaps, a broker outage, the eager
//! assignment strategy; on tansu too where it does what the test needs.

use std::time::Duration;

use history_consumer::actors::messages::PartitionAction;
use history_consumer::actors::status::PartitionState;

use crate::support::app::{spawn_app, spawn_app_with, test_settings};
use crate::support::helpers::own_database;
use crate::support::helpers::{test_database, unique_name, wait_for};
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka, Transaction, numbered_event};

on_both_brokers!(
    a_database_outage_backs_up_unknowns_pauses_at_the_bound_and_heals_dead_lettering_nothing
);

async fn a_database_outage_backs_up_unknowns_pauses_at_the_bound_and_heals_dead_lettering_nothing(
    broker: Broker,
) {
    // A cluster of its own: this test stops it.
    let (mut cluster, url) = own_database("outage").await;
    let kafka = TestKafka::start_on(broker, 1).await;
    let mut settings = test_settings(&url, &kafka, &unique_name("group"));
    settings.runtime.max_unresolved = 20;
    settings.runtime.partition_queue = 8;
    settings.runtime.batch_size = 8;
    settings.runtime.partition_fetch_kb = 1;
    settings.runtime.db_pool_size = 4;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    for i in 0..50 {
        kafka.send(&producer, None, "k", &numbered_event(i)).await;
    }
    app.wait_committed(&kafka, &[50]).await;

    cluster.stop().expect("stop postgres");
    for i in 50..250 {
        kafka.send(&producer, None, "k", &numbered_event(i)).await;
    }
    // The backlog fills to its bound and the partition stops taking records.
    let view = wait_for(
        Duration::from_secs(30),
        "the backlog to reach its bound",
        || async {
            let view = app.partition(0).await?;
            let actor = view.actor.as_ref()?;
            (actor.state == PartitionState::BacklogFull).then_some(view)
        },
    )
    .await;
    let actor = view.actor.as_ref().unwrap();
    assert_eq!(actor.backlog.len(), 20);
    assert_eq!(
        actor.backlog[0].offset, 50,
        "the first Unknown is the first record after the outage"
    );
    assert!(
        actor
            .backlog
            .iter()
            .all(|e| e.attempts >= 1 && !e.last_error.is_empty())
    );
    assert!(
        actor
            .backlog
            .iter()
            .all(|e| e.cause == history_consumer::domain::UnknownCause::Unavailable),
        "{:?}",
        actor.backlog.iter().map(|e| e.cause).collect::<Vec<_>>()
    );
    assert!(
        actor.in_flight <= 8,
        "at most the queue is held: {}",
        actor.in_flight
    );
    // The driver paused fetching once the queue was full.
    wait_for(Duration::from_secs(10), "fetching to pause", || async {
        (crate::support::metrics::of(&app, "history_partition_fetch_paused{partition=\"0\"}")
            == Some(1.0))
        .then_some(())
    })
    .await;
    // The committed offset never passes the first Unknown, however long it lasts.
    for _ in 0..5 {
        assert_eq!(kafka.committed(&app.group).await, vec![50]);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let still = app.partition(0).await.unwrap();
    assert!(still.actor.unwrap().backlog.len() <= 20);

    cluster.restart().expect("restart postgres");
    app.wait_committed(&kafka, &[250]).await;
    let pool = history_consumer::db::pool(&url, 1).unwrap();
    let rows: i64 = pool
        .get()
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM history_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 250);
    let letters: i64 = pool
        .get()
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM dead_letters", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(letters, 0, "an outage says nothing about the records");
    let healed = app.partition(0).await.unwrap().actor.unwrap();
    assert!(healed.backlog.is_empty());
    assert_eq!(healed.state, PartitionState::Running);
    assert_eq!(healed.counts.dead_lettered, 0);
    assert_eq!(healed.guard.consecutive, 0);
    app.shutdown().await;
}

// On the mock only: tansu 0.6 hands the records of aborted transactions to read_committed
// consumers (a broker defect: flushed before the abort, the service stored all 15 events), and
// its commit markers meet the fetch-path bug of fetch.rs (committed stops one short).
#[actix_web::test]
async fn offset_gaps_from_aborted_transactions_do_not_stall_the_watermark() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;

    let transactions = [(0, true), (1, false), (2, true)]
        .into_iter()
        .map(|(batch, commit)| Transaction {
            records: (0..5)
                .map(|i| (0, numbered_event(batch * 100 + i)))
                .collect(),
            commit,
        })
        .collect();
    kafka.send_transactions(transactions).await;

    // A real broker leaves the aborted records and the transaction markers in the log (gaps
    // for a read_committed consumer); librdkafka's mock cluster keeps neither, so here the end
    // is whatever the log holds. Gaps themselves are covered by the watermark's own tests.
    let ends = kafka.ends().await;
    assert!(
        ends[0] >= 10,
        "the committed transactions are in the log: end {}",
        ends[0]
    );
    app.wait_committed(&kafka, &ends).await;
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 10);
    app.shutdown().await;
}

// On the mock only: it takes its broker down and up on demand; the tansu server is shared by
// every test of the process.
#[actix_web::test]
async fn the_consumer_recovers_by_itself_from_a_broker_outage() {
    let db = test_database().await;
    let kafka = TestKafka::start(2);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(2).await;
    let producer = kafka.producer();
    for i in 0..20 {
        kafka
            .send(&producer, Some((i % 2) as i32), "k", &numbered_event(i))
            .await;
    }
    app.wait_committed(&kafka, &[10, 10]).await;

    kafka.mock().broker_down(1).expect("broker down");
    tokio::time::sleep(Duration::from_secs(3)).await;
    kafka.mock().broker_up(1).expect("broker up");

    for i in 20..40 {
        kafka
            .send(&producer, Some((i % 2) as i32), "k", &numbered_event(i))
            .await;
    }
    app.wait_committed(&kafka, &[20, 20]).await;
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 40);
    app.shutdown().await;
}

on_both_brokers!(the_eager_strategy_with_two_members_loses_nothing_and_stores_each_event_once);

async fn the_eager_strategy_with_two_members_loses_nothing_and_stores_each_event_once(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 4).await;
    let group = unique_name("group");
    let eager = |settings: &mut history_consumer::config::Settings| {
        settings
            .kafka
            .options
            .set("partition.assignment.strategy", "range");
    };
    let mut first = test_settings(&db.url, &kafka, &group);
    eager(&mut first);
    let one = spawn_app_with(first).await;
    one.wait_assigned(4).await;
    let producer = kafka.producer();
    for i in 0..400 {
        kafka
            .send(&producer, Some((i % 4) as i32), "k", &numbered_event(i))
            .await;
    }
    // A second member joins mid-stream: everything is revoked and reassigned.
    let mut second = test_settings(&db.url, &kafka, &group);
    eager(&mut second);
    let two = spawn_app_with(second).await;
    for i in 400..800 {
        kafka
            .send(&producer, Some((i % 4) as i32), "k", &numbered_event(i))
            .await;
    }
    wait_for(
        kafka.join_deadline(),
        "both members to own partitions",
        || async {
            let (a, b) = (
                one.status().await.partitions.len(),
                two.status().await.partitions.len(),
            );
            (a + b == 4 && a > 0 && b > 0).then_some(())
        },
    )
    .await;
    one.wait_committed(&kafka, &[200, 200, 200, 200]).await;
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 800);
    two.shutdown().await;
    one.shutdown().await;
}

#[actix_web::test]
async fn a_duplicate_whose_classification_hangs_still_resolves_and_moves_the_watermark() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let group = unique_name("group");
    let first = spawn_app_with(test_settings(&db.url, &kafka, &group)).await;
    first.wait_assigned(1).await;
    let producer = kafka.producer();
    let bodies: Vec<Vec<u8>> = (0..20).map(numbered_event).collect();
    let publish = || async {
        let sends = bodies
            .iter()
            .map(|body| kafka.send(&producer, Some(0), "k", body));
        futures::future::join_all(sends).await;
    };
    publish().await;
    first.wait_committed(&kafka, &[20]).await;
    // Another member takes over: it does not remember applying these events (a partition
    // classifies a duplicate of what it applied lately without a query), so it must ask.
    first.shutdown().await;
    let app = spawn_app_with(test_settings(&db.url, &kafka, &group)).await;
    app.wait_assigned(1).await;

    // A session holds history_events locked: the inbox's duplicate check does not touch the
    // table, but classifying a duplicate reads it and waits for the lock, as it would on a
    // half-open connection.
    let locker = db.pool.get().await.unwrap();
    locker
        .batch_execute("BEGIN; LOCK TABLE history_events IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    publish().await;
    // The outcomes (AlreadyApplied) are known without the classification: the watermark moves.
    app.wait_committed(&kafka, &[40]).await;
    assert_eq!(
        app.duplicates(history_consumer::domain::DuplicateCause::Unclassified)
            .await,
        20
    );
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 20);
    app.shutdown().await;
}

on_both_brokers!(an_operator_pause_survives_a_revoke_and_reassign_and_records_flow_after_resume);

async fn an_operator_pause_survives_a_revoke_and_reassign_and_records_flow_after_resume(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 2).await;
    let group = unique_name("group");
    let one = spawn_app_with(test_settings(&db.url, &kafka, &group)).await;
    one.wait_assigned(2).await;
    for partition in 0..2 {
        one.operator(partition, PartitionAction::Pause).await;
    }
    let producer = kafka.producer();
    let produce = |range: std::ops::Range<usize>| {
        let (kafka, producer) = (&kafka, &producer);
        async move {
            for i in range {
                let partition = (i % 2) as i32;
                kafka
                    .send(producer, Some(partition), "k", &numbered_event(i))
                    .await;
            }
        }
    };
    produce(0..100).await;

    // A second member takes one partition and consumes it (the pause belongs to the first
    // instance), then leaves: the partition comes back to the first member, still paused.
    let two = spawn_app_with(test_settings(&db.url, &kafka, &group)).await;
    two.wait_assigned(1).await;
    // Cooperative rebalancing: the first member may still be giving the partition up.
    one.wait_assigned(1).await;
    let moved = two.status().await.partitions[0].partition;
    let generation_before = one
        .partition(moved)
        .await
        .map(|v| v.actor.unwrap().generation);
    wait_for(
        Duration::from_secs(60),
        "the second member to consume its partition",
        || async {
            let committed = kafka.committed(&group).await;
            (committed[moved as usize] == 50).then_some(())
        },
    )
    .await;
    two.shutdown().await;
    one.wait_assigned(2).await;
    produce(100..200).await;
    let view = wait_for(
        Duration::from_secs(30),
        "the partition to come back",
        || async {
            let view = one.partition(moved).await?;
            (view.actor.as_ref()?.generation > generation_before.unwrap_or(0)).then_some(view)
        },
    )
    .await;
    let actor = view.actor.expect("an actor");
    assert!(actor.operator_paused, "the pause survived the reassignment");
    assert_eq!(actor.state, PartitionState::Paused);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let committed = kafka.committed(&group).await;
    assert_eq!(
        committed[moved as usize], 50,
        "nothing new taken while paused"
    );
    assert!(committed[(1 - moved) as usize] <= 0, "{committed:?}");

    for partition in 0..2 {
        one.operator(partition, PartitionAction::Resume).await;
    }
    one.wait_committed(&kafka, &[100, 100]).await;
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 200);
    one.shutdown().await;
}
