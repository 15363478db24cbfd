//! `history-consumer bench`: how close the service runs to what the database can take, measured
//! in one run on this machine — end to end at several batch sizes, the two ceilings (Kafka
//! alone, the database alone), and memory with the database down under a backlog — printed as
//! a table and written to `BENCHMARKS.md`.
//!
//! Self-contained like `demo`: an embedded Kafka (a fresh mock broker per run), a throwaway
//! PostgreSQL with production durability (or `--database-url`), the service in this process.
//! Everything runs on the actix system thread (the mock broker is not `Send`); blocking work
//! goes to `spawn_blocking`. No timing is ever asserted: a phase fails only when it stalls or
//! its rows differ from the unique events it published.

mod admin_load;
mod backlog;
mod database;
mod end_to_end;
mod machine;
mod measure;
mod probe;
mod render;
mod report;
mod service;
mod topic;
mod workload;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::db::DbError;
use crate::domain::TicketEvent;
use crate::inbox::{Origin, PgInboxError};
use crate::startup::StartupError;
use crate::tools::args::BenchArgs;
use crate::tools::pg_cluster::ClusterError;

use self::database::{Databases, expect_rows};
use self::end_to_end::Finished;
use self::machine::Machine;
use self::measure::Sent;
use self::probe::CpuSnapshot;
use self::report::{Backlog, CeilingResult, Report, RunResult, Setup};
use self::workload::{Workload, event_of};

pub use self::admin_load::{BOUND_P99, BOUND_THROUGHPUT, SECTION_END, SECTION_START};
pub use self::render::NOTES_MARKER;

/// B = 1 runs at most this many records (one transaction each would take long).
const ONE_BY_ONE_RECORDS: u64 = 20_000;
/// The workload's seed: every run of the benchmark publishes the same tickets and duplicates.
const SEED: u64 = 2026;

