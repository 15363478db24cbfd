//! The service as the real binary, where a process must die: SIGTERM, `kill -9`, and two or
//! three members of one group, on the mock cluster and on tansu.

use std::process::Command;
use std::time::Duration;

use crate::support::helpers::{TestDb, assert_stored_once, test_database, unique_name, wait_for};
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka, numbered_event};
use crate::support::kafka::{produce, wait_committed};
use crate::support::service::ServiceProcess;

/// Waits until `members` own every partition between them, each at least one.
async fn wait_shared(kafka: &TestKafka, members: &[&ServiceProcess], what: &str) {
    wait_for(kafka.join_deadline(), what, || async {
        let mut owned = Vec::new();
        for member in members {
            owned.push(member.owned_partitions().await);
        }
        let all = owned.iter().sum::<usize>() == kafka.partitions as usize;
        (all && owned.iter().all(|&n| n > 0)).then_some(())
    })
    .await;
}

async fn rows_per_partition(db: &TestDb, partitions: i32) -> Vec<i64> {
    let client = db.pool.get().await.unwrap();
    let mut counts = vec![0; partitions as usize];
    for row in client
        .query(
            "SELECT first_partition, count(*) FROM inbox GROUP BY 1",
            &[],
        )
        .await
        .unwrap()
    {
        counts[row.get::<_, i32>(0) as usize] = row.get(1);
    }
    counts
}

on_both_brokers!(sigterm_mid_stream_exits_zero_with_committed_offsets_equal_to_processed_records);

async fn sigterm_mid_stream_exits_zero_with_committed_offsets_equal_to_processed_records(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 2).await;
    let group = unique_name("group");
    produce(&kafka, 0..3000).await;
    let mut service = ServiceProcess::spawn(&db, &kafka, &group);
    wait_for(
        Duration::from_secs(60),
        "processing to be under way",
        || async { (db.scalar("SELECT count(*) FROM history_events").await > 200).then_some(()) },
    )
    .await;
    service.sigterm();
    assert_eq!(service.wait_exit(Duration::from_secs(30)).await, Some(0));

    // A partition the member had not reached yet has no committed offset (-1): zero records.
    let committed: Vec<i64> = kafka
        .committed(&group)
        .await
        .into_iter()
        .map(|offset| offset.max(0))
        .collect();
    let processed = rows_per_partition(&db, 2).await;
    assert_eq!(
        committed, processed,
        "committed offsets are exactly the processed records"
    );
}

on_both_brokers!(kill_9_at_random_moments_loses_nothing_and_stores_nothing_twice);

async fn kill_9_at_random_moments_loses_nothing_and_stores_nothing_twice(broker: Broker) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 4).await;
    let group = unique_name("group");
    let total = 4000;
    let producing = {
        let producer = kafka.producer();
        let topic = kafka.topic.clone();
        let acknowledged = kafka.acknowledged();
        actix_web::rt::spawn(async move {
            for i in 0..total {
                let body = numbered_event(i);
                let record = rdkafka::producer::FutureRecord::to(&topic)
                    .partition((i % 4) as i32)
                    .key("k")
                    .payload(&body);
                let delivery = producer
                    .send(record, Duration::from_secs(30))
                    .await
                    .map_err(|(e, _)| e)
                    .unwrap();
                acknowledged.record(delivery.partition, delivery.offset);
                if i % 100 == 0 {
                    tokio::time::sleep(Duration::from_millis(150)).await;
                }
            }
        })
    };
    for cycle in 0..5 {
        let mut service = ServiceProcess::spawn(&db, &kafka, &group);
        let pause = Duration::from_millis(700 + rand::random::<u64>() % 2500);
        tokio::time::sleep(pause).await;
        service.kill_9();
        eprintln!(
            "cycle {cycle}: killed after {pause:?} with {} rows",
            db.scalar("SELECT count(*) FROM history_events").await
        );
    }
    producing.await.unwrap();

    let service = ServiceProcess::spawn(&db, &kafka, &group);
    let ends = kafka.ends().await;
    assert_eq!(ends.iter().sum::<i64>(), total as i64);
    eprintln!("the last member's log: {:?}", service.log);
    wait_committed(&kafka, &group, &ends, Duration::from_secs(120)).await;
    assert_stored_once(&db, total).await;
}

on_both_brokers!(two_members_share_the_group_the_survivor_takes_over_and_a_graceful_leave_leaves_nothing_to_replay);

