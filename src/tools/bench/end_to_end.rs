//! One batch size end to end: a fresh topic filled with the run's records, a fresh database,
//! the service at that batch size consuming them all (the rate), then a steady producer at a
//! fraction of that rate (the latency). Rows must equal the unique events, or the run fails.

use std::cell::RefCell;
use std::time::Instant;

use super::database::{Databases, expect_rows};
use super::measure::{self, Latency, Sent};
use super::probe::{self, CpuSnapshot};
use super::report::RunResult;
use super::service::{self, Service, Watch};
use super::topic::Topic;
use super::workload::Workload;
use super::{BenchError, Plan};

/// A finished run, with its topic (still up, for the ceilings) and where the records that
/// were timed landed.
pub struct Finished {
    pub result: RunResult,
    pub topic: Topic,
    pub sent: Vec<Sent>,
    pub run_id: String,
}

/// Runs batch size `batch_size`.
pub async fn run(
    plan: &Plan,
    databases: &Databases,
    batch_size: usize,
) -> Result<Finished, BenchError> {
    let phase = format!("end-to-end at B = {batch_size}");
    let records = plan.records_for(batch_size);
    let run_id = format!("{:08x}", rand::random::<u32>());
    let mut workload = Workload::new(plan.seed, &run_id, plan.duplicates);
    let prefix = workload.id_prefix();
    let topic = Topic::create(plan.partitions)?;
    let published = Instant::now();
    let sent = topic.flood(&mut workload, records).await?;
    topic.check_retention().await?;
    let ends = topic.ends();
    let unique = topic.tally().unique_valid;
    println!(
        "{phase}: {records} records ({unique} unique) published in {:.1} s; consuming",
        published.elapsed().as_secs_f64()
    );

    let url = databases
        .fresh(&format!("bench_{run_id}_b{batch_size}"))
        .await?;
    let settings = service::settings(topic.brokers(), &topic.name, &url, batch_size);
    let service = Service::start(settings).await?;
    probe::reset_peak_rss();
    let mut watch = Watch::new(plan.partitions);
    let done = watch
        .until_committed(&service, &phase, || Some(ends.clone()))
        .await?;
    let cpu_after = CpuSnapshot::take();
    let peak_rss = probe::peak_rss();
    let (first_fetch, cpu_before) = watch
        .first_fetch
        .take()
        .unwrap_or_else(|| (done, cpu_after.clone()));
    let cpu = cpu_before.usage_until(&cpu_after);
    let elapsed = done - first_fetch;
    let rate = measure::rate(records, elapsed);
    expect_rows(service.pool(), &prefix, unique, &phase).await?;
    println!(
        "{phase}: {:.0} events/s over {:.2} s; measuring latency",
        rate,
        elapsed.as_secs_f64()
    );

    let latency =
        steady_latency(plan, &topic, &mut workload, &service, rate, records, &phase).await?;
    expect_rows(service.pool(), &prefix, topic.tally().unique_valid, &phase).await?;
    topic.check_retention().await?;
    service.stop().await?;
    if let Some(latency) = &latency {
        println!(
            "{phase}: p50 {:.0} ms, p99 {:.0} ms at {:.0}/s",
            latency.p50.as_secs_f64() * 1000.0,
            latency.p99.as_secs_f64() * 1000.0,
            latency.offered_rate
        );
    }
    Ok(Finished {
        result: RunResult {
            batch_size,
            records,
            unique,
            elapsed,
            rate,
            latency,
            peak_rss,
            cpu,
        },
        topic,
        sent,
        run_id,
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
