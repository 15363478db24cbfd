//! Stuck detection (pure): a partition is *stuck* when its guard against mass dead-lettering
//! engaged (too many records in a row rejected by the database: a systemic fault), when its
//! oldest Unknown record is older than a threshold, or when its watermark has not moved for a
//! while although records wait (lag > 0; Burrow's STALL rule).

use std::time::Duration;

use serde::Serialize;

/// Thresholds for calling a partition stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StuckRules {
    /// An Unknown record older than this makes the partition stuck.
    pub unknown_age: Duration,
    /// A watermark unmoved for this long while lag > 0 makes the partition stuck.
    pub stall: Duration,
}

/// Why a partition is stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StuckReason {
    /// `consecutive` records in a row were rejected by the database, more than `limit`:
    /// dead-lettering stopped and they wait as Unknown.
    RejectionsHeld { consecutive: usize, limit: u32 },
    /// The oldest Unknown record has waited `age_seconds`.
    OldestUnknown { age_seconds: u64 },
    /// The watermark has not moved for `seconds` while `lag` records wait.
    Stalled { seconds: u64, lag: i64 },
    /// The driver holds the partition at `offset`: records there cannot be read, or the
    /// position is not in the log any more (see `domain::fetch_error::Held`).
    Held { offset: Option<i64> },
}

impl std::fmt::Display for StuckReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StuckReason::RejectionsHeld { consecutive, limit } => write!(
                f,
                "dead-lettering stopped: {consecutive} records in a row rejected by the \
                 database (more than {limit}), a fault of the database rather than of the records"
            ),
            StuckReason::OldestUnknown { age_seconds } => {
                write!(f, "oldest Unknown record waiting for {age_seconds} s")
            }
            StuckReason::Held { offset } => match offset {
                Some(offset) => write!(f, "held at offset {offset}: nothing after it is read"),
                None => write!(f, "held: nothing more is read"),
            },
            StuckReason::Stalled { seconds, lag } => {
                write!(
                    f,
                    "watermark unmoved for {seconds} s with {lag} records waiting"
                )
            }
        }
    }
}

/// The guard against mass dead-lettering has engaged: `consecutive` rejections in a row, more
/// than `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RejectionsHeld {
    pub consecutive: usize,
    pub limit: u32,
}

/// Evaluates the rules for one partition.
pub fn evaluate(
    rules: &StuckRules,
    held: Option<RejectionsHeld>,
    oldest_unknown_age: Option<Duration>,
    watermark_unmoved_for: Duration,
    lag: i64,
) -> Option<StuckReason> {
    if let Some(RejectionsHeld { consecutive, limit }) = held {
        return Some(StuckReason::RejectionsHeld { consecutive, limit });
    }
    if let Some(age) = oldest_unknown_age.filter(|age| *age >= rules.unknown_age) {
        return Some(StuckReason::OldestUnknown {
            age_seconds: age.as_secs(),
        });
    }
    if lag > 0 && watermark_unmoved_for >= rules.stall {
        return Some(StuckReason::Stalled {
            seconds: watermark_unmoved_for.as_secs(),
            lag,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: StuckRules = StuckRules {
        unknown_age: Duration::from_secs(60),
        stall: Duration::from_secs(120),
    };

    #[test]
    fn a_young_unknown_and_a_moving_watermark_are_not_stuck() {
        assert_eq!(
            evaluate(
                &RULES,
                None,
                Some(Duration::from_secs(59)),
                Duration::from_secs(1),
                10
            ),
            None
        );
    }

    #[test]
    fn an_old_unknown_is_stuck_whatever_the_lag() {
        assert_eq!(
            evaluate(
                &RULES,
                None,
                Some(Duration::from_secs(61)),
                Duration::ZERO,
                0
            ),
            Some(StuckReason::OldestUnknown { age_seconds: 61 })
        );
    }

    #[test]
    fn an_unmoved_watermark_is_stuck_only_while_records_wait() {
        assert_eq!(
            evaluate(&RULES, None, None, Duration::from_secs(130), 5),
            Some(StuckReason::Stalled {
                seconds: 130,
                lag: 5
            })
        );
        assert_eq!(
            evaluate(&RULES, None, None, Duration::from_secs(3600), 0),
            None,
            "idle is fine"
        );
    }

    #[test]
    fn held_rejections_are_stuck_at_once_and_say_so() {
        let held = RejectionsHeld {
            consecutive: 11,
            limit: 10,
        };
        let reason = evaluate(&RULES, Some(held), None, Duration::ZERO, 0);
        assert_eq!(
            reason,
            Some(StuckReason::RejectionsHeld {
                consecutive: 11,
                limit: 10
            })
        );
        let text = reason.unwrap().to_string();
        assert!(
            text.contains("11 records in a row rejected by the database"),
            "{text}"
        );
    }
}
