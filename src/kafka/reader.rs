//! A throwaway reader of the topic, for recovery: a consumer that is assigned partitions by
//! hand, joins no group and commits nothing. It finds where partitions start and end, where the
//! first record at or after a point in time is, and reads ranges of records.
//!
//! Ends come from the broker's fetch answers (the high watermark, or the last stable offset
//! under `read_committed`), not from a ListOffsets query: tansu answers that one wrongly for
//! multi-record batches. A point in time is looked up with `offsetsForTimes` and the answer is
//! checked against the records around it (the one at the offset must be at or after the time,
//! the one before it earlier); a broker that does not keep a time index (tansu answers 0, the
//! librdkafka mock -1) fails the check, and the partition is then read from its start until the
//! first record at or after the time.
//!
//! Every call blocks: run the reader on a thread of its own, never on an actix thread.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::fetched;
use crate::config::KafkaConnection;
use crate::domain::FetchedRecord;
use crate::domain::rewind::TimeOffset;
use crate::kafka::timeouts::QUERY_TIMEOUT;

/// How long the reader waits for any answer from the broker before it gives up.
const STALL: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);
/// Records read back from a partition's end to find its last record (transaction markers
/// hold no record).
const TAIL: i64 = 16;

/// Where the topic is.
#[derive(Debug, Clone)]
pub struct ReaderConfig {
    /// The brokers and the operator's properties (security settings and the like), applied
    /// over the reader's defaults; the reader's own essentials (no group, no commits) win.
    pub connection: KafkaConnection,
    pub topic: String,
}

/// The reader could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum ReaderError {
    #[error("could not create the kafka reader")]
    Create(#[source] KafkaError),
    #[error("could not read the metadata of topic {topic}")]
    Metadata {
        topic: String,
        #[source]
        source: KafkaError,
    },
    #[error("topic {0} does not exist or has no partitions")]
    NoTopic(String),
    #[error("topic {topic} has no partition {partition} (it has {count})")]
    NoPartition {
        topic: String,
        partition: i32,
        count: usize,
    },
    #[error("could not assign partitions to the reader")]
    Assign(#[source] KafkaError),
    #[error(
        "no answer from the broker for partitions {partitions:?} within {} s{}",
        STALL.as_secs(),
        last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
    )]
    Stalled {
        partitions: Vec<i32>,
        last_error: Option<String>,
    },
}

/// Where a partition's records are: `start` is the first offset still in the log, `end` the
/// offset the next record will get (as a `read_committed` reader sees it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub start: i64,
    pub end: i64,
}

/// What a range reader's callback wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// More records of this partition.
    More,
    /// Nothing more of this partition.
    Enough,
    /// Stop reading altogether.
    Stop,
}

/// How a point in time was found in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The broker's `offsetsForTimes` answer, checked against the records around it.
    Broker,
    /// Read from the partition's records (the broker's answer did not hold).
    Read,
}

/// The reader's context: the end of a partition, which the reader asks for
/// (`enable.partition.eof`), is how it knows it read everything, not an error to log (the group
/// page reads the ends every few seconds); any other error is logged as librdkafka's.
pub struct ReaderContext;

impl ClientContext for ReaderContext {
    fn error(&self, error: KafkaError, reason: &str) {
        match error.rdkafka_error_code() {
            Some(RDKafkaErrorCode::PartitionEOF) => {
                tracing::trace!(reason, "reader reached a partition's end")
            }
            _ => tracing::warn!(error = %error, reason, "librdkafka (topic reader)"),
        }
    }
}

impl ConsumerContext for ReaderContext {}

/// A throwaway reader of one topic.
pub struct TopicReader {
    consumer: BaseConsumer<ReaderContext>,
    topic: String,
}

