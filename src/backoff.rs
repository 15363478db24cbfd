//! Capped exponential backoff with jitter for retrying Unknown records: pure, no I/O.

use std::time::Duration;

/// Capped exponential backoff: `initial * multiplier^(attempt - 1)`, at most `max`, spread by
/// a uniform jitter of `±jitter` (a fraction) so retries of many records do not move in step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay before the first retry.
    pub initial: Duration,
    /// Upper bound of any delay, jitter included.
    pub max: Duration,
    /// Growth factor per attempt; at least 1.0.
    pub multiplier: f64,
    /// Relative spread of the jitter, in `[0, 1)`: 0.2 draws from ±20 %.
    pub jitter: f64,
}

impl Backoff {
    /// The growth factor of [`Backoff::new`].
    pub const MULTIPLIER: f64 = 2.0;
    /// The jitter of [`Backoff::new`].
    pub const JITTER: f64 = 0.2;

    /// From `initial`, doubling up to `max`, ±20 % jitter (the configurable part of the
    /// service's retries is `initial` and `max`).
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            multiplier: Self::MULTIPLIER,
            jitter: Self::JITTER,
        }
    }

    /// Delay before retry number `attempt` (1 = first retry; 0 counts as 1), without jitter:
    /// `initial * multiplier^(attempt - 1)`, capped at `max`. Never overflows or panics.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let exponent = f64::from(attempt.max(1) - 1);
        let seconds = self.initial.as_secs_f64() * self.multiplier.powf(exponent);
        self.capped(seconds, self.max)
    }

    /// [`base_delay`](Self::base_delay) scaled by a factor drawn uniformly from
    /// `[1 - jitter, 1 + jitter]` using `unit` in `[0, 1)` (the caller supplies the random
    /// number so this stays pure), still capped at `max`.
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let base = self.base_delay(attempt);
        // A unit outside [0, 1) is a caller bug; clamping keeps the result within the promise.
        let unit = if unit.is_nan() {
            0.5
        } else {
            unit.clamp(0.0, 1.0)
        };
        let factor = 1.0 - self.jitter + 2.0 * self.jitter * unit;
        self.capped(base.as_secs_f64() * factor, base)
    }

    /// [`delay`](Self::delay) with a unit drawn from `rand::random::<f64>()`.
    pub fn delay_random(&self, attempt: u32) -> Duration {
        self.delay(attempt, rand::random::<f64>())
    }

    /// Checks the settings: `initial > 0`, `max >= initial`, `multiplier >= 1.0` and finite,
    /// `0 <= jitter < 1`. The error names the bad field: "initial", "max", "multiplier" or
    /// "jitter".
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.initial.is_zero() {
            return Err("initial");
        }
        if self.max < self.initial {
            return Err("max");
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return Err("multiplier");
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return Err("jitter");
        }
        Ok(())
    }

    /// `seconds` as a duration of at most `max`; `fallback` when it is not a duration at all
    /// (NaN or negative, only reachable with settings that fail [`validate`](Self::validate)).
    fn capped(&self, seconds: f64, fallback: Duration) -> Duration {
        if seconds >= self.max.as_secs_f64() {
            return self.max;
        }
        Duration::try_from_secs_f64(seconds).map_or(fallback, |delay| delay.min(self.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    /// 100 ms, doubling up to 30 s, ±20 % jitter.
    fn standard() -> Backoff {
        Backoff::new(100 * MS, Duration::from_secs(30))
    }

    #[test]
    fn new_doubles_with_20_percent_jitter() {
        let backoff = standard();
        assert_eq!(backoff.initial, 100 * MS);
        assert_eq!(backoff.max, Duration::from_secs(30));
        assert_eq!(backoff.multiplier, 2.0);
        assert_eq!(backoff.jitter, 0.2);
        assert_eq!(backoff.validate(), Ok(()));
    }

    #[test]
    fn the_base_delay_doubles_from_the_initial_delay_until_the_cap() {
        let backoff = standard();
        let delays: Vec<Duration> = (1..=11)
            .map(|attempt| backoff.base_delay(attempt))
            .collect();
        let expected: Vec<Duration> = [100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600]
            .into_iter()
            .map(|ms| ms * MS)
            .chain([Duration::from_secs(30); 2])
            .collect();
        assert_eq!(delays, expected);
    }

    #[test]
    fn attempt_zero_counts_as_the_first_retry() {
        let backoff = standard();
        assert_eq!(backoff.base_delay(0), backoff.base_delay(1));
    }

    #[test]
    fn a_huge_attempt_stays_at_the_cap_without_panicking() {
        let backoff = standard();
        assert_eq!(backoff.base_delay(u32::MAX), backoff.max);
        assert!(backoff.delay(u32::MAX, 0.999_999) <= backoff.max);
    }

    #[test]
    fn jitter_spans_the_range_around_the_base_delay() {
        let backoff = standard();
        assert_eq!(backoff.delay(2, 0.0), 160 * MS);
        assert_eq!(backoff.delay(2, 0.5), 200 * MS);
        assert_eq!(backoff.delay(2, 0.75), 220 * MS);
    }

    #[test]
    fn jitter_never_raises_a_capped_delay_above_the_cap() {
        let backoff = standard();
        assert_eq!(backoff.delay(20, 0.99), backoff.max);
        assert_eq!(backoff.delay(20, 0.0), Duration::from_secs(24));
    }

    #[test]
    fn without_jitter_the_delay_is_the_base_delay() {
        let backoff = Backoff {
            jitter: 0.0,
            ..standard()
        };
        for attempt in 0..12 {
            assert_eq!(backoff.delay(attempt, 0.37), backoff.base_delay(attempt));
        }
    }

    #[test]
    fn a_random_delay_stays_within_the_jitter_range() {
        let backoff = standard();
        for _ in 0..100 {
            let delay = backoff.delay_random(3);
            assert!((320 * MS..=480 * MS).contains(&delay), "{delay:?}");
        }
    }

    #[test]
    fn validation_names_the_bad_field() {
        let good = standard();
        let cases = [
            (
                Backoff {
                    initial: Duration::ZERO,
                    ..good
                },
                "initial",
            ),
            (
                Backoff {
                    max: 99 * MS,
                    ..good
                },
                "max",
            ),
            (
                Backoff {
                    multiplier: 0.5,
                    ..good
                },
                "multiplier",
            ),
            (
                Backoff {
                    multiplier: f64::INFINITY,
                    ..good
                },
                "multiplier",
            ),
            (
                Backoff {
                    multiplier: f64::NAN,
                    ..good
                },
                "multiplier",
            ),
            (
                Backoff {
                    jitter: -0.1,
                    ..good
                },
                "jitter",
            ),
            (
                Backoff {
                    jitter: 1.0,
                    ..good
                },
                "jitter",
            ),
            (
                Backoff {
                    jitter: f64::NAN,
                    ..good
                },
                "jitter",
            ),
        ];
        for (backoff, field) in cases {
            assert_eq!(backoff.validate(), Err(field), "{backoff:?}");
        }
        let edge = Backoff {
            max: good.initial,
            multiplier: 1.0,
            jitter: 0.0,
            ..good
        };
        assert_eq!(edge.validate(), Ok(()));
    }

    #[test]
    fn invalid_settings_do_not_panic() {
        let nan = Backoff {
            multiplier: f64::NAN,
            jitter: f64::NAN,
            ..standard()
        };
        let shrinking = Backoff {
            multiplier: -3.0,
            ..standard()
        };
        for backoff in [nan, shrinking] {
            for attempt in [0, 1, 2, 3, 1_000, u32::MAX] {
                assert!(backoff.base_delay(attempt) <= backoff.max);
                assert!(backoff.delay(attempt, 0.5) <= backoff.max);
            }
        }
    }

    fn valid_backoff() -> impl Strategy<Value = Backoff> {
        (1..=10_000u32, 0..=1_000_000u32, 1.0..10.0f64, 0.0..1.0f64).prop_map(
            |(initial_ms, extra_ms, multiplier, jitter)| Backoff {
                initial: initial_ms * MS,
                max: (initial_ms + extra_ms) * MS,
                multiplier,
                jitter,
            },
        )
    }

    fn attempt() -> impl Strategy<Value = u32> {
        prop_oneof![0..64u32, any::<u32>(), Just(u32::MAX)]
    }

    proptest! {
        #[test]
        fn the_base_delay_never_decreases_with_the_attempt(
            backoff in valid_backoff(),
            attempt in attempt(),
        ) {
            prop_assert!(backoff.validate().is_ok());
            let next = attempt.saturating_add(1);
            prop_assert!(backoff.base_delay(attempt) <= backoff.base_delay(next));
        }

        #[test]
        fn the_base_delay_stays_between_the_initial_delay_and_the_cap(
            backoff in valid_backoff(),
            attempt in attempt(),
        ) {
            let delay = backoff.base_delay(attempt);
            prop_assert!(delay <= backoff.max);
            // One nanosecond of slack for the round trip through f64 seconds.
            prop_assert!(delay + Duration::from_nanos(1) >= backoff.initial);
        }

        #[test]
        fn the_jittered_delay_stays_within_the_jitter_range_and_the_cap(
            backoff in valid_backoff(),
            attempt in attempt(),
            unit in 0.0..1.0f64,
        ) {
            let base = backoff.base_delay(attempt);
            let delay = backoff.delay(attempt, unit);
            let slack = Duration::from_nanos(1);
            let low = base.mul_f64(1.0 - backoff.jitter);
            let high = base.mul_f64(1.0 + backoff.jitter).min(backoff.max);
            prop_assert!(delay + slack >= low, "{delay:?} below {low:?}");
            prop_assert!(delay <= high + slack, "{delay:?} above {high:?}");
            prop_assert!(delay <= backoff.max);
        }

        #[test]
        fn no_attempt_and_no_unit_panics(
            backoff in valid_backoff(),
            attempt in any::<u32>(),
            unit in 0.0..1.0f64,
        ) {
            let delay = backoff.delay(attempt, unit);
            prop_assert!(delay <= backoff.max);
        }
    }
}
