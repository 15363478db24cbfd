//! A record waiting in a partition's queue: as the driver handed it over, or already parsed
//! for the batch that runs next (see `Schedule::upcoming`).

use super::PartitionDeps;
use crate::domain::FetchedRecord;
use crate::work::Work;

/// Where a queued record's event comes from, and what its parse needs.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub max_payload_bytes: usize,
}

/// A queued record. Received records stay unparsed (a parsed one is about three times the
/// size); only the batch that runs next is parsed ahead, boxed so that the queue's entries
/// keep the size of a received record.
pub enum Queued {
    Received(FetchedRecord),
    Parsed(Box<Work>),
}

impl Queued {
    /// Parses a received record in place; a parsed one stays as it is.
    pub fn parse(&mut self, source: Source<'_>) {
        if let Queued::Received(record) = self {
            let record = FetchedRecord {
                offset: record.offset,
                key: record.key.take(),
                payload: record.payload.take(),
                timestamp: record.timestamp,
            };
            *self = Queued::Parsed(Box::new(source.parse(record)));
        }
    }

    /// The record's work, parsed now unless it was already.
    pub fn into_work(self, source: Source<'_>) -> Work {
        match self {
            Queued::Received(record) => source.parse(record),
            Queued::Parsed(work) => *work,
        }
    }
}

impl<'a> Source<'a> {
    /// What parsing the records of `partition` needs.
    pub fn of(deps: &'a PartitionDeps, partition: i32) -> Source<'a> {
        Source {
            topic: &deps.topic,
            partition,
            max_payload_bytes: deps.max_payload_bytes,
        }
    }

    fn parse(self, record: FetchedRecord) -> Work {
        Work::from_record(self.topic, self.partition, record, self.max_payload_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::RecordKey;

    const EVENT: &str = r#"{"event_id":"e-1","ticket_id":"t-1","from_status":"new","to_status":"open","changed_at":"2026-12-07T10:00:00Z"}"#;

    fn record(payload: &str) -> FetchedRecord {
        FetchedRecord {
            offset: 7,
            key: Some(RecordKey::new(b"t-1")),
            payload: Some(payload.as_bytes().to_vec()),
            timestamp: None,
        }
    }

    fn source() -> Source<'static> {
        Source {
            topic: "ticket-status",
            partition: 3,
            max_payload_bytes: 1 << 20,
        }
    }

    /// The same work whether parsed ahead or as its batch starts, for an event and for a
    /// record that becomes a dead letter.
    #[test]
    fn a_record_parsed_ahead_is_the_work_parsed_at_its_start() {
        for payload in [EVENT, "{not json"] {
            let now = Queued::Received(record(payload)).into_work(source());
            let mut ahead = Queued::Received(record(payload));
            ahead.parse(source());
            assert!(matches!(ahead, Queued::Parsed(_)));
            ahead.parse(source());
            let ahead = ahead.into_work(source());
            assert_eq!(format!("{ahead:?}"), format!("{now:?}"), "{payload}");
        }
    }

    /// A window of records waits in the queue: parsing ahead must not make each entry bigger.
    #[test]
    fn a_queued_record_is_no_bigger_than_a_received_one() {
        assert!(std::mem::size_of::<Queued>() <= std::mem::size_of::<FetchedRecord>());
    }
}
