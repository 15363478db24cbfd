//! What `verify` found, per partition and in all (pure): each record read is classified
//! against what the projection holds, counted, and rendered for people or as JSON.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::inbox::offset_resets::ResetRow;

/// How many missing events a partition's report names (the counts cover them all).
pub const MISSING_SHOWN: usize = 10;

/// What the projection holds for one valid event's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// No inbox marker: the event was never stored, or the database lost it.
    Nothing,
    /// An inbox marker without a history row: lost for good in the way the contract forbids
    /// (a replay answers "already applied").
    MarkerOnly,
    /// The history row: `first_here` when the inbox first saw the event at this record's
    /// partition and offset (or says nothing about where), `same` when the row holds what the
    /// record says.
    Row { first_here: bool, same: bool },
}

/// One record, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A valid event, and what the projection holds for it.
    Event(Stored),
    /// A record the service dead-letters; whether `dead_letters` holds it.
    Rejected { stored: bool },
}

impl Verdict {
    /// A valid event without its history row.
    pub fn is_missing(self) -> bool {
        matches!(self, Verdict::Event(Stored::Nothing | Stored::MarkerOnly))
    }
}

/// A valid event the projection lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingEvent {
    pub offset: i64,
    pub event_id: String,
}

/// Counts of records read, by what the projection holds for them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Records read.
    pub records: u64,
    /// Records holding a valid event: `present + missing`.
    pub valid: u64,
    /// Valid events with their history row.
    pub present: u64,
    /// Of those, records whose event the inbox first saw elsewhere (a republished duplicate).
    pub republished: u64,
    /// Of those, records whose stored row holds something else (a conflicting republish).
    pub conflicting: u64,
    /// Valid events without a history row.
    pub missing: u64,
    /// Of those, events with an inbox marker but no history row.
    pub marker_only: u64,
    /// Records the service dead-letters: `dead_lettered + dead_letters_missing`.
    pub rejected: u64,
    pub dead_lettered: u64,
    pub dead_letters_missing: u64,
    /// History rows whose event the inbox first saw in this partition outside the range read
    /// (informative: `--from-datetime` leaves earlier rows out, a retention-trimmed topic too).
    pub outside_range: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.records += other.records;
        self.valid += other.valid;
        self.present += other.present;
        self.republished += other.republished;
        self.conflicting += other.conflicting;
        self.missing += other.missing;
        self.marker_only += other.marker_only;
        self.rejected += other.rejected;
        self.dead_lettered += other.dead_lettered;
        self.dead_letters_missing += other.dead_letters_missing;
        self.outside_range += other.outside_range;
    }
}

/// One partition's findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PartitionReport {
    pub partition: i32,
    /// The range read: `[start, end)`.
    pub start: i64,
    pub end: i64,
    #[serde(flatten)]
    pub counts: Counts,
    /// The first missing events, in offset order (at most [`MISSING_SHOWN`]).
    pub first_missing: Vec<MissingEvent>,
}

impl PartitionReport {
    pub fn new(partition: i32, start: i64, end: i64) -> Self {
        PartitionReport {
            partition,
            start,
            end,
            ..Default::default()
        }
    }

    /// Counts one record.
    pub fn count(&mut self, offset: i64, event_id: Option<&str>, verdict: Verdict) {
        let c = &mut self.counts;
        c.records += 1;
        match verdict {
            Verdict::Event(Stored::Row { first_here, same }) => {
                c.valid += 1;
                c.present += 1;
                c.republished += u64::from(!first_here);
                c.conflicting += u64::from(!same);
            }
            Verdict::Event(stored) => {
                c.valid += 1;
                c.missing += 1;
                c.marker_only += u64::from(stored == Stored::MarkerOnly);
                if self.first_missing.len() < MISSING_SHOWN {
                    self.first_missing.push(MissingEvent {
                        offset,
                        event_id: event_id.unwrap_or_default().to_owned(),
                    });
                }
            }
            Verdict::Rejected { stored } => {
                c.rejected += 1;
                if stored {
                    c.dead_lettered += 1;
                } else {
                    c.dead_letters_missing += 1;
                }
            }
        }
    }
}

/// Sums over every partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    #[serde(flatten)]
    pub counts: Counts,
    /// History rows whose origin the inbox does not know, or names no partition of the topic.
    pub rows_without_origin: u64,
}

