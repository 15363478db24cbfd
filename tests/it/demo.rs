//! `history-consumer demo` as a newcomer runs it: the real binary for a short while, with
//! nothing else running, judged by what it prints.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::helpers::free_port;
use crate::helpers::unique_name;

/// The `key=value` pairs of the final `demo summary:` line.
fn summary(stdout: &[String]) -> Option<HashMap<String, String>> {
    let line = stdout
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("demo summary: "))?;
    Some(
        line.split_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    )
}

/// The throwaway cluster's directory, as the banner names it.
fn data_dir(stdout: &[String]) -> Option<PathBuf> {
    let line = stdout.iter().find(|l| l.contains("data in "))?;
    let rest = &line[line.find("data in ")? + "data in ".len()..];
    Some(PathBuf::from(rest.split_whitespace().next()?))
}

#[tokio::test]
async fn the_demo_shows_duplicates_dead_letters_and_an_outage_healing() {
    let log = std::env::temp_dir().join(format!("{}.log", unique_name("history-demo")));
    let stderr = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_history-consumer"))
        .args(["demo", "--duration", "25s", "--hiccup-every", "8s"])
        .args(["--admin-addr", &format!("127.0.0.1:{}", free_port())])
        .env("HISTORY_LOG", "warn")
        .env_remove("HISTORY_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("start the binary");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stdout = Vec::new();
    let ran = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await.expect("read stdout") {
            stdout.push(line);
        }
        child.wait().await.expect("wait for the demo")
    })
    .await;
    let shown = || {
        format!(
            "stdout:\n{}\nstderr (tail):\n{}",
            stdout.join("\n"),
            tail(&std::fs::read_to_string(&log).unwrap_or_default(), 40)
        )
    };
    let status = ran.unwrap_or_else(|_| panic!("the demo did not end in time\n{}", shown()));
    assert!(status.success(), "exit {status}\n{}", shown());

    let summary = summary(&stdout).unwrap_or_else(|| panic!("no summary line\n{}", shown()));
    let number = |key: &str| -> i64 {
        summary
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} missing from the summary\n{}", shown()))
    };
    assert!(number("applied") > 0, "{}", shown());
    assert!(number("republish") > 0, "{}", shown());
    assert!(number("dead_letters") > 0, "{}", shown());
    assert!(number("hiccups") >= 1, "{}", shown());
    assert_eq!(number("unknown_backlog"), 0, "{}", shown());
    assert_eq!(
        number("rows"),
        number("sent_unique_valid"),
        "one row per unique valid event\n{}",
        shown()
    );
    assert!(
        stdout
            .iter()
            .any(|l| l.contains("history_events for ticket-42")),
        "{}",
        shown()
    );
    let dir = data_dir(&stdout).unwrap_or_else(|| panic!("no data directory\n{}", shown()));
    assert!(!dir.exists(), "{} outlived the demo", dir.display());
    let _ = std::fs::remove_file(&log);
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
