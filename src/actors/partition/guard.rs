//! The guard against mass dead-lettering as a partition actor sees it (pure; after Arroyo's
//! `DlqLimit.max_consecutive_count`, counted per partition). A record the database rejects for
//! good is dead-lettered so that it cannot freeze its partition; but more than `limit` records
//! in a row rejected means the fault is the database's (a bad migration, a trigger gone wrong),
//! not the records', and draining the topic into `dead_letters` would turn one incident into
//! thousands of replays. Past the limit the guard engages: rejected records stay `Unknown`, the
//! partition is stuck with that reason, and an alert fires.
//!
//! The guard itself is a row of the database (`inbox::guards`), which decides each rejected
//! record in the transaction that counts it, and which the partition's next owner reads when
//! its actor starts: a restart, a rebalance or a live rewind hands it on engaged, instead of
//! letting every new owner dead-letter another `limit` records. This is the actor's copy, for
//! its status, its metric and its log: the row as read at the start or as the last verdict or
//! release left it, and the records this actor held (each counts once, however often retried).
//!
//! "In a row" is in the order the database answered: a record *stored* (applied) ends the run
//! and releases the guard — the database takes rows again, so the fault was fixed or the run was
//! a burst of bad records. A duplicate does not (it proves only the inbox insert), and neither
//! do malformed records, operators' skips nor failures of other kinds.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use crate::inbox::guards::GuardRow;

/// What a report did to the guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Engaged,
    Released,
}

/// The actor's copy of its partition's guard.
#[derive(Debug, Clone)]
pub struct Guard {
    limit: u32,
    /// The database's row as last seen; `None` until it was read or a verdict came.
    row: Option<GuardRow>,
    /// The records this actor saw held since the last stored record.
    held: BTreeSet<i64>,
}

impl Guard {
    /// A guard that lets `limit` records in a row be dead-lettered (0: none).
    pub fn new(limit: u32) -> Guard {
        Guard {
            limit,
            row: None,
            held: BTreeSet::new(),
        }
    }

    /// The row read when the actor started. A verdict or a release that came first is newer,
    /// and stays.
    pub fn loaded(&mut self, row: GuardRow) -> Option<Change> {
        if self.row.is_some() {
            return None;
        }
        self.set(row)
    }

    /// The database dead-lettered (`held` false) or held the record at `offset`, and left its
    /// row as `row`.
    pub fn decided(&mut self, offset: i64, row: GuardRow, held: bool) -> Option<Change> {
        if held {
            self.held.insert(offset);
        }
        self.set(row)
    }

    /// Whether a record stored must end a run in the database: there is one, or the row is not
    /// known yet.
    pub fn wants_release(&self) -> bool {
        self.row
            .is_none_or(|row| row.dead_lettered > 0 || row.engaged())
    }

    /// The database ended the run (a record was stored).
    pub fn released(&mut self) -> Option<Change> {
        self.held.clear();
        self.set(GuardRow::default())
    }

    fn set(&mut self, row: GuardRow) -> Option<Change> {
        let was = self.engaged();
        self.row = Some(row);
        match (was, self.engaged()) {
            (false, true) => Some(Change::Engaged),
            (true, false) => Some(Change::Released),
            _ => None,
        }
    }

    /// Whether dead-lettering is stopped.
    pub fn engaged(&self) -> bool {
        self.row.is_some_and(|row| row.engaged())
    }

    /// Since when, as the database says.
    pub fn engaged_at(&self) -> Option<DateTime<Utc>> {
        self.row.and_then(|row| row.engaged_at)
    }

    /// Whether the row was read (or a verdict came) yet.
    pub fn known(&self) -> bool {
        self.row.is_some()
    }

    /// Records dead-lettered in the run, by any owner of the partition.
    pub fn dead_lettered(&self) -> u32 {
        self.row.map_or(0, |row| row.dead_lettered)
    }

    /// Records rejected in a row so far: dead-lettered in the run, and held by this actor (at
    /// least one when engaged: an earlier owner held one).
    pub fn consecutive(&self) -> usize {
        let held = self.held.len().max(usize::from(self.engaged()));
        self.dead_lettered() as usize + held
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(dead_lettered: u32, engaged: bool) -> GuardRow {
        GuardRow {
            dead_lettered,
            engaged_at: engaged.then(Utc::now),
            engaged_offset: engaged.then_some(3),
        }
    }

    #[test]
    fn verdicts_up_to_the_bound_change_nothing_and_the_first_held_record_engages_it() {
        let mut guard = Guard::new(3);
        for offset in 0..3 {
            assert_eq!(
                guard.decided(offset, row(offset as u32 + 1, false), false),
                None
            );
        }
        assert!(!guard.engaged());
        assert_eq!(guard.decided(3, row(3, true), true), Some(Change::Engaged));
        assert!(guard.engaged());
        assert_eq!(guard.decided(4, row(3, true), true), None, "engaged once");
        assert_eq!(guard.consecutive(), 5);
    }

    #[test]
    fn a_record_held_again_counts_once() {
        let mut guard = Guard::new(2);
        for _ in 0..5 {
            guard.decided(7, row(2, true), true);
        }
        assert_eq!(guard.consecutive(), 3);
    }

    #[test]
    fn a_guard_read_engaged_at_the_start_is_engaged_from_the_start() {
        let mut guard = Guard::new(3);
        assert!(!guard.known() && guard.wants_release());
        assert_eq!(guard.loaded(row(3, true)), Some(Change::Engaged));
        assert!(guard.engaged() && guard.known());
        assert_eq!(guard.dead_lettered(), 3);
        assert_eq!(guard.consecutive(), 4, "more than the limit: one was held");
        assert!(guard.engaged_at().is_some());
    }

    #[test]
    fn a_verdict_before_the_read_is_newer_and_stays() {
        let mut guard = Guard::new(3);
        guard.decided(9, row(3, true), true);
        assert_eq!(guard.loaded(GuardRow::default()), None);
        assert!(guard.engaged());
        let mut released = Guard::new(3);
        released.released();
        assert_eq!(released.loaded(row(3, true)), None);
        assert!(!released.engaged());
    }

    #[test]
    fn a_release_ends_the_run_and_only_a_run_wants_one() {
        let mut guard = Guard::new(2);
        guard.loaded(GuardRow::default());
        assert!(!guard.wants_release(), "nothing to end");
        guard.decided(0, row(1, false), false);
        assert!(guard.wants_release(), "a run, not engaged yet");
        guard.decided(1, row(2, false), false);
        guard.decided(2, row(2, true), true);
        assert_eq!(guard.released(), Some(Change::Released));
        assert!(!guard.engaged() && !guard.wants_release());
        assert_eq!(guard.consecutive(), 0);
        assert_eq!(guard.released(), None, "released once");
    }

    #[test]
    fn a_limit_of_zero_engages_on_the_first_held_record() {
        let mut guard = Guard::new(0);
        assert_eq!(guard.decided(0, row(0, true), true), Some(Change::Engaged));
        assert_eq!(guard.dead_lettered(), 0);
    }
}
