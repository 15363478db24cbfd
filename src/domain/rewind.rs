//! Rewinding a partition's position to a point in time, decided without I/O: by the `rewind`
//! command for a stopped group, by the driver thread for a live rewind, and by the admin's
//! confirmation page.
//!
//! A rewind only ever moves a position back. Moving it forward would skip records the group
//! has not processed yet, so a target at or past the position leaves the partition alone, and so
//! does a partition without a known position (the group reads it from its reset policy, which
//! a rewind must not cut short).

use serde::{Deserialize, Serialize};

/// Where the first record at or after a point in time is, in one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum TimeOffset {
    /// The first record whose timestamp is at or after the point in time.
    At { offset: i64 },
    /// No record is at or after the point in time; `end` is the partition's end.
    NoneAfter { end: i64 },
}

impl TimeOffset {
    /// The offset to read from to see every record at or after the point in time.
    pub fn offset(self) -> i64 {
        match self {
            TimeOffset::At { offset } => offset,
            TimeOffset::NoneAfter { end } => end,
        }
    }
}

/// Why a partition keeps its position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Keep {
    /// No record is at or after the point in time: there is nothing to replay.
    NothingAfter,
    /// The position is at or before the first record at or after the point in time already.
    NotPastTarget,
    /// The group has no position for the partition (nothing committed, nothing consumed): it
    /// reads it from its reset policy, so moving it could only skip records.
    NoPosition,
}

impl Keep {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// For people.
    pub fn describe(self) -> &'static str {
        match self {
            Keep::NothingAfter => "no record at or after that time: nothing to replay",
            Keep::NotPastTarget => "already at or before that time",
            Keep::NoPosition => "no committed offset: the group reads it from its reset policy",
        }
    }
}

/// What happens to one partition's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum Decision {
    /// Moves back from `from` to `to`: the offsets in between are read again.
    Rewind { from: i64, to: i64 },
    /// Stays where it is.
    Keep { position: Option<i64>, reason: Keep },
    /// Was held at `from`, a position no longer in its log (a recorded offset reset): reads on
    /// from `to`, the log's start. Nothing is read again; the gap was recorded when found.
    PastGap { from: i64, to: i64 },
}

impl Decision {
    /// Offsets read again (records and, between them, transaction markers): `from - to`.
    pub fn replayed(&self) -> i64 {
        match self {
            Decision::Rewind { from, to } => from - to,
            Decision::Keep { .. } | Decision::PastGap { .. } => 0,
        }
    }

    /// The position once decided.
    pub fn after(&self) -> Option<i64> {
        match self {
            Decision::Rewind { to, .. } | Decision::PastGap { to, .. } => Some(*to),
            Decision::Keep { position, .. } => *position,
        }
    }

    /// The position before.
    pub fn before(&self) -> Option<i64> {
        match self {
            Decision::Rewind { from, .. } | Decision::PastGap { from, .. } => Some(*from),
            Decision::Keep { position, .. } => *position,
        }
    }
}

/// Decides one partition's rewind: `position` is where the group would read next (its
/// committed offset, or for a live partition the first record not resolved yet), `target`
/// where the point in time is.
pub fn decide(position: Option<i64>, target: TimeOffset) -> Decision {
    let keep = |reason| Decision::Keep { position, reason };
    match (position, target) {
        (None, _) => keep(Keep::NoPosition),
        (Some(_), TimeOffset::NoneAfter { .. }) => keep(Keep::NothingAfter),
        (Some(from), TimeOffset::At { offset }) if offset < from => {
            Decision::Rewind { from, to: offset }
        }
        (Some(_), TimeOffset::At { .. }) => keep(Keep::NotPastTarget),
    }
}

/// What the driver thread does with a partition it drained for a live rewind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart {
    pub decision: Decision,
    /// Where the consumer must read next. Records the drained actor held and never resolved
    /// were dropped with it, so a partition that was fed anything is sought back to its first
    /// unresolved record even when it keeps its position; `None`: nothing was consumed and the
    /// consumer's own position is right.
    pub seek: Option<i64>,
    /// The position to commit at once, ahead of anything queued: the rewound one.
    pub commit: Option<i64>,
}

/// Decides a live partition's restart. `resume` is the first offset the drained assignment did
/// not resolve (`None`: it was fed nothing), `committed` the group's committed offset, used
/// only when `resume` is unknown.
pub fn restart(resume: Option<i64>, committed: Option<i64>, target: TimeOffset) -> Restart {
    let decision = decide(resume.or(committed), target);
    match decision {
        Decision::Rewind { to, .. } => Restart {
            decision,
            seek: Some(to),
            commit: Some(to),
        },
        Decision::Keep { .. } | Decision::PastGap { .. } => Restart {
            decision,
            seek: resume,
            commit: None,
        },
    }
}

