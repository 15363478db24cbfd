//! `history-consumer bench` (and `bench --admin-load`) as smoke tests: the real binary on a
//! tiny workload, judged by the report it writes. No timing is asserted; the deadline only
//! stops a hung run.

use std::process::Stdio;
use std::time::Duration;

use history_consumer::tools::bench::{
    BOUND_P99, BOUND_THROUGHPUT, NOTES_MARKER, SECTION_END, SECTION_START,
};
use tokio::process::Command;

use crate::helpers::unique_name;

#[tokio::test]
async fn a_quick_bench_writes_every_phase_and_target_and_keeps_the_notes() {
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
        "history-consumer bench --events 2000 --quick",
        "| end-to-end | 1 | 2,000 (",
        "| end-to-end | 32 | 2,000 (",
        "| end-to-end (default B) | 256 | 2,000 (",
        "| ceiling 1: Kafka alone |",
        "| ceiling 2: database alone | 256 × 4 tasks |",
        "| backlog, database down, 4 partitions | 256 |",
        "| backlog, database down, 64 partitions | 256 |",
        "end-to-end at the default B / ceiling 2",
        "end-to-end at the default B / end-to-end at B = 1",
        "peak RSS, database down with a backlog",
        "## What limits it",
        "kept by hand",
    ] {
        assert!(
            report.contains(expected),
            "{expected:?} missing from the report:\n{report}\n{shown}"
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