async fn two_members_share_the_group_the_survivor_takes_over_and_a_graceful_leave_leaves_nothing_to_replay(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 4).await;
    let group = unique_name("group");
    let mut first = ServiceProcess::spawn(&db, &kafka, &group);
    let mut second = ServiceProcess::spawn(&db, &kafka, &group);
    wait_shared(&kafka, &[&first, &second], "both members to own partitions").await;
    produce(&kafka, 0..1000).await;

    first.kill_9();
    produce(&kafka, 1000..2000).await;
    wait_for(
        kafka.join_deadline(),
        "the survivor to own every partition",
        || async { (second.owned_partitions().await == 4).then_some(()) },
    )
    .await;
    let ends = kafka.ends().await;
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    assert_stored_once(&db, 2000).await;

    second.sigterm();
    assert_eq!(second.wait_exit(Duration::from_secs(30)).await, Some(0));
    assert_eq!(
        kafka.committed(&group).await,
        ends,
        "the graceful leave committed its final watermark"
    );

    // A new member starts exactly where the last one left off: nothing is replayed.
    let third = ServiceProcess::spawn(&db, &kafka, &group);
    wait_for(
        kafka.join_deadline(),
        "the new member to own every partition",
        || async { (third.owned_partitions().await == 4).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = third.get_json("/api/status").await.expect("status");
    for partition in status["partitions"].as_array().unwrap() {
        let counts = &partition["actor"]["counts"];
        assert_eq!(counts["applied"], 0, "{partition}");
        assert_eq!(
            counts["already_applied"], 0,
            "replayed after a graceful leave: {partition}"
        );
    }
}

on_both_brokers!(
    three_members_share_the_group_and_the_survivors_take_over_each_killed_members_partitions
);

async fn three_members_share_the_group_and_the_survivors_take_over_each_killed_members_partitions(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 6).await;
    let group = unique_name("group");
    let mut first = ServiceProcess::spawn(&db, &kafka, &group);
    let mut second = ServiceProcess::spawn(&db, &kafka, &group);
    let third = ServiceProcess::spawn(&db, &kafka, &group);
    wait_shared(
        &kafka,
        &[&first, &second, &third],
        "all three members to own partitions",
    )
    .await;
    produce(&kafka, 0..1200).await;

    // The first dies mid-stream: its partitions go to the other two, which keep theirs.
    first.kill_9();
    produce(&kafka, 1200..2400).await;
    wait_shared(
        &kafka,
        &[&second, &third],
        "the two survivors to own every partition",
    )
    .await;
    let ends = kafka.ends().await;
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    assert_stored_once(&db, 2400).await;

    // Then the second: the last member takes over everything and carries on.
    second.kill_9();
    produce(&kafka, 2400..3000).await;
    wait_for(
        kafka.join_deadline(),
        "the last member to own every partition",
        || async { (third.owned_partitions().await == 6).then_some(()) },
    )
    .await;
    let ends = kafka.ends().await;
    assert_eq!(ends.iter().sum::<i64>(), 3000);
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    assert_stored_once(&db, 3000).await;
}

/// A panic in the driver thread (made on purpose: `HISTORY_TEST_DRIVER_PANIC=first-record`
/// in a debug build) ends the process with a non-zero status within seconds, naming the
/// panic. Before issue 21 the process waited forever for the driver that was gone, and
/// SIGTERM could not end it either.
#[actix_web::test]
async fn a_panic_in_the_kafka_driver_thread_ends_the_process_with_a_non_zero_status_within_seconds()
{
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let group = unique_name("group");
    let mut service = ServiceProcess::spawn_with_env(
        &db.url,
        &kafka.brokers,
        &kafka.topic,
        &group,
        &[],
        &[(
            history_consumer::kafka::driver::TEST_DRIVER_PANIC,
            "first-record",
        )],
    );
    wait_for(
        kafka.join_deadline(),
        "the member to own the partition",
        || {
            let service = &service;
            async move { (service.owned_partitions().await == 1).then_some(()) }
        },
    )
    .await;
    produce(&kafka, 0..1).await;
    let produced = std::time::Instant::now();
    let code = service.wait_exit(Duration::from_secs(20)).await;
    let took = produced.elapsed();
    assert!(
        code.is_some_and(|code| code != 0),
        "exits with a non-zero status, not by a signal: {code:?}"
    );
    assert!(
        took < Duration::from_secs(10),
        "exited {took:?} after the record"
    );
    let log = std::fs::read_to_string(&service.log).expect("the log");
    assert!(
        log.contains("the kafka driver thread panicked"),
        "the panic is named: {log}"
    );
}

#[test]
fn bad_configuration_fails_at_start_naming_the_key() {
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--drain-timeout",
                "9s",
                "--kafka-option",
                "session.timeout.ms=6000",
            ],
            "--drain-timeout",
        ),
        (
            &["--kafka-option", "enable.auto.commit=true"],
            "enable.auto.commit",
        ),
        (&["--admin-addr", "not-an-address"], "--admin-addr"),
    ];
    for (args, key) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_history-consumer"))
            .args([
                "run",
                "--database-url",
                "postgres://nobody@127.0.0.1:1/none",
            ])
            .args(args)
            .output()
            .expect("run the binary");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} must fail");
        assert!(stderr.contains(key), "{args:?}: {stderr}");
    }
}

#[test]
fn an_unknown_librdkafka_property_fails_at_start_naming_it() {
    let output = Command::new(env!("CARGO_BIN_EXE_history-consumer"))
        .args([
            "run",
            "--database-url",
            "postgres://nobody@127.0.0.1:1/none",
        ])
        .args(["--kafka-option", "no.such.property=1"])
        .output()
        .expect("run the binary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("--kafka-option no.such.property"),
        "{stderr}"
    );
}

/// librdkafka's fatal error (what a static member fenced by another process with its
/// `--group-instance-id` gets from Kafka; tansu does not fence, so librdkafka's own test hook
/// raises it here) ends the process with a non-zero status naming it, instead of leaving a
/// consumer that will never fetch again idling for ever.
#[actix_web::test]
async fn a_fatal_kafka_error_ends_the_process_with_a_non_zero_status_naming_it() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let mut service = ServiceProcess::spawn_with_env(
        &db.url,
        &kafka.brokers,
        &kafka.topic,
        &unique_name("group"),
        &["--group-instance-id", "history-0"],
        &[(history_consumer::kafka::driver::TEST_KAFKA_FATAL, "fenced")],
    );
    let code = service.wait_exit(Duration::from_secs(30)).await;
    assert!(
        code.is_some_and(|code| code != 0),
        "exits with a non-zero status, not by a signal: {code:?}"
    );
    let log = std::fs::read_to_string(&service.log).expect("the log");
    assert!(
        log.contains("librdkafka raised a fatal error") && log.contains("fenced"),
        "the error is named: {log}"
    );
}
