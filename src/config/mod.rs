//! The service's settings: the `run` and `migrate` flags and the typed settings tree they
//! produce, with the checks that name the offending key when a value is wrong.
//!
//! Every `run` flag can also come from an environment variable (`HISTORY_*`); flags win. Every
//! setting's names are in [`key`], every default in [`defaults`]; durations are written as
//! people write them (`100ms`, `40s`, `2m`, `12h`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

pub mod admin;
pub mod database;
pub mod defaults;
pub mod kafka;
pub mod key;
pub mod members;
pub mod recovery;
mod secret;

pub use kafka::{KafkaConnection, KafkaConnectionArgs, KafkaProperties};
pub use key::Key;
pub use secret::{Secret, parse_secret};

use crate::backoff::Backoff;
use crate::domain::offset_reset::ResetPolicy;
use crate::stuck::StuckRules;
use admin::{AdminArgs, AdminSettings};
use database::DatabaseSettings;

/// A duration as people write it: `100ms`, `40s`, `2m`, `1h 30m`. A number alone is refused:
/// its unit would be a guess.
/// `hold` or `continue` (`--offset-reset-policy`).
pub fn parse_reset_policy(text: &str) -> Result<ResetPolicy, String> {
    text.parse().map_err(|_| {
        let known: Vec<&str> = ResetPolicy::ALL.iter().map(|p| p.as_str()).collect();
        format!("`{text}` is not a policy: one of {}", known.join(", "))
    })
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|error| format!("{error} (write a duration with its unit, e.g. 500ms, 40s, 2m)"))
}

/// Where the Kafka topic is and which consumer group to join.
#[derive(Debug, Clone, Args)]
pub struct KafkaArgs {
    #[command(flatten)]
    pub connection: KafkaConnectionArgs,
    /// The topic of ticket status events.
    #[arg(long = key::TOPIC.long, env = key::TOPIC.env, default_value = defaults::TOPIC)]
    pub topic: String,
    /// The consumer group; run more instances with the same group to scale out.
    #[arg(long = key::GROUP.long, env = key::GROUP.env, default_value = defaults::GROUP)]
    pub group: String,
}

#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// PostgreSQL URL of the service's own database, e.g. postgres://user:pw@host/history.
    #[arg(long = key::DATABASE_URL.long, env = key::DATABASE_URL.env, hide_env_values = true,
          value_parser = parse_secret)]
    pub database_url: Secret,
    /// A file holding the database password (a trailing newline is ignored), e.g. a mounted
    /// secret; the URL then has none.
    #[arg(long = key::DATABASE_PASSWORD_FILE.long, env = key::DATABASE_PASSWORD_FILE.env,
          value_name = "PATH")]
    pub database_password_file: Option<PathBuf>,
}

