//! The whole group on one page (pure): the members as they publish themselves, every partition
//! of the topic with its owner, offsets, lag and status, worst first, from the members' rows and
//! what Kafka tells ([`super::probe::KafkaView`]).
//!
//! Owners come from Kafka's description of the group (DescribeGroups, each member's assignment
//! decoded) while the group is stable: a Kafka member is one of ours when its member id or client
//! id is one a member published; otherwise it is a foreign member (another tool in the group,
//! publishing nothing). A partition whose owner is one of ours that is gone (no heartbeat for
//! `--member-gone-after`) has no owner. When Kafka does not describe the group (a broker without
//! DescribeGroups) or the group is rebalancing, owners are taken from what the live members
//! publish.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::members::{MemberRow, PartitionReport};
use super::probe::KafkaView;
use super::status::{Consumer, Judged, Status, judge};
use crate::kafka::group::AssignedMember;

/// How a partition is owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum OwnerKind {
    /// A live member of ours.
    Member,
    /// A member of the group that publishes nothing.
    Foreign,
    /// Its owner is a member of ours that is gone: nobody consumes it.
    Gone,
    /// Nobody.
    Nobody,
}

impl OwnerKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A member of ours, as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberView {
    pub id: String,
    pub alive: bool,
    /// It left the group gracefully.
    pub left: bool,
    /// This is the member answering.
    pub is_self: bool,
    pub host: String,
    pub pid: i32,
    pub version: String,
    pub heartbeat_age_seconds: f64,
    pub admin_url: Option<String>,
    pub started_at: DateTime<Utc>,
    pub client_id: String,
    pub kafka_member_id: Option<String>,
    /// The partitions it owns in this view.
    pub partitions: Vec<i32>,
}

/// A member of the group that publishes nothing, as Kafka describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForeignView {
    pub member_id: String,
    pub client_id: String,
    pub host: String,
    pub partitions: Vec<i32>,
}

/// One partition of the topic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionRow {
    pub partition: i32,
    /// The member of ours that owns it (`None`: nobody, a foreign member, or a gone one).
    pub owner: Option<String>,
    pub owner_kind: OwnerKind,
    /// Who owns it in words: a member's id, a foreign member's client id, the gone member.
    pub owner_label: String,
    /// The owner's admin URL, for a link.
    pub owner_url: Option<String>,
    /// The group's committed offset (Kafka's; the owner's when Kafka did not answer).
    pub committed: Option<i64>,
    pub end: Option<i64>,
    pub lag_records: Option<i64>,
    pub lag_seconds: Option<f64>,
    pub status: Status,
    pub reason: Option<String>,
    /// What the owner reports (a member of ours only).
    pub watermark: Option<i64>,
    pub unknown: Option<i32>,
    pub paused: bool,
    pub guard_engaged: bool,
    /// The owner's count of the times it was given the partition (a routed command carries it).
    pub generation: Option<i64>,
    /// Offset resets on record for the partition (`offset_resets`: its position left the log).
    pub offset_resets: u32,
    /// Offsets those resets passed over without reading them.
    pub offsets_skipped: i64,
    /// A reset holds the partition until an operator's rewind.
    pub reset_held: bool,
}

impl PartitionRow {
    /// Counts `resets` (the topic's, any partition) into the rows of their partitions.
    pub fn count_resets(
        rows: &mut [PartitionRow],
        resets: &[crate::inbox::offset_resets::ResetRow],
    ) {
        for reset in resets {
            if let Some(row) = rows.iter_mut().find(|r| r.partition == reset.partition) {
                row.offset_resets += 1;
                row.offsets_skipped += reset.skipped();
                row.reset_held |= reset.to_offset.is_none();
            }
        }
    }
}

/// The group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupView {
    /// The member answering.
    #[serde(rename = "self")]
    pub self_id: String,
    pub group: String,
    pub topic: String,
    pub read_at: DateTime<Utc>,
    /// `kafka` (DescribeGroups) or `members` (what the members publish).
    pub owners_from: &'static str,
    /// The group's state as Kafka describes it.
    pub kafka_state: Option<String>,
    /// What could not be read, and what the view falls back to.
    pub notes: Vec<String>,
    pub members: Vec<MemberView>,
    pub foreign: Vec<ForeignView>,
    /// Worst first.
    pub partitions: Vec<PartitionRow>,
}

