//! The order of a benchmark run: the backlog phases first (while the process holds nothing
//! else), the default case with both ceilings (each run followed by one with one batch in flight
//! per partition: no pipelining), the default case over TLS beside plaintext, the batch sizes,
//! the inbox sizes with ordered ids and with random ones, the partition counts,
//! the duplicate shares and the replay, the latency, and the default case once more at the end
//! to show how far the machine drifted meanwhile. `--only` leaves out the phases it does not
//! name (never the default case, which every series is compared with).

use super::ceilings::{self, DatabaseWork};
use super::database::Databases;
use super::end_to_end::{self, Published};
use super::pg_stats::Counters;
use super::report::{
    Backlog, Case, CaseResult, CeilingResult, DatabaseState, IdKind, LatencyResult, Throughput,
    TlsCost, bracket, rows,
};
use super::{BenchError, Plan, backlog, latency, prefill, tls_cost};
use crate::config::RuntimeSettings;
use crate::inbox::batch::Shape;
use crate::tools::args::BenchPhase;

/// Everything the phases measured.
pub struct Measured {
    pub cases: Vec<CaseResult>,
    pub anchor_others: Vec<CaseResult>,
    pub anchor_again: Option<Throughput>,
    pub kafka_only: CeilingResult,
    pub latency: Option<LatencyResult>,
    pub backlog: Vec<Backlog>,
    pub tls: TlsCost,
    /// The replay's ceiling 2 in the service's shape for it (markers first).
    pub replay_markers_first: Option<CeilingResult>,
}

/// A case that ran, with what later phases may reuse.
struct Ran {
    result: CaseResult,
    published: Published,
    url: String,
    /// The name of the end-to-end run's database.
    name: String,
    /// Ceiling 2's events and the database they went into.
    ceiling: Option<(DatabaseWork, String)>,
}

