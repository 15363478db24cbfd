//! The flags of the recovery commands, `verify` and `rewind`, and the checked settings they
//! give. Kafka and database flags share the service's names and environment variables, so an
//! operator's `HISTORY_*` environment applies to them as it does to `run`.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use clap::Args;

use super::database::DatabaseSettings;
use super::{
    ConfigError, KafkaArgs, KafkaConnection, KafkaConnectionArgs, Secret, defaults, key, not_empty,
    parse_secret,
};
use crate::domain::parse_point_in_time;
use crate::error_text::chain;

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub kafka: KafkaConnectionArgs,
    /// The topic of ticket status events.
    #[arg(long = key::TOPIC.long, env = key::TOPIC.env, default_value = defaults::TOPIC)]
    pub topic: String,
    /// PostgreSQL URL of the service's own database.
    #[arg(long = key::DATABASE_URL.long, env = key::DATABASE_URL.env, hide_env_values = true,
          value_parser = parse_secret)]
    pub database_url: Secret,
    /// A file holding the database password (a trailing newline is ignored).
    #[arg(long = key::DATABASE_PASSWORD_FILE.long, env = key::DATABASE_PASSWORD_FILE.env,
          value_name = "PATH")]
    pub database_password_file: Option<PathBuf>,
    /// Read from the first record at or after this time instead of each partition's start:
    /// RFC 3339 with a zone (2026-12-02T10:00:00Z) or milliseconds since 1970.
    #[arg(long, value_name = "TIME")]
    pub from_datetime: Option<String>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// The service's --max-payload-bytes: larger records are dead-lettered, as the service does.
    #[arg(long = key::MAX_PAYLOAD_BYTES.long, env = key::MAX_PAYLOAD_BYTES.env,
          default_value_t = defaults::MAX_PAYLOAD_BYTES)]
    pub max_payload_bytes: usize,
}

/// What `verify` does, checked.
#[derive(Debug, Clone)]
pub struct VerifySettings {
    pub kafka: KafkaConnection,
    pub topic: String,
    pub database: DatabaseSettings,
    pub from: Option<DateTime<Utc>>,
    pub json: bool,
    pub max_payload_bytes: usize,
}

impl VerifySettings {
    pub fn from_args(args: VerifyArgs) -> Result<VerifySettings, ConfigError> {
        let kafka = args.kafka.resolve()?;
        not_empty(&args.topic, key::TOPIC)?;
        let database = DatabaseSettings::from_flags(
            args.database_url,
            args.database_password_file.as_deref(),
        )?;
        database.validate()?;
        let from = args
            .from_datetime
            .as_deref()
            .map(|text| point_in_time(text, "--from-datetime"))
            .transpose()?;
        if args.max_payload_bytes == 0 {
            return Err(ConfigError::at(
                key::MAX_PAYLOAD_BYTES,
                "must be at least 1",
            ));
        }
        Ok(VerifySettings {
            kafka,
            topic: args.topic,
            database,
            from,
            json: args.json,
            max_payload_bytes: args.max_payload_bytes,
        })
    }
}

#[derive(Debug, Clone, Args)]
pub struct RewindArgs {
    /// The topic and the group to rewind (which must have no active member).
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Move each partition's committed offset back to its first record at or after this time:
    /// RFC 3339 with a zone (2026-12-02T10:00:00Z) or milliseconds since 1970.
    #[arg(long, value_name = "TIME")]
    pub to_datetime: String,
    /// Only these partitions, e.g. `0,2,5` or `0-3` (default: every partition of the topic).
    #[arg(long, value_name = "LIST")]
    pub partitions: Option<String>,
    /// Show what would move, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// While the group still has members, look again every second for this long (e.g. `60s`)
    /// before refusing: members just stopped, or a static member the coordinator keeps until
    /// its session timeout. Default: refuse at once.
    #[arg(long, value_name = "DURATION", default_value = "0s",
          value_parser = super::parse_duration)]
    pub wait: std::time::Duration,
    /// PostgreSQL URL of the service's own database: the rewind is recorded in its audit
    /// table (admin_actions). Not needed with --dry-run.
    #[arg(long = key::DATABASE_URL.long, env = key::DATABASE_URL.env, hide_env_values = true,
          value_parser = parse_secret)]
    pub database_url: Option<Secret>,
    /// A file holding the database password (a trailing newline is ignored).
    #[arg(long = key::DATABASE_PASSWORD_FILE.long, env = key::DATABASE_PASSWORD_FILE.env,
          value_name = "PATH")]
    pub database_password_file: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// What `rewind` does, checked.
#[derive(Debug, Clone)]
pub struct RewindSettings {
    pub kafka: KafkaConnection,
    pub topic: String,
    pub group: String,
    pub to: DateTime<Utc>,
    /// `None`: every partition of the topic.
    pub partitions: Option<Vec<i32>>,
    pub dry_run: bool,
    /// How long a group that still has members is waited for (zero: refused at once).
    pub wait: std::time::Duration,
    /// Required unless `dry_run`.
    pub database: Option<DatabaseSettings>,
    pub json: bool,
}

