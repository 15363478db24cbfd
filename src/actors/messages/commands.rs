//! What an operator asks of the actors through the admin: rewind partitions live, retry, pause
//! or resume a partition, dead-letter one Unknown record (a skip), and the answers.

use actix::prelude::*;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::domain::Outcome;
use crate::domain::rewind::{Decision, TimeOffset};

/// From the admin: rewind these partitions of this instance while consuming. Refused if one
/// of them is not assigned here; the reply comes once every one was restarted.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Vec<LiveRewound>, NotOwned>")]
pub struct RewindPartitions {
    pub targets: Vec<(i32, TimeOffset)>,
}

/// What a live rewind did to one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LiveRewound {
    pub partition: i32,
    /// `None`: the partition was not rewound (see `error`).
    pub decision: Option<Decision>,
    /// Why the rewind did not happen (the partition is shown held with it when it could not
    /// be restarted where it should).
    pub error: Option<String>,
    /// The partition reads from its new position, but the position is not committed yet: why
    /// (it is queued behind an unanswered commit, or its commit failed and is sent again).
    /// Until then a restart would go back to the offset committed before.
    pub pending: Option<String>,
}

impl LiveRewound {
    /// The partition was not rewound, for `why`.
    pub fn failed(partition: i32, why: &str) -> LiveRewound {
        LiveRewound {
            partition,
            decision: None,
            error: Some(why.to_owned()),
            pending: None,
        }
    }
}

/// An operator action on one partition.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum PartitionAction {
    /// Retry every Unknown record now instead of at its backoff time.
    RetryNow,
    /// Stop taking new records (retries of the backlog go on).
    Pause,
    /// Take new records again.
    Resume,
}

impl PartitionAction {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Applies an operator action to a partition actor.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct ApplyAction(pub PartitionAction);

/// Asks the supervisor to apply an action to a partition it owns.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), NotOwned>")]
pub struct PartitionCommand {
    pub partition: i32,
    pub action: PartitionAction,
}

/// The partition is not assigned to this instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("partition {0} is not assigned to this instance")]
pub struct NotOwned(pub i32);

/// An operator dead-letters one Unknown record of a partition instead of retrying it (a skip):
/// it is stored in `dead_letters` (reason `skipped_by_operator`) as the partition's next unit
/// of work, and the watermark moves past it. Accepted, the answer is a [`SkipTicket`] that
/// tells what became of it.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<SkipTicket, SkipRefused>")]
pub struct DeadLetterRecord {
    pub partition: i32,
    pub offset: i64,
    /// Why, in the operator's words (required).
    pub comment: String,
    /// Who, as the audit trail names them.
    pub by: String,
}

/// What became of an operator's skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipOutcome {
    /// The record's dead letter was stored (`skipped_by_operator`).
    Done,
    /// A retry already running resolved the record first, with this outcome: nothing was
    /// dead-lettered by the skip.
    Overtaken(Outcome),
    /// The partition was revoked (or rewound, or the service stopped) before the skip ran:
    /// nothing was dead-lettered, and the record is its next owner's.
    Dropped,
}

impl SkipOutcome {
    /// The word the audit trail records.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipOutcome::Done => "done",
            SkipOutcome::Overtaken(_) => "overtaken",
            SkipOutcome::Dropped => "dropped",
        }
    }

    /// What the operator is told.
    pub fn message(self) -> String {
        match self {
            SkipOutcome::Done => "dead-lettered: stored in dead_letters as skipped_by_operator; \
                 the committed offset moves past it"
                .to_owned(),
            SkipOutcome::Overtaken(Outcome::Applied) => {
                "not dead-lettered: a retry stored it first (applied)".to_owned()
            }
            SkipOutcome::Overtaken(Outcome::AlreadyApplied) => {
                "not dead-lettered: a retry found it stored already (already_applied)".to_owned()
            }
            SkipOutcome::Overtaken(outcome) => {
                format!("not dead-lettered: a retry resolved it first ({outcome})")
            }
            SkipOutcome::Dropped => "not dead-lettered: the partition was revoked (or rewound) \
                 before the skip ran; its next owner retries the record"
                .to_owned(),
        }
    }
}

/// The outcome of an accepted skip, once known. Dropped unanswered (the partition's actor
/// stopped before the skip ran) it is [`SkipOutcome::Dropped`].
#[derive(Debug)]
pub struct SkipTicket(oneshot::Receiver<SkipOutcome>);

impl SkipTicket {
    /// A ticket, and the sender its outcome goes through.
    pub fn new() -> (oneshot::Sender<SkipOutcome>, SkipTicket) {
        let (tell, told) = oneshot::channel();
        (tell, SkipTicket(told))
    }
}

impl std::future::Future for SkipTicket {
    type Output = SkipOutcome;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<SkipOutcome> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|told| told.unwrap_or(SkipOutcome::Dropped))
    }
}

/// Why a record cannot be dead-lettered by an operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipRefused {
    #[error(transparent)]
    NotOwned(#[from] NotOwned),
    #[error(
        "offset {offset} is not in the Unknown backlog of partition {partition} (resolved \
         already, not delivered yet, or the partition is being revoked)"
    )]
    NotInBacklog { partition: i32, offset: i64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_outcome_says_what_became_of_the_record_in_a_word_and_a_sentence() {
        let cases = [
            (
                SkipOutcome::Done,
                "done",
                "dead-lettered: stored in dead_letters",
            ),
            (
                SkipOutcome::Overtaken(Outcome::Applied),
                "overtaken",
                "not dead-lettered: a retry stored it first",
            ),
            (
                SkipOutcome::Overtaken(Outcome::DeadLettered),
                "overtaken",
                "not dead-lettered: a retry resolved it first (dead_lettered)",
            ),
            (
                SkipOutcome::Dropped,
                "dropped",
                "not dead-lettered: the partition was revoked",
            ),
        ];
        for (outcome, word, sentence) in cases {
            assert_eq!(outcome.as_str(), word);
            assert!(
                outcome.message().starts_with(sentence),
                "{}",
                outcome.message()
            );
        }
    }

    #[tokio::test]
    async fn a_skip_whose_partition_stopped_before_answering_was_dropped() {
        let (tell, ticket) = SkipTicket::new();
        drop(tell);
        assert_eq!(ticket.await, SkipOutcome::Dropped);
    }
}
