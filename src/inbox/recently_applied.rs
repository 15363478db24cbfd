//! What a partition applied lately: the last events whose markers its own transactions
//! inserted, so that a duplicate of one of them is classified without asking the database.
//!
//! The inbox is only ever appended to: once a transaction that inserted an event's marker has
//! committed, the marker keeps that origin and the history row that payload. A duplicate of a
//! remembered event therefore gets from [`RecentlyApplied::cause`] the cause the database's
//! query would give; an event not remembered (applied long ago, by another member, or before
//! this partition's assignment) is asked of the database as before. Pure: no I/O.
//!
//! An outbox that republishes after a crash sends the events it published just before it, so
//! their first copies are usually among the last few hundred a partition applied.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

use super::Origin;
use super::duplicates::{StoredRow, cause_of_repeat};
use crate::domain::{DuplicateCause, TicketEvent};

/// How many applied events a partition remembers at least, once it applied as many. Each is a
/// copy of its four text fields (tens of bytes), its time and its origin.
pub const REMEMBERED_PER_PARTITION: usize = 512;

/// The events of the last batches applied, each batch with its events' id hashes sorted (see
/// the module docs). Remembering copies each event's text fields into its batch's one buffer
/// and sorts the batch's id hashes; a lookup is a binary search of hashes per batch kept, and
/// one comparison of ids per hash found. Nothing of a record's payload is kept: the payload is
/// freed with its record, while its bytes are still in the caches, and a lookup reads only the
/// copies, which lie side by side.
#[derive(Debug)]
pub struct RecentlyApplied {
    capacity: usize,
    /// In the order of their lowest offsets: batches in flight together may commit in either
    /// order.
    batches: VecDeque<Batch>,
    /// The events in `batches`.
    len: usize,
}

#[derive(Debug)]
struct Batch {
    lowest: i64,
    /// Every event's text fields, one after another, in the order remembered.
    text: String,
    /// In the order remembered.
    events: Vec<Remembered>,
    /// Each event's id hash and its place in `events`, sorted: of an id given twice, the first
    /// comes first.
    hashes: Vec<(u32, u32)>,
}

/// One event as remembered: where its text fields end in its batch's `text` (in
/// [`TicketEvent`]'s order: id, ticket, from, to; the first starts where the event before it
/// ended), its time and its origin.
#[derive(Debug)]
struct Remembered {
    ends: [u32; 4],
    changed_at: DateTime<Utc>,
    origin: Origin,
}

impl Batch {
    fn with_events(events: &[(&TicketEvent, Origin)]) -> Batch {
        let bytes = events
            .iter()
            .map(|(event, _)| Batch::fields(event).iter().map(|f| f.len()).sum::<usize>())
            .sum();
        let mut batch = Batch {
            lowest: events.iter().map(|(_, o)| o.offset).min().unwrap_or(0),
            text: String::with_capacity(bytes),
            events: Vec::with_capacity(events.len()),
            hashes: Vec::with_capacity(events.len()),
        };
        for (&(event, origin), place) in events.iter().zip(0u32..) {
            let ends = Batch::fields(event).map(|field| {
                batch.text.push_str(field);
                u32::try_from(batch.text.len()).expect("a batch's text fields under 4 GiB")
            });
            batch.events.push(Remembered {
                ends,
                changed_at: event.changed_at,
                origin,
            });
            batch.hashes.push((event.id_hash(), place));
        }
        batch.hashes.sort_unstable();
        batch
    }

    fn fields(event: &TicketEvent) -> [&str; 4] {
        [
            event.event_id(),
            event.ticket_id(),
            event.from_status(),
            event.to_status(),
        ]
    }

    /// The text fields of the event at `place`.
    fn fields_at(&self, place: usize) -> [&str; 4] {
        let mut start = match place {
            0 => 0,
            _ => self.events[place - 1].ends[3] as usize,
        };
        self.events[place].ends.map(|end| {
            let field = &self.text[start..end as usize];
            start = end as usize;
            field
        })
    }

    /// The first event remembered whose id is `id` (hashed: `hash`): its stored row and
    /// origin.
    fn find(&self, id: &str, hash: u32) -> Option<(StoredRow<'_>, Origin)> {
        find_hashed(&self.hashes, hash, |place| {
            let [event_id, ticket_id, from_status, to_status] = self.fields_at(place);
            let remembered = &self.events[place];
            (event_id == id).then_some((
                StoredRow {
                    ticket_id,
                    from_status,
                    to_status,
                    changed_at: remembered.changed_at,
                },
                remembered.origin,
            ))
        })
    }
}

/// The first of the entries hashed `hash` (sorted as [`Batch::hashes`]) that `matches`
/// accepts: a hash may be shared by other ids.
fn find_hashed<T>(
    hashes: &[(u32, u32)],
    hash: u32,
    matches: impl Fn(usize) -> Option<T>,
) -> Option<T> {
    let from = hashes.partition_point(|(h, _)| *h < hash);
    hashes[from..]
        .iter()
        .take_while(|(h, _)| *h == hash)
        .find_map(|(_, place)| matches(*place as usize))
}

impl Default for RecentlyApplied {
    fn default() -> Self {
        RecentlyApplied::with_capacity(REMEMBERED_PER_PARTITION)
    }
}

impl RecentlyApplied {
    pub fn with_capacity(capacity: usize) -> RecentlyApplied {
        RecentlyApplied {
            capacity,
            batches: VecDeque::new(),
            len: 0,
        }
    }

