//! The fetch path under a real log and a real group: a transactional producer's commit markers,
//! and a partition that leaves and comes back while fetching it had stopped. Both showed bugs of
//! the fetch path before each partition was read from its own queue on credit (issue 10): the
//! last commit marker was never stepped over, and a partition paused by the driver, revoked and
//! assigned back was never fetched again.

use std::time::Duration;

use history_consumer::config::Settings;

use crate::support::app::{TestApp, spawn_app, spawn_app_with, test_settings};
use crate::support::helpers::{TestDb, assert_stored_once, test_database, unique_name, wait_for};
use crate::support::kafka::{Broker, TestKafka, Transaction, numbered_event};

// On the mock this passes trivially: it keeps no commit markers, so the high watermark is one
// past the last record. It stays as the check that the body itself is sound.
#[actix_web::test]
async fn a_transactional_producers_topic_is_committed_to_its_high_watermark_on_the_mock() {
    a_transactional_producers_topic_is_committed_to_its_high_watermark(Broker::Mock).await;
}

// Before issue 10 every partition's committed offset stopped one short of its high watermark:
// the last commit marker was never stepped over.
#[actix_web::test]
async fn a_transactional_producers_topic_is_committed_to_its_high_watermark_on_tansu() {
    a_transactional_producers_topic_is_committed_to_its_high_watermark(Broker::Tansu).await;
}

async fn a_transactional_producers_topic_is_committed_to_its_high_watermark(broker: Broker) {
    const PARTITIONS: i32 = 4;
    const TRANSACTIONS: usize = 8;
    const PER_TRANSACTION: usize = 25;
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, PARTITIONS).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(PARTITIONS as usize).await;

    // Each transaction writes to every partition, so each leaves a commit marker in each.
    let transactions = (0..TRANSACTIONS)
        .map(|t| Transaction {
            records: (t * PER_TRANSACTION..(t + 1) * PER_TRANSACTION)
                .map(|i| ((i % PARTITIONS as usize) as i32, numbered_event(i)))
                .collect(),
            commit: true,
        })
        .collect();
    kafka.send_transactions(transactions).await;
    let total = TRANSACTIONS * PER_TRANSACTION;
    let ends = kafka.ends().await;
    let markers = match broker {
        Broker::Mock => 0,
        Broker::Tansu => TRANSACTIONS * PARTITIONS as usize,
    };
    assert_eq!(
        ends.iter().sum::<i64>(),
        (total + markers) as i64,
        "the log holds the records and one commit marker per transaction and partition"
    );

    wait_for(Duration::from_secs(60), "every event stored", || async {
        (db.scalar("SELECT count(*) FROM history_events").await == total as i64).then_some(())
    })
    .await;
    app.wait_committed(&kafka, &ends).await;
    assert_stored_once(&db, total).await;
    app.shutdown().await;
}

/// A group whose committed offset points at a commit marker (a member committed its last
/// record and died before stepping over the marker) starts there: the consumer's position
/// moves past the marker with no record to process, and the group is committed to its end.
#[actix_web::test]
async fn a_group_committed_just_before_a_commit_marker_is_committed_past_it_without_a_record() {
    let db = test_database().await;
    let kafka = TestKafka::start_on(Broker::Tansu, 1).await;
    let transactions = (0..2)
        .map(|t| Transaction {
            records: (t * 5..t * 5 + 5).map(|i| (0, numbered_event(i))).collect(),
            commit: true,
        })
        .collect();
    let delivered = kafka.send_transactions(transactions).await;
    let last_record = delivered.last().and_then(|t| t.last()).expect("records").1;
    let ends = kafka.ends().await;
    assert_eq!(
        ends,
        vec![last_record + 2],
        "the last record, then its commit marker"
    );
    let group = unique_name("group");
    kafka.commit_for(&group, &[last_record + 1]).await;

    let app = spawn_app_with(test_settings(&db.url, &kafka, &group)).await;
    app.wait_assigned(1).await;
    app.wait_committed(&kafka, &ends).await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM inbox").await,
        0,
        "no record was processed"
    );
    app.shutdown().await;
}

#[actix_web::test]
async fn a_partition_revoked_and_reassigned_during_a_database_fault_is_fetched_again_on_the_mock() {
    a_partition_revoked_and_reassigned_during_a_database_fault_is_fetched_again(Broker::Mock).await;
}

#[actix_web::test]
async fn a_partition_revoked_and_reassigned_during_a_database_fault_is_fetched_again_on_tansu() {
    a_partition_revoked_and_reassigned_during_a_database_fault_is_fetched_again(Broker::Tansu)
        .await;
}

