//! One run end to end: a fresh topic filled with the records first, then the service consuming
//! them all into the run's database; the rate from its first fetch to the committed offsets
//! reaching the end. Rows must equal the unique events, or the run fails. A second run over the
//! same topic and database (a new consumer group) is the replay.

use std::time::Instant;

use super::database::{RunRows, expect_run_rows, settle};
use std::cell::RefCell;

use super::measure::{self, Latency, Sent};
use super::probe::{self, CpuSnapshot};
use super::report::{Case, IdKind, Throughput};
use super::service::{self, Service, Watch};
use super::topic::Topic;
use super::workload::Workload;
use super::{BenchError, Plan};
use crate::tools::demo::traffic::RecordKind;

/// A topic holding a run's records, and what is known about them.
pub struct Published {
    pub topic: Topic,
    /// Where each record landed, in the order published.
    pub sent: Vec<Sent>,
    pub run_id: String,
    /// How the run's rows are counted.
    pub rows: RunRows,
    pub unique: u64,
    /// Per partition, the offset after the last record.
    pub ends: Vec<i64>,
}

/// Publishes `records` records with a `duplicates` share and event ids of kind `ids` over
/// `partitions` partitions of a fresh broker.
pub async fn publish(
    plan: &Plan,
    partitions: i32,
    duplicates: f64,
    ids: IdKind,
    records: u64,
    phase: &str,
) -> Result<Published, BenchError> {
    let run_id = format!("{:08x}", rand::random::<u32>());
    let mut workload = Workload::with_ids(plan.seed, &run_id, duplicates, ids);
    let prefix = workload.id_prefix();
    let topic = Topic::create(partitions)?;
    let started = Instant::now();
    let mut fresh_ids = Vec::new();
    let mut tapped = workload.by_ref().inspect(|record| {
        if let (IdKind::Random, RecordKind::Fresh(event)) = (ids, &record.kind) {
            fresh_ids.push(event.event_id().to_string());
        }
    });
    let sent = topic.flood(&mut tapped, records).await?;
    let rows = match ids {
        IdKind::Ordered => RunRows::Prefix(prefix),
        IdKind::Random => RunRows::Ids(fresh_ids),
    };
    topic.check_retention().await?;
    let ends = topic.ends();
    let unique = topic.tally().unique_valid;
    println!(
        "{phase}: {records} records ({unique} unique) over {partitions} partitions published in \
         {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(Published {
        topic,
        sent,
        run_id,
        rows,
        unique,
        ends,
    })
}

/// Runs the service with `case`'s batch size and batches in flight over everything `published`
/// holds, into the database at `url`, as a new consumer group; the throughput. The rows of the
/// run's events must be exactly its unique events afterwards.
pub async fn consume(
    published: &Published,
    url: &str,
    case: &Case,
    phase: &str,
) -> Result<Throughput, BenchError> {
    let run = consume_unchecked(published, url, case, phase).await?;
    check(published, url, phase).await?;
    Ok(run)
}

/// Fails unless the database at `url` holds exactly the unique events of `published`; then
/// settles the run's tables (see [`settle`]).
pub async fn check(published: &Published, url: &str, phase: &str) -> Result<(), BenchError> {
    let pool = crate::db::pool(url, 1)?;
    expect_run_rows(&pool, &published.rows, published.unique, phase).await?;
    settle(&pool).await
}

/// [`consume`] without counting the rows afterwards (so that PostgreSQL's counters can be
/// read first); the caller then calls [`check`].
pub async fn consume_unchecked(
    published: &Published,
    url: &str,
    case: &Case,
    phase: &str,
) -> Result<Throughput, BenchError> {
    let topic = &published.topic;
    let mut settings = service::settings(topic.brokers(), &topic.name, url, case.batch_size);
    settings.runtime.batches_in_flight = case.batches_in_flight;
    let foreign = probe::threads_before_the_service();
    let service = Service::start(settings).await?;
    probe::reset_peak_rss();
    let mut watch = Watch::new(topic.partitions);
    let ends = published.ends.clone();
    let watched = watch.until_committed(&service, phase, || Some(ends.clone()));
    let done = match watched.await {
        Ok(done) => done,
        Err(error) => {
            let _ = service.stop().await;
            return Err(error);
        }
    };
    let cpu_after = CpuSnapshot::take();
    let peak_rss = probe::peak_rss();
    let (first_fetch, cpu_before) = watch
        .first_fetch
        .take()
        .unwrap_or_else(|| (done, cpu_after.clone()));
    let cpu = cpu_before.usage_without(&cpu_after, &foreign);
    let elapsed = done - first_fetch;
    let records = published.sent.len() as u64;
    let rate = measure::rate(records, elapsed);
    service.stop().await?;
    println!(
        "{phase}: {:.0} events/s over {:.2} s",
        rate,
        elapsed.as_secs_f64()
    );
    Ok(Throughput {
        records,
        unique: published.unique,
        elapsed,
        rate,
        peak_rss,
        cpu,
    })
}

/// Offers `plan.latency_load` of `rate` for at most `plan.latency_window` (and at most a quarter
/// of the run's `records`, so the topic stays within the broker's retention) while watching
/// the commits; the produce-to-commit latency of those records.
pub(super) async fn steady_latency(
    plan: &Plan,
    topic: &Topic,
    workload: &mut Workload,
    service: &Service,
    rate: f64,
    records: u64,
    phase: &str,
) -> Result<Option<Latency>, BenchError> {
    let offered = (rate * plan.latency_load).max(10.0);
    let budget = (records / 4).max(100) as f64;
    let window = plan
        .latency_window
        .min(std::time::Duration::from_secs_f64(budget / offered));
    let ends = RefCell::new(None);
    let mut watch = Watch::new(plan.partitions);
    let produce = async {
        let sent = topic.steady(workload, offered as u32, window).await?;
        *ends.borrow_mut() = Some(topic.ends());
        Ok::<_, BenchError>(sent)
    };
    let watched = watch.until_committed(service, phase, || ends.borrow().clone());
    let (sent, _) = tokio::try_join!(produce, watched)?;
    let latencies = measure::latencies(&sent, &watch.timeline);
    let offered_rate = measure::rate(sent.len() as u64, window);
    Ok(Latency::of(&latencies, offered_rate))
}
