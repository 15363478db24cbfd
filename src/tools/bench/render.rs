//! A [`Report`] as text: the table printed at the end of a run, and `BENCHMARKS.md` (whose
//! hand-written notes, below [`NOTES_MARKER`], survive a rewrite).

use std::fmt::Write as _;
use std::time::Duration;

use super::measure::Latency;
use super::probe::CpuUsage;
use super::report::{Backlog, Report, megabytes, thread_role, whole};

/// The line above the part of `BENCHMARKS.md` that a rewrite keeps.
pub const NOTES_MARKER: &str =
    "<!-- Notes below this line are written by hand; `history-consumer bench` keeps them. -->";

/// The hand-written notes of an existing report, marker included.
pub fn kept_notes(existing: &str) -> Option<&str> {
    existing.find(NOTES_MARKER).map(|at| &existing[at..])
}

struct Row {
    phase: String,
    batch: String,
    records: String,
    seconds: String,
    rate: String,
    latency: String,
    rss: String,
    cpu: String,
}

const HEADER: [&str; 8] = [
    "phase",
    "B",
    "records (unique)",
    "seconds",
    "events/s",
    "p50 / p99 produce-to-commit",
    "peak RSS",
    "CPU cores: process + PostgreSQL",
];

fn rows(report: &Report) -> Vec<Row> {
    let default_b = report.setup.default_batch;
    let mut rows: Vec<Row> = report
        .runs
        .iter()
        .map(|run| Row {
            phase: if run.batch_size == default_b {
                "end-to-end (default B)".into()
            } else {
                "end-to-end".into()
            },
            batch: run.batch_size.to_string(),
            records: format!(
                "{} ({})",
                whole(run.records as f64),
                whole(run.unique as f64)
            ),
            seconds: seconds(run.elapsed),
            rate: whole(run.rate),
            latency: run.latency.as_ref().map_or("—".into(), latency),
            rss: rss(run.peak_rss),
            cpu: cpu(&run.cpu),
        })
        .collect();
    let partitions = report.setup.partitions;
    for (phase, batch, ceiling) in [
        ("ceiling 1: Kafka alone", "—".to_owned(), &report.kafka_only),
        (
            "ceiling 2: database alone",
            format!("{default_b} × {partitions} tasks"),
            &report.database_only,
        ),
    ] {
        rows.push(Row {
            phase: phase.into(),
            batch,
            records: whole(ceiling.records as f64),
            seconds: seconds(ceiling.elapsed),
            rate: whole(ceiling.rate),
            latency: "—".into(),
            rss: rss(ceiling.peak_rss),
            cpu: cpu(&ceiling.cpu),
        });
    }
    for backlog in &report.backlog {
        let Backlog::Measured(backlog) = backlog else {
            continue;
        };
        rows.push(Row {
            phase: format!("backlog, database down, {} partitions", backlog.partitions),
            batch: default_b.to_string(),
            records: format!(
                "{} ({})",
                whole(backlog.records as f64),
                whole(backlog.unique as f64)
            ),
            seconds: seconds(backlog.outage),
            rate: "—".into(),
            latency: "—".into(),
            rss: rss(backlog.peak_rss),
            cpu: "—".into(),
        });
    }
    rows
}

fn cells(row: &Row) -> [&str; 8] {
    [
        &row.phase,
        &row.batch,
        &row.records,
        &row.seconds,
        &row.rate,
        &row.latency,
        &row.rss,
        &row.cpu,
    ]
}

fn seconds(elapsed: Duration) -> String {
    format!("{:.2}", elapsed.as_secs_f64())
}

fn latency(latency: &Latency) -> String {
    format!(
        "{:.0} / {:.0} ms at {}/s",
        latency.p50.as_secs_f64() * 1000.0,
        latency.p99.as_secs_f64() * 1000.0,
        whole(latency.offered_rate)
    )
}

fn rss(bytes: Option<u64>) -> String {
    bytes.map_or("n/a".into(), |b| format!("{:.0} MB", megabytes(b)))
}

fn cpu(usage: &CpuUsage) -> String {
    format!("{:.2} + {:.2}", usage.process, usage.postgres)
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "not measured",
    }
}

/// The results as an aligned plain-text table with the targets under it.
pub fn table(report: &Report) -> String {
    let rows = rows(report);
    let mut widths = HEADER.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(cells(row)) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 8]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}", line(HEADER));
    for row in &rows {
        let _ = writeln!(out, "{}", line(cells(row)));
    }
    out.push('\n');
    for target in report.targets() {
        let measured = target.measured.map_or("—".into(), |m| format!("{m:.2}"));
        let _ = writeln!(
            out,
            "{}: {measured} (target {}) {}",
            target.what,
            target.goal,
            verdict(target.met)
        );
    }
    out
}

