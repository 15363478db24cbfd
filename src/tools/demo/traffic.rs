//! The demo's traffic as values: fresh status transitions over many tickets, outbox-style
//! republished duplicates and malformed records in set proportions, and the pacing of a rate.
//! No I/O: the publisher sends what this plans.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use rand::Rng;

use crate::domain::TicketEvent;

/// How many acknowledged events are remembered as candidates for a republish.
const REPUBLISH_WINDOW: usize = 1000;

/// Where tickets are allowed to go from each status (a small help-desk workflow).
const TRANSITIONS: [(&str, &[&str]); 5] = [
    ("open", &["in_progress", "resolved"]),
    ("in_progress", &["waiting", "resolved"]),
    ("waiting", &["in_progress"]),
    ("resolved", &["closed", "open"]),
    ("closed", &["open"]),
];

/// Shares of the traffic that are not fresh events.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    /// An acknowledged event published again (same event id, same payload), as an outbox
    /// publisher does after a crash between the Kafka ack and marking its row published.
    pub republish: f64,
    /// A record that can never become an event.
    pub malformed: f64,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            republish: 0.05,
            malformed: 0.01,
        }
    }
}

/// How a malformed record is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformation {
    /// Truncated JSON.
    NotJson,
    /// `changed_at` is absent.
    MissingField,
    /// `changed_at` is not an RFC 3339 timestamp.
    BadTimestamp,
}

impl Malformation {
    const ALL: [Malformation; 3] = [
        Malformation::NotJson,
        Malformation::MissingField,
        Malformation::BadTimestamp,
    ];
}

/// What a planned record is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKind {
    /// A new logical event: it must end up as exactly one row.
    Fresh(TicketEvent),
    /// An event published before, again.
    Republish(TicketEvent),
    /// Bytes that must end up in `dead_letters`.
    Malformed(Malformation),
}

/// One record to publish, keyed by ticket id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRecord {
    pub key: String,
    pub payload: Vec<u8>,
    pub kind: RecordKind,
}

impl PlannedRecord {
    /// The record of a well-formed event.
    pub fn event(event: TicketEvent, republish: bool) -> PlannedRecord {
        let payload = event.to_json().into_bytes();
        let key = event.ticket_id().to_string();
        let kind = if republish {
            RecordKind::Republish(event)
        } else {
            RecordKind::Fresh(event)
        };
        PlannedRecord { key, payload, kind }
    }
}

/// Records sent and acknowledged by Kafka, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Fresh events: each must become one row.
    pub unique_valid: u64,
    pub republished: u64,
    pub malformed: u64,
    /// Records Kafka did not acknowledge.
    pub failed: u64,
}

impl Tally {
    /// Counts an acknowledged record.
    pub fn delivered(&mut self, kind: &RecordKind) {
        match kind {
            RecordKind::Fresh(_) => self.unique_valid += 1,
            RecordKind::Republish(_) => self.republished += 1,
            RecordKind::Malformed(_) => self.malformed += 1,
        }
    }

    /// Records acknowledged by Kafka.
    pub fn total(&self) -> u64 {
        self.unique_valid + self.republished + self.malformed
    }
}

struct Ticket {
    id: String,
    status: &'static str,
    clock: DateTime<Utc>,
}

/// Plans the traffic: which ticket moves next, which event is republished, what is broken.
pub struct Generator<R> {
    rng: R,
    run_id: String,
    mix: Mix,
    next_seq: u64,
    tickets: Vec<Ticket>,
    acknowledged: VecDeque<TicketEvent>,
}

impl<R: Rng> Generator<R> {
    /// A generator over `tickets` tickets; event ids start with `evt-{run_id}-`.
    pub fn new(mut rng: R, run_id: &str, tickets: usize, mix: Mix) -> Generator<R> {
        let start = Utc.with_ymd_and_hms(2026, 10, 3, 8, 0, 0).unwrap();
        let tickets = (0..tickets.max(1))
            .map(|i| Ticket {
                id: format!("ticket-{}", 1000 + i),
                status: "open",
                clock: start + chrono::Duration::seconds(rng.random_range(0..3600)),
            })
            .collect();
        Generator {
            rng,
            run_id: run_id.to_owned(),
            mix,
            next_seq: 0,
            tickets,
            acknowledged: VecDeque::new(),
        }
    }

