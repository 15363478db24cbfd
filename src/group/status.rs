//! A partition's status in the group, judged as Burrow judges a consumer: over a window of
//! samples of its committed offset and end (Kafka's figures, so that a partition nobody
//! consumes is judged too), together with what its owner reports (pure).
//!
//! In order, the first rule that holds decides:
//!
//! 1. **stuck** — its owner reports it stuck (a blocking Unknown record, a stalled watermark,
//!    the dead-letter guard), with the owner's reason.
//! 2. **stopped** — records wait and no live member consumes it (nobody owns it, or its owner
//!    is gone).
//! 3. **paused** — an operator paused it on its owner.
//! 4. **rewound** — its committed offset moved back within the window (a rewind replays).
//! 5. **ok** — a sample of the window had no lag (Burrow's first rule), or the window is
//!    shorter than [`MIN_SPAN`] (too early to call a trend).
//! 6. **stalled** — records waited all through the window and the committed offset never moved.
//! 7. **lagging** — the committed offset moved, but the lag did not shrink over the window.
//! 8. **ok** otherwise.

use std::time::Duration;

use serde::Serialize;

/// How far back samples count.
pub const WINDOW: Duration = Duration::from_secs(60);
/// The shortest window a trend (stalled, lagging) is called on.
pub const MIN_SPAN: Duration = Duration::from_secs(15);

/// A partition's status, worst first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Status {
    Stuck,
    Stopped,
    Stalled,
    Lagging,
    Rewound,
    Paused,
    Ok,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One look at a partition: seconds since the window's clock started, the group's committed
/// offset (`None`: nothing committed) and the partition's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub at: Duration,
    pub committed: Option<i64>,
    pub end: i64,
}

impl Sample {
    /// Records between the committed offset and the end.
    pub fn lag(&self) -> i64 {
        (self.end - self.committed.unwrap_or(0)).max(0)
    }
}

/// What the partition's owner is, for judging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumer {
    /// A live member of ours, with what it reports.
    Member { paused: bool },
    /// A member of the group that does not publish itself (another tool): judged by its
    /// commits alone.
    Foreign,
    /// Nobody owns it, or its owner is gone.
    Nobody,
}

/// The status and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Judged {
    pub status: Status,
    pub reason: Option<String>,
}

impl Judged {
    fn of(status: Status, reason: impl Into<Option<String>>) -> Judged {
        Judged {
            status,
            reason: reason.into(),
        }
    }
}

