//! One unit of a partition's work and how it runs against the database: an event through the
//! inbox transaction, or a malformed record into `dead_letters`; a duplicate's cause after.
//! Failures come back as the `Unknown` outcome, never as errors.
//!
//! An event the database rejects for good on its own (`inbox::sqlstate`: its transaction rolled
//! back, so it is known not to be stored) is dead-lettered in a transaction of its own, with the
//! reason `rejected_by_database` and the error, when its partition's guard allows it: the
//! guard is a row of the database, counted in that same transaction (`inbox::guards`, bound
//! [`Policy::max_consecutive_rejections`]); otherwise it stays `Unknown`.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;

use crate::domain::TicketEvent;
use crate::domain::{DeadLetter, Rejection, UnknownCause};
use crate::domain::{DuplicateCause, FetchedRecord, Outcome, Parsed, RecordKey, RejectReason};
use crate::inbox::batch::{BatchItem, HeldElsewhere, Shape, process_batch_telling};
use crate::inbox::dead_letters;
use crate::inbox::guards::{self, GuardRow, Verdict};
use crate::inbox::recently_applied::{Copies, RecentlyApplied};
use crate::inbox::{MarkersHeld, Origin, PgInbox, PgInboxError, Processed};
use crate::inbox::{duplicates, process_history_once};

/// What a record asks of the database.
#[derive(Debug, Clone)]
pub enum Work {
    Event {
        event: TicketEvent,
        origin: Origin,
        timestamp: Option<DateTime<Utc>>,
        /// The record's key and bytes as delivered, for a dead letter should the database
        /// reject the event, or an operator set it aside.
        key: Option<RecordKey>,
        payload: Payload,
    },
    DeadLetter {
        letter: DeadLetter,
        timestamp: Option<DateTime<Utc>>,
    },
}

/// Where a [`Work::Event`]'s record bytes are.
#[derive(Debug, Clone)]
pub enum Payload {
    /// The event's text is the payload (it was parsed in place, as nearly every record is).
    InEvent,
    /// Apart from the event (whose text was unescaped, or made by hand).
    Apart(Option<Bytes>),
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
        // A record without a payload (a tombstone) is parsed as no bytes, which make no event.
        let present = record.payload.is_some();
        let payload = record.payload.unwrap_or_default();
        match TicketEvent::parse_payload(payload, max_payload_bytes) {
            Parsed::InPlace(event) => Work::Event {
                event,
                origin,
                timestamp: record.timestamp,
                key: record.key,
                payload: Payload::InEvent,
            },
            Parsed::Apart(event, payload) => Work::Event {
                event,
                origin,
                timestamp: record.timestamp,
                key: record.key,
                payload: Payload::Apart(Some(payload)),
            },
            Parsed::Rejected(rejection, payload) => Work::DeadLetter {
                letter: DeadLetter {
                    topic: topic.to_owned(),
                    partition,
                    offset: record.offset,
                    key: record.key.as_deref().map(<[u8]>::to_vec),
                    payload: present.then(|| Vec::from(payload)),
                    rejection,
                },
                timestamp: record.timestamp,
            },
        }
    }

    /// The event, if the record is one.
    pub fn event(&self) -> Option<&TicketEvent> {
        match self {
            Work::Event { event, .. } => Some(event),
            Work::DeadLetter { .. } => None,
        }
    }

    /// The event and where it was read; `None` for a dead letter.
    pub fn event_at(&self) -> Option<(&TicketEvent, Origin)> {
        match self {
            Work::Event { event, origin, .. } => Some((event, *origin)),
            Work::DeadLetter { .. } => None,
        }
    }

    pub fn event_id(&self) -> Option<&str> {
        self.event().map(TicketEvent::event_id)
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

    /// The same record as a dead letter of `topic` for `rejection`, with its raw bytes.
    pub fn dead_letter(&self, topic: &str, rejection: Rejection) -> DeadLetter {
        match self {
            Work::Event {
                event,
                origin,
                key,
                payload,
                ..
            } => DeadLetter {
                topic: topic.to_owned(),
                partition: origin.partition,
                offset: origin.offset,
                key: key.as_deref().map(<[u8]>::to_vec),
                payload: match payload {
                    Payload::InEvent => Some(event.text_buffer().to_vec()),
                    Payload::Apart(payload) => payload.as_deref().map(<[u8]>::to_vec),
                },
                rejection,
            },
            Work::DeadLetter { letter, .. } => DeadLetter {
                topic: letter.topic.clone(),
                partition: letter.partition,
                offset: letter.offset,
                key: letter.key.clone(),
                payload: letter.payload.clone(),
                rejection,
            },
        }
    }

    /// This record to be stored as a dead letter for `rejection` instead (an operator's skip).
    pub fn as_dead_letter(&self, topic: &str, rejection: Rejection) -> Work {
        Work::DeadLetter {
            letter: self.dead_letter(topic, rejection),
            timestamp: self.timestamp(),
        }
    }
}

