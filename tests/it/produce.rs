//! `history-consumer produce` against a broker it reaches over the network, then consumed:
//! what it says it sent is what the projection holds.

use history_consumer::domain::DuplicateCause;

use crate::support::app::spawn_app;
use crate::support::helpers::test_database;
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka};

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

on_both_brokers!(produced_events_duplicates_and_malformed_records_end_up_where_they_belong);

async fn produced_events_duplicates_and_malformed_records_end_up_where_they_belong(broker: Broker) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 2).await;
    let (brokers, topic) = (kafka.brokers.clone(), kafka.topic.clone());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_history-consumer"))
            .args(["produce", "--brokers", &brokers, "--topic", &topic])
            .args([
                "--events",
                "800",
                "--tickets",
                "40",
                "--duplicates",
                "0.1",
                "--malformed",
                "0.05",
            ])
            .output()
            .expect("run produce")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("[##############################]"),
        "a full progress bar: {stderr}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("produced:"))
        .expect("a summary line");
    assert_eq!(field(line, "total"), 800);
    assert_eq!(field(line, "failed"), 0);
    let (unique, republished, malformed) = (
        field(line, "unique_valid"),
        field(line, "republished"),
        field(line, "malformed"),
    );
    assert!(republished > 0 && malformed > 0, "{line}");

    let app = spawn_app(&db, &kafka).await;
    let ends = kafka.ends().await;
    assert_eq!(ends.iter().sum::<i64>(), 800);
    app.wait_committed(&kafka, &ends).await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events").await,
        unique as i64
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM dead_letters").await,
        malformed as i64
    );
    let counted = app.duplicates(DuplicateCause::Republish).await;
    assert_eq!(counted, republished);
    app.shutdown().await;
}

#[test]
fn produce_refuses_shares_that_leave_no_room_for_events() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_history-consumer"))
        .args(["produce", "--duplicates", "0.7", "--malformed", "0.5"])
        .output()
        .expect("run produce");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--duplicates / --malformed"));
}