impl MigrateArgs {
    /// The database to migrate, checked.
    pub fn database(&self) -> Result<crate::db::Database, ConfigError> {
        DatabaseSettings::from_flags(
            self.database_url.clone(),
            self.database_password_file.as_deref(),
        )?
        .database()
    }
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Static group membership (librdkafka's `group.instance.id`): this member's stable name,
    /// unique in the group, e.g. a StatefulSet pod's name. A member restarted within
    /// session.timeout.ms gets its partitions back without a rebalance; on shutdown it
    /// commits and stops without leaving the group.
    #[arg(long = key::GROUP_INSTANCE_ID.long, env = key::GROUP_INSTANCE_ID.env,
          value_name = "NAME")]
    pub group_instance_id: Option<String>,
    /// PostgreSQL URL of the service's own database, e.g. postgres://user:pw@host/history or
    /// `host=db dbname=history sslmode=verify-full sslrootcert=/ca.crt` (libpq's keys and
    /// meaning; docs/postgres-tls.md).
    #[arg(long = key::DATABASE_URL.long, env = key::DATABASE_URL.env, hide_env_values = true,
          value_parser = parse_secret)]
    pub database_url: Secret,
    /// A file holding the database password (a trailing newline is ignored), e.g. a mounted
    /// secret; the URL then has none.
    #[arg(long = key::DATABASE_PASSWORD_FILE.long, env = key::DATABASE_PASSWORD_FILE.env,
          value_name = "PATH")]
    pub database_password_file: Option<PathBuf>,
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// Knobs with sensible defaults.
#[derive(Debug, Clone, Args)]
pub struct TuningArgs {
    /// Unknown records a partition holds for retrying; at the bound it takes no new ones.
    #[arg(long = key::MAX_UNRESOLVED.long, env = key::MAX_UNRESOLVED.env,
          default_value_t = defaults::MAX_UNRESOLVED)]
    pub max_unresolved: usize,
    /// First retry delay of an Unknown record.
    #[arg(long = key::RETRY_INITIAL.long, env = key::RETRY_INITIAL.env,
          default_value = defaults::RETRY_INITIAL, value_parser = parse_duration)]
    pub retry_initial: Duration,
    /// Longest retry delay of an Unknown record.
    #[arg(long = key::RETRY_MAX.long, env = key::RETRY_MAX.env,
          default_value = defaults::RETRY_MAX, value_parser = parse_duration)]
    pub retry_max: Duration,
    /// How often moved watermarks are committed to Kafka. A partition that keeps up with its
    /// log (less than a batch waiting, nothing unresolved) is committed as its transactions
    /// end, at most every tenth of this (and of 1s).
    #[arg(long = key::COMMIT_INTERVAL.long, env = key::COMMIT_INTERVAL.env,
          default_value = defaults::COMMIT_INTERVAL, value_parser = parse_duration)]
    pub commit_interval: Duration,
    /// How long a revoked partition may take to drain; must be shorter than the group's
    /// session.timeout.ms.
    #[arg(long = key::DRAIN_TIMEOUT.long, env = key::DRAIN_TIMEOUT.env,
          default_value = defaults::DRAIN_TIMEOUT, value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Connections to PostgreSQL.
    #[arg(long = key::DB_POOL_SIZE.long, env = key::DB_POOL_SIZE.env,
          default_value_t = defaults::DB_POOL_SIZE)]
    pub db_pool_size: usize,
    /// Largest accepted record value in bytes; larger records are dead-lettered.
    #[arg(long = key::MAX_PAYLOAD_BYTES.long, env = key::MAX_PAYLOAD_BYTES.env,
          default_value_t = defaults::MAX_PAYLOAD_BYTES)]
    pub max_payload_bytes: usize,
    /// Records of a partition rejected by the database in a row that are dead-lettered
    /// (`rejected_by_database`); one more stops dead-lettering: the partition holds them as
    /// Unknown and is stuck until a record is stored again. 0: never dead-letter a rejection.
    #[arg(long = key::MAX_CONSECUTIVE_REJECTIONS.long, env = key::MAX_CONSECUTIVE_REJECTIONS.env,
          default_value_t = defaults::MAX_CONSECUTIVE_REJECTIONS)]
    pub max_consecutive_rejections: u32,
    /// What a partition whose committed or current offset is no longer in its log does (the
    /// records were deleted by retention or DeleteRecords, or the log ends before it): `hold`
    /// it, stuck, until an operator rewinds it, or `continue` from the log's start. Either way
    /// the gap is recorded in `offset_resets`. A partition the group never committed still
    /// starts at its earliest offset.
    #[arg(long = key::OFFSET_RESET_POLICY.long, env = key::OFFSET_RESET_POLICY.env,
          default_value = defaults::OFFSET_RESET_POLICY, value_parser = parse_reset_policy)]
    pub offset_reset_policy: ResetPolicy,
    /// Records a partition actor holds or has asked for (its window), and the records
    /// librdkafka prefetches for each partition beyond that (`queued.min.messages`).
    #[arg(long = key::PARTITION_QUEUE.long, env = key::PARTITION_QUEUE.env,
          default_value_t = defaults::PARTITION_QUEUE)]
    pub partition_queue: usize,
    /// KiB librdkafka prefetches for each assigned partition at most
    /// (`queued.max.messages.kbytes` and `max.partition.fetch.bytes`). A partition that takes
    /// no records (database down, operator pause) stops being fetched there. Bounds memory
    /// together with --partition-queue and --max-unresolved.
    #[arg(long = key::PARTITION_FETCH_KB.long, env = key::PARTITION_FETCH_KB.env,
          default_value_t = defaults::PARTITION_FETCH_KB)]
    pub partition_fetch_kb: usize,
    /// The longest one inbox transaction (or dead-letter insert) may take before its outcome
    /// counts as Unknown and it is retried.
    #[arg(long = key::WORK_TIMEOUT.long, env = key::WORK_TIMEOUT.env,
          default_value = defaults::WORK_TIMEOUT, value_parser = parse_duration)]
    pub work_timeout: Duration,
    /// Records resolved together in one inbox transaction (1: one transaction per record,
    /// exactly the contract's one-event path).
    #[arg(long = key::BATCH_SIZE.long, env = key::BATCH_SIZE.env,
          default_value_t = defaults::BATCH_SIZE)]
    pub batch_size: usize,
    /// How long a partition waits for a batch to fill once it has fewer records than
    /// `--batch-size` ready.
    #[arg(long = key::BATCH_LINGER.long, env = key::BATCH_LINGER.env,
          default_value = defaults::BATCH_LINGER, value_parser = parse_duration)]
    pub batch_linger: Duration,
    /// Batches of new records one partition runs at once: its next full batch goes to the
    /// database while the previous one commits (1: one transaction at a time). Outcomes still
    /// count in offset order.
    #[arg(long = key::BATCHES_IN_FLIGHT.long, env = key::BATCHES_IN_FLIGHT.env,
          default_value_t = defaults::BATCHES_IN_FLIGHT)]
    pub batches_in_flight: usize,
    /// Transactions of new records this member runs at once before a partition's next batch
    /// may join its running one (--batches-in-flight): at this many, each partition runs one
    /// at a time, and the database is not given more than it can work on. A partition's first
    /// batch is never held back by it.
    #[arg(long = key::TRANSACTIONS_IN_FLIGHT.long, env = key::TRANSACTIONS_IN_FLIGHT.env,
          default_value_t = defaults::TRANSACTIONS_IN_FLIGHT)]
    pub transactions_in_flight: usize,
    /// A partition whose oldest Unknown record is older than this is stuck.
    #[arg(long = key::STUCK_UNKNOWN.long, env = key::STUCK_UNKNOWN.env,
          default_value = defaults::STUCK_UNKNOWN, value_parser = parse_duration)]
    pub stuck_unknown: Duration,
    /// A partition whose watermark has not moved for this long while records wait is stuck.
    #[arg(long = key::STALL.long, env = key::STALL.env,
          default_value = defaults::STALL, value_parser = parse_duration)]
    pub stall: Duration,
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

    /// An error of the setting `key`.
    pub fn at(key: Key, message: impl Into<String>) -> Self {
        ConfigError::new(key.to_string(), message)
    }
}