/// One member stops fetching its partitions while every insert fails; a second member joins,
/// takes some of them and leaves; they come back to the first; the fault clears. Before issue
/// 10 the partitions that went away paused came back paused, and nothing fetched them again.
async fn a_partition_revoked_and_reassigned_during_a_database_fault_is_fetched_again(
    broker: Broker,
) {
    const PARTITIONS: i32 = 4;
    const TOTAL: usize = 400;
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, PARTITIONS).await;
    let group = unique_name("group");
    let settings = || {
        let mut settings = test_settings(&db.url, &kafka, &group);
        stop_fetching_early(&mut settings);
        settings
    };
    let first = spawn_app_with(settings()).await;
    first.wait_assigned(PARTITIONS as usize).await;

    inbox_fault(&db, true).await;
    let producer = kafka.producer();
    let sends = (0..TOTAL).map(|i| {
        let (kafka, producer) = (&kafka, &producer);
        async move {
            let body = numbered_event(i);
            let partition = (i % PARTITIONS as usize) as i32;
            kafka.send(producer, Some(partition), "k", &body).await
        }
    });
    futures::future::join_all(sends).await;
    let ends = kafka.ends().await;
    wait_for(
        Duration::from_secs(30),
        "the first member to stop fetching every partition",
        || async {
            let mut stopped = true;
            for partition in 0..PARTITIONS {
                stopped &= fetching_stopped(&first, partition);
            }
            stopped.then_some(())
        },
    )
    .await;

    let second = spawn_app_with(settings()).await;
    wait_for(
        kafka.join_deadline(),
        "the second member to take some partitions",
        || async {
            let (a, b) = (
                first.status().await.partitions.len(),
                second.status().await.partitions.len(),
            );
            (a > 0 && b > 0 && a + b == PARTITIONS as usize).then_some(())
        },
    )
    .await;
    let moved: Vec<i32> = second
        .status()
        .await
        .partitions
        .iter()
        .map(|p| p.partition)
        .collect();
    eprintln!("partitions {moved:?} went to the second member and come back");
    second.shutdown().await;
    first.wait_assigned(PARTITIONS as usize).await;

    inbox_fault(&db, false).await;
    let mut committed = Vec::new();
    let drained = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            committed = kafka.committed(&first.group).await;
            if committed == ends {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(
        drained.is_ok(),
        "committed {committed:?}, ends {ends:?} (partitions {moved:?} went away and came \
         back); the first member now:\n{}",
        describe(&first).await
    );
    assert_stored_once(&db, TOTAL).await;
    first.shutdown().await;
}

// ---- Fetch-path tuning for the revoke-during-fault test ------------------------------------
// How the fetch path is made to stop fetching after a few dozen records, and how a test sees
// that it did: the partition actor's Unknown backlog reaches its bound, the actor asks for no
// more records, its window and librdkafka's per-partition prefetch fill.

/// Small bounds, so that a partition stops taking records after a few dozen.
fn stop_fetching_early(settings: &mut Settings) {
    settings.runtime.max_unresolved = 20;
    settings.runtime.partition_queue = 8;
    settings.runtime.batch_size = 8;
    settings.runtime.partition_fetch_kb = 1;
}

/// Whether `app` has stopped taking records of `partition` (its fetching stops behind it).
fn fetching_stopped(app: &TestApp, partition: i32) -> bool {
    app.handle.metrics.render().contains(&format!(
        "history_partition_fetch_paused{{partition=\"{partition}\"}} 1"
    ))
}

// ---- end of the fetch-path tuning ----------------------------------------------------------

/// Makes every insert into the inbox fail with a transient error (SQLSTATE 40001,
/// serialization_failure), or stops doing so.
async fn inbox_fault(db: &TestDb, on: bool) {
    const ON: &str = "
        CREATE OR REPLACE FUNCTION injected_inbox_fault() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'injected fault' USING ERRCODE = 'serialization_failure';
        END $$;
        CREATE TRIGGER injected_inbox_fault BEFORE INSERT ON inbox
            FOR EACH ROW EXECUTE FUNCTION injected_inbox_fault();";
    const OFF: &str = "DROP TRIGGER injected_inbox_fault ON inbox";
    let client = db.pool.get().await.expect("a connection");
    client
        .batch_execute(if on { ON } else { OFF })
        .await
        .expect("the fault trigger");
}

/// The member's partitions as its status and metrics show them, for failure messages.
async fn describe(app: &TestApp) -> String {
    let mut lines = Vec::new();
    for view in app.status().await.partitions {
        let actor = view.actor.as_ref();
        lines.push(format!(
            "partition {}: state {:?}, in flight {:?}, backlog {:?}, last offset {:?}, \
             fetch stopped {}",
            view.partition,
            actor.map(|a| a.state),
            actor.map(|a| a.in_flight),
            actor.map(|a| a.backlog.len()),
            actor.and_then(|a| a.last_offset),
            fetching_stopped(app, view.partition),
        ));
    }
    lines.join("\n")
}
