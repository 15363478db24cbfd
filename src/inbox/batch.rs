//! The batched inbox transaction: many records resolved in one transaction, outcomes per record.
//!
//! Two shapes ([`Shape`]), the same rows and outcomes:
//!
//! - one round trip: one statement inserts the markers and the history rows ([`STORE_EVENTS`]:
//!   a multi-row inbox insert `ON CONFLICT DO NOTHING RETURNING event_id`, the ids gathered into
//!   one array, and in the same statement a multi-row history insert for exactly the ids that
//!   came back). BEGIN, that statement, one multi-row dead-letter insert and COMMIT are sent
//!   together (see [`in_one_round_trip`]);
//! - markers first: BEGIN; the marker insert alone; then the history rows of the new events,
//!   the dead letters and COMMIT sent together (see [`write_and_commit`]), or a rollback when
//!   nothing is new. A batch of events that are all stored already never touches
//!   `history_events`, so its outcomes are known while a lock holds that table. A partition
//!   sends a batch this way unless its last unit applied an event (see
//!   `actors::partition`), and always when it tries a batch again.
//!
//! Either way a statement that fails makes the COMMIT behind it roll back. The unique index on
//! `inbox.event_id` is still the only arbiter of "already seen": an id comes back only when
//! this transaction inserted its marker, and an id that does not come back is committed by
//! someone else (an insert that meets an uncommitted marker waits for its transaction and
//! proceeds if that one rolls back).
//!
//! Per event, a batch keeps the SPEC §4 mapping: a marker inserted and its history row stored
//! with it, committed (`Applied`); no marker inserted, nothing written for it
//! (`AlreadyApplied`). Its failure is coarser: any error, a failed or lost COMMIT reply
//! included, leaves every record of the batch unknown, after one rollback whose own error is
//! ignored. The caller then tries the records one by one through the one-event path, which
//! runs SPEC §4's statements one by one (`inbox::postgres`), or, when the database was
//! unavailable or too slow, the batch again, markers first (`work::execute_batch`).
//!
//! Distinct event ids are inserted sorted, so that two batches sharing ids take their row locks
//! in the same order and wait for each other instead of deadlocking. One exception: the ids
//! that an earlier batch of the same partition, still open, may hold ([`HeldElsewhere`]) are
//! inserted after the others (each run sorted). A copy of an event whose first copy that batch
//! carries waits at the unique index until it ends; inserted last, it waits after this batch
//! has inserted all its other markers, not before (with an outbox's ordered ids, a republished
//! event sorts ahead of the fresh ones and would hold up the whole insert). That batch never
//! waits for this one (a partition starts a batch once the one before holds its markers: see
//! [`MarkersHeld`]), so the exception adds no lock cycle; the outcomes stay the unique index's.

use std::cmp::Ordering;
use std::task::Poll;

use deadpool_postgres::{Object, Pool};
use tokio_postgres::Statement;

use super::session::Session;

use super::columns::Column;
use super::contract::Origin;
use super::dead_letters;
use super::id_order;
use super::sqlstate::Step;
use super::statements::{SAVE_HISTORY, STORE_EVENTS, TRY_INBOX};
use super::text_values::TextArrayBytes;
use super::{MarkersHeld, PgInboxError};
use crate::domain::DeadLetter;
#[cfg(test)]
use crate::domain::event::id_hash;
use crate::domain::{Outcome, TicketEvent};

/// One item of a batch.
#[derive(Debug, Clone, Copy)]
pub enum BatchItem<'a> {
    Event {
        event: &'a TicketEvent,
        origin: Origin,
    },
    DeadLetter(&'a DeadLetter),
}

/// What became of one item of a committed batch, in the order of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    Applied,
    AlreadyApplied,
    DeadLettered,
}

impl From<BatchOutcome> for Outcome {
    fn from(outcome: BatchOutcome) -> Outcome {
        match outcome {
            BatchOutcome::Applied => Outcome::Applied,
            BatchOutcome::AlreadyApplied => Outcome::AlreadyApplied,
            BatchOutcome::DeadLettered => Outcome::DeadLettered,
        }
    }
}

