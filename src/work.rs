//! One unit of a partition's work and how it runs against the database: an event through the
//! inbox transaction, or a malformed record into `dead_letters`; a duplicate's cause after.
//! Failures come back as the `Unknown` outcome, never as errors.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;

use crate::domain::DeadLetter;
use crate::domain::{DuplicateCause, FetchedRecord, Outcome, RejectReason, TicketEvent};
use crate::inbox::batch::{BatchItem, BatchOutcome, process_batch};
use crate::inbox::dead_letters;
use crate::inbox::{Origin, PgInbox, PgInboxError, Processed, duplicates, process_history_once};

/// What a record asks of the database.
#[derive(Debug, Clone)]
pub enum Work {
    Event {
        event: TicketEvent,
        origin: Origin,
        timestamp: Option<DateTime<Utc>>,
    },
    DeadLetter {
        letter: DeadLetter,
        timestamp: Option<DateTime<Utc>>,
    },
}

impl Work {
    /// Parses a record into work: a valid event, or a dead letter with the reason.
    pub fn from_record(
        topic: &str,
        partition: i32,
        record: FetchedRecord,
        max_payload_bytes: usize,
    ) -> Work {
        let origin = Origin {
            partition,
            offset: record.offset,
        };
        let parsed =
            TicketEvent::parse(record.payload.as_deref().unwrap_or(b""), max_payload_bytes);
        match parsed {
            Ok(event) => Work::Event {
                event,
                origin,
                timestamp: record.timestamp,
            },
            Err(rejection) => Work::DeadLetter {
                letter: DeadLetter {
                    topic: topic.to_owned(),
                    partition,
                    offset: record.offset,
                    key: record.key,
                    payload: record.payload,
                    rejection,
                },
                timestamp: record.timestamp,
            },
        }
    }

    pub fn event_id(&self) -> Option<&str> {
        match self {
            Work::Event { event, .. } => Some(&event.event_id),
            Work::DeadLetter { .. } => None,
        }
    }

    /// Why the record is a dead letter, if it is one.
    pub fn rejection_reason(&self) -> Option<RejectReason> {
        match self {
            Work::Event { .. } => None,
            Work::DeadLetter { letter, .. } => Some(letter.rejection.reason),
        }
    }

    /// The record's Kafka timestamp.
    pub fn timestamp(&self) -> Option<DateTime<Utc>> {
        match self {
            Work::Event { timestamp, .. } | Work::DeadLetter { timestamp, .. } => *timestamp,
        }
    }
}

/// What executing a unit of work gave.
#[derive(Debug, Clone)]
pub struct Executed {
    pub outcome: Outcome,
    /// The error's text, for `Unknown`; the records of a failed batch share one.
    pub error: Option<Arc<str>>,
    /// For `Unknown`: the database could not be reached (or the work timed out), so the
    /// records are not the cause and may be retried together.
    pub unavailable: bool,
    pub duplicate: Option<DuplicateCause>,
    pub elapsed: Duration,
}

/// The longest a duplicate's classification may take; past it the duplicate is counted as
/// unclassified (its outcome is known already and stands).
const CLASSIFY_TIMEOUT: Duration = Duration::from_secs(5);

fn timed_out(timeout: Duration) -> Arc<str> {
    format!("database work timed out after {} ms", timeout.as_millis()).into()
}

/// Executes `work` once, within `timeout`. Never fails: failures, including the timeout, are
/// the `Unknown` outcome. A duplicate's classification runs afterwards under its own deadline.
pub async fn execute(pool: Pool, work: Work, timeout: Duration) -> Executed {
    let started = Instant::now();
    let (outcome, error, unavailable) = match tokio::time::timeout(timeout, run(&pool, &work)).await
    {
        Ok(result) => result,
        Err(_) => (Outcome::Unknown, Some(timed_out(timeout)), true),
    };
    let elapsed = started.elapsed();
    let duplicate = match (&work, outcome) {
        (Work::Event { event, origin, .. }, Outcome::AlreadyApplied) => {
            Some(classify(&pool, event, *origin).await)
        }
        _ => None,
    };
    Executed {
        outcome,
        error,
        unavailable,
        duplicate,
        elapsed,
    }
}

