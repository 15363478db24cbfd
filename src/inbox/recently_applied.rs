//! What a partition applied lately: the last events whose markers its own transactions
//! inserted, so that a duplicate of one of them is classified without asking the database.
//!
//! The inbox is only ever appended to: once a transaction that inserted an event's marker has
//! committed, the marker keeps that origin and the history row that payload. A duplicate of a
//! remembered event therefore gets from [`RecentlyApplied::settle`] the cause the database's
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

/// The events of the last batches applied, each batch with its applied events' id hashes
/// sorted (see the module docs). A unit's events are copied ([`Copies`]); remembering keeps
/// that copy and sorts the applied events' id hashes; a lookup is a binary search of hashes
/// per batch kept, and one comparison of ids per hash found. Nothing of a record's payload is
/// kept: the payload is freed with its record, and a lookup reads only the copies, which lie
/// side by side.
#[derive(Debug)]
pub struct RecentlyApplied {
    capacity: usize,
    /// In the order of their lowest offsets: batches in flight together may commit in either
    /// order.
    batches: VecDeque<Batch>,
    /// The applied events in `batches`.
    len: usize,
}

/// A unit of work's events: their text fields one after another in one buffer. A first pass is
/// copied as it starts, while its records' payloads are still in the caches from their parse
/// (read again once the transaction has committed, a payload is a cache miss per field); a
/// retry, whose payloads waited in the backlog, once its transaction has committed. A place
/// per unit, in order; a dead letter's place is empty.
#[derive(Debug)]
pub struct Copies {
    text: String,
    events: Vec<Copied>,
}

/// Where an event's text fields end in [`Copies::text`] (in [`TicketEvent`]'s order: id,
/// ticket, from, to; the first starts where the place before it ended), its id hash, time and
/// origin. `None` for a dead letter.
#[derive(Debug)]
struct Copied {
    ends: [u32; 4],
    id_hash: u32,
    changed_at: DateTime<Utc>,
    origin: Option<Origin>,
}

/// One copied event, as the classification reads it.
struct Entry<'a> {
    id: &'a str,
    id_hash: u32,
    row: StoredRow<'a>,
    origin: Origin,
}

impl Copies {
    /// Copies the events of a unit of work's places (`None`: a dead letter).
    pub fn of<'a>(
        places: impl ExactSizeIterator<Item = Option<(&'a TicketEvent, Origin)>> + Clone,
    ) -> Copies {
        // Sized up front, from the lengths the events keep (no payload is read for them), so
        // that the buffer is never grown and copied again.
        let bytes = places
            .clone()
            .flatten()
            .map(|(event, _)| Copies::fields(event).iter().map(|f| f.len()).sum::<usize>())
            .sum();
        let mut copies = Copies {
            text: String::with_capacity(bytes),
            events: Vec::with_capacity(places.len()),
        };
        for place in places {
            let Some((event, origin)) = place else {
                let end = copies.text_len();
                copies.events.push(Copied {
                    ends: [end; 4],
                    id_hash: 0,
                    changed_at: DateTime::<Utc>::MIN_UTC,
                    origin: None,
                });
                continue;
            };
            let ends = Copies::fields(event).map(|field| {
                copies.text.push_str(field);
                copies.text_len()
            });
            copies.events.push(Copied {
                ends,
                id_hash: event.id_hash(),
                changed_at: event.changed_at,
                origin: Some(origin),
            });
        }
        copies
    }

    fn fields(event: &TicketEvent) -> [&str; 4] {
        [
            event.event_id(),
            event.ticket_id(),
            event.from_status(),
            event.to_status(),
        ]
    }

    fn text_len(&self) -> u32 {
        u32::try_from(self.text.len()).expect("a unit's text fields under 4 GiB")
    }

    /// The event at `place`; `None` for a dead letter's.
    fn entry(&self, place: usize) -> Option<Entry<'_>> {
        let copied = self.events.get(place)?;
        let origin = copied.origin?;
        let mut start = match place {
            0 => 0,
            _ => self.events[place - 1].ends[3] as usize,
        };
        let [id, ticket_id, from_status, to_status] = copied.ends.map(|end| {
            let field = &self.text[start..end as usize];
            start = end as usize;
            field
        });
        Some(Entry {
            id,
            id_hash: copied.id_hash,
            row: StoredRow {
                ticket_id,
                from_status,
                to_status,
                changed_at: copied.changed_at,
            },
            origin,
        })
    }
}

#[derive(Debug)]
struct Batch {
    lowest: i64,
    copies: Copies,
    /// Each applied event's id hash and its place in `copies`, sorted: of an id given twice,
    /// the first comes first.
    hashes: Vec<(u32, u32)>,
}

impl Batch {
    /// `copies` with the events at the places `applied`.
    fn new(copies: Copies, applied: &[usize]) -> Batch {
        let mut lowest = i64::MAX;
        let mut hashes: Vec<(u32, u32)> = Vec::with_capacity(applied.len());
        for &place in applied {
            // A dead letter's place has no origin, and is never applied.
            let Some(copied) = copies.events.get(place) else {
                continue;
            };
            let Some(origin) = copied.origin else {
                continue;
            };
            lowest = lowest.min(origin.offset);
            let place = u32::try_from(place).expect("a unit's places fit in u32");
            hashes.push((copied.id_hash, place));
        }
        hashes.sort_unstable();
        Batch {
            lowest,
            copies,
            hashes,
        }
    }

