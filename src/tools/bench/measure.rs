//! The arithmetic of a run, without I/O: when each partition's committed offset moved, when a
//! record therefore became committed, latency percentiles and rates.

use std::time::{Duration, Instant};

/// A record the broker acknowledged: where it landed and when it was handed to the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub partition: i32,
    pub offset: i64,
    pub at: Instant,
}

/// Per partition, the moments its committed offset moved (polled, so "at or before").
#[derive(Debug, Clone, Default)]
pub struct CommitTimeline {
    /// Indexed by partition: `(when, committed offset)`, offsets strictly increasing.
    moves: Vec<Vec<(Instant, i64)>>,
}

impl CommitTimeline {
    pub fn new(partitions: i32) -> CommitTimeline {
        CommitTimeline {
            moves: vec![Vec::new(); usize::try_from(partitions).unwrap_or(0)],
        }
    }

    /// Records what a poll at `at` saw; only moves forward are kept.
    pub fn observe(&mut self, at: Instant, partition: i32, committed: i64) {
        let Some(moves) = usize::try_from(partition)
            .ok()
            .and_then(|p| self.moves.get_mut(p))
        else {
            return;
        };
        if moves.last().is_none_or(|(_, last)| committed > *last) {
            moves.push((at, committed));
        }
    }

    /// The committed offset last seen for `partition` (`None`: nothing committed yet).
    pub fn committed(&self, partition: i32) -> Option<i64> {
        let moves = self.moves.get(usize::try_from(partition).ok()?)?;
        moves.last().map(|(_, offset)| *offset)
    }

    /// Whether every partition's committed offset reached its end (a partition without records
    /// has end 0 and needs no commit).
    pub fn reached(&self, ends: &[i64]) -> bool {
        ends.iter()
            .zip(0..)
            .all(|(end, p)| *end <= 0 || self.committed(p).is_some_and(|c| c >= *end))
    }

    /// When the record at `offset` of `partition` was first seen committed: the first poll
    /// whose committed offset (the next offset to read) is past it.
    pub fn committed_at(&self, partition: i32, offset: i64) -> Option<Instant> {
        let moves = self.moves.get(usize::try_from(partition).ok()?)?;
        let first = moves.partition_point(|(_, committed)| *committed <= offset);
        moves.get(first).map(|(at, _)| *at)
    }
}

/// Produce-to-commit latency of each record, sorted; records never seen committed are left
/// out (the caller checks that the run reached its ends first).
pub fn latencies(sent: &[Sent], timeline: &CommitTimeline) -> Vec<Duration> {
    let mut latencies: Vec<Duration> = sent
        .iter()
        .filter_map(|s| {
            let committed = timeline.committed_at(s.partition, s.offset)?;
            Some(committed.saturating_duration_since(s.at))
        })
        .collect();
    latencies.sort_unstable();
    latencies
}

/// The nearest-rank percentile `q` (0 < q ≤ 1) of sorted values.
pub fn percentile(sorted: &[Duration], q: f64) -> Option<Duration> {
    debug_assert!(sorted.is_sorted());
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Percentiles of produce-to-commit latency at an offered rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    pub records: usize,
    /// Records per second the producer offered while latency was measured.
    pub offered_rate: f64,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub p999: Duration,
    pub max: Duration,
}

impl Latency {
    pub fn of(sorted: &[Duration], offered_rate: f64) -> Option<Latency> {
        Some(Latency {
            records: sorted.len(),
            offered_rate,
            p50: percentile(sorted, 0.50)?,
            p90: percentile(sorted, 0.90)?,
            p99: percentile(sorted, 0.99)?,
            p999: percentile(sorted, 0.999)?,
            max: *sorted.last()?,
        })
    }

    /// `(label, value)` from p50 to the maximum, for tables and the plot.
    pub fn points(&self) -> [(&'static str, Duration); 5] {
        [
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("p99.9", self.p999),
            ("max", self.max),
        ]
    }
}

/// Events per second; 0 for an empty interval.
pub fn rate(events: u64, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        events as f64 / seconds
    } else {
        0.0
    }
}

/// `numerator / denominator`, `None` when the denominator is 0.
pub fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    (denominator > 0.0).then(|| numerator / denominator)
}