impl GroupView {
    pub fn partition(&self, partition: i32) -> Option<&PartitionRow> {
        self.partitions.iter().find(|p| p.partition == partition)
    }

    pub fn member(&self, id: &str) -> Option<&MemberView> {
        self.members.iter().find(|m| m.id == id)
    }
}

/// What the view is made of.
pub struct Inputs<'a> {
    pub self_id: &'a str,
    pub group: &'a str,
    pub topic: &'a str,
    pub members: &'a [MemberRow],
    pub kafka: &'a KafkaView,
    pub gone_after: Duration,
}

/// The owner of a partition as decided.
enum Owner<'a> {
    Member(&'a MemberRow),
    Foreign(&'a AssignedMember),
    Gone(&'a MemberRow),
    Nobody,
}

/// The member of ours a Kafka member is: by the member id it published, else by its client id
/// (the newest such member: a host's process ids come back).
fn ours<'a>(members: &'a [MemberRow], kafka: &AssignedMember) -> Option<&'a MemberRow> {
    members
        .iter()
        .find(|m| m.kafka_member_id.as_deref() == Some(kafka.member_id.as_str()))
        .or_else(|| {
            members
                .iter()
                .filter(|m| m.client_id == kafka.client_id)
                .max_by_key(|m| m.started_at)
        })
}

/// Builds the view.
pub fn build(inputs: &Inputs<'_>) -> GroupView {
    let Inputs {
        self_id,
        group,
        topic,
        members,
        kafka,
        gone_after,
    } = *inputs;
    let alive = |m: &MemberRow| m.alive(gone_after);
    let mut notes = kafka.problems.clone();
    let (description, kafka_state) = match &kafka.description {
        Ok(d) => (Some(d), Some(d.state.clone())),
        Err(_) => (None, None),
    };
    // Kafka's assignments are the truth while the group is stable and every one was read. A
    // stable group described without members, or without an assignment, while live members
    // publish partitions is a broker that does not tell them (tansu 0.6), not a group nobody
    // consumes.
    let publishing = members.iter().any(|m| alive(m) && !m.partitions.is_empty());
    let trusted = description.filter(|d| {
        d.state == "Stable"
            && d.members.iter().all(|m| m.unreadable.is_none())
            && (d.members.iter().any(|m| !m.partitions.is_empty()) || !publishing)
    });
    match (description, trusted) {
        (None, _) => notes.push(
            "Kafka did not describe the group: owners are shown as the members publish them"
                .to_owned(),
        ),
        (Some(d), None) if d.state == "Stable" => notes.push(
            "Kafka described the group without its members' assignments: owners are shown as \
             the members publish them"
                .to_owned(),
        ),
        (Some(d), None) => notes.push(format!(
            "the group is {} in Kafka: owners are shown as the members publish them",
            d.state
        )),
        _ => {}
    }

    // Every partition of the topic, and every one somebody speaks of.
    let mut partitions: Vec<i32> = kafka.partitions.clone();
    partitions.extend(
        members
            .iter()
            .flat_map(|m| m.partitions.iter().map(|p| p.partition)),
    );
    partitions.extend(kafka.committed.keys());
    partitions.sort_unstable();
    partitions.dedup();

    let mut owners: BTreeMap<i32, Owner<'_>> = BTreeMap::new();
    let mut foreign: Vec<ForeignView> = Vec::new();
    if let Some(description) = trusted {
        for assigned in &description.members {
            let owner = match ours(members, assigned) {
                Some(member) if alive(member) => Owner::Member(member),
                Some(member) => Owner::Gone(member),
                None => {
                    foreign.push(ForeignView {
                        member_id: assigned.member_id.clone(),
                        client_id: assigned.client_id.clone(),
                        host: assigned.host.clone(),
                        partitions: assigned.partitions.clone(),
                    });
                    Owner::Foreign(assigned)
                }
            };
            for &partition in &assigned.partitions {
                owners.insert(partition, clone_owner(&owner));
            }
        }
    } else {
        for member in members {
            for report in &member.partitions {
                let owner = owners.entry(report.partition).or_insert(Owner::Nobody);
                match owner {
                    Owner::Member(_) => {}
                    _ if alive(member) => *owner = Owner::Member(member),
                    Owner::Nobody => *owner = Owner::Gone(member),
                    _ => {}
                }
            }
        }
    }

    let mut rows: Vec<PartitionRow> = partitions
        .iter()
        .map(|&partition| {
            let owner = owners.get(&partition).unwrap_or(&Owner::Nobody);
            row(partition, owner, kafka)
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.status, std::cmp::Reverse(a.lag_records), a.partition).cmp(&(
            b.status,
            std::cmp::Reverse(b.lag_records),
            b.partition,
        ))
    });

    let member_views = members
        .iter()
        .map(|m| MemberView {
            id: m.id.clone(),
            alive: alive(m),
            left: m.left,
            is_self: m.id == self_id,
            host: m.host.clone(),
            pid: m.pid,
            version: m.version.clone(),
            heartbeat_age_seconds: m.heartbeat_age_seconds,
            admin_url: m.admin_url.clone(),
            started_at: m.started_at,
            client_id: m.client_id.clone(),
            kafka_member_id: m.kafka_member_id.clone(),
            partitions: {
                let mut owned: Vec<i32> = rows
                    .iter()
                    .filter(|r| r.owner.as_deref() == Some(m.id.as_str()))
                    .map(|r| r.partition)
                    .collect();
                owned.sort_unstable();
                owned
            },
        })
        .collect();
    GroupView {
        self_id: self_id.to_owned(),
        group: group.to_owned(),
        topic: topic.to_owned(),
        read_at: kafka.read_at,
        owners_from: if trusted.is_some() {
            "kafka"
        } else {
            "members"
        },
        kafka_state,
        notes,
        members: member_views,
        foreign,
        partitions: rows,
    }
}

