//! The HTML pages: view models (everything pre-formatted for display) and their askama
//! templates in `templates/`. askama escapes every value; only our own SVG is marked safe.

use askama::Template;
use chrono::{DateTime, Utc};

use super::queries::{AuditRow, DeadLetterRow, HistoryRow};
use super::sparkline;
use crate::actors::monitor::PartitionSummary;
use crate::actors::status::{BacklogEntry, GuardStatus, RecentOutcome};
use crate::domain::{ConnectionStatus, DuplicateCause, UnknownCause};
use crate::group::status::Status;
use crate::group::view::{GroupView, OwnerKind};

/// What every page's frame needs.
pub struct Layout {
    pub title: String,
    pub read_only: bool,
    pub signed_in: bool,
    pub csrf: String,
}

/// One partition in the overview table.
pub struct RowView {
    pub partition: i32,
    pub state: &'static str,
    pub reason: String,
    pub committed: String,
    pub watermark: String,
    /// The end of the partition, at least (see `PartitionView::end`).
    pub high_watermark: String,
    /// How old librdkafka's statistics of the end are ("0.4 s").
    pub high_watermark_age: String,
    pub lag: String,
    pub lag_seconds: String,
    pub in_flight: String,
    pub backlog: String,
    pub oldest_unknown: String,
    pub applied: u64,
    pub redelivery: u64,
    pub republish: u64,
    pub conflicting: u64,
    pub dead_letters: u64,
    pub trend: String,
}

fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "—".to_owned(), |v| v.to_string())
}

