//! A record waiting in a partition's queue, and the works of the batch that runs next, parsed
//! ahead of its start (see `Schedule::upcoming`).
//!
//! A parsed record is about three times the size of a received one, and a queue holds a
//! window of records. So the queue keeps its entries as received; the few parsed ahead (one
//! batch at most) leave only a mark there, and their works wait in [`Ahead`], in queue order,
//! in a buffer the partition reuses while it has work and the database answers: parsing
//! ahead allocates nothing per record.

use std::collections::VecDeque;

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

/// A queued record: as the driver handed it over, or parsed ahead (its work is in [`Ahead`]).
pub enum Queued {
    Received(FetchedRecord),
    Parsed,
}

/// The works of the records parsed ahead, in the order of their marks in the queue.
///
/// The queue gives up records only from its head (a batch starting) or all at once (a
/// drain), so the oldest work here always belongs to the first mark: [`Ahead::take`] takes it
/// then, and a drain [`clear`](Ahead::clear)s them all. Each work keeps its offset, checked as
/// it is taken.
#[derive(Default)]
pub struct Ahead {
    works: VecDeque<(i64, Work)>,
}

impl Ahead {
    /// Parses the records among `queued` that are not yet, leaving their marks.
    pub fn parse<'q>(&mut self, queued: impl Iterator<Item = &'q mut Queued>, source: Source<'_>) {
        for entry in queued {
            if let Queued::Received(record) = std::mem::replace(entry, Queued::Parsed) {
                self.works.push_back((record.offset, source.parse(record)));
            }
        }
    }

    /// The works of a batch's records taken from the queue's head: parsed ahead or now.
    pub fn take(&mut self, records: Vec<(i64, Queued)>, source: Source<'_>) -> Vec<(i64, Work)> {
        records
            .into_iter()
            .map(|(offset, queued)| match queued {
                Queued::Received(record) => (offset, source.parse(record)),
                Queued::Parsed => {
                    let (parsed, work) = self
                        .works
                        .pop_front()
                        .expect("a record parsed ahead has its work");
                    assert_eq!(
                        parsed, offset,
                        "works parsed ahead are taken in queue order"
                    );
                    (offset, work)
                }
            })
            .collect()
    }

    /// Whether the first `records` queued records are parsed: the marks are the queue's head,
    /// one per work held.
    pub fn holds(&self, records: usize) -> bool {
        self.works.len() >= records
    }

    /// Forgets every work parsed ahead: the queue dropped its records.
    pub fn clear(&mut self) {
        self.works.clear();
    }

    /// Gives back the buffer's room (a batch's worth of works: about 50 KB at B = 256) once
    /// nothing parsed ahead waits in it. For a partition with nothing to do or a database
    /// that does not answer, neither of which parses ahead: its memory is then what it was
    /// before any parse ahead.
    pub fn release(&mut self) {
        if self.works.is_empty() && self.works.capacity() > 0 {
            self.works = VecDeque::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::RecordKey;

    const EVENT: &str = r#"{"event_id":"e-1","ticket_id":"t-1","from_status":"new","to_status":"open","changed_at":"2026-12-07T10:00:00Z"}"#;

    fn record(offset: i64, payload: &str) -> FetchedRecord {
        FetchedRecord {
            offset,
            key: Some(RecordKey::new(b"t-1")),
            payload: Some(bytes::Bytes::copy_from_slice(payload.as_bytes())),
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

    fn queue(payloads: &[&str]) -> Vec<(i64, Queued)> {
        (0..)
            .zip(payloads)
            .map(|(offset, payload)| (offset, Queued::Received(record(offset, payload))))
            .collect()
    }

    /// The same works whether parsed ahead, in part or not at all, for events and for records
    /// that become dead letters, in the queue's order.
    #[test]
    fn records_parsed_ahead_are_the_works_parsed_at_their_start() {
        let payloads = [EVENT, "{not json", EVENT, "", EVENT];
        let now = format!("{:?}", Ahead::default().take(queue(&payloads), source()));
        for parsed_ahead in 0..=payloads.len() {
            let mut ahead = Ahead::default();
            let mut records = queue(&payloads);
            ahead.parse(
                records.iter_mut().take(parsed_ahead).map(|(_, q)| q),
                source(),
            );
            // Parsing again leaves what is parsed as it is.
            ahead.parse(
                records.iter_mut().take(parsed_ahead).map(|(_, q)| q),
                source(),
            );
            assert_eq!(ahead.works.len(), parsed_ahead);
            let works = ahead.take(records, source());
            assert_eq!(format!("{works:?}"), now, "{parsed_ahead} parsed ahead");
            assert!(ahead.works.is_empty());
        }
    }

    /// The buffer's room is given back only once it holds no work.
    #[test]
    fn the_room_is_released_only_when_empty() {
        let mut ahead = Ahead::default();
        let mut records = queue(&[EVENT, EVENT]);
        ahead.parse(records.iter_mut().map(|(_, q)| q), source());
        ahead.release();
        assert_eq!(ahead.works.len(), 2, "works waiting are kept");
        ahead.take(records, source());
        assert!(
            ahead.works.capacity() > 0,
            "kept for the next batch until released"
        );
        ahead.release();
        assert_eq!(ahead.works.capacity(), 0);
    }

    /// A batch taken while the next is parsed: the works left belong to the next batch.
    #[test]
    fn a_batch_takes_only_its_own_works() {
        let mut ahead = Ahead::default();
        let mut records = queue(&[EVENT, EVENT, EVENT, EVENT]);
        ahead.parse(records.iter_mut().map(|(_, q)| q), source());
        assert!(ahead.holds(4) && !ahead.holds(5));
        let second = records.split_off(2);
        let first = ahead.take(records, source());
        assert_eq!(first.iter().map(|(o, _)| *o).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(ahead.works.len(), 2);
        assert!(ahead.holds(2) && !ahead.holds(3), "the next batch's two");
        let second = ahead.take(second, source());
        assert_eq!(second.iter().map(|(o, _)| *o).collect::<Vec<_>>(), [2, 3]);
    }

    /// A window of records waits in the queue: parsing ahead must not make each entry bigger.
    #[test]
    fn a_queued_record_is_no_bigger_than_a_received_one() {
        assert!(std::mem::size_of::<Queued>() <= std::mem::size_of::<FetchedRecord>());
    }
}