/// The Kafka side of the settings.
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub brokers: String,
    pub topic: String,
    pub group: String,
    /// Static membership: this member's `group.instance.id` (`--group-instance-id`, or the
    /// property given as a `--kafka-option` or in the config file).
    pub group_instance_id: Option<String>,
    /// The operator's librdkafka properties (config file, security flags, `--kafka-option`s),
    /// applied over the service's defaults.
    pub options: KafkaProperties,
}

impl KafkaArgs {
    /// The checked Kafka settings: files read, properties merged ([`KafkaConnectionArgs`]).
    pub fn resolve(self) -> Result<KafkaSettings, ConfigError> {
        let connection = self.connection.resolve()?;
        Ok(KafkaSettings {
            brokers: connection.brokers,
            topic: self.topic,
            group: self.group,
            group_instance_id: connection
                .properties
                .get(GROUP_INSTANCE_PROPERTY)
                .map(str::to_owned),
            options: connection.properties,
        })
    }
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
        self.options.get(key)
    }

    /// How to reach the brokers, for the throwaway readers beside the member.
    pub fn connection(&self) -> KafkaConnection {
        KafkaConnection {
            brokers: self.brokers.clone(),
            properties: self.options.clone(),
        }
    }
}

/// Everything `run` needs, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub kafka: KafkaSettings,
    pub database: DatabaseSettings,
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
    /// Records rejected by the database in a row that may be dead-lettered.
    pub max_consecutive_rejections: u32,
    /// What a partition whose position left its log does (`--offset-reset-policy`).
    pub offset_reset_policy: ResetPolicy,
    pub partition_queue: usize,
    /// KiB librdkafka prefetches per partition (see `--partition-fetch-kb`).
    pub partition_fetch_kb: usize,
    pub work_timeout: Duration,
    pub batch_size: usize,
    pub batch_linger: Duration,
    pub batches_in_flight: usize,
    pub transactions_in_flight: usize,
    pub stuck: StuckRules,
}

