//! The fetch path under a real log and a real group: a transactional producer's commit markers,
//! and a partition that leaves and comes back while fetching it had stopped. Both showed bugs of
//! the fetch path before each partition was read from its own queue on credit (issue 10): the
//! last commit marker was never stepped over, and a partition paused by the driver, revoked and
//! assigned back was never fetched again.

use std::time::Duration;

use history_consumer::config::Settings;

use history_consumer::stuck::StuckRules;

use crate::support::app::{ADMIN_TOKEN, TestApp, spawn_app, spawn_app_with, test_settings};
use crate::support::helpers::{TestDb, assert_stored_once, test_database, unique_name, wait_for};
use crate::support::http::request;
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{
    Broker, TestKafka, Transaction, a_moment_between, numbered_event, point_in_time,
};

// Before issue 10 every partition's committed offset stopped one short of its high watermark
// on tansu: the last commit marker was never stepped over. On the mock this passes trivially:
// it keeps no commit markers, so the high watermark is one past the last record. It stays as
// the check that the body itself is sound.
on_both_brokers!(a_transactional_producers_topic_is_committed_to_its_high_watermark);

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
    let markers = if broker.writes_commit_markers() {
        TRANSACTIONS * PARTITIONS as usize
    } else {
        0
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

/// A partition that comes back to the same member with its group committed at a commit
/// marker (another member committed the transaction's last record and left before stepping
/// over the marker) is committed past the marker without a record and is never shown stuck;
/// then a live rewind of it, to before the transaction and to after it, ends at the same place.
/// Before issue 21 only a partition's first assignment in the process could step over offsets
/// without records before its first record: the reassigned one stayed one short of its end,
/// and after `--stall` it was shown stuck and `HistoryPartitionStuck` paged for nothing.
#[actix_web::test]
async fn a_partition_reassigned_to_the_same_member_at_a_commit_marker_is_committed_past_it_and_not_stuck_on_tansu()
 {
    const PARTITIONS: i32 = 2;
    let db = test_database().await;
    let kafka = TestKafka::start_on(Broker::Tansu, PARTITIONS).await;
    let group = unique_name("group");
    let mut settings = test_settings(&db.url, &kafka, &group);
    settings.runtime.stuck = StuckRules {
        unknown_age: Duration::from_secs(60),
        stall: STALL,
    };
    let app = spawn_app_with(settings).await;
    app.wait_assigned(PARTITIONS as usize).await;
    let before = a_moment_between().await;
    let transactions = vec![Transaction {
        records: (0..10)
            .map(|i| ((i % PARTITIONS as usize) as i32, numbered_event(i)))
            .collect(),
        commit: true,
    }];
    kafka.send_transactions(transactions).await;
    let after = a_moment_between().await;
    let ends = kafka.ends().await;
    assert_eq!(ends, vec![6, 6], "five records and a commit marker each");
    app.wait_committed(&kafka, &ends).await;

    let markers: Vec<i64> = ends.iter().map(|end| end - 1).collect();
    let taken = member_commits_and_leaves(&kafka, &group, &markers).await;
    eprintln!("partitions {taken:?} went to the other member and come back at the marker");
    app.wait_assigned(PARTITIONS as usize).await;
    app.wait_committed(&kafka, &ends).await;
    never_stuck(&app, PARTITIONS).await;

    for to in [before, after] {
        for &partition in &taken {
            let admin = app.handle.admin_addr.to_string();
            let path = format!(
                "/api/partitions/{partition}/rewind?to={}",
                point_in_time(to)
            );
            let bearer = format!("Bearer {ADMIN_TOKEN}");
            let done = request(&admin, "POST", &path, &[("Authorization", &bearer)], "").await;
            assert_eq!(done.status, 200, "{}", done.body);
        }
        app.wait_committed(&kafka, &ends).await;
        never_stuck(&app, PARTITIONS).await;
    }
    assert_stored_once(&db, 10).await;
    app.shutdown().await;
}

/// How long a partition's watermark may stand still with records waiting before it is stuck,
/// in the marker test.
const STALL: Duration = Duration::from_secs(3);

/// Checks over twice `STALL` that no partition of `app` is ever stuck.
async fn never_stuck(app: &TestApp, partitions: i32) {
    let until = std::time::Instant::now() + STALL * 2;
    while std::time::Instant::now() < until {
        let metrics = app.handle.metrics.render();
        for partition in 0..partitions {
            assert!(
                !metrics.contains(&format!(
                    "history_partition_stuck{{partition=\"{partition}\"}} 1"
                )),
                "partition {partition} is shown stuck:\n{}",
                describe(app).await
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A second member of `group` (a plain consumer) joins, commits `offsets[p]` for each partition
/// `p` it is given, and leaves; the partitions it was given.
async fn member_commits_and_leaves(kafka: &TestKafka, group: &str, offsets: &[i64]) -> Vec<i32> {
    let (client, topic, group) = (kafka.client(), kafka.topic.clone(), group.to_owned());
    let (offsets, deadline) = (offsets.to_vec(), kafka.join_deadline());
    tokio::task::spawn_blocking(move || {
        use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
        let consumer: BaseConsumer = client
            .clone()
            .set("group.id", &group)
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "500")
            .set("enable.auto.commit", "false")
            .create()
            .expect("a second member");
        consumer.subscribe(&[&topic]).expect("subscribe");
        let until = std::time::Instant::now() + deadline;
        let taken: Vec<i32> = loop {
            // Records are not ours to read: the service holds them.
            let _ = consumer.poll(Duration::from_millis(100));
            let assignment = consumer.assignment().expect("assignment");
            let taken: Vec<i32> = assignment
                .elements()
                .iter()
                .map(|e| e.partition())
                .collect();
            drop(assignment);
            if !taken.is_empty() {
                break taken;
            }
            assert!(
                std::time::Instant::now() < until,
                "the second member got no partition"
            );
        };
        let mut tpl = rdkafka::TopicPartitionList::new();
        for &partition in &taken {
            tpl.add_partition_offset(
                &topic,
                partition,
                rdkafka::Offset::Offset(offsets[partition as usize]),
            )
            .expect("a position");
        }
        consumer.commit(&tpl, CommitMode::Sync).expect("committed");
        consumer.unsubscribe();
        for _ in 0..20 {
            let _ = consumer.poll(Duration::from_millis(100));
        }
        taken
    })
    .await
    .expect("the second member")
}

on_both_brokers!(a_partition_revoked_and_reassigned_during_a_database_fault_is_fetched_again);

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
    let fault = crate::support::faults::inbox_fault("true");
    if on {
        fault.install(db).await;
    } else {
        fault.remove(db).await;
    }
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

/// A fetch that fails at the end of a partition, shown as failing, then records after it.
/// librdkafka's batch read moves the consumer's position past a failed fetch's offset as past
/// a record's, although nothing at that offset was read; the driver reads that position to
/// step over offsets without records (commit markers). Believed, it would step over the next
/// record's offset before the record came, and the record would never be stored. Only the
/// mock can fail a fetch on demand.
#[actix_web::test]
async fn a_failed_fetch_at_the_end_of_a_partition_does_not_step_over_the_next_record_on_the_mock() {
    use history_consumer::domain::Trouble;
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

    let db = test_database().await;
    let kafka = TestKafka::start_on(Broker::Mock, 1).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    kafka.send_numbered(0..3, 0).await;
    app.wait_committed(&kafka, &[3]).await;

    kafka.mock().request_errors(
        RDKafkaApiKey::Fetch,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_POLICY_VIOLATION],
    );
    wait_for(
        Duration::from_secs(30),
        "the partition shown failing",
        || async { matches!(app.partition(0).await?.fetch?, Trouble::Failing(_)).then_some(()) },
    )
    .await;
    // The driver looks at the position every 20 ms, the checkpoint commits every 100 ms:
    // the committed offset must stay where the failed fetch is, 3, as nothing was read there.
    // (Stepped over, it was committed as 4 before record 3 came: a crash then would have
    // lost it.)
    let until = std::time::Instant::now() + Duration::from_secs(1);
    while std::time::Instant::now() < until {
        assert_eq!(kafka.committed(&app.group).await, vec![3]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    kafka.send_numbered(3..6, 0).await;
    app.wait_committed(&kafka, &[6]).await;
    assert_stored_once(&db, 6).await;
    app.shutdown().await;
}
