//! `history-consumer bench --admin-load`: does an anonymous client hammering the heaviest admin
//! page slow record processing? The service (production settings, reading open as it is without
//! `--admin-read-auth`) consumes a topic full of records and then a steady stream, once with
//! nobody at the admin port and once with clients fetching the dead-letter list — over a table
//! of many large letters — as fast as they can. Throughput and produce-to-commit latency of the
//! two are compared as ratios and written to a section of `BENCHMARKS.md` of their own.
//!
//! Rounds alternate ABBA so that the database growing from round to round weighs on both sides
//! alike. No timing is asserted: a phase fails only when it stalls or its rows are wrong.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};

use super::database::{Databases, expect_rows};
use super::end_to_end::steady_latency;
use super::machine::Machine;
use super::measure::{self, Latency, percentile, ratio};
use super::probe::{CpuSnapshot, CpuUsage};
use super::report::whole;
use super::service::{self, Service, Watch};
use super::topic::Topic;
use super::workload::Workload;
use super::{BenchError, Plan, command_line};
use crate::admin::queries::DEAD_LETTER_COUNT_CAP;
use crate::admin::{ADMIN_WORKER_NICE, OVER_LIMIT_DELAY, renice_this_thread};
use crate::config::admin::AdminSettings;
use crate::tools::args::BenchArgs;

/// The page the clients load: the dead-letter list, its 50 newest letters and their count.
pub const PAGE: &str = "/dead-letters";
/// Concurrent clients, more than the admin pages' pool has connections.
const CLIENTS: usize = 4;
/// The bound docs/admin.md states: with the load, at least this share of the throughput ...
pub const BOUND_THROUGHPUT: f64 = 0.7;
/// ... and at most this multiple of the p99 produce-to-commit latency.
pub const BOUND_P99: f64 = 2.0;

/// The lines around the section in `BENCHMARKS.md`; a full `bench` keeps it (it sits below
/// the notes marker).
pub const SECTION_START: &str = "<!-- admin-load: written by `history-consumer bench --admin-load`; \
                                 `bench` keeps it -->";
pub const SECTION_END: &str = "<!-- /admin-load -->";

/// What an `--admin-load` run measures.
#[derive(Debug, Clone)]
struct LoadPlan {
    base: Plan,
    /// Dead letters in the table the page reads.
    letters: i64,
    /// With load or not, in order.
    phases: Vec<bool>,
}

impl LoadPlan {
    fn from_args(args: &BenchArgs) -> LoadPlan {
        LoadPlan {
            base: Plan::from_args(args),
            letters: if args.quick { 2_000 } else { 100_000 },
            // Twice without, with, with, without: the machine's own noise (other work) is
            // large next to one phase.
            phases: if args.quick {
                vec![false, true]
            } else {
                [false, true, true, false].repeat(2)
            },
        }
    }
}

/// One phase: the service consuming with or without the page load.
#[derive(Debug, Clone)]
struct PhaseResult {
    loaded: bool,
    elapsed: Duration,
    rate: f64,
    latency: Option<Latency>,
    cpu: CpuUsage,
    pages: Option<PageStats>,
}

/// What the clients saw; the percentiles are of pages served (status 200).
#[derive(Debug, Clone, Default)]
struct PageStats {
    /// Responses by status code.
    statuses: BTreeMap<u16, u64>,
    /// Requests that failed to connect or read.
    failed: u64,
    elapsed: Duration,
    p50: Option<Duration>,
    p99: Option<Duration>,
}

impl PageStats {
    fn answered(&self) -> u64 {
        self.statuses.values().sum()
    }
}

