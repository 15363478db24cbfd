//! The benchmark's PostgreSQL: a throwaway cluster with production's durability (fsync on), one
//! fresh database per run, or the database `--database-url` names (runs then share it and are
//! told apart by their event-id prefixes). Also ceiling 2: the database alone, the same batched
//! inbox transactions issued directly.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

use super::BenchError;
use crate::config::database::DatabaseSettings;
use crate::domain::TicketEvent;
use crate::inbox::Origin;
use crate::inbox::batch::{BatchItem, BatchOutcome, Shape, process_batch_shaped};
use crate::tools::certs::Authority;
use crate::tools::pg_cluster::{ClusterOptions, ServerTls, TempCluster, find_binaries};

/// The name the TLS phase dials (an address its certificate names: verify-full checks it).
const TLS_HOST: &str = "127.0.0.1";

/// Where the runs' databases come from.
pub struct Databases {
    cluster: Option<TempCluster>,
    /// The authority of the throwaway cluster's certificate (`sslrootcert`), in a folder that
    /// lives as long as the cluster.
    tls: Option<(tempfile::TempDir, PathBuf)>,
    url: Option<String>,
}

impl Databases {
    /// Uses `url` (with the password in `password_file`, if named), or starts a durable
    /// throwaway cluster.
    pub async fn prepare(
        url: Option<String>,
        password_file: Option<&Path>,
    ) -> Result<Databases, BenchError> {
        if let Some(url) = url {
            let settings = DatabaseSettings::from_flags(url.as_str().into(), password_file)?;
            settings.validate()?;
            let url = match &settings.password {
                Some(password) => crate::db::conninfo::with_password(&url, password.expose())
                    .map_err(crate::db::DbError::from)?,
                None => url,
            };
            return Ok(Databases {
                cluster: None,
                tls: None,
                url: Some(url),
            });
        }
        // TLS on beside plaintext (initdb's pg_hba.conf takes both): the TLS phase compares them
        // on the same server; every other phase connects with sslmode=disable.
        let files = tempfile::Builder::new()
            .prefix("history-bench-tls-")
            .tempdir()
            .map_err(|source| BenchError::Write {
                path: "a temporary directory for the certificates".into(),
                source,
            })?;
        let authority = Authority::new(files.path(), "bench-ca")?;
        let server = authority.issue_server("server", &[TLS_HOST, "localhost"])?;
        let options = ClusterOptions {
            durable: true,
            tls: Some(ServerTls {
                cert: server.cert,
                key: server.key,
                client_ca: None,
            }),
            ..ClusterOptions::default()
        };
        // initdb and waiting for the server take seconds: keep them off the actix thread.
        let cluster = tokio::task::spawn_blocking(move || TempCluster::start(options))
            .await
            .map_err(BenchError::Task)??;
        Ok(Databases {
            cluster: Some(cluster),
            tls: Some((files, authority.cert_path)),
            url: None,
        })
    }

    /// A database for one run, reached in plaintext: a new one of the throwaway cluster, else
    /// the given one.
    pub async fn fresh(&self, name: &str) -> Result<String, BenchError> {
        match (&self.cluster, &self.url) {
            (Some(cluster), _) => cluster
                .create_database(name)
                .await
                .map(|url| format!("{url}?sslmode=disable"))
                .map_err(BenchError::Query),
            (None, Some(url)) => Ok(url.clone()),
            (None, None) => unreachable!("prepared with a cluster or a URL"),
        }
    }

    /// A new database of the throwaway cluster reached over TLS with `sslmode=verify-full`
    /// against the cluster's own authority; `None` with `--database-url`.
    pub async fn fresh_tls(&self, name: &str) -> Result<Option<String>, BenchError> {
        let (Some(cluster), Some((_, authority))) = (&self.cluster, &self.tls) else {
            return Ok(None);
        };
        cluster
            .create_database(name)
            .await
            .map_err(BenchError::Query)?;
        Ok(Some(format!(
            "postgres://postgres@{TLS_HOST}:{}/{name}?sslmode=verify-full&sslrootcert={}",
            cluster.port(),
            authority.display()
        )))
    }