impl Default for RuntimeSettings {
    /// What `run` uses when no flag is given ([`defaults`]).
    fn default() -> Self {
        use defaults::duration;
        RuntimeSettings {
            max_unresolved: defaults::MAX_UNRESOLVED,
            retry: Backoff::new(
                duration(defaults::RETRY_INITIAL),
                duration(defaults::RETRY_MAX),
            ),
            commit_interval: duration(defaults::COMMIT_INTERVAL),
            drain_timeout: duration(defaults::DRAIN_TIMEOUT),
            db_pool_size: defaults::DB_POOL_SIZE,
            max_payload_bytes: defaults::MAX_PAYLOAD_BYTES,
            max_consecutive_rejections: defaults::MAX_CONSECUTIVE_REJECTIONS,
            offset_reset_policy: ResetPolicy::Hold,
            partition_queue: defaults::PARTITION_QUEUE,
            partition_fetch_kb: defaults::PARTITION_FETCH_KB,
            work_timeout: duration(defaults::WORK_TIMEOUT),
            batch_size: defaults::BATCH_SIZE,
            batch_linger: duration(defaults::BATCH_LINGER),
            batches_in_flight: defaults::BATCHES_IN_FLIGHT,
            transactions_in_flight: defaults::TRANSACTIONS_IN_FLIGHT,
            stuck: StuckRules {
                unknown_age: duration(defaults::STUCK_UNKNOWN),
                stall: duration(defaults::STALL),
            },
        }
    }
}

impl RuntimeSettings {
    fn from_args(tuning: TuningArgs) -> RuntimeSettings {
        RuntimeSettings {
            max_unresolved: tuning.max_unresolved,
            retry: Backoff::new(tuning.retry_initial, tuning.retry_max),
            commit_interval: tuning.commit_interval,
            drain_timeout: tuning.drain_timeout,
            db_pool_size: tuning.db_pool_size,
            max_payload_bytes: tuning.max_payload_bytes,
            max_consecutive_rejections: tuning.max_consecutive_rejections,
            offset_reset_policy: tuning.offset_reset_policy,
            partition_queue: tuning.partition_queue,
            partition_fetch_kb: tuning.partition_fetch_kb,
            work_timeout: tuning.work_timeout,
            batch_size: tuning.batch_size,
            batch_linger: tuning.batch_linger,
            batches_in_flight: tuning.batches_in_flight,
            transactions_in_flight: tuning.transactions_in_flight,
            stuck: StuckRules {
                unknown_age: tuning.stuck_unknown,
                stall: tuning.stall,
            },
        }
    }
}

/// Refuses an empty value, naming its key.
fn not_empty(value: &str, key: Key) -> Result<(), ConfigError> {
    if value.trim().is_empty() {
        return Err(ConfigError::at(key, "must not be empty"));
    }
    Ok(())
}

/// librdkafka's name of the static member's id.
pub const GROUP_INSTANCE_PROPERTY: &str = "group.instance.id";