    /// The prefix of every event id this generator makes.
    pub fn id_prefix(&self) -> String {
        event_id_prefix(&self.run_id)
    }

    /// The next record to publish.
    pub fn next_record(&mut self) -> PlannedRecord {
        let roll: f64 = self.rng.random();
        if roll < self.mix.malformed {
            return self.malformed();
        }
        if roll < self.mix.malformed + self.mix.republish && !self.acknowledged.is_empty() {
            let pick = self.rng.random_range(0..self.acknowledged.len());
            return PlannedRecord::event(self.acknowledged[pick].clone(), true);
        }
        PlannedRecord::event(self.fresh_event(), false)
    }

    /// Remembers an event Kafka acknowledged, as a candidate for a later republish (only
    /// acknowledged events: a republish of an event that never arrived would be a first copy).
    pub fn acknowledged(&mut self, event: TicketEvent) {
        if self.acknowledged.len() == REPUBLISH_WINDOW {
            self.acknowledged.pop_front();
        }
        self.acknowledged.push_back(event);
    }

    fn fresh_event(&mut self) -> TicketEvent {
        let (pick, event) = self.draft();
        let ticket = &mut self.tickets[pick];
        ticket.status = next_statuses(ticket.status)
            .iter()
            .find(|s| **s == event.to_status())
            .copied()
            .unwrap_or("open");
        ticket.clock = event.changed_at;
        event
    }

    /// The next event of a random ticket, without moving the ticket.
    fn draft(&mut self) -> (usize, TicketEvent) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let pick = self.rng.random_range(0..self.tickets.len());
        let step = chrono::Duration::seconds(self.rng.random_range(1..600));
        let choices = next_statuses(self.tickets[pick].status);
        let to = choices[self.rng.random_range(0..choices.len())];
        let ticket = &self.tickets[pick];
        let event = TicketEvent::new(
            &format!("{}{seq}", event_id_prefix(&self.run_id)),
            ticket.id.as_str(),
            ticket.status,
            to,
            ticket.clock + step,
        );
        (pick, event)
    }

    fn malformed(&mut self) -> PlannedRecord {
        let how = Malformation::ALL[self.rng.random_range(0..Malformation::ALL.len())];
        let (_, event) = self.draft();
        let mut json: serde_json::Value =
            serde_json::from_str(&event.to_json()).expect("an event is JSON");
        let payload = match how {
            Malformation::NotJson => {
                let text = json.to_string();
                text.as_bytes()[..text.len() / 2].to_vec()
            }
            Malformation::MissingField => {
                json.as_object_mut().map(|o| o.remove("changed_at"));
                json.to_string().into_bytes()
            }
            Malformation::BadTimestamp => {
                json["changed_at"] = "03/10/2026 8am".into();
                json.to_string().into_bytes()
            }
        };
        PlannedRecord {
            key: event.ticket_id().to_string(),
            payload,
            kind: RecordKind::Malformed(how),
        }
    }
}

/// The prefix of the event ids of one demo run.
pub fn event_id_prefix(run_id: &str) -> String {
    format!("evt-{run_id}-")
}

fn next_statuses(status: &str) -> &'static [&'static str] {
    TRANSITIONS
        .iter()
        .find(|(from, _)| *from == status)
        .map_or(&["open"], |(_, to)| to)
}

/// Spreads a rate of records per second over ticks, carrying fractions over; after a stall
/// it resumes at the rate instead of bursting to catch up.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: f64,
    budget: f64,
}

impl Pacer {
    pub fn new(per_second: u32) -> Pacer {
        Pacer {
            rate: f64::from(per_second),
            budget: 0.0,
        }
    }