    /// Remembers the events whose markers one committed transaction inserted, at their
    /// origins; the batches of the lowest offsets are forgotten while at least `capacity`
    /// events remain.
    pub fn remember<'a>(&mut self, applied: impl IntoIterator<Item = (&'a TicketEvent, Origin)>) {
        if self.capacity == 0 {
            return;
        }
        let applied: Vec<(&TicketEvent, Origin)> = applied.into_iter().collect();
        if applied.is_empty() {
            return;
        }
        let batch = Batch::with_events(&applied);
        let place = self
            .batches
            .partition_point(|kept| kept.lowest < batch.lowest);
        self.len += batch.events.len();
        self.batches.insert(place, batch);
        while let Some(oldest) = self.batches.front()
            && self.len - oldest.events.len() >= self.capacity
        {
            self.len -= oldest.events.len();
            self.batches.pop_front();
        }
    }

    /// The cause of a duplicate of `event` delivered at `origin`, if its first copy is
    /// remembered.
    pub fn cause(&self, event: &TicketEvent, origin: Origin) -> Option<DuplicateCause> {
        // An id's marker is inserted once: at most one batch holds it.
        let (id, hash) = (event.event_id(), event.id_hash());
        let (first, first_origin) = self.batches.iter().find_map(|batch| batch.find(id, hash))?;
        Some(cause_of_repeat(first, first_origin, event, origin))
    }

    /// The events remembered.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::fixtures::at;

    fn event(n: u32) -> TicketEvent {
        crate::inbox::fixtures::event(&format!("event-{n}"))
    }

    #[test]
    fn a_hash_shared_by_other_ids_finds_the_first_entry_that_matches() {
        // Places 0 and 2 share hash 7; place 1 has another.
        let hashes = [(3, 1), (7, 0), (7, 2)];
        let ids = ["a", "b", "c"];
        let find = |hash: u32, id: &str| {
            find_hashed(&hashes, hash, |place| (ids[place] == id).then_some(place))
        };
        assert_eq!(find(7, "a"), Some(0));
        assert_eq!(find(7, "c"), Some(2));
        assert_eq!(find(7, "b"), None);
        assert_eq!(find(3, "b"), Some(1));
        assert_eq!(find(5, "a"), None);
        assert_eq!(find(9, "a"), None);
    }

    #[test]
    fn of_an_id_remembered_twice_in_one_batch_the_first_gives_the_cause() {
        let mut applied = RecentlyApplied::with_capacity(4);
        let changed = event(1).with_to_status("closed");
        applied.remember([(&event(1), at(7)), (&changed, at(8))]);
        assert_eq!(
            applied.cause(&event(1), at(9)),
            Some(DuplicateCause::Republish)
        );
        assert_eq!(
            applied.cause(&changed, at(9)),
            Some(DuplicateCause::Conflicting)
        );
    }

    #[test]
    fn a_remembered_events_duplicate_is_a_redelivery_a_republish_or_a_conflict() {
        let mut applied = RecentlyApplied::with_capacity(4);
        applied.remember([(&event(1), at(7))]);
        assert_eq!(
            applied.cause(&event(1), at(7)),
            Some(DuplicateCause::Redelivery)
        );
        assert_eq!(
            applied.cause(&event(1), at(9)),
            Some(DuplicateCause::Republish)
        );
        let changed = event(1).with_to_status("closed");
        assert_eq!(
            applied.cause(&changed, at(9)),
            Some(DuplicateCause::Conflicting)
        );
        assert_eq!(applied.cause(&event(2), at(9)), None);
    }

    proptest::proptest! {
        #[test]
        fn the_last_batches_holding_at_least_capacity_events_are_remembered(
            batches in proptest::collection::vec(proptest::collection::vec(0u32..1000, 0..12), 0..30),
            capacity in 0usize..40,
            swaps in proptest::collection::vec(proptest::bool::ANY, 30),
        ) {
            // Distinct ids across batches, as committed markers are; offsets in order.
            let mut seen = std::collections::HashSet::new();
            let batches: Vec<Vec<(TicketEvent, Origin)>> = batches
                .into_iter()
                .map(|ids| ids.into_iter().filter(|id| seen.insert(*id)).collect::<Vec<_>>())
                .scan(0i64, |offset, ids| {
                    Some(ids.into_iter().map(|id| {
                        *offset += 1;
                        (event(id), at(*offset))
                    }).collect())
                })
                .collect();
            // Remembered as they commit: two batches in flight together, in either order.
            let mut order: Vec<usize> = (0..batches.len()).collect();
            for (i, swap) in swaps.iter().enumerate().take(batches.len().saturating_sub(1)) {
                if *swap {
                    order.swap(i, i + 1);
                }
            }
            let mut applied = RecentlyApplied::with_capacity(capacity);
            for &i in &order {
                applied.remember(batches[i].iter().map(|(e, o)| (e, *o)));
            }
            // The model: the batches of the highest offsets, kept while the lower ones hold
            // `capacity` more.
            let mut kept = 0usize;
            let mut remembered: Vec<&(TicketEvent, Origin)> = Vec::new();
            if capacity > 0 {
                for batch in batches.iter().rev().filter(|b| !b.is_empty()) {
                    if kept >= capacity {
                        break;
                    }
                    kept += batch.len();
                    remembered.extend(batch);
                }
            }
            proptest::prop_assert_eq!(applied.len(), remembered.len());
            for (event, origin) in batches.iter().flatten() {
                let expected = remembered
                    .iter()
                    .any(|(e, _)| e.event_id() == event.event_id())
                    .then_some(DuplicateCause::Redelivery);
                proptest::prop_assert_eq!(applied.cause(event, *origin), expected);
                let elsewhere = Origin { partition: 1, ..*origin };
                proptest::prop_assert_eq!(
                    applied.cause(event, elsewhere),
                    expected.map(|_| DuplicateCause::Republish)
                );
            }
        }
    }
}