impl TopicReader {
    pub fn open(config: &ReaderConfig) -> Result<TopicReader, ReaderError> {
        let mut client = ClientConfig::new();
        client
            .set("isolation.level", "read_committed")
            .set("fetch.wait.max.ms", "100");
        config.connection.properties.apply_to(&mut client);
        client
            .set("bootstrap.servers", &config.connection.brokers)
            // Needed to assign partitions by hand; this consumer never joins nor commits.
            .set(
                "group.id",
                format!("history-consumer-reader-{:016x}", rand::random::<u64>()),
            )
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "earliest");
        let consumer = client
            .create_with_context(ReaderContext)
            .map_err(ReaderError::Create)?;
        Ok(TopicReader {
            consumer,
            topic: config.topic.clone(),
        })
    }

    /// The topic's partitions, in order.
    pub fn partitions(&self) -> Result<Vec<i32>, ReaderError> {
        let metadata = self
            .consumer
            .fetch_metadata(Some(&self.topic), QUERY_TIMEOUT)
            .map_err(|source| ReaderError::Metadata {
                topic: self.topic.clone(),
                source,
            })?;
        let mut partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == self.topic && t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        partitions.sort_unstable();
        if partitions.is_empty() {
            return Err(ReaderError::NoTopic(self.topic.clone()));
        }
        Ok(partitions)
    }

    /// Checks that every one of `wanted` is a partition of the topic.
    pub fn check_partitions(&self, wanted: &[i32]) -> Result<Vec<i32>, ReaderError> {
        let all = self.partitions()?;
        for &partition in wanted {
            if !all.contains(&partition) {
                return Err(ReaderError::NoPartition {
                    topic: self.topic.clone(),
                    partition,
                    count: all.len(),
                });
            }
        }
        Ok(wanted.to_vec())
    }

    /// Each partition's bounds as the broker's first fetch answer gives them: the moment the
    /// reader looked, not later.
    pub fn bounds(&self, partitions: &[i32]) -> Result<BTreeMap<i32, Bounds>, ReaderError> {
        let starts: Vec<(i32, Offset)> =
            partitions.iter().map(|&p| (p, Offset::Beginning)).collect();
        self.assign(&starts)?;
        let mut bounds = BTreeMap::new();
        let mut waiting: BTreeSet<i32> = partitions.iter().copied().collect();
        let result = self.poll_until_done(&mut waiting, |reader, event| {
            let (partition, first) = match event {
                Event::Record(partition, record) => (partition, Some(record.offset)),
                Event::Eof(partition) => (partition, None),
            };
            let (low, high) = reader.cached_watermarks(partition);
            let start = match first {
                Some(offset) if low < 0 => offset,
                _ => low.max(0),
            };
            let end = high.max(first.map_or(start, |o| o + 1));
            bounds.insert(partition, Bounds { start, end });
            Flow::Enough
        });
        self.unassign();
        result.map(|()| bounds)
    }

    /// Each partition's end (the offset its next record will get, as a `read_committed` reader
    /// sees it) from the broker's fetch answer to a read from the end: unlike [`Self::bounds`],
    /// no record before the end is fetched.
    pub fn ends(&self, partitions: &[i32]) -> Result<BTreeMap<i32, i64>, ReaderError> {
        let starts: Vec<(i32, Offset)> = partitions.iter().map(|&p| (p, Offset::End)).collect();
        self.assign(&starts)?;
        let mut ends = BTreeMap::new();
        let mut waiting: BTreeSet<i32> = partitions.iter().copied().collect();
        let result = self.poll_until_done(&mut waiting, |reader, event| {
            // A record comes when the broker's answer to "where is the end" fell short of it
            // (tansu's, after a batch of several records): the fetch answer still has the end.
            let (partition, last) = match event {
                Event::Record(partition, record) => (partition, Some(record.offset)),
                Event::Eof(partition) => (partition, None),
            };
            let (_, high) = reader.cached_watermarks(partition);
            let end = high.max(last.map_or(0, |o| o + 1)).max(0);
            ends.insert(partition, end);
            Flow::Enough
        });
        self.unassign();
        result.map(|()| ends)
    }

    /// The timestamp of the first record in each range (`None`: it has none, or the record
    /// carries no time).
    pub fn first_times(
        &self,
        ranges: &BTreeMap<i32, Bounds>,
    ) -> Result<BTreeMap<i32, Option<DateTime<Utc>>>, ReaderError> {
        let mut found = BTreeMap::new();
        self.read(ranges, |partition, record| {
            found.insert(partition, record.timestamp);
            Flow::Enough
        })?;
        Ok(found)
    }

    /// Where the first record at or after `at` is in each partition, and how it was found.
    pub fn find_time(
        &self,
        partitions: &[i32],
        at: DateTime<Utc>,
    ) -> Result<BTreeMap<i32, (TimeOffset, Found)>, ReaderError> {
        let answers = self.broker_offsets_for_time(partitions, at);
        let bounds = self.bounds(partitions)?;
        let mut found = BTreeMap::new();
        for &partition in partitions {
            let Some(&bounds) = bounds.get(&partition) else {
                continue;
            };
            if bounds.start >= bounds.end {
                let none = TimeOffset::NoneAfter { end: bounds.end };
                found.insert(partition, (none, Found::Broker));
                continue;
            }
            let candidate = match answers.get(&partition) {
                Some(&offset) => TimeOffset::At { offset },
                None => TimeOffset::NoneAfter { end: bounds.end },
            };
            if self.holds(partition, candidate, at, bounds)? {
                found.insert(partition, (candidate, Found::Broker));
            } else {
                tracing::info!(
                    partition,
                    answer = ?candidate,
                    "the broker's offsetsForTimes answer does not hold; reading the partition"
                );
                let read = self.scan_for_time(partition, at, bounds)?;
                found.insert(partition, (read, Found::Read));
            }
        }
        Ok(found)
    }

    /// Reads each partition's `[start, end)` (records produced later are not read), handing
    /// every record to `sink` in offset order per partition, partitions interleaved.
    pub fn read(
        &self,
        ranges: &BTreeMap<i32, Bounds>,
        mut sink: impl FnMut(i32, FetchedRecord) -> Flow,
    ) -> Result<(), ReaderError> {
        let starts: Vec<(i32, Offset)> = ranges
            .iter()
            .filter(|(_, b)| b.start < b.end)
            .map(|(&p, b)| (p, Offset::Offset(b.start)))
            .collect();
        if starts.is_empty() {
            return Ok(());
        }
        self.assign(&starts)?;
        let mut open: BTreeSet<i32> = starts.iter().map(|(p, _)| *p).collect();
        let result = self.poll_until_done(&mut open, |_, event| match event {
            Event::Eof(_) => Flow::Enough,
            Event::Record(partition, record) => {
                let end = ranges[&partition].end;
                if record.offset >= end {
                    return Flow::Enough;
                }
                let last = record.offset >= end - 1;
                match sink(partition, record) {
                    Flow::More if last => Flow::Enough,
                    flow => flow,
                }
            }
        });
        self.unassign();
        result
    }

    /// The broker's `offsetsForTimes` answers: an offset per partition that has one (none: "no
    /// record at or after", or no answer at all).
    fn broker_offsets_for_time(&self, partitions: &[i32], at: DateTime<Utc>) -> BTreeMap<i32, i64> {
        let mut query = TopicPartitionList::new();
        for &partition in partitions {
            if let Err(error) = query.add_partition_offset(
                &self.topic,
                partition,
                Offset::Offset(at.timestamp_millis()),
            ) {
                tracing::warn!(partition, error = %error, "offsetsForTimes query not built");
                return BTreeMap::new();
            }
        }
        let answer = match self.consumer.offsets_for_times(query, QUERY_TIMEOUT) {
            Ok(answer) => answer,
            Err(error) => {
                tracing::info!(error = %error, "offsetsForTimes failed; reading the partitions");
                return BTreeMap::new();
            }
        };
        answer
            .elements()
            .iter()
            .filter(|e| e.topic() == self.topic && e.error().is_ok())
            .filter_map(|e| match e.offset() {
                Offset::Offset(offset) if offset >= 0 => Some((e.partition(), offset)),
                _ => None,
            })
            .collect()
    }

    /// Whether `candidate` is where the first record at or after `at` is, judged by the records
    /// around it.
    fn holds(
        &self,
        partition: i32,
        candidate: TimeOffset,
        at: DateTime<Utc>,
        bounds: Bounds,
    ) -> Result<bool, ReaderError> {
        let before = |record: &FetchedRecord| !at_or_after(record, at);
        match candidate {
            TimeOffset::At { offset } => {
                if offset < bounds.start || offset >= bounds.end {
                    return Ok(false);
                }
                let from = (offset - 1).max(bounds.start);
                let records =
                    self.records_of(partition, from, bounds.end, |r| r.offset >= offset)?;
                let previous = records.iter().rfind(|r| r.offset < offset);
                let next = records.iter().find(|r| r.offset >= offset);
                Ok(
                    next.is_some_and(|r| r.offset == offset && at_or_after(r, at))
                        && previous.is_none_or(before),
                )
            }
            TimeOffset::NoneAfter { end } => {
                let from = (end - TAIL).max(bounds.start);
                let records = self.records_of(partition, from, end, |_| false)?;
                Ok(records.last().is_some_and(before))
            }
        }
    }

    /// Reads the partition from its start to the first record at or after `at`.
    fn scan_for_time(
        &self,
        partition: i32,
        at: DateTime<Utc>,
        bounds: Bounds,
    ) -> Result<TimeOffset, ReaderError> {
        let mut found = None;
        self.read(&BTreeMap::from([(partition, bounds)]), |_, record| {
            if at_or_after(&record, at) {
                found = Some(record.offset);
                Flow::Enough
            } else {
                Flow::More
            }
        })?;
        Ok(match found {
            Some(offset) => TimeOffset::At { offset },
            None => TimeOffset::NoneAfter { end: bounds.end },
        })
    }

    /// The records of `partition` from `from` up to `end`, or up to the first one `last`
    /// accepts.
    fn records_of(
        &self,
        partition: i32,
        from: i64,
        end: i64,
        last: impl Fn(&FetchedRecord) -> bool,
    ) -> Result<Vec<FetchedRecord>, ReaderError> {
        let mut records = Vec::new();
        let range = Bounds { start: from, end };
        self.read(&BTreeMap::from([(partition, range)]), |_, record| {
            let done = last(&record);
            records.push(record);
            if done { Flow::Enough } else { Flow::More }
        })?;
        Ok(records)
    }

    fn assign(&self, starts: &[(i32, Offset)]) -> Result<(), ReaderError> {
        let mut list = TopicPartitionList::new();
        for &(partition, offset) in starts {
            list.add_partition_offset(&self.topic, partition, offset)
                .map_err(ReaderError::Assign)?;
        }
        self.consumer.assign(&list).map_err(ReaderError::Assign)?;
        // A partition paused when an earlier read was done with it stays paused otherwise.
        self.consumer.resume(&list).map_err(ReaderError::Assign)
    }

    fn unassign(&self) {
        if let Err(error) = self.consumer.unassign() {
            tracing::warn!(error = %error, "the reader could not unassign its partitions");
        }
    }

    /// Polls until every partition of `open` is done (its callback said `Enough`), or the
    /// callback said `Stop`, or the broker went quiet for [`STALL`].
    fn poll_until_done(
        &self,
        open: &mut BTreeSet<i32>,
        mut on_event: impl FnMut(&TopicReader, Event) -> Flow,
    ) -> Result<(), ReaderError> {
        let mut heard = Instant::now();
        let mut last_error = None;
        while !open.is_empty() {
            let event = match self.consumer.poll(POLL) {
                Some(Ok(message)) if message.topic() == self.topic => {
                    Event::Record(message.partition(), fetched(&message))
                }
                Some(Ok(_)) => continue,
                Some(Err(KafkaError::PartitionEOF(partition))) => Event::Eof(partition),
                Some(Err(error)) => {
                    tracing::warn!(error = %error, "kafka error while reading");
                    last_error = Some(error.to_string());
                    continue;
                }
                None => {
                    if heard.elapsed() > STALL {
                        return Err(ReaderError::Stalled {
                            partitions: open.iter().copied().collect(),
                            last_error,
                        });
                    }
                    continue;
                }
            };
            heard = Instant::now();
            let partition = event.partition();
            if !open.contains(&partition) {
                continue;
            }
            match on_event(self, event) {
                Flow::More => {}
                Flow::Enough => {
                    open.remove(&partition);
                    self.pause(partition);
                }
                Flow::Stop => return Ok(()),
            }
        }
        Ok(())
    }

    /// Stops fetching a partition that is done (the rest of the range is not wanted).
    fn pause(&self, partition: i32) {
        let mut list = TopicPartitionList::new();
        list.add_partition(&self.topic, partition);
        if let Err(error) = self.consumer.pause(&list) {
            tracing::debug!(partition, error = %error, "pausing a finished partition failed");
        }
    }

    /// The watermarks of the broker's last fetch answer for `partition` (`-1` when unknown).
    fn cached_watermarks(&self, partition: i32) -> (i64, i64) {
        let Ok(topic) = CString::new(self.topic.as_str()) else {
            return (-1, -1);
        };
        let (mut low, mut high) = (-1_i64, -1_i64);
        // SAFETY: the client handle is alive for as long as `self`; the topic is a valid C
        // string; librdkafka only writes the two integers.
        let err = unsafe {
            rdkafka::bindings::rd_kafka_get_watermark_offsets(
                self.consumer.client().native_ptr(),
                topic.as_ptr(),
                partition,
                &mut low,
                &mut high,
            )
        };
        if err == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            (low, high)
        } else {
            (-1, -1)
        }
    }
}

/// What the reader's poll brought.
enum Event {
    Record(i32, FetchedRecord),
    Eof(i32),
}

impl Event {
    fn partition(&self) -> i32 {
        match self {
            Event::Record(partition, _) | Event::Eof(partition) => *partition,
        }
    }
}

/// Whether a record's timestamp is at or after `at`; a record without one counts as earlier
/// (Kafka's time index leaves such records out too).
fn at_or_after(record: &FetchedRecord, at: DateTime<Utc>) -> bool {
    record.timestamp.is_some_and(|t| t >= at)
}
