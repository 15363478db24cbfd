//! `history-consumer verify`: reads the topic as a throwaway reader (every partition, from its
//! start or from a point in time, up to the ends it had when verify began), parses each record
//! exactly as the service does, and checks what the projection holds for it.
//!
//! Memory stays bounded however long the topic: the reader thread hands over records in
//! batches through a channel of a few batches, and each batch is looked up in two statements.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::progress::Progress;
use super::projection::{self, EventRecord};
use super::report::{PartitionReport, Report, Verdict};
use crate::config::recovery::VerifySettings;
use crate::db::DbError;
use crate::domain::{DeadLetter, FetchedRecord};
use crate::inbox::{PgInboxError, offset_resets};
use crate::kafka::reader::{Bounds, Flow, ReaderConfig, ReaderError, TopicReader};
use crate::work::Work;

/// Records looked up together.
const BATCH: usize = 1000;
/// Batches on their way from the reader thread.
const BATCHES_IN_FLIGHT: usize = 2;

/// `verify` could not finish.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("could not connect to the database")]
    Db(#[from] DbError),
    #[error("could not connect to the database")]
    Connect(#[source] PgInboxError),
    #[error("could not look up the projection")]
    Lookup(#[from] PgInboxError),
    #[error("could not read the topic")]
    Reader(#[from] ReaderError),
    #[error("the reader thread ended unexpectedly")]
    Thread(#[source] tokio::task::JoinError),
}

/// The most offset resets a report lists.
const RESETS_SHOWN: i64 = 1000;

/// What the reader thread sends.
enum FromReader {
    /// The ranges it reads, and when it took the ends.
    Ranges(BTreeMap<i32, Bounds>, DateTime<Utc>),
    Records(Vec<(i32, FetchedRecord)>),
}

/// Verifies the projection against the topic.
pub async fn run(settings: &VerifySettings) -> Result<Report, VerifyError> {
    let pool = settings.database.database()?.pool(2)?;
    // Fail on the database before reading a topic that may be long.
    drop(
        pool.get()
            .await
            .map_err(|e| VerifyError::Connect(PgInboxError::Pool(e)))?,
    );
    let (sender, mut received) = mpsc::channel(BATCHES_IN_FLIGHT);
    let config = ReaderConfig {
        connection: settings.kafka.clone(),
        topic: settings.topic.clone(),
    };
    let from = settings.from;
    let reader = tokio::task::spawn_blocking(move || read_topic(&config, from, &sender));

    let mut progress = Progress::on_terminal();
    let mut partitions: BTreeMap<i32, PartitionReport> = BTreeMap::new();
    let mut ranges = BTreeMap::new();
    let mut ends_at = Utc::now();
    let mut reached: BTreeMap<i32, i64> = BTreeMap::new();
    let total = |ranges: &BTreeMap<i32, Bounds>| ranges.values().map(|b| b.end - b.start).sum();
    let done = |reached: &BTreeMap<i32, i64>, ranges: &BTreeMap<i32, Bounds>| -> i64 {
        reached.iter().map(|(p, next)| next - ranges[p].start).sum()
    };
    let mut missing = 0;
    while let Some(message) = received.recv().await {
        match message {
            FromReader::Ranges(read, at) => {
                partitions = read
                    .iter()
                    .map(|(&p, b)| (p, PartitionReport::new(p, b.start, b.end)))
                    .collect();
                ranges = read;
                ends_at = at;
            }
            FromReader::Records(records) => {
                let works: Vec<(i32, i64, Work)> = records
                    .into_iter()
                    .map(|(partition, record)| {
                        let offset = record.offset;
                        let work = Work::from_record(
                            &settings.topic,
                            partition,
                            record,
                            settings.max_payload_bytes,
                        );
                        (partition, offset, work)
                    })
                    .collect();
                for (partition, verdict, offset, event_id) in
                    classify(&pool, settings, &works).await?
                {
                    let report = partitions
                        .get_mut(&partition)
                        .expect("records only of the ranges read");
                    report.count(offset, event_id, verdict);
                    missing += u64::from(verdict.is_missing());
                    reached.insert(partition, offset + 1);
                }
                progress.show(done(&reached, &ranges), total(&ranges), missing);
            }
        }
    }
    reader.await.map_err(VerifyError::Thread)??;
    progress.finish(total(&ranges), total(&ranges), missing);

    let bounds: BTreeMap<i32, (i64, i64)> =
        ranges.iter().map(|(&p, b)| (p, (b.start, b.end))).collect();
    let (outside, elsewhere) = projection::rows_outside(&pool, &bounds).await?;
    for (partition, count) in outside {
        if let Some(report) = partitions.get_mut(&partition) {
            report.counts.outside_range = count;
        }
    }
    let resets = {
        let client = pool
            .get()
            .await
            .map_err(|e| VerifyError::Connect(PgInboxError::Pool(e)))?;
        offset_resets::list(&**client, &settings.topic, None, RESETS_SHOWN).await?
    };
    Ok(Report::new(
        settings.topic.clone(),
        from,
        ends_at,
        partitions.into_values().collect(),
        elsewhere,
    )
    .with_offset_resets(resets))
}

/// Looks a batch up and classifies each record: `(partition, verdict, offset, event id)`.
async fn classify<'w>(
    pool: &deadpool_postgres::Pool,
    settings: &VerifySettings,
    works: &'w [(i32, i64, Work)],
) -> Result<Vec<(i32, Verdict, i64, Option<&'w str>)>, PgInboxError> {
    let events: Vec<EventRecord<'_>> = works
        .iter()
        .filter_map(|(_, _, work)| match work {
            Work::Event { event, origin, .. } => Some(EventRecord {
                origin: *origin,
                event,
            }),
            Work::DeadLetter { .. } => None,
        })
        .collect();
    let letters: Vec<&DeadLetter> = works
        .iter()
        .filter_map(|(_, _, work)| match work {
            Work::DeadLetter { letter, .. } => Some(letter),
            Work::Event { .. } => None,
        })
        .collect();
    let found = projection::look_up(pool, &settings.topic, &events, &letters).await?;
    Ok(works
        .iter()
        .map(|(partition, offset, work)| {
            let verdict = match work {
                Work::Event { event, origin, .. } => Verdict::Event(found.stored(&EventRecord {
                    origin: *origin,
                    event,
                })),
                Work::DeadLetter { letter, .. } => Verdict::Rejected {
                    stored: found.dead_lettered(letter),
                },
            };
            (*partition, verdict, *offset, work.event_id())
        })
        .collect())
}

/// The reader thread: takes the ends, finds where to start, then reads every partition's
/// range and sends its records in batches. Stops early when the receiving side is gone.
fn read_topic(
    config: &ReaderConfig,
    from: Option<DateTime<Utc>>,
    sender: &mpsc::Sender<FromReader>,
) -> Result<(), ReaderError> {
    let reader = TopicReader::open(config)?;
    let partitions = reader.partitions()?;
    let ends_at = Utc::now();
    let mut ranges = reader.bounds(&partitions)?;
    if let Some(at) = from {
        for (partition, (found, _)) in reader.find_time(&partitions, at)? {
            if let Some(range) = ranges.get_mut(&partition) {
                range.start = found.offset().clamp(range.start, range.end);
            }
        }
    }
    if sender
        .blocking_send(FromReader::Ranges(ranges.clone(), ends_at))
        .is_err()
    {
        return Ok(());
    }
    let mut batch = Vec::with_capacity(BATCH);
    let mut gone = false;
    reader.read(&ranges, |partition, record| {
        batch.push((partition, record));
        if batch.len() < BATCH {
            return Flow::More;
        }
        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
        if sender.blocking_send(FromReader::Records(full)).is_err() {
            gone = true;
            return Flow::Stop;
        }
        Flow::More
    })?;
    if !gone && !batch.is_empty() {
        let _ = sender.blocking_send(FromReader::Records(batch));
    }
    Ok(())
}
