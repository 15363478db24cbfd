//! The binary's command line: the service's commands (`run`, `migrate`) and, with the `tools`
//! feature, the tools' (`demo`, `produce`, `bench`).

use clap::{Parser, Subcommand};

use crate::config::{MigrateArgs, RunArgs};
#[cfg(feature = "tools")]
use crate::tools::args::{BenchArgs, DemoArgs, ProduceArgs};

/// Consumes ticket status events from Kafka into an exactly-one-row-per-event PostgreSQL
/// projection through a transactional inbox.
#[derive(Debug, Parser)]
#[command(name = "history-consumer", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info,history_consumer=debug`. Default:
    /// `info`; `error` for `demo` and `bench`, whose own output tells the story.
    #[arg(long, env = "HISTORY_LOG", global = true)]
    pub log: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Consume the topic as a member of the consumer group (applies migrations first).
    Run(Box<RunArgs>),
    /// Apply pending database migrations and exit.
    Migrate(MigrateArgs),
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
}

impl Cli {
    /// The log filter: the one given, else the command's default.
    pub fn log_filter(&self) -> &str {
        match (&self.log, &self.command) {
            (Some(filter), _) => filter,
            (None, Command::Run(_) | Command::Migrate(_)) => "info",
            #[cfg(feature = "tools")]
            (None, Command::Demo(_) | Command::Bench(_)) => "error",
            #[cfg(feature = "tools")]
            (None, Command::Produce(_)) => "warn",
        }
    }
}
