//! The command-line options of the tools: `demo`, `produce` and `bench`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::config::{ConfigError, KafkaConnectionArgs, defaults, key, parse_duration};

/// Options of `produce`.
#[derive(Debug, Clone, Args)]
pub struct ProduceArgs {
    /// The brokers and how to reach them, as for `run`; `--kafka-option`s are producer
    /// properties here (e.g. `compression.type=zstd`).
    #[command(flatten)]
    pub kafka: KafkaConnectionArgs,
    /// The topic to publish to.
    #[arg(long = key::TOPIC.long, env = key::TOPIC.env, default_value = defaults::TOPIC)]
    pub topic: String,
    /// Records to publish (ignored with --rate).
    #[arg(long, default_value_t = 10_000)]
    pub events: u64,
    /// Publish this many records per second for --duration instead of --events.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate: Option<u32>,
    /// How long to publish for, with --rate (e.g. 60s, 5m).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Tickets the events are spread over (the record key is the ticket id).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub tickets: u64,
    /// Share of records that republish an already acknowledged event (outbox-style).
    #[arg(long, default_value_t = 0.05)]
    pub duplicates: f64,
    /// Share of records that are malformed (and must end up in dead_letters).
    #[arg(long, default_value_t = 0.01)]
    pub malformed: f64,
    /// Event ids start with `evt-<run-id>-`; default: random, so runs never collide.
    #[arg(long)]
    pub run_id: Option<String>,
}

impl ProduceArgs {
    /// Checks the shares; the error names the flag.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, share) in [
            ("--duplicates", self.duplicates),
            ("--malformed", self.malformed),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(ConfigError::new(
                    key,
                    format!("{share} is not a share between 0 and 1"),
                ));
            }
        }
        if self.duplicates + self.malformed > 1.0 {
            return Err(ConfigError::new(
                "--duplicates / --malformed",
                "together they exceed 1: no room for fresh events",
            ));
        }
        Ok(())
    }
}

/// Options of `demo`; with none, it runs until Ctrl-C.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Stop by itself after this long, e.g. 40s or 2m (default: run until Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Events per second the traffic generator publishes.
    #[arg(long, value_name = "EVENTS", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..=20_000))]
    pub rate: u32,
    /// Use this existing PostgreSQL database instead of a throwaway cluster (then without
    /// database hiccups), e.g. postgres://user:pw@host/history.
    #[arg(long = key::DATABASE_URL.long, env = key::DATABASE_URL.env, hide_env_values = true)]
    pub database_url: Option<String>,
    /// With --database-url: a file holding its password (a trailing newline is ignored).
    #[arg(long = key::DATABASE_PASSWORD_FILE.long, env = key::DATABASE_PASSWORD_FILE.env,
          value_name = "PATH")]
    pub database_password_file: Option<std::path::PathBuf>,
    /// Address of the admin UI, /metrics and the health endpoints.
    #[arg(long, default_value = defaults::ADMIN_ADDR)]
    pub admin_addr: SocketAddr,
    /// Time between scripted database outages of the throwaway cluster (the first comes after
    /// 8 s of traffic; at least 8 s apart; 0s turns them off).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub hiccup_every: Duration,
}

