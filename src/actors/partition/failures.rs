//! A partition's failures in the log (pure): the lines to write when it changes state, and a
//! summary per interval in between, instead of a line per record attempt. A database outage
//! at 64 partitions once wrote ~250,000 lines in 15 s, one per record and retry; this writes,
//! per partition, one line when it starts failing (its first Unknown record, with the cause and
//! the error), one every [`SUMMARY_EVERY`] while it fails (attempts per cause in the interval,
//! the most frequent cause and its last error, the backlog), and one when it recovers (its
//! backlog of Unknown records is empty again).
//!
//! A partition fails from its first Unknown record to the moment its backlog is empty. The
//! caller reports every attempt that ended Unknown ([`FailureLog::unknown`]), every record of
//! the backlog that resolved ([`FailureLog::resolved`]), the backlog after each unit of work
//! ([`FailureLog::settled`]), and the passing of time ([`FailureLog::tick`]); no clock of its
//! own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::domain::UnknownCause;

/// How often a failing partition's summary is written.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(10);

/// The attempts that ended Unknown for one cause in an interval, and the last one's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CauseCount {
    pub cause: UnknownCause,
    pub attempts: u64,
    pub last_error: Arc<str>,
}

/// A line to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// The partition started failing: the attempt of the record at `offset` ended Unknown.
    Failing {
        offset: i64,
        cause: UnknownCause,
        error: Arc<str>,
    },
    /// Still failing: the attempts since the last line, per cause, the most frequent first
    /// (empty when nothing was attempted: the records wait for their retry).
    StillFailing {
        failing_for: Duration,
        backlog: usize,
        causes: Vec<CauseCount>,
    },
    /// The backlog is empty again: every Unknown record resolved.
    Recovered {
        failed_for: Duration,
        /// Attempts that ended Unknown while it failed.
        attempts: u64,
        /// Records of the backlog that resolved while it failed.
        resolved: u64,
    },
}

impl Line {
    /// The attempts of a summary's interval, over every cause.
    pub fn attempts(causes: &[CauseCount]) -> u64 {
        causes.iter().map(|c| c.attempts).sum()
    }

    /// The attempts of a summary's interval of `cause`.
    pub fn attempts_of(causes: &[CauseCount], cause: UnknownCause) -> u64 {
        causes
            .iter()
            .find(|c| c.cause == cause)
            .map_or(0, |c| c.attempts)
    }
}

#[derive(Debug, Clone)]
struct Spell {
    since: Instant,
    summarised: Instant,
    attempts: u64,
    resolved: u64,
    interval: Vec<CauseCount>,
}

/// What has been written about one partition's failures (see the module docs).
#[derive(Debug, Clone)]
pub struct FailureLog {
    every: Duration,
    spell: Option<Spell>,
}

impl FailureLog {
    /// A partition that does not fail, summarised every `every` once it does.
    pub fn new(every: Duration) -> FailureLog {
        FailureLog { every, spell: None }
    }

    /// Whether the partition fails.
    pub fn failing(&self) -> bool {
        self.spell.is_some()
    }

    /// An attempt of the record at `offset` ended Unknown: the first one of a failure is a
    /// line of its own, the others are counted.
    pub fn unknown(
        &mut self,
        now: Instant,
        offset: i64,
        cause: UnknownCause,
        error: &Arc<str>,
    ) -> Option<Line> {
        let started = self.spell.is_none();
        let spell = self.spell.get_or_insert_with(|| Spell {
            since: now,
            summarised: now,
            attempts: 0,
            resolved: 0,
            interval: Vec::new(),
        });
        spell.attempts += 1;
        if started {
            return Some(Line::Failing {
                offset,
                cause,
                error: error.clone(),
            });
        }
        match spell.interval.iter_mut().find(|c| c.cause == cause) {
            Some(count) => {
                count.attempts += 1;
                count.last_error = error.clone();
            }
            None => spell.interval.push(CauseCount {
                cause,
                attempts: 1,
                last_error: error.clone(),
            }),
        }
        None
    }

    /// A record of the backlog resolved.
    pub fn resolved(&mut self) {
        if let Some(spell) = self.spell.as_mut() {
            spell.resolved += 1;
        }
    }

    /// A unit of work's outcomes were reported and `backlog` records are Unknown: an empty
    /// backlog ends a failure.
    pub fn settled(&mut self, now: Instant, backlog: usize) -> Option<Line> {
        if backlog > 0 {
            return None;
        }
        let spell = self.spell.take()?;
        Some(Line::Recovered {
            failed_for: now.saturating_duration_since(spell.since),
            attempts: spell.attempts,
            resolved: spell.resolved,
        })
    }