/// `BENCHMARKS.md`: machine, command, method, results, targets, limits, kept notes.
pub fn markdown(report: &Report, kept: Option<&str>) -> String {
    let mut out = String::new();
    let setup = &report.setup;
    let machine = &report.machine;
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Written by `history-consumer bench` on {} from one run: compare numbers within it, not \
         across machines or runs. Run the same command again to refresh this file.\n",
        report.written_at.format("%Y-%m-%d %H:%M UTC")
    );
    if !setup.release_build {
        let _ = writeln!(
            out,
            "**This run was a debug build: its numbers say nothing about production speed.**\n"
        );
    }

    let _ = writeln!(out, "## Machine\n");
    let memory = machine.memory_bytes.map_or("unknown".into(), |b| {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    });
    let _ = writeln!(
        out,
        "- {} cores, {}, {memory} memory, Linux {}",
        machine.cores, machine.cpu_model, machine.kernel
    );
    let database = if setup.own_database {
        format!(
            "a throwaway cluster with production durability (fsync and synchronous commit on), \
             data on {}",
            machine
                .data_filesystem
                .as_deref()
                .unwrap_or("an unknown filesystem")
        )
    } else {
        "the database of `--database-url` (shared by the runs, told apart by event ids)".into()
    };
    let _ = writeln!(out, "- PostgreSQL: `{}`, {database}", machine.postgres);
    let _ = writeln!(
        out,
        "- Kafka: librdkafka's mock cluster in this process, a fresh broker and topic per run; \
         the service, the broker, the producer and PostgreSQL share the cores\n"
    );

    let _ = writeln!(out, "## Command\n");
    let _ = writeln!(out, "```sh\n{}\n```\n", setup.command);
    let _ = writeln!(
        out,
        "({} build; from a checkout: `cargo run --release -- bench`.)\n",
        if setup.release_build {
            "release"
        } else {
            "debug"
        }
    );

    let _ = writeln!(out, "## Method\n");
    for line in method(report) {
        let _ = writeln!(out, "- {line}");
    }
    out.push('\n');

    let _ = writeln!(out, "## Results\n");
    let _ = writeln!(out, "| {} |", HEADER.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(HEADER.len()));
    for row in rows(report) {
        let _ = writeln!(out, "| {} |", cells(&row).join(" | "));
    }
    out.push('\n');
    for backlog in &report.backlog {
        let backlog = match backlog {
            Backlog::Measured(backlog) => backlog,
            Backlog::Skipped(why) => {
                let _ = writeln!(out, "Backlog phase not run: {why}.\n");
                continue;
            }
        };
        let samples: Vec<String> = backlog
            .rss_samples
            .iter()
            .map(|b| format!("{:.0}", megabytes(*b)))
            .collect();
        let _ = writeln!(
            out,
            "Backlog over {} partitions: RSS {} MB when the service started; once a second \
             during the {} s outage (MB): {}. Its partition actors held {} records taken from \
             Kafka (their bound: {}, the partition windows, the Unknown backlogs and a batch \
             each). After PostgreSQL came back, the committed offsets reached the end in {:.1} s \
             and every unique event was stored once.\n",
            backlog.partitions,
            backlog
                .baseline_rss
                .map_or("n/a".into(), |b| format!("{:.0}", megabytes(b))),
            backlog.outage.as_secs(),
            samples.join(", "),
            whole(backlog.held as f64),
            whole(backlog.held_bound as f64),
            backlog.drained_in.as_secs_f64()
        );
    }

    let _ = writeln!(out, "## Targets\n");
    let _ = writeln!(out, "| ratio or measure | this run | target | |");
    let _ = writeln!(out, "|---|---|---|---|");
    for target in report.targets() {
        let measured = target.measured.map_or("—".into(), |m| format!("{m:.2}"));
        let _ = writeln!(
            out,
            "| {} | {measured} | {} | {} |",
            target.what,
            target.goal,
            verdict(target.met)
        );
    }
    if let (Some(c1), c2) = (
        super::measure::ratio(report.kafka_only.rate, report.database_only.rate),
        report.database_only.rate,
    ) {
        let _ = writeln!(
            out,
            "\nCeiling 1 / ceiling 2 = {c1:.2}: the {} is the tighter ceiling ({} events/s).",
            if c1 < 1.0 { "Kafka side" } else { "database" },
            whole(c2.min(report.kafka_only.rate))
        );
    }
    out.push('\n');

    if let Some(run) = report.default_run() {
        let _ = writeln!(out, "## Where the CPU went at the default B\n");
        let _ = writeln!(
            out,
            "Cores kept busy during the end-to-end run at B = {} (1.00 = one core all the time); \
             PostgreSQL: {:.2}.\n",
            run.batch_size, run.cpu.postgres
        );
        let _ = writeln!(out, "| thread | cores | role |");
        let _ = writeln!(out, "|---|---|---|");
        for (name, load) in run.cpu.threads.iter().take(8) {
            let _ = writeln!(out, "| `{name}` | {load:.2} | {} |", thread_role(name));
        }
        out.push('\n');
    }

    let _ = writeln!(out, "## What limits it\n");
    let limits = report.limits();
    if limits.is_empty() {
        let _ = writeln!(out, "Every target measured was met.\n");
    }
    for line in limits {
        let _ = writeln!(out, "- {line}");
    }
    out.push('\n');

    match kept {
        Some(notes) => out.push_str(notes),
        None => {
            let _ = writeln!(out, "{NOTES_MARKER}\n");
            let _ = writeln!(out, "## Notes\n");
            let _ = writeln!(
                out,
                "(Observations and profiles written by hand go here; the benchmark keeps them.)"
            );
        }
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn method(report: &Report) -> Vec<String> {
    let setup = &report.setup;
    let one = report
        .one_run()
        .map(|r| format!(" (B = 1: {})", whole(r.records as f64)))
        .unwrap_or_default();
    vec![
        format!(
            "Records: {}{one} per batch size over {} partitions, keyed by ticket, {:.0} % of them \
             republished copies of recent events; a fresh topic, consumer group and database \
             for every batch size.",
            whole(setup.events as f64),
            setup.partitions,
            setup.duplicates * 100.0
        ),
        format!(
            "The service runs in this process with production settings except the batch size B \
             and an offset commit every {} ms (production: 1 s).",
            setup.commit_interval.as_millis()
        ),
        "End-to-end: the records are in the topic before the service starts; the time runs \
         from its first fetch to the committed offsets reaching the end of every partition \
         (status polled every 10 ms). Every run checks that the rows equal the unique events."
            .into(),
        format!(
            "Latency: then a producer offers {:.0} % of that rate for up to {} s; for each \
             record, when its offset was first seen committed minus when it was handed to the \
             producer. Commits happen every {} ms, so that interval is part of it.",
            setup.latency_load * 100.0,
            setup.latency_window.as_secs(),
            setup.commit_interval.as_millis()
        ),
        "Ceiling 1: the default B's records read back from the beginning by a plain consumer \
         with the service's client settings, on its own thread, no database."
            .into(),
        format!(
            "Ceiling 2: the same events through the batched inbox transaction directly, in \
             batches of {}, one task per partition's share, into a fresh database, no Kafka.",
            setup.default_batch
        ),
        "Peak RSS: the whole process's VmHWM, reset at the start of each phase; it includes the \
         embedded broker holding the topic and the benchmark's own bookkeeping."
            .into(),
        "Backlog, measured first (while the process holds nothing of the other phases): a \
         topic full of records, the database stopped, the service run for the outage, then \
         the database started again and the drain awaited."
            .into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::report;
    use super::*;

    #[test]
    fn the_markdown_names_the_machine_command_ratios_and_verdicts() {
        let report = report(1_000.0, 12_000.0, 20_000.0, 40_000.0, 90_000_000);
        let text = markdown(&report, None);
        for expected in [
            "2 cores, Test CPU",
            "postgres (PostgreSQL) 15.4",
            "history-consumer bench",
            "| end-to-end (default B) | 256 |",
            "| ceiling 2: database alone | 256 × 4 tasks |",
            "| 0.30 | ≥ 0.6 | MISSED |",
            "| 12.00 | ≥ 20 | MISSED |",
            "| 90.00 | < 150 MB | met |",
            "80 / 190 ms at 6,000/s",
            "## What limits it",
            NOTES_MARKER,
        ] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
    }

    #[test]
    fn hand_written_notes_survive_a_rewrite() {
        let report = report(1_000.0, 30_000.0, 100_000.0, 40_000.0, 90_000_000);
        let first = markdown(&report, None);
        let edited = format!("{first}\nperf: 40 % in tokio-postgres encoding\n");
        let second = markdown(&report, kept_notes(&edited));
        assert!(second.ends_with("perf: 40 % in tokio-postgres encoding\n"));
        assert_eq!(second.matches(NOTES_MARKER).count(), 1);
    }

    #[test]
    fn the_table_lines_up_and_ends_with_the_targets() {
        let report = report(1_000.0, 30_000.0, 100_000.0, 40_000.0, 90_000_000);
        let text = table(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("phase"));
        assert_eq!(lines[1].find("1 "), lines[0].find("B "));
        assert!(text.contains("(target ≥ 0.6) met"));
    }
}
