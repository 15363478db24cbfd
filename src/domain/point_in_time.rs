//! A point in time as an operator types it (`--to-datetime`, `--from-datetime`, the admin's
//! rewind form): parsed without I/O, and refused with a reason when it could mean two things.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

/// Why a text is not a point in time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointInTimeError {
    #[error("a point in time is required")]
    Empty,
    #[error(
        "{0:?} has no time zone: add Z for UTC or an offset such as +01:00 \
         (e.g. 2026-12-02T10:00:00Z)"
    )]
    NoTimeZone(String),
    #[error(
        "{0:?} is not a point in time: give an RFC 3339 date and time such as \
         2026-12-02T10:00:00Z, or milliseconds since 1970 such as 1796208000000"
    )]
    Unreadable(String),
    #[error("{0:?} is out of range")]
    OutOfRange(String),
}

/// Parses `2026-12-02T10:00:00Z`, `2026-12-02 10:00:00.250+01:00` (RFC 3339, `T` or a space)
/// or milliseconds since the Unix epoch (`1796208000000`, what Kafka record timestamps are).
/// A date and time without a zone is refused rather than read in some local time.
pub fn parse_point_in_time(text: &str) -> Result<DateTime<Utc>, PointInTimeError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(PointInTimeError::Empty);
    }
    let shown: String = text.chars().take(64).collect();
    if text.bytes().all(|b| b.is_ascii_digit()) {
        let millis: i64 = text
            .parse()
            .map_err(|_| PointInTimeError::OutOfRange(shown.clone()))?;
        return DateTime::from_timestamp_millis(millis).ok_or(PointInTimeError::OutOfRange(shown));
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    // RFC 3339 allows a space for the `T` (section 5.6, note); chrono's parser does not.
    let with_t = text.replacen(' ', "T", 1);
    if let Ok(at) = DateTime::parse_from_rfc3339(&with_t) {
        return Ok(at.with_timezone(&Utc));
    }
    let without_zone = NaiveDateTime::parse_from_str(&with_t, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
        || NaiveDateTime::parse_from_str(&with_t, "%Y-%m-%dT%H:%M").is_ok()
        || NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok();
    if without_zone {
        Err(PointInTimeError::NoTimeZone(shown))
    } else {
        Err(PointInTimeError::Unreadable(shown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn rfc_3339_with_a_zone_is_read_with_t_or_a_space() {
        assert_eq!(
            parse_point_in_time("2026-12-02T10:00:00Z"),
            Ok(utc("2026-12-02T10:00:00Z"))
        );
        assert_eq!(
            parse_point_in_time(" 2026-12-02 11:00:00.250+01:00 "),
            Ok(utc("2026-12-02T10:00:00.250Z"))
        );
        assert_eq!(
            parse_point_in_time("2026-12-02t10:00:00z"),
            Ok(utc("2026-12-02T10:00:00Z"))
        );
    }

    #[test]
    fn milliseconds_since_the_epoch_are_what_record_timestamps_are() {
        let at = parse_point_in_time("1796208000123").unwrap();
        assert_eq!(at.timestamp_millis(), 1_796_208_000_123);
        assert_eq!(
            parse_point_in_time("99999999999999999999"),
            Err(PointInTimeError::OutOfRange("99999999999999999999".into()))
        );
    }

    #[test]
    fn a_time_without_a_zone_is_refused_rather_than_guessed() {
        for text in ["2026-12-02T10:00:00", "2026-12-02 10:00", "2026-12-02"] {
            let error = parse_point_in_time(text).unwrap_err();
            assert_eq!(error, PointInTimeError::NoTimeZone(text.into()));
            assert!(error.to_string().contains("add Z"), "{error}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_an_example() {
        assert_eq!(parse_point_in_time("  "), Err(PointInTimeError::Empty));
        let error = parse_point_in_time("yesterday").unwrap_err();
        assert_eq!(error, PointInTimeError::Unreadable("yesterday".into()));
        assert!(error.to_string().contains("2026-12-02T10:00:00Z"));
    }
}
