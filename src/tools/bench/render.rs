//! A [`Report`] as text: the table printed at the end of a run, and `BENCHMARKS.md` (whose
//! hand-written notes, below [`NOTES_MARKER`], survive a rewrite).

use std::fmt::Write as _;
use std::time::Duration;

use super::charts::Figure;
use super::probe::CpuUsage;
use super::report::{
    Backlog, Case, CaseResult, DbActivity, Report, Throughput, TlsCost, megabytes, rows,
    thread_role, whole,
};
use super::targets::{Target, limits, targets};

/// The line above the part of `BENCHMARKS.md` that a rewrite keeps.
pub const NOTES_MARKER: &str =
    "<!-- Notes below this line are written by hand; `history-consumer bench` keeps them. -->";

/// The hand-written notes of an existing report, marker included.
pub fn kept_notes(existing: &str) -> Option<&str> {
    existing.find(NOTES_MARKER).map(|at| &existing[at..])
}

const HEADER: [&str; 14] = [
    "case",
    "B",
    "partitions",
    "inbox rows before",
    "duplicates",
    "records (unique)",
    "seconds",
    "events/s",
    "ceiling 2 events/s",
    "/ ceiling 2",
    "peak RSS",
    "CPU cores: process + PostgreSQL",
    "process CPU µs/event (the service's threads)",
    "ceiling 2 CPU cores: process + PostgreSQL",
];

fn row(report: &Report, result: &CaseResult) -> [String; 14] {
    let case = &result.case;
    let ceiling = result.ceiling.as_ref();
    [
        case.label(&report.anchor_case()),
        case.batch_size.to_string(),
        case.partitions.to_string(),
        if case.inbox_rows == 0 {
            "0".into()
        } else {
            rows(case.inbox_rows)
        },
        if case.replay {
            "100 % (replay)".into()
        } else {
            format!("{:.0} %", case.duplicates * 100.0)
        },
        format!(
            "{} ({})",
            whole(result.run.records as f64),
            whole(result.run.unique as f64)
        ),
        seconds(result.run.elapsed),
        whole(result.run.rate),
        result.ceiling_rate().map_or("—".into(), whole),
        result
            .vs_ceiling()
            .map_or("—".into(), |r| format!("{r:.2}")),
        rss(result.run.peak_rss),
        cpu(&result.run.cpu),
        cpu_per_event(&result.run),
        ceiling.map_or("—".into(), |c| cpu(&c.cpu)),
    ]
}

fn seconds(elapsed: Duration) -> String {
    format!("{:.2}", elapsed.as_secs_f64())
}

