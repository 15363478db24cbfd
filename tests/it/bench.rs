//! `history-consumer bench --quick` (and `bench --admin-load`) as smoke tests, as CI runs them:
//! the real binary on a tiny workload through every phase, judged by the report and the plots it
//! writes. No timing is asserted; the deadline only stops a hung run.

use std::process::Stdio;
use std::time::Duration;

use history_consumer::tools::bench::{
    BOUND_P99, BOUND_THROUGHPUT, NOTES_MARKER, SECTION_END, SECTION_START,
};
use tokio::process::Command;

use crate::support::helpers::unique_name;

#[tokio::test]
async fn a_quick_bench_writes_every_phase_target_and_plot_and_keeps_the_notes() {
    let dir = std::env::temp_dir().join(unique_name("history-bench"));
    std::fs::create_dir_all(&dir).unwrap();
    let output = dir.join("BENCHMARKS.md");
    std::fs::write(
        &output,
        format!("# old report\n\n{NOTES_MARKER}\n\n## Notes\n\nkept by hand\n"),
    )
    .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_history-consumer"))
        .args(["bench", "--events", "2000", "--quick", "--output"])
        .arg(&output)
        .env("HISTORY_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let ran = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the bench did not end")
        .expect("run the binary");
    let shown = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(ran.status.success(), "exit {}\n{shown}", ran.status);

    let report = std::fs::read_to_string(&output).unwrap();
    for expected in [
        "# Benchmarks",
        "## Machine",
        "Load average (1 / 5 / 15 min):",
        "history-consumer bench --events 2000 --quick",
        "`--quick` smoke run",
        "| default (empty inbox) | 256 | 4 | 0 | 10 % | 2,000 (",
        "| 1 batch in flight (no pipelining) | 256 | 4 | 0 | 10 % | 2,000 (",
        "Pipelining: with 2 batches in flight per partition (the default; a second one only while the member runs fewer than 4 transactions",
        "| B = 1 | 1 | 4 | 0 | 10 % | 2,000 (",
        "| B = 32 | 32 | 4 | 0 | 10 % | 2,000 (",
        "| 10 k rows in the inbox | 256 | 4 | 10 k | 10 % | 2,000 (",
        "| 100 k rows in the inbox | 256 | 4 | 100 k | 10 % | 2,000 (",
        "| UUIDv4 ids | 256 | 4 | 0 | 10 % | 2,000 (",
        "| 10 k rows in the inbox, UUIDv4 ids | 256 | 4 | 10 k | 10 % | 2,000 (",
        "### Inbox size and event ids",
        "| UUIDv4 | 10 k |",
        "| 16 partitions | 256 | 16 | 0 | 10 % | 2,000 (",
        "| 64 partitions | 256 | 64 | 0 | 10 % | 2,000 (",
        "| 0 % duplicates | 256 | 4 | 0 | 0 % | 2,000 (2,000) |",
        "| replay: a second group re-reads the topic | 256 | 4 | 0 | 100 % (replay) | 2,000 (2,000) |",
        "| 50 % duplicates | 256 | 4 | 0 | 50 % | 2,000 (",
        "| default again, at the end |",
        "Ceiling 1 (Kafka alone",
        "### Produce-to-commit latency",
        "| 4 | 2,000 (",
        "| 64 | 2,000 (",
        "end-to-end at the default B (256) / ceiling 2, empty inbox",
        "the same ratio, floor kept from the previous issue",
        "end-to-end at 100 k inbox rows / empty inbox",
        "end-to-end at 64 partitions / 4 partitions",
        "peak RSS, database down, backlog over 64 partitions",
        "all-replay (second group) / the same records inserted fresh",
        "p99 produce-to-commit at 50 % of the default B's rate",
        "end-to-end over TLS (verify-full) / plaintext, default case",
        "end-to-end / ceiling 2 in the same state, 10 k rows of UUIDv4 ids in the inbox",
        "the service's CPU per event, default case (its threads",
        "the default case's one run / its ceiling 2",
        "### Over TLS beside plaintext",
        "| 1 | plaintext | first | 2,000 (",
        "| 1 | TLS, verify-full | second | 2,000 (",
        "## What limits it",
        "kept by hand",
    ] {
        assert!(
            report.contains(expected),
            "{expected:?} missing from the report:\n{report}\n{shown}"
        );
    }
    // Every target was measured and judged, whatever the verdict.
    let judged = report
        .lines()
        .filter(|l| l.ends_with("| met |") || l.ends_with("| MISSED |"))
        .count();
    assert_eq!(judged, 11, "{report}");
    assert!(!report.contains("not measured"), "{report}");
    for plot in [
        "inbox-size",
        "inbox-ids",
        "partitions",
        "duplicates",
        "latency",
    ] {
        let link = format!("(benchmarks/{plot}.svg)");
        assert!(report.contains(&link), "{link} missing from\n{report}");
        let svg = std::fs::read_to_string(dir.join("benchmarks").join(format!("{plot}.svg")))
            .unwrap_or_else(|e| panic!("{plot}.svg: {e}"));
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{svg}"
        );
    }
    assert!(!report.contains("# old report"), "{report}");
    assert_eq!(report.matches(NOTES_MARKER).count(), 1, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_quick_admin_load_bench_writes_its_section_and_keeps_the_rest_of_the_report() {
    let dir = std::env::temp_dir().join(unique_name("history-admin-load"));
    std::fs::create_dir_all(&dir).unwrap();
    let output = dir.join("BENCHMARKS.md");
    let kept = format!("# Benchmarks\n\n{NOTES_MARKER}\n\n## Notes\n\nkept by hand\n");
    std::fs::write(
        &output,
        format!("{kept}\n{SECTION_START}\nan earlier measurement\n{SECTION_END}\n"),
    )
    .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_history-consumer"))
        .args([
            "bench",
            "--admin-load",
            "--events",
            "2000",
            "--quick",
            "--output",
        ])
        .arg(&output)
        .env("HISTORY_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let ran = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the bench did not end")
        .expect("run the binary");
    let shown = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(ran.status.success(), "exit {}\n{shown}", ran.status);

    let report = std::fs::read_to_string(&output).unwrap();
    assert!(report.starts_with(&kept), "{report}");
    assert_eq!(report.matches(SECTION_START).count(), 1, "{report}");
    assert!(!report.contains("an earlier measurement"), "{report}");
    let with_load = report
        .lines()
        .find(|l| l.starts_with("| 2 | with |"))
        .unwrap_or_else(|| panic!("no loaded phase in:\n{report}\n{shown}"));
    assert!(
        with_load.contains("× 200"),
        "pages were answered: {with_load}"
    );
    for expected in [
        "## Admin page load",
        "history-consumer bench --admin-load --events 2000 --quick",
        "| 1 | without |",
        "| events/s | ",
        &format!("≥ {BOUND_THROUGHPUT}"),
        &format!("≤ {BOUND_P99}"),
    ] {
        assert!(
            report.contains(expected),
            "{expected:?} missing from the report:\n{report}\n{shown}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