/// "3 s", "4 min 10 s", "2 h 5 min".
pub fn human_duration(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

impl RowView {
    pub fn new(summary: &PartitionSummary) -> RowView {
        let view = &summary.view;
        let actor = view.actor.as_ref();
        let counts = actor.map(|a| a.counts.clone()).unwrap_or_default();
        let age = view.observed.map(|o| {
            let millis = (Utc::now() - o.observed_at).num_milliseconds().max(0);
            format!("{:.1} s", millis as f64 / 1000.0)
        });
        RowView {
            partition: view.partition,
            state: summary.state.as_str(),
            reason: summary
                .state_reason
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            committed: or_dash(view.committed()),
            watermark: or_dash(view.checkpoint.as_ref().and_then(|c| c.watermark)),
            high_watermark: or_dash(summary.end),
            high_watermark_age: or_dash(age),
            lag: or_dash(summary.lag),
            lag_seconds: or_dash(summary.lag_seconds.map(|s| format!("{s:.1}"))),
            in_flight: or_dash(actor.map(|a| a.in_flight)),
            backlog: or_dash(actor.map(|a| a.unknown)),
            oldest_unknown: or_dash(summary.oldest_unknown_seconds.map(human_duration)),
            applied: counts.applied,
            redelivery: counts.duplicates_of(DuplicateCause::Redelivery),
            republish: counts.duplicates_of(DuplicateCause::Republish),
            conflicting: counts.duplicates_of(DuplicateCause::Conflicting),
            dead_letters: counts.dead_lettered,
            trend: sparkline::render(&summary.trend),
        }
    }
}

fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

pub struct AuditView {
    pub at: String,
    pub partition: String,
    pub offset: String,
    pub action: String,
    pub actor: String,
    pub result: String,
    pub detail: String,
}

impl AuditView {
    pub fn list(rows: Vec<AuditRow>) -> Vec<AuditView> {
        rows.into_iter()
            .map(|a| AuditView {
                at: time(a.at),
                partition: a
                    .partition
                    .map_or_else(|| "all".to_owned(), |p| p.to_string()),
                offset: a.offset.map(|o| o.to_string()).unwrap_or_default(),
                action: a.action,
                actor: a.actor,
                result: a.result,
                detail: a.detail.unwrap_or_default(),
            })
            .collect()
    }
}

/// A failing Kafka connection, shown above the partitions.
pub struct ConnectionView {
    /// `authentication`, `tls` or `unreachable`.
    pub cause: &'static str,
    pub what: String,
    pub fix: String,
    pub broker: String,
    /// librdkafka's last text.
    pub detail: String,
    pub failing_for: String,
    pub since: String,
    pub errors: u64,
}

impl ConnectionView {
    /// The view of `status`, if the connection fails.
    pub fn of(status: &ConnectionStatus) -> Option<ConnectionView> {
        let failing = status.failing.as_ref()?;
        let cause = &failing.cause;
        Some(ConnectionView {
            cause: cause.kind.as_str(),
            what: cause.what.clone(),
            fix: cause.fix.clone(),
            broker: or_dash(cause.broker.as_ref()),
            detail: cause.detail.clone(),
            failing_for: human_duration(
                (Utc::now() - failing.since).num_milliseconds() as f64 / 1000.0,
            ),
            since: time(failing.since),
            errors: failing.errors,
        })
    }
}

#[derive(Template)]
#[template(path = "overview.html")]
pub struct OverviewPage {
    pub layout: Layout,
    /// Set while the Kafka connection fails.
    pub connection: Option<ConnectionView>,
    pub group: String,
    pub topic: String,
    pub member_id: String,
    pub host: String,
    pub uptime: String,
    pub shutting_down: bool,
    pub rows: Vec<RowView>,
    pub audit: Vec<AuditView>,
    pub audit_error: String,
}

#[derive(Template)]
#[template(path = "partition_rows.html")]
pub struct PartitionRowsFragment {
    pub rows: Vec<RowView>,
}

/// An error's first line, and the whole text when there is more (shown on demand).
fn split_error(error: &str) -> (String, String) {
    const SHORT: usize = 240;
    let first = error.lines().next().unwrap_or_default();
    let line: String = first.chars().take(SHORT).collect();
    let more = line.len() < error.trim_end().len();
    let line = if line.len() < first.len() {
        format!("{line}…")
    } else {
        line
    };
    (
        line,
        if more {
            error.to_owned()
        } else {
            String::new()
        },
    )
}

/// What an operator can do about an Unknown record, by why it is Unknown.
pub fn remedy(cause: UnknownCause, guard: &GuardStatus) -> &'static str {
    match cause {
        UnknownCause::Unavailable => {
            "The database cannot be reached or timed out: the record is not the cause. Bring \
             the database back; the backlog is retried by itself, at once when it answers \
             (Retry now skips the wait)."
        }
        UnknownCause::Refused => {
            "The database refused the record with an error that may pass (a lock, a missing \
             table or privilege, a failed COMMIT). Fix the cause, then Retry now. If this record \
             can never be stored, dead-letter it (with a comment)."
        }
        UnknownCause::Rejected if guard.engaged => {
            "The database rejects records for good, more in a row than the dead-letter limit: \
             more likely a fault of the database (a migration, a trigger, a constraint) than of \
             the records, so dead-lettering stopped. Fix the database, then Retry now: the \
             records are stored and the partition goes on. Dead-letter a record only if it is \
             bad itself; replay dead letters from the Dead letters page once the cause is fixed."
        }
        UnknownCause::Rejected => {
            "The database rejected the record for good; it is dead-lettered on its next \
             attempt (Retry now), or dead-letter it yourself."
        }
    }
}

/// The partition's guard against mass dead-lettering in words, when there is something to say:
/// engaged, or a run of rejected records under way. The guard is the partition's, kept in the
/// database: its run may have begun under an earlier owner.
pub fn guard_text(guard: &GuardStatus) -> String {
    let (dead_lettered, limit) = (guard.dead_lettered, guard.limit);
    if guard.engaged {
        let since = guard.engaged_at.map(time).unwrap_or_else(|| "—".into());
        format!(
            "Dead-letter guard engaged since {since}: {dead_lettered} records in a row rejected by \
             the database were dead-lettered (the limit is {limit}, counted over every owner of \
             the partition); the next ones are held as Unknown until a record is stored."
        )
    } else if dead_lettered > 0 {
        format!(
            "Dead-letter guard: {dead_lettered} of {limit} records in a row rejected by the \
             database were dead-lettered; past {limit}, dead-lettering stops until a record is \
             stored."
        )
    } else if !guard.known {
        "Dead-letter guard: not read from the database yet.".into()
    } else {
        String::new()
    }
}