pub async fn measure_all(plan: &Plan, databases: &mut Databases) -> Result<Measured, BenchError> {
    let backlog = backlog_phases(plan, databases).await?;
    let anchor = plan.anchor();
    let mut cases = Vec::new();
    let mut replay_markers_first = None;

    let ran = run_case(plan, databases, anchor, Ceilings::Around).await?;
    println!("ceiling 1: reading the default case's records back with no database");
    let kafka_only = ceilings::kafka(&ran.published.topic, &ran.published.sent).await;
    ran.published.topic.close().await;
    let kafka_only = kafka_only?;
    // The default case again: the targets lean on its ratio, so they use the run with the
    // median one. With the pipelining phase, each run is followed by one of the same case with
    // one batch in flight per partition (what pipelining gives), so that the machine's drift
    // over the runs weighs on both alike.
    let one_in_flight = Case {
        batches_in_flight: 1,
        ..anchor
    };
    let pipelining = plan.runs(BenchPhase::Pipelining);
    // In the order they ran, so that each is compared with the ceilings right before and
    // right after it (`bracket`).
    let mut series = vec![ran.result];
    for run in 0..plan.anchor_repeats {
        if run > 0 {
            series.push(run_and_close(plan, databases, anchor, Ceilings::After).await?);
        }
        if pipelining {
            series.push(run_and_close(plan, databases, one_in_flight, Ceilings::After).await?);
        }
    }
    bracket(&mut series);
    let (anchor_runs, unpipelined): (Vec<_>, Vec<_>) =
        series.into_iter().partition(|r| r.case == anchor);
    let (median, anchor_others) = median_run(anchor_runs);
    cases.push(median);
    cases.extend(unpipelined);
    let tls = if plan.runs(BenchPhase::Tls) {
        tls_cost::run(plan, databases).await?
    } else {
        TlsCost::Skipped("not asked for (--only)".into())
    };

    let batch_sizes = plan
        .batch_sizes
        .iter()
        .filter(|b| **b != anchor.batch_size && plan.runs(BenchPhase::BatchSizes));
    for &batch_size in batch_sizes {
        let case = Case {
            batch_size,
            ..anchor
        };
        cases.push(run_and_close(plan, databases, case, Ceilings::No).await?);
    }

    let inbox_rows = plan
        .inbox_rows
        .iter()
        .filter(|_| plan.runs(BenchPhase::Inbox))
        .map(|rows| (*rows, IdKind::Ordered));
    let random_id_rows = plan
        .random_id_rows
        .iter()
        .filter(|_| plan.runs(BenchPhase::RandomIds))
        .map(|rows| (*rows, IdKind::Random));
    for (inbox_rows, ids) in inbox_rows.chain(random_id_rows) {
        if inbox_rows > 0 && !databases.owns_cluster() {
            println!(
                "{} rows in the inbox, {} ids: skipped (it fills a database of its own; not \
                 with --database-url)",
                rows(inbox_rows),
                ids.name()
            );
            continue;
        }
        let case = Case {
            inbox_rows,
            ids,
            ..anchor
        };
        cases.push(run_and_close(plan, databases, case, Ceilings::After).await?);
    }

    let partition_counts = plan
        .partition_counts
        .iter()
        .filter(|p| **p != anchor.partitions && plan.runs(BenchPhase::Partitions));
    for &partitions in partition_counts {
        let case = Case {
            partitions,
            ..anchor
        };
        cases.push(run_and_close(plan, databases, case, Ceilings::After).await?);
    }

    let mut shares: Vec<f64> = plan.duplicate_shares.clone();
    if !plan.runs(BenchPhase::Duplicates) {
        shares.clear();
    }
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
                run_case(plan, databases, case, Ceilings::After).await?
            } else {
                let ran = run_case(plan, databases, case, Ceilings::After).await?;
                cases.push(ran.result.clone());
                ran
            };
            let (replayed, markers_first) = replay(plan, ran).await?;
            cases.push(replayed);
            replay_markers_first = markers_first;
        } else if duplicates != anchor.duplicates {
            cases.push(run_and_close(plan, databases, case, Ceilings::After).await?);
        }
    }

    let latency = match cases.first().filter(|_| plan.runs(BenchPhase::Latency)) {
        Some(first) => {
            Some(latency::run(plan, databases, first.run.rate * plan.latency_load).await?)
        }
        None => None,
    };

    let again = run_case(plan, databases, anchor, Ceilings::No).await?;
    again.published.topic.close().await;
    Ok(Measured {
        cases,
        anchor_others,
        anchor_again: Some(again.result.run),
        kafka_only,
        latency,
        backlog,
        tls,
        replay_markers_first,
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
    if !plan.runs(BenchPhase::Backlog) {
        phases.push(Backlog::Skipped("not asked for (--only)".into()));
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
    ceilings: Ceilings,
) -> Result<CaseResult, BenchError> {
    let ran = run_case(plan, databases, case, ceilings).await?;
    ran.published.topic.close().await;
    if case.inbox_rows > 0 {
        // A prefilled database takes gigabytes, and its autovacuum would write WAL into the
        // next case's measure.
        databases.drop(&ran.name).await?;
    }
    Ok(ran.result)
}

/// The ceiling 2 runs a case gets beside its end-to-end run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ceilings {
    No,
    /// One right after it.
    After,
    /// One right before it too, into a fresh database of its own (the first of the default
    /// case's runs: the others get the one after the run before them, see `bracket`).
    Around,
}

/// Runs `case` end to end (into a database with its inbox rows), then, unless `ceilings` is
/// `No`, its ceiling 2: into a fresh database for an empty inbox, into the same one for a
/// filled inbox. For the inbox-size cases (either id kind) on the throwaway cluster,
/// PostgreSQL's own counters are read around each run.
async fn run_case(
    plan: &Plan,
    databases: &Databases,
    case: Case,
    ceilings: Ceilings,
) -> Result<Ran, BenchError> {
    let anchor = plan.anchor();
    let phase = case.label(&anchor);
    let name = format!("bench_{:08x}", rand::random::<u32>());
    let url = databases.fresh(&name).await?;
    let inbox_series = Case {
        inbox_rows: anchor.inbox_rows,
        ids: anchor.ids,
        ..case
    } == anchor;
    let counted = inbox_series && databases.owns_cluster();
    let mut prefill_took = None;
    if case.inbox_rows > 0 || counted {
        crate::inbox::migrate_pool(&crate::db::pool(&url, 1)?).await?;
    }
    if case.inbox_rows > 0 {
        println!(
            "{phase}: filling the inbox and history with {} rows ({} ids)",
            rows(case.inbox_rows),
            case.ids.name()
        );
        let took = prefill::fill(&url, case.inbox_rows, case.ids).await?;
        println!("{phase}: filled in {:.0} s", took.as_secs_f64());
        prefill_took = Some(took);
    }
    let records = plan.records_for(case.batch_size);
    let published = end_to_end::publish(
        plan,
        case.partitions,
        case.duplicates,
        case.ids,
        records,
        &phase,
    )
    .await?;
    let measured = async {
        let ceiling_before = if ceilings == Ceilings::Around {
            assert_eq!(case.inbox_rows, 0, "a ceiling before needs an empty inbox");
            let work = ceiling_work(plan, &published, &case);
            let fresh = databases.fresh(&format!("{name}_ceiling_before")).await?;
            let ceiling_phase = format!("{phase}, ceiling 2 before it");
            let result = ceiling_2(&work, &fresh, &case, &ceiling_phase).await?;
            work.check(&fresh, &ceiling_phase).await?;
            println!("{ceiling_phase}: {:.0} events/s", result.rate);
            Some(result.rate)
        } else {
            None
        };
        let before = read_if(counted, &url).await?;
        let run = end_to_end::consume_unchecked(&published, &url, &case, &phase).await?;
        let after = read_if(counted, &url).await?;
        end_to_end::check(&published, &url, &phase).await?;
        let mut ceiling_ran = None;
        if ceilings != Ceilings::No {
            let work = ceiling_work(plan, &published, &case);
            let (ceiling_url, counters_before) = if case.inbox_rows > 0 {
                // Read again: the rows were counted since.
                (url.clone(), read_if(counted, &url).await?)
            } else {
                let fresh = databases.fresh(&format!("{name}_ceiling")).await?;
                if counted {
                    crate::inbox::migrate_pool(&crate::db::pool(&fresh, 1)?).await?;
                }
                let before = read_if(counted, &fresh).await?;
                (fresh, before)
            };
            let ceiling_phase = format!("{phase}, ceiling 2");
            let result = ceiling_2(&work, &ceiling_url, &case, &ceiling_phase).await?;
            let counters_after = read_if(counted, &ceiling_url).await?;
            work.check(&ceiling_url, &ceiling_phase).await?;
            println!("{ceiling_phase}: {:.0} events/s", result.rate);
            let activity = counters_before
                .zip(counters_after)
                .map(|(b, a)| b.until(&a, result.records));
            ceiling_ran = Some((work, ceiling_url, result, activity));
        }
        let database = before.zip(after).map(|(b, a)| DatabaseState {
            shared_buffers: a.shared_buffers,
            prefill: prefill_took,
            before: b.indexes,
            after: a.indexes,
            run: b.until(&a, run.records),
            ceiling: ceiling_ran
                .as_ref()
                .and_then(|(_, _, _, activity)| *activity),
        });
        if let Some(state) = &database {
            print_state(&phase, state);
        }
        Ok::<_, BenchError>((run, ceiling_ran, ceiling_before, database))
    };
    let (run, ceiling_ran, ceiling_before, database) = match measured.await {
        Ok(measured) => measured,
        Err(error) => {
            published.topic.close().await;
            return Err(error);
        }
    };
    let (ceiling, kept) = match ceiling_ran {
        Some((work, url, result, _)) => (Some(result), Some((work, url))),
        None => (None, None),
    };
    Ok(Ran {
        result: CaseResult {
            case,
            run,
            ceiling,
            ceiling_before,
            database,
        },
        published,
        url,
        name,
        ceiling: kept,
    })
}

/// PostgreSQL's counters in the database at `url`, if `counted`.
async fn read_if(counted: bool, url: &str) -> Result<Option<Counters>, BenchError> {
    if counted {
        Counters::read(url).await.map(Some)
    } else {
        Ok(None)
    }
}

fn print_state(phase: &str, state: &DatabaseState) {
    let mb = |bytes: u64| bytes as f64 / 1_000_000.0;
    let percent =
        |ratio: Option<f64>| ratio.map_or("—".into(), |r| format!("{:.1} %", r * 100.0));
    let wal = |a: &super::report::DbActivity| a.wal_per_event().unwrap_or_default();
    println!(
        "{phase}: primary keys {:.0} MB (inbox) + {:.0} MB (history) after the run; hit ratio \
         {} (indexes {}), {:.0} WAL bytes/event end to end; ceiling 2: {}, {} WAL bytes/event",
        mb(state.after.inbox),
        mb(state.after.history),
        percent(state.run.hit_ratio()),
        percent(state.run.index_hit_ratio()),
        wal(&state.run),
        percent(state.ceiling.and_then(|c| c.hit_ratio())),
        state
            .ceiling
            .map_or("—".into(), |c| format!("{:.0}", wal(&c)))
    );
}

/// A second consumer group over `ran`'s topic and database: every record a redelivery. Its
/// ceiling 2 runs the same events through the batched transaction a second time, in one round
/// trip; then a third time in the shape the service gives a batch after one that applied
/// nothing (markers first: see `inbox::batch::Shape`), returned beside.
async fn replay(plan: &Plan, ran: Ran) -> Result<(CaseResult, Option<CeilingResult>), BenchError> {
    let case = Case {
        replay: true,
        ..ran.result.case
    };
    let phase = case.label(&plan.anchor());
    let run = end_to_end::consume(&ran.published, &ran.url, &case, &phase).await;
    ran.published.topic.close().await;
    let run = run?;
    let mut ceilings = Vec::new();
    if let Some((work, url)) = &ran.ceiling {
        for (shape, named) in [
            (Shape::OneRoundTrip, ""),
            (Shape::MarkersFirst, ", markers first"),
        ] {
            let ceiling_phase = format!("{phase}, ceiling 2{named}");
            let result = work
                .run(
                    url,
                    case.batch_size,
                    connections(case.partitions),
                    false,
                    shape,
                    &ceiling_phase,
                )
                .await?;
            println!("{ceiling_phase}: {:.0} events/s", result.rate);
            ceilings.push(result);
        }
    }
    let mut ceilings = ceilings.into_iter();
    let result = CaseResult {
        case,
        run,
        ceiling: ceilings.next(),
        ceiling_before: None,
        database: None,
    };
    Ok((result, ceilings.next()))
}

/// Ceiling 2's work: `published`'s events as `case` made them. Built only when a ceiling
/// runs, so that the end-to-end run's memory does not hold it.
fn ceiling_work(plan: &Plan, published: &Published, case: &Case) -> DatabaseWork {
    DatabaseWork::new(
        plan,
        &published.run_id,
        case.duplicates,
        case.ids,
        &published.sent,
    )
}

/// Ceiling 2 of `work` into the database at `url`, in the service's batches and connections
/// for `case`; its rows are not checked yet.
async fn ceiling_2(
    work: &DatabaseWork,
    url: &str,
    case: &Case,
    phase: &str,
) -> Result<CeilingResult, BenchError> {
    work.run_unchecked(
        url,
        case.batch_size,
        connections(case.partitions),
        true,
        Shape::default(),
        phase,
    )
    .await
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