/// Runs the phases and writes the section.
pub async fn run(args: &BenchArgs) -> Result<(), BenchError> {
    let plan = LoadPlan::from_args(args);
    let written_at = chrono::Utc::now();
    println!(
        "history-consumer bench --admin-load: {} records per phase over {} partitions at B = {}, \
         {CLIENTS} clients loading {PAGE} over {} dead letters; phases {}",
        plan.base.events,
        plan.base.partitions,
        plan.base.default_batch(),
        plan.letters,
        phase_names(&plan.phases)
    );
    let databases = Databases::prepare(
        args.database_url.clone(),
        args.database_password_file.as_deref(),
    )
    .await?;
    let machine = Machine::describe(databases.postgres_version().await, databases.data_dir());
    let measured = measure_all(&plan, &databases).await;
    databases.close().await;
    let phases = measured?;
    let section = render(&plan, &machine, &phases, written_at);
    println!("\n{section}");
    write_section(&args.output, &section)?;
    println!("wrote the admin-load section of {}", args.output.display());
    Ok(())
}

async fn measure_all(
    plan: &LoadPlan,
    databases: &Databases,
) -> Result<Vec<PhaseResult>, BenchError> {
    let url = databases
        .fresh(&format!("bench_admin_load_{:08x}", rand::random::<u32>()))
        .await?;
    seed_dead_letters(&url, plan.letters).await?;
    let mut phases = Vec::new();
    // Latency is measured at one offered rate for all phases: half of the first phase's.
    let mut offered_base = None;
    for (round, &loaded) in plan.phases.iter().enumerate() {
        let result = phase(plan, &url, loaded, round + 1, offered_base).await?;
        offered_base.get_or_insert(result.rate);
        phases.push(result);
    }
    Ok(phases)
}

const SEED_LETTERS: &str = "INSERT INTO dead_letters \
       (topic, kafka_partition, kafka_offset, record_key, payload, reason, message, \
        dead_lettered_at) \
     SELECT 'bench.admin-load', (g % 4)::int, g, convert_to('key-' || g, 'UTF8'), \
        convert_to('{\"note\": \"' || repeat('<b>&amp;\"x\"</b> ', 80) || g || '\"', 'UTF8'), \
        'not_json', 'seeded by bench --admin-load', \
        now() - make_interval(secs => g::double precision) \
     FROM generate_series(1::bigint, $1::bigint) AS g";

/// Fills the dead-letter table the page reads (about 1.4 kB of payload each, much of it to be
/// escaped).
async fn seed_dead_letters(url: &str, letters: i64) -> Result<(), BenchError> {
    let pool = crate::db::pool(url, 1)?;
    crate::inbox::migrate_pool(&pool).await?;
    let client = pool.get().await.map_err(BenchError::Pool)?;
    client
        .execute(SEED_LETTERS, &[&letters])
        .await
        .map_err(BenchError::Query)?;
    client
        .batch_execute("ANALYZE dead_letters")
        .await
        .map_err(BenchError::Query)?;
    Ok(())
}

async fn phase(
    plan: &LoadPlan,
    url: &str,
    loaded: bool,
    round: usize,
    offered_base: Option<f64>,
) -> Result<PhaseResult, BenchError> {
    let name = format!(
        "admin load, phase {round} ({})",
        if loaded { "with load" } else { "without" }
    );
    let base = &plan.base;
    let records = base.events;
    let run_id = format!("{:08x}", rand::random::<u32>());
    let mut workload = Workload::new(base.seed, &run_id, base.duplicates);
    let prefix = workload.id_prefix();
    let topic = Topic::create(base.partitions)?;
    topic.flood(&mut workload, records).await?;
    topic.check_retention().await?;
    let ends = topic.ends();
    let unique = topic.tally().unique_valid;
    let settings = service::settings(topic.brokers(), &topic.name, url, base.default_batch());
    let service = Service::start(settings).await?;
    let clients = loaded.then(|| Clients::start(service.admin_addr(), PAGE, CLIENTS));

    let mut watch = Watch::new(base.partitions);
    let done = watch
        .until_committed(&service, &name, || Some(ends.clone()))
        .await?;
    let cpu_after = CpuSnapshot::take();
    let (first_fetch, cpu_before) = watch
        .first_fetch
        .take()
        .unwrap_or_else(|| (done, cpu_after.clone()));
    let elapsed = done - first_fetch;
    let rate = measure::rate(records, elapsed);
    expect_rows(service.pool(), &prefix, unique, &name).await?;
    let latency = steady_latency(
        base,
        &topic,
        &mut workload,
        &service,
        offered_base.unwrap_or(rate),
        records,
        &name,
    )
    .await?;
    let pages = match clients {
        Some(clients) => Some(
            tokio::task::spawn_blocking(move || clients.stop())
                .await
                .map_err(BenchError::Task)?,
        ),
        None => None,
    };
    expect_rows(service.pool(), &prefix, topic.tally().unique_valid, &name).await?;
    service.stop().await?;
    topic.close().await;
    let result = PhaseResult {
        loaded,
        elapsed,
        rate,
        latency,
        cpu: cpu_before.usage_until(&cpu_after),
        pages,
    };
    println!("{name}: {}", summary(&result));
    Ok(result)
}

