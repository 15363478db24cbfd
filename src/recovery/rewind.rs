//! `history-consumer rewind`: moves a stopped group's committed offsets back to the first record
//! at or after a point in time, partition by partition, shows before and after, and records the
//! rewind in the audit table. The inbox makes the replay exact: what the database still has is
//! AlreadyApplied, what it lost is Applied again.
//!
//! Like Kafka's own reset tool it refuses while the group has active members: a member would
//! overwrite the rewound offsets with its own commits. The broker's description of the group is
//! asked first; a broker that does not describe groups (tansu, the librdkafka mock) leaves it
//! to the commit, which Kafka refuses from outside a group that has members.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::audit;
use crate::config::recovery::RewindSettings;
use crate::db::DbError;
use crate::domain::rewind::{Decision, TimeOffset, decide};
use crate::error_text::chain;
use crate::inbox::PgInboxError;
use crate::kafka::group::{GroupError, GroupOffsets, Membership};
use crate::kafka::reader::{Found, ReaderConfig, ReaderError, TopicReader};

/// The rewind was not carried out (or, for [`RewindError::Audit`], not recorded).
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("could not connect to the database to record the rewind")]
    Db(#[from] DbError),
    #[error("could not connect to the database to record the rewind")]
    Connect(#[source] PgInboxError),
    #[error("could not read the topic")]
    Reader(#[from] ReaderError),
    #[error("could not read or move the group's offsets")]
    Group(#[from] GroupError),
    #[error(
        "refusing to rewind group {group}: it has active members ({who}); stop every member \
         first, as Kafka's own reset tool requires (--wait DURATION waits for members that are \
         still leaving), or rewind a running member's partitions from its admin UI"
    )]
    Active { group: String, who: String },
    #[error(
        "the offsets of group {group} were moved, but the rewind could not be recorded in the \
         audit table"
    )]
    Audit {
        group: String,
        #[source]
        source: PgInboxError,
    },
    #[error("the kafka thread ended unexpectedly")]
    Thread(#[source] tokio::task::JoinError),
}

/// One partition's rewind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionRewind {
    pub partition: i32,
    /// The group's committed offset before.
    pub committed: Option<i64>,
    /// Where the first record at or after the point in time is.
    pub target: TimeOffset,
    /// `broker` (its offsetsForTimes answer held) or `read` (found by reading the partition).
    pub found_by: &'static str,
    pub decision: Decision,
    /// The committed offset afterwards, as the broker has it (`None` for a dry run).
    pub after: Option<i64>,
}

/// What the rewind did (or, for a dry run, would do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RewindReport {
    pub group: String,
    pub topic: String,
    pub to: DateTime<Utc>,
    pub dry_run: bool,
    pub membership: Membership,
    pub partitions: Vec<PartitionRewind>,
    /// Whether offsets were committed.
    pub committed: bool,
}

impl RewindReport {
    /// Partitions whose offset moves back.
    pub fn moved(&self) -> usize {
        self.partitions
            .iter()
            .filter(|p| matches!(p.decision, Decision::Rewind { .. }))
            .count()
    }

    /// Offsets read again in all.
    pub fn replayed(&self) -> i64 {
        self.partitions.iter().map(|p| p.decision.replayed()).sum()
    }

    /// The rewind for people: before and after per partition (pure).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let to = self.to.to_rfc3339_opts(SecondsFormat::Millis, true);
        let dry = if self.dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "rewind of group {} on topic {} to {to}{dry}",
            self.group, self.topic
        );
        let _ = writeln!(
            out,
            "{:>9} {:>12} {:>15} {:>8} {:>12} {:>9}  note",
            "partition", "committed", "first at/after", "found by", "after", "replays"
        );
        let offset = |o: Option<i64>| o.map_or_else(|| "-".to_owned(), |o| o.to_string());
        for p in &self.partitions {
            let target = match p.target {
                TimeOffset::At { offset } => offset.to_string(),
                TimeOffset::NoneAfter { .. } => "-".to_owned(),
            };
            let after = if self.dry_run {
                p.decision.after()
            } else {
                p.after
            };
            let note = match p.decision {
                Decision::Rewind { .. } if self.dry_run => "would move back".to_owned(),
                Decision::Rewind { .. } => "moved back".to_owned(),
                Decision::Keep { reason, .. } => format!("kept: {}", reason.describe()),
                Decision::PastGap { .. } => "reads on past a recorded offset reset".to_owned(),
            };
            let _ = writeln!(
                out,
                "{:>9} {:>12} {target:>15} {:>8} {:>12} {:>9}  {note}",
                p.partition,
                offset(p.committed),
                p.found_by,
                offset(after),
                p.decision.replayed()
            );
        }
        let verb = if self.dry_run { "would move" } else { "moved" };
        let _ = writeln!(
            out,
            "{verb} {} of {} partitions back; {} offsets to replay",
            self.moved(),
            self.partitions.len(),
            self.replayed()
        );
        out
    }

    /// The audit trail's rows: one per partition.
    fn audit_rows(&self) -> Vec<(i32, String)> {
        self.partitions
            .iter()
            .map(|p| {
                (
                    p.partition,
                    audit::result_text(Some(&p.decision), self.to, None, None),
                )
            })
            .collect()
    }
}

/// How often `--wait` looks at the group again.
const WAIT_POLL: Duration = Duration::from_secs(1);