/// The whole verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub topic: String,
    /// Read from this point in time (`None`: from each partition's start).
    pub from: Option<DateTime<Utc>>,
    /// When the ends were taken.
    pub ends_at: DateTime<Utc>,
    pub partitions: Vec<PartitionReport>,
    pub totals: Totals,
    /// True when no valid event read is missing from the projection.
    pub whole: bool,
    /// Offset resets on record for the topic, newest first (`offset_resets`): offsets the
    /// group never read because they were no longer in the log. Their records are gone from
    /// the topic, so no verification can say whether they were stored; they do not change
    /// `whole`, which is about the records read.
    pub offset_resets: Vec<ResetRow>,
}

impl Report {
    /// Puts the partitions together; `rows_without_origin` comes from the database.
    pub fn new(
        topic: String,
        from: Option<DateTime<Utc>>,
        ends_at: DateTime<Utc>,
        partitions: Vec<PartitionReport>,
        rows_without_origin: u64,
    ) -> Report {
        let mut counts = Counts::default();
        for partition in &partitions {
            counts.add(&partition.counts);
        }
        Report {
            topic,
            from,
            ends_at,
            whole: counts.missing == 0,
            partitions,
            totals: Totals {
                counts,
                rows_without_origin,
            },
            offset_resets: Vec::new(),
        }
    }

    /// The offset resets on record for the topic.
    pub fn with_offset_resets(mut self, resets: Vec<ResetRow>) -> Report {
        self.offset_resets = resets;
        self
    }

    /// The lines about offset resets on record, if any.
    fn render_resets(&self, out: &mut String) {
        if self.offset_resets.is_empty() {
            return;
        }
        let passed: i64 = self.offset_resets.iter().map(ResetRow::skipped).sum();
        let held = self
            .offset_resets
            .iter()
            .filter(|r| r.to_offset.is_none())
            .count();
        let _ = writeln!(
            out,
            "OFFSET RESETS: {} on record ({passed} offsets passed over unread, {held} partition \
             position(s) held): those records were gone from the topic before the group read \
             them; no verification can show whether they were stored",
            self.offset_resets.len()
        );
        for r in &self.offset_resets {
            let to = r
                .to_offset
                .map_or_else(|| "held".to_owned(), |o| o.to_string());
            let _ = writeln!(
                out,
                "  partition {}: {} -> {to} ({} offsets), found {}, policy {}{}",
                r.partition,
                r.from_offset,
                r.skipped(),
                r.detected_at.to_rfc3339_opts(SecondsFormat::Millis, true),
                r.policy,
                r.resumed_by
                    .as_ref()
                    .map_or_else(String::new, |by| format!(", read on by {by}"))
            );
        }
    }

