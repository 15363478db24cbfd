//! The benchmark's records: the demo's traffic generator with republished duplicates and no
//! malformed records, seeded, so the same events can be made again for the database ceiling.

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::domain::TicketEvent;
use crate::tools::demo::traffic::{Generator, Mix, PlannedRecord, RecordKind};

/// Tickets the events are spread over; the ticket id is the record key.
const TICKETS: usize = 1000;

/// An endless, reproducible stream of records: the same seed gives the same tickets, statuses
/// and duplicates (event ids differ only by the run id in their prefix).
pub struct Workload {
    generator: Generator<StdRng>,
}

impl Workload {
    /// Records whose event ids start with `evt-{run_id}-`, `duplicates` of them (a share)
    /// republished copies of recent events.
    pub fn new(seed: u64, run_id: &str, duplicates: f64) -> Workload {
        let mix = Mix {
            republish: duplicates,
            malformed: 0.0,
        };
        Workload {
            generator: Generator::new(StdRng::seed_from_u64(seed), run_id, TICKETS, mix),
        }
    }

    /// The prefix of every event id of this workload.
    pub fn id_prefix(&self) -> String {
        self.generator.id_prefix()
    }
}

impl Iterator for Workload {
    type Item = PlannedRecord;

    fn next(&mut self) -> Option<PlannedRecord> {
        let record = self.generator.next_record();
        // Every record of a run is delivered (or the run fails), so a fresh event may be
        // republished from the moment it is planned.
        if let RecordKind::Fresh(event) = &record.kind {
            self.generator.acknowledged(event.clone());
        }
        Some(record)
    }
}

/// The event a record carries (every benchmark record is a well-formed event).
pub fn event_of(record: PlannedRecord) -> Option<TicketEvent> {
    match record.kind {
        RecordKind::Fresh(event) | RecordKind::Republish(event) => Some(event),
        RecordKind::Malformed(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn the_share_of_duplicates_is_the_one_asked_for_and_nothing_is_malformed() {
        let records: Vec<_> = Workload::new(1, "t", 0.10).take(20_000).collect();
        let republished = records
            .iter()
            .filter(|r| matches!(r.kind, RecordKind::Republish(_)))
            .count();
        assert!((1_800..2_200).contains(&republished), "{republished}");
        assert!(
            !records
                .iter()
                .any(|r| matches!(r.kind, RecordKind::Malformed(_)))
        );
    }

    #[test]
    fn a_duplicate_repeats_an_earlier_event_of_the_same_ticket_key() {
        let mut seen = HashSet::new();
        for record in Workload::new(2, "t", 0.3).take(5_000) {
            match &record.kind {
                RecordKind::Fresh(event) => assert!(seen.insert(event.event_id.clone())),
                RecordKind::Republish(event) => {
                    assert!(seen.contains(&event.event_id));
                    assert_eq!(record.key, event.ticket_id);
                }
                RecordKind::Malformed(_) => unreachable!(),
            }
        }
    }

    #[test]
    fn the_same_seed_makes_the_same_events_under_another_run_id() {
        let strip = |run: &str| -> Vec<(String, String, String)> {
            Workload::new(3, run, 0.1)
                .take(2_000)
                .filter_map(event_of)
                .map(|e| {
                    let seq = e.event_id.rsplit('-').next().unwrap().to_owned();
                    (seq, e.ticket_id, e.to_status)
                })
                .collect()
        };
        assert_eq!(strip("first"), strip("second"));
        let prefix = Workload::new(3, "first", 0.1).id_prefix();
        assert!(
            Workload::new(3, "first", 0.1)
                .take(10)
                .filter_map(event_of)
                .all(|e| e.event_id.starts_with(&prefix))
        );
    }
}