/// Rewinds the group as `settings` say.
pub async fn run(settings: &RewindSettings) -> Result<RewindReport, RewindError> {
    // The audit table is checked before anything moves.
    let pool = match (&settings.database, settings.dry_run) {
        (Some(database), false) => {
            let pool = database.database()?.pool(1)?;
            drop(
                pool.get()
                    .await
                    .map_err(|e| RewindError::Connect(PgInboxError::Pool(e)))?,
            );
            Some(pool)
        }
        _ => None,
    };
    let deadline = std::time::Instant::now() + settings.wait;
    let mut said = None;
    let report = loop {
        let planned = settings.clone();
        let result = tokio::task::spawn_blocking(move || plan_and_commit(&planned))
            .await
            .map_err(RewindError::Thread)?;
        match result {
            Err(RewindError::Active { who, .. }) if std::time::Instant::now() < deadline => {
                if said.as_ref() != Some(&who) {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    tracing::info!(
                        group = %settings.group,
                        members = %who,
                        left = %humantime::format_duration(Duration::from_secs(left.as_secs())),
                        "the group still has members; waiting (--wait)"
                    );
                    said = Some(who);
                }
                tokio::time::sleep(WAIT_POLL).await;
            }
            other => break other?,
        }
    };
    if let (Some(pool), true) = (pool, report.committed) {
        audit::record(&pool, &actor(), &report.audit_rows())
            .await
            .map_err(|source| RewindError::Audit {
                group: settings.group.clone(),
                source,
            })?;
    }
    Ok(report)
}

/// The Kafka part, on a blocking thread: check the group, find the point in time, decide, and
/// commit unless it is a dry run.
fn plan_and_commit(settings: &RewindSettings) -> Result<RewindReport, RewindError> {
    let reader = TopicReader::open(&ReaderConfig {
        connection: settings.kafka.clone(),
        topic: settings.topic.clone(),
    })?;
    let partitions = match &settings.partitions {
        Some(wanted) => reader.check_partitions(wanted)?,
        None => reader.partitions()?,
    };
    let group = GroupOffsets::open(&settings.kafka, &settings.topic, &settings.group)?;
    let membership = group.membership();
    if let Membership::Active { state, members } = &membership {
        let names: Vec<String> = members
            .iter()
            .map(|m| format!("{} on {}", m.client_id, m.host))
            .collect();
        return Err(RewindError::Active {
            group: settings.group.clone(),
            who: format!("state {state}; {}", names.join(", ")),
        });
    }
    let committed = group.committed(&partitions)?;
    let found = reader.find_time(&partitions, settings.to)?;
    let mut rows: Vec<PartitionRewind> = partitions
        .iter()
        .filter_map(|&partition| {
            let &(target, how) = found.get(&partition)?;
            let committed = committed.get(&partition).copied().flatten();
            Some(PartitionRewind {
                partition,
                committed,
                target,
                found_by: match how {
                    Found::Broker => "broker",
                    Found::Read => "read",
                },
                decision: decide(committed, target),
                after: None,
            })
        })
        .collect();
    let moves: BTreeMap<i32, i64> = rows
        .iter()
        .filter_map(|row| match row.decision {
            Decision::Rewind { to, .. } => Some((row.partition, to)),
            Decision::Keep { .. } | Decision::PastGap { .. } => None,
        })
        .collect();
    let commit = !settings.dry_run && !moves.is_empty();
    if commit {
        group.commit(&moves).map_err(|error| match error {
            GroupError::Active(..) => RewindError::Active {
                group: settings.group.clone(),
                who: format!("the broker refused the commit: {}", chain(&error)),
            },
            other => RewindError::Group(other),
        })?;
    }
    if !settings.dry_run {
        let after = group.committed(&partitions)?;
        for row in &mut rows {
            row.after = after.get(&row.partition).copied().flatten();
        }
    }
    Ok(RewindReport {
        group: settings.group.clone(),
        topic: settings.topic.clone(),
        to: settings.to,
        dry_run: settings.dry_run,
        membership,
        partitions: rows,
        committed: commit,
    })
}

/// Who ran the command, for the audit trail.
fn actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    format!("rewind command by {user} on {host}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::rewind::Keep;

    fn report(dry_run: bool) -> RewindReport {
        let to = DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        RewindReport {
            group: "history".into(),
            topic: "tickets".into(),
            to,
            dry_run,
            membership: Membership::Empty,
            partitions: vec![
                PartitionRewind {
                    partition: 0,
                    committed: Some(120),
                    target: TimeOffset::At { offset: 80 },
                    found_by: "broker",
                    decision: Decision::Rewind { from: 120, to: 80 },
                    after: (!dry_run).then_some(80),
                },
                PartitionRewind {
                    partition: 1,
                    committed: Some(50),
                    target: TimeOffset::NoneAfter { end: 50 },
                    found_by: "read",
                    decision: Decision::Keep {
                        position: Some(50),
                        reason: Keep::NothingAfter,
                    },
                    after: (!dry_run).then_some(50),
                },
            ],
            committed: !dry_run,
        }
    }

    #[test]
    fn the_rewind_shows_before_and_after_per_partition() {
        let text = report(false).render();
        assert!(
            text.starts_with(
                "rewind of group history on topic tickets to 2026-12-02T10:00:00.000Z\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "        0          120              80   broker           80        40  moved back"
            ),
            "{text}"
        );
        assert!(
            text.contains("kept: no record at or after that time"),
            "{text}"
        );
        assert!(
            text.ends_with("moved 1 of 2 partitions back; 40 offsets to replay\n"),
            "{text}"
        );
        let dry = report(true).render();
        assert!(dry.contains("(dry run: nothing changed)"), "{dry}");
        assert!(dry.contains("would move back"), "{dry}");
    }

    #[test]
    fn every_partition_of_the_rewind_gets_an_audit_row() {
        let rows = report(false).audit_rows();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0, 0);
        assert!(rows[0].1.starts_with("ok: 120 -> 80"), "{}", rows[0].1);
        assert!(rows[1].1.starts_with("kept at 50"), "{}", rows[1].1);
    }
}
