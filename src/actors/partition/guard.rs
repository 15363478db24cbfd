//! The guard against mass dead-lettering (pure; after Arroyo's `DlqLimit.max_consecutive_count`,
//! counted per partition). A record the database rejects for good is dead-lettered so that it
//! cannot freeze its partition; but more than `limit` records in a row rejected means the fault
//! is the database's (a bad migration, a trigger gone wrong), not the records', and draining the
//! topic into `dead_letters` would turn one incident into thousands of replays. Past the limit
//! the guard engages: rejected records stay `Unknown`, the partition is stuck with that reason,
//! and an alert fires.
//!
//! "In a row" is in the order the database answered: a record *stored* (applied) ends the run
//! and releases the guard — the database takes rows again, so the fault was fixed or the run was
//! a burst of bad records. A duplicate does not (it proves only the inbox insert), and neither
//! do malformed records, operators' skips nor failures of other kinds. A record rejected again
//! (its dead letter could not be stored, or it was held) counts once.

use std::collections::BTreeSet;

/// What a report did to the guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Engaged,
    Released,
}

/// The run of rejected records of one partition.
#[derive(Debug, Clone)]
pub struct Guard {
    limit: u32,
    /// The offsets rejected since the last stored record.
    run: BTreeSet<i64>,
}

impl Guard {
    /// A guard that lets `limit` records in a row be dead-lettered (0: none).
    pub fn new(limit: u32) -> Guard {
        Guard {
            limit,
            run: BTreeSet::new(),
        }
    }

    /// Whether a record the database rejects now may be dead-lettered.
    pub fn may_dead_letter(&self) -> bool {
        self.run.len() < self.limit as usize
    }

    /// Whether dead-lettering is stopped.
    pub fn engaged(&self) -> bool {
        self.run.len() > self.limit as usize
    }

    /// Records rejected in a row so far.
    pub fn consecutive(&self) -> usize {
        self.run.len()
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The database rejected the record at `offset` (dead-lettered or held).
    pub fn rejected(&mut self, offset: i64) -> Option<Change> {
        let was = self.engaged();
        self.run.insert(offset);
        (!was && self.engaged()).then_some(Change::Engaged)
    }

    /// A record was stored.
    pub fn stored(&mut self) -> Option<Change> {
        let was = self.engaged();
        self.run.clear();
        was.then_some(Change::Released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_to_the_limit_rejected_records_are_dead_lettered_and_the_next_one_is_held() {
        let mut guard = Guard::new(3);
        for offset in 0..3 {
            assert!(guard.may_dead_letter(), "record {offset}");
            assert_eq!(guard.rejected(offset), None);
        }
        assert!(!guard.may_dead_letter(), "a fourth in a row is held");
        assert!(!guard.engaged());
        assert_eq!(guard.rejected(3), Some(Change::Engaged));
        assert!(guard.engaged());
        assert_eq!(guard.rejected(4), None, "engaged once");
        assert_eq!(guard.consecutive(), 5);
    }

    #[test]
    fn a_stored_record_ends_the_run_and_releases_the_guard() {
        let mut guard = Guard::new(2);
        guard.rejected(0);
        guard.rejected(1);
        assert_eq!(guard.stored(), None, "not engaged yet");
        assert!(guard.may_dead_letter());
        for offset in 2..5 {
            guard.rejected(offset);
        }
        assert!(guard.engaged());
        assert_eq!(guard.stored(), Some(Change::Released));
        assert!(guard.may_dead_letter() && !guard.engaged());
        assert_eq!(guard.consecutive(), 0);
    }

    #[test]
    fn a_record_rejected_again_counts_once() {
        let mut guard = Guard::new(2);
        for _ in 0..5 {
            guard.rejected(7);
        }
        assert_eq!(guard.consecutive(), 1);
        assert!(guard.may_dead_letter());
    }

    #[test]
    fn a_limit_of_zero_dead_letters_no_rejected_record() {
        let mut guard = Guard::new(0);
        assert!(!guard.may_dead_letter());
        assert_eq!(guard.rejected(0), Some(Change::Engaged));
    }
}
