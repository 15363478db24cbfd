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

use std::collections::{HashMap, VecDeque};

use bytestring::ByteString;

use super::Origin;
use super::duplicates::cause_of_repeat;
use crate::domain::{DuplicateCause, TicketEvent};

/// How many applied events a partition remembers. Each holds its event's text, which shares
/// its record's payload: a few hundred bytes, ~100 KB per partition.
pub const REMEMBERED_PER_PARTITION: usize = 256;

/// The last `capacity` events applied, by event id (see the module docs).
#[derive(Debug)]
pub struct RecentlyApplied {
    capacity: usize,
    by_id: HashMap<ByteString, (TicketEvent, Origin)>,
    /// Ids in the order they were remembered, oldest first.
    order: VecDeque<ByteString>,
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
            by_id: HashMap::with_capacity(capacity),
            order: VecDeque::with_capacity(capacity),
        }
    }

    /// Remembers that a committed transaction inserted `event`'s marker at `origin`; the
    /// oldest is forgotten beyond the capacity.
    pub fn remember(&mut self, event: &TicketEvent, origin: Origin) {
        // An id's marker is inserted once: a second `remember` of it can only be the same
        // fact, and keeps the first.
        if self.capacity == 0 || self.by_id.contains_key(&event.event_id) {
            return;
        }
        if self.order.len() == self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.by_id.remove(&oldest);
        }
        self.by_id
            .insert(event.event_id.clone(), (event.clone(), origin));
        self.order.push_back(event.event_id.clone());
    }

    /// The cause of a duplicate of `event` delivered at `origin`, if its first copy is
    /// remembered.
    pub fn cause(&self, event: &TicketEvent, origin: Origin) -> Option<DuplicateCause> {
        let (first, first_origin) = self.by_id.get(&event.event_id)?;
        Some(cause_of_repeat(first, *first_origin, event, origin))
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::story::event_900;

    fn event(n: u32) -> TicketEvent {
        TicketEvent {
            event_id: format!("event-{n}").into(),
            ..event_900()
        }
    }

    fn at(offset: i64) -> Origin {
        Origin {
            partition: 0,
            offset,
        }
    }

    #[test]
    fn a_remembered_events_duplicate_is_a_redelivery_a_republish_or_a_conflict() {
        let mut applied = RecentlyApplied::with_capacity(4);
        applied.remember(&event(1), at(7));
        assert_eq!(
            applied.cause(&event(1), at(7)),
            Some(DuplicateCause::Redelivery)
        );
        assert_eq!(
            applied.cause(&event(1), at(9)),
            Some(DuplicateCause::Republish)
        );
        let mut changed = event(1);
        changed.to_status = "closed".into();
        assert_eq!(
            applied.cause(&changed, at(9)),
            Some(DuplicateCause::Conflicting)
        );
        assert_eq!(applied.cause(&event(2), at(9)), None);
    }

    proptest::proptest! {
        #[test]
        fn exactly_the_last_capacity_distinct_ids_are_remembered_with_their_first_origin(
            ids in proptest::collection::vec(0u32..40, 0..200),
            capacity in 0usize..16,
        ) {
            let mut applied = RecentlyApplied::with_capacity(capacity);
            for (offset, &id) in (0..).zip(&ids) {
                applied.remember(&event(id), at(offset));
            }
            proptest::prop_assert!(applied.len() <= capacity);
            // A model: a window over remembered ids, where a repeat of a remembered id is
            // ignored and a repeat of a forgotten one is remembered again.
            let mut window: VecDeque<(u32, i64)> = VecDeque::new();
            for (offset, &id) in (0..).zip(&ids) {
                if capacity == 0 || window.iter().any(|(w, _)| *w == id) {
                    continue;
                }
                if window.len() == capacity {
                    window.pop_front();
                }
                window.push_back((id, offset));
            }
            for id in 0..40u32 {
                let remembered = window.iter().find(|(w, _)| *w == id);
                // Elsewhere than its first copy: a republish, if remembered at all.
                proptest::prop_assert_eq!(
                    applied.cause(&event(id), at(1_000)),
                    remembered.map(|_| DuplicateCause::Republish)
                );
                if let Some((_, offset)) = remembered {
                    proptest::prop_assert_eq!(
                        applied.cause(&event(id), at(*offset)),
                        Some(DuplicateCause::Redelivery)
                    );
                }
            }
        }
    }
}
