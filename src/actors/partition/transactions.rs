//! The member's transactions of records in flight, counted across its partitions: a partition's
//! next batch joins its running one (pipelining) only while the count is below
//! `--transactions-in-flight`. Measured on 2 cores with 4 busy partitions (`NATIVE=1
//! scripts/cpu-profile`): two batches in flight per partition made PostgreSQL spend ~25 % more
//! CPU per record than one, and the service ~25 % more too, for a lower rate; a partition alone
//! still gains from its next batch going out while the previous one commits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The count, shared by the member's partition actors, and its bound.
#[derive(Debug, Clone)]
pub struct TransactionsInFlight {
    running: Arc<AtomicUsize>,
    bound: usize,
}

/// One transaction counted while it is held: dropped when its unit of work ends (or is given
/// up with its actor), whichever way.
#[derive(Debug)]
pub struct InFlight(Arc<AtomicUsize>);

impl TransactionsInFlight {
    pub fn new(bound: usize) -> TransactionsInFlight {
        TransactionsInFlight {
            running: Arc::new(AtomicUsize::new(0)),
            bound,
        }
    }

    /// Whether another batch may join a running one.
    pub fn has_room(&self) -> bool {
        self.running.load(Ordering::Relaxed) < self.bound
    }

    /// Counts a unit of work until the returned guard drops.
    pub fn enter(&self) -> InFlight {
        self.running.fetch_add(1, Ordering::Relaxed);
        InFlight(self.running.clone())
    }

    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_below_the_bound_and_each_guard_counts_until_it_drops() {
        let member = TransactionsInFlight::new(2);
        assert!(member.has_room());
        let first = member.enter();
        let other_partition = member.clone();
        let second = other_partition.enter();
        assert!(!member.has_room());
        assert_eq!(member.running(), 2);
        drop(first);
        assert!(member.has_room());
        drop(second);
        assert_eq!(member.running(), 0);
    }
}