/// Options of `bench`; the defaults are the documented benchmark.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Records published for each case (B = 1 gets at most 20,000), duplicates included.
    #[arg(long, default_value_t = 200_000,
          value_parser = clap::value_parser!(u64).range(100..=2_000_000))]
    pub events: u64,
    /// Partitions of the default case's topic (the embedded broker keeps about 5 MiB per
    /// partition).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(i32).range(1..=64))]
    pub partitions: i32,
    /// Batch sizes to measure, comma separated; the last is the default B every other case
    /// runs at.
    #[arg(long, value_delimiter = ',', default_value = "1,32,256",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch_sizes: Vec<u32>,
    /// Rows already in the inbox (and history) for the inbox-size cases, comma separated
    /// (default 1000000,10000000; with --quick 10000,100000); 0 skips them.
    #[arg(long, value_delimiter = ',',
          value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    pub inbox_rows: Option<Vec<u64>>,
    /// Rows already in the inbox (and history) for the random-id cases, comma separated: the
    /// events' ids and the prefilled rows' ids are UUIDv4 text; 0 is an empty inbox (default
    /// 0,10000000; with --quick 0,10000).
    #[arg(long, value_delimiter = ',',
          value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    pub random_id_rows: Option<Vec<u64>>,
    /// Run only these phases besides the default case (every series is compared with it),
    /// comma separated; the report then holds only what ran, so write it elsewhere with
    /// --output.
    #[arg(long, value_delimiter = ',', value_enum)]
    pub only: Vec<BenchPhase>,
    /// Partition counts of one member for the partition cases, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "4,16,64",
          value_parser = clap::value_parser!(i32).range(1..=64))]
    pub partition_counts: Vec<i32>,
    /// Duplicate shares for the duplicate cases, comma separated (0 to 0.5); the lowest one's
    /// topic is then re-read by a second consumer group (the all-replay case).
    #[arg(long, value_delimiter = ',', default_value = "0,0.5", value_parser = parse_duplicate_share)]
    pub duplicate_shares: Vec<f64>,
    /// Use this existing PostgreSQL database instead of a throwaway cluster (the inbox-size
    /// and backlog phases, which need their own databases and stop the server, are then
    /// skipped), e.g. postgres://user:pw@host/bench.
    #[arg(long, hide_env_values = true)]
    pub database_url: Option<String>,
    /// With --database-url: a file holding its password (a trailing newline is ignored).
    #[arg(long, value_name = "PATH", requires = "database_url")]
    pub database_password_file: Option<std::path::PathBuf>,
    /// Where to write the report (its hand-written notes section is kept); the plots go to
    /// the directory `benchmarks` beside it.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub output: std::path::PathBuf,
    /// Share of records that republish an earlier event in every other case (0 to 0.5).
    #[arg(long, default_value_t = 0.10, value_parser = parse_duplicate_share)]
    pub duplicates: f64,
    /// Records in the topic for the backlog phase with the database down (default: more than
    /// the member can hold, at least 120,000; with --quick: --events); 0 skips it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=2_000_000))]
    pub backlog_events: Option<u64>,
    /// Partitions of the backlog phase's topic, comma separated: the phase runs once for each
    /// (memory with the database down grows with the partitions a member holds).
    #[arg(long, value_delimiter = ',', default_value = "4,64",
          value_parser = clap::value_parser!(i32).range(1..=64))]
    pub backlog_partitions: Vec<i32>,
    /// Measure only how anonymous clients loading the heaviest admin page slow record
    /// processing (with and without them, --events records a phase), and write that section
    /// of the report.
    #[arg(long)]
    pub admin_load: bool,
    /// The CI's smoke run: --events records everywhere, small inboxes, 1 s of latency, short
    /// outages; every phase runs, the numbers mean little.
    #[arg(long)]
    pub quick: bool,
}

/// A phase of `bench` that `--only` can pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchPhase {
    /// Memory with the database down under a backlog.
    Backlog,
    /// The default case over TLS beside plaintext.
    Tls,
    /// The batch sizes other than the default.
    BatchSizes,
    /// Ordered ids with rows already in the inbox.
    Inbox,
    /// Random (UUIDv4) ids, empty and with rows already in the inbox.
    RandomIds,
    /// The default case with one batch in flight per partition (no pipelining), as many times
    /// as the default case, beside it.
    Pipelining,
    /// The partition counts.
    Partitions,
    /// The duplicate shares and the all-replay.
    Duplicates,
    /// Produce-to-commit latency at a steady load.
    Latency,
}

fn parse_duplicate_share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if (0.0..=0.5).contains(&share) => Ok(share),
        _ => Err(format!("expected a share between 0 and 0.5, got {text:?}")),
    }
}
