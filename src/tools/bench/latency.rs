//! Produce-to-commit latency at a steady load: a fresh topic and database, the service at the
//! default B, a producer offering a share of the default case's rate — first a warm-up (the
//! group joins, connections open, caches fill), then the measured window. Per record: when its
//! offset was first seen committed, minus when it was handed to the producer.

use std::cell::RefCell;
use std::time::Duration;

use super::database::{Databases, expect_rows};
use super::measure::{self, Latency, Sent};
use super::report::LatencyResult;
use super::service::{self, Service, Watch};
use super::topic::Topic;
use super::workload::Workload;
use super::{BenchError, Plan};

const PHASE: &str = "latency";

/// Measures latency at `rate` records per second.
pub async fn run(
    plan: &Plan,
    databases: &Databases,
    rate: f64,
) -> Result<LatencyResult, BenchError> {
    let run_id = format!("{:08x}", rand::random::<u32>());
    let mut workload = Workload::new(plan.seed, &run_id, plan.duplicates);
    let prefix = workload.id_prefix();
    let topic = Topic::create(plan.partitions)?;
    let url = databases.fresh(&format!("bench_{run_id}_latency")).await?;
    let settings = service::settings(topic.brokers(), &topic.name, &url, plan.default_batch());
    let service = Service::start(settings).await?;
    let offered = rate.max(10.0);
    println!(
        "{PHASE}: offering {offered:.0} events/s for {:.0} s of warm-up and {:.0} s measured",
        plan.latency_warmup.as_secs_f64(),
        plan.latency_window.as_secs_f64()
    );
    let measured = async {
        steady(
            plan,
            &topic,
            &mut workload,
            &service,
            offered,
            plan.latency_warmup,
        )
        .await?;
        let (sent, watch) = steady(
            plan,
            &topic,
            &mut workload,
            &service,
            offered,
            plan.latency_window,
        )
        .await?;
        let latencies = measure::latencies(&sent, &watch.timeline);
        let offered_rate = measure::rate(sent.len() as u64, plan.latency_window);
        expect_rows(service.pool(), &prefix, topic.tally().unique_valid, PHASE).await?;
        topic.check_retention().await?;
        Ok::<_, BenchError>(Latency::of(&latencies, offered_rate))
    };
    let latency = measured.await;
    let stopped = service.stop().await;
    topic.close().await;
    let latency = latency?.ok_or_else(|| BenchError::Stalled {
        phase: PHASE.into(),
        detail: "no record was seen committed".into(),
    })?;
    stopped?;
    println!(
        "{PHASE}: p50 {:.0} ms, p99 {:.0} ms, p99.9 {:.0} ms at {:.0}/s",
        latency.p50.as_secs_f64() * 1000.0,
        latency.p99.as_secs_f64() * 1000.0,
        latency.p999.as_secs_f64() * 1000.0,
        latency.offered_rate
    );
    Ok(LatencyResult {
        latency,
        window: plan.latency_window,
    })
}

/// Offers `offered` records per second for `window` while watching the commits, until every
/// record offered is committed; what was sent and what the watch saw.
async fn steady(
    plan: &Plan,
    topic: &Topic,
    workload: &mut Workload,
    service: &Service,
    offered: f64,
    window: Duration,
) -> Result<(Vec<Sent>, Watch), BenchError> {
    let ends = RefCell::new(None);
    let mut watch = Watch::commits_only(plan.partitions);
    let produce = async {
        let sent = topic.steady(workload, offered as u32, window).await?;
        *ends.borrow_mut() = Some(topic.ends());
        Ok::<_, BenchError>(sent)
    };
    let watched = watch.until_committed(service, PHASE, || ends.borrow().clone());
    let (sent, _) = tokio::try_join!(produce, watched)?;
    Ok((sent, watch))
}