fn millis(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

fn rss(bytes: Option<u64>) -> String {
    bytes.map_or("n/a".into(), |b| format!("{:.0} MB", megabytes(b)))
}

fn cpu(usage: &CpuUsage) -> String {
    format!("{:.2} + {:.2}", usage.process, usage.postgres)
}

/// The process's CPU per event, and its service threads' in brackets.
fn cpu_per_event(run: &Throughput) -> String {
    match (run.cpu_per_event_us(), run.service_cpu_per_event_us()) {
        (Some(process), Some(service)) => format!("{process:.1} ({service:.1})"),
        _ => "n/a".into(),
    }
}

fn load(load: Option<[f64; 3]>) -> String {
    load.map_or("unknown".into(), |[a, b, c]| {
        format!("{a:.2} / {b:.2} / {c:.2}")
    })
}

/// Lines of cells as an aligned plain-text table.
fn aligned(header: &[&str], lines: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for line in lines {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let format = |cells: Vec<&str>| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}", format(header.to_vec()));
    for line in lines {
        let _ = writeln!(out, "{}", format(line.iter().map(String::as_str).collect()));
    }
    out
}

/// Lines of cells as a Markdown table.
fn markdown_table(out: &mut String, header: &[&str], lines: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    for line in lines {
        let _ = writeln!(out, "| {} |", line.join(" | "));
    }
    out.push('\n');
}

fn case_lines(report: &Report) -> Vec<Vec<String>> {
    let mut lines: Vec<Vec<String>> = report
        .cases
        .iter()
        .map(|c| row(report, c).to_vec())
        .collect();
    let others = report.anchor_others.iter().map(|other| {
        let mut line = row(report, other).to_vec();
        line[0] = "default, another run".into();
        line
    });
    lines.splice(1..1, others);
    if let (Some(anchor), Some(again)) = (report.anchor(), &report.anchor_again) {
        let mut line = row(
            report,
            &CaseResult {
                case: anchor.case,
                run: again.clone(),
                ceiling: None,
                ceiling_before: None,
                database: None,
            },
        )
        .to_vec();
        line[0] = "default again, at the end".into();
        lines.push(line);
    }
    lines
}

const INBOX_HEADER: [&str; 11] = [
    "event ids",
    "inbox rows before",
    "prefill",
    "events/s",
    "ceiling 2 events/s",
    "/ ceiling 2",
    "primary keys after the run: inbox + history",
    "buffer hit ratio: all blocks (primary keys), end to end",
    "… ceiling 2",
    "WAL bytes / event (full-page images / event), end to end",
    "… ceiling 2",
];

/// The inbox-size cases, ordered ids then random ones, with what PostgreSQL counted.
fn inbox_lines(report: &Report) -> Vec<Vec<String>> {
    let percent =
        |ratio: Option<f64>| ratio.map_or("—".into(), |r| format!("{:.1} %", r * 100.0));
    let hits = |a: Option<DbActivity>| {
        a.map_or("—".into(), |a| {
            format!(
                "{} ({})",
                percent(a.hit_ratio()),
                percent(a.index_hit_ratio())
            )
        })
    };
    let wal = |a: Option<DbActivity>| {
        a.map_or("—".into(), |a| {
            format!(
                "{} ({:.2}){}",
                whole(a.wal_per_event().unwrap_or_default()),
                a.fpi_per_event().unwrap_or_default(),
                match a.checkpoints {
                    0 => String::new(),
                    1 => ", 1 checkpoint".into(),
                    n => format!(", {n} checkpoints"),
                }
            )
        })
    };
    report
        .by_inbox()
        .into_iter()
        .chain(report.by_inbox_random())
        .map(|c| {
            let db = c.database;
            vec![
                c.case.ids.name().to_owned(),
                if c.case.inbox_rows == 0 {
                    "0".into()
                } else {
                    rows(c.case.inbox_rows)
                },
                db.and_then(|d| d.prefill)
                    .map_or("—".into(), |d| format!("{:.0} s", d.as_secs_f64())),
                whole(c.run.rate),
                c.ceiling_rate().map_or("—".into(), whole),
                c.vs_ceiling().map_or("—".into(), |r| format!("{r:.2}")),
                db.map_or("—".into(), |d| {
                    format!(
                        "{:.0} + {:.0} MB",
                        megabytes(d.after.inbox),
                        megabytes(d.after.history)
                    )
                }),
                hits(db.map(|d| d.run)),
                hits(db.and_then(|d| d.ceiling)),
                wal(db.map(|d| d.run)),
                wal(db.and_then(|d| d.ceiling)),
            ]
        })
        .collect()
}

const LATENCY_HEADER: [&str; 8] = [
    "offered events/s",
    "records",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "p99.9 ms",
    "max ms",
    "window",
];

fn latency_lines(report: &Report) -> Vec<Vec<String>> {
    report
        .latency
        .iter()
        .map(|l| {
            let mut line = vec![
                whole(l.latency.offered_rate),
                whole(l.latency.records as f64),
            ];
            line.extend(l.latency.points().iter().map(|(_, d)| millis(*d)));
            line.push(format!("{:.0} s", l.window.as_secs_f64()));
            line
        })
        .collect()
}

const BACKLOG_HEADER: [&str; 7] = [
    "partitions",
    "records (unique)",
    "outage",
    "RSS at start",
    "peak RSS",
    "held (bound)",
    "drained in",
];

fn backlog_lines(report: &Report) -> Vec<Vec<String>> {
    report
        .backlog
        .iter()
        .filter_map(|b| match b {
            Backlog::Measured(b) => Some(vec![
                b.partitions.to_string(),
                format!("{} ({})", whole(b.records as f64), whole(b.unique as f64)),
                format!("{} s", b.outage.as_secs()),
                rss(b.baseline_rss),
                rss(b.peak_rss),
                format!("{} ({})", whole(b.held as f64), whole(b.held_bound as f64)),
                format!("{:.1} s", b.drained_in.as_secs_f64()),
            ]),
            Backlog::Skipped(_) => None,
        })
        .collect()
}

const TLS_HEADER: [&str; 9] = [
    "pair",
    "connection",
    "ran",
    "records (unique)",
    "seconds",
    "events/s",
    "peak RSS",
    "CPU cores: process + PostgreSQL",
    "process CPU µs/event (the service's threads)",
];

fn tls_lines(report: &Report) -> Vec<Vec<String>> {
    let line = |pair: usize, connection: &str, first: bool, run: &Throughput| {
        vec![
            pair.to_string(),
            connection.to_owned(),
            if first { "first" } else { "second" }.to_owned(),
            format!(
                "{} ({})",
                whole(run.records as f64),
                whole(run.unique as f64)
            ),
            seconds(run.elapsed),
            whole(run.rate),
            rss(run.peak_rss),
            cpu(&run.cpu),
            cpu_per_event(run),
        ]
    };
    let mut lines = Vec::new();
    for (i, pair) in report.tls_pairs().iter().enumerate() {
        lines.push(line(i + 1, "plaintext", !pair.tls_first, &pair.plain));
        lines.push(line(i + 1, "TLS, verify-full", pair.tls_first, &pair.tls));
    }
    lines
}

/// The TLS pairs' ratios in the order run, as the report lists them.
fn tls_ratios(report: &Report) -> String {
    let ratios: Vec<String> = report
        .tls_pairs()
        .iter()
        .filter_map(|p| p.ratio())
        .map(|r| format!("{r:.2}"))
        .collect();
    ratios.join(", ")
}

const TARGET_HEADER: [&str; 4] = ["target", "this run", "goal", ""];

fn target_lines(targets: &[Target]) -> Vec<Vec<String>> {
    targets
        .iter()
        .map(|t| {
            vec![
                t.what.clone(),
                t.measured_text(),
                t.goal_text(),
                t.verdict().to_owned(),
            ]
        })
        .collect()
}

/// The results as aligned plain-text tables with the targets under them.
pub fn table(report: &Report) -> String {
    let mut out = aligned(&HEADER, &case_lines(report));
    let c1 = &report.kafka_only;
    let _ = writeln!(
        out,
        "ceiling 1 (Kafka alone): {} events/s over {} records in {} s",
        whole(c1.rate),
        whole(c1.records as f64),
        seconds(c1.elapsed)
    );
    if let Some(line) = pipelining_line(report) {
        let _ = writeln!(out, "{line}");
    }
    if report.latency.is_some() {
        out.push('\n');
        out.push_str(&aligned(&LATENCY_HEADER, &latency_lines(report)));
    }
    let backlog = backlog_lines(report);
    if !backlog.is_empty() {
        out.push('\n');
        out.push_str(&aligned(&BACKLOG_HEADER, &backlog));
    }
    let tls = tls_lines(report);
    if !tls.is_empty() {
        out.push('\n');
        out.push_str(&aligned(&TLS_HEADER, &tls));
        let _ = writeln!(
            out,
            "over TLS / plaintext, pair by pair: {}",
            tls_ratios(report)
        );
    }
    out.push('\n');
    out.push_str(&aligned(&TARGET_HEADER, &target_lines(&targets(report))));
    out
}

/// `BENCHMARKS.md`: machine, command, method, targets, plots, results, limits, kept notes.
/// `figures` are linked from `figures_dir` (relative to the report).
pub fn markdown(
    report: &Report,
    figures: &[Figure],
    figures_dir: &str,
    kept: Option<&str>,
) -> String {
    let mut out = String::new();
    let setup = &report.setup;
    let machine = &report.machine;
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Written by `history-consumer bench` on {} from one run: compare numbers within it, not \
         across machines or runs. Run the same command again to refresh this file and its \
         plots.\n",
        report.written_at.format("%Y-%m-%d %H:%M UTC")
    );
    if !setup.release_build {
        let _ = writeln!(
            out,
            "**This run was a debug build: its numbers say nothing about production speed.**\n"
        );
    }
    if setup.quick {
        let _ = writeln!(
            out,
            "**This was a `--quick` smoke run: small workloads, short windows; its numbers \
             mean little.**\n"
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
            "a throwaway cluster with production durability (fsync and synchronous commit on) \
             and PostgreSQL's default settings, data on {}",
            machine
                .data_filesystem
                .as_deref()
                .unwrap_or("an unknown filesystem")
        )
    } else {
        "the database of `--database-url` (shared by the runs, told apart by event ids)".into()
    };
    if let Some(costs) = machine.kernel_costs {
        let _ = writeln!(
            out,
            "- Crossing into the kernel: a system call that does nothing took {:.2} µs, a \
             wake-up round trip between two threads (a byte each way over a socket pair) {:.1} \
             µs (the fastest of three trials each, before the phases).",
            costs.syscall_us, costs.wake_round_trip_us
        );
    }
    let _ = writeln!(out, "- PostgreSQL: `{}`, {database}", machine.postgres);
    let _ = writeln!(
        out,
        "- Kafka: librdkafka's mock cluster in this process, a fresh broker and topic per run; \
         the service, the broker, the producer and PostgreSQL share the cores"
    );
    let _ = writeln!(
        out,
        "- Load average (1 / 5 / 15 min): {} when the run started, {} when it ended. The \
         machine is shared: numbers taken while other work ran are lower and noisier.\n",
        load(report.load.at_start),
        load(report.load.at_end)
    );

    let _ = writeln!(out, "## Command\n");
    let _ = writeln!(out, "```sh\n{}\n```\n", setup.command);
    let _ = writeln!(
        out,
        "({} build; from a checkout: `cargo run --release -- bench`; `--quick` is the CI's \
         smoke run.)\n",
        if setup.release_build {
            "release"
        } else {
            "debug"
        }
    );

    let _ = writeln!(out, "## Targets\n");
    let targets = targets(report);
    markdown_table(&mut out, &TARGET_HEADER, &target_lines(&targets));
    let missed = targets.iter().filter(|t| t.met() == Some(false)).count();
    if missed > 0 {
        let _ = writeln!(
            out,
            "{missed} target(s) MISSED in this run: see [What limits it](#what-limits-it).\n"
        );
    }

    if !figures.is_empty() {
        let _ = writeln!(out, "## Plots\n");
        for figure in figures {
            let _ = writeln!(out, "![{}]({figures_dir}/{})\n", figure.alt, figure.file);
        }
    }

    let _ = writeln!(out, "## Method\n");
    for line in method(report) {
        let _ = writeln!(out, "- {line}");
    }
    out.push('\n');

    let _ = writeln!(out, "## Results\n");
    let _ = writeln!(out, "### End to end, case by case\n");
    markdown_table(&mut out, &HEADER, &case_lines(report));
    if report.anchor().is_some() && !report.anchor_others.is_empty() {
        let _ = writeln!(
            out,
            "The default case ran {} times, each end to end and then ceiling 2 (ratios to the \
             mean of the ceilings right before and right after each run: {}); the targets use the \
             run with the median ratio, listed first. Against the ceiling 2 right after each run \
             alone: {}.\n",
            report.anchor_others.len() + 1,
            listed(&ratios(report.default_runs(), CaseResult::vs_ceiling)),
            listed(&ratios(report.default_runs(), CaseResult::vs_ceiling_after))
        );
    }
    if let Some(line) = pipelining_line(report) {
        let _ = writeln!(out, "{line}\n");
    }
    if let Some(line) = replay_shape_line(report) {
        let _ = writeln!(out, "{line}\n");
    }
    if let (Some(anchor), Some(again)) = (report.anchor(), &report.anchor_again) {
        let drift = super::measure::ratio(again.rate, anchor.run.rate).unwrap_or(1.0);
        let _ = writeln!(
            out,
            "The default case ran first and again at the very end: {} and {} events/s ({:+.0} \
             %). Differences between cases smaller than that are noise of this machine.\n",
            whole(anchor.run.rate),
            whole(again.rate),
            (drift - 1.0) * 100.0
        );
    }
    let c1 = &report.kafka_only;
    let _ = writeln!(
        out,
        "Ceiling 1 (Kafka alone, the default case's topic read back with no database): {} \
         events/s over {} records in {} s, {} peak RSS.\n",
        whole(c1.rate),
        whole(c1.records as f64),
        seconds(c1.elapsed),
        rss(c1.peak_rss)
    );

    let inbox = inbox_lines(report);
    if !report.by_inbox_random().is_empty() && !inbox.is_empty() {
        let _ = writeln!(out, "### Inbox size and event ids\n");
        markdown_table(&mut out, &INBOX_HEADER, &inbox);
        let shared_buffers = report
            .cases
            .iter()
            .find_map(|c| c.database)
            .map_or("unknown".into(), |d| {
                format!("{} MiB", d.shared_buffers >> 20)
            });
        let _ = writeln!(
            out,
            "The same cases as in the table above, each beside its ceiling 2 in the same \
             database state, with what PostgreSQL counted over each run: the primary-key \
             indexes' size (`pg_relation_size`) once the end-to-end run was done; the share \
             of blocks found in shared buffers ({shared_buffers} here), of the run's database \
             (`pg_stat_database`) and of the two primary-key indexes alone \
             (`pg_statio_user_indexes`) — a block not found there is read from the kernel, \
             its page cache or the disk; the WAL written (`pg_current_wal_lsn()`) and its \
             full-page images (`pg_stat_wal`) per record, and any checkpoint that fell in the \
             run. The WAL and the checkpoints are the whole cluster's (its other databases \
             idle).\n"
        );
    }

    let _ = writeln!(out, "### Over TLS beside plaintext\n");
    match &report.tls {
        TlsCost::Skipped(why) => {
            let _ = writeln!(out, "TLS phase not run: {why}.\n");
        }
        TlsCost::Measured(pairs) => {
            markdown_table(&mut out, &TLS_HEADER, &tls_lines(report));
            let _ = writeln!(
                out,
                "Each pair consumed one topic of the default case twice, into two fresh \
                 databases of the same server: in plaintext and over TLS with \
                 sslmode=verify-full, in alternating order. Over TLS / plaintext, pair by \
                 pair: {}; the target uses the pair with the median ratio{}.\n",
                tls_ratios(report),
                if pairs.len() > 1 {
                    format!(" (of {})", pairs.len())
                } else {
                    String::new()
                }
            );
        }
    }

    if report.latency.is_some() {
        let _ = writeln!(out, "### Produce-to-commit latency\n");
        markdown_table(&mut out, &LATENCY_HEADER, &latency_lines(report));
    }

    let _ = writeln!(out, "### Memory with the database down\n");
    let backlog = backlog_lines(report);
    if !backlog.is_empty() {
        markdown_table(&mut out, &BACKLOG_HEADER, &backlog);
    }
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
            "Over {} partitions: RSS once a second during the outage (MB): {}. The partition \
             actors held {} records taken from Kafka (their bound: {}: per partition its \
             window, its Unknown backlog and a batch){}. After PostgreSQL came back, the \
             committed offsets reached the end in {:.1} s and every unique event was stored \
             once.\n",
            backlog.partitions,
            samples.join(", "),
            whole(backlog.held as f64),
            whole(backlog.held_bound as f64),
            backlog
                .bytes_per_held()
                .map(|b| format!(
                    "; the peak is {} bytes per held record above the RSS at start",
                    whole(b)
                ))
                .unwrap_or_default(),
            backlog.drained_in.as_secs_f64()
        );
    }

    if let Some(anchor) = report.anchor() {
        let run = &anchor.run;
        let _ = writeln!(out, "### Where the CPU went in the default case\n");
        let _ = writeln!(
            out,
            "Cores kept busy during the end-to-end run (1.00 = one core all the time); \
             PostgreSQL: {:.2}.\n",
            run.cpu.postgres
        );
        let lines: Vec<Vec<String>> = run
            .cpu
            .threads
            .iter()
            .take(8)
            .map(|(name, load)| {
                vec![
                    format!("`{name}`"),
                    format!("{load:.2}"),
                    thread_role(name).to_owned(),
                ]
            })
            .collect();
        markdown_table(&mut out, &["thread", "cores", "role"], &lines);
    }

    let _ = writeln!(out, "## What limits it\n");
    let limits = limits(report);
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
    let anchor = report.anchor_case();
    vec![
        format!(
            "Every case publishes {} records (B = 1: at most 20,000) over {} partitions unless \
             it varies them, keyed by ticket, {:.0} % of them republished copies of recent \
             events unless it varies the share, into a fresh topic, consumer group and \
             database. The default case (B = {}, {} partitions, an empty inbox) belongs to \
             every series.",
            whole(setup.events as f64),
            anchor.partitions,
            anchor.duplicates * 100.0,
            anchor.batch_size,
            anchor.partitions
        ),
        format!(
            "The service runs in this process with production settings except the batch size B \
             and an offset commit every {} ms (production: 1 s).",
            setup.commit_interval.as_millis()
        ),
        "End to end: the records are in the topic before the service starts; the time runs \
         from its first fetch to the committed offsets reaching the end of every partition \
         (committed offsets read from the service's metrics every 10 ms). Every run checks \
         that the rows equal the unique events."
            .into(),
        format!(
            "Ceiling 2: the same events through the batched inbox transaction directly, in \
             batches of B, one task per partition's share, on at most {} connections (the \
             service's pool), no Kafka. For an empty inbox into a fresh database; for a filled \
             inbox into the same database right after the end-to-end run (so it finds those \
             rows too); for the replay, the same events a second time.",
            setup.db_pool_size
        ),
        "Inbox size: before the service starts, the inbox and history tables get that many \
         rows of earlier runs (generate_series, in key order, then VACUUM ANALYZE and a \
         CHECKPOINT, as a long-running database would be). Event ids are ordered within a run \
         (`evt-<run>-<seq>`), as an outbox's sequence would give, so a run's new rows land in \
         one region of each index."
            .into(),
        "Random ids: the same cases with UUIDv4 text event ids (random, as most outboxes make \
         them; a republished copy keeps its event's id), at an empty inbox and with rows of \
         earlier runs whose ids are random too (`gen_random_uuid()::text`, loaded without the \
         primary keys, which are then built at fillfactor 70: how full random inserts leave \
         a B-tree's leaf pages, about 69 %; then VACUUM ANALYZE and a CHECKPOINT). A filled \
         inbox's database is dropped after its case."
            .into(),
        "Pipelining: each run of the default case is followed by one with \
         `--batches-in-flight 1` (a partition waits for its transaction before it sends the \
         next batch), each with its ceiling 2, so that the machine's drift weighs on both."
            .into(),
        "The default case's runs (and those with one batch in flight) and their ceilings 2 \
         alternate, the first run preceded by a ceiling 2 of its own: each run is compared \
         with the mean of the ceilings 2 right before and right after it, so that the \
         machine's drift between them weighs on both sides of the ratio alike. The ratios \
         against the ceiling after each run alone are listed too."
            .into(),
        "Replay: a second consumer group reads the 0 % case's topic again into the same \
         database, so every record is a duplicate (a redelivery) — a consumer-group reset."
            .into(),
        format!(
            "Latency: a fresh topic and database; a producer offers {:.0} % of the default \
             case's rate, first for a warm-up, then for the measured window; per record, when \
             its offset was first seen committed minus when it was handed to the producer. \
             Offsets are committed every {} ms, and, while a partition keeps up with its log \
             (less than a batch waiting), as its transactions end, at most every {} ms.",
            setup.latency_load * 100.0,
            setup.commit_interval.as_millis(),
            crate::actors::checkpoint::early_commit_gap(setup.commit_interval).as_millis()
        ),
        "TLS: the default case's records (a topic of their own for each pair of runs) consumed \
         by two consumer groups into two fresh databases of the same server, one connecting \
         with sslmode=disable, one over TLS with sslmode=verify-full against the throwaway \
         cluster's own authority (a P-256 certificate made for the run; every other phase \
         connects in plaintext), in alternating order; no ceiling."
            .into(),
        "Ceiling 1: the default case's records read back from the beginning by a plain \
         consumer with the service's client settings, on its own thread, no database."
            .into(),
        "Peak RSS: the whole process's VmHWM, reset at the start of each phase; it includes the \
         embedded broker holding the topic and the benchmark's own bookkeeping."
            .into(),
        "Backlog, measured first (while the process holds nothing of the other phases): a \
         topic full of records (unless --backlog-events says otherwise, a quarter more than \
         the member can hold: its partitions' windows, Unknown backlogs and librdkafka's \
         prefetch), the database stopped, the service run for the outage, then the database \
         started again and the drain awaited."
            .into(),
    ]
}

