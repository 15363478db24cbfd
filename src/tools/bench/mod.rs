//! `history-consumer bench`: how close the service runs to what the database can take, and
//! how that changes as the work grows, measured in one run on this machine — end to end at
//! several batch sizes, with a filled inbox, over more partitions, with more duplicates and as
//! an all-replay, each beside its ceiling 2 (the database alone); ceiling 1 (Kafka alone);
//! over TLS beside plaintext; latency at a steady load; memory with the database down under a
//! backlog — printed as tables,
//! judged against the targets and written to `BENCHMARKS.md` with its plots.
//!
//! Self-contained like `demo`: an embedded Kafka (a fresh mock broker per run), a throwaway
//! PostgreSQL with production durability (or `--database-url`), the service in this process.
//! Everything runs on the actix system thread (the mock broker is not `Send`); blocking work
//! goes to `spawn_blocking`. No timing is ever asserted: a phase fails only when it stalls or
//! its rows differ from the unique events it published.

mod admin_load;
mod backlog;
mod ceilings;
mod charts;
mod database;
mod end_to_end;
mod latency;
mod machine;
mod measure;
mod pg_stats;
mod phases;
mod plot;
mod prefill;
mod probe;
mod render;
mod report;
mod service;
mod targets;
mod tls_cost;
mod topic;
mod workload;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::RuntimeSettings;
use crate::db::DbError;
use crate::inbox::PgInboxError;
use crate::startup::StartupError;
use crate::tools::args::{BenchArgs, BenchPhase};
use crate::tools::pg_cluster::ClusterError;

use self::database::Databases;
use self::machine::{Machine, load_average};
use self::report::{Case, IdKind, Load, Report, Setup};

pub use self::admin_load::{BOUND_P99, BOUND_THROUGHPUT, SECTION_END, SECTION_START};
pub use self::render::NOTES_MARKER;

/// B = 1 runs at most this many records (one transaction each would take long).
const ONE_BY_ONE_RECORDS: u64 = 20_000;
/// The workload's seed: every run of the benchmark publishes the same tickets and duplicates.
const SEED: u64 = 2026;
/// The backlog phase's topic holds at least this many records (without --quick).
const MIN_BACKLOG_RECORDS: u64 = 120_000;
/// The directory beside the report that holds its plots.
pub const FIGURES_DIR: &str = "benchmarks";

/// A phase of the benchmark failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("the embedded kafka failed")]
    Kafka(#[source] rdkafka::error::KafkaError),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Certificates(#[from] crate::tools::certs::CertError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
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
    /// Partitions of the default case.
    pub partitions: i32,
    /// In the order measured; the last is the default B every other case runs at.
    pub batch_sizes: Vec<usize>,
    /// The duplicate share of every case that does not vary it.
    pub duplicates: f64,
    pub inbox_rows: Vec<u64>,
    /// Inbox sizes of the random-id cases (0: an empty inbox).
    pub random_id_rows: Vec<u64>,
    pub partition_counts: Vec<i32>,
    pub duplicate_shares: Vec<f64>,
    /// How often the default case runs (the median ratio is used).
    pub anchor_repeats: usize,
    /// The share of the default case's rate offered while latency is measured.
    pub latency_load: f64,
    pub latency_warmup: Duration,
    pub latency_window: Duration,
    /// Records of the backlog phase's topic, when given.
    pub backlog_events: Option<u64>,
    /// One backlog run for each of these partition counts.
    pub backlog_partitions: Vec<i32>,
    pub outage: Duration,
    pub seed: u64,
    pub quick: bool,
    /// The phases to run besides the default case; empty: all.
    pub only: Vec<BenchPhase>,
}

impl Plan {
    pub fn from_args(args: &BenchArgs) -> Plan {
        let mut batch_sizes: Vec<usize> = args.batch_sizes.iter().map(|b| *b as usize).collect();
        if batch_sizes.is_empty() {
            batch_sizes.push(RuntimeSettings::default().batch_size);
        }
        let inbox_rows = args.inbox_rows.clone().unwrap_or_else(|| {
            if args.quick {
                vec![10_000, 100_000]
            } else {
                vec![1_000_000, 10_000_000]
            }
        });
        let mut random_id_rows = args.random_id_rows.clone().unwrap_or_else(|| {
            if args.quick {
                vec![0, 10_000]
            } else {
                vec![0, 10_000_000]
            }
        });
        random_id_rows.sort_unstable();
        random_id_rows.dedup();
        Plan {
            events: args.events,
            partitions: args.partitions,
            batch_sizes,
            duplicates: args.duplicates,
            inbox_rows: inbox_rows.into_iter().filter(|rows| *rows > 0).collect(),
            random_id_rows,
            partition_counts: args.partition_counts.clone(),
            duplicate_shares: args.duplicate_shares.clone(),
            anchor_repeats: if args.quick { 1 } else { 3 },
            latency_load: 0.5,
            latency_warmup: Duration::from_secs(1),
            latency_window: Duration::from_secs(if args.quick { 1 } else { 5 }),
            backlog_events: match (args.backlog_events, args.quick) {
                (Some(records), _) => Some(records),
                (None, true) => Some(args.events),
                (None, false) => None,
            },
            backlog_partitions: args.backlog_partitions.clone(),
            outage: Duration::from_secs(if args.quick { 4 } else { 15 }),
            seed: SEED,
            quick: args.quick,
            only: args.only.clone(),
        }
    }

    /// Whether `phase` runs (every phase does unless `--only` names others).
    pub fn runs(&self, phase: BenchPhase) -> bool {
        self.only.is_empty() || self.only.contains(&phase)
    }