fn cause_label(cause: UnknownCause) -> &'static str {
    match cause {
        UnknownCause::Unavailable => "database unavailable",
        UnknownCause::Refused => "refused (may pass)",
        UnknownCause::Rejected => "rejected for good, held",
    }
}

pub struct BacklogView {
    pub offset: i64,
    pub event_id: String,
    pub attempts: u32,
    pub cause: &'static str,
    pub error_line: String,
    /// The whole error when it has more than its first line (empty otherwise).
    pub error_full: String,
    pub age: String,
    pub first_seen: String,
    pub next_retry: String,
    pub dead_letter_requested: bool,
}

impl From<&BacklogEntry> for BacklogView {
    fn from(entry: &BacklogEntry) -> Self {
        let (error_line, error_full) = split_error(&entry.last_error);
        let age = (Utc::now() - entry.first_seen).num_milliseconds().max(0) as f64 / 1000.0;
        BacklogView {
            offset: entry.offset,
            event_id: entry
                .event_id
                .clone()
                .unwrap_or_else(|| "(dead letter)".into()),
            attempts: entry.attempts,
            cause: cause_label(entry.cause),
            error_line,
            error_full,
            age: human_duration(age),
            first_seen: time(entry.first_seen),
            next_retry: time(entry.next_retry),
            dead_letter_requested: entry.dead_letter_requested,
        }
    }
}

/// The record that holds the partition's watermark, and what to do about it.
pub struct BlockingView {
    pub record: BacklogView,
    pub remedy: &'static str,
}

impl BlockingView {
    /// The lowest Unknown record: the committed offset cannot pass it.
    pub fn of(backlog: &[BacklogEntry], guard: &GuardStatus) -> Option<BlockingView> {
        let first = backlog.iter().min_by_key(|e| e.offset)?;
        Some(BlockingView {
            record: BacklogView::from(first),
            remedy: remedy(first.cause, guard),
        })
    }
}

pub struct RecentView {
    pub offset: i64,
    pub event_id: String,
    pub outcome: &'static str,
    pub duplicate: &'static str,
    pub detail: String,
    pub at: String,
}

impl From<&RecentOutcome> for RecentView {
    fn from(recent: &RecentOutcome) -> Self {
        RecentView {
            offset: recent.offset,
            event_id: recent.event_id.clone().unwrap_or_else(|| "—".into()),
            outcome: recent.outcome.as_str(),
            duplicate: recent.duplicate.map_or("", DuplicateCause::as_str),
            detail: recent.detail.clone().unwrap_or_default(),
            at: time(recent.at),
        }
    }
}

pub struct DeadLetterView {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: String,
    pub reason: String,
    pub message: String,
    /// The message's first line, and the whole message when it has more.
    pub message_line: String,
    pub message_full: String,
    pub payload_preview: String,
    pub payload_bytes: i64,
    pub at: String,
    pub state: String,
    /// When and by whom it was replayed, and what the replay said (empty: never).
    pub replayed: String,
}

impl DeadLetterView {
    pub fn list(rows: Vec<DeadLetterRow>) -> Vec<DeadLetterView> {
        rows.into_iter().map(DeadLetterView::from).collect()
    }
}

impl From<DeadLetterRow> for DeadLetterView {
    fn from(d: DeadLetterRow) -> Self {
        let replayed = match (d.replayed_at, &d.replayed_by) {
            (Some(at), Some(by)) => format!(
                "{} by {by}: {}",
                time(at),
                d.replay_message.as_deref().unwrap_or_default()
            ),
            _ => String::new(),
        };
        let (message_line, message_full) = split_error(&d.message);
        DeadLetterView {
            message_line,
            message_full,
            topic: d.topic,
            partition: d.partition,
            offset: d.offset,
            key: d.key.unwrap_or_default(),
            reason: d.reason,
            message: d.message,
            payload_preview: d.payload_preview,
            payload_bytes: d.payload_bytes,
            at: time(d.at),
            state: d.state,
            replayed,
        }
    }
}

