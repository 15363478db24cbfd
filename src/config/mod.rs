//! The service's settings: the `run` and `migrate` flags and the typed settings tree they
//! produce, with the checks that name the offending key when a value is wrong.
//!
//! Every `run` flag can also come from an environment variable (`HISTORY_*`); flags win.

use std::time::Duration;

use clap::Args;

pub mod admin;
pub mod recovery;

use crate::backoff::Backoff;
use crate::stuck::StuckRules;
use admin::{AdminArgs, AdminSettings};

/// Where the Kafka topic is and which consumer group to join.
#[derive(Debug, Clone, Args)]
pub struct KafkaArgs {
    /// Kafka bootstrap servers, comma separated.
    #[arg(long, env = "HISTORY_KAFKA_BROKERS", default_value = "localhost:9092")]
    pub brokers: String,
    /// The topic of ticket status events.
    #[arg(long, env = "HISTORY_KAFKA_TOPIC", default_value = "tickets.status.v1")]
    pub topic: String,
    /// The consumer group; run more instances with the same group to scale out.
    #[arg(long, env = "HISTORY_KAFKA_GROUP", default_value = "history")]
    pub group: String,
    /// A librdkafka property as key=value (repeatable), e.g. `session.timeout.ms=10000`.
    #[arg(long = "kafka-option", value_name = "KEY=VALUE", value_parser = parse_kafka_option)]
    pub kafka_options: Vec<(String, String)>,
}

#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// PostgreSQL URL of the service's own database, e.g. postgres://user:pw@host/history.
    #[arg(long, env = "HISTORY_DATABASE_URL")]
    pub database_url: String,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// PostgreSQL URL of the service's own database, e.g. postgres://user:pw@host/history.
    #[arg(long, env = "HISTORY_DATABASE_URL")]
    pub database_url: String,
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// Knobs with sensible defaults.
#[derive(Debug, Clone, Args)]
pub struct TuningArgs {
    /// Unresolved (Unknown) records a partition may hold before it is paused at the consumer.
    #[arg(long, env = "HISTORY_MAX_UNRESOLVED", default_value_t = 1000)]
    pub max_unresolved: usize,
    /// First retry delay of an Unknown record, in milliseconds.
    #[arg(long, env = "HISTORY_RETRY_INITIAL_MS", default_value_t = 100)]
    pub retry_initial_ms: u64,
    /// Longest retry delay of an Unknown record, in milliseconds.
    #[arg(long, env = "HISTORY_RETRY_MAX_MS", default_value_t = 10_000)]
    pub retry_max_ms: u64,
    /// How often moved watermarks are committed to Kafka, in milliseconds.
    #[arg(long, env = "HISTORY_COMMIT_INTERVAL_MS", default_value_t = 1000)]
    pub commit_interval_ms: u64,
    /// How long a revoked partition may take to drain, in milliseconds; must be shorter than
    /// the group's session.timeout.ms.
    #[arg(long, env = "HISTORY_DRAIN_TIMEOUT_MS", default_value_t = 5000)]
    pub drain_timeout_ms: u64,
    /// Connections to PostgreSQL.
    #[arg(long, env = "HISTORY_DB_POOL_SIZE", default_value_t = 16)]
    pub db_pool_size: usize,
    /// Largest accepted record value in bytes; larger records are dead-lettered.
    #[arg(long, env = "HISTORY_MAX_PAYLOAD_BYTES", default_value_t = 256 * 1024)]
    pub max_payload_bytes: usize,
    /// Records a partition actor holds or has asked for (its window), and the records
    /// librdkafka prefetches for each partition beyond that (`queued.min.messages`).
    #[arg(long, env = "HISTORY_PARTITION_QUEUE", default_value_t = 1024)]
    pub partition_queue: usize,
    /// KiB librdkafka prefetches for each assigned partition at most
    /// (`queued.max.messages.kbytes` and `max.partition.fetch.bytes`). A partition that takes
    /// no records (database down, operator pause) stops being fetched there. Bounds memory
    /// together with --partition-queue and --max-unresolved.
    #[arg(long, env = "HISTORY_PARTITION_FETCH_KB", default_value_t = 512)]
    pub partition_fetch_kb: usize,
    /// The longest one inbox transaction (or dead-letter insert) may take before its outcome
    /// counts as Unknown and it is retried, in milliseconds.
    #[arg(long, env = "HISTORY_WORK_TIMEOUT_MS", default_value_t = 30_000)]
    pub work_timeout_ms: u64,
    /// Records resolved together in one inbox transaction (1: one transaction per record,
    /// exactly the SPEC §4 contract).
    #[arg(long, env = "HISTORY_BATCH_SIZE", default_value_t = 256)]
    pub batch_size: usize,
    /// How long a partition waits for a batch to fill once it has fewer records than
    /// `--batch-size` ready, in milliseconds.
    #[arg(long, env = "HISTORY_BATCH_LINGER_MS", default_value_t = 2)]
    pub batch_linger_ms: u64,
    /// A partition whose oldest Unknown record is older than this (seconds) is stuck.
    #[arg(long, env = "HISTORY_STUCK_UNKNOWN_SECS", default_value_t = 60)]
    pub stuck_unknown_secs: u64,
    /// A partition whose watermark has not moved for this long (seconds) while records wait
    /// is stuck.
    #[arg(long, env = "HISTORY_STALL_SECS", default_value_t = 120)]
    pub stall_secs: u64,
}

