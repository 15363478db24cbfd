//! One unit of a partition's work and how it is executed against the database: an event
//! through the inbox transaction, or a malformed record into `dead_letters`.

use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use rdkafka::message::{Message, OwnedMessage};

use super::status::DuplicateCause;
use crate::dead_letters::{self, DeadLetter};
use crate::domain::{Outcome, TicketEvent};
use crate::inbox::{Origin, PgInbox, Processed, duplicates, process_history_once};

/// What a record asks of the database.
#[derive(Debug, Clone)]
pub enum Work {
    Event { event: TicketEvent, origin: Origin },
    DeadLetter(DeadLetter),
}

impl Work {
    /// Parses a record into work: a valid event, or a dead letter with the reason.
    pub fn from_record(topic: &str, record: &OwnedMessage, max_payload_bytes: usize) -> Work {
        let origin = Origin {
            partition: record.partition(),
            offset: record.offset(),
        };
        let parsed = match record.payload() {
            Some(bytes) => TicketEvent::parse(bytes, max_payload_bytes),
            None => TicketEvent::parse(b"", max_payload_bytes),
        };
        match parsed {
            Ok(event) => Work::Event { event, origin },
            Err(rejection) => Work::DeadLetter(DeadLetter {
                topic: topic.to_owned(),
                partition: origin.partition,
                offset: origin.offset,
                key: record.key().map(<[u8]>::to_vec),
                payload: record.payload().map(<[u8]>::to_vec),
                rejection,
            }),
        }
    }

    pub fn event_id(&self) -> Option<&str> {
        match self {
            Work::Event { event, .. } => Some(&event.event_id),
            Work::DeadLetter(_) => None,
        }
    }
}

/// What executing a unit of work gave.
#[derive(Debug, Clone)]
pub struct Executed {
    pub outcome: Outcome,
    /// The error's text, for `Unknown`.
    pub error: Option<String>,
    pub duplicate: Option<DuplicateCause>,
    pub elapsed: Duration,
}

/// The longest one unit of work may take before it counts as `Unknown` (a stalled server or a
/// half-open connection would otherwise hold the partition forever).
const WORK_TIMEOUT: Duration = Duration::from_secs(30);

/// Executes `work` once. Never fails: failures, including a timeout, are the `Unknown` outcome.
pub async fn execute(pool: Pool, work: Work) -> Executed {
    let started = Instant::now();
    let (outcome, error, duplicate) =
        match tokio::time::timeout(WORK_TIMEOUT, run(pool, &work)).await {
            Ok(result) => result,
            Err(_) => (
                Outcome::Unknown,
                Some(format!(
                    "database work timed out after {} s",
                    WORK_TIMEOUT.as_secs()
                )),
                None,
            ),
        };
    Executed {
        outcome,
        error,
        duplicate,
        elapsed: started.elapsed(),
    }
}

async fn run(pool: Pool, work: &Work) -> (Outcome, Option<String>, Option<DuplicateCause>) {
    match work {
        Work::Event { event, origin } => {
            let mut repo = PgInbox::new(pool.clone());
            match process_history_once(&mut repo, event, *origin).await {
                Processed::Applied => (Outcome::Applied, None, None),
                Processed::AlreadyApplied => {
                    let cause = classify(&pool, event, *origin).await;
                    (Outcome::AlreadyApplied, None, Some(cause))
                }
                Processed::Unknown(error) => (
                    Outcome::Unknown,
                    Some(crate::error_text::chain(&error)),
                    None,
                ),
            }
        }
        Work::DeadLetter(letter) => match dead_letters::store(&pool, letter).await {
            Ok(()) => (Outcome::DeadLettered, None, None),
            Err(error) => (
                Outcome::Unknown,
                Some(crate::error_text::chain(&error)),
                None,
            ),
        },
    }
}

async fn classify(pool: &Pool, event: &TicketEvent, origin: Origin) -> DuplicateCause {
    match duplicates::classify(pool, event, origin).await {
        Ok(DuplicateCause::Conflicting) => {
            tracing::warn!(
                event_id = %event.event_id,
                partition = origin.partition,
                offset = origin.offset,
                "event id republished with a different payload (producer bug); the first one stays"
            );
            DuplicateCause::Conflicting
        }
        Ok(cause) => cause,
        Err(error) => {
            tracing::warn!(
                event_id = %event.event_id,
                error = %crate::error_text::chain(&error),
                "could not classify a duplicate"
            );
            DuplicateCause::Unclassified
        }
    }
}