/// How a partition's units of work run.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    /// The topic, for dead letters.
    pub topic: &'a str,
    /// The longest a unit may take before it counts as `Unknown` (cause unavailable).
    pub timeout: Duration,
    /// How many events in a row the database rejects for good may be dead-lettered per
    /// partition (its guard against mass dead-lettering, kept in the database).
    pub max_consecutive_rejections: u32,
}

/// What executing a unit of work gave.
#[derive(Debug, Clone)]
pub struct Executed {
    pub outcome: Outcome,
    /// For `Unknown`, the error's text (the records of a failed batch share one); for a record
    /// the database rejected, its error (dead-lettered or not).
    pub error: Option<Arc<str>>,
    /// For `Unknown`: why, which decides how it is retried.
    pub cause: Option<UnknownCause>,
    /// For `DeadLettered`: the reason it was stored with.
    pub reason: Option<RejectReason>,
    pub duplicate: Option<DuplicateCause>,
    pub elapsed: Duration,
    /// For a record the database rejected for good: its partition's guard as the transaction
    /// that dead-lettered or held it left it.
    pub guard: Option<GuardRow>,
}

/// The longest a duplicate's classification may take; past it the duplicate is counted as
/// unclassified (its outcome is known already and stands).
const CLASSIFY_TIMEOUT: Duration = Duration::from_secs(5);

fn timed_out(timeout: Duration) -> Arc<str> {
    format!("database work timed out after {} ms", timeout.as_millis()).into()
}

/// An outcome before timing and classification.
struct Ran {
    outcome: Outcome,
    error: Option<Arc<str>>,
    cause: Option<UnknownCause>,
    reason: Option<RejectReason>,
    guard: Option<GuardRow>,
}

impl Ran {
    fn resolved(outcome: Outcome) -> Ran {
        Ran {
            outcome,
            error: None,
            cause: None,
            reason: None,
            guard: None,
        }
    }

    fn unknown(error: Arc<str>, cause: UnknownCause) -> Ran {
        Ran {
            outcome: Outcome::Unknown,
            error: Some(error),
            cause: Some(cause),
            reason: None,
            guard: None,
        }
    }

    fn failed(error: &PgInboxError) -> Ran {
        let (text, cause) = unknown_of(error);
        Ran::unknown(text, cause)
    }
}

/// What a failure that leaves its records Unknown is shown with, and why it happened.
fn unknown_of(error: &PgInboxError) -> (Arc<str>, UnknownCause) {
    let cause = if error.is_unavailable() {
        UnknownCause::Unavailable
    } else {
        UnknownCause::Refused
    };
    (error.text().into(), cause)
}

/// Executes `work` once, within the policy's timeout. Never fails: failures, including the
/// timeout, are the `Unknown` outcome. A duplicate is not classified here (see
/// [`execute_batch`]).
async fn execute(pool: &Pool, work: &Work, policy: &Policy<'_>, held: MarkersHeld) -> Executed {
    let started = Instant::now();
    let ran = match tokio::time::timeout(policy.timeout, run(pool, work, policy, held)).await {
        Ok(ran) => ran,
        Err(_) => Ran::unknown(timed_out(policy.timeout), UnknownCause::Unavailable),
    };
    Executed {
        outcome: ran.outcome,
        error: ran.error,
        cause: ran.cause,
        reason: ran.reason,
        duplicate: None,
        elapsed: started.elapsed(),
        guard: ran.guard,
    }
}