pub(crate) fn parse_kafka_option(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// A setting is invalid; the message names the key (flag and environment variable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// librdkafka properties the service owns: changing them would break the offset contract.
const RESERVED_KAFKA_OPTIONS: [&str; 4] = [
    "enable.auto.commit",
    "enable.auto.offset.store",
    "group.id",
    "bootstrap.servers",
];

/// The Kafka side of the settings.
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub brokers: String,
    pub topic: String,
    pub group: String,
    /// Extra librdkafka properties, applied over the service's defaults.
    pub options: Vec<(String, String)>,
}

impl KafkaSettings {
    /// The group's session timeout: the user's `session.timeout.ms`, else librdkafka's default.
    pub fn session_timeout(&self) -> Result<Duration, ConfigError> {
        match self.option("session.timeout.ms") {
            None => Ok(Duration::from_millis(45_000)),
            Some(text) => text.parse().map(Duration::from_millis).map_err(|_| {
                ConfigError::new(
                    "--kafka-option session.timeout.ms",
                    format!("{text:?} is not a number of milliseconds"),
                )
            }),
        }
    }

    /// The last value given for a librdkafka property.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Everything `run` needs, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub kafka: KafkaSettings,
    pub database_url: String,
    pub admin: AdminSettings,
    pub runtime: RuntimeSettings,
}

/// How partitions are processed and checkpointed.
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    pub max_unresolved: usize,
    pub retry: Backoff,
    pub commit_interval: Duration,
    pub drain_timeout: Duration,
    pub db_pool_size: usize,
    pub max_payload_bytes: usize,
    pub partition_queue: usize,
    /// KiB librdkafka prefetches per partition (see `--partition-fetch-kb`).
    pub partition_fetch_kb: usize,
    pub work_timeout: Duration,
    pub batch_size: usize,
    pub batch_linger: Duration,
    pub stuck: StuckRules,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            max_unresolved: 1000,
            retry: Backoff {
                max: Duration::from_secs(10),
                ..Backoff::default()
            },
            commit_interval: Duration::from_secs(1),
            drain_timeout: Duration::from_secs(5),
            db_pool_size: 16,
            max_payload_bytes: 256 * 1024,
            partition_queue: 1024,
            partition_fetch_kb: 512,
            work_timeout: Duration::from_secs(30),
            batch_size: 256,
            batch_linger: Duration::from_millis(2),
            stuck: StuckRules::default(),
        }
    }
}

impl Settings {
    /// Builds and checks the settings of `run`.
    pub fn from_run_args(args: RunArgs) -> Result<Settings, ConfigError> {
        let kafka = KafkaSettings {
            brokers: args.kafka.brokers,
            topic: args.kafka.topic,
            group: args.kafka.group,
            options: args.kafka.kafka_options,
        };
        let tuning = args.tuning;
        let settings = Settings {
            kafka,
            database_url: args.database_url,
            admin: AdminSettings::from_args(args.admin)?,
            runtime: RuntimeSettings {
                max_unresolved: tuning.max_unresolved,
                retry: Backoff {
                    initial: Duration::from_millis(tuning.retry_initial_ms),
                    max: Duration::from_millis(tuning.retry_max_ms),
                    ..Backoff::default()
                },
                commit_interval: Duration::from_millis(tuning.commit_interval_ms),
                drain_timeout: Duration::from_millis(tuning.drain_timeout_ms),
                db_pool_size: tuning.db_pool_size,
                max_payload_bytes: tuning.max_payload_bytes,
                partition_queue: tuning.partition_queue,
                partition_fetch_kb: tuning.partition_fetch_kb,
                work_timeout: Duration::from_millis(tuning.work_timeout_ms),
                batch_size: tuning.batch_size,
                batch_linger: Duration::from_millis(tuning.batch_linger_ms),
                stuck: StuckRules {
                    unknown_age: Duration::from_secs(tuning.stuck_unknown_secs),
                    stall: Duration::from_secs(tuning.stall_secs),
                },
            },
        };
        settings.validate()?;
        Ok(settings)
    }

