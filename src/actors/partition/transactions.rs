//! The member's transactions of records in flight, counted across its partitions: a partition's
//! next batch joins its running one (pipelining) only while the count is below
//! `--transactions-in-flight`. Measured on 2 cores with 4 busy partitions (`NATIVE=1
//! scripts/cpu-profile`): two batches in flight per partition made PostgreSQL spend ~25 % more
//! CPU per record than one, and the service ~25 % more too, for a lower rate; a partition alone
//! still gains from its next batch going out while the previous one commits.
//!
//! The count is the gauge `history_transactions_in_flight` itself: an operator sees how close
//! the member runs to its bound.

use prometheus::IntGauge;

/// The count, shared by the member's partition actors, and its bound.
#[derive(Debug, Clone)]
pub struct TransactionsInFlight {
    running: IntGauge,
    bound: usize,
}

/// One transaction counted while it is held: dropped when its unit of work ends (or is given
/// up with its actor), whichever way.
#[derive(Debug)]
pub struct InFlight(IntGauge);

impl TransactionsInFlight {
    /// A count kept in `running` (a gauge of the member's metrics; it starts at 0).
    pub fn new(bound: usize, running: IntGauge) -> TransactionsInFlight {
        TransactionsInFlight { running, bound }
    }

    /// Whether another batch may join a running one.
    pub fn has_room(&self) -> bool {
        self.running() < self.bound
    }

    /// Counts a unit of work until the returned guard drops.
    pub fn enter(&self) -> InFlight {
        self.running.inc();
        InFlight(self.running.clone())
    }

    pub fn running(&self) -> usize {
        usize::try_from(self.running.get()).unwrap_or(0)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_below_the_bound_and_each_guard_counts_until_it_drops() {
        let gauge = IntGauge::new("in_flight", "test").unwrap();
        let member = TransactionsInFlight::new(2, gauge.clone());
        assert!(member.has_room());
        let first = member.enter();
        let other_partition = member.clone();
        let second = other_partition.enter();
        assert!(!member.has_room());
        assert_eq!(member.running(), 2);
        drop(first);
        assert!(member.has_room());
        assert_eq!(gauge.get(), 1);
        drop(second);
        assert_eq!(member.running(), 0);
        assert_eq!(gauge.get(), 0);
    }
}
