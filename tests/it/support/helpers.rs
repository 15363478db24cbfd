//! Shared test plumbing: one throwaway PostgreSQL cluster per test process, one fresh database
//! per test, and polling with a deadline.

use std::future::Future;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use history_consumer::tools::pg_cluster::{ClusterOptions, TempCluster};

/// The cluster every test of this process shares (each in its own database).
pub fn cluster() -> &'static TempCluster {
    static CLUSTER: OnceLock<TempCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        TempCluster::start(ClusterOptions::default()).expect("start the test PostgreSQL cluster")
    })
}

/// A fresh, migrated database of the shared cluster.
pub struct TestDb {
    pub url: String,
    pub pool: Pool,
}

impl TestDb {
    /// Runs a query returning one `bigint` (e.g. a count).
    pub async fn scalar(&self, sql: &str) -> i64 {
        let client = self.pool.get().await.expect("a connection");
        client.query_one(sql, &[]).await.expect(sql).get(0)
    }
}

/// Has the kernel SIGKILL the child spawned by `command` when the thread that spawns it ends
/// (`PR_SET_PDEATHSIG`: per thread, not per process), so that a crashed or `kill -9`ed test run
/// leaves no process behind. Spawn from the test's own thread (never from a pool thread, which
/// may end mid-test).
pub fn killed_when_the_spawning_thread_ends(command: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // We may have died before the prctl: then no signal will ever come.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A cluster of the test's own (for tests that stop it) and the URL of a database on it.
pub async fn own_database(name: &str) -> (TempCluster, String) {
    let cluster = TempCluster::start(ClusterOptions::default()).expect("own cluster");
    let url = cluster.create_database(name).await.expect("database");
    (cluster, url)
}

/// A unique name for a database, topic or group.
pub fn unique_name(prefix: &str) -> String {
    format!("{prefix}_{:016x}", rand::random::<u64>())
}

/// Creates an empty database (not migrated) and returns its URL.
pub async fn empty_database() -> String {
    cluster()
        .create_database(&unique_name("test"))
        .await
        .expect("create a test database")
}

/// Creates a database, applies the migrations and returns a pool of `size` connections on it.
pub async fn test_database_with(size: usize) -> TestDb {
    let url = empty_database().await;
    let pool = history_consumer::db::pool(&url, size).expect("a pool");
    history_consumer::inbox::migrate_pool(&pool)
        .await
        .expect("migrations apply");
    TestDb { url, pool }
}

/// A migrated database with a small pool.
pub async fn test_database() -> TestDb {
    test_database_with(4).await
}

/// Every event of `0..total` is stored exactly once: one history row and one inbox marker each.
pub async fn assert_stored_once(db: &TestDb, total: usize) {
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events").await,
        total as i64
    );
    assert_eq!(
        db.scalar("SELECT count(DISTINCT event_id) FROM history_events")
            .await,
        total as i64
    );
    assert_eq!(db.scalar("SELECT count(*) FROM inbox").await, total as i64);
}

/// Polls `probe` until it returns `Some`, failing the test with `what` after `timeout`.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
