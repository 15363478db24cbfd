//! The cost of TLS to PostgreSQL: the default case's records consumed twice from one topic, by
//! two consumer groups into two fresh databases of the same server — once in plaintext
//! (`sslmode=disable`), once over TLS with `sslmode=verify-full` against the throwaway
//! cluster's own authority — in alternating order, so that neither always runs second on a
//! warmer machine.

use super::database::Databases;
use super::end_to_end::{self, Published};
use super::report::{TlsCost, TlsPair};
use super::{BenchError, Plan};

/// Runs the phase `plan.anchor_repeats` times (a pair of runs each), unless the benchmark
/// runs on `--database-url`, whose TLS it does not own.
pub async fn run(plan: &Plan, databases: &Databases) -> Result<TlsCost, BenchError> {
    if !databases.owns_cluster() {
        println!(
            "TLS: skipped (it needs the throwaway cluster's certificates; not with --database-url)"
        );
        return Ok(TlsCost::Skipped(
            "it needs the throwaway cluster's own certificates (not with --database-url)".into(),
        ));
    }
    let anchor = plan.anchor();
    let mut pairs = Vec::new();
    for i in 0..plan.anchor_repeats.max(1) {
        let phase = format!("TLS, pair {}", i + 1);
        let records = plan.records_for(anchor.batch_size);
        let published = end_to_end::publish(
            plan,
            anchor.partitions,
            anchor.duplicates,
            anchor.ids,
            records,
            &phase,
        )
        .await?;
        let measured = pair(plan, databases, &published, i % 2 == 1, &phase).await;
        published.topic.close().await;
        let measured = measured?;
        if let Some(ratio) = measured.ratio() {
            println!("{phase}: over TLS / plaintext = {ratio:.2}");
        }
        pairs.push(measured);
    }
    Ok(TlsCost::Measured(pairs))
}

/// `published` consumed in plaintext and over TLS, TLS first if `tls_first`.
async fn pair(
    plan: &Plan,
    databases: &Databases,
    published: &Published,
    tls_first: bool,
    phase: &str,
) -> Result<TlsPair, BenchError> {
    let name = format!("bench_{:08x}", rand::random::<u32>());
    let plain_url = databases.fresh(&format!("{name}_plain")).await?;
    let Some(tls_url) = databases.fresh_tls(&format!("{name}_tls")).await? else {
        unreachable!("the benchmark owns the cluster, and so its certificates");
    };
    let anchor = plan.anchor();
    let plain_phase = format!("{phase}, plaintext");
    let tls_phase = format!("{phase}, over TLS (verify-full)");
    let (plain, tls) = if tls_first {
        let tls = end_to_end::consume(published, &tls_url, &anchor, &tls_phase).await?;
        let plain = end_to_end::consume(published, &plain_url, &anchor, &plain_phase).await?;
        (plain, tls)
    } else {
        let plain = end_to_end::consume(published, &plain_url, &anchor, &plain_phase).await?;
        let tls = end_to_end::consume(published, &tls_url, &anchor, &tls_phase).await?;
        (plain, tls)
    };
    Ok(TlsPair {
        plain,
        tls,
        tls_first,
    })
}