/// Why the driver holds a partition, and what to do.
pub struct HeldView {
    pub offset: String,
    pub cause: String,
    pub detail: String,
    pub remedy: String,
    pub since: String,
}

impl HeldView {
    pub fn of(held: &crate::domain::Held) -> HeldView {
        use crate::domain::HeldCause;
        HeldView {
            offset: held
                .offset
                .map_or_else(|| "—".to_owned(), |o| o.to_string()),
            cause: match held.cause {
                HeldCause::Unreadable { unreadable } => {
                    format!("records librdkafka cannot read ({})", unreadable.as_str())
                }
                HeldCause::OffsetOutOfRange { .. } => {
                    "the position is not in the partition's log any more".to_owned()
                }
                HeldCause::Stopped => "fetching stopped".to_owned(),
            },
            detail: held.detail.clone(),
            remedy: held.remedy().to_owned(),
            since: time(held.since),
        }
    }
}

#[derive(Template)]
#[template(path = "partition.html")]
pub struct PartitionPage {
    pub layout: Layout,
    pub partition: i32,
    pub row: RowView,
    pub flash: String,
    /// When the snapshot was taken: every number of the page is from it.
    pub as_of: String,
    /// The guard against mass dead-lettering, when engaged or counting ([`guard_text`]).
    pub guard: String,
    /// Why nothing more of the partition is read, if it is held.
    pub held: Option<HeldView>,
    pub blocking: Option<BlockingView>,
    pub backlog: Vec<BacklogView>,
    pub recent: Vec<RecentView>,
    pub dead_letters: Vec<DeadLetterView>,
    pub dead_letters_error: String,
    pub audit: Vec<AuditView>,
    pub audit_error: String,
    /// Offsets reset because the position was no longer in the log (`offset_resets`).
    pub resets: Vec<ResetView>,
    pub resets_error: String,
}

/// One recorded offset reset, formatted.
pub struct ResetView {
    pub at: String,
    pub from: i64,
    /// Where reading went on, or `held`.
    pub to: String,
    pub log: String,
    /// Offsets passed over unread.
    pub gap: String,
    pub policy: String,
    pub resumed: String,
    pub reason: String,
}

impl ResetView {
    pub fn list(rows: Vec<crate::inbox::offset_resets::ResetRow>) -> Vec<ResetView> {
        let offset = |o: Option<i64>| o.map_or_else(|| "?".to_owned(), |o| o.to_string());
        rows.into_iter()
            .map(|r| ResetView {
                at: time(r.detected_at),
                from: r.from_offset,
                to: r
                    .to_offset
                    .map_or_else(|| "held".to_owned(), |o| o.to_string()),
                log: format!("{} to {}", offset(r.log_start), offset(r.log_end)),
                gap: match r.to_offset {
                    Some(_) => r.skipped().to_string(),
                    None => "not yet passed".to_owned(),
                },
                policy: r.policy.clone(),
                resumed: match (&r.resumed_by, r.resumed_at) {
                    (Some(by), Some(at)) => format!("{by}, {}", time(at)),
                    _ => String::new(),
                },
                reason: r.reason,
            })
            .collect()
    }
}

#[derive(Template)]
#[template(path = "dead_letters.html")]
pub struct DeadLettersPage {
    pub layout: Layout,
    pub partition: String,
    pub reason: String,
    pub reasons: Vec<String>,
    pub state: String,
    pub states: Vec<String>,
    /// The time filter as given (a browser's `datetime-local` value, or RFC 3339).
    pub since: String,
    pub until: String,
    /// What a replay just did (empty: nothing).
    pub flash: String,
    /// How many match, or "more than …" past the count's cap.
    pub total: String,
    pub rows: Vec<DeadLetterView>,
    /// Links (empty: none): the first page, the page before, the page after.
    pub newest: String,
    pub newer: String,
    pub older: String,
}