    /// Time passed: the summary of the interval, if one is due.
    pub fn tick(&mut self, now: Instant, backlog: usize) -> Option<Line> {
        let every = self.every;
        let spell = self.spell.as_mut()?;
        if now.saturating_duration_since(spell.summarised) < every {
            return None;
        }
        spell.summarised = now;
        let mut causes = std::mem::take(&mut spell.interval);
        causes.sort_by_key(|c| std::cmp::Reverse(c.attempts));
        Some(Line::StillFailing {
            failing_for: now.saturating_duration_since(spell.since),
            backlog,
            causes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EVERY: Duration = Duration::from_secs(10);

    fn error(text: &str) -> Arc<str> {
        Arc::from(text)
    }

    #[test]
    fn the_first_unknown_record_is_a_line_with_its_cause_and_the_next_ones_are_only_counted() {
        let mut log = FailureLog::new(EVERY);
        let t0 = Instant::now();
        let down = error("no database connection");
        assert_eq!(
            log.unknown(t0, 7, UnknownCause::Unavailable, &down),
            Some(Line::Failing {
                offset: 7,
                cause: UnknownCause::Unavailable,
                error: down.clone()
            })
        );
        for offset in 8..100 {
            assert_eq!(
                log.unknown(t0, offset, UnknownCause::Unavailable, &down),
                None
            );
        }
        assert!(log.failing());
        assert_eq!(log.settled(t0, 93), None, "still failing");
    }

    #[test]
    fn a_summary_comes_once_per_interval_with_the_attempts_per_cause_the_most_frequent_first() {
        let mut log = FailureLog::new(EVERY);
        let t0 = Instant::now();
        log.unknown(t0, 0, UnknownCause::Unavailable, &error("down"));
        assert_eq!(
            log.tick(t0 + Duration::from_secs(9), 5),
            None,
            "not due yet"
        );
        log.unknown(t0, 1, UnknownCause::Refused, &error("locked"));
        for _ in 0..3 {
            log.unknown(t0, 2, UnknownCause::Rejected, &error("refused for good"));
        }
        let summary = log.tick(t0 + EVERY, 5);
        let Some(Line::StillFailing {
            failing_for,
            backlog,
            causes,
        }) = summary
        else {
            panic!("a summary: {summary:?}");
        };
        assert_eq!((failing_for, backlog), (EVERY, 5));
        assert_eq!(causes[0].cause, UnknownCause::Rejected);
        assert_eq!(causes[0].attempts, 3);
        assert_eq!(&*causes[0].last_error, "refused for good");
        assert_eq!(Line::attempts(&causes), 4);
        assert_eq!(Line::attempts_of(&causes, UnknownCause::Refused), 1);
        assert_eq!(Line::attempts_of(&causes, UnknownCause::Unavailable), 0);
        assert_eq!(
            log.tick(t0 + EVERY + Duration::from_secs(1), 5),
            None,
            "once"
        );
        // An interval without attempts is still summarised: the partition still fails.
        let quiet = log.tick(t0 + EVERY * 2, 5);
        assert!(
            matches!(&quiet, Some(Line::StillFailing { causes, .. }) if causes.is_empty()),
            "{quiet:?}"
        );
    }

    #[test]
    fn an_empty_backlog_ends_the_failure_with_its_totals_and_the_next_unknown_starts_another() {
        let mut log = FailureLog::new(EVERY);
        let t0 = Instant::now();
        assert_eq!(log.settled(t0, 0), None, "nothing failed");
        assert_eq!(log.tick(t0 + EVERY, 0), None, "nothing to summarise");
        log.unknown(t0, 0, UnknownCause::Unavailable, &error("down"));
        log.unknown(t0, 1, UnknownCause::Unavailable, &error("down"));
        log.resolved();
        log.resolved();
        assert_eq!(
            log.settled(t0 + Duration::from_secs(3), 0),
            Some(Line::Recovered {
                failed_for: Duration::from_secs(3),
                attempts: 2,
                resolved: 2
            })
        );
        assert!(!log.failing());
        assert_eq!(log.settled(t0 + Duration::from_secs(4), 0), None, "once");
        assert!(matches!(
            log.unknown(t0, 5, UnknownCause::Refused, &error("locked")),
            Some(Line::Failing { offset: 5, .. })
        ));
    }

    proptest! {
        /// However many attempts fail and however long, the lines are bounded by the changes
        /// of state and the intervals, never by the attempts.
        #[test]
        fn the_lines_are_bounded_by_the_intervals_not_the_attempts(
            attempts in proptest::collection::vec((0u64..2_000, 0usize..3), 1..2_000),
        ) {
            let mut log = FailureLog::new(EVERY);
            let t0 = Instant::now();
            let mut lines = 0u64;
            let mut last = Duration::ZERO;
            let causes = [UnknownCause::Unavailable, UnknownCause::Refused, UnknownCause::Rejected];
            let mut sorted = attempts.clone();
            sorted.sort();
            for (millis, cause) in sorted {
                let now = t0 + Duration::from_millis(millis * 30);
                last = now - t0;
                lines += u64::from(log.tick(now, 1).is_some());
                lines += u64::from(log.unknown(now, 0, causes[cause], &error("e")).is_some());
            }
            let intervals = last.as_secs() / EVERY.as_secs() + 1;
            prop_assert!(lines <= 1 + intervals, "{lines} lines over {last:?}");
            prop_assert!(log.failing());
        }
    }
}
