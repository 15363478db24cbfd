//! What the service logs through trouble, read from the real binary's log: a database outage is
//! logged per partition when the partition starts failing (with the cause) and when it
//! recovers, and summarised in between, not once per record attempt (the bench once counted
//! ~250,000 lines for a 15 s outage at 64 partitions).

use std::time::Duration;

use crate::support::helpers::{own_database, unique_name, wait_for};
use crate::support::kafka::{TestKafka, produce, wait_committed};
use crate::support::service::ServiceProcess;

const PARTITIONS: i32 = 4;

/// The log's lines without the terminal colours.
fn log_lines(service: &ServiceProcess) -> Vec<String> {
    let text = std::fs::read_to_string(&service.log).unwrap_or_default();
    text.lines().map(strip_colours).collect()
}

fn strip_colours(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An escape sequence ends with its first letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

#[actix_web::test]
async fn a_database_outage_is_logged_when_partitions_start_failing_and_recover_and_summarised_between_not_per_record()
 {
    let (mut cluster, url) = own_database("logging").await;
    let kafka = TestKafka::start(PARTITIONS);
    let group = unique_name("group");
    let service = ServiceProcess::spawn_with(
        &url,
        &kafka.brokers,
        &kafka.topic,
        &group,
        &["--max-unresolved", "100", "--retry-max", "1s"],
    );
    produce(&kafka, 0..40).await;
    wait_committed(&kafka, &group, &[10; 4], Duration::from_secs(60)).await;
    let before = log_lines(&service).len();

    cluster.stop().expect("stop postgres");
    produce(&kafka, 40..2040).await;
    // Every partition fails, its backlog full and retried, for longer than one summary
    // interval.
    wait_for(
        Duration::from_secs(60),
        "every partition to fail for 11 s",
        || async {
            let status = service.get_json("/api/status").await?;
            let partitions = status["partitions"].as_array()?;
            let failing = partitions
                .iter()
                .filter(|p| p["oldest_unknown_seconds"].as_f64().unwrap_or(0.0) >= 11.0)
                .count();
            (failing == PARTITIONS as usize).then_some(())
        },
    )
    .await;
    cluster.restart().expect("restart postgres");
    wait_committed(&kafka, &group, &[510; 4], Duration::from_secs(60)).await;

    let lines = log_lines(&service);
    let during = &lines[before..];
    // Per partition: failing, one summary or two, recovered; and a few lines of the service's
    // own (the pool, the admin). Per record attempt it was thousands.
    assert!(
        during.len() <= 60,
        "{} lines during the outage:\n{}",
        during.len(),
        during.join("\n")
    );
    let of =
        |message: &str| -> Vec<&String> { during.iter().filter(|l| l.contains(message)).collect() };
    let failing = of("partition failing");
    assert_eq!(failing.len(), PARTITIONS as usize, "{failing:#?}");
    assert!(
        failing
            .iter()
            .all(|l| l.contains("cause=\"unavailable\"") && l.contains("error=")),
        "the first line names the cause and the error: {failing:#?}"
    );
    let summaries = of("partition still failing");
    assert!(
        summaries.len() >= PARTITIONS as usize,
        "a summary per partition and interval: {summaries:#?}"
    );
    assert!(
        summaries
            .iter()
            .all(|l| l.contains("cause=\"unavailable\"") && l.contains("unavailable=")),
        "{summaries:#?}"
    );
    let recovered = of("partition recovered");
    assert_eq!(recovered.len(), PARTITIONS as usize, "{recovered:#?}");
    assert!(
        recovered.iter().all(|l| l.contains("resolved=")),
        "{recovered:#?}"
    );
}