/// Judges a partition from its samples (oldest first; only those within [`WINDOW`] of the
/// newest count), who consumes it and the stuck reason its owner reports.
pub fn judge(samples: &[Sample], consumer: Consumer, stuck: Option<&str>) -> Judged {
    if let Some(reason) = stuck {
        return Judged::of(Status::Stuck, reason.to_owned());
    }
    let Some(newest) = samples.last() else {
        // Nothing read from Kafka yet: the caller knows the lag, if anything.
        return match consumer {
            Consumer::Member { paused: true } => {
                Judged::of(Status::Paused, "paused by an operator".to_owned())
            }
            _ => Judged::of(Status::Ok, "not sampled yet".to_owned()),
        };
    };
    let window: Vec<&Sample> = samples
        .iter()
        .filter(|s| newest.at.saturating_sub(s.at) <= WINDOW)
        .collect();
    let oldest = window[0];
    let span = newest.at.saturating_sub(oldest.at);
    if consumer == Consumer::Nobody && newest.lag() > 0 {
        return Judged::of(
            Status::Stopped,
            format!("no live member consumes it; {} records wait", newest.lag()),
        );
    }
    if consumer == (Consumer::Member { paused: true }) {
        return Judged::of(Status::Paused, "paused by an operator".to_owned());
    }
    let rewound = window
        .windows(2)
        .find_map(|pair| match (pair[0].committed, pair[1].committed) {
            (Some(before), Some(after)) if after < before => Some((before, after)),
            _ => None,
        });
    if let Some((before, after)) = rewound {
        return Judged::of(
            Status::Rewound,
            format!("committed offset moved back from {before} to {after}: records are replayed"),
        );
    }
    if window.iter().any(|s| s.lag() == 0) {
        return Judged::of(Status::Ok, None);
    }
    if span < MIN_SPAN {
        return Judged::of(
            Status::Ok,
            format!(
                "{} s of samples: too early to judge a trend",
                span.as_secs()
            ),
        );
    }
    if window.iter().all(|s| s.committed == oldest.committed) {
        return Judged::of(
            Status::Stalled,
            format!(
                "committed offset unmoved for {} s with {} records waiting",
                span.as_secs(),
                newest.lag()
            ),
        );
    }
    if newest.lag() >= oldest.lag() {
        return Judged::of(
            Status::Lagging,
            format!(
                "consuming, but the lag went from {} to {} records in {} s",
                oldest.lag(),
                newest.lag(),
                span.as_secs()
            ),
        );
    }
    Judged::of(Status::Ok, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMBER: Consumer = Consumer::Member { paused: false };

    /// Samples every 5 s from (committed, end) pairs.
    fn every_5s(points: &[(i64, i64)]) -> Vec<Sample> {
        points
            .iter()
            .enumerate()
            .map(|(i, &(committed, end))| Sample {
                at: Duration::from_secs(5 * i as u64),
                committed: Some(committed),
                end,
            })
            .collect()
    }

    #[test]
    fn a_partition_that_caught_up_once_in_the_window_is_ok() {
        let samples = every_5s(&[(10, 10), (10, 20), (15, 30), (20, 40), (25, 50)]);
        assert_eq!(judge(&samples, MEMBER, None).status, Status::Ok);
    }

    #[test]
    fn a_committed_offset_that_never_moves_while_records_wait_is_stalled() {
        let samples = every_5s(&[(10, 20), (10, 20), (10, 25), (10, 25)]);
        let judged = judge(&samples, MEMBER, None);
        assert_eq!(judged.status, Status::Stalled);
        assert_eq!(
            judged.reason.as_deref(),
            Some("committed offset unmoved for 15 s with 15 records waiting")
        );
    }

    #[test]
    fn a_consumer_that_moves_but_never_gains_on_the_end_is_lagging_and_one_that_gains_is_ok() {
        let behind = every_5s(&[(10, 20), (15, 30), (20, 40), (25, 50)]);
        assert_eq!(judge(&behind, MEMBER, None).status, Status::Lagging);
        let gaining = every_5s(&[(10, 50), (20, 52), (30, 54), (40, 56)]);
        assert_eq!(judge(&gaining, MEMBER, None).status, Status::Ok);
    }

    #[test]
    fn too_short_a_window_calls_no_trend() {
        let samples = every_5s(&[(10, 20), (10, 20)]);
        let judged = judge(&samples, MEMBER, None);
        assert_eq!(judged.status, Status::Ok);
        assert!(judged.reason.unwrap().contains("too early"));
    }

    #[test]
    fn a_committed_offset_that_moved_back_was_rewound() {
        let samples = every_5s(&[(50, 50), (20, 50), (30, 50)]);
        let judged = judge(&samples, MEMBER, None);
        assert_eq!(judged.status, Status::Rewound);
        assert!(judged.reason.unwrap().contains("from 50 to 20"));
    }

    #[test]
    fn waiting_records_that_no_live_member_consumes_are_stopped_at_once() {
        let samples = every_5s(&[(10, 20)]);
        let judged = judge(&samples, Consumer::Nobody, None);
        assert_eq!(judged.status, Status::Stopped);
        assert!(judged.reason.unwrap().contains("10 records wait"));
        let idle = every_5s(&[(20, 20)]);
        assert_eq!(judge(&idle, Consumer::Nobody, None).status, Status::Ok);
    }

    #[test]
    fn the_owners_stuck_reason_and_pause_come_before_the_window() {
        let samples = every_5s(&[(10, 20), (10, 20), (10, 20), (10, 20)]);
        let stuck = judge(
            &samples,
            MEMBER,
            Some("oldest Unknown record waiting for 61 s"),
        );
        assert_eq!(stuck.status, Status::Stuck);
        assert_eq!(
            stuck.reason.as_deref(),
            Some("oldest Unknown record waiting for 61 s")
        );
        let paused = judge(&samples, Consumer::Member { paused: true }, None);
        assert_eq!(paused.status, Status::Paused);
    }

    #[test]
    fn samples_older_than_the_window_do_not_count() {
        let mut samples = every_5s(&[(0, 0)]);
        // Caught up once, long ago; stalled for the last 20 s.
        for i in 0..5 {
            samples.push(Sample {
                at: Duration::from_secs(100 + 5 * i),
                committed: Some(10),
                end: 30,
            });
        }
        assert_eq!(judge(&samples, MEMBER, None).status, Status::Stalled);
    }

    #[test]
    fn statuses_sort_worst_first() {
        let mut all = [
            Status::Ok,
            Status::Paused,
            Status::Lagging,
            Status::Stuck,
            Status::Rewound,
            Status::Stopped,
            Status::Stalled,
        ];
        all.sort();
        assert_eq!(
            all.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            [
                "stuck", "stopped", "stalled", "lagging", "rewound", "paused", "ok"
            ]
        );
    }
}