async fn run(pool: &Pool, work: &Work, policy: &Policy<'_>, held: MarkersHeld) -> Ran {
    match work {
        Work::Event { event, origin, .. } => {
            let mut repo = PgInbox::telling(pool.clone(), held);
            match process_history_once(&mut repo, event, *origin).await {
                Processed::Applied => Ran::resolved(Outcome::Applied),
                Processed::AlreadyApplied => Ran::resolved(Outcome::AlreadyApplied),
                Processed::Unknown(error) if error.rejects_the_row() => {
                    let text: Arc<str> = error.text().into();
                    let rejection =
                        Rejection::new(RejectReason::RejectedByDatabase, text.to_string());
                    let letter = work.dead_letter(policy.topic, rejection);
                    // A transaction of its own: the event's rolled back.
                    let limit = policy.max_consecutive_rejections;
                    match guards::dead_letter_rejected(pool, &letter, limit).await {
                        Ok(Verdict::DeadLettered { guard, .. }) => Ran {
                            outcome: Outcome::DeadLettered,
                            error: Some(text),
                            cause: None,
                            reason: Some(RejectReason::RejectedByDatabase),
                            guard: Some(guard),
                        },
                        Ok(Verdict::Held { guard }) => Ran {
                            guard: Some(guard),
                            ..Ran::unknown(text, UnknownCause::Rejected)
                        },
                        Err(error) => Ran::failed(&error),
                    }
                }
                Processed::Unknown(error) => Ran::failed(&error),
            }
        }
        Work::DeadLetter { letter, .. } => match dead_letters::store(pool, letter).await {
            Ok(()) => Ran {
                reason: Some(letter.rejection.reason),
                ..Ran::resolved(Outcome::DeadLettered)
            },
            Err(error) => Ran::failed(&error),
        },
    }
}

/// Executes several units of work in one inbox transaction (SPEC §4 per event, batched),
/// within the policy's timeout; one unit runs the §4 transaction itself. Outcomes stay per
/// unit, in order. Any failure makes every unit `Unknown`: the caller then retries them one by
/// one (unless the database was unavailable), so a single bad record cannot keep the batch
/// unresolved, and only on its own can a record be found rejected for good. The partition's
/// `applied` remembers what was applied, and duplicates are classified afterwards, from it or
/// under their own deadline, from `copies` of the units' events (made now when `None`).
/// `held` is said once the transaction holds its events' markers
/// (see [`MarkersHeld`]); the ids `elsewhere` (the partition's other open batches) may hold are
/// inserted last. Several units go to the database in `shape`.
#[allow(clippy::too_many_arguments)]
pub async fn execute_batch(
    pool: &Pool,
    works: &[&Work],
    copies: Option<Copies>,
    policy: &Policy<'_>,
    applied: &RefCell<RecentlyApplied>,
    held: MarkersHeld,
    elsewhere: &HeldElsewhere,
    shape: Shape,
) -> Vec<Executed> {
    let mut executed = match works {
        [work] => vec![execute(pool, work, policy, held).await],
        _ => execute_together(pool, works, policy, held, elsewhere, shape).await,
    };
    for (index, cause) in classify_duplicates(pool, works, copies, &executed, applied).await {
        executed[index].duplicate = Some(cause);
    }
    executed
}

/// Several units of work in one transaction (see [`execute_batch`]).
async fn execute_together(
    pool: &Pool,
    works: &[&Work],
    policy: &Policy<'_>,
    held: MarkersHeld,
    elsewhere: &HeldElsewhere,
    shape: Shape,
) -> Vec<Executed> {
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
    let processed = process_batch_telling(pool, &items, held, elsewhere, shape);
    let outcomes = match tokio::time::timeout(policy.timeout, processed).await {
        Ok(Ok(outcomes)) => outcomes,
        Ok(Err(error)) => {
            let (error, cause) = unknown_of(&error);
            return all_unknown(works.len(), error, cause, started);
        }
        Err(_) => {
            return all_unknown(
                works.len(),
                timed_out(policy.timeout),
                UnknownCause::Unavailable,
                started,
            );
        }
    };
    let elapsed = started.elapsed();
    outcomes
        .into_iter()
        .zip(works)
        .map(|(outcome, work)| Executed {
            outcome: outcome.into(),
            error: None,
            cause: None,
            reason: work.rejection_reason(),
            duplicate: None,
            elapsed,
            guard: None,
        })
        .collect()
}