fn summary(result: &PhaseResult) -> String {
    let mut text = format!("{} events/s", whole(result.rate));
    if let Some(latency) = &result.latency {
        let _ = write!(text, ", p99 {}", millis(latency.p99));
    }
    if let Some(pages) = &result.pages {
        let _ = write!(text, "; {}", page_cell(pages));
    }
    text
}

/// Client threads loading one page over and over, each from a loopback address of its own (so
/// that the per-address limit alone does not hold them back) on a keep-alive connection, as
/// load tools and browsers do; a refusal does not slow them down. They run at
/// [`CLIENT_NICE`]: on this machine they stand for a client on another one.
struct Clients {
    stop: Arc<AtomicBool>,
    started: Instant,
    threads: Vec<JoinHandle<(PageStats, Vec<Duration>)>>,
}

impl Clients {
    fn start(addr: SocketAddr, path: &'static str, count: usize) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..count)
            .map(|i| {
                let stop = stop.clone();
                let from = Ipv4Addr::new(127, 0, 3, 10 + i as u8);
                std::thread::Builder::new()
                    .name(format!("{CLIENT_THREADS}{i}"))
                    .spawn(move || load(from, addr, path, &stop))
                    .expect("spawn a client thread")
            })
            .collect();
        Clients {
            stop,
            started: Instant::now(),
            threads,
        }
    }

    /// Stops the clients and sums up what they saw (blocks until they finished their request).
    fn stop(self) -> PageStats {
        self.stop.store(true, Ordering::Relaxed);
        let mut stats = PageStats {
            elapsed: self.started.elapsed(),
            ..PageStats::default()
        };
        let mut times = Vec::new();
        for thread in self.threads {
            if let Ok((seen, mut took)) = thread.join() {
                for (status, count) in seen.statuses {
                    *stats.statuses.entry(status).or_default() += count;
                }
                stats.failed += seen.failed;
                times.append(&mut took);
            }
        }
        times.sort_unstable();
        stats.p50 = percentile(&times, 0.50);
        stats.p99 = percentile(&times, 0.99);
        stats
    }
}

fn load(
    from: Ipv4Addr,
    addr: SocketAddr,
    path: &str,
    stop: &AtomicBool,
) -> (PageStats, Vec<Duration>) {
    renice_this_thread(CLIENT_NICE);
    let mut stats = PageStats::default();
    let mut times = Vec::new();
    // Binding the client side needs a socket before the connection: tokio's, on a runtime of
    // this thread's own.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(_) => return (stats, times),
    };
    runtime.block_on(async {
        let mut connection: Option<BufReader<TcpStream>> = None;
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let stream = match connection.as_mut() {
                Some(stream) => stream,
                None => match connect(from, addr).await {
                    Ok(stream) => connection.insert(BufReader::new(stream)),
                    Err(_) => {
                        stats.failed += 1;
                        // A refused connection returns at once: do not spin.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
            };
            match tokio::time::timeout(Duration::from_secs(30), get(stream, addr, path)).await {
                Ok(Ok((status, keep_alive))) => {
                    *stats.statuses.entry(status).or_default() += 1;
                    // Refusals wait on purpose; the time is that of a page served.
                    if status == 200 {
                        times.push(started.elapsed());
                    }
                    if !keep_alive {
                        connection = None;
                    }
                }
                Ok(Err(_)) | Err(_) => {
                    stats.failed += 1;
                    connection = None;
                }
            }
        }
    });
    (stats, times)
}

