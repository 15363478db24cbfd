//! The contiguous-resolved watermark of one partition (SPEC §5): pure, no I/O.
//!
//! Records are reported in delivery order with their first outcome, resolved or not; an
//! unresolved record is resolved later. The commit position is the last offset of the longest
//! all-resolved run of reported records, plus one. Contiguity is over the offsets actually
//! reported, never over integers, so gaps left by transaction markers or compaction never stall it.

use std::collections::BTreeMap;

/// The contiguous-resolved watermark of one Kafka partition.
///
/// Memory is O(unresolved records): for each unresolved offset it keeps only the offset
/// reported just before it, plus the highest reported offset. Resolved records after a blocker
/// leave no trace; when the blocker resolves, the next blocker's predecessor (or the highest
/// reported offset) tells how far the position jumps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watermark {
    /// Unresolved offset → the offset reported just before it (`None`: it was the first report).
    unresolved: BTreeMap<i64, Option<i64>>,
    /// The highest offset reported so far.
    highest: Option<i64>,
}

impl Watermark {
    /// An empty watermark: nothing reported, no position.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reports the first outcome of the record at `offset`. Offsets must be reported in
    /// strictly increasing order; a report at or below the highest reported offset is ignored
    /// and returns false (no log, no panic). Returns true when accepted.
    pub fn report(&mut self, offset: i64, resolved: bool) -> bool {
        let predecessor = self.highest;
        if predecessor.is_some_and(|highest| offset <= highest) {
            return false;
        }
        debug_assert!(
            self.unresolved
                .keys()
                .next_back()
                .is_none_or(|&last| Some(last) <= predecessor),
            "an unresolved offset lies above the highest reported one"
        );
        if !resolved {
            self.unresolved.insert(offset, predecessor);
        }
        self.highest = Some(offset);
        true
    }

    /// Marks a previously reported unresolved record resolved. Returns true if it was
    /// unresolved (false: unknown offset or already resolved — ignored).
    pub fn resolve(&mut self, offset: i64) -> bool {
        self.unresolved.remove(&offset).is_some()
    }

    /// The Kafka position to commit: last contiguous resolved offset + 1; `None` while no
    /// reported record is resolved contiguously from the start (i.e. nothing reported yet, or
    /// the first reported record is unresolved).
    pub fn position(&self) -> Option<i64> {
        let last_contiguous = match self.unresolved.first_key_value() {
            Some((&blocker, &predecessor)) => {
                debug_assert!(predecessor.is_none_or(|p| p < blocker));
                debug_assert!(self.highest >= Some(blocker));
                predecessor
            }
            None => self.highest,
        };
        // Saturating: Kafka offsets never reach i64::MAX, but this must not panic if one did.
        last_contiguous.map(|offset| offset.saturating_add(1))
    }

    /// Number of reported records still unresolved.
    pub fn unresolved_count(&self) -> usize {
        self.unresolved.len()
    }

    /// The lowest unresolved offset, if any (the record blocking the position).
    pub fn first_unresolved(&self) -> Option<i64> {
        self.unresolved.keys().next().copied()
    }

    /// Where reading must resume so that nothing reported and unresolved is skipped: the
    /// position, or the first unresolved offset while nothing before it resolved (`None`:
    /// nothing reported).
    pub fn resume_at(&self) -> Option<i64> {
        self.position().or(self.first_unresolved())
    }

    /// The highest reported offset, if any.
    pub fn highest_reported(&self) -> Option<i64> {
        self.highest
    }

    /// Steps over offsets that hold no record for us (transaction markers, aborted records):
    /// the consumer's position is `next_position`, and the last record delivered before it was
    /// `after` (`None`: no record was delivered since the partition was assigned, so everything
    /// below `next_position` was committed by the group or holds no record). Accepted only when
    /// `after` is exactly the highest reported offset, so no delivered record can be skipped;
    /// then the gap counts as one resolved record. Returns whether it moved.
    ///
    /// Without this, a partition ending in a transaction marker would never commit its end.
    pub fn skip_gap(&mut self, after: Option<i64>, next_position: i64) -> bool {
        if self.highest != after {
            return false;
        }
        let last_skipped = next_position.saturating_sub(1);
        if after.is_some_and(|after| last_skipped <= after) || last_skipped < 0 {
            return false;
        }
        self.highest = Some(last_skipped);
        true
    }