/// The default case beside its runs with one batch in flight per partition: the ratios to
/// ceiling 2 and their medians, or `None` when the pipelining phase did not run.
fn pipelining_line(report: &Report) -> Option<String> {
    report.anchor()?;
    let unpipelined = Case {
        batches_in_flight: 1,
        ..report.anchor_case()
    };
    let runs: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|c| c.case == unpipelined)
        .collect();
    let one = ratios(runs.iter().copied(), CaseResult::vs_ceiling);
    if one.is_empty() {
        return None;
    }
    let two = ratios(report.default_runs(), CaseResult::vs_ceiling);
    Some(format!(
        "Pipelining: with {} batches in flight per partition (the default; a second one only \
         while the member runs fewer than {} transactions, `--transactions-in-flight`) the \
         default case ran {} of ceiling 2 (median {:.2}); with 1 (`--batches-in-flight 1`), each \
         run right after one of the default's, {} (median {:.2}; against the ceiling right after \
         each alone, {}).",
        report.anchor_case().batches_in_flight,
        crate::config::defaults::TRANSACTIONS_IN_FLIGHT,
        listed(&two),
        median(&two),
        listed(&one),
        median(&one),
        listed(&ratios(runs.into_iter(), CaseResult::vs_ceiling_after))
    ))
}