    /// The first applied event whose id is `id` (hashed: `hash`).
    fn find(&self, id: &str, hash: u32) -> Option<Entry<'_>> {
        find_hashed(&self.hashes, hash, |place| {
            self.copies.entry(place).filter(|entry| entry.id == id)
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

    /// Takes in a committed unit of work whose events were copied into `copies` when it
    /// started: gives the cause of each duplicate at the places `duplicates` whose first copy
    /// it applied or one remembered (in that order; `None`: ask the database), then remembers
    /// the events at the places `applied`. The batches of the lowest offsets are forgotten
    /// while at least `capacity` applied events remain.
    pub fn settle(
        &mut self,
        copies: Copies,
        applied: &[usize],
        duplicates: &[usize],
    ) -> Vec<Option<DuplicateCause>> {
        if self.capacity == 0 {
            return vec![None; duplicates.len()];
        }
        let batch = Batch::new(copies, applied);
        let causes = duplicates
            .iter()
            .map(|&place| {
                let repeat = batch.copies.entry(place)?;
                let (id, hash) = (repeat.id, repeat.id_hash);
                // An id's marker is inserted once: at most one batch holds it.
                let first = batch
                    .find(id, hash)
                    .or_else(|| self.batches.iter().find_map(|kept| kept.find(id, hash)))?;
                Some(cause_of_repeat(
                    first.row,
                    first.origin,
                    repeat.row,
                    repeat.origin,
                ))
            })
            .collect();
        if !batch.hashes.is_empty() {
            self.keep(batch);
        }
        causes
    }

    fn keep(&mut self, batch: Batch) {
        let place = self
            .batches
            .partition_point(|kept| kept.lowest < batch.lowest);
        self.len += batch.hashes.len();
        self.batches.insert(place, batch);
        while let Some(oldest) = self.batches.front()
            && self.len - oldest.hashes.len() >= self.capacity
        {
            self.len -= oldest.hashes.len();
            self.batches.pop_front();
        }
    }

    /// The applied events remembered.
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

    /// Settles a unit of work that applied all of `events`.
    fn remember(applied: &mut RecentlyApplied, events: &[(&TicketEvent, Origin)]) {
        let copies = Copies::of(events.iter().map(|&(event, origin)| Some((event, origin))));
        let places: Vec<usize> = (0..events.len()).collect();
        applied.settle(copies, &places, &[]);
    }

    /// The cause given to a duplicate of `event` at `origin`, settled as a unit of its own.
    fn cause(
        applied: &mut RecentlyApplied,
        event: &TicketEvent,
        origin: Origin,
    ) -> Option<DuplicateCause> {
        let copies = Copies::of([Some((event, origin))].into_iter());
        applied.settle(copies, &[], &[0]).pop().flatten()
    }

    #[test]
    fn a_duplicate_of_an_event_its_own_unit_applied_is_classified_from_it() {
        let mut applied = RecentlyApplied::with_capacity(4);
        let changed = event(1).with_to_status("closed");
        let places = [
            Some((&event(1), at(7))),
            None,
            Some((&event(1), at(9))),
            Some((&changed, at(10))),
            Some((&event(2), at(11))),
        ];
        let causes = applied.settle(Copies::of(places.into_iter()), &[0], &[1, 2, 3, 4]);
        assert_eq!(
            causes,
            [
                None,
                Some(DuplicateCause::Republish),
                Some(DuplicateCause::Conflicting),
                None
            ]
        );
        assert_eq!(applied.len(), 1);
        assert_eq!(
            cause(&mut applied, &event(1), at(7)),
            Some(DuplicateCause::Redelivery)
        );
        // Neither a duplicate nor a dead letter is remembered.
        assert_eq!(cause(&mut applied, &event(2), at(12)), None);
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
        remember(&mut applied, &[(&event(1), at(7)), (&changed, at(8))]);
        assert_eq!(
            cause(&mut applied, &event(1), at(9)),
            Some(DuplicateCause::Republish)
        );
        assert_eq!(
            cause(&mut applied, &changed, at(9)),
            Some(DuplicateCause::Conflicting)
        );
    }

    #[test]
    fn a_remembered_events_duplicate_is_a_redelivery_a_republish_or_a_conflict() {
        let mut applied = RecentlyApplied::with_capacity(4);
        remember(&mut applied, &[(&event(1), at(7))]);
        assert_eq!(
            cause(&mut applied, &event(1), at(7)),
            Some(DuplicateCause::Redelivery)
        );
        assert_eq!(
            cause(&mut applied, &event(1), at(9)),
            Some(DuplicateCause::Republish)
        );
        let changed = event(1).with_to_status("closed");
        assert_eq!(
            cause(&mut applied, &changed, at(9)),
            Some(DuplicateCause::Conflicting)
        );
        assert_eq!(cause(&mut applied, &event(2), at(9)), None);
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
                let events: Vec<(&TicketEvent, Origin)> = batches[i].iter().map(|(e, o)| (e, *o)).collect();
                remember(&mut applied, &events);
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
                proptest::prop_assert_eq!(cause(&mut applied, event, *origin), expected);
                let elsewhere = Origin { partition: 1, ..*origin };
                proptest::prop_assert_eq!(
                    cause(&mut applied, event, elsewhere),
                    expected.map(|_| DuplicateCause::Republish)
                );
            }
        }
    }
}
