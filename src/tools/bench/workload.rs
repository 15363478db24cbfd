//! The benchmark's records: the demo's traffic generator with republished duplicates and no
//! malformed records, seeded, so the same events can be made again for the database ceiling.
//! Event ids are ordered within a run (`evt-<run>-<seq>`, an outbox's sequence) or random
//! UUIDv4 text (what most outboxes use), a republished copy keeping its event's id either way.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::report::IdKind;
use crate::domain::TicketEvent;
use crate::tools::demo::traffic::{Generator, Mix, PlannedRecord, RecordKind};

/// Tickets the events are spread over; the ticket id is the record key.
const TICKETS: usize = 1000;

/// An endless, reproducible stream of records: the same seed gives the same tickets, statuses
/// and duplicates (event ids differ only by the run id in their prefix).
pub struct Workload {
    generator: Generator<StdRng>,
    /// With random ids: where they come from, and the id each ordered one was given (so a
    /// republished copy carries its event's id).
    random: Option<(StdRng, HashMap<String, String>)>,
}

impl Workload {
    /// Records whose event ids start with `evt-{run_id}-`, `duplicates` of them (a share)
    /// republished copies of recent events.
    pub fn new(seed: u64, run_id: &str, duplicates: f64) -> Workload {
        Workload::with_ids(seed, run_id, duplicates, IdKind::Ordered)
    }

    /// The same records with event ids of the given kind: random ones are UUIDv4 text drawn
    /// from a generator seeded by `seed` and `run_id` (another run id, other ids).
    pub fn with_ids(seed: u64, run_id: &str, duplicates: f64, ids: IdKind) -> Workload {
        let mix = Mix {
            republish: duplicates,
            malformed: 0.0,
        };
        let random = match ids {
            IdKind::Ordered => None,
            IdKind::Random => {
                let mut hasher = DefaultHasher::new();
                (seed, run_id).hash(&mut hasher);
                Some((StdRng::seed_from_u64(hasher.finish()), HashMap::new()))
            }
        };
        Workload {
            generator: Generator::new(StdRng::seed_from_u64(seed), run_id, TICKETS, mix),
            random,
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
        let Some((rng, given)) = &mut self.random else {
            return Some(record);
        };
        Some(match record.kind {
            RecordKind::Fresh(event) => {
                let id = uuid_v4(rng);
                let renamed = event.with_event_id(&id);
                given.insert(event.event_id().to_owned(), id);
                PlannedRecord::event(renamed, false)
            }
            RecordKind::Republish(event) => {
                let event = match given.get(event.event_id()) {
                    Some(id) => event.with_event_id(id),
                    None => event,
                };
                PlannedRecord::event(event, true)
            }
            RecordKind::Malformed(_) => record,
        })
    }
}

/// A random (version 4, RFC 9562) UUID in its canonical text form, as `gen_random_uuid()`
/// writes it.
pub fn uuid_v4(rng: &mut impl Rng) -> String {
    let mut bytes: [u8; 16] = rng.random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
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
                RecordKind::Fresh(event) => assert!(seen.insert(event.event_id().to_owned())),
                RecordKind::Republish(event) => {
                    assert!(seen.contains(event.event_id()));
                    assert_eq!(record.key, event.ticket_id());
                }
                RecordKind::Malformed(_) => unreachable!(),
            }
        }
    }

    #[test]
    fn random_ids_are_uuid_v4_text_and_a_duplicate_keeps_its_events_id() {
        let mut fresh = HashSet::new();
        let mut republished = 0;
        for record in Workload::with_ids(4, "t", 0.3, IdKind::Random).take(5_000) {
            match &record.kind {
                RecordKind::Fresh(event) => {
                    let id = event.event_id();
                    assert_eq!(id.len(), 36, "{id}");
                    let groups: Vec<usize> = id.split('-').map(str::len).collect();
                    assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
                    assert_eq!(&id[14..15], "4", "{id}");
                    assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
                    assert!(fresh.insert(id.to_owned()), "{id}");
                    let payload = String::from_utf8(record.payload.clone()).unwrap();
                    assert!(payload.contains(id), "{payload}");
                }
                RecordKind::Republish(event) => {
                    assert!(fresh.contains(event.event_id()), "{}", event.event_id());
                    republished += 1;
                }
                RecordKind::Malformed(_) => unreachable!(),
            }
        }
        assert!(republished > 1_000, "{republished}");
        let first = |run: &str| {
            Workload::with_ids(4, run, 0.3, IdKind::Random)
                .find_map(event_of)
                .unwrap()
                .event_id()
                .to_owned()
        };
        assert_eq!(first("a"), first("a"));
        assert_ne!(first("a"), first("b"));
    }

    #[test]
    fn the_same_seed_makes_the_same_events_under_another_run_id() {
        let strip = |run: &str| -> Vec<(String, String, String)> {
            Workload::new(3, run, 0.1)
                .take(2_000)
                .filter_map(event_of)
                .map(|e| {
                    let seq = e.event_id().rsplit('-').next().unwrap().to_owned();
                    (seq, e.ticket_id().to_string(), e.to_status().to_string())
                })
                .collect()
        };
        assert_eq!(strip("first"), strip("second"));
        let prefix = Workload::new(3, "first", 0.1).id_prefix();
        assert!(
            Workload::new(3, "first", 0.1)
                .take(10)
                .filter_map(event_of)
                .all(|e| e.event_id().starts_with(&prefix))
        );
    }
}