/// A group instance id the brokers accept: what Kafka checks in a JoinGroup (at most 249
/// characters of `a-z A-Z 0-9 . _ -`), so a wrong one stops the start instead of every join.
pub fn check_group_instance_id(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::at(key::GROUP_INSTANCE_ID, "must not be empty"));
    }
    if name.len() > 249 {
        return Err(ConfigError::at(
            key::GROUP_INSTANCE_ID,
            format!("{} characters: Kafka allows at most 249", name.len()),
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(ConfigError::at(
            key::GROUP_INSTANCE_ID,
            format!("{name:?} holds {bad:?}: Kafka allows only letters, digits, '.', '_' and '-'"),
        ));
    }
    Ok(())
}

/// A duration as errors show it.
fn shown(duration: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(duration)
}

impl Settings {
    /// Builds and checks the settings of `run`.
    pub fn from_run_args(args: RunArgs) -> Result<Settings, ConfigError> {
        let mut kafka = args.kafka.resolve()?;
        if let Some(name) = args.group_instance_id {
            if kafka.group_instance_id.is_some() {
                return Err(ConfigError::at(
                    key::GROUP_INSTANCE_ID,
                    format!(
                        "given twice: also as the librdkafka property {GROUP_INSTANCE_PROPERTY} \
                         (a --kafka-option or the config file); keep one"
                    ),
                ));
            }
            kafka.group_instance_id = Some(name);
        }
        if let Some(name) = &kafka.group_instance_id {
            check_group_instance_id(name)?;
        }
        let settings = Settings {
            kafka,
            database: DatabaseSettings::from_flags(
                args.database_url,
                args.database_password_file.as_deref(),
            )?,
            admin: AdminSettings::from_args(args.admin)?,
            runtime: RuntimeSettings::from_args(args.tuning),
        };
        settings.validate()?;
        Ok(settings)
    }

    /// Cross-field checks; each error names the key to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let kafka = &self.kafka;
        not_empty(&kafka.brokers, key::BROKERS)?;
        not_empty(&kafka.topic, key::TOPIC)?;
        not_empty(&kafka.group, key::GROUP)?;
        for (option, _) in kafka.options.iter() {
            if kafka::RESERVED_PROPERTIES.contains(&option) {
                return Err(ConfigError::new(
                    format!("--kafka-option {option}"),
                    "is set by the service itself (use --brokers/--group/--offset-reset-policy; \
                     offsets are committed only past resolved records)",
                ));
            }
        }
        self.database.validate()?;
        self.admin.validate()?;
        self.runtime.validate(kafka)
    }
}