/// Event ids, by their hashes ([`crate::domain::event::id_hash`]), whose markers another open
/// transaction of the same partition may hold: a batch inserts them after its other ids (see
/// the module docs). A false positive (another id of the same hash) only moves an id later in
/// the insert.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldElsewhere(Vec<u32>);

impl HeldElsewhere {
    pub fn new(mut hashes: Vec<u32>) -> HeldElsewhere {
        hashes.sort_unstable();
        hashes.dedup();
        HeldElsewhere(hashes)
    }

    /// Whether `event` may be held elsewhere.
    pub fn contains(&self, event: &TicketEvent) -> bool {
        !self.0.is_empty() && self.0.binary_search(&event.id_hash()).is_ok()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// How a batch's transaction goes to the database. Both store the same rows and give the same
/// outcomes; they differ in round trips and in the tables they touch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Shape {
    /// BEGIN, one statement for the markers and the history rows ([`STORE_EVENTS`]), the dead
    /// letters and COMMIT, sent together: one round trip. The statement names `history_events`
    /// even when none of its events is new, so it waits for a lock on that table.
    #[default]
    OneRoundTrip,
    /// BEGIN; the markers; then the history rows of the new events, the dead letters and COMMIT
    /// sent together, or a rollback when nothing is new: three round trips, and a batch whose
    /// events are all stored already does not touch `history_events` (its outcomes are known
    /// while that table is locked, say by a migration). For batches likely to be duplicates.
    MarkersFirst,
}

/// Resolves all `items` in one transaction (see the module docs), with nobody waiting to hear
/// that it holds its markers (see [`process_batch_telling`]).
pub async fn process_batch(
    pool: &Pool,
    items: &[BatchItem<'_>],
) -> Result<Vec<BatchOutcome>, PgInboxError> {
    process_batch_shaped(pool, items, Shape::default()).await
}

/// [`process_batch`] in the given shape.
pub async fn process_batch_shaped(
    pool: &Pool,
    items: &[BatchItem<'_>],
    shape: Shape,
) -> Result<Vec<BatchOutcome>, PgInboxError> {
    process_batch_telling(
        pool,
        items,
        MarkersHeld::default(),
        &HeldElsewhere::default(),
        shape,
    )
    .await
}

/// Resolves all `items` in one transaction in `shape` (see the module docs), and says `held` as
/// soon as the statement that inserts its markers returned; the ids `elsewhere` may hold are
/// inserted last.
///
/// The first occurrence of an event id inside the batch is the one stored (its history row and
/// its origin); later occurrences are `AlreadyApplied`. Any error, including a failed or lost
/// commit reply, is returned as is: every item's outcome is then unknown. An empty batch touches
/// no database.
pub async fn process_batch_telling(
    pool: &Pool,
    items: &[BatchItem<'_>],
    held: MarkersHeld,
    elsewhere: &HeldElsewhere,
    shape: Shape,
) -> Result<Vec<BatchOutcome>, PgInboxError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let Plan {
        events,
        split,
        letters,
        slots,
    } = plan(items, elsewhere);
    let inserted = match shape {
        Shape::OneRoundTrip => {
            let mut transaction = Session::take(pool).await?;
            match in_one_round_trip(&transaction, &events, split, &letters, held).await {
                Ok(inserted) => {
                    transaction.committed();
                    inserted
                }
                Err(error) => {
                    let _ = transaction.rollback().await;
                    return Err(error);
                }
            }
        }
        Shape::MarkersFirst => markers_first(pool, &events, split, &letters, held).await?,
    };
    let outcomes = outcomes(&slots, &inserted);
    debug_assert_eq!(outcomes.len(), items.len());
    Ok(outcomes)
}

/// What a batch writes, and where each item's outcome comes from.
struct Plan<'a> {
    /// The first occurrence of each event id, in the order inserted: sorted by id (one lock
    /// order for every batch), those held elsewhere after the others (from `split` on), each
    /// run sorted.
    events: Vec<(&'a TicketEvent, Origin)>,
    split: usize,
    /// The dead letters, sorted by position.
    letters: Vec<&'a DeadLetter>,
    /// Per item, where its outcome comes from.
    slots: Vec<Slot>,
}

/// Where an item's outcome comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// The first occurrence of an id: its place in the planned events.
    First(usize),
    /// A later occurrence of an id.
    Repeat,
    DeadLetter,
}

/// Plans `items` (see [`Plan`]).
fn plan<'a>(items: &[BatchItem<'a>], elsewhere: &HeldElsewhere) -> Plan<'a> {
    let mut occurrences = Vec::with_capacity(items.len());
    let mut letters = Vec::new();
    for (index, item) in items.iter().enumerate() {
        match *item {
            BatchItem::Event { event, origin } => occurrences.push((index, event, origin)),
            BatchItem::DeadLetter(letter) => letters.push(letter),
        }
    }
    // By id, and an id's occurrences in input order: the first one is kept.
    let ids: Vec<&[u8]> = occurrences
        .iter()
        .map(|(_, event, _)| event.event_id().as_bytes())
        .collect();
    let mut slots = vec![Slot::DeadLetter; items.len()];
    let mut events = Vec::with_capacity(occurrences.len());
    events.extend(id_order::sort_ids(&ids).into_iter().filter_map(|sorted| {
        let occurrence = occurrences[sorted.index as usize];
        if sorted.repeat {
            slots[occurrence.0] = Slot::Repeat;
            return None;
        }
        Some(occurrence)
    }));
    letters.sort_unstable_by(|a, b| {
        (&a.topic, a.partition, a.offset).cmp(&(&b.topic, b.partition, b.offset))
    });
    let mut split = events.len();
    if !elsewhere.is_empty() {
        // Stable, in place (few are held): each run stays sorted.
        let mut held = Vec::new();
        events.retain(|planned| {
            let clear = !elsewhere.contains(planned.1);
            if !clear {
                held.push(*planned);
            }
            clear
        });
        split = events.len();
        events.append(&mut held);
    }
    for (slot, (index, _, _)) in events.iter().enumerate() {
        slots[*index] = Slot::First(slot);
    }
    let events = events
        .into_iter()
        .map(|(_, event, origin)| (event, origin))
        .collect();
    Plan {
        events,
        split,
        letters,
        slots,
    }
}