/// Microseconds of CPU per record: `cores` busy over `elapsed`, over `records`.
pub fn micros_per_record(cores: f64, elapsed: Duration, records: u64) -> Option<f64> {
    ratio(cores * elapsed.as_secs_f64() * 1e6, records as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn nearest_rank_percentiles_of_one_to_a_hundred() {
        let values: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&values, 0.50), Some(ms(50)));
        assert_eq!(percentile(&values, 0.99), Some(ms(99)));
        assert_eq!(percentile(&values, 1.0), Some(ms(100)));
        assert_eq!(percentile(&[ms(7)], 0.99), Some(ms(7)));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn the_tail_percentiles_need_enough_samples_to_differ() {
        let values: Vec<Duration> = (1..=2000).map(ms).collect();
        let latency = Latency::of(&values, 100.0).unwrap();
        assert_eq!(latency.p90, ms(1800));
        assert_eq!(latency.p99, ms(1980));
        assert_eq!(latency.p999, ms(1998));
        assert_eq!(latency.max, ms(2000));
        let labels: Vec<&str> = latency.points().iter().map(|(l, _)| *l).collect();
        assert_eq!(labels, ["p50", "p90", "p99", "p99.9", "max"]);
        // With fewer than a thousand samples p99.9 is the maximum.
        let few: Vec<Duration> = (1..=500).map(ms).collect();
        let latency = Latency::of(&few, 100.0).unwrap();
        assert_eq!(latency.p999, latency.max);
        assert_eq!(Latency::of(&[], 1.0), None);
    }

    #[test]
    fn a_record_is_committed_once_the_committed_offset_is_past_it() {
        let t0 = Instant::now();
        let mut timeline = CommitTimeline::new(2);
        timeline.observe(t0 + ms(10), 0, 5);
        timeline.observe(t0 + ms(20), 0, 5);
        timeline.observe(t0 + ms(30), 0, 9);
        assert_eq!(timeline.committed_at(0, 0), Some(t0 + ms(10)));
        assert_eq!(timeline.committed_at(0, 4), Some(t0 + ms(10)));
        assert_eq!(timeline.committed_at(0, 5), Some(t0 + ms(30)));
        assert_eq!(timeline.committed_at(0, 9), None);
        assert_eq!(timeline.committed_at(1, 0), None);
        assert_eq!(timeline.committed_at(7, 0), None);
    }

    #[test]
    fn the_ends_are_reached_when_every_partition_with_records_committed_them() {
        let t0 = Instant::now();
        let mut timeline = CommitTimeline::new(3);
        timeline.observe(t0, 0, 10);
        assert!(!timeline.reached(&[10, 4, 0]));
        timeline.observe(t0, 1, 4);
        assert!(timeline.reached(&[10, 4, 0]));
        assert!(!timeline.reached(&[11, 4, 0]));
    }

    #[test]
    fn latencies_join_sends_with_the_commit_that_covered_them() {
        let t0 = Instant::now();
        let mut timeline = CommitTimeline::new(1);
        timeline.observe(t0 + ms(100), 0, 2);
        timeline.observe(t0 + ms(250), 0, 3);
        let sent = [
            Sent {
                partition: 0,
                offset: 0,
                at: t0,
            },
            Sent {
                partition: 0,
                offset: 2,
                at: t0 + ms(50),
            },
            Sent {
                partition: 0,
                offset: 1,
                at: t0 + ms(40),
            },
            Sent {
                partition: 0,
                offset: 3,
                at: t0 + ms(60),
            },
        ];
        assert_eq!(latencies(&sent, &timeline), vec![ms(60), ms(100), ms(200)]);
        let latency = Latency::of(&latencies(&sent, &timeline), 10.0).unwrap();
        assert_eq!(
            (latency.p50, latency.p99, latency.max, latency.records),
            (ms(100), ms(200), ms(200), 3)
        );
    }

    #[test]
    fn rates_and_ratios_never_divide_by_zero() {
        assert_eq!(rate(500, Duration::from_millis(250)), 2000.0);
        assert_eq!(rate(500, Duration::ZERO), 0.0);
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
    }
}