    /// Cross-field checks; each error names the key to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let kafka = &self.kafka;
        if kafka.brokers.trim().is_empty() {
            return Err(ConfigError::new(
                "--brokers / HISTORY_KAFKA_BROKERS",
                "must not be empty",
            ));
        }
        if kafka.topic.trim().is_empty() {
            return Err(ConfigError::new(
                "--topic / HISTORY_KAFKA_TOPIC",
                "must not be empty",
            ));
        }
        if kafka.group.trim().is_empty() {
            return Err(ConfigError::new(
                "--group / HISTORY_KAFKA_GROUP",
                "must not be empty",
            ));
        }
        for (key, _) in &kafka.options {
            if RESERVED_KAFKA_OPTIONS.contains(&key.as_str()) {
                return Err(ConfigError::new(
                    format!("--kafka-option {key}"),
                    "is set by the service itself (use --brokers/--group; offsets are committed \
                     only past resolved records)",
                ));
            }
        }
        if self.database_url.trim().is_empty() {
            return Err(ConfigError::new(
                "--database-url / HISTORY_DATABASE_URL",
                "must not be empty",
            ));
        }
        crate::db::client_config(&self.database_url).map_err(|e| {
            ConfigError::new(
                "--database-url / HISTORY_DATABASE_URL",
                crate::error_text::chain(&e),
            )
        })?;
        self.admin.validate()?;
        let rt = &self.runtime;
        if rt.max_unresolved == 0 {
            return Err(ConfigError::new(
                "--max-unresolved / HISTORY_MAX_UNRESOLVED",
                "must be at least 1",
            ));
        }
        rt.retry.validate().map_err(|field| {
            let key = match field {
                "max" => "--retry-max-ms / HISTORY_RETRY_MAX_MS",
                _ => "--retry-initial-ms / HISTORY_RETRY_INITIAL_MS",
            };
            ConfigError::new(
                key,
                format!("retry {field} is out of range (initial > 0, max >= initial)"),
            )
        })?;
        if rt.commit_interval.is_zero() {
            return Err(ConfigError::new(
                "--commit-interval-ms / HISTORY_COMMIT_INTERVAL_MS",
                "must be at least 1",
            ));
        }
        let session = kafka.session_timeout()?;
        if rt.drain_timeout >= session {
            return Err(ConfigError::new(
                "--drain-timeout-ms / HISTORY_DRAIN_TIMEOUT_MS",
                format!(
                    "{} ms must be shorter than session.timeout.ms ({} ms), or the group evicts \
                     this member while it drains",
                    rt.drain_timeout.as_millis(),
                    session.as_millis()
                ),
            ));
        }
        if rt.db_pool_size == 0 {
            return Err(ConfigError::new(
                "--db-pool-size / HISTORY_DB_POOL_SIZE",
                "must be at least 1",
            ));
        }
        if rt.partition_fetch_kb == 0 || rt.partition_fetch_kb > 1_048_576 {
            return Err(ConfigError::new(
                "--partition-fetch-kb / HISTORY_PARTITION_FETCH_KB",
                "must be between 1 and 1048576",
            ));
        }
        if rt.work_timeout.is_zero() {
            return Err(ConfigError::new(
                "--work-timeout-ms / HISTORY_WORK_TIMEOUT_MS",
                "must be at least 1",
            ));
        }
        if rt.batch_size == 0 || rt.batch_size > 10_000 {
            return Err(ConfigError::new(
                "--batch-size / HISTORY_BATCH_SIZE",
                "must be between 1 and 10000",
            ));
        }
        if rt.partition_queue < rt.batch_size {
            return Err(ConfigError::new(
                "--partition-queue / HISTORY_PARTITION_QUEUE",
                format!(
                    "{} is smaller than --batch-size {}: batches could never fill",
                    rt.partition_queue, rt.batch_size
                ),
            ));
        }
        if rt.stuck.unknown_age.is_zero() {
            return Err(ConfigError::new(
                "--stuck-unknown-secs / HISTORY_STUCK_UNKNOWN_SECS",
                "must be at least 1",
            ));
        }
        if rt.stuck.stall.is_zero() {
            return Err(ConfigError::new(
                "--stall-secs / HISTORY_STALL_SECS",
                "must be at least 1",
            ));
        }
        if rt.partition_queue == 0 {
            return Err(ConfigError::new(
                "--partition-queue / HISTORY_PARTITION_QUEUE",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct RunCommand {
        #[command(flatten)]
        run: RunArgs,
    }

    fn run_args(extra: &[&str]) -> Result<Settings, String> {
        let mut argv = vec!["run", "--database-url", "postgres://u@localhost/db"];
        argv.extend_from_slice(extra);
        let parsed = RunCommand::try_parse_from(argv).map_err(|e| e.to_string())?;
        Settings::from_run_args(parsed.run).map_err(|e| e.to_string())
    }

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let settings = run_args(&[]).unwrap();
        assert_eq!(settings.kafka.brokers, "localhost:9092");
        assert_eq!(settings.kafka.topic, "tickets.status.v1");
        assert_eq!(settings.kafka.group, "history");
        assert_eq!(settings.admin.addr.to_string(), "127.0.0.1:8080");
        assert_eq!(settings.admin.metrics_addr, None);
        assert!(settings.admin.token.is_none());
        assert!(!settings.admin.read_auth);
        assert!(!settings.admin.secure_cookie);
    }

    #[test]
    fn the_admin_flags_reach_the_settings() {
        let settings = run_args(&[
            "--admin-addr",
            "0.0.0.0:8080",
            "--metrics-addr",
            "0.0.0.0:9100",
            "--admin-token",
            "0123456789abcdef",
            "--admin-read-auth",
            "--admin-secure-cookie",
            "--admin-session-idle-secs",
            "60",
            "--admin-session-max-secs",
            "600",
            "--admin-db-pool-size",
            "3",
            "--admin-statement-timeout-ms",
            "500",
        ])
        .unwrap();
        let admin = &settings.admin;
        assert_eq!(
            admin.separate_metrics_addr(),
            Some(([0, 0, 0, 0], 9100).into())
        );
        assert_eq!(
            admin.token.as_ref().map(|t| t.expose()),
            Some("0123456789abcdef")
        );
        assert!(admin.read_auth && admin.secure_cookie);
        assert_eq!(admin.session_idle, Duration::from_secs(60));
        assert_eq!(admin.session_max, Duration::from_secs(600));
        assert_eq!(admin.db_pool_size, 3);
        assert_eq!(admin.statement_timeout, Duration::from_millis(500));
        let shown = format!("{settings:?}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
    }

    #[test]
    fn the_token_is_given_one_way_only() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "0123456789abcdef\n").unwrap();
        let path = file.path().to_str().unwrap();
        let settings = run_args(&["--admin-token-file", path]).unwrap();
        assert_eq!(
            settings.admin.token.as_ref().map(|t| t.expose()),
            Some("0123456789abcdef")
        );
        let both = run_args(&[
            "--admin-token-file",
            path,
            "--admin-token",
            "0123456789abcdef",
        ]);
        let error = both.unwrap_err();
        assert!(error.contains("--admin-token"), "{error}");
    }

    #[test]
    fn kafka_options_are_key_value_pairs() {
        let settings = run_args(&[
            "--kafka-option",
            "session.timeout.ms=6000",
            "--kafka-option",
            "a=b=c",
        ])
        .unwrap();
        assert_eq!(settings.kafka.option("session.timeout.ms"), Some("6000"));
        assert_eq!(settings.kafka.option("a"), Some("b=c"));
        let error = run_args(&["--kafka-option", "novalue"]).unwrap_err();
        assert!(error.contains("--kafka-option"), "{error}");
    }

    #[test]
    fn each_bad_setting_names_its_key() {
        let cases: [(&[&str], &str); 12] = [
            (&["--admin-addr", "nowhere"], "--admin-addr"),
            (
                &["--kafka-option", "enable.auto.commit=true"],
                "enable.auto.commit",
            ),
            (&["--max-unresolved", "0"], "--max-unresolved"),
            (
                &[
                    "--drain-timeout-ms",
                    "9000",
                    "--kafka-option",
                    "session.timeout.ms=6000",
                ],
                "--drain-timeout-ms",
            ),
            (
                &["--kafka-option", "session.timeout.ms=soon"],
                "session.timeout.ms",
            ),
            (&["--admin-token", "short"], "--admin-token"),
            (&["--admin-token", "fifteen-chars-x"], "--admin-token"),
            (&["--admin-read-auth"], "--admin-read-auth"),
            (
                &["--admin-token-file", "/nonexistent/admin-token"],
                "--admin-token-file",
            ),
            (
                &[
                    "--admin-session-idle-secs",
                    "600",
                    "--admin-session-max-secs",
                    "60",
                ],
                "--admin-session-max-secs",
            ),
            (&["--admin-db-pool-size", "0"], "--admin-db-pool-size"),
            (
                &["--database-url", "postgres://host:notaport/db"],
                "--database-url",
            ),
        ];
        for (args, key) in cases {
            let error = run_args(args).expect_err(key);
            assert!(error.contains(key), "{args:?}: {error}");
        }
    }
}