    /// Number of per-record entries held, to check that memory follows unresolved records.
    #[cfg(test)]
    fn tracked_entries(&self) -> usize {
        self.unresolved.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reported(records: &[(i64, bool)]) -> Watermark {
        let mut watermark = Watermark::new();
        for &(offset, resolved) in records {
            assert!(watermark.report(offset, resolved));
        }
        watermark
    }

    #[test]
    fn a_trailing_transaction_marker_is_stepped_over_once_the_last_record_is_reported() {
        let mut w = Watermark::new();
        w.report(10, true);
        w.report(11, true);
        // Offset 12 is a commit marker: the consumer's position is 13.
        assert!(w.skip_gap(Some(11), 13));
        assert_eq!(w.position(), Some(13));
        // The next record continues from there.
        assert!(w.report(13, true));
        assert_eq!(w.position(), Some(14));
    }

    #[test]
    fn a_gap_is_not_skipped_while_a_delivered_record_is_unreported() {
        let mut w = Watermark::new();
        w.report(10, true);
        // Record 11 was delivered but not reported yet (in flight).
        assert!(!w.skip_gap(Some(11), 13));
        assert_eq!(w.position(), Some(11));
        assert!(!w.skip_gap(Some(10), 11), "no gap to skip");
        assert!(!w.skip_gap(None, 13), "records were reported");
    }

    #[test]
    fn a_skipped_gap_after_an_unresolved_record_waits_for_it() {
        let mut w = Watermark::new();
        w.report(10, true);
        w.report(11, false);
        assert!(w.skip_gap(Some(11), 13));
        assert_eq!(w.position(), Some(11), "the Unknown record still blocks");
        w.resolve(11);
        assert_eq!(w.position(), Some(13));
    }

    #[test]
    fn a_partition_that_starts_at_a_transaction_marker_commits_past_it_before_any_record() {
        let mut w = Watermark::new();
        // Committed offset 50 is a commit marker: the consumer's position is 51, no record.
        assert!(w.skip_gap(None, 51));
        assert_eq!(w.position(), Some(51));
        assert!(
            !w.skip_gap(None, 52),
            "a record-less skip only from an empty watermark"
        );
        assert!(w.report(51, true));
        assert_eq!(w.position(), Some(52));
    }

    #[test]
    fn a_skip_to_offset_zero_is_no_skip() {
        let mut w = Watermark::new();
        assert!(!w.skip_gap(None, 0));
        assert_eq!(w.position(), None);
    }

    #[test]
    fn reading_resumes_at_the_first_record_not_contiguously_resolved() {
        assert_eq!(Watermark::new().resume_at(), None);
        assert_eq!(reported(&[(5, false), (6, true)]).resume_at(), Some(5));
        assert_eq!(
            reported(&[(5, true), (8, false), (9, true)]).resume_at(),
            Some(6)
        );
        assert_eq!(reported(&[(5, true), (6, true)]).resume_at(), Some(7));
    }

    #[test]
    fn nothing_reported_gives_no_position() {
        let watermark = Watermark::new();
        assert_eq!(watermark.position(), None);
        assert_eq!(watermark.highest_reported(), None);
        assert_eq!(watermark.first_unresolved(), None);
        assert_eq!(watermark.unresolved_count(), 0);
    }

    #[test]
    fn resolved_records_move_the_position_past_the_last_one() {
        let watermark = reported(&[(0, true), (1, true), (2, true)]);
        assert_eq!(watermark.position(), Some(3));
    }

    #[test]
    fn a_gap_in_offsets_does_not_stall_the_watermark() {
        let mut watermark = reported(&[(10, true), (13, true), (20, true)]);
        assert_eq!(watermark.position(), Some(21));
        assert!(watermark.report(25, false));
        assert_eq!(watermark.position(), Some(21));
        assert!(watermark.resolve(25));
        assert_eq!(watermark.position(), Some(26));
    }

    #[test]
    fn an_unresolved_record_blocks_the_position_even_when_later_ones_resolved() {
        let watermark = reported(&[(0, true), (1, false), (2, true), (3, true)]);
        assert_eq!(watermark.position(), Some(1));
        assert_eq!(watermark.first_unresolved(), Some(1));
        assert_eq!(watermark.unresolved_count(), 1);
        assert_eq!(watermark.highest_reported(), Some(3));
    }

    #[test]
    fn resolving_the_blocker_jumps_the_position_past_later_resolved_records() {
        let mut watermark = reported(&[(0, true), (2, false), (5, true), (7, true)]);
        assert!(watermark.resolve(2));
        assert_eq!(watermark.position(), Some(8));
    }

    #[test]
    fn resolving_the_blocker_stops_at_the_next_unresolved_record() {
        let mut watermark = reported(&[(0, false), (3, true), (4, false), (9, true)]);
        assert!(watermark.resolve(0));
        assert_eq!(watermark.position(), Some(4));
        assert_eq!(watermark.first_unresolved(), Some(4));
        assert!(watermark.resolve(4));
        assert_eq!(watermark.position(), Some(10));
    }

    #[test]
    fn resolving_a_later_record_first_keeps_the_earlier_blocker() {
        let mut watermark = reported(&[(1, true), (2, false), (3, false), (4, true)]);
        assert!(watermark.resolve(3));
        assert_eq!(watermark.position(), Some(2));
        assert!(watermark.resolve(2));
        assert_eq!(watermark.position(), Some(5));
    }

    #[test]
    fn the_first_record_unresolved_gives_no_position() {
        let mut watermark = reported(&[(42, false), (43, true)]);
        assert_eq!(watermark.position(), None);
        assert!(watermark.resolve(42));
        assert_eq!(watermark.position(), Some(44));
    }

    #[test]
    fn a_late_or_repeated_report_is_ignored() {
        let mut watermark = reported(&[(5, true), (8, false)]);
        let before = watermark.clone();
        assert!(!watermark.report(8, true), "repeated");
        assert!(!watermark.report(6, false), "late, inside a gap");
        assert!(!watermark.report(1, true), "late, below the first");
        assert_eq!(watermark, before);
    }

    #[test]
    fn resolving_an_unknown_offset_is_ignored() {
        let mut watermark = reported(&[(5, true), (8, false)]);
        let before = watermark.clone();
        assert!(!watermark.resolve(6), "in a gap");
        assert!(!watermark.resolve(5), "already resolved");
        assert!(!watermark.resolve(100), "never reported");
        assert_eq!(watermark, before);
        assert!(watermark.resolve(8));
        assert!(!watermark.resolve(8), "resolved twice");
    }

    #[test]
    fn memory_is_bounded_by_unresolved_records_not_by_reported_ones() {
        let mut watermark = Watermark::new();
        assert!(watermark.report(0, true));
        assert!(watermark.report(1, false));
        for offset in 2..10_000 {
            assert!(watermark.report(offset, offset % 1_000 != 0));
        }
        assert_eq!(watermark.tracked_entries(), 10);
        assert_eq!(watermark.position(), Some(1));
        for blocker in std::iter::once(1).chain((1_000..10_000).step_by(1_000)) {
            assert!(watermark.resolve(blocker));
        }
        assert_eq!(watermark.tracked_entries(), 0);
        assert_eq!(watermark.position(), Some(10_000));
    }

    #[test]
    fn the_position_saturates_instead_of_overflowing() {
        let watermark = reported(&[(i64::MAX, true)]);
        assert_eq!(watermark.position(), Some(i64::MAX));
    }

    /// The obviously correct model: every report kept in order.
    #[derive(Default)]
    struct Model {
        records: Vec<(i64, bool)>,
    }

    impl Model {
        fn report(&mut self, offset: i64, resolved: bool) -> bool {
            if self.records.last().is_some_and(|&(last, _)| offset <= last) {
                return false;
            }
            self.records.push((offset, resolved));
            true
        }

        fn resolve(&mut self, offset: i64) -> bool {
            match self.records.iter_mut().find(|(o, r)| *o == offset && !*r) {
                Some(record) => {
                    record.1 = true;
                    true
                }
                None => false,
            }
        }

        /// A skip is a resolved record at the offset before the position.
        fn skip(&mut self, after: Option<i64>, position: i64) -> bool {
            let last = self.records.last().map(|r| r.0);
            if last != after || position - 1 < 0 || after.is_some_and(|a| position - 1 <= a) {
                return false;
            }
            self.records.push((position - 1, true));
            true
        }

        fn position(&self) -> Option<i64> {
            let prefix = self.records.iter().take_while(|(_, resolved)| *resolved);
            prefix.last().map(|(offset, _)| offset + 1)
        }

        fn first_unresolved(&self) -> Option<i64> {
            self.records.iter().find(|(_, r)| !r).map(|(o, _)| *o)
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Report the next record, `gap` above the highest one.
        Report { gap: i64, resolved: bool },
        /// Resolve the `pick`-th reported record (modulo), maybe again.
        ResolveReported { pick: usize },
        /// Resolve any offset near the reported range, often one never reported.
        ResolveAny { offset: i64 },
        /// Report again at or below the highest offset.
        ReportStale { back: i64, resolved: bool },
        /// Skip record-less offsets after the highest one, or after another offset.
        Skip {
            ahead: i64,
            after_other: Option<i64>,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1..=5i64, any::<bool>()).prop_map(|(gap, resolved)| Op::Report { gap, resolved }),
            3 => any::<usize>().prop_map(|pick| Op::ResolveReported { pick }),
            1 => (-5..200i64).prop_map(|offset| Op::ResolveAny { offset }),
            1 => (0..10i64, any::<bool>()).prop_map(|(back, resolved)| Op::ReportStale { back, resolved }),
            1 => (0..6i64, prop::option::weighted(0.2, -3..3i64))
                .prop_map(|(ahead, after_other)| Op::Skip { ahead, after_other }),
        ]
    }

    fn assert_matches(watermark: &Watermark, model: &Model) {
        assert_eq!(watermark.position(), model.position());
        assert_eq!(watermark.first_unresolved(), model.first_unresolved());
        assert_eq!(
            watermark.highest_reported(),
            model.records.last().map(|r| r.0)
        );
        let unresolved = model.records.iter().filter(|(_, r)| !r).count();
        assert_eq!(watermark.unresolved_count(), unresolved);
        assert_eq!(watermark.tracked_entries(), unresolved);
        if let (Some(position), Some(blocker)) =
            (watermark.position(), watermark.first_unresolved())
        {
            assert!(
                position <= blocker,
                "position {position} passed unresolved {blocker}"
            );
        }
    }

    proptest! {
        #[test]
        fn the_watermark_follows_the_model_through_any_interleaving(
            start in 0..50i64,
            ops in prop::collection::vec(op(), 0..120),
        ) {
            let mut watermark = Watermark::new();
            let mut model = Model::default();
            let mut previous = None;
            for op in ops {
                let highest = model.records.last().map(|r| r.0);
                let (accepted, expected) = match op {
                    Op::Report { gap, resolved } => {
                        let offset = highest.map_or(start, |h| h + gap);
                        (watermark.report(offset, resolved), model.report(offset, resolved))
                    }
                    Op::ResolveReported { pick } if !model.records.is_empty() => {
                        let offset = model.records[pick % model.records.len()].0;
                        (watermark.resolve(offset), model.resolve(offset))
                    }
                    Op::ResolveReported { .. } => (watermark.resolve(start), model.resolve(start)),
                    Op::ResolveAny { offset } => (watermark.resolve(offset), model.resolve(offset)),
                    Op::ReportStale { back, resolved } => {
                        let offset = highest.unwrap_or(start) - back;
                        (watermark.report(offset, resolved), model.report(offset, resolved))
                    }
                    Op::Skip { ahead, after_other } => {
                        let after = match after_other {
                            Some(delta) => Some(highest.unwrap_or(start) + delta),
                            None => highest,
                        };
                        let position = highest.unwrap_or(start) + ahead;
                        (watermark.skip_gap(after, position), model.skip(after, position))
                    }
                };
                prop_assert_eq!(accepted, expected);
                assert_matches(&watermark, &model);
                let position = watermark.position();
                prop_assert!(position >= previous, "position went back from {previous:?} to {position:?}");
                previous = position;
            }

            let reported: Vec<i64> = model.records.iter().map(|r| r.0).collect();
            for offset in reported {
                watermark.resolve(offset);
                model.resolve(offset);
                assert_matches(&watermark, &model);
            }
            prop_assert_eq!(watermark.unresolved_count(), 0);
            prop_assert_eq!(watermark.position(), watermark.highest_reported().map(|h| h + 1));
        }

        #[test]
        fn gaps_never_stall_a_run_of_resolved_records(
            start in 0..1_000i64,
            gaps in prop::collection::vec(1..=5i64, 1..60),
        ) {
            let mut watermark = Watermark::new();
            let mut offset = start;
            for gap in gaps {
                prop_assert!(watermark.report(offset, true));
                prop_assert_eq!(watermark.position(), Some(offset + 1));
                offset += gap;
            }
            prop_assert_eq!(watermark.tracked_entries(), 0);
        }
    }
}