/// Remembers what a unit of work applied, and gives the cause of each of its duplicates, by
/// input index. A repeat of an event this unit or a recent one applied is classified from that
/// event's copy (as the database would answer: see [`RecentlyApplied`]); the others are asked
/// of the database in one query, under their own deadline. A conflict is logged.
async fn classify_duplicates(
    pool: &Pool,
    works: &[&Work],
    copies: Option<Copies>,
    executed: &[Executed],
    applied: &RefCell<RecentlyApplied>,
) -> Vec<(usize, DuplicateCause)> {
    let event_at = |index: usize| works[index].event_at();
    let places = |outcome: Outcome| -> Vec<usize> {
        executed
            .iter()
            .enumerate()
            .filter(|(_, executed)| executed.outcome == outcome)
            .map(|(index, _)| index)
            .collect()
    };
    let (applied_places, duplicates) = (places(Outcome::Applied), places(Outcome::AlreadyApplied));
    if applied_places.is_empty() && duplicates.is_empty() {
        return Vec::new();
    }
    let copies = copies.unwrap_or_else(|| Copies::of(works.iter().map(|work| work.event_at())));
    // Not held across an await: the partition's other batch in flight shares it.
    let remembered = applied
        .borrow_mut()
        .settle(copies, &applied_places, &duplicates);
    let mut causes = Vec::new();
    let mut asked: Vec<(usize, &TicketEvent, Origin)> = Vec::new();
    for (index, cause) in duplicates.into_iter().zip(remembered) {
        match (cause, event_at(index)) {
            (Some(cause), _) => causes.push((index, cause)),
            (None, Some((event, origin))) => asked.push((index, event, origin)),
            (None, None) => {}
        }
    }
    if !asked.is_empty() {
        let pairs: Vec<(&TicketEvent, Origin)> = asked.iter().map(|(_, e, o)| (*e, *o)).collect();
        let classified =
            tokio::time::timeout(CLASSIFY_TIMEOUT, duplicates::classify_many(pool, &pairs)).await;
        let answered = match classified {
            Ok(Ok(answered)) => answered,
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
        causes.extend(asked.iter().map(|(index, _, _)| *index).zip(answered));
    }
    for &(index, cause) in &causes {
        if let (DuplicateCause::Conflicting, Some((event, origin))) = (cause, event_at(index)) {
            warn_conflict(event, origin);
        }
    }
    causes
}

fn all_unknown(
    count: usize,
    error: Arc<str>,
    cause: UnknownCause,
    started: Instant,
) -> Vec<Executed> {
    let elapsed = started.elapsed();
    (0..count)
        .map(|_| Executed {
            outcome: Outcome::Unknown,
            error: Some(error.clone()),
            cause: Some(cause),
            reason: None,
            duplicate: None,
            elapsed,
            guard: None,
        })
        .collect()
}

fn warn_conflict(event: &TicketEvent, origin: Origin) {
    tracing::warn!(
        event_id = %event.event_id(),
        partition = origin.partition,
        offset = origin.offset,
        "event id republished with a different payload (producer bug); the first one stays"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: &str = r#"{"event_id":"e-1","ticket_id":"t-1","from_status":"open","to_status":"done","changed_at":"2026-01-01T00:00:00Z"}"#;

    fn record(payload: Option<&str>) -> FetchedRecord {
        FetchedRecord {
            offset: 7,
            key: Some(RecordKey::new(b"t-1")),
            payload: payload.map(|text| Bytes::copy_from_slice(text.as_bytes())),
            timestamp: None,
        }
    }

    fn rejection() -> Rejection {
        Rejection::new(RejectReason::RejectedByDatabase, "set aside")
    }

    /// Whatever way a record's bytes are held, its dead letter has them as delivered.
    #[test]
    fn a_records_bytes_come_back_as_delivered_however_they_are_held() {
        let escaped = PLAIN.replace("t-1", r"t-\u0031");
        for (text, in_event) in [(PLAIN, true), (escaped.as_str(), false)] {
            let work = Work::from_record("topic", 3, record(Some(text)), 1024);
            match &work {
                Work::Event { payload, event, .. } => {
                    assert_eq!(matches!(payload, Payload::InEvent), in_event, "{text}");
                    assert_eq!(event.ticket_id(), "t-1");
                }
                Work::DeadLetter { letter, .. } => panic!("{letter:?}"),
            }
            let letter = work.dead_letter("topic", rejection());
            assert_eq!(letter.payload.as_deref(), Some(text.as_bytes()));
            assert_eq!(letter.key.as_deref(), Some(&b"t-1"[..]));
            assert_eq!((letter.partition, letter.offset), (3, 7));
        }
    }

    #[test]
    fn a_malformed_or_missing_payload_is_a_dead_letter_with_its_bytes() {
        for payload in [Some("{not json"), Some(""), None] {
            match Work::from_record("topic", 0, record(payload), 1024) {
                Work::DeadLetter { letter, .. } => {
                    assert_eq!(letter.payload.as_deref(), payload.map(str::as_bytes));
                    assert_eq!(letter.key.as_deref(), Some(&b"t-1"[..]));
                }
                Work::Event { event, .. } => panic!("{event:?}"),
            }
        }
        // Too long: rejected before it is read, its bytes kept.
        match Work::from_record("topic", 0, record(Some(PLAIN)), 16) {
            Work::DeadLetter { letter, .. } => {
                assert_eq!(letter.rejection.reason, RejectReason::PayloadTooLarge);
                assert_eq!(letter.payload.as_deref(), Some(PLAIN.as_bytes()));
            }
            Work::Event { event, .. } => panic!("{event:?}"),
        }
    }
}