async fn connect(from: Ipv4Addr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind((from, 0).into())?;
    tokio::time::timeout(Duration::from_secs(5), socket.connect(addr))
        .await
        .map_err(std::io::Error::other)?
}

/// One `GET` on an open connection: the response's status, and whether the server keeps the
/// connection open.
async fn get(
    stream: &mut BufReader<TcpStream>,
    addr: SocketAddr,
    path: &str,
) -> std::io::Result<(u16, bool)> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.get_mut().write_all(request.as_bytes()).await?;
    let (mut status, mut length, mut keep_alive) = (None, 0, true);
    let mut line = String::new();
    loop {
        line.clear();
        if stream.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if status.is_none() {
            status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok());
        } else if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().map_err(std::io::Error::other)?;
            } else if name.eq_ignore_ascii_case("connection") {
                keep_alive = !value.eq_ignore_ascii_case("close");
            }
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await?;
    let status = status.ok_or_else(|| std::io::Error::other("not an HTTP response"))?;
    Ok((status, keep_alive))
}

/// The means of both sides and their ratios.
#[derive(Debug, Clone, Copy)]
struct Comparison {
    rate: Option<f64>,
    p99: Option<f64>,
}

fn compare(phases: &[PhaseResult]) -> Comparison {
    let mean = |loaded: bool, value: &dyn Fn(&PhaseResult) -> Option<f64>| {
        let values: Vec<f64> = phases
            .iter()
            .filter(|p| p.loaded == loaded)
            .filter_map(value)
            .collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let rate = |p: &PhaseResult| Some(p.rate);
    let p99 = |p: &PhaseResult| p.latency.map(|l| l.p99.as_secs_f64());
    let ratio_of = |value: &dyn Fn(&PhaseResult) -> Option<f64>| {
        ratio(mean(true, value)?, mean(false, value)?)
    };
    Comparison {
        rate: ratio_of(&rate),
        p99: ratio_of(&p99),
    }
}

fn render(
    plan: &LoadPlan,
    machine: &Machine,
    phases: &[PhaseResult],
    written_at: chrono::DateTime<chrono::Utc>,
) -> String {
    let base = &plan.base;
    let admin = AdminSettings::default();
    let mut out = String::new();
    let _ = writeln!(out, "{SECTION_START}\n");
    let _ = writeln!(out, "## Admin page load\n");
    let _ = writeln!(
        out,
        "Written by `{}` on {} ({} build) on {} cores, {}, Linux {}, PostgreSQL `{}`.\n",
        command_line(),
        written_at.format("%Y-%m-%d %H:%M UTC"),
        if cfg!(debug_assertions) {
            "a debug"
        } else {
            "a release"
        },
        machine.cores,
        machine.cpu_model,
        machine.kernel,
        machine.postgres
    );
    let _ = writeln!(
        out,
        "Does an anonymous client hammering the heaviest admin page slow record processing?\n"
    );
    let method = [
        format!(
            "The service: production settings, B = {}; the admin pages' own pool of {} \
             connections with a {} ms statement timeout; reading open (no \
             `--admin-read-auth`); readers who did not sign in limited to {} page loads a \
             second over all addresses; the admin server's worker at nice {ADMIN_WORKER_NICE}.",
            base.default_batch(),
            admin.db_pool_size,
            admin.statement_timeout.as_millis(),
            admin.anonymous_reads_per_sec,
        ),
        format!(
            "Each phase: {} records ({:.0} % duplicates) over {} partitions consumed from a full \
             topic (events/s: first fetch to the last commit), then a steady {:.0} % of the \
             first phase's rate for up to {} s (produce-to-commit latency; the same offered \
             rate in every phase). Phases in order: {}, so that the database growing from phase \
             to phase weighs on both sides alike.",
            whole(base.events as f64),
            base.duplicates * 100.0,
            base.partitions,
            base.latency_load * 100.0,
            base.latency_window.as_secs(),
            phase_names(&plan.phases),
        ),
        format!(
            "The load: {CLIENTS} client threads in this process, each from a loopback address \
             of its own on a keep-alive connection (as load tools and browsers do), request \
             `{PAGE}` back to back for the whole phase, whatever the answer (a refusal does not \
             slow them; the service makes each wait {} ms). The table holds \
             {} dead letters of about 1.4 kB: a page reads and escapes 50 of them and counts up \
             to {}.",
            OVER_LIMIT_DELAY.as_millis(),
            whole(plan.letters as f64),
            whole((DEAD_LETTER_COUNT_CAP + 1) as f64),
        ),
        format!(
            "The clients share the machine's cores with the service and PostgreSQL, at nice \
             {CLIENT_NICE}: they stand for a client on another machine, taking the CPU time the \
             service leaves while their requests arrive as fast as the admin server takes them. \
             Their own CPU is in the table apart."
        ),
    ];
    for line in method {
        let _ = writeln!(out, "- {line}");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| phase | load | seconds | events/s | p50 / p99 produce-to-commit | CPU cores: process + \
         PostgreSQL | of the process: clients / admin server | answers (by status) | \
         served page p50 / p99 |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for (i, phase) in phases.iter().enumerate() {
        let latency = phase.latency.as_ref().map_or("—".into(), |l| {
            format!(
                "{} / {} at {}/s",
                millis(l.p50),
                millis(l.p99),
                whole(l.offered_rate)
            )
        });
        let (pages, page_times) = match &phase.pages {
            Some(pages) => (
                page_cell(pages),
                format!(
                    "{} / {}",
                    pages.p50.map_or("—".into(), millis),
                    pages.p99.map_or("—".into(), millis)
                ),
            ),
            None => ("—".into(), "—".into()),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {} | {latency} | {:.2} + {:.2} | {:.2} / {:.2} | {pages} | \
             {page_times} |",
            i + 1,
            if phase.loaded { "with" } else { "without" },
            phase.elapsed.as_secs_f64(),
            whole(phase.rate),
            phase.cpu.process,
            phase.cpu.postgres,
            threads(&phase.cpu, CLIENT_THREADS),
            threads(&phase.cpu, ADMIN_WORKER_THREAD),
        );
    }
    let comparison = compare(phases);
    let verdict = |met: Option<bool>| match met {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "not measured",
    };
    let shown = |value: Option<f64>| value.map_or("—".into(), |v| format!("{v:.2}"));
    let _ = writeln!(
        out,
        "\n| with load / without (means) | this run | bound | |\n|---|---|---|---|"
    );
    let _ = writeln!(
        out,
        "| events/s | {} | ≥ {BOUND_THROUGHPUT} | {} |",
        shown(comparison.rate),
        verdict(comparison.rate.map(|r| r >= BOUND_THROUGHPUT))
    );
    let _ = writeln!(
        out,
        "| p99 produce-to-commit | {} | ≤ {BOUND_P99} | {} |",
        shown(comparison.p99),
        verdict(comparison.p99.map(|r| r <= BOUND_P99))
    );
    let _ = writeln!(out, "\n{SECTION_END}");
    out
}

/// The clients' scheduling priority: they get the CPU time the service and PostgreSQL leave
/// (and a sliver more), as if they ran elsewhere, while their requests still arrive as fast as
/// the admin server takes them.
const CLIENT_NICE: i32 = 19;
/// The clients' thread names start with this.
const CLIENT_THREADS: &str = "admin-load-";
/// actix names a server's worker `actix-rt|system:…`; the admin server's is the only one here
/// (metrics share its listener).
const ADMIN_WORKER_THREAD: &str = "actix-rt|system";

/// Cores used by the threads whose name starts with `prefix`.
fn threads(cpu: &CpuUsage, prefix: &str) -> f64 {
    cpu.threads
        .iter()
        .filter(|(name, _)| name.starts_with(prefix))
        // Not sum(): an empty f64 sum is -0.0.
        .fold(0.0, |sum, (_, cores)| sum + cores)
}

fn phase_names(phases: &[bool]) -> String {
    let names: Vec<&str> = phases
        .iter()
        .map(|loaded| if *loaded { "with" } else { "without" })
        .collect();
    names.join(", ")
}

fn page_cell(pages: &PageStats) -> String {
    let per_second = measure::rate(pages.answered(), pages.elapsed);
    let statuses: Vec<String> = pages
        .statuses
        .iter()
        .map(|(status, count)| format!("{} × {status}", whole(*count as f64)))
        .collect();
    let mut cell = format!("{}/s ({})", whole(per_second), statuses.join(", "));
    if pages.failed > 0 {
        let _ = write!(cell, ", {} failed", pages.failed);
    }
    cell
}

fn millis(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1000.0)
}

/// Puts `section` into the report at `path` in place of an earlier one, else at its end.
fn write_section(path: &Path, section: &str) -> Result<(), BenchError> {
    let existing = super::existing_report(path)?;
    let text = replace_section(&existing, section);
    std::fs::write(path, text).map_err(|source| BenchError::Write {
        path: path.display().to_string(),
        source,
    })
}

fn replace_section(existing: &str, section: &str) -> String {
    let found = existing.find(SECTION_START).and_then(|start| {
        let end = start + existing[start..].find(SECTION_END)? + SECTION_END.len();
        Some((start, end))
    });
    match found {
        Some((start, end)) => format!(
            "{}{}{}",
            &existing[..start],
            section.trim_end(),
            &existing[end..]
        ),
        None if existing.trim().is_empty() => section.to_owned(),
        None => format!("{}\n\n{section}", existing.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(loaded: bool, rate: f64, p99_ms: u64) -> PhaseResult {
        PhaseResult {
            loaded,
            elapsed: Duration::from_secs(1),
            rate,
            latency: Some(Latency {
                records: 10,
                offered_rate: 100.0,
                p50: Duration::from_millis(p99_ms / 2),
                p90: Duration::from_millis(p99_ms * 9 / 10),
                p99: Duration::from_millis(p99_ms),
                p999: Duration::from_millis(p99_ms),
                max: Duration::from_millis(p99_ms),
            }),
            cpu: CpuUsage::default(),
            pages: None,
        }
    }

    #[test]
    fn the_comparison_divides_the_means_of_both_sides() {
        let phases = [
            phase(false, 100.0, 100),
            phase(true, 80.0, 150),
            phase(true, 60.0, 250),
            phase(false, 100.0, 100),
        ];
        let comparison = compare(&phases);
        assert_eq!(comparison.rate, Some(0.7));
        assert_eq!(comparison.p99, Some(2.0));
        assert_eq!(compare(&phases[..1]).rate, None);
    }

    #[test]
    fn the_section_replaces_its_earlier_self_and_keeps_the_rest() {
        let section = format!("{SECTION_START}\nnew\n{SECTION_END}\n");
        let report =
            format!("# Benchmarks\n\nnotes\n\n{SECTION_START}\nold\n{SECTION_END}\n\nafter\n");
        let replaced = replace_section(&report, &section);
        assert_eq!(
            replaced,
            format!("# Benchmarks\n\nnotes\n\n{SECTION_START}\nnew\n{SECTION_END}\n\nafter\n")
        );
        let appended = replace_section("# Benchmarks\n", &section);
        assert_eq!(appended, format!("# Benchmarks\n\n{section}"));
        assert_eq!(replace_section("", &section), section);
    }
}
