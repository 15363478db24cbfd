//! The timestamp nearly every producer writes, `2026-10-03T08:00:00Z` or with a fraction of a
//! second (`.5` to nanoseconds), read without chrono's general RFC 3339 parser.
//!
//! Like the scan, it answers only where chrono's answer is certain and the same: any other
//! form (an offset, a lowercase `t` or `z`, a space, a leap second, an invalid date) is left to
//! chrono, which also words the error. The tests compare the two.

use chrono::{DateTime, NaiveDate, Utc};

/// `text` as an instant, if it has the common shape and is a valid date and time.
pub(super) fn utc(text: &str) -> Option<DateTime<Utc>> {
    let b = text.as_bytes();
    let (head, fraction) = (b.get(..19)?, b.get(19..b.len().checked_sub(1)?)?);
    if b.last() != Some(&b'Z') {
        return None;
    }
    let punctuation = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if punctuation.iter().any(|&(at, byte)| head[at] != byte) {
        return None;
    }
    let number = |from: usize, to: usize| -> Option<u32> {
        head[from..to].iter().try_fold(0u32, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let nanos = match fraction {
        [] => 0,
        [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
            let value = digits.iter().try_fold(0u32, |n, &d| {
                d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
            })?;
            value * 10u32.pow(9 - digits.len() as u32)
        }
        _ => return None,
    };
    let year = i32::try_from(number(0, 4)?).ok()?;
    let second = number(17, 19)?;
    // A leap second (60) is chrono's to represent.
    if second > 59 {
        return None;
    }
    NaiveDate::from_ymd_opt(year, number(5, 7)?, number(8, 10)?)?
        .and_hms_nano_opt(number(11, 13)?, number(14, 16)?, second, nanos)
        .map(|at| at.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chrono(text: &str) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|at| at.with_timezone(&Utc))
    }

    #[test]
    fn the_common_shapes_take_the_short_way_and_agree_with_chrono() {
        for text in [
            "2026-10-03T08:00:00Z",
            "2026-10-03T08:00:00.5Z",
            "2026-10-03T08:00:00.123Z",
            "2026-10-03T08:00:00.123456789Z",
            "2024-02-29T23:59:59Z",
            "0000-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999999999Z",
        ] {
            assert!(utc(text).is_some(), "{text}");
            assert_eq!(utc(text), chrono(text), "{text}");
        }
    }

    #[test]
    fn other_forms_are_left_to_chrono() {
        for text in [
            "2026-10-03T08:00:00+00:00",
            "2026-10-03t08:00:00z",
            "2026-10-03 08:00:00Z",
            "2016-12-31T23:59:60Z",
            "2026-02-29T08:00:00Z",
            "2026-10-03T24:00:00Z",
            "2026-10-03T08:00:00.Z",
            "2026-10-03T08:00:00.1234567891Z",
            "2026-10-03T08:00Z",
            "+2026-10-03T08:00:00Z",
            "yesterday",
            "",
        ] {
            assert_eq!(utc(text), None, "{text}");
        }
    }

    proptest! {
        #[test]
        fn where_it_answers_it_answers_as_chrono_does(
            text in "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,11})?([Zz]|[+-][0-9]{2}:[0-9]{2})?",
        ) {
            if let Some(at) = utc(&text) {
                prop_assert_eq!(Some(at), chrono(&text));
            }
        }

        #[test]
        fn every_valid_instant_written_the_common_way_takes_the_short_way(
            seconds in -62_167_219_200i64..253_402_300_799,
            nanos in 0u32..1_000_000_000,
            digits in 0usize..=9,
        ) {
            let at = DateTime::from_timestamp(seconds, nanos).unwrap();
            let fraction = match digits {
                0 => String::new(),
                n => format!(".{:09}", nanos)[..=n].to_owned(),
            };
            let text = format!("{}{fraction}Z", at.format("%Y-%m-%dT%H:%M:%S"));
            prop_assert!(utc(&text).is_some(), "{}", text);
            prop_assert_eq!(utc(&text), chrono(&text));
        }
    }
}