pub struct HistoryView {
    pub event_id: String,
    pub from_status: String,
    pub to_status: String,
    pub changed_at: String,
}

impl HistoryView {
    pub fn list(rows: Vec<HistoryRow>) -> Vec<HistoryView> {
        rows.into_iter()
            .map(|h| HistoryView {
                event_id: h.event_id,
                from_status: h.from_status,
                to_status: h.to_status,
                changed_at: time(h.changed_at),
            })
            .collect()
    }
}

/// A member of the group on the group page.
pub struct GroupMemberRow {
    pub id: String,
    /// `alive`, `gone` or `left`.
    pub state: &'static str,
    pub is_self: bool,
    pub host: String,
    pub pid: i32,
    pub version: String,
    pub heartbeat_age: String,
    pub admin_url: String,
    pub partitions: String,
    pub count: usize,
}

/// A member of the group that publishes nothing.
pub struct ForeignRow {
    pub client_id: String,
    pub host: String,
    pub partitions: String,
}

/// A partition on the group page.
pub struct GroupPartitionRow {
    pub partition: i32,
    pub status: &'static str,
    pub reason: String,
    /// `member`, `foreign`, `gone` or `nobody`.
    pub owner_kind: &'static str,
    pub owner_label: String,
    /// Its page on its owner's admin (empty: no owner of ours).
    pub owner_link: String,
    pub owned_here: bool,
    /// An action can be routed to its owner.
    pub actionable: bool,
    pub committed: String,
    pub end: String,
    pub lag: String,
    pub lag_seconds: String,
    pub unknown: String,
    pub watermark: String,
    pub paused: bool,
    /// The offset resets on record, in words (empty: none).
    pub gaps: String,
}