    /// The report for people: a line per partition, the totals and the verdict.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let from = match self.from {
            Some(at) => format!("from {}", at.to_rfc3339_opts(SecondsFormat::Millis, true)),
            None => "from each partition's start".to_owned(),
        };
        let _ = writeln!(
            out,
            "verified topic {} {from} up to its ends at {}",
            self.topic,
            self.ends_at.to_rfc3339_opts(SecondsFormat::Millis, true)
        );
        let _ = writeln!(
            out,
            "{:>9} {:>21} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {:>13} {:>9}",
            "partition",
            "offsets",
            "records",
            "valid",
            "present",
            "MISSING",
            "republished",
            "conflicting",
            "dead-lettered",
            "outside"
        );
        let line = |out: &mut String, name: &str, range: &str, c: &Counts| {
            let dead = if c.dead_letters_missing > 0 {
                format!("{}/{}", c.dead_lettered, c.rejected)
            } else {
                c.dead_lettered.to_string()
            };
            let _ = writeln!(
                out,
                "{name:>9} {range:>21} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {dead:>13} {:>9}",
                c.records,
                c.valid,
                c.present,
                c.missing,
                c.republished,
                c.conflicting,
                c.outside_range
            );
        };
        for p in &self.partitions {
            let range = format!("{}..{}", p.start, p.end);
            line(&mut out, &p.partition.to_string(), &range, &p.counts);
        }
        line(&mut out, "all", "", &self.totals.counts);
        let t = &self.totals.counts;
        if self.totals.rows_without_origin > 0 {
            let _ = writeln!(
                out,
                "{} history rows have no origin in this topic (informative)",
                self.totals.rows_without_origin
            );
        }
        if t.dead_letters_missing > 0 {
            let _ = writeln!(
                out,
                "{} of {} records the service dead-letters are not in dead_letters (a replay \
                 stores them again)",
                t.dead_letters_missing, t.rejected
            );
        }
        if t.marker_only > 0 {
            let _ = writeln!(
                out,
                "{} missing events have an inbox marker but no history row: a replay will not \
                 restore them",
                t.marker_only
            );
        }
        self.render_resets(&mut out);
        if self.whole {
            let _ = writeln!(
                out,
                "OK: all {} valid events read are in the projection",
                t.valid
            );
            return out;
        }
        let _ = writeln!(
            out,
            "MISSING: {} of {} valid events read are not in the projection",
            t.missing, t.valid
        );
        for p in self.partitions.iter().filter(|p| p.counts.missing > 0) {
            let shown: Vec<String> = p
                .first_missing
                .iter()
                .map(|m| format!("{} ({})", m.offset, m.event_id))
                .collect();
            let more = if p.counts.missing > shown.len() as u64 {
                ", ..."
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  partition {}: {} missing, first at offsets {}{more}",
                p.partition,
                p.counts.missing,
                shown.join(", ")
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(first_here: bool, same: bool) -> Verdict {
        Verdict::Event(Stored::Row { first_here, same })
    }

    #[test]
    fn each_verdict_lands_in_its_count() {
        let mut p = PartitionReport::new(2, 10, 20);
        p.count(10, Some("a"), row(true, true));
        p.count(11, Some("a"), row(false, true));
        p.count(12, Some("b"), row(false, false));
        p.count(13, Some("c"), Verdict::Event(Stored::Nothing));
        p.count(14, Some("d"), Verdict::Event(Stored::MarkerOnly));
        p.count(15, None, Verdict::Rejected { stored: true });
        p.count(16, None, Verdict::Rejected { stored: false });
        let c = &p.counts;
        assert_eq!(
            (c.records, c.valid, c.present, c.republished, c.conflicting),
            (7, 5, 3, 2, 1)
        );
        assert_eq!((c.missing, c.marker_only), (2, 1));
        assert_eq!(
            (c.rejected, c.dead_lettered, c.dead_letters_missing),
            (2, 1, 1)
        );
        assert_eq!(
            p.first_missing,
            vec![
                MissingEvent {
                    offset: 13,
                    event_id: "c".into()
                },
                MissingEvent {
                    offset: 14,
                    event_id: "d".into()
                }
            ]
        );
    }

    #[test]
    fn only_the_first_missing_events_are_named_but_all_are_counted() {
        let mut p = PartitionReport::new(0, 0, 100);
        for offset in 0..25 {
            p.count(offset, Some("x"), Verdict::Event(Stored::Nothing));
        }
        assert_eq!(p.counts.missing, 25);
        assert_eq!(p.first_missing.len(), MISSING_SHOWN);
        assert_eq!(p.first_missing[0].offset, 0);
    }

    #[test]
    fn a_report_is_whole_only_without_missing_events_and_dead_letters_do_not_count() {
        let mut a = PartitionReport::new(0, 0, 3);
        a.count(0, Some("e0"), row(true, true));
        a.count(1, None, Verdict::Rejected { stored: false });
        a.counts.outside_range = 4;
        let mut b = PartitionReport::new(1, 0, 2);
        b.count(0, Some("e1"), row(true, true));
        let whole = Report::new("t".into(), None, Utc::now(), vec![a.clone(), b.clone()], 1);
        assert!(whole.whole);
        assert_eq!(whole.totals.counts.records, 3);
        assert_eq!(whole.totals.counts.outside_range, 4);
        assert_eq!(whole.totals.rows_without_origin, 1);
        let text = whole.render();
        assert!(text.contains("OK: all 2 valid events"), "{text}");
        assert!(
            text.contains("1 of 1 records the service dead-letters"),
            "{text}"
        );

        b.count(1, Some("e2"), Verdict::Event(Stored::Nothing));
        let broken = Report::new("t".into(), None, Utc::now(), vec![a, b], 0);
        assert!(!broken.whole);
        let text = broken.render();
        assert!(
            text.contains("MISSING: 1 of 3 valid events read are not in the projection"),
            "{text}"
        );
        assert!(
            text.contains("partition 1: 1 missing, first at offsets 1 (e2)"),
            "{text}"
        );
    }

    #[test]
    fn the_json_report_names_every_count() {
        let report = Report::new(
            "t".into(),
            None,
            Utc::now(),
            vec![PartitionReport::new(0, 0, 0)],
            0,
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["whole"], true);
        for key in [
            "records",
            "valid",
            "present",
            "missing",
            "republished",
            "dead_lettered",
            "dead_letters_missing",
            "outside_range",
        ] {
            assert!(json["partitions"][0].get(key).is_some(), "{key}");
            assert!(json["totals"].get(key).is_some(), "{key}");
        }
    }
}