/// The planned events' ids side by side in one buffer, copied when the batch is planned (its
/// payloads in the CPU's caches). The ids an insert returns are found among these: by the time
/// its rows come back, the database has run on the same cores, and comparing against each
/// record's own payload cost a cache miss per returned row.
struct PlannedIds {
    bytes: Vec<u8>,
    /// Where each id ends in `bytes`, in the planned order.
    ends: Vec<usize>,
}

impl PlannedIds {
    fn new(events: &[(&TicketEvent, Origin)]) -> PlannedIds {
        let mut bytes = Vec::with_capacity(events.iter().map(|(e, _)| e.event_id().len()).sum());
        let ends = events
            .iter()
            .map(|(event, _)| {
                bytes.extend_from_slice(event.event_id().as_bytes());
                bytes.len()
            })
            .collect();
        PlannedIds { bytes, ends }
    }

    /// The id planned at `slot`.
    fn get(&self, slot: usize) -> Option<&[u8]> {
        let end = *self.ends.get(slot)?;
        let start = slot.checked_sub(1).map_or(0, |before| self.ends[before]);
        Some(&self.bytes[start..end])
    }

    /// Where `event_id` (UTF-8 bytes) is: two runs, split at `split`, each sorted by id, each
    /// id once (text sorts as its UTF-8 bytes do).
    fn position(&self, split: usize, event_id: &[u8]) -> Option<usize> {
        let search = |run: std::ops::Range<usize>| {
            let (mut low, mut high) = (run.start, run.end);
            while low < high {
                let middle = low + (high - low) / 2;
                match self.get(middle)?.cmp(event_id) {
                    Ordering::Less => low = middle + 1,
                    Ordering::Greater => high = middle,
                    Ordering::Equal => return Some(middle),
                }
            }
            None
        };
        search(0..split).or_else(|| search(split..self.ends.len()))
    }
}