    /// Drops a database of the throwaway cluster (a prefilled one takes gigabytes); nothing
    /// with `--database-url`.
    pub async fn drop(&self, name: &str) -> Result<(), BenchError> {
        let Some(cluster) = &self.cluster else {
            return Ok(());
        };
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        cluster
            .administer(&format!("DROP DATABASE IF EXISTS {quoted} WITH (FORCE)"))
            .await
            .map_err(BenchError::Query)
    }

    /// Whether the benchmark owns the server (and so may stop it).
    pub fn owns_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// The throwaway cluster's directory.
    pub fn data_dir(&self) -> Option<&Path> {
        self.cluster.as_ref().map(TempCluster::dir)
    }

    /// The server's version: `postgres --version` of the binaries the cluster runs, or the
    /// server's own `version()` behind `--database-url`.
    pub async fn postgres_version(&self) -> String {
        if self.cluster.is_some() {
            let version = find_binaries().ok().and_then(|bin| {
                let output = std::process::Command::new(bin.join("postgres"))
                    .arg("--version")
                    .output()
                    .ok()?;
                Some(String::from_utf8_lossy(&output.stdout).trim().to_owned())
            });
            return version.unwrap_or_else(|| "unknown".into());
        }
        let url = self.url.clone().unwrap_or_default();
        let asked = async {
            let pool = crate::db::pool(&url, 1).ok()?;
            let client = pool.get().await.ok()?;
            let row = client.query_one("SELECT version()", &[]).await.ok()?;
            Some(row.get::<_, String>(0))
        };
        asked.await.unwrap_or_else(|| "unknown".into())
    }

    /// Stops the server (fast shutdown, clients disconnected), keeping its data.
    pub async fn stop(&mut self) -> Result<(), BenchError> {
        self.with_cluster(TempCluster::stop).await
    }

    /// Starts the stopped server again.
    pub async fn restart(&mut self) -> Result<(), BenchError> {
        self.with_cluster(TempCluster::restart).await
    }

    async fn with_cluster(
        &mut self,
        action: fn(&mut TempCluster) -> Result<(), crate::tools::pg_cluster::ClusterError>,
    ) -> Result<(), BenchError> {
        let Some(mut cluster) = self.cluster.take() else {
            return Ok(());
        };
        // Stopping and starting PostgreSQL blocks for a while.
        let (cluster, result) = tokio::task::spawn_blocking(move || {
            let result = action(&mut cluster);
            (cluster, result)
        })
        .await
        .map_err(BenchError::Task)?;
        self.cluster = Some(cluster);
        Ok(result?)
    }

    /// Stops the throwaway cluster and removes its data and certificates.
    pub async fn close(mut self) {
        if let Some(cluster) = self.cluster.take() {
            let _ = tokio::task::spawn_blocking(move || drop(cluster)).await;
        }
        self.tls = None;
    }
}

const COUNT_ROWS: &str = "SELECT count(*) FROM history_events WHERE starts_with(event_id, $1)";
const COUNT_IDS: &str = "SELECT count(*) FROM history_events WHERE event_id = ANY($1)";

/// How a run's rows are told apart from the others in its database.
#[derive(Debug, Clone)]
pub enum RunRows {
    /// Ordered ids: the run's prefix.
    Prefix(String),
    /// Random ids: the run's unique event ids.
    Ids(Vec<String>),
}

