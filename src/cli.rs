//! The binary's command line: the service's commands (`run`, `migrate`), the recovery commands
//! (`verify`, `rewind`) and, with the `tools` feature, the tools' (`demo`, `produce`, `bench`,
//! and the hidden `docs`).

use clap::{Parser, Subcommand};

use crate::config::recovery::{RewindArgs, VerifyArgs};
use crate::config::{MigrateArgs, RunArgs, key};
#[cfg(feature = "tools")]
use crate::tools::args::{BenchArgs, DemoArgs, ProduceArgs};
#[cfg(feature = "tools")]
use crate::tools::reference::DocsArgs;

/// Consumes ticket status events from Kafka into an exactly-one-row-per-event PostgreSQL
/// projection through a transactional inbox.
#[derive(Debug, Parser)]
#[command(name = "history-consumer", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info,history_consumer=debug`. Default:
    /// `info`; `error` for `demo` and `bench`, whose own output tells the story.
    #[arg(long = key::LOG.long, env = key::LOG.env, global = true)]
    pub log: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Consume the topic as a member of the consumer group (applies migrations first).
    Run(Box<RunArgs>),
    /// Apply pending database migrations and exit.
    Migrate(MigrateArgs),
    /// Check the projection against the topic: read every partition (from its start or from
    /// --from-datetime, up to its end when verify began) and report, per partition, the valid
    /// events present, missing and dead-lettered. Exits 1 when a valid event is missing, 2 when
    /// it could not verify.
    Verify(VerifyArgs),
    /// Move a stopped consumer group's committed offsets back to the first record at or after
    /// --to-datetime (e.g. the time of a database backup just restored), showing before and
    /// after, and record it in the audit table. Refused while the group has active members.
    Rewind(RewindArgs),
    #[cfg(feature = "tools")]
    /// Show the whole product with nothing running: an embedded Kafka, a throwaway PostgreSQL,
    /// the consumer with its admin UI, and traffic with duplicates, malformed records and
    /// database outages.
    Demo(DemoArgs),
    #[cfg(feature = "tools")]
    /// Publish generated ticket events to a real Kafka topic (load generator): a number of
    /// events, or a rate for a duration, with republished duplicates and malformed records.
    Produce(ProduceArgs),
    #[cfg(feature = "tools")]
    /// Measure throughput against the database's ceiling as the work grows (batch sizes, a
    /// filled inbox, more partitions, duplicates, a replay), latency and memory with the
    /// database down, with nothing running: an embedded Kafka, a throwaway PostgreSQL with
    /// fsync on; prints tables, judges the targets and writes BENCHMARKS.md with its plots.
    Bench(BenchArgs),
    #[cfg(feature = "tools")]
    /// Print a generated page of docs/ (configuration, metrics); scripts/docs-generate writes
    /// them.
    #[command(hide = true)]
    Docs(DocsArgs),
}

impl Cli {
    /// The log filter: the one given, else the command's default.
    pub fn log_filter(&self) -> &str {
        match (&self.log, &self.command) {
            (Some(filter), _) => filter,
            (None, Command::Run(_) | Command::Migrate(_)) => "info",
            // Their own output is the report.
            (None, Command::Verify(_) | Command::Rewind(_)) => "warn",
            #[cfg(feature = "tools")]
            (None, Command::Demo(_) | Command::Bench(_)) => "error",
            #[cfg(feature = "tools")]
            (None, Command::Produce(_) | Command::Docs(_)) => "warn",
        }
    }
}
