//! The order of a benchmark run: the backlog phases first (while the process holds nothing
//! else), the default case with both ceilings, the default case over TLS beside plaintext, the
//! batch sizes, the inbox sizes, the partition counts, the duplicate shares and the replay, the
//! latency, and the default case once more at the end to show how far the machine drifted
//! meanwhile.

use super::ceilings::{self, DatabaseWork};
use super::database::Databases;
use super::end_to_end::{self, Published};
use super::report::{
    Backlog, Case, CaseResult, CeilingResult, LatencyResult, Throughput, TlsCost, rows,
};
use super::{BenchError, Plan, backlog, latency, prefill, tls_cost};
use crate::config::RuntimeSettings;

/// Everything the phases measured.
pub struct Measured {
    pub cases: Vec<CaseResult>,
    pub anchor_others: Vec<CaseResult>,
    pub anchor_again: Option<Throughput>,
    pub kafka_only: CeilingResult,
    pub latency: Option<LatencyResult>,
    pub backlog: Vec<Backlog>,
    pub tls: TlsCost,
}

/// A case that ran, with what later phases may reuse.
struct Ran {
    result: CaseResult,
    published: Published,
    url: String,
    /// Ceiling 2's events and the database they went into.
    ceiling: Option<(DatabaseWork, String)>,
}

pub async fn measure_all(plan: &Plan, databases: &mut Databases) -> Result<Measured, BenchError> {
    let backlog = backlog_phases(plan, databases).await?;
    let anchor = plan.anchor();
    let mut cases = Vec::new();

    let ran = run_case(plan, databases, anchor, true).await?;
    println!("ceiling 1: reading the default case's records back with no database");
    let kafka_only = ceilings::kafka(&ran.published.topic, &ran.published.sent).await;
    ran.published.topic.close().await;
    let kafka_only = kafka_only?;
    // The default case again, back to back: the targets lean on its ratio, so they use the
    // run with the median one.
    let mut anchor_runs = vec![ran.result];
    for _ in 1..plan.anchor_repeats {
        anchor_runs.push(run_and_close(plan, databases, anchor, true).await?);
    }
    let (median, anchor_others) = median_run(anchor_runs);
    cases.push(median);
    let tls = tls_cost::run(plan, databases).await?;

    for &batch_size in plan.batch_sizes.iter().filter(|b| **b != anchor.batch_size) {
        let case = Case {
            batch_size,
            ..anchor
        };
        cases.push(run_and_close(plan, databases, case, false).await?);
    }

    if databases.owns_cluster() {
        for &inbox_rows in &plan.inbox_rows {
            let case = Case {
                inbox_rows,
                ..anchor
            };
            cases.push(run_and_close(plan, databases, case, true).await?);
        }
    } else if !plan.inbox_rows.is_empty() {
        println!(
            "inbox sizes: skipped (they fill databases of their own; not with --database-url)"
        );
    }

    for &partitions in plan
        .partition_counts
        .iter()
        .filter(|p| **p != anchor.partitions)
    {
        let case = Case {
            partitions,
            ..anchor
        };
        cases.push(run_and_close(plan, databases, case, true).await?);
    }

    let mut shares: Vec<f64> = plan.duplicate_shares.clone();
    shares.sort_by(f64::total_cmp);
    shares.dedup();
    for (i, &duplicates) in shares.iter().enumerate() {
        let case = Case {
            duplicates,
            ..anchor
        };
        if i == 0 {
            // The lowest share's topic is read again by a second group: the all-replay.
            let ran = if duplicates == anchor.duplicates {
                run_case(plan, databases, case, true).await?
            } else {
                let ran = run_case(plan, databases, case, true).await?;
                cases.push(ran.result.clone());
                ran
            };
            cases.push(replay(plan, ran).await?);
        } else if duplicates != anchor.duplicates {
            cases.push(run_and_close(plan, databases, case, true).await?);
        }
    }

    let latency = match cases.first() {
        Some(first) => {
            Some(latency::run(plan, databases, first.run.rate * plan.latency_load).await?)
        }
        None => None,
    };

    let again = run_case(plan, databases, anchor, false).await?;
    again.published.topic.close().await;
    Ok(Measured {
        cases,
        anchor_others,
        anchor_again: Some(again.result.run),
        kafka_only,
        latency,
        backlog,
        tls,
    })
}

async fn backlog_phases(
    plan: &Plan,
    databases: &mut Databases,
) -> Result<Vec<Backlog>, BenchError> {
    let mut phases = Vec::new();
    if plan.backlog_events == Some(0) {
        phases.push(Backlog::Skipped("--backlog-events 0".into()));
        return Ok(phases);
    }
    for &partitions in &plan.backlog_partitions {
        phases.push(backlog::run(plan, databases, partitions).await?);
    }
    Ok(phases)
}

