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

use super::Origin;
use super::duplicates::cause_of_repeat;
use crate::domain::{DuplicateCause, TicketEvent};

/// How many applied events a partition remembers at least, once it applied as many. Each holds
/// its event's text, which shares its record's payload: a few hundred bytes each.
pub const REMEMBERED_PER_PARTITION: usize = 512;

/// The events of the last batches applied, each batch's sorted by event id (see the module
/// docs). Remembering costs a clone of each event (its text is shared, not copied) and a sort
/// of ids that mostly arrive in order; a lookup is a binary search per batch kept.
#[derive(Debug)]
pub struct RecentlyApplied {
    capacity: usize,
    /// Each batch with its lowest offset, in that order: batches in flight together may commit
    /// in either order.
    batches: VecDeque<(i64, Vec<(TicketEvent, Origin)>)>,
    /// The events in `batches`.
    len: usize,
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
        let mut batch: Vec<(TicketEvent, Origin)> = applied
            .into_iter()
            .map(|(event, origin)| (event.clone(), origin))
            .collect();
        if batch.is_empty() {
            return;
        }
        let lowest = batch
            .iter()
            .map(|(_, o)| o.offset)
            .min()
            .unwrap_or_default();
        let place = self.batches.partition_point(|(kept, _)| *kept < lowest);
        // Stable, so that of an id given twice the first stays first.
        batch.sort_by(|a, b| a.0.event_id().cmp(b.0.event_id()));
        self.len += batch.len();
        self.batches.insert(place, (lowest, batch));
        while let Some((_, oldest)) = self.batches.front()
            && self.len - oldest.len() >= self.capacity
        {
            self.len -= oldest.len();
            self.batches.pop_front();
        }
    }

    /// The cause of a duplicate of `event` delivered at `origin`, if its first copy is
    /// remembered.
    pub fn cause(&self, event: &TicketEvent, origin: Origin) -> Option<DuplicateCause> {
        // An id's marker is inserted once: at most one batch holds it. A batch whose id range
        // leaves the id out is passed over with two comparisons (with ordered ids, all but
        // one are).
        let id = event.event_id();
        self.batches.iter().find_map(|(_, batch)| {
            let (lowest, highest) = (batch.first()?, batch.last()?);
            if id < lowest.0.event_id() || id > highest.0.event_id() {
                return None;
            }
            let found = batch.partition_point(|(e, _)| e.event_id() < id);
            let (first, first_origin) = batch.get(found)?;
            (first.event_id() == id).then(|| cause_of_repeat(first, *first_origin, event, origin))
        })
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