/// Finds the ids an insert returned among the planned events. PostgreSQL returns an
/// `INSERT ... SELECT`'s rows in the order it inserted them (the planned order), and
/// `array_agg` over them keeps it, so the slot after the previous one found is tried before a
/// binary search; any order gives the same answer.
struct Returned<'p> {
    ids: &'p PlannedIds,
    split: usize,
    next: usize,
}

impl Returned<'_> {
    fn position(&mut self, event_id: &[u8]) -> Option<usize> {
        let found = match self.ids.get(self.next) {
            Some(id) if id == event_id => self.next,
            _ => self.ids.position(self.split, event_id)?,
        };
        self.next = found + 1;
        Some(found)
    }
}

/// [`Shape::MarkersFirst`]: BEGIN, the marker insert, then the history rows of exactly the new
/// events with the dead letters and COMMIT (see [`write_and_commit`]), or, when nothing is new
/// and no letter is to be stored, a rollback: as SPEC §4's duplicate path, the outcomes are
/// known without a commit and the rollback is cleanup only (a failed rollback detaches the
/// session and changes no outcome). Per planned event, whether this transaction inserted its
/// marker.
async fn markers_first(
    pool: &Pool,
    events: &[(&TicketEvent, Origin)],
    split: usize,
    letters: &[&DeadLetter],
    held: MarkersHeld,
) -> Result<Vec<bool>, PgInboxError> {
    let mut transaction = Session::begin(pool).await?;
    let inserted = match insert_markers(transaction.client(), events, split, held).await {
        Ok(inserted) => inserted,
        Err(error) => {
            let _ = transaction.rollback().await;
            return Err(error);
        }
    };
    let mut fresh: Vec<&TicketEvent> = Vec::with_capacity(events.len());
    fresh.extend(
        events
            .iter()
            .zip(&inserted)
            .filter(|(_, inserted)| **inserted)
            .map(|((event, _), _)| *event),
    );
    if fresh.is_empty() && letters.is_empty() {
        let _ = transaction.rollback().await;
    } else if let Err(error) = write_and_commit(&mut transaction, &fresh, letters).await {
        let _ = transaction.rollback().await;
        return Err(error);
    }
    Ok(inserted)
}

/// The marker insert; returns, per planned event, whether this transaction inserted its
/// marker.
async fn insert_markers(
    client: &Object,
    events: &[(&TicketEvent, Origin)],
    split: usize,
    mut held: MarkersHeld,
) -> Result<Vec<bool>, PgInboxError> {
    let mut inserted = vec![false; events.len()];
    if events.is_empty() {
        return Ok(inserted);
    }
    let partitions = Column::new(events, |(_, o)| o.partition);
    let offsets = Column::new(events, |(_, o)| o.offset);
    let rest = partitions.encoded_len() + offsets.encoded_len();
    let ids = Column::new(events, |(e, _)| e.event_id()).reserving(rest);
    let failed = PgInboxError::at(Step::InsertMarker);
    let statement = client.prepare_cached(TRY_INBOX).await.map_err(failed)?;
    let planned = PlannedIds::new(events);
    let mut returned = Returned {
        ids: &planned,
        split,
        next: 0,
    };
    // The markers are held once the statement has ended: only then may a later batch insert.
    let read = async {
        let row = client
            .query_one(&statement, &[&ids, &partitions, &offsets])
            .await?;
        let returned_ids: Option<TextArrayBytes> = row.try_get(0)?;
        for id in returned_ids.iter().flat_map(|ids| ids.iter()) {
            if let Some(i) = returned.position(id) {
                inserted[i] = true;
            }
        }
        Ok::<(), tokio_postgres::Error>(())
    };
    let read = read.await;
    held.say();
    read.map_err(PgInboxError::at(Step::InsertMarker))?;
    Ok(inserted)
}