fn clone_owner<'a>(owner: &Owner<'a>) -> Owner<'a> {
    match owner {
        Owner::Member(m) => Owner::Member(m),
        Owner::Foreign(f) => Owner::Foreign(f),
        Owner::Gone(m) => Owner::Gone(m),
        Owner::Nobody => Owner::Nobody,
    }
}

/// One partition's row.
fn row(partition: i32, owner: &Owner<'_>, kafka: &KafkaView) -> PartitionRow {
    let report: Option<&PartitionReport> = match owner {
        Owner::Member(m) => m.partitions.iter().find(|p| p.partition == partition),
        _ => None,
    };
    let committed = match kafka.committed.get(&partition) {
        Some(committed) => *committed,
        None => report.and_then(|r| r.committed),
    };
    let end = [
        kafka.ends.get(&partition).copied(),
        report.and_then(|r| r.end),
        committed,
    ]
    .into_iter()
    .flatten()
    .max();
    let lag_records = end.map(|end| (end - committed.unwrap_or(0)).max(0));
    let lag_seconds = match (owner, lag_records) {
        (_, Some(0)) => Some(0.0),
        (Owner::Member(_), _) => report.and_then(|r| r.lag_seconds),
        _ => kafka
            .waiting_since
            .get(&partition)
            .map(|t| (kafka.read_at - *t).num_milliseconds().max(0) as f64 / 1000.0),
    };
    let consumer = match owner {
        Owner::Member(_) => Consumer::Member {
            paused: report.is_some_and(|r| r.paused),
        },
        Owner::Foreign(_) => Consumer::Foreign,
        Owner::Gone(_) | Owner::Nobody => Consumer::Nobody,
    };
    let window = kafka
        .windows
        .get(&partition)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let judged = judge(
        window,
        consumer,
        report.and_then(|r| r.stuck_reason.as_deref()),
    );
    let (owner_id, owner_kind, owner_label, owner_url) = match owner {
        // The member id names the host and the process: members often share a host name.
        Owner::Member(m) => (
            Some(m.id.clone()),
            OwnerKind::Member,
            m.id.clone(),
            m.admin_url.clone(),
        ),
        Owner::Foreign(f) => (
            None,
            OwnerKind::Foreign,
            format!("{} (publishes nothing)", f.client_id),
            None,
        ),
        Owner::Gone(m) => (
            None,
            OwnerKind::Gone,
            format!("nobody ({} is gone)", m.id),
            None,
        ),
        Owner::Nobody => (None, OwnerKind::Nobody, "nobody".to_owned(), None),
    };
    // No sample yet (Kafka did not answer): the status rests on what the members publish.
    let judged = match lag_records {
        Some(lag) if window.is_empty() && lag > 0 && consumer == Consumer::Nobody => Judged {
            status: Status::Stopped,
            reason: Some(format!("no live member consumes it; {lag} records wait")),
        },
        _ => judged,
    };
    PartitionRow {
        partition,
        owner: owner_id,
        owner_kind,
        owner_label,
        owner_url,
        committed,
        end,
        lag_records,
        lag_seconds,
        status: judged.status,
        reason: judged.reason,
        watermark: report.and_then(|r| r.watermark),
        unknown: report.map(|r| r.unknown),
        paused: report.is_some_and(|r| r.paused),
        guard_engaged: report.is_some_and(|r| r.guard_engaged),
        generation: report.and_then(|r| r.generation),
        offset_resets: 0,
        offsets_skipped: 0,
        reset_held: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::status::Sample;
    use crate::kafka::group::GroupDescription;

    const GONE_AFTER: Duration = Duration::from_secs(10);

    fn report(partition: i32) -> PartitionReport {
        PartitionReport {
            partition,
            state: "running".into(),
            watermark: Some(40),
            committed: Some(40),
            end: Some(40),
            lag_records: Some(0),
            lag_seconds: Some(0.0),
            unknown: 0,
            stuck_reason: None,
            paused: false,
            guard_engaged: false,
            generation: Some(1),
        }
    }

    fn member(id: &str, age: f64, partitions: &[i32]) -> MemberRow {
        MemberRow {
            id: id.into(),
            host: format!("host-{id}"),
            pid: 1,
            version: "0.1.0".into(),
            client_id: format!("history-consumer-host-{id}-1"),
            kafka_member_id: Some(format!("kafka-{id}")),
            admin_url: Some(format!("http://{id}:8080")),
            started_at: DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap(),
            heartbeat_at: Utc::now(),
            heartbeat_age_seconds: age,
            left: false,
            partitions: partitions.iter().map(|&p| report(p)).collect(),
        }
    }

    fn assigned(member_id: &str, client_id: &str, partitions: &[i32]) -> AssignedMember {
        AssignedMember {
            member_id: member_id.into(),
            client_id: client_id.into(),
            host: "/10.0.0.9".into(),
            partitions: partitions.to_vec(),
            unreadable: None,
        }
    }

    fn kafka(description: Result<GroupDescription, String>) -> KafkaView {
        let partitions = vec![0, 1, 2, 3, 4];
        KafkaView {
            read_at: Utc::now(),
            committed: partitions.iter().map(|&p| (p, Some(40))).collect(),
            ends: partitions.iter().map(|&p| (p, 40)).collect(),
            partitions,
            description,
            waiting_since: BTreeMap::new(),
            windows: BTreeMap::new(),
            problems: Vec::new(),
        }
    }

    fn stable(members: Vec<AssignedMember>) -> Result<GroupDescription, String> {
        Ok(GroupDescription {
            state: "Stable".into(),
            protocol: "cooperative-sticky".into(),
            members,
        })
    }

    fn build_view(members: &[MemberRow], kafka: &KafkaView) -> GroupView {
        build(&Inputs {
            self_id: "a",
            group: "history",
            topic: "tickets",
            members,
            kafka,
            gone_after: GONE_AFTER,
        })
    }

    fn owners(view: &GroupView) -> Vec<(i32, OwnerKind, Option<String>)> {
        let mut owners: Vec<_> = view
            .partitions
            .iter()
            .map(|p| (p.partition, p.owner_kind, p.owner.clone()))
            .collect();
        owners.sort_by_key(|o| o.0);
        owners
    }

    #[test]
    fn kafkas_assignments_name_our_members_foreign_members_gone_ones_and_nobody() {
        let members = [
            member("a", 1.0, &[0]),
            member("b", 1.0, &[]),
            // Killed: its heartbeat is old, Kafka has not noticed yet.
            member("c", 30.0, &[3]),
        ];
        let described = kafka(stable(vec![
            assigned("kafka-a", "whatever", &[0]),
            // Matched by the client id it published (it had not published its member id).
            assigned("kafka-b-new", "history-consumer-host-b-1", &[1]),
            assigned("kafka-tool", "rdkafka", &[2]),
            assigned("kafka-c", "history-consumer-host-c-1", &[3]),
        ]));
        let view = build_view(&members, &described);
        assert_eq!(view.owners_from, "kafka");
        assert_eq!(
            owners(&view),
            vec![
                (0, OwnerKind::Member, Some("a".into())),
                (1, OwnerKind::Member, Some("b".into())),
                (2, OwnerKind::Foreign, None),
                (3, OwnerKind::Gone, None),
                (4, OwnerKind::Nobody, None),
            ]
        );
        assert_eq!(view.foreign.len(), 1);
        assert_eq!(view.foreign[0].client_id, "rdkafka");
        assert_eq!(view.member("b").unwrap().partitions, vec![1]);
        assert!(!view.member("c").unwrap().alive);
        assert!(view.member("a").unwrap().is_self);
        assert_eq!(
            view.partition(2).unwrap().owner_label,
            "rdkafka (publishes nothing)"
        );
    }

    #[test]
    fn without_kafkas_description_the_live_members_rows_name_the_owners() {
        let members = [
            member("a", 1.0, &[0, 1]),
            member("c", 30.0, &[2, 1]),
            member("b", 1.0, &[3]),
        ];
        for description in [
            Err("describing the group failed: unsupported".to_owned()),
            Ok(GroupDescription {
                state: "PreparingRebalance".into(),
                protocol: String::new(),
                members: vec![],
            }),
            // tansu 0.6: stable, no members told, or members without their assignments.
            stable(vec![]),
            stable(vec![
                assigned("kafka-a", "x", &[]),
                assigned("kafka-b", "y", &[]),
            ]),
        ] {
            let view = build_view(&members, &kafka(description));
            assert_eq!(view.owners_from, "members");
            assert_eq!(
                owners(&view),
                vec![
                    (0, OwnerKind::Member, Some("a".into())),
                    (1, OwnerKind::Member, Some("a".into())),
                    (2, OwnerKind::Gone, None),
                    (3, OwnerKind::Member, Some("b".into())),
                    (4, OwnerKind::Nobody, None),
                ]
            );
            assert_eq!(view.notes.len(), 1, "{:?}", view.notes);
        }
    }

    #[test]
    fn partitions_sort_worst_first_with_kafkas_offsets_and_the_owners_health() {
        let mut a = member("a", 1.0, &[0, 1]);
        a.partitions[1].stuck_reason = Some("oldest Unknown record waiting for 61 s".into());
        a.partitions[1].lag_seconds = Some(61.0);
        a.partitions[0].paused = true;
        let mut view_of_kafka = kafka(stable(vec![assigned("kafka-a", "x", &[0, 1])]));
        view_of_kafka.ends.insert(1, 50);
        view_of_kafka.ends.insert(2, 70);
        view_of_kafka
            .waiting_since
            .insert(2, view_of_kafka.read_at - chrono::Duration::seconds(30));
        view_of_kafka.windows.insert(
            2,
            vec![Sample {
                at: Duration::ZERO,
                committed: Some(40),
                end: 70,
            }],
        );
        let view = build_view(&[a], &view_of_kafka);
        let order: Vec<(i32, Status)> = view
            .partitions
            .iter()
            .map(|p| (p.partition, p.status))
            .collect();
        assert_eq!(
            order,
            vec![
                (1, Status::Stuck),
                (2, Status::Stopped),
                (0, Status::Paused),
                (3, Status::Ok),
                (4, Status::Ok),
            ]
        );
        let stuck = view.partition(1).unwrap();
        assert_eq!(stuck.lag_records, Some(10));
        assert_eq!(stuck.lag_seconds, Some(61.0));
        assert_eq!(
            stuck.reason.as_deref(),
            Some("oldest Unknown record waiting for 61 s")
        );
        let unowned = view.partition(2).unwrap();
        assert_eq!(unowned.lag_records, Some(30));
        assert_eq!(unowned.lag_seconds, Some(30.0));
        assert_eq!(view.partition(0).unwrap().status, Status::Paused);
    }
}
