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

/// As [`parse_point_in_time`], but a date and time without a zone (a browser's
/// `2026-10-03T08:00`, a date alone) is read as UTC: for filters, where a guess costs nothing.
pub fn parse_point_in_time_or_utc(text: &str) -> Result<DateTime<Utc>, PointInTimeError> {
    let zoneless = match parse_point_in_time(text) {
        Err(PointInTimeError::NoTimeZone(shown)) => shown,
        other => return other,
    };
    let with_t = text.trim().replacen(' ', "T", 1);
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(&with_t, format).ok())
        .or_else(|| {
            NaiveDate::parse_from_str(&with_t, "%Y-%m-%d")
                .ok()
                .map(|day| day.and_time(chrono::NaiveTime::MIN))
        })
        .map(|at| at.and_utc())
        .ok_or(PointInTimeError::Unreadable(zoneless))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_reads_a_time_without_a_zone_as_utc_and_everything_else_as_a_point_in_time() {
        let utc = |text: &str| parse_point_in_time_or_utc(text).map(|t| t.to_rfc3339());
        assert_eq!(
            utc("2026-10-03T08:00"),
            Ok("2026-10-03T08:00:00+00:00".into())
        );
        assert_eq!(
            utc("2026-10-03 08:00:30"),
            Ok("2026-10-03T08:00:30+00:00".into())
        );
        assert_eq!(utc("2026-10-03"), Ok("2026-10-03T00:00:00+00:00".into()));
        assert_eq!(
            utc("2026-10-03T08:00:00+02:00"),
            Ok("2026-10-03T06:00:00+00:00".into())
        );
        assert_eq!(utc("0"), Ok("1970-01-01T00:00:00+00:00".into()));
        assert!(matches!(
            utc("yesterday"),
            Err(PointInTimeError::Unreadable(_))
        ));
        assert_eq!(utc(" "), Err(PointInTimeError::Empty));
    }

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
