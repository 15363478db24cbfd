//! An offset out of range (pure): the position the group asked to read is not in the
//! partition's log any more (retention or `DeleteRecords` moved the log's start past it while
//! the partition was held or its group stopped, or the log now ends before it). The records
//! between are gone; the service records the gap before anything past it is committed, and
//! then goes on from the log's start or holds the partition, as `--offset-reset-policy` says.

use serde::Serialize;

/// What to do when the position is before the log's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ResetPolicy {
    /// Record the gap, then read on from the log's start.
    Continue,
    /// Record the gap and hold the partition until an operator rewinds it.
    Hold,
}

impl ResetPolicy {
    pub const ALL: &'static [ResetPolicy] = <Self as strum::VariantArray>::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One offset reset, as `offset_resets` keeps it (migration V8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffsetReset {
    pub topic: String,
    pub partition: i32,
    /// The position asked for, not in the log.
    pub from_offset: i64,
    /// Where reading went on (`None`: held).
    pub to_offset: Option<i64>,
    /// The log's bounds when the reset was found (`None`: they could not be read).
    pub log_start: Option<i64>,
    pub log_end: Option<i64>,
    /// What the service did: went on, or held.
    pub policy: ResetPolicy,
    /// Why, in librdkafka's words and ours.
    pub reason: String,
}

impl OffsetReset {
    /// Offsets passed over without being read (`0` while held, or for a reset backwards).
    pub fn skipped(&self) -> i64 {
        self.to_offset
            .map_or(0, |to| (to - self.from_offset).max(0))
    }
}

/// What to do about a position out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetPlan {
    /// Record the gap up to `at` (the log's start), then read on from there.
    Continue { at: i64 },
    /// Record the gap with no end and hold the partition at the position.
    Hold,
    /// The position is in the log after all (librdkafka asked a broker that no longer leads,
    /// or the log moved meanwhile): read it again; nothing is skipped.
    ReadAgain,
}

/// Decides what to do about `from`, out of range by librdkafka's account, given the log's
/// bounds `[start, end)` now (`None`: unknown) and whether `from` was read again once already
/// in this assignment.
///
/// A position past the log's end means the log is shorter than what the group read (a log
/// truncated by an unclean leader election, a topic deleted and made again): reading "on" from
/// the start would go back over records already processed and those never seen alike, so that
/// is an operator's call whatever the policy.
pub fn plan(
    from: i64,
    log: Option<(i64, i64)>,
    policy: ResetPolicy,
    read_again_once: bool,
) -> ResetPlan {
    let Some((start, end)) = log else {
        return ResetPlan::Hold;
    };
    if from < start {
        return match policy {
            ResetPolicy::Continue => ResetPlan::Continue { at: start },
            ResetPolicy::Hold => ResetPlan::Hold,
        };
    }
    if from > end || read_again_once {
        return ResetPlan::Hold;
    }
    ResetPlan::ReadAgain
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_position_before_the_log_start_goes_on_from_the_start_or_holds_as_the_policy_says() {
        assert_eq!(
            plan(120, Some((500, 900)), ResetPolicy::Continue, false),
            ResetPlan::Continue { at: 500 }
        );
        assert_eq!(
            plan(120, Some((500, 900)), ResetPolicy::Hold, false),
            ResetPlan::Hold
        );
    }

    #[test]
    fn a_position_past_the_log_end_always_holds() {
        for policy in ResetPolicy::ALL {
            assert_eq!(plan(950, Some((0, 900)), *policy, false), ResetPlan::Hold);
        }
    }

    #[test]
    fn a_position_inside_the_log_is_read_again_once() {
        assert_eq!(
            plan(600, Some((500, 900)), ResetPolicy::Continue, false),
            ResetPlan::ReadAgain
        );
        assert_eq!(
            plan(600, Some((500, 900)), ResetPolicy::Continue, true),
            ResetPlan::Hold,
            "the second time it is not a race"
        );
        assert_eq!(
            plan(900, Some((500, 900)), ResetPolicy::Hold, false),
            ResetPlan::ReadAgain,
            "the end is a position"
        );
    }

    #[test]
    fn unknown_bounds_hold() {
        assert_eq!(
            plan(120, None, ResetPolicy::Continue, false),
            ResetPlan::Hold
        );
    }

    #[test]
    fn the_policy_reads_as_written() {
        assert_eq!("hold".parse::<ResetPolicy>().unwrap(), ResetPolicy::Hold);
        assert_eq!(ResetPolicy::Continue.as_str(), "continue");
        assert!("earliest".parse::<ResetPolicy>().is_err());
    }

    proptest! {
        /// Going on never starts before the position (nothing read twice is called a gap) nor
        /// past the log's start (nothing that still exists is passed over).
        #[test]
        fn going_on_starts_exactly_at_the_log_start(
            from in 0..1_000i64,
            start in 0..1_000i64,
            len in 0..1_000i64,
            policy in prop::sample::select(ResetPolicy::ALL),
            again in any::<bool>(),
        ) {
            let end = start + len;
            match plan(from, Some((start, end)), policy, again) {
                ResetPlan::Continue { at } => {
                    prop_assert_eq!(at, start);
                    prop_assert!(from < at);
                    prop_assert_eq!(policy, ResetPolicy::Continue);
                }
                ResetPlan::ReadAgain => prop_assert!(start <= from && from <= end && !again),
                ResetPlan::Hold => {}
            }
        }
    }
}