impl RuntimeSettings {
    /// Checks that need no Kafka setting but the session timeout; each names its key.
    pub fn validate(&self, kafka: &KafkaSettings) -> Result<(), ConfigError> {
        let at_least_one = [
            (self.max_unresolved, key::MAX_UNRESOLVED),
            (self.db_pool_size, key::DB_POOL_SIZE),
            (self.partition_queue, key::PARTITION_QUEUE),
        ];
        for (value, key) in at_least_one {
            if value == 0 {
                return Err(ConfigError::at(key, "must be at least 1"));
            }
        }
        let not_zero = [
            (self.retry.initial, key::RETRY_INITIAL),
            (self.commit_interval, key::COMMIT_INTERVAL),
            (self.work_timeout, key::WORK_TIMEOUT),
            (self.stuck.unknown_age, key::STUCK_UNKNOWN),
            (self.stuck.stall, key::STALL),
        ];
        for (value, key) in not_zero {
            if value.is_zero() {
                return Err(ConfigError::at(key, "must be longer than zero"));
            }
        }
        self.retry.validate().map_err(|field| {
            let key = if field == "max" {
                key::RETRY_MAX
            } else {
                key::RETRY_INITIAL
            };
            ConfigError::at(
                key,
                format!("retry {field} is out of range (initial > 0, max >= initial)"),
            )
        })?;
        let session = kafka.session_timeout()?;
        if self.drain_timeout >= session {
            return Err(ConfigError::at(
                key::DRAIN_TIMEOUT,
                format!(
                    "{} must be shorter than session.timeout.ms ({}), or the group evicts this \
                     member while it drains",
                    shown(self.drain_timeout),
                    shown(session)
                ),
            ));
        }
        if self.partition_fetch_kb == 0 || self.partition_fetch_kb > 1_048_576 {
            return Err(ConfigError::at(
                key::PARTITION_FETCH_KB,
                "must be between 1 and 1048576",
            ));
        }
        if self.batch_size == 0 || self.batch_size > 10_000 {
            return Err(ConfigError::at(
                key::BATCH_SIZE,
                "must be between 1 and 10000",
            ));
        }
        if self.batches_in_flight == 0 || self.batches_in_flight > 8 {
            return Err(ConfigError::at(
                key::BATCHES_IN_FLIGHT,
                "must be between 1 and 8",
            ));
        }
        if self.transactions_in_flight == 0 || self.transactions_in_flight > 1024 {
            return Err(ConfigError::at(
                key::TRANSACTIONS_IN_FLIGHT,
                "must be between 1 and 1024",
            ));
        }
        if self.partition_queue < self.batch_size {
            return Err(ConfigError::at(
                key::PARTITION_QUEUE,
                format!(
                    "{} is smaller than {} {}: batches could never fill",
                    self.partition_queue,
                    key::BATCH_SIZE,
                    self.batch_size
                ),
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
        assert_eq!(settings.runtime.max_consecutive_rejections, 10);
        let none = run_args(&["--max-consecutive-rejections", "0"]).unwrap();
        assert_eq!(none.runtime.max_consecutive_rejections, 0);
    }

    #[test]
    fn the_offset_reset_policy_holds_by_default_and_librdkafkas_own_reset_is_refused() {
        let settings = run_args(&[]).unwrap();
        assert_eq!(settings.runtime.offset_reset_policy, ResetPolicy::Hold);
        let go_on = run_args(&["--offset-reset-policy", "continue"]).unwrap();
        assert_eq!(go_on.runtime.offset_reset_policy, ResetPolicy::Continue);
        let wrong = run_args(&["--offset-reset-policy", "earliest"]).unwrap_err();
        assert!(
            wrong.contains("--offset-reset-policy") && wrong.contains("continue, hold"),
            "{wrong}"
        );
        let theirs = run_args(&["--kafka-option", "auto.offset.reset=earliest"]).unwrap_err();
        assert!(
            theirs.contains("auto.offset.reset") && theirs.contains("--offset-reset-policy"),
            "{theirs}"
        );
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
            "--admin-session-idle",
            "1m",
            "--admin-session-max",
            "10m",
            "--admin-db-pool-size",
            "3",
            "--admin-statement-timeout",
            "500ms",
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
        assert!(error.contains("give the token one way only"), "{error}");
    }

    #[test]
    fn durations_are_written_with_their_unit() {
        let settings = run_args(&[
            "--commit-interval",
            "250ms",
            "--retry-max",
            "1m",
            "--stall",
            "1h 30m",
        ])
        .unwrap();
        assert_eq!(settings.runtime.commit_interval, Duration::from_millis(250));
        assert_eq!(settings.runtime.retry.max, Duration::from_secs(60));
        assert_eq!(settings.runtime.stuck.stall, Duration::from_secs(5400));
        let error = run_args(&["--commit-interval", "250"]).unwrap_err();
        assert!(error.contains("unit"), "{error}");
    }

    #[test]
    fn the_defaults_without_a_command_line_are_the_command_lines_defaults() {
        let parsed = run_args(&[]).unwrap();
        let built = RuntimeSettings::default();
        assert_eq!(format!("{:?}", parsed.runtime), format!("{built:?}"));
        assert_eq!(
            format!("{:?}", parsed.admin),
            format!("{:?}", AdminSettings::default())
        );
    }

    #[test]
    fn the_database_url_is_never_shown() {
        let argv = ["run", "--database-url", "postgres://u:hunter2@localhost/db"];
        let parsed = RunCommand::try_parse_from(argv).unwrap();
        let settings = Settings::from_run_args(parsed.run).unwrap();
        let shown = format!("{settings:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn kafka_options_are_key_value_pairs() {
        let settings = run_args(&[
            "--kafka-option",
            "session.timeout.ms=6000",
            "--kafka-option",
            "client.rack=a=b",
        ])
        .unwrap();
        assert_eq!(settings.kafka.option("session.timeout.ms"), Some("6000"));
        assert_eq!(settings.kafka.option("client.rack"), Some("a=b"));
        let error = run_args(&["--kafka-option", "novalue"]).unwrap_err();
        assert!(error.contains("--kafka-option"), "{error}");
        let error = run_args(&["--kafka-option", "no.such.property=1"]).unwrap_err();
        assert!(
            error.contains("--kafka-option no.such.property") && error.contains("no such property"),
            "{error}"
        );
    }

    #[test]
    fn the_group_instance_id_makes_a_static_member_from_the_flag_or_the_property() {
        assert_eq!(run_args(&[]).unwrap().kafka.group_instance_id, None);
        let flag = run_args(&["--group-instance-id", "history-0"]).unwrap();
        assert_eq!(flag.kafka.group_instance_id.as_deref(), Some("history-0"));
        let property = run_args(&["--kafka-option", "group.instance.id=history-1"]).unwrap();
        assert_eq!(
            property.kafka.group_instance_id.as_deref(),
            Some("history-1")
        );
    }

    #[test]
    fn a_bad_group_instance_id_names_the_flag() {
        let long = "a".repeat(250);
        let cases: [(&[&str], &str); 4] = [
            (&["--group-instance-id", ""], "must not be empty"),
            (&["--group-instance-id", "pod/0"], "holds '/'"),
            (&["--group-instance-id", &long], "at most 249"),
            (
                &[
                    "--group-instance-id",
                    "a",
                    "--kafka-option",
                    "group.instance.id=b",
                ],
                "given twice",
            ),
        ];
        for (argv, expected) in cases {
            let error = run_args(argv).unwrap_err();
            assert!(
                error.contains("--group-instance-id / HISTORY_KAFKA_GROUP_INSTANCE_ID")
                    && error.contains(expected),
                "{argv:?}: {error}"
            );
        }
    }

    #[test]
    fn a_database_url_mistake_names_the_flag_and_the_libpq_key() {
        let cases = [
            (
                "postgres://host:notaport/db",
                "--database-url / HISTORY_DATABASE_URL: the PostgreSQL client refused it",
            ),
            (
                "postgres://h/db?sslmode=verify-everything",
                "--database-url / HISTORY_DATABASE_URL: sslmode=verify-everything",
            ),
            (
                "host=h sslmode=verify-ca sslrootcert=/nonexistent/ca",
                "--database-url / HISTORY_DATABASE_URL: sslrootcert /nonexistent/ca",
            ),
        ];
        for (url, expected) in cases {
            let parsed = RunCommand::try_parse_from(["run", "--database-url", url]).unwrap();
            let error = Settings::from_run_args(parsed.run).unwrap_err().to_string();
            assert!(error.contains(expected), "{url}: {error}");
        }
    }

    #[test]
    fn each_bad_setting_names_its_key() {
        let cases: [(&[&str], &str); 14] = [
            (&["--admin-addr", "nowhere"], "--admin-addr"),
            (
                &["--kafka-option", "enable.auto.commit=true"],
                "enable.auto.commit",
            ),
            (&["--max-unresolved", "0"], "--max-unresolved"),
            (
                &[
                    "--drain-timeout",
                    "9s",
                    "--kafka-option",
                    "session.timeout.ms=6000",
                ],
                "--drain-timeout",
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
                &["--admin-session-idle", "10m", "--admin-session-max", "1m"],
                "--admin-session-max",
            ),
            (&["--admin-db-pool-size", "0"], "--admin-db-pool-size"),
            (
                &["--database-password-file", "/nonexistent/password"],
                "--database-password-file",
            ),
            (&["--commit-interval", "100"], "--commit-interval"),
            (&["--retry-initial", "0s"], "--retry-initial"),
        ];
        for (args, key) in cases {
            let error = run_args(args).expect_err(key);
            assert!(error.contains(key), "{args:?}: {error}");
        }
    }
}