async fn run(pool: &Pool, work: &Work) -> (Outcome, Option<Arc<str>>, bool) {
    let failed = |error: PgInboxError| {
        let unavailable = error.is_unavailable();
        (
            Outcome::Unknown,
            Some(crate::error_text::chain(&error).into()),
            unavailable,
        )
    };
    match work {
        Work::Event { event, origin, .. } => {
            let mut repo = PgInbox::new(pool.clone());
            match process_history_once(&mut repo, event, *origin).await {
                Processed::Applied => (Outcome::Applied, None, false),
                Processed::AlreadyApplied => (Outcome::AlreadyApplied, None, false),
                Processed::Unknown(error) => failed(error),
            }
        }
        Work::DeadLetter { letter, .. } => match dead_letters::store(pool, letter).await {
            Ok(()) => (Outcome::DeadLettered, None, false),
            Err(error) => failed(error),
        },
    }
}

/// Executes several units of work in one inbox transaction (SPEC §4 per event, batched),
/// within `timeout`. Outcomes stay per unit, in order. Any failure makes every unit `Unknown`:
/// the caller then retries them one by one, so a single bad record cannot keep the batch
/// unresolved. Duplicates are classified afterwards under their own deadline.
pub async fn execute_batch(pool: Pool, works: &[&Work], timeout: Duration) -> Vec<Executed> {
    if let [work] = works {
        return vec![execute(pool, (*work).clone(), timeout).await];
    }
    let started = Instant::now();
    let items: Vec<BatchItem<'_>> = works
        .iter()
        .map(|work| match work {
            Work::Event { event, origin, .. } => BatchItem::Event {
                event,
                origin: *origin,
            },
            Work::DeadLetter { letter, .. } => BatchItem::DeadLetter(letter),
        })
        .collect();
    let outcomes = match tokio::time::timeout(timeout, process_batch(&pool, &items)).await {
        Ok(Ok(outcomes)) => outcomes,
        Ok(Err(error)) => {
            let unavailable = error.is_unavailable();
            let text = crate::error_text::chain(&error).into();
            return all_unknown(works.len(), text, unavailable, started);
        }
        Err(_) => return all_unknown(works.len(), timed_out(timeout), true, started),
    };
    let elapsed = started.elapsed();
    let duplicates: Vec<(usize, &TicketEvent, Origin)> = works
        .iter()
        .zip(&outcomes)
        .enumerate()
        .filter_map(|(i, (work, outcome))| match (work, outcome) {
            (Work::Event { event, origin, .. }, BatchOutcome::AlreadyApplied) => {
                Some((i, event, *origin))
            }
            _ => None,
        })
        .collect();
    let pairs: Vec<(&TicketEvent, Origin)> = duplicates.iter().map(|(_, e, o)| (*e, *o)).collect();
    let classified =
        tokio::time::timeout(CLASSIFY_TIMEOUT, duplicates::classify_many(&pool, &pairs)).await;
    let causes = match classified {
        Ok(Ok(causes)) => causes,
        Ok(Err(error)) => {
            tracing::warn!(error = %crate::error_text::chain(&error), "could not classify duplicates");
            vec![DuplicateCause::Unclassified; pairs.len()]
        }
        Err(_) => {
            tracing::warn!(
                duplicates = pairs.len(),
                "classifying duplicates timed out; counted as unclassified"
            );
            vec![DuplicateCause::Unclassified; pairs.len()]
        }
    };
    let mut executed: Vec<Executed> = outcomes
        .into_iter()
        .map(|outcome| Executed {
            outcome: outcome.into(),
            error: None,
            unavailable: false,
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

fn all_unknown(
    count: usize,
    error: Arc<str>,
    unavailable: bool,
    started: Instant,
) -> Vec<Executed> {
    let elapsed = started.elapsed();
    (0..count)
        .map(|_| Executed {
            outcome: Outcome::Unknown,
            error: Some(error.clone()),
            unavailable,
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
    let classified =
        tokio::time::timeout(CLASSIFY_TIMEOUT, duplicates::classify(pool, event, origin)).await;
    let Ok(classified) = classified else {
        tracing::warn!(event_id = %event.event_id, "classifying a duplicate timed out");
        return DuplicateCause::Unclassified;
    };
    match classified {
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