impl RewindSettings {
    pub fn from_args(args: RewindArgs) -> Result<RewindSettings, ConfigError> {
        let kafka = args.kafka.resolve()?;
        not_empty(&kafka.topic, key::TOPIC)?;
        not_empty(&kafka.group, key::GROUP)?;
        let to = point_in_time(&args.to_datetime, "--to-datetime")?;
        let partitions = args
            .partitions
            .as_deref()
            .map(|text| parse_partitions(text).map_err(|e| ConfigError::new("--partitions", e)))
            .transpose()?;
        let database = match (args.database_url, args.dry_run) {
            (Some(url), _) => {
                let database =
                    DatabaseSettings::from_flags(url, args.database_password_file.as_deref())?;
                database.validate()?;
                Some(database)
            }
            (None, true) => None,
            (None, false) => {
                return Err(ConfigError::at(
                    key::DATABASE_URL,
                    "is required: the rewind is recorded in the service's audit table \
                     (admin_actions); only --dry-run goes without",
                ));
            }
        };
        Ok(RewindSettings {
            kafka: kafka.connection(),
            topic: kafka.topic,
            group: kafka.group,
            to,
            partitions,
            dry_run: args.dry_run,
            wait: args.wait,
            database,
            json: args.json,
        })
    }
}

fn point_in_time(text: &str, flag: &str) -> Result<DateTime<Utc>, ConfigError> {
    parse_point_in_time(text).map_err(|e| ConfigError::new(flag, chain(&e)))
}

/// `0,2,5`, `0-3` or a mix (`0-2,7`): sorted, each once.
pub fn parse_partitions(text: &str) -> Result<Vec<i32>, String> {
    let number = |part: &str| {
        part.trim()
            .parse::<i32>()
            .ok()
            .filter(|p| *p >= 0)
            .ok_or_else(|| format!("{part:?} is not a partition number (0, 1, ...)"))
    };
    let mut partitions = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((low, high)) => {
                let (low, high) = (number(low)?, number(high)?);
                if low > high {
                    return Err(format!("{part:?} is an empty range"));
                }
                partitions.extend(low..=high);
            }
            None => partitions.push(number(part)?),
        }
    }
    partitions.sort_unstable();
    partitions.dedup();
    Ok(partitions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    enum Command {
        Verify(VerifyArgs),
        Rewind(RewindArgs),
    }

    fn rewind(extra: &[&str]) -> Result<RewindSettings, String> {
        let mut argv = vec!["x", "rewind", "--to-datetime", "2026-12-02T10:00:00Z"];
        argv.extend_from_slice(extra);
        match Command::try_parse_from(argv).map_err(|e| e.to_string())? {
            Command::Rewind(args) => RewindSettings::from_args(args).map_err(|e| e.to_string()),
            Command::Verify(_) => unreachable!(),
        }
    }

    fn verify(extra: &[&str]) -> Result<VerifySettings, String> {
        let mut argv = vec!["x", "verify", "--database-url", "postgres://u@localhost/db"];
        argv.extend_from_slice(extra);
        match Command::try_parse_from(argv).map_err(|e| e.to_string())? {
            Command::Verify(args) => VerifySettings::from_args(args).map_err(|e| e.to_string()),
            Command::Rewind(_) => unreachable!(),
        }
    }

    #[test]
    fn partitions_are_numbers_and_ranges_each_once() {
        assert_eq!(parse_partitions("3,0-2,1"), Ok(vec![0, 1, 2, 3]));
        assert_eq!(parse_partitions("5"), Ok(vec![5]));
        for bad in ["", "a", "-1", "3-1", "1,,2"] {
            assert!(parse_partitions(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_rewind_needs_the_database_unless_it_is_a_dry_run() {
        let error = rewind(&[]).unwrap_err();
        assert!(error.contains("--database-url"), "{error}");
        assert!(error.contains("--dry-run"), "{error}");
        let dry = rewind(&["--dry-run"]).unwrap();
        assert!(dry.dry_run && dry.database.is_none());
        assert_eq!(dry.group, "history");
        let real = rewind(&["--database-url", "postgres://u@h/db", "--partitions", "0-1"]).unwrap();
        assert_eq!(real.partitions, Some(vec![0, 1]));
        assert_eq!(real.to.timestamp_millis(), 1_796_205_600_000);
    }

    #[test]
    fn each_bad_recovery_flag_is_named() {
        let cases: [(&[&str], &str); 4] = [
            (&["--dry-run", "--partitions", "x"], "--partitions"),
            (&["--dry-run", "--group", " "], "--group"),
            (
                &["--database-url", "postgres://h:port/db"],
                "--database-url",
            ),
            (&["--dry-run", "--topic", ""], "--topic"),
        ];
        for (args, key) in cases {
            let error = rewind(args).expect_err(key);
            assert!(error.contains(key), "{args:?}: {error}");
        }
        let error = verify(&["--from-datetime", "2026-12-02 10:00"]).unwrap_err();
        assert!(
            error.contains("--from-datetime") && error.contains("time zone"),
            "{error}"
        );
        let error = verify(&["--max-payload-bytes", "0"]).unwrap_err();
        assert!(error.contains("--max-payload-bytes"), "{error}");
        let settings = verify(&["--from-datetime", "1796292000000", "--json"]).unwrap();
        assert_eq!(
            settings.from.map(|t| t.timestamp_millis()),
            Some(1_796_292_000_000)
        );
        assert!(settings.json);
    }

    #[test]
    fn a_rewind_without_a_time_is_refused_by_the_command_line() {
        let error = Command::try_parse_from(["x", "rewind", "--dry-run"]).unwrap_err();
        assert!(error.to_string().contains("--to-datetime"), "{error}");
    }
}