/// The history rows of the `fresh` events and the dead letters, then COMMIT, sent one behind
/// the other without waiting for each reply: one round trip where there were three. The
/// transaction stays whole:
///
/// - every statement is prepared before any is sent, so no preparation goes out after COMMIT;
/// - COMMIT is sent only once each write is sent: tokio-postgres encodes and queues a
///   statement before its future first waits, so a write still pending after one poll is on
///   its way, and one that finished at once without a reply failed before it was sent (its
///   parameters, or a closed connection), which ends this with COMMIT unsent;
/// - a write that fails on the server aborts the transaction, and PostgreSQL answers the
///   COMMIT that follows by rolling back: the write's own error is returned.
///
/// The session is committed only when every reply says so.
async fn write_and_commit(
    transaction: &mut Session,
    fresh: &[&TicketEvent],
    letters: &[&DeadLetter],
) -> Result<(), PgInboxError> {
    sent_together(transaction, fresh, letters).await?;
    transaction.committed();
    Ok(())
}

/// The writes and COMMIT of [`write_and_commit`], with every reply; `Ok` when all succeeded.
async fn sent_together(
    transaction: &Session,
    fresh: &[&TicketEvent],
    letters: &[&DeadLetter],
) -> Result<(), PgInboxError> {
    let client = transaction.client();
    let history = match fresh {
        [] => None,
        _ => Some(prepare_history(client).await?),
    };
    let store = match letters {
        [] => None,
        _ => Some(dead_letters::prepare(client).await?),
    };
    let mut save = std::pin::pin!(async {
        match &history {
            Some(statement) => save_history_prepared(client, statement, fresh).await,
            None => Ok(()),
        }
    });
    let mut store = std::pin::pin!(store_letters(client, store.as_ref(), letters));
    let first = (
        futures::poll!(save.as_mut()),
        futures::poll!(store.as_mut()),
    );
    let (saved, stored) = match first {
        (Poll::Ready(Err(error)), _) | (_, Poll::Ready(Err(error))) => return Err(error),
        (saved, stored) => (saved, stored),
    };
    let (saved, stored, committed) = futures::join!(
        resume(saved, save),
        resume(stored, store),
        transaction.send_commit(),
    );
    saved?;
    stored?;
    committed
}

/// SPEC §3 step 2 for `events`, in one statement (the SPEC §4 path passes one).
pub(super) async fn save_history(
    client: &Object,
    events: &[&TicketEvent],
) -> Result<(), PgInboxError> {
    let statement = prepare_history(client).await?;
    save_history_prepared(client, &statement, events).await
}

/// The history insert's statement, prepared on `client` (cached there).
async fn prepare_history(client: &Object) -> Result<Statement, PgInboxError> {
    client
        .prepare_cached(SAVE_HISTORY)
        .await
        .map_err(PgInboxError::at(Step::InsertHistory))
}

/// SPEC §3 step 2 for `events` through `statement` (from [`prepare_history`] on `client`).
/// Encodes and sends the statement before it first waits (see [`write_and_commit`]).
async fn save_history_prepared(
    client: &Object,
    statement: &Statement,
    events: &[&TicketEvent],
) -> Result<(), PgInboxError> {
    let tickets = Column::new(events, |e| e.ticket_id());
    let from = Column::new(events, |e| e.from_status());
    let to = Column::new(events, |e| e.to_status());
    let changed_at = Column::new(events, |e| e.changed_at);
    let rest =
        tickets.encoded_len() + from.encoded_len() + to.encoded_len() + changed_at.encoded_len();
    let ids = Column::new(events, |e| e.event_id()).reserving(rest);
    client
        .execute(statement, &[&ids, &tickets, &from, &to, &changed_at])
        .await
        .map_err(PgInboxError::at(Step::InsertHistory))?;
    Ok(())
}