/// A phase of the benchmark failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("the embedded kafka failed")]
    Kafka(#[source] rdkafka::error::KafkaError),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Migrate(#[from] crate::inbox::MigrateError),
    #[error("database query failed")]
    Query(#[source] tokio_postgres::Error),
    #[error("no database connection")]
    Pool(#[source] deadpool_postgres::PoolError),
    #[error("the service did not start")]
    Startup(#[source] StartupError),
    #[error("the service stopped: {0}")]
    ServiceStopped(String),
    #[error("the embedded kafka did not acknowledge {0} records")]
    Undelivered(usize),
    #[error(
        "partition {partition} lost its records below offset {low} to the embedded broker's \
         retention (about 5 MiB per partition): use more --partitions or fewer --events"
    )]
    Retention { partition: i32, low: i64 },
    #[error("{phase}: {rows} rows for {unique} unique events published")]
    Mismatch {
        phase: String,
        rows: u64,
        unique: u64,
    },
    #[error("{phase} stalled: {detail}")]
    Stalled { phase: String, detail: String },
    #[error("ceiling 2: a batched inbox transaction failed")]
    Batch(#[source] PgInboxError),
    #[error("a benchmark task failed")]
    Task(#[source] tokio::task::JoinError),
    #[error("cannot write the report to {path}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// What to measure, from the command line.
#[derive(Debug, Clone)]
pub struct Plan {
    pub events: u64,
    pub partitions: i32,
    /// In the order measured; the last is the default B the targets are about.
    pub batch_sizes: Vec<usize>,
    pub duplicates: f64,
    /// The share of the measured rate offered while latency is measured.
    pub latency_load: f64,
    pub latency_window: Duration,
    pub backlog_records: u64,
    /// One backlog run for each of these partition counts.
    pub backlog_partitions: Vec<i32>,
    pub outage: Duration,
    pub seed: u64,
}

impl Plan {
    pub fn from_args(args: &BenchArgs) -> Plan {
        let mut batch_sizes: Vec<usize> = args.batch_sizes.iter().map(|b| *b as usize).collect();
        if batch_sizes.is_empty() {
            batch_sizes.push(crate::config::RuntimeSettings::default().batch_size);
        }
        Plan {
            events: args.events,
            partitions: args.partitions,
            batch_sizes,
            duplicates: args.duplicates,
            latency_load: 0.5,
            latency_window: Duration::from_secs(if args.quick { 1 } else { 5 }),
            backlog_partitions: args.backlog_partitions.clone(),
            backlog_records: if args.quick {
                args.events.min(args.backlog_events)
            } else {
                args.backlog_events
            },
            outage: Duration::from_secs(if args.quick { 4 } else { 15 }),
            seed: SEED,
        }
    }

    /// The batch size the targets are about: the last one given.
    pub fn default_batch(&self) -> usize {
        *self.batch_sizes.last().expect("at least one batch size")
    }

    /// Records published for batch size `batch_size`.
    pub fn records_for(&self, batch_size: usize) -> u64 {
        if batch_size == 1 {
            self.events.min(ONE_BY_ONE_RECORDS)
        } else {
            self.events
        }
    }
}

/// Runs the benchmark, prints the table and writes the report (with `--admin-load`, only the
/// admin page load and its section).
pub async fn run(args: BenchArgs) -> Result<(), BenchError> {
    if args.admin_load {
        return admin_load::run(&args).await;
    }
    let plan = Plan::from_args(&args);
    let written_at = chrono::Utc::now();
    println!(
        "history-consumer bench: {} records over {} partitions ({:.0} % duplicates), batch \
         sizes {:?} (default {}); PostgreSQL {}",
        plan.events,
        plan.partitions,
        plan.duplicates * 100.0,
        plan.batch_sizes,
        plan.default_batch(),
        if args.database_url.is_some() {
            "of --database-url"
        } else {
            "throwaway, fsync on"
        }
    );
    let mut databases = Databases::prepare(args.database_url.clone()).await?;
    let machine = Machine::describe(databases.postgres_version().await, databases.data_dir());
    let measured = measure_all(&plan, &mut databases).await;
    let own_database = databases.owns_cluster();
    databases.close().await;
    let (runs, kafka_only, database_only, backlog) = measured?;
    let report = Report {
        written_at,
        machine,
        setup: Setup {
            command: command_line(),
            release_build: !cfg!(debug_assertions),
            events: plan.events,
            partitions: plan.partitions,
            duplicates: plan.duplicates,
            default_batch: plan.default_batch(),
            own_database,
            commit_interval: service::COMMIT_INTERVAL,
            latency_load: plan.latency_load,
            latency_window: plan.latency_window,
        },
        runs,
        kafka_only,
        database_only,
        backlog,
    };
    println!();
    print!("{}", render::table(&report));
    write_report(&args.output, &report)?;
    println!("\nwrote {}", args.output.display());
    Ok(())
}

type Measured = (Vec<RunResult>, CeilingResult, CeilingResult, Vec<Backlog>);

async fn measure_all(plan: &Plan, databases: &mut Databases) -> Result<Measured, BenchError> {
    // First, while the process holds nothing of the other phases.
    let mut backlog = Vec::new();
    if plan.backlog_records == 0 {
        backlog.push(Backlog::Skipped("--backlog-events 0".into()));
    } else {
        for &partitions in &plan.backlog_partitions {
            backlog.push(backlog::run(plan, databases, partitions).await?);
        }
    }
    let mut runs = Vec::new();
    let mut kept: Option<Finished> = None;
    for &batch_size in &plan.batch_sizes {
        let finished = end_to_end::run(plan, databases, batch_size).await?;
        runs.push(finished.result.clone());
        if let Some(previous) = kept.replace(finished) {
            previous.topic.close().await;
        }
    }
    let finished = kept.expect("at least one batch size");
    let kafka_only = kafka_ceiling(&finished).await;
    let Finished {
        topic,
        sent,
        run_id,
        ..
    } = finished;
    topic.close().await;
    let kafka_only = kafka_only?;
    let database_only = database_ceiling(plan, databases, &sent, &run_id).await?;
    Ok((runs, kafka_only, database_only, backlog))
}

/// Ceiling 1 on the default B's topic, up to where its timed records end.
async fn kafka_ceiling(finished: &Finished) -> Result<CeilingResult, BenchError> {
    let ends = ends_of(&finished.sent, finished.topic.partitions);
    println!("ceiling 1: reading the default B's records back with no database");
    probe::reset_peak_rss();
    let cpu_before = CpuSnapshot::take();
    let read = finished.topic.read_raw(&ends).await?;
    let cpu = cpu_before.usage_until(&CpuSnapshot::take());
    Ok(CeilingResult {
        records: read.records,
        elapsed: read.elapsed,
        rate: measure::rate(read.records, read.elapsed),
        peak_rss: probe::peak_rss(),
        cpu,
    })
}

/// Ceiling 2: the default B's events (made again from the seed, under ids of their own)
/// through the batched inbox transaction, one task per partition's share.
async fn database_ceiling(
    plan: &Plan,
    databases: &Databases,
    sent: &[Sent],
    run_id: &str,
) -> Result<CeilingResult, BenchError> {
    let run_id = format!("{run_id}-db");
    let workload = Workload::new(plan.seed, &run_id, plan.duplicates);
    let prefix = workload.id_prefix();
    let mut shares: BTreeMap<i32, Vec<(TicketEvent, Origin)>> = BTreeMap::new();
    let mut unique = std::collections::HashSet::new();
    for (record, at) in workload.zip(sent) {
        let Some(event) = event_of(record) else {
            continue;
        };
        unique.insert(event.event_id.clone());
        let origin = Origin {
            partition: at.partition,
            offset: at.offset,
        };
        shares
            .entry(at.partition)
            .or_default()
            .push((event, origin));
    }
    let mut shares: Vec<Vec<(TicketEvent, Origin)>> = shares.into_values().collect();
    for share in &mut shares {
        share.sort_by_key(|(_, origin)| origin.offset);
    }
    let unique = unique.len() as u64;
    println!(
        "ceiling 2: {} events ({unique} unique) through the batched inbox transaction, B = {}, \
         {} tasks",
        sent.len(),
        plan.default_batch(),
        shares.len()
    );
    let url = databases.fresh(&format!("bench_{run_id}_ceiling")).await?;
    probe::reset_peak_rss();
    let cpu_before = CpuSnapshot::take();
    let ceiling = database::ceiling(&url, &shares, plan.default_batch()).await?;
    let cpu = cpu_before.usage_until(&CpuSnapshot::take());
    let peak_rss = probe::peak_rss();
    let phase = "ceiling 2 (database alone)";
    let pool = crate::db::pool(&url, 1)?;
    expect_rows(&pool, &prefix, unique, phase).await?;
    if ceiling.applied != unique {
        return Err(BenchError::Mismatch {
            phase: phase.into(),
            rows: ceiling.applied,
            unique,
        });
    }
    Ok(CeilingResult {
        records: ceiling.records,
        elapsed: ceiling.elapsed,
        rate: measure::rate(ceiling.records, ceiling.elapsed),
        peak_rss,
        cpu,
    })
}

/// Per partition, the offset after the last of `sent`.
fn ends_of(sent: &[Sent], partitions: i32) -> Vec<i64> {
    let mut ends = vec![0; usize::try_from(partitions).unwrap_or(0)];
    for s in sent {
        if let Some(end) = usize::try_from(s.partition)
            .ok()
            .and_then(|p| ends.get_mut(p))
        {
            *end = (*end).max(s.offset + 1);
        }
    }
    ends
}

/// The command as typed, under the binary's name.
fn command_line() -> String {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .map(|arg| {
            if arg.contains(char::is_whitespace) {
                format!("'{arg}'")
            } else {
                arg
            }
        })
        .collect();
    format!("history-consumer {}", args.join(" "))
}

/// Writes the report to `path`, keeping the hand-written notes of the file it replaces.
fn write_report(path: &Path, report: &Report) -> Result<(), BenchError> {
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    let text = render::markdown(report, render::kept_notes(&existing));
    std::fs::write(path, text).map_err(|source| BenchError::Write {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn ends_are_one_past_the_last_offset_of_each_partition() {
        let at = Instant::now();
        let sent = |partition, offset| Sent {
            partition,
            offset,
            at,
        };
        let ends = ends_of(&[sent(0, 0), sent(2, 5), sent(0, 1), sent(2, 3)], 4);
        assert_eq!(ends, vec![2, 0, 6, 0]);
    }
}
