//! When the consumer's position of a partition can be believed before a record of its
//! assignment was delivered (pure): the watermark steps over offsets without records (a
//! transaction's commit marker, aborted records) only up to a position of this assignment.
//!
//! librdkafka's position of a partition is the offset after the last message or control
//! message the application polled from its queue. It is reset (to "invalid") when fetching of
//! the partition stops after it was given up, asynchronously, and by a seek, before the seek
//! returns; nothing else moves it but polling. So at an assignment, a valid position is the
//! previous assignment's until it changes: once librdkafka reset it, or it moved to another
//! value, it is this assignment's. A first assignment in the process starts invalid, and so does
//! a partition sought by a live rewind; one restarted by a live rewind without a seek keeps
//! whatever its drained assignment knew.
//!
//! A position that changed to exactly the stale value is not believed: a partition in that
//! rare case steps over its record-less offsets only once a record comes, as before.

/// Whether the position of an assignment's partition can be believed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionTrust {
    /// The position is this assignment's (or invalid).
    Current,
    /// The position may still be `0`, the previous assignment's.
    Stale(i64),
}

impl PositionTrust {
    /// At an assignment, from the position librdkafka reports before it starts fetching the
    /// partition (`None`: invalid).
    pub fn at_assignment(position: Option<i64>) -> PositionTrust {
        match position {
            None => PositionTrust::Current,
            Some(stale) => PositionTrust::Stale(stale),
        }
    }

    /// Takes in an observed position (`None`: invalid); the position of this assignment, if it
    /// is one.
    pub fn observe(&mut self, position: Option<i64>) -> Option<i64> {
        match (*self, position) {
            (PositionTrust::Current, position) => position,
            (PositionTrust::Stale(stale), Some(position)) if position == stale => None,
            (PositionTrust::Stale(_), position) => {
                *self = PositionTrust::Current;
                position
            }
        }
    }
}

/// Whether the consumer's `position` (of this assignment) passed offsets without records after
/// the last offset the watermark accounts for (`None`: nothing delivered in this assignment).
pub fn passed_offsets_without_records(accounted: Option<i64>, position: i64) -> bool {
    match accounted {
        Some(last) => position > last + 1,
        None => position > 0,
    }
}

/// Whether an observed position says what was read, given `error_reach`: the furthest a read
/// of the partition's queue moved the position for an error alone (see
/// [`crate::kafka::queue::PartitionQueue::error_reach`]). librdkafka's batch read moves the
/// position past an error's offset as it does past a record's: after a fetch that failed at
/// offset `e`, the position reads `e + 1` although nothing at `e` was read. A position no
/// further than that is not believed; one further is (a message after `e` was read, so `e`
/// was too: fetching goes in order).
///
/// The price: a commit marker at `e` read after the failed fetch leaves the position at
/// `e + 1` too, so a partition whose log ends with it is committed up to it only once a record
/// comes after it.
pub fn believable(position: i64, error_reach: Option<i64>) -> bool {
    error_reach.is_none_or(|reach| position > reach)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_assigned_while_its_position_is_invalid_believes_the_next_position() {
        let mut trust = PositionTrust::at_assignment(None);
        assert_eq!(trust.observe(None), None);
        assert_eq!(trust.observe(Some(51)), Some(51));
    }

    #[test]
    fn a_stale_position_is_not_believed_until_it_changes() {
        // The previous assignment ended at 120; this one starts at the committed 50.
        let mut trust = PositionTrust::at_assignment(Some(120));
        assert_eq!(trust.observe(Some(120)), None, "still the previous one");
        assert_eq!(trust.observe(Some(51)), Some(51), "moved: ours");
        assert_eq!(trust.observe(Some(120)), Some(120), "believed from now on");
    }

    #[test]
    fn a_stale_position_reset_by_librdkafka_is_followed_by_a_believed_one() {
        let mut trust = PositionTrust::at_assignment(Some(120));
        assert_eq!(trust.observe(None), None);
        assert_eq!(trust, PositionTrust::Current);
        assert_eq!(
            trust.observe(Some(120)),
            Some(120),
            "the same value, but after the reset: ours"
        );
    }

    #[test]
    fn a_trailing_marker_is_passed_after_the_last_record_or_before_any() {
        assert!(passed_offsets_without_records(Some(49), 51));
        assert!(!passed_offsets_without_records(Some(49), 50));
        assert!(passed_offsets_without_records(None, 51));
        assert!(!passed_offsets_without_records(None, 0));
    }

    #[test]
    fn a_position_no_further_than_an_errors_reach_is_not_believed() {
        assert!(believable(51, None));
        // A fetch failed at 50: the position reads 51 with nothing at 50 read.
        assert!(!believable(51, Some(51)));
        assert!(!believable(40, Some(51)));
        // Something after 50 was read.
        assert!(believable(52, Some(51)));
    }
}