/// Decides the restart of a partition held at `from`, a position no longer in its log (see
/// `domain::offset_reset`), whose log starts at `log_start` now. A target before the position
/// moves it back as any rewind does (a log that ends before the position); otherwise it reads
/// on from the log's start, the least it can pass over, whatever the point in time: the
/// records between are gone, and the gap is on record.
pub fn restart_past_gap(from: i64, log_start: i64, target: TimeOffset) -> Restart {
    let to = target.offset();
    let decision = if to < from {
        Decision::Rewind { from, to }
    } else {
        Decision::PastGap {
            from,
            to: log_start.max(from),
        }
    };
    let at = decision.after();
    Restart {
        decision,
        seek: at,
        commit: at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT_40: TimeOffset = TimeOffset::At { offset: 40 };

    #[test]
    fn a_held_gap_reads_on_from_the_log_start_or_moves_back_to_an_earlier_target() {
        let past = restart_past_gap(10, 500, TimeOffset::At { offset: 700 });
        assert_eq!(past.decision, Decision::PastGap { from: 10, to: 500 });
        assert_eq!((past.seek, past.commit), (Some(500), Some(500)));
        assert_eq!(past.decision.replayed(), 0);
        let end = restart_past_gap(10, 500, TimeOffset::NoneAfter { end: 900 });
        assert_eq!(end.decision, Decision::PastGap { from: 10, to: 500 });
        // The log ends before the position (truncated): a target inside it is a rewind.
        let back = restart_past_gap(950, 0, AT_40);
        assert_eq!(back.decision, Decision::Rewind { from: 950, to: 40 });
        assert_eq!(back.seek, Some(40));
    }

    #[test]
    fn a_position_past_the_target_moves_back_to_it() {
        let decision = decide(Some(100), AT_40);
        assert_eq!(decision, Decision::Rewind { from: 100, to: 40 });
        assert_eq!(decision.replayed(), 60);
        assert_eq!((decision.before(), decision.after()), (Some(100), Some(40)));
    }

    #[test]
    fn a_rewind_never_moves_a_position_forward() {
        for position in [40, 30] {
            let decision = decide(Some(position), AT_40);
            assert_eq!(
                decision,
                Decision::Keep {
                    position: Some(position),
                    reason: Keep::NotPastTarget
                }
            );
            assert_eq!(decision.replayed(), 0);
            assert_eq!(decision.after(), Some(position));
        }
        assert_eq!(
            decide(Some(100), TimeOffset::NoneAfter { end: 120 }),
            Decision::Keep {
                position: Some(100),
                reason: Keep::NothingAfter
            }
        );
    }

    #[test]
    fn a_partition_without_a_position_is_left_to_its_reset_policy() {
        let decision = decide(None, AT_40);
        assert_eq!(
            decision,
            Decision::Keep {
                position: None,
                reason: Keep::NoPosition
            }
        );
        assert_eq!(decision.after(), None);
    }

    #[test]
    fn a_live_rewind_seeks_and_commits_the_target() {
        let restart = restart(Some(100), Some(90), AT_40);
        assert_eq!(restart.seek, Some(40));
        assert_eq!(restart.commit, Some(40));
        assert_eq!(restart.decision.replayed(), 60);
    }

    #[test]
    fn a_live_partition_that_keeps_its_position_is_sought_back_to_what_it_did_not_resolve() {
        let restart = restart(Some(30), Some(25), AT_40);
        assert_eq!(restart.seek, Some(30), "the dropped records are read again");
        assert_eq!(restart.commit, None);
        assert_eq!(
            restart.decision,
            Decision::Keep {
                position: Some(30),
                reason: Keep::NotPastTarget
            }
        );
    }

    #[test]
    fn a_live_partition_fed_nothing_uses_the_committed_offset_and_needs_no_seek() {
        let moved = restart(None, Some(100), AT_40);
        assert_eq!((moved.seek, moved.commit), (Some(40), Some(40)));
        let kept = restart(None, Some(20), AT_40);
        assert_eq!((kept.seek, kept.commit), (None, None));
        let unknown = restart(None, None, AT_40);
        assert_eq!((unknown.seek, unknown.commit), (None, None));
        assert_eq!(
            unknown.decision,
            Decision::Keep {
                position: None,
                reason: Keep::NoPosition
            }
        );
    }
}
