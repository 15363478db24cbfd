//! One unit of a partition's work and how it is executed against the database: an event
//! through the inbox transaction, or a malformed record into `dead_letters`.

use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use rdkafka::message::{Message, OwnedMessage};

use super::status::DuplicateCause;
use crate::dead_letters::{self, DeadLetter};
use crate::domain::{Outcome, TicketEvent};
use crate::inbox::batch::{BatchItem, BatchOutcome, process_batch};
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

/// Executes several units of work in one inbox transaction (SPEC §4 per event, batched).
/// Outcomes stay per unit, in order. Any failure makes every unit `Unknown`: the caller then
/// retries them one by one, so a single bad record cannot keep the batch unresolved.
pub async fn execute_batch(pool: Pool, works: &[Work]) -> Vec<Executed> {
    if let [work] = works {
        return vec![execute(pool, work.clone()).await];
    }
    let started = Instant::now();
    let items: Vec<BatchItem<'_>> = works
        .iter()
        .map(|work| match work {
            Work::Event { event, origin } => BatchItem::Event {
                event,
                origin: *origin,
            },
            Work::DeadLetter(letter) => BatchItem::DeadLetter(letter),
        })
        .collect();
    let outcomes = match tokio::time::timeout(WORK_TIMEOUT, process_batch(&pool, &items)).await {
        Ok(Ok(outcomes)) => outcomes,
        Ok(Err(error)) => {
            return all_unknown(works.len(), crate::error_text::chain(&error), started);
        }
        Err(_) => {
            return all_unknown(
                works.len(),
                format!("database work timed out after {} s", WORK_TIMEOUT.as_secs()),
                started,
            );
        }
    };
    let elapsed = started.elapsed();
    let duplicates: Vec<(usize, &TicketEvent, Origin)> = works
        .iter()
        .zip(&outcomes)
        .enumerate()
        .filter_map(|(i, (work, outcome))| match (work, outcome) {
            (Work::Event { event, origin }, BatchOutcome::AlreadyApplied) => {
                Some((i, event, *origin))
            }
            _ => None,
        })
        .collect();
    let pairs: Vec<(&TicketEvent, Origin)> = duplicates.iter().map(|(_, e, o)| (*e, *o)).collect();
    let causes = match duplicates::classify_many(&pool, &pairs).await {
        Ok(causes) => causes,
        Err(error) => {
            tracing::warn!(error = %crate::error_text::chain(&error), "could not classify duplicates");
            vec![DuplicateCause::Unclassified; pairs.len()]
        }
    };
    let mut executed: Vec<Executed> = outcomes
        .into_iter()
        .map(|outcome| Executed {
            outcome: outcome.into(),
            error: None,
            duplicate: None,
            elapsed,
        })
        .collect();
    for ((index, event, origin), cause) in duplicates.into_iter().zip(causes) {
        if cause == DuplicateCause::Conflicting {
            warn_conflict(event, origin);
        }
        executed[index].duplicate = Some(cause);
    }
    executed
}

fn all_unknown(count: usize, error: String, started: Instant) -> Vec<Executed> {
    let elapsed = started.elapsed();
    (0..count)
        .map(|_| Executed {
            outcome: Outcome::Unknown,
            error: Some(error.clone()),
            duplicate: None,
            elapsed,
        })
        .collect()
}

fn warn_conflict(event: &TicketEvent, origin: Origin) {
    tracing::warn!(
        event_id = %event.event_id,
        partition = origin.partition,
        offset = origin.offset,
        "event id republished with a different payload (producer bug); the first one stays"
    );
}

async fn classify(pool: &Pool, event: &TicketEvent, origin: Origin) -> DuplicateCause {
    match duplicates::classify(pool, event, origin).await {
        Ok(DuplicateCause::Conflicting) => {
            warn_conflict(event, origin);
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