/// Rows of a run's events.
pub async fn count_run_rows(pool: &Pool, rows: &RunRows) -> Result<u64, BenchError> {
    let client = pool.get().await.map_err(BenchError::Pool)?;
    let row = match rows {
        RunRows::Prefix(prefix) => {
            let statement = client
                .prepare_cached(COUNT_ROWS)
                .await
                .map_err(BenchError::Query)?;
            client.query_one(&statement, &[prefix]).await
        }
        RunRows::Ids(ids) => client.query_one(COUNT_IDS, &[ids]).await,
    }
    .map_err(BenchError::Query)?;
    Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

/// Fails the phase unless the rows of `prefix` are exactly the `unique` events published.
pub async fn expect_rows(
    pool: &Pool,
    prefix: &str,
    unique: u64,
    phase: &str,
) -> Result<(), BenchError> {
    expect_run_rows(pool, &RunRows::Prefix(prefix.to_owned()), unique, phase).await
}

/// Fails the phase unless the run's rows are exactly the `unique` events published.
pub async fn expect_run_rows(
    pool: &Pool,
    run_rows: &RunRows,
    unique: u64,
    phase: &str,
) -> Result<(), BenchError> {
    let rows = count_run_rows(pool, run_rows).await?;
    if rows == unique {
        Ok(())
    } else {
        Err(BenchError::Mismatch {
            phase: phase.to_owned(),
            rows,
            unique,
        })
    }
}

/// The tables a run writes: the service's (its inbox, history and dead letters) and its
/// member's status rows.
const RUN_TABLES: &str = "inbox, history_events, dead_letters, group_members";

/// Vacuums and analyzes the tables a run wrote, once its measure and its checks are over.
/// Autovacuum would otherwise get to them later (a fresh table crosses its thresholds at
/// once), during another run's measure: that takes a core from one side of a comparison only.
pub async fn settle(pool: &Pool) -> Result<(), BenchError> {
    let client = pool.get().await.map_err(BenchError::Pool)?;
    client
        .batch_execute(&format!("VACUUM (ANALYZE) {RUN_TABLES}"))
        .await
        .map_err(BenchError::Query)
}

/// What the database alone did.
#[derive(Debug, Clone, Copy)]
pub struct Ceiling {
    pub records: u64,
    pub applied: u64,
    pub elapsed: Duration,
}

/// Ceiling 2: each share (one partition's records, in offset order) resolved by its own task
/// in batches of `batch_size` through [`process_batch_shaped`] in `shape`, all shares
/// concurrently on a pool of `connections` (as the service's partition actors share its
/// pool), into the database at `url` (migrated first if need be).
pub async fn ceiling(
    url: &str,
    shares: &[Vec<(TicketEvent, Origin)>],
    batch_size: usize,
    connections: usize,
    shape: Shape,
) -> Result<Ceiling, BenchError> {
    let pool = crate::db::pool(url, connections.max(1))?;
    crate::inbox::migrate_pool(&pool).await?;
    // Connect before the clock starts, as the service has before its first fetch.
    let opened = futures::future::try_join_all((0..connections.max(1)).map(|_| pool.get()))
        .await
        .map_err(BenchError::Pool)?;
    drop(opened);
    let started = Instant::now();
    let applied = futures::future::try_join_all(
        shares
            .iter()
            .map(|share| resolve_share(&pool, share, batch_size, shape)),
    )
    .await?;
    let elapsed = started.elapsed();
    Ok(Ceiling {
        records: shares.iter().map(|s| s.len() as u64).sum(),
        applied: applied.into_iter().sum(),
        elapsed,
    })
}

async fn resolve_share(
    pool: &Pool,
    share: &[(TicketEvent, Origin)],
    batch_size: usize,
    shape: Shape,
) -> Result<u64, BenchError> {
    let mut applied = 0;
    for chunk in share.chunks(batch_size.max(1)) {
        let items: Vec<BatchItem<'_>> = chunk
            .iter()
            .map(|(event, origin)| BatchItem::Event {
                event,
                origin: *origin,
            })
            .collect();
        let outcomes = process_batch_shaped(pool, &items, shape)
            .await
            .map_err(BenchError::Batch)?;
        applied += outcomes
            .iter()
            .filter(|o| **o == BatchOutcome::Applied)
            .count() as u64;
    }
    Ok(applied)
}
