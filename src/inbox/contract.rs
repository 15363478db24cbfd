//! `process_history_once`: the SPEC §4 orchestration of one event through a repository.
//!
//! The function knows nothing about PostgreSQL; it is exactly the §4 table over the five
//! repository operations, and the unit tests below show every row of it with a recording fake.

use std::future::Future;

use crate::domain::{Outcome, TicketEvent};

/// Where a delivery came from: recorded with a new inbox marker so that later duplicates can be
/// told apart (same place = redelivery, elsewhere = republish).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Origin {
    pub partition: i32,
    pub offset: i64,
}

/// The operations of one inbox transaction (SPEC §4). A repository holds at most one open
/// transaction at a time: `begin` opens it, `commit` or `rollback` closes it.
pub trait InboxRepository {
    type Error;

    /// Opens a transaction.
    fn begin(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Inserts the inbox marker; `true` when it is new (not yet committed), `false` when the
    /// event id is already committed together with its history row.
    fn try_inbox(
        &mut self,
        event_id: &str,
        origin: Origin,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Inserts the history row for an event whose marker was just inserted.
    fn save_history(
        &mut self,
        event: &TicketEvent,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Commits the transaction. An error means the outcome is unknown (the reply may be lost).
    fn commit(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Closes the transaction without committing (cleanup; its error changes nothing).
    fn rollback(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// The result of [`process_history_once`]: an outcome and, for `Unknown`, the very error value
/// the repository produced.
#[derive(Debug)]
pub enum Processed<E> {
    Applied,
    AlreadyApplied,
    Unknown(E),
}

impl<E> Processed<E> {
    /// The outcome without the error.
    pub fn outcome(&self) -> Outcome {
        match self {
            Processed::Applied => Outcome::Applied,
            Processed::AlreadyApplied => Outcome::AlreadyApplied,
            Processed::Unknown(_) => Outcome::Unknown,
        }
    }

    /// The error, present exactly when the outcome is `Unknown`.
    pub fn error(&self) -> Option<&E> {
        match self {
            Processed::Unknown(error) => Some(error),
            _ => None,
        }
    }

    /// The error by value, present exactly when the outcome is `Unknown`.
    pub fn into_error(self) -> Option<E> {
        match self {
            Processed::Unknown(error) => Some(error),
            _ => None,
        }
    }
}

/// Stores `event` at most once through the inbox transaction (SPEC §3–§4).
///
/// After a successful `begin`, every path without a confirmed commit ends with exactly one
/// `rollback`, whose own error is ignored; a successful commit is never rolled back.
pub async fn process_history_once<R: InboxRepository>(
    repo: &mut R,
    event: &TicketEvent,
    origin: Origin,
) -> Processed<R::Error> {
    if let Err(error) = repo.begin().await {
        return Processed::Unknown(error);
    }
    let processed = match repo.try_inbox(event.event_id(), origin).await {
        Err(error) => Processed::Unknown(error),
        Ok(false) => Processed::AlreadyApplied,
        Ok(true) => match repo.save_history(event).await {
            Err(error) => Processed::Unknown(error),
            Ok(()) => match repo.commit().await {
                Ok(()) => return Processed::Applied,
                Err(error) => Processed::Unknown(error),
            },
        },
    };
    // Cleanup only: a rollback failure cannot make the outcome any more or less known.
    let _ = repo.rollback().await;
    processed
}

#[cfg(test)]
mod tests {
    //! Every row of the SPEC §4 table, with a fake that records calls and injects errors.

    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use super::*;
    use crate::domain::story::{event_900, event_901};

    /// An injected error with an identity, so tests can prove the very value came back.
    #[derive(Debug, Clone)]
    struct FakeError(Arc<str>);

    impl FakeError {
        fn new(step: &'static str) -> Self {
            FakeError(Arc::from(step))
        }
        fn is(&self, other: &FakeError) -> bool {
            Arc::ptr_eq(&self.0, &other.0)
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Call {
        Begin,
        TryInbox,
        SaveHistory,
        Commit,
        Rollback,
    }

    /// A store with committed state, and a transaction staging area, like a database.
    #[derive(Default)]
    struct RecordingRepo {
        calls: Vec<Call>,
        committed_inbox: BTreeSet<String>,
        committed_history: BTreeMap<String, TicketEvent>,
        staged_marker: Option<String>,
        staged_history: Option<TicketEvent>,
        fail_begin: Option<FakeError>,
        fail_try_inbox: Option<FakeError>,
        fail_save_history: Option<FakeError>,
        fail_commit: Option<FakeError>,
        /// The lost reply: commit applies the pair, then returns `fail_commit`.
        commit_applies_before_failing: bool,
        fail_rollback: Option<FakeError>,
    }

    impl InboxRepository for RecordingRepo {
        type Error = FakeError;

        async fn begin(&mut self) -> Result<(), FakeError> {
            self.calls.push(Call::Begin);
            self.fail_begin.clone().map_or(Ok(()), Err)
        }

        async fn try_inbox(&mut self, event_id: &str, _origin: Origin) -> Result<bool, FakeError> {
            self.calls.push(Call::TryInbox);
            if let Some(error) = self.fail_try_inbox.clone() {
                return Err(error);
            }
            if self.committed_inbox.contains(event_id) {
                return Ok(false);
            }
            self.staged_marker = Some(event_id.to_owned());
            Ok(true)
        }

        async fn save_history(&mut self, event: &TicketEvent) -> Result<(), FakeError> {
            self.calls.push(Call::SaveHistory);
            if let Some(error) = self.fail_save_history.clone() {
                return Err(error);
            }
            self.staged_history = Some(event.clone());
            Ok(())
        }

        async fn commit(&mut self) -> Result<(), FakeError> {
            self.calls.push(Call::Commit);
            let failure = self.fail_commit.clone();
            if failure.is_none() || self.commit_applies_before_failing {
                if let Some(marker) = self.staged_marker.take() {
                    self.committed_inbox.insert(marker);
                }
                if let Some(event) = self.staged_history.take() {
                    self.committed_history
                        .insert(event.event_id().to_string(), event);
                }
            }
            failure.map_or(Ok(()), Err)
        }

        async fn rollback(&mut self) -> Result<(), FakeError> {
            self.calls.push(Call::Rollback);
            self.staged_marker = None;
            self.staged_history = None;
            self.fail_rollback.clone().map_or(Ok(()), Err)
        }
    }

    const ORIGIN: Origin = Origin {
        partition: 0,
        offset: 7,
    };

    fn run(repo: &mut RecordingRepo, event: &TicketEvent) -> Processed<FakeError> {
        futures::executor::block_on(process_history_once(repo, event, ORIGIN))
    }

    fn assert_unknown_with(processed: Processed<FakeError>, injected: &FakeError) {
        assert_eq!(processed.outcome(), Outcome::Unknown);
        let returned = processed.into_error().expect("Unknown carries an error");
        assert!(
            returned.is(injected),
            "returned {returned:?}, not the injected value"
        );
    }

    #[test]
    fn a_failed_begin_is_unknown_with_the_begin_error_and_nothing_else_is_called() {
        let injected = FakeError::new("begin");
        let mut repo = RecordingRepo {
            fail_begin: Some(injected.clone()),
            ..Default::default()
        };
        let processed = run(&mut repo, &event_900());
        assert_eq!(repo.calls, [Call::Begin]);
        assert_unknown_with(processed, &injected);
    }

    #[test]
    fn a_failed_try_inbox_is_unknown_with_its_error_after_one_rollback() {
        let injected = FakeError::new("try_inbox");
        let mut repo = RecordingRepo {
            fail_try_inbox: Some(injected.clone()),
            ..Default::default()
        };
        let processed = run(&mut repo, &event_900());
        assert_eq!(repo.calls, [Call::Begin, Call::TryInbox, Call::Rollback]);
        assert_unknown_with(processed, &injected);
        assert!(repo.committed_history.is_empty());
    }

    #[test]
    fn a_duplicate_is_already_applied_without_error_after_one_rollback() {
        let mut repo = RecordingRepo::default();
        repo.committed_inbox.insert("event-ticket-900".into());
        let processed = run(&mut repo, &event_900());
        assert_eq!(repo.calls, [Call::Begin, Call::TryInbox, Call::Rollback]);
        assert_eq!(processed.outcome(), Outcome::AlreadyApplied);
        assert!(processed.error().is_none());
    }

    #[test]
    fn a_failed_save_history_is_unknown_with_its_error_after_one_rollback() {
        let injected = FakeError::new("save_history");
        let mut repo = RecordingRepo {
            fail_save_history: Some(injected.clone()),
            ..Default::default()
        };
        let processed = run(&mut repo, &event_900());
        assert_eq!(
            repo.calls,
            [
                Call::Begin,
                Call::TryInbox,
                Call::SaveHistory,
                Call::Rollback
            ]
        );
        assert_unknown_with(processed, &injected);
        assert!(repo.committed_inbox.is_empty(), "no marker without its row");
    }

    #[test]
    fn a_successful_commit_is_applied_without_error_and_never_rolled_back() {
        let mut repo = RecordingRepo::default();
        let processed = run(&mut repo, &event_900());
        assert_eq!(
            repo.calls,
            [Call::Begin, Call::TryInbox, Call::SaveHistory, Call::Commit]
        );
        assert_eq!(processed.outcome(), Outcome::Applied);
        assert!(processed.error().is_none());
        assert_eq!(repo.committed_history["event-ticket-900"], event_900());
    }

    #[test]
    fn a_failed_commit_is_unknown_with_the_commit_error_after_one_rollback() {
        let injected = FakeError::new("commit");
        let mut repo = RecordingRepo {
            fail_commit: Some(injected.clone()),
            ..Default::default()
        };
        let processed = run(&mut repo, &event_900());
        assert_eq!(
            repo.calls,
            [
                Call::Begin,
                Call::TryInbox,
                Call::SaveHistory,
                Call::Commit,
                Call::Rollback
            ]
        );
        assert_unknown_with(processed, &injected);
    }

    #[test]
    fn a_lost_commit_reply_is_unknown_and_the_redelivery_is_already_applied_with_one_pair() {
        let injected = FakeError::new("commit reply lost");
        let mut repo = RecordingRepo {
            fail_commit: Some(injected.clone()),
            commit_applies_before_failing: true,
            ..Default::default()
        };
        let first = run(&mut repo, &event_900());
        assert_eq!(
            repo.calls,
            [
                Call::Begin,
                Call::TryInbox,
                Call::SaveHistory,
                Call::Commit,
                Call::Rollback
            ]
        );
        assert_unknown_with(first, &injected);

        repo.calls.clear();
        repo.fail_commit = None;
        let redelivery = run(&mut repo, &event_900());
        assert_eq!(redelivery.outcome(), Outcome::AlreadyApplied);
        assert!(redelivery.error().is_none());
        assert_eq!(repo.calls, [Call::Begin, Call::TryInbox, Call::Rollback]);
        assert_eq!(repo.committed_inbox.len(), 1);
        assert_eq!(repo.committed_history.len(), 1);
    }

    #[test]
    fn a_failing_rollback_changes_no_outcome() {
        let rollback_error = FakeError::new("rollback");
        let mut duplicate = RecordingRepo {
            fail_rollback: Some(rollback_error.clone()),
            ..Default::default()
        };
        duplicate.committed_inbox.insert("event-ticket-900".into());
        assert_eq!(
            run(&mut duplicate, &event_900()).outcome(),
            Outcome::AlreadyApplied
        );
        assert!(run(&mut duplicate, &event_900()).error().is_none());

        let injected = FakeError::new("save_history");
        let mut failing = RecordingRepo {
            fail_save_history: Some(injected.clone()),
            fail_rollback: Some(rollback_error),
            ..Default::default()
        };
        assert_unknown_with(run(&mut failing, &event_900()), &injected);
    }

    #[test]
    fn two_events_of_one_ticket_are_two_pairs_and_a_second_delivery_is_one() {
        let mut repo = RecordingRepo::default();
        assert_eq!(run(&mut repo, &event_900()).outcome(), Outcome::Applied);
        assert_eq!(
            run(&mut repo, &event_900()).outcome(),
            Outcome::AlreadyApplied
        );
        assert_eq!(run(&mut repo, &event_901()).outcome(), Outcome::Applied);
        assert_eq!(repo.committed_history.len(), 2);
        assert_eq!(repo.committed_inbox.len(), 2);
    }
}