async fn run_and_close(
    plan: &Plan,
    databases: &Databases,
    case: Case,
    ceiling: bool,
) -> Result<CaseResult, BenchError> {
    let ran = run_case(plan, databases, case, ceiling).await?;
    ran.published.topic.close().await;
    Ok(ran.result)
}

/// Runs `case` end to end (into a database with its inbox rows), then, if `ceiling`, its
/// ceiling 2: into a fresh database for an empty inbox, into the same one for a filled inbox.
async fn run_case(
    plan: &Plan,
    databases: &Databases,
    case: Case,
    ceiling: bool,
) -> Result<Ran, BenchError> {
    let phase = case.label(&plan.anchor());
    let name = format!("bench_{:08x}", rand::random::<u32>());
    let url = databases.fresh(&name).await?;
    if case.inbox_rows > 0 {
        println!(
            "{phase}: filling the inbox and history with {} rows",
            rows(case.inbox_rows)
        );
        crate::inbox::migrate_pool(&crate::db::pool(&url, 1)?).await?;
        let took = prefill::fill(&url, case.inbox_rows).await?;
        println!("{phase}: filled in {:.0} s", took.as_secs_f64());
    }
    let records = plan.records_for(case.batch_size);
    let published =
        end_to_end::publish(plan, case.partitions, case.duplicates, records, &phase).await?;
    let run = match end_to_end::consume(&published, &url, case.batch_size, &phase).await {
        Ok(run) => run,
        Err(error) => {
            published.topic.close().await;
            return Err(error);
        }
    };
    let mut ceiling_ran = None;
    if ceiling {
        let work = DatabaseWork::new(plan, &published.run_id, case.duplicates, &published.sent);
        let ceiling_url = if case.inbox_rows > 0 {
            url.clone()
        } else {
            databases.fresh(&format!("{name}_ceiling")).await?
        };
        let ceiling_phase = format!("{phase}, ceiling 2");
        let result = work
            .run(
                &ceiling_url,
                case.batch_size,
                connections(case.partitions),
                true,
                &ceiling_phase,
            )
            .await;
        let result = match result {
            Ok(result) => result,
            Err(error) => {
                published.topic.close().await;
                return Err(error);
            }
        };
        println!("{ceiling_phase}: {:.0} events/s", result.rate);
        ceiling_ran = Some((work, ceiling_url, result));
    }
    let (ceiling, kept) = match ceiling_ran {
        Some((work, url, result)) => (Some(result), Some((work, url))),
        None => (None, None),
    };
    Ok(Ran {
        result: CaseResult { case, run, ceiling },
        published,
        url,
        ceiling: kept,
    })
}

/// A second consumer group over `ran`'s topic and database: every record a redelivery. Its
/// ceiling 2 runs the same events through the batched transaction a second time.
async fn replay(plan: &Plan, ran: Ran) -> Result<CaseResult, BenchError> {
    let case = Case {
        replay: true,
        ..ran.result.case
    };
    let phase = case.label(&plan.anchor());
    let run = end_to_end::consume(&ran.published, &ran.url, case.batch_size, &phase).await;
    ran.published.topic.close().await;
    let run = run?;
    let ceiling = match &ran.ceiling {
        Some((work, url)) => {
            let ceiling_phase = format!("{phase}, ceiling 2");
            let result = work
                .run(
                    url,
                    case.batch_size,
                    connections(case.partitions),
                    false,
                    &ceiling_phase,
                )
                .await?;
            println!("{ceiling_phase}: {:.0} events/s", result.rate);
            Some(result)
        }
        None => None,
    };
    Ok(CaseResult { case, run, ceiling })
}

/// The run with the median end-to-end / ceiling 2 ratio, and the others in the order run.
fn median_run(mut runs: Vec<CaseResult>) -> (CaseResult, Vec<CaseResult>) {
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|a, b| {
        let ratio = |i: &usize| runs[*i].vs_ceiling().unwrap_or(0.0);
        ratio(a).total_cmp(&ratio(b))
    });
    let median = runs.remove(order[order.len() / 2]);
    (median, runs)
}

/// Connections ceiling 2 uses for `partitions` shares: one each, at most the service's pool.
fn connections(partitions: i32) -> usize {
    usize::try_from(partitions)
        .unwrap_or(1)
        .min(RuntimeSettings::default().db_pool_size)
}