    /// The batch size every case but the batch-size ones runs at: the last one given.
    pub fn default_batch(&self) -> usize {
        *self.batch_sizes.last().expect("at least one batch size")
    }

    /// The case every series shares.
    pub fn anchor(&self) -> Case {
        Case {
            batch_size: self.default_batch(),
            partitions: self.partitions,
            inbox_rows: 0,
            duplicates: self.duplicates,
            replay: false,
            ids: IdKind::Ordered,
            batches_in_flight: crate::config::defaults::BATCHES_IN_FLIGHT,
        }
    }

    /// Records published for batch size `batch_size`.
    pub fn records_for(&self, batch_size: usize) -> u64 {
        if batch_size == 1 {
            self.events.min(ONE_BY_ONE_RECORDS)
        } else {
            self.events
        }
    }

    /// Records of the backlog phase's topic over `partitions` partitions: as given, else a
    /// quarter more than the member can hold (its actors' bound and librdkafka's prefetch),
    /// so that the bound, not the topic, decides the peak.
    pub fn backlog_records(&self, partitions: i32) -> u64 {
        if let Some(records) = self.backlog_events {
            return records;
        }
        let rt = service::settings("", "", "", self.default_batch()).runtime;
        let per_partition = (rt.partition_queue + rt.max_unresolved + rt.batch_size) as u64
            + rt.partition_queue as u64;
        let can_hold = u64::try_from(partitions).unwrap_or(0) * per_partition;
        (can_hold + can_hold / 4).max(MIN_BACKLOG_RECORDS)
    }
}

/// Runs the benchmark, prints the tables and writes the report and its plots (with
/// `--admin-load`, only the admin page load and its section).
pub async fn run(args: BenchArgs) -> Result<(), BenchError> {
    if args.admin_load {
        return admin_load::run(&args).await;
    }
    let plan = Plan::from_args(&args);
    let written_at = chrono::Utc::now();
    let load_at_start = load_average();
    println!(
        "history-consumer bench{}: {} records a case, default {} partitions, {:.0} % duplicates, \
         B {:?}; inbox rows {:?}, with random ids {:?}, partitions {:?}, duplicate shares {:?}; \
         phases {}; PostgreSQL {}; load average {}",
        if plan.quick { " --quick" } else { "" },
        plan.events,
        plan.partitions,
        plan.duplicates * 100.0,
        plan.batch_sizes,
        plan.inbox_rows,
        plan.random_id_rows,
        plan.partition_counts,
        plan.duplicate_shares,
        if plan.only.is_empty() {
            "all".to_owned()
        } else {
            format!("default and {:?}", plan.only)
        },
        if args.database_url.is_some() {
            "of --database-url"
        } else {
            "throwaway, fsync on"
        },
        load_at_start.map_or("unknown".into(), |l| format!("{:.2}", l[0]))
    );
    let mut databases = Databases::prepare(
        args.database_url.clone(),
        args.database_password_file.as_deref(),
    )
    .await?;
    let machine = Machine::describe(databases.postgres_version().await, databases.data_dir());
    let measured = phases::measure_all(&plan, &mut databases).await;
    let own_database = databases.owns_cluster();
    databases.close().await;
    let measured = measured?;
    let report = Report {
        written_at,
        machine,
        load: Load {
            at_start: load_at_start,
            at_end: load_average(),
        },
        setup: Setup {
            command: command_line(),
            release_build: !cfg!(debug_assertions),
            quick: plan.quick,
            events: plan.events,
            partitions: plan.partitions,
            duplicates: plan.duplicates,
            default_batch: plan.default_batch(),
            own_database,
            commit_interval: service::COMMIT_INTERVAL,
            db_pool_size: RuntimeSettings::default().db_pool_size,
            latency_load: plan.latency_load,
        },
        cases: measured.cases,
        anchor_others: measured.anchor_others,
        anchor_again: measured.anchor_again,
        kafka_only: measured.kafka_only,
        latency: measured.latency,
        backlog: measured.backlog,
        tls: measured.tls,
        replay_markers_first: measured.replay_markers_first,
    };
    println!();
    print!("{}", render::table(&report));
    write_report(&args.output, &report)?;
    println!("\nwrote {}", args.output.display());
    Ok(())
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

/// Where the plots of a report at `path` go.
pub fn figures_dir(path: &Path) -> PathBuf {
    path.parent()
        .unwrap_or_else(|| Path::new(""))
        .join(FIGURES_DIR)
}

/// Writes the report to `path`, keeping the hand-written notes of the file it replaces, and
/// its plots beside it.
fn write_report(path: &Path, report: &Report) -> Result<(), BenchError> {
    let failed = |path: &Path| {
        let path = path.display().to_string();
        move |source| BenchError::Write { path, source }
    };
    let figures = charts::figures(report);
    let dir = figures_dir(path);
    if !figures.is_empty() {
        std::fs::create_dir_all(&dir).map_err(failed(&dir))?;
    }
    for figure in &figures {
        let file = dir.join(figure.file);
        std::fs::write(&file, plot::svg(&figure.chart)).map_err(failed(&file))?;
    }
    let existing = existing_report(path)?;
    let text = render::markdown(report, &figures, FIGURES_DIR, render::kept_notes(&existing));
    std::fs::write(path, text).map_err(failed(path))
}

/// The report at `path` as it is now: empty when there is none yet, an error when it cannot
/// be read (so that a report that exists is never overwritten as if it were empty).
pub(super) fn existing_report(path: &Path) -> Result<String, BenchError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(BenchError::Write {
            path: path.display().to_string(),
            source,
        }),
    }
}