    /// How many records are due after `elapsed` since the previous tick.
    pub fn due(&mut self, elapsed: Duration) -> usize {
        let cap = self.rate.max(1.0);
        self.budget = (self.budget + self.rate * elapsed.as_secs_f64()).min(cap);
        let due = self.budget.floor();
        self.budget -= due;
        due as usize
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn generator() -> Generator<StdRng> {
        Generator::new(StdRng::seed_from_u64(7), "run1", 50, Mix::default())
    }

    fn planned(count: usize) -> Vec<PlannedRecord> {
        let mut generator = generator();
        (0..count)
            .map(|_| {
                let record = generator.next_record();
                if let RecordKind::Fresh(event) = &record.kind {
                    generator.acknowledged(event.clone());
                }
                record
            })
            .collect()
    }

    #[test]
    fn the_mix_is_mostly_fresh_events_with_some_republishes_and_malformed_records() {
        let records = planned(20_000);
        let count = |f: fn(&RecordKind) -> bool| records.iter().filter(|r| f(&r.kind)).count();
        let republished = count(|k| matches!(k, RecordKind::Republish(_)));
        let malformed = count(|k| matches!(k, RecordKind::Malformed(_)));
        assert!((800..1200).contains(&republished), "{republished}");
        assert!((120..300).contains(&malformed), "{malformed}");
        for how in Malformation::ALL {
            assert!(records.iter().any(|r| r.kind == RecordKind::Malformed(how)));
        }
    }

    #[test]
    fn fresh_events_parse_and_have_unique_ids_keyed_by_their_ticket() {
        let mut ids = std::collections::HashSet::new();
        for record in planned(5_000) {
            if let RecordKind::Fresh(event) = &record.kind {
                let parsed = TicketEvent::parse(&record.payload, usize::MAX).expect("valid");
                assert_eq!(&parsed, event);
                assert_eq!(record.key, event.ticket_id());
                assert!(event.event_id().starts_with("evt-run1-"));
                assert!(
                    ids.insert(event.event_id().to_owned()),
                    "{}",
                    event.event_id()
                );
            }
        }
    }

    #[test]
    fn a_republish_repeats_an_acknowledged_event_byte_for_byte() {
        let records = planned(5_000);
        for record in &records {
            if let RecordKind::Republish(event) = &record.kind {
                let first = records
                    .iter()
                    .find(|r| r.kind == RecordKind::Fresh(event.clone()))
                    .expect("the first copy was published");
                assert_eq!(first.payload, record.payload);
                assert_eq!(first.key, record.key);
            }
        }
    }

    #[test]
    fn nothing_is_republished_before_anything_was_acknowledged() {
        let mut generator = generator();
        for _ in 0..2_000 {
            assert!(!matches!(
                generator.next_record().kind,
                RecordKind::Republish(_)
            ));
        }
    }

    #[test]
    fn malformed_records_never_parse() {
        for record in planned(20_000) {
            if let RecordKind::Malformed(_) = record.kind {
                assert!(TicketEvent::parse(&record.payload, usize::MAX).is_err());
            }
        }
    }

    #[test]
    fn each_ticket_moves_forward_in_time_along_its_workflow() {
        let mut last: std::collections::HashMap<String, TicketEvent> = Default::default();
        for record in planned(5_000) {
            let RecordKind::Fresh(event) = &record.kind else {
                continue;
            };
            if let Some(previous) = last.get(event.ticket_id()) {
                assert_eq!(previous.to_status(), event.from_status());
                assert!(previous.changed_at < event.changed_at);
            }
            assert!(next_statuses(event.from_status()).contains(&event.to_status()));
            last.insert(event.ticket_id().to_string(), event.clone());
        }
    }

    #[test]
    fn the_pacer_keeps_the_rate_and_does_not_burst_after_a_stall() {
        let mut pacer = Pacer::new(200);
        let sent: usize = (0..100).map(|_| pacer.due(Duration::from_millis(20))).sum();
        assert!((399..=400).contains(&sent), "{sent}");
        assert_eq!(pacer.due(Duration::from_secs(60)), 200);
        assert_eq!(Pacer::new(3).due(Duration::from_millis(100)), 0);
    }
}
