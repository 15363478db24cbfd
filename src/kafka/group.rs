//! A consumer group's offsets as an outside tool sees them (the `rewind` command, the admin's
//! group page): whether the group has active members and which partitions each is assigned,
//! its committed offsets, and committing new ones from outside the group, which Kafka accepts
//! only while the group has no active member.
//!
//! Every call blocks: run it on a thread of its own, never on an actix thread.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use crate::config::KafkaConnection;
use crate::kafka::timeouts::QUERY_TIMEOUT;

/// A member of the group with the partitions of our topic it is assigned, as DescribeGroups
/// tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AssignedMember {
    /// The member id the coordinator gave it.
    pub member_id: String,
    pub client_id: String,
    pub host: String,
    /// Partitions of the topic, in order (empty: none, or its assignment is not known).
    pub partitions: Vec<i32>,
    /// Why its assignment could not be read (`None`: it was).
    pub unreadable: Option<String>,
}

/// Why the broker did not describe the group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DescribeError {
    /// The request failed (a broker without DescribeGroups answers `UnsupportedFeature`).
    #[error("describing the group failed: {0}")]
    Failed(String),
    /// The broker answered without the group (it has no member yet).
    #[error("the broker did not describe the group")]
    NotListed,
}

/// The group as DescribeGroups tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupDescription {
    /// `Stable`, `PreparingRebalance`, `CompletingRebalance`, `Empty`, `Dead`.
    pub state: String,
    /// The assignment protocol (`cooperative-sticky`, `range`...).
    pub protocol: String,
    pub members: Vec<AssignedMember>,
}

/// The group's offsets could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("could not create the kafka client for group {0}")]
    Create(String, #[source] KafkaError),
    #[error("could not read the committed offsets of group {0}")]
    Committed(String, #[source] KafkaError),
    #[error("group {0} has active members: the broker refused the commit")]
    Active(String, #[source] KafkaError),
    #[error("could not commit the offsets of group {0}")]
    Commit(String, #[source] KafkaError),
}

/// A member of the group, as the broker describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    pub client_id: String,
    pub host: String,
}

/// Who is in the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Membership {
    /// The broker says the group has no active member (state Empty or Dead).
    Empty,
    /// The group has members, or is rebalancing.
    Active { state: String, members: Vec<Member> },
    /// The broker did not describe the group (it may not support DescribeGroups); its answer
    /// to the commit decides.
    Unknown { reason: String },
}

/// The group's offsets on one topic.
pub struct GroupOffsets {
    consumer: BaseConsumer,
    group: String,
    topic: String,
}

impl GroupOffsets {
    /// A client for `group` that never joins it (no subscription): it only reads and commits
    /// offsets.
    pub fn open(
        connection: &KafkaConnection,
        topic: &str,
        group: &str,
    ) -> Result<GroupOffsets, GroupError> {
        let mut client = ClientConfig::new();
        connection.properties.apply_to(&mut client);
        client
            .set("bootstrap.servers", &connection.brokers)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        let consumer = client
            .create()
            .map_err(|e| GroupError::Create(group.to_owned(), e))?;
        Ok(GroupOffsets {
            consumer,
            group: group.to_owned(),
            topic: topic.to_owned(),
        })
    }

    /// Who is in the group, as DescribeGroups says.
    pub fn membership(&self) -> Membership {
        let groups = match self
            .consumer
            .fetch_group_list(Some(&self.group), QUERY_TIMEOUT)
        {
            Ok(groups) => groups,
            Err(error) => {
                return Membership::Unknown {
                    reason: format!("describing the group failed: {error}"),
                };
            }
        };
        let Some(info) = groups.groups().iter().find(|g| g.name() == self.group) else {
            return Membership::Unknown {
                reason: "the broker did not describe the group".into(),
            };
        };
        let members: Vec<Member> = info
            .members()
            .iter()
            .map(|m| Member {
                client_id: m.client_id().to_owned(),
                host: m.client_host().to_owned(),
            })
            .collect();
        match info.state() {
            "Empty" | "Dead" if members.is_empty() => Membership::Empty,
            state => Membership::Active {
                state: state.to_owned(),
                members,
            },
        }
    }

    /// The group's members and the partitions of the topic each is assigned, as
    /// DescribeGroups says within `timeout`.
    pub fn describe(&self, timeout: Duration) -> Result<GroupDescription, DescribeError> {
        let groups = self
            .consumer
            .fetch_group_list(Some(&self.group), timeout)
            .map_err(|error| DescribeError::Failed(error.to_string()))?;
        let info = groups
            .groups()
            .iter()
            .find(|g| g.name() == self.group)
            .ok_or(DescribeError::NotListed)?;
        let consumer_protocol =
            info.protocol_type().is_empty() || info.protocol_type() == "consumer";
        let members = info
            .members()
            .iter()
            .map(|m| {
                let decoded = match m.assignment() {
                    _ if !consumer_protocol => Err(format!(
                        "the group uses protocol type {:?}, not consumer",
                        info.protocol_type()
                    )),
                    None => Ok(Default::default()),
                    Some(bytes) => super::assignment::decode(bytes).map_err(|e| e.to_string()),
                };
                let (partitions, unreadable) = match decoded {
                    Ok(mut assigned) => (assigned.remove(&self.topic).unwrap_or_default(), None),
                    Err(why) => (Vec::new(), Some(why)),
                };
                AssignedMember {
                    member_id: m.id().to_owned(),
                    client_id: m.client_id().to_owned(),
                    host: m.client_host().to_owned(),
                    partitions,
                    unreadable,
                }
            })
            .collect();
        Ok(GroupDescription {
            state: info.state().to_owned(),
            protocol: info.protocol().to_owned(),
            members,
        })
    }

    /// The committed offset of each of `partitions` (`None`: nothing committed).
    pub fn committed(&self, partitions: &[i32]) -> Result<BTreeMap<i32, Option<i64>>, GroupError> {
        self.committed_within(partitions, QUERY_TIMEOUT)
    }

    /// The same, waiting at most `timeout`.
    pub fn committed_within(
        &self,
        partitions: &[i32],
        timeout: Duration,
    ) -> Result<BTreeMap<i32, Option<i64>>, GroupError> {
        super::committed_of(&self.consumer, &self.topic, partitions, timeout)
            .map_err(|e| GroupError::Committed(self.group.clone(), e))
    }

    /// Commits `offsets` for the group from outside it. Kafka refuses it while the group has
    /// an active member ([`GroupError::Active`]).
    pub fn commit(&self, offsets: &BTreeMap<i32, i64>) -> Result<(), GroupError> {
        let mut list = TopicPartitionList::new();
        for (&partition, &offset) in offsets {
            list.add_partition_offset(&self.topic, partition, Offset::Offset(offset))
                .map_err(|e| GroupError::Commit(self.group.clone(), e))?;
        }
        self.consumer
            .commit(&list, CommitMode::Sync)
            .map_err(|error| {
                use RDKafkaErrorCode::*;
                match error.rdkafka_error_code() {
                    Some(
                        UnknownMemberId | IllegalGeneration | RebalanceInProgress
                        | FencedInstanceId,
                    ) => GroupError::Active(self.group.clone(), error),
                    _ => GroupError::Commit(self.group.clone(), error),
                }
            })
    }
}