/// Partitions as "0-3, 7, 9".
pub fn partition_list(partitions: &[i32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < partitions.len() {
        let start = partitions[i];
        let mut end = start;
        while i + 1 < partitions.len() && partitions[i + 1] == end + 1 {
            i += 1;
            end = partitions[i];
        }
        parts.push(if end > start + 1 {
            format!("{start}-{end}")
        } else if end == start + 1 {
            format!("{start}, {end}")
        } else {
            start.to_string()
        });
        i += 1;
    }
    if parts.is_empty() {
        "—".to_owned()
    } else {
        parts.join(", ")
    }
}

impl GroupMemberRow {
    /// The admin URL without its scheme, for the link's text.
    pub fn admin_label(&self) -> &str {
        self.admin_url
            .strip_prefix("https://")
            .or_else(|| self.admin_url.strip_prefix("http://"))
            .unwrap_or(&self.admin_url)
    }

    pub fn list(view: &GroupView) -> Vec<GroupMemberRow> {
        view.members
            .iter()
            .map(|m| GroupMemberRow {
                id: m.id.clone(),
                state: match (m.alive, m.left) {
                    (true, _) => "alive",
                    (false, true) => "left",
                    (false, false) => "gone",
                },
                is_self: m.is_self,
                host: m.host.clone(),
                pid: m.pid,
                version: m.version.clone(),
                heartbeat_age: human_duration(m.heartbeat_age_seconds),
                admin_url: m.admin_url.clone().unwrap_or_default(),
                partitions: partition_list(&m.partitions),
                count: m.partitions.len(),
            })
            .collect()
    }
}

/// "2 offset resets, 40 offsets skipped, held", or nothing for a partition without any.
fn gaps_text(p: &crate::group::view::PartitionRow) -> String {
    if p.offset_resets == 0 {
        return String::new();
    }
    let resets = match p.offset_resets {
        1 => "1 offset reset".to_owned(),
        n => format!("{n} offset resets"),
    };
    let held = if p.reset_held {
        ", held until a rewind"
    } else {
        ""
    };
    format!("{resets}, {} offsets skipped{held}", p.offsets_skipped)
}

impl GroupPartitionRow {
    pub fn list(view: &GroupView) -> Vec<GroupPartitionRow> {
        view.partitions
            .iter()
            .map(|p| {
                let owned_here = p.owner.as_deref() == Some(view.self_id.as_str());
                let owner_link = match (&p.owner_url, owned_here) {
                    (_, true) => format!("/partitions/{}", p.partition),
                    (Some(url), false) => format!("{url}/partitions/{}", p.partition),
                    (None, false) => String::new(),
                };
                GroupPartitionRow {
                    partition: p.partition,
                    status: p.status.as_str(),
                    reason: p.reason.clone().unwrap_or_default(),
                    owner_kind: p.owner_kind.as_str(),
                    owner_label: if owned_here {
                        format!("{} (this member)", p.owner_label)
                    } else {
                        p.owner_label.clone()
                    },
                    owner_link,
                    owned_here,
                    actionable: p.owner_kind == OwnerKind::Member,
                    committed: or_dash(p.committed),
                    end: or_dash(p.end),
                    lag: or_dash(p.lag_records),
                    lag_seconds: or_dash(p.lag_seconds.map(|s| format!("{s:.1}"))),
                    unknown: or_dash(p.unknown),
                    watermark: or_dash(p.watermark),
                    paused: p.paused,
                    gaps: gaps_text(p),
                }
            })
            .collect()
    }
}

#[derive(Template)]
#[template(path = "group.html")]
pub struct GroupPage {
    pub layout: Layout,
    pub group: String,
    pub topic: String,
    pub self_id: String,
    /// Where the owners come from, in words.
    pub owners_from: String,
    pub notes: Vec<String>,
    /// "64 partitions: 1 stuck, 63 ok".
    pub summary: String,
    pub members: Vec<GroupMemberRow>,
    pub foreign: Vec<ForeignRow>,
    pub rows: Vec<GroupPartitionRow>,
    /// The answer to an action carried to another member, after its form.
    pub command: Option<CommandNotice>,
}

/// What became of an action carried to another member, as the group page shows it.
pub struct CommandNotice {
    pub id: i64,
    pub partition: String,
    pub action: String,
    pub owner: String,
    /// `done`, `refused`, `failed`, `expired`, or `waiting` (not answered yet).
    pub outcome: String,
    pub message: String,
    /// The rewind's confirmation: the time to confirm it for.
    pub confirm_to: Option<String>,
}

impl CommandNotice {
    pub fn of(asked: &crate::group::commands::Asked) -> CommandNotice {
        use crate::group::commands::Outcome;
        let (outcome, message) = match &asked.answer {
            Some(answer) => (answer.outcome.as_str().to_owned(), answer.message.clone()),
            None => (
                "waiting".to_owned(),
                "not answered yet; reload to see the owner's answer".to_owned(),
            ),
        };
        let confirm_to = asked
            .answer
            .as_ref()
            .filter(|a| asked.action == "rewind_plan" && a.outcome == Outcome::Done)
            .and_then(|a| a.body["plan"]["to"].as_str().map(str::to_owned));
        CommandNotice {
            id: asked.id,
            partition: asked.partition.map(|p| p.to_string()).unwrap_or_default(),
            action: asked.action.clone(),
            owner: asked.owner.clone(),
            outcome,
            message,
            confirm_to,
        }
    }

    /// The notice's colour.
    pub fn class(&self) -> &'static str {
        match self.outcome.as_str() {
            "done" | "waiting" => "info",
            _ => "error",
        }
    }
}