/// BEGIN, the events' markers and history rows ([`STORE_EVENTS`]), the dead letters and
/// COMMIT, sent one behind the other without waiting for a reply: one round trip. Returns, per
/// planned event, whether this transaction inserted its marker; says `held` once the events'
/// statement has returned. The transaction stays whole:
///
/// - every statement is prepared before any is sent, so no preparation goes out between BEGIN
///   and COMMIT;
/// - each message goes out in order: tokio-postgres encodes and queues a statement before its
///   future first waits, so one still pending after one poll is on its way, and one that
///   finished at once without a reply failed before it was sent (its parameters, or a closed
///   connection), which ends this with COMMIT unsent (the caller rolls back);
/// - a statement that fails on the server aborts the transaction, and PostgreSQL answers the
///   COMMIT that follows by rolling back: the statement's own error is returned;
/// - a BEGIN that fails returns its error whatever followed: every outcome is then unknown.
///   (Had the statements run outside a transaction, each would have been atomic on its own:
///   markers and history rows are one statement.)
///
/// The caller marks the session committed only when every reply said so.
async fn in_one_round_trip(
    transaction: &Session,
    events: &[(&TicketEvent, Origin)],
    split: usize,
    letters: &[&DeadLetter],
    mut held: MarkersHeld,
) -> Result<Vec<bool>, PgInboxError> {
    let client = transaction.client();
    let store = match events {
        [] => None,
        _ => Some(
            client
                .prepare_cached(STORE_EVENTS)
                .await
                .map_err(PgInboxError::at(Step::InsertEvents))?,
        ),
    };
    let letter_statement = match letters {
        [] => None,
        _ => Some(dead_letters::prepare(client).await?),
    };
    let mut begin = std::pin::pin!(transaction.send_begin());
    let mut insert = std::pin::pin!(async {
        let inserted = match &store {
            Some(statement) => store_events(client, statement, events, split).await,
            None => Ok(Vec::new()),
        };
        // The markers are held once the statement has ended: only then may a later batch
        // insert.
        held.say();
        inserted
    });
    let mut stored = std::pin::pin!(store_letters(client, letter_statement.as_ref(), letters));
    let began = futures::poll!(begin.as_mut());
    if let Poll::Ready(Err(error)) = began {
        return Err(error);
    }
    let first_insert = futures::poll!(insert.as_mut());
    if let Poll::Ready(Err(error)) = first_insert {
        return Err(error);
    }
    let first_store = futures::poll!(stored.as_mut());
    if let Poll::Ready(Err(error)) = first_store {
        return Err(error);
    }
    let (began, inserted, stored, committed) = futures::join!(
        resume(began, begin),
        resume(first_insert, insert),
        resume(first_store, stored),
        transaction.send_commit(),
    );
    began?;
    let inserted = inserted?;
    stored?;
    committed?;
    Ok(inserted)
}

/// The dead letters through `statement` (from `dead_letters::prepare` on `client`; `None`: no
/// letter). Sends the statement before it first waits.
async fn store_letters(
    client: &Object,
    statement: Option<&Statement>,
    letters: &[&DeadLetter],
) -> Result<(), PgInboxError> {
    match statement {
        Some(statement) => dead_letters::insert_prepared(client, statement, letters)
            .await
            .map(drop),
        None => Ok(()),
    }
}

/// A future's result: `first`, the outcome of its first poll, or else the rest of it.
async fn resume<T>(
    first: Poll<T>,
    future: std::pin::Pin<&mut impl std::future::Future<Output = T>>,
) -> T {
    match first {
        Poll::Ready(result) => result,
        Poll::Pending => future.await,
    }
}

/// The events' markers and history rows through `statement` ([`STORE_EVENTS`], prepared on
/// `client`); per planned event, whether this statement inserted its marker. Encodes and sends
/// the statement before it first waits (see [`in_one_round_trip`]).
async fn store_events(
    client: &Object,
    statement: &Statement,
    events: &[(&TicketEvent, Origin)],
    split: usize,
) -> Result<Vec<bool>, PgInboxError> {
    let partitions = Column::new(events, |(_, o)| o.partition);
    let offsets = Column::new(events, |(_, o)| o.offset);
    let tickets = Column::new(events, |(e, _)| e.ticket_id());
    let from = Column::new(events, |(e, _)| e.from_status());
    let to = Column::new(events, |(e, _)| e.to_status());
    let changed_at = Column::new(events, |(e, _)| e.changed_at);
    let rest = partitions.encoded_len()
        + offsets.encoded_len()
        + tickets.encoded_len()
        + from.encoded_len()
        + to.encoded_len()
        + changed_at.encoded_len();
    let ids = Column::new(events, |(e, _)| e.event_id()).reserving(rest);
    let planned = PlannedIds::new(events);
    let row = client
        .query_one(
            statement,
            &[
                &ids,
                &partitions,
                &offsets,
                &tickets,
                &from,
                &to,
                &changed_at,
            ],
        )
        .await
        .map_err(PgInboxError::at(Step::InsertEvents))?;
    let returned_ids: Option<TextArrayBytes> = row
        .try_get(0)
        .map_err(PgInboxError::at(Step::InsertEvents))?;
    let mut inserted = vec![false; events.len()];
    let mut returned = Returned {
        ids: &planned,
        split,
        next: 0,
    };
    for id in returned_ids.iter().flat_map(|ids| ids.iter()) {
        if let Some(i) = returned.position(id) {
            inserted[i] = true;
        }
    }
    Ok(inserted)
}