/// The replay beside its ceiling 2 in the shape the service sends it, or `None` when that
/// ceiling was not measured.
fn replay_shape_line(report: &Report) -> Option<String> {
    let replay = report.replay()?;
    let markers_first = report.replay_markers_first.as_ref()?;
    Some(format!(
        "Replay: ceiling 2 sends every batch in one round trip. The service sends a batch that \
         follows one which applied nothing (here, every batch) markers first, in three round \
         trips, so that duplicates never wait for a lock on the history table. The batched \
         transaction alone in that shape re-ran the same events at {} events/s; the replay \
         ran {:.2} × that ({:.2} × the one-round-trip ceiling).",
        whole(markers_first.rate),
        super::measure::ratio(replay.run.rate, markers_first.rate).unwrap_or_default(),
        replay.vs_ceiling().unwrap_or_default(),
    ))
}

/// The ratios to ceiling 2 (`of`: `CaseResult::vs_ceiling` or `vs_ceiling_after`) of the
/// `runs` that had one.
fn ratios<'a>(
    runs: impl Iterator<Item = &'a CaseResult>,
    of: fn(&CaseResult) -> Option<f64>,
) -> Vec<f64> {
    runs.filter_map(of).collect()
}

/// `values` as a list of ratios: "0.84, 0.77, 0.86".
fn listed(values: &[f64]) -> String {
    let texts: Vec<String> = values.iter().map(|r| format!("{r:.2}")).collect();
    texts.join(", ")
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::super::charts::figures;
    use super::super::report::tests::report;
    use super::*;

    #[test]
    fn the_markdown_names_the_machine_load_targets_plots_and_every_case() {
        let report = report();
        let figures = figures(&report);
        let text = markdown(&report, &figures, "benchmarks", None);
        for expected in [
            "2 cores, Test CPU",
            "a system call that does nothing took 0.25 µs, a wake-up round trip between two \
             threads (a byte each way over a socket pair) 9.5 µs",
            "postgres (PostgreSQL) 15.4",
            "0.30 / 0.50 / 0.70 when the run started, 1.90 / 1.20 / 0.90 when it ended",
            "history-consumer bench",
            "| end-to-end at the default B (256) / ceiling 2, empty inbox (the median of 3 runs) | 0.90 | ≥ 0.90 | met |",
            "| the lowest of the default case's 3 runs / its ceiling 2 | 0.85 | ≥ 0.85 | met |",
            "| peak RSS, database down, backlog over 64 partitions | 130 MB | < 150 MB | met |",
            "| p99 produce-to-commit at 50 % of the default B's rate | 150 ms | ≤ 150 ms | met |",
            "![events/s against rows already in the inbox](benchmarks/inbox-size.svg)",
            "(benchmarks/latency.svg)",
            "| default (empty inbox) | 256 | 4 | 0 | 10 % | 200,000 (180,000) |",
            "| 2.22 | 90,000 | 100,000 | 0.90 | 60 MB | 0.15 + 1.20 | 1.7 (1.6) |",
            "| the service's CPU per event, default case (its threads: the process less the embedded broker's and the benchmark producer's) | 1.6 µs | ≤ 2.0 µs | met |",
            "| 10 M rows in the inbox | 256 | 4 | 10 M | 10 % |",
            "| replay: a second group re-reads the topic | 256 | 4 | 0 | 100 % (replay) |",
            "| default again, at the end |",
            "| 10 M rows in the inbox, UUIDv4 ids | 256 | 4 | 10 M | 10 % |",
            "![events/s against rows already in the inbox, ordered and random (UUIDv4) ids](benchmarks/inbox-ids.svg)",
            "| UUIDv4 | 10 M | 250 s | 60,000 | 68,000 | 0.88 | 720 + 730 MB | 95.0 % (90.0 %) | 98.0 % (90.0 %) | 6,000 (0.50), 1 checkpoint | 5,000 (0.50), 1 checkpoint |",
            "| ordered | 10 M | — | 70,000 | 80,000 | 0.88 | — |",
            "| UUIDv4 | 0 | — | 88,000 | 99,000 | 0.89 | — |",
            "shared buffers (128 MiB here)",
            "90,000 and 87,000 events/s (-3 %)",
            "| default, another run | 256 | 4 | 0 | 10 % |",
            "ran 3 times, each end to end and then ceiling 2 (ratios to the mean of the ceilings right before and right after each run: 0.90, 0.85, 0.94)",
            "| 45,000 | 200,000 | 80 | 120 | 150 | 190 | 260 | 5 s |",
            "| 64 | 264,000 (237,000) | 15 s | 40 MB | 130 MB | 100,000 (145,920) | 5.0 s |",
            "900 bytes per held record",
            "| end-to-end over TLS (verify-full) / plaintext, default case | 0.95 | ≥ 0.90 | met |",
            "| 1 | plaintext | first | 200,000 (180,000) |",
            "| 2 | TLS, verify-full | first | 200,000 (180,000) |",
            "pair by pair: 0.95, 0.92, 0.97; the target uses the pair with the median ratio (of 3)",
            "Every target measured was met.",
            NOTES_MARKER,
        ] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(!text.contains("MISSED"), "{text}");
    }

    #[test]
    fn a_missed_target_is_shouted_and_explained() {
        let mut report = report();
        report.cases[4].run.rate = 40_000.0;
        let text = markdown(&report, &[], "benchmarks", None);
        assert!(text.contains("| MISSED |"), "{text}");
        assert!(text.contains("1 target(s) MISSED"), "{text}");
        assert!(text.contains("0.44 of the empty inbox"), "{text}");
        assert!(!text.contains("## Plots"), "{text}");
    }

    #[test]
    fn the_replay_is_set_beside_its_ceiling_in_the_services_shape() {
        let mut report = report();
        assert!(!markdown(&report, &[], "benchmarks", None).contains("Replay: ceiling 2"));
        let replay = report.replay().expect("the fixture has a replay").run.rate;
        report.replay_markers_first = Some(super::super::report::tests::ceiling(replay * 1.25, 4));
        let text = markdown(&report, &[], "benchmarks", None);
        assert!(text.contains("the replay ran 0.80 × that"), "{text}");
    }

    #[test]
    fn the_unpipelined_runs_are_set_beside_the_default_case() {
        let mut report = report();
        assert!(!markdown(&report, &[], "benchmarks", None).contains("Pipelining: with"));
        for (rate, ceiling) in [(70_000.0, 100_000.0), (80_000.0, 100_000.0)] {
            report.cases.push(super::super::report::tests::case(
                |c| c.batches_in_flight = 1,
                rate,
                Some(ceiling),
            ));
        }
        // The first one had a ceiling right before it too: it is compared with their mean.
        let first = report.cases.len() - 2;
        report.cases[first].ceiling_before = Some(120_000.0);
        let text = markdown(&report, &[], "benchmarks", None);
        assert!(
            text.contains(
                "with 1 (`--batches-in-flight 1`), each run right after one of the default's, \
                 0.64, 0.80 (median 0.80; against the ceiling right after each alone, 0.70, 0.80)"
            ),
            "{text}"
        );
        assert!(
            text.contains("| 1 batch in flight (no pipelining) | 256 |"),
            "{text}"
        );
        assert!(text.contains("| 70,000 | 110,000 | 0.64 |"), "{text}");
    }

    #[test]
    fn quick_and_debug_runs_say_their_numbers_mean_little() {
        let mut report = report();
        report.setup.quick = true;
        report.setup.release_build = false;
        let text = markdown(&report, &[], "benchmarks", None);
        assert!(text.contains("`--quick` smoke run"));
        assert!(text.contains("debug build"));
    }

    #[test]
    fn hand_written_notes_survive_a_rewrite() {
        let report = report();
        let first = markdown(&report, &[], "benchmarks", None);
        let edited = format!("{first}\nperf: 40 % in tokio-postgres encoding\n");
        let second = markdown(&report, &[], "benchmarks", kept_notes(&edited));
        assert!(second.ends_with("perf: 40 % in tokio-postgres encoding\n"));
        assert_eq!(second.matches(NOTES_MARKER).count(), 1);
    }

    #[test]
    fn the_console_tables_line_up_and_end_with_the_targets() {
        let report = report();
        let text = table(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("case"));
        let b = lines[0].find("  B  ").unwrap() + 2;
        assert_eq!(&lines[1][b..b + 3], "256");
        assert!(text.contains("ceiling 1 (Kafka alone): 1,000,000 events/s"));
        assert!(text.contains("over TLS / plaintext, pair by pair: 0.95, 0.92, 0.97"));
        assert!(text.trim_end().lines().last().unwrap().ends_with("met"));
    }
}