impl GroupPage {
    pub fn new(layout: Layout, view: &GroupView) -> GroupPage {
        let mut counts: Vec<(Status, usize)> = Vec::new();
        for row in &view.partitions {
            match counts.iter_mut().find(|(s, _)| *s == row.status) {
                Some((_, n)) => *n += 1,
                None => counts.push((row.status, 1)),
            }
        }
        counts.sort();
        let summary = format!(
            "{} partitions: {}",
            view.partitions.len(),
            counts
                .iter()
                .map(|(s, n)| format!("{n} {}", s.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        GroupPage {
            layout,
            group: view.group.clone(),
            topic: view.topic.clone(),
            self_id: view.self_id.clone(),
            owners_from: match (view.owners_from, &view.kafka_state) {
                ("kafka", Some(state)) => format!("Kafka's assignment (group {state})"),
                _ => "what the members publish".to_owned(),
            },
            notes: view.notes.clone(),
            summary,
            members: GroupMemberRow::list(view),
            foreign: view
                .foreign
                .iter()
                .map(|f| ForeignRow {
                    client_id: f.client_id.clone(),
                    host: f.host.clone(),
                    partitions: partition_list(&f.partitions),
                })
                .collect(),
            rows: GroupPartitionRow::list(view),
            command: None,
        }
    }
}

#[derive(Template)]
#[template(path = "group_rows.html")]
pub struct GroupRowsFragment {
    pub layout: Layout,
    pub rows: Vec<GroupPartitionRow>,
}

#[derive(Template)]
#[template(path = "group_members.html")]
pub struct GroupMembersFragment {
    pub members: Vec<GroupMemberRow>,
}

#[derive(Template)]
#[template(path = "ticket.html")]
pub struct TicketPage {
    pub layout: Layout,
    pub ticket_id: String,
    pub rows: Vec<HistoryView>,
}

#[derive(Template)]
#[template(path = "login.html")]
pub struct LoginPage {
    pub layout: Layout,
    pub message: String,
    pub next: String,
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    pub layout: Layout,
    pub status: u16,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_listed_as_runs() {
        assert_eq!(partition_list(&[]), "—");
        assert_eq!(partition_list(&[4]), "4");
        assert_eq!(partition_list(&[0, 1, 2, 3, 7, 9, 10]), "0-3, 7, 9, 10");
    }

    fn guard(engaged: bool, dead_lettered: u32, known: bool) -> GuardStatus {
        GuardStatus {
            engaged,
            consecutive: dead_lettered as usize,
            limit: 3,
            dead_lettered,
            engaged_at: engaged.then(|| "2026-10-03T08:00:00Z".parse().unwrap()),
            known,
        }
    }

    #[test]
    fn the_guard_is_described_when_engaged_or_counting_and_otherwise_not_at_all() {
        let engaged = guard_text(&guard(true, 3, true));
        assert!(
            engaged
                .starts_with("Dead-letter guard engaged since 2026-10-03 08:00:00 UTC: 3 records"),
            "{engaged}"
        );
        assert!(
            engaged.contains("every owner of the partition"),
            "{engaged}"
        );
        let counting = guard_text(&guard(false, 2, true));
        assert!(
            counting.starts_with("Dead-letter guard: 2 of 3 records"),
            "{counting}"
        );
        assert_eq!(guard_text(&guard(false, 0, true)), "");
        assert!(guard_text(&guard(false, 0, false)).contains("not read"));
    }

    #[test]
    fn durations_read_like_a_person_would_say_them() {
        assert_eq!(human_duration(3.4), "3 s");
        assert_eq!(human_duration(250.0), "4 min 10 s");
        assert_eq!(human_duration(7500.0), "2 h 5 min");
    }

    #[test]
    fn user_controlled_text_is_escaped() {
        let page = TicketPage {
            layout: Layout {
                title: "<script>alert(1)</script>".into(),
                read_only: true,
                signed_in: false,
                csrf: String::new(),
            },
            ticket_id: "<script>alert(2)</script>".into(),
            rows: vec![HistoryView {
                event_id: "<img src=x onerror=alert(3)>".into(),
                from_status: "a".into(),
                to_status: "b".into(),
                changed_at: "now".into(),
            }],
        };
        let html = page.render().unwrap();
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(!html.contains("<img src=x"), "{html}");
        assert!(
            html.contains("&#60;script&#62;alert(2)&#60;/script&#62;"),
            "{html}"
        );
    }
}