/// Per item, in input order: only the first occurrence of a new id is `Applied`.
fn outcomes(slots: &[Slot], inserted: &[bool]) -> Vec<BatchOutcome> {
    slots
        .iter()
        .map(|slot| match *slot {
            Slot::First(i) if inserted[i] => BatchOutcome::Applied,
            Slot::First(_) | Slot::Repeat => BatchOutcome::AlreadyApplied,
            Slot::DeadLetter => BatchOutcome::DeadLettered,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::fixtures::{at, event};

    #[test]
    fn the_plan_keeps_each_ids_first_occurrence_sorted_by_id() {
        let (b, a, b_again) = (event("b"), event("a"), event("b"));
        let items = [
            BatchItem::Event {
                event: &b,
                origin: at(1),
            },
            BatchItem::Event {
                event: &a,
                origin: at(2),
            },
            BatchItem::Event {
                event: &b_again,
                origin: at(3),
            },
        ];
        let Plan {
            events,
            split,
            letters,
            slots,
        } = plan(&items, &HeldElsewhere::default());
        assert_eq!(split, 2);
        assert_eq!(slots, [Slot::First(1), Slot::First(0), Slot::Repeat]);
        let planned: Vec<(&str, i64)> = events
            .iter()
            .map(|(e, o)| (e.event_id(), o.offset))
            .collect();
        assert_eq!(planned, [("a", 2), ("b", 1)]);
        assert!(letters.is_empty());
        let ids = PlannedIds::new(&events);
        assert_eq!(ids.position(2, b"b"), Some(1));
        assert_eq!(ids.position(2, b"c"), None);
    }

    #[test]
    fn ids_held_elsewhere_are_planned_after_the_others_each_run_sorted() {
        let [a, b, c, d] = ["a", "b", "c", "d"].map(event);
        let items: Vec<BatchItem<'_>> = [&d, &b, &a, &c, &b]
            .into_iter()
            .zip(1..)
            .map(|(event, offset)| BatchItem::Event {
                event,
                origin: at(offset),
            })
            .collect();
        let elsewhere = HeldElsewhere::new(vec![id_hash("c"), id_hash("a"), id_hash("zz")]);
        assert!(elsewhere.contains(&a) && !elsewhere.contains(&b));
        let plan = plan(&items, &elsewhere);
        let planned: Vec<&str> = plan.events.iter().map(|(e, _)| e.event_id()).collect();
        assert_eq!(
            (planned.as_slice(), plan.split),
            (["b", "d", "a", "c"].as_slice(), 2)
        );
        assert_eq!(
            plan.slots,
            [
                Slot::First(1),
                Slot::First(0),
                Slot::First(2),
                Slot::First(3),
                Slot::Repeat
            ]
        );
        let ids = PlannedIds::new(&plan.events);
        for (slot, id) in planned.iter().enumerate() {
            assert_eq!(ids.get(slot), Some(id.as_bytes()));
            assert_eq!(ids.position(plan.split, id.as_bytes()), Some(slot));
        }
        assert_eq!(ids.position(plan.split, b"e"), None);
        assert_eq!(ids.get(planned.len()), None);
    }

    #[test]
    fn only_the_first_occurrence_of_an_inserted_id_is_applied() {
        let (b, a, b_again) = (event("b"), event("a"), event("b"));
        let items = [
            BatchItem::Event {
                event: &b,
                origin: at(1),
            },
            BatchItem::Event {
                event: &a,
                origin: at(2),
            },
            BatchItem::Event {
                event: &b_again,
                origin: at(3),
            },
        ];
        let plan = plan(&items, &HeldElsewhere::default());
        // "a" was stored before; "b" is new, and its repeat a duplicate.
        assert_eq!(
            outcomes(&plan.slots, &[false, true]),
            [
                BatchOutcome::Applied,
                BatchOutcome::AlreadyApplied,
                BatchOutcome::AlreadyApplied
            ]
        );
        assert_eq!(
            outcomes(&plan.slots, &[false, false]),
            [
                BatchOutcome::AlreadyApplied,
                BatchOutcome::AlreadyApplied,
                BatchOutcome::AlreadyApplied
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn a_returned_id_is_found_where_a_search_finds_it_in_any_order(
            ids in proptest::collection::btree_set(0u16..200, 0..40),
            held in proptest::collection::btree_set(0u16..200, 0..20),
            asked in proptest::collection::vec(0u16..200, 0..40),
        ) {
            // Zero-padded, so the set's order is the ids' order: the plan's, in two runs.
            let name = |i: u16| format!("e{i:03}");
            let events: Vec<TicketEvent> = ids.iter().map(|&i| event(&name(i))).collect();
            let elsewhere = HeldElsewhere::new(held.iter().map(|&i| id_hash(&name(i))).collect());
            let items: Vec<BatchItem<'_>> =
                events.iter().map(|event| BatchItem::Event { event, origin: at(0) }).collect();
            let plan = plan(&items, &elsewhere);
            let expected: Vec<u16> = ids
                .iter()
                .filter(|i| !held.contains(i))
                .chain(ids.iter().filter(|i| held.contains(i)))
                .copied()
                .collect();
            let planned: Vec<String> = plan.events.iter().map(|(e, _)| e.event_id().to_owned()).collect();
            let expected_names: Vec<String> = expected.iter().map(|&i| name(i)).collect();
            proptest::prop_assert_eq!(planned, expected_names);
            let linear = |id: &[u8]| plan.events.iter().position(|(e, _)| e.event_id().as_bytes() == id);
            let planned_ids = PlannedIds::new(&plan.events);
            let mut returned = Returned { ids: &planned_ids, split: plan.split, next: 0 };
            for &i in &asked {
                proptest::prop_assert_eq!(returned.position(name(i).as_bytes()), linear(name(i).as_bytes()));
            }
            let mut in_order = Returned { ids: &planned_ids, split: plan.split, next: 0 };
            for (slot, &i) in expected.iter().enumerate() {
                proptest::prop_assert_eq!(in_order.position(name(i).as_bytes()), Some(slot));
            }
        }

        #[test]
        fn outcomes_are_those_of_searching_each_id_in_the_plan(
            ids in proptest::collection::vec(0u8..6, 0..24),
            held in proptest::collection::vec(0u8..6, 0..4),
            inserted in proptest::collection::vec(proptest::bool::ANY, 6),
        ) {
            let events: Vec<TicketEvent> = ids.iter().map(|i| event(&format!("e{i}"))).collect();
            let items: Vec<BatchItem<'_>> = events
                .iter()
                .zip(0..)
                .map(|(event, offset)| BatchItem::Event { event, origin: at(offset) })
                .collect();
            let elsewhere =
                HeldElsewhere::new(held.iter().map(|i| id_hash(&format!("e{i}"))).collect());
            let plan = plan(&items, &elsewhere);
            let ids = PlannedIds::new(&plan.events);
            let inserted = &inserted[..plan.events.len()];
            // Each item's id looked up in the plan: only the first item that carries a new id
            // is applied.
            let mut seen = vec![false; plan.events.len()];
            let searched: Vec<BatchOutcome> = events
                .iter()
                .map(|event| {
                    let i = ids.position(plan.split, event.event_id().as_bytes()).unwrap();
                    let first = !std::mem::replace(&mut seen[i], true);
                    if first && inserted[i] { BatchOutcome::Applied } else { BatchOutcome::AlreadyApplied }
                })
                .collect();
            proptest::prop_assert_eq!(outcomes(&plan.slots, inserted), searched);
        }
    }
}
