//! Memory under backlog: a topic with more records than the member can hold, the database
//! stopped, the service run for the outage while its RSS is sampled; then the database back
//! and the drain awaited. The bounds (each partition's window and Unknown backlog in the
//! service, librdkafka's prefetch limits per partition) are what keep the peak flat.

use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;

use super::database::{Databases, expect_rows};
use super::probe;
use super::report::{Backlog, BacklogResult};
use super::service::{self, Service, Watch};
use super::topic::Topic;
use super::workload::Workload;
use super::{BenchError, Plan};

const PHASE: &str = "backlog with the database down";

/// Runs the backlog phase at the default batch size, if the benchmark owns the database.
pub async fn run(
    plan: &Plan,
    databases: &mut Databases,
    partitions: i32,
) -> Result<Backlog, BenchError> {
    if !databases.owns_cluster() {
        return Ok(Backlog::Skipped(
            "it stops and starts PostgreSQL, so it needs the throwaway cluster (not \
             --database-url)"
                .into(),
        ));
    }
    let run_id = format!("{:08x}", rand::random::<u32>());
    let mut workload = Workload::new(plan.seed, &run_id, plan.duplicates);
    let prefix = workload.id_prefix();
    let records = plan.backlog_records(partitions);
    let topic = Topic::create(partitions)?;
    topic.flood(&mut workload, records).await?;
    topic.check_retention().await?;
    let ends = topic.ends();
    let unique = topic.tally().unique_valid;
    println!(
        "{PHASE}: {} records ({unique} unique) in {partitions} partitions; stopping PostgreSQL \
         for {} s",
        records,
        plan.outage.as_secs()
    );

    let url = databases.fresh(&format!("bench_{run_id}_backlog")).await?;
    let settings = service::settings(topic.brokers(), &topic.name, &url, plan.default_batch());
    let rt = &settings.runtime;
    let held_bound = u64::try_from(partitions).unwrap_or(0)
        * (rt.partition_queue + rt.max_unresolved + rt.batch_size) as u64;
    // Built (and migrated) while the database is up; run only once it is down.
    let app = Service::build(settings).await?;
    databases.stop().await?;
    probe::reset_peak_rss();
    let baseline_rss = probe::current_rss();
    let service = Service::run(app);
    let rss_samples = sample_rss(plan.outage).await;
    let peak_rss = probe::peak_rss();
    let held = held(&service).await;

    databases.restart().await?;
    let restarted = Instant::now();
    println!("{PHASE}: PostgreSQL is back; waiting for the backlog to drain");
    // No status snapshots while the backlog drains: the committed offsets are all it needs.
    let mut watch = Watch::commits_only(partitions);
    let done = watch
        .until_committed(&service, PHASE, || Some(ends.clone()))
        .await?;
    let drained_in = done - restarted;
    expect_rows(service.pool(), &prefix, unique, PHASE).await?;
    service.stop().await?;
    topic.close().await;
    Ok(Backlog::Measured(BacklogResult {
        partitions,
        records,
        unique,
        outage: plan.outage,
        baseline_rss,
        peak_rss,
        rss_samples,
        held,
        held_bound,
        drained_in,
    }))
}

/// The process's RSS once a second for `outage`.
async fn sample_rss(outage: Duration) -> Vec<u64> {
    let started = Instant::now();
    let mut ticker = tokio::time::interval_at(
        (started + Duration::from_secs(1)).into(),
        Duration::from_secs(1),
    );
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut samples = Vec::new();
    while started.elapsed() < outage {
        ticker.tick().await;
        samples.extend(probe::current_rss());
    }
    samples
}

/// Records the service has taken from Kafka and not resolved: queued in its partition actors,
/// in the transaction under way, or Unknown.
async fn held(service: &Service) -> u64 {
    let Some(status) = service.status().await else {
        return 0;
    };
    status
        .partitions
        .iter()
        .filter_map(|view| view.actor.as_ref())
        .map(|actor| (actor.in_flight + actor.unknown) as u64)
        .sum()
}
