//! Wiring: the database pool and migrations, the actors, the Kafka consumer and its driver
//! thread, and the admin HTTP server; then running until SIGINT/SIGTERM or the consumer stops.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::mpsc;

use actix::prelude::*;
use deadpool_postgres::Pool;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::actors::Monitor;
use crate::actors::messages::{KafkaLink, KafkaRequest, Shutdown};
use crate::actors::partition::PartitionDeps;
use crate::actors::partition::schedule::Limits as PartitionLimits;
use crate::actors::partition::transactions::TransactionsInFlight;
use crate::actors::supervisor::MemberInfo;
use crate::actors::{Checkpoint, Supervisor};
use crate::admin::auth::Auth;
use crate::admin::{self, AdminState};
use crate::config::{ConfigError, Settings};
use crate::db::DbError;
use crate::domain::ConnectionHealth;
use crate::group::GroupMember;
use crate::kafka::client::Prefetch;
use crate::kafka::health::{HealthReporter, identity_of};
use crate::kafka::reader::ReaderConfig;
use crate::kafka::{DriverPorts, DriverSettings, KafkaContext, consumer_config, spawn_driver};
use crate::metrics::Metrics;

/// The service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Migrate(#[from] crate::inbox::MigrateError),
    #[error("could not listen on the admin or metrics address {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("could not start the kafka driver thread")]
    Thread(#[source] std::io::Error),
    #[error("the kafka consumer stopped: {0}")]
    Consumer(String),
}

/// What tests and the demo need to look inside a running service.
#[derive(Clone)]
pub struct AppHandle {
    pub supervisor: Addr<Supervisor>,
    pub pool: Pool,
    pub metrics: Metrics,
    pub admin_addr: SocketAddr,
    /// Where `/metrics` and the health endpoints are: `admin_addr` unless `--metrics-addr`.
    pub metrics_addr: SocketAddr,
}

impl AppHandle {
    /// Asks the service to leave the group gracefully (as SIGTERM does).
    pub fn shutdown(&self) {
        self.supervisor.do_send(Shutdown);
    }
}

/// A built, not yet running, service.
pub struct Application {
    settings: Settings,
    handle: AppHandle,
    consumer: BaseConsumer<KafkaContext>,
    requests: mpsc::Receiver<KafkaRequest>,
    link: KafkaLink,
    ports: DriverPorts,
    server: admin::Servers,
    /// The pages served while the start waited for the database, if it did: stopped once the
    /// real servers run, so that the addresses never stop answering in between.
    waiting_servers: Option<admin::ServersHandle>,
    stopped: tokio::sync::oneshot::Receiver<Option<String>>,
}

impl Application {
    /// Connects to the database (applying migrations), creates the actors and the consumer,
    /// subscribes, and binds the admin server. Must run inside an actix system.
    pub async fn build(settings: Settings) -> Result<Application, StartupError> {
        Application::build_with(settings, DatabaseAtStart::Required)
            .await
            .map(|built| built.expect("not waiting, so not stopped while waiting"))
    }

    /// As [`Application::build`], but a database that cannot be reached does not stop the
    /// start: the service waits for it as it waits for the brokers, serving `/healthz`, an
    /// unready `/readyz` and a page with the reason meanwhile. `None`: a SIGINT or SIGTERM
    /// came while it waited.
    pub async fn build_waiting(settings: Settings) -> Result<Option<Application>, StartupError> {
        Application::build_with(settings, DatabaseAtStart::WaitForIt).await
    }

    async fn build_with(
        settings: Settings,
        database_at_start: DatabaseAtStart,
    ) -> Result<Option<Application>, StartupError> {
        let built = Application::assemble(settings, database_at_start).await;
        if built.is_err() {
            // Actors started before the failure have not run yet. Left so, the runtime's
            // shutdown would start them outside it (actix runs an actor once as it drops it)
            // and their timers would panic, burying this error: let them start now.
            tokio::task::yield_now().await;
        }
        built
    }

    async fn assemble(
        settings: Settings,
        database_at_start: DatabaseAtStart,
    ) -> Result<Option<Application>, StartupError> {
        settings.validate()?;
        // The admin's TLS files are read now: a wrong one stops the start, naming its key.
        let admin_tls = settings
            .admin
            .tls
            .as_ref()
            .map(admin::tls::AdminTls::load)
            .transpose()?;
        // librdkafka checks every property name and value; do it before touching anything.
        let host = hostname();
        let client_id = format!("history-consumer-{host}-{}", std::process::id());
        let runtime = &settings.runtime;
        let prefetch = Prefetch {
            records: runtime.partition_queue,
            kbytes: runtime.partition_fetch_kb,
        };
        let kafka_config = consumer_config(&settings.kafka, &client_id, prefetch);
        kafka_config
            .create_native_config()
            .map_err(kafka_config_error)?;
        let database = settings.database.database()?;
        let pool = database.pool(runtime.db_pool_size)?;
        let metrics = Metrics::new();
        // Bound first: while the database is waited for, the addresses already answer.
        let admin = &settings.admin;
        let (listener, admin_addr) = bind(admin.addr)?;
        let (metrics_listener, metrics_addr) = match admin.separate_metrics_addr() {
            Some(addr) => {
                let (listener, bound) = bind(addr)?;
                (Some(listener), bound)
            }
            None => (None, admin_addr),
        };
        let (report, waiting_servers) = match database_at_start {
            DatabaseAtStart::Required => (crate::inbox::migrate_pool(&pool).await?, None),
            DatabaseAtStart::WaitForIt => {
                let listeners = (&listener, metrics_listener.as_ref());
                match migrate_when_reachable(&pool, listeners, &metrics, admin_tls.as_ref()).await?
                {
                    Some(migrated) => migrated,
                    None => return Ok(None),
                }
            }
        };
        if !report.applied.is_empty() {
            tracing::info!(applied = ?report.applied, "database migrated");
        }
        let actors = Actors::start(&settings, &pool, &metrics, &host);
        let connection = Arc::new(ConnectionHealth::new());
        let (consumer, ports) =
            subscribe(&settings, &kafka_config, &actors, &metrics, &connection)?;
        let monitor = Monitor::new(
            actors.supervisor.clone(),
            metrics.clone(),
            runtime.stuck,
            connection.clone(),
        )
        .start();
        let state = AdminState {
            supervisor: actors.supervisor.clone(),
            monitor,
            connection,
            pool: pool.clone(),
            pages_pool: admin::pool::pool(&database, admin)?,
            metrics: metrics.clone(),
            auth: Auth::new(
                admin,
                &format!("{host}:{}", admin_addr.port()),
                metrics.clone(),
            ),
            read_auth: admin.read_auth,
            topic: settings.kafka.topic.clone(),
            max_payload_bytes: runtime.max_payload_bytes,
            reader: ReaderConfig {
                connection: settings.kafka.connection(),
                topic: settings.kafka.topic.clone(),
            },
            group: GroupMember::of_service(
                &settings,
                &database,
                &pool,
                (&host, &client_id),
                admin_addr,
                admin_tls.is_some(),
            ),
        };
        let server = admin::server(listener, metrics_listener, state, admin_tls.as_ref()).map_err(
            |source| StartupError::Bind {
                addr: admin.addr,
                source,
            },
        )?;
        let https = admin_tls.is_some();
        tracing::info!(%admin_addr, %metrics_addr, https, group = %settings.kafka.group, topic = %settings.kafka.topic, "service started");
        let Actors {
            link,
            requests,
            supervisor,
            stopped,
            ..
        } = actors;
        Ok(Some(Application {
            handle: AppHandle {
                supervisor,
                pool,
                metrics,
                admin_addr,
                metrics_addr,
            },
            settings,
            consumer,
            requests,
            link,
            ports,
            server,
            waiting_servers,
            stopped,
        }))
    }

    pub fn handle(&self) -> AppHandle {
        self.handle.clone()
    }

    /// Runs until SIGINT/SIGTERM (then leaves the group gracefully) or the consumer stops.
    pub async fn run_until_stopped(self) -> Result<(), StartupError> {
        let runtime = &self.settings.runtime;
        // The shutdown budget: every partition drains within its own deadline, in parallel.
        let shutdown_deadline = shutdown_deadline(runtime.drain_timeout);
        let driver = spawn_driver(
            self.consumer,
            self.requests,
            self.link,
            self.ports,
            DriverSettings {
                initial_credit: runtime.partition_queue,
                shutdown_deadline,
                reset_policy: runtime.offset_reset_policy,
                static_member: self.settings.kafka.group_instance_id.is_some(),
            },
        )
        .map_err(StartupError::Thread)?;
        let server_handle = self.server.spawn();
        if let Some(waiting) = self.waiting_servers {
            // Both serve the same listeners for a moment; the waiting ones finish what they
            // accepted, and accept nothing more.
            actix::spawn(async move { waiting.stop(true).await });
        }
        let supervisor = self.handle.supervisor.clone();
        actix::spawn(async move {
            wait_for_signal().await;
            tracing::info!("signal received");
            supervisor.do_send(Shutdown);
        });
        let outcome = tokio::select! {
            outcome = self.stopped => outcome.unwrap_or(None),
            Some(error) = driver_panicked(driver) => Some(error),
        };
        server_handle.stop(true).await;
        match outcome {
            None => Ok(()),
            Some(error) => Err(StartupError::Consumer(error)),
        }
    }
}

/// The actors that carry records, started before the consumer exists: the driver's channel,
/// the checkpoint and the supervisor (which starts a partition actor per assignment).
struct Actors {
    link: KafkaLink,
    requests: mpsc::Receiver<KafkaRequest>,
    checkpoint: Addr<Checkpoint>,
    supervisor: Addr<Supervisor>,
    /// Answered once the supervisor stopped, with the error that stopped it, if any.
    stopped: tokio::sync::oneshot::Receiver<Option<String>>,
}

impl Actors {
    fn start(settings: &Settings, pool: &Pool, metrics: &Metrics, host: &str) -> Actors {
        let runtime = &settings.runtime;
        let (requests_tx, requests) = mpsc::channel();
        let link = KafkaLink::new(requests_tx);
        let checkpoint =
            Checkpoint::new(link.clone(), runtime.commit_interval, metrics.clone()).start();
        let deps = Arc::new(PartitionDeps {
            topic: settings.kafka.topic.clone(),
            pool: pool.clone(),
            checkpoint: checkpoint.clone(),
            kafka: link.clone(),
            metrics: metrics.clone(),
            limits: PartitionLimits {
                window: runtime.partition_queue,
                batch_size: runtime.batch_size,
                max_unresolved: runtime.max_unresolved,
                linger: runtime.batch_linger,
                batches_in_flight: runtime.batches_in_flight,
            },
            transactions: TransactionsInFlight::new(
                runtime.transactions_in_flight,
                metrics.transactions_in_flight(),
            ),
            retry: runtime.retry,
            max_payload_bytes: runtime.max_payload_bytes,
            work_timeout: runtime.work_timeout,
            max_consecutive_rejections: runtime.max_consecutive_rejections,
        });
        let (stopped_tx, stopped) = tokio::sync::oneshot::channel();
        let supervisor = Supervisor::new(
            MemberInfo {
                group: settings.kafka.group.clone(),
                topic: settings.kafka.topic.clone(),
                host: host.to_owned(),
            },
            deps,
            runtime.drain_timeout,
            stopped_tx,
        )
        .start();
        Actors {
            link,
            requests,
            checkpoint,
            supervisor,
            stopped,
        }
    }
}

/// The consumer, subscribed to the topic, and where its driver reports to the actors.
fn subscribe(
    settings: &Settings,
    kafka_config: &rdkafka::ClientConfig,
    actors: &Actors,
    metrics: &Metrics,
    connection: &Arc<ConnectionHealth>,
) -> Result<(BaseConsumer<KafkaContext>, DriverPorts), StartupError> {
    let supervisor = &actors.supervisor;
    let context = KafkaContext::new(
        settings.kafka.topic.clone(),
        supervisor.clone().recipient(),
        metrics.clone(),
        HealthReporter::new(connection.clone(), kafka_config, metrics.clone()),
    );
    let consumer: BaseConsumer<KafkaContext> = kafka_config
        .create_with_context(context)
        .map_err(|e| kafka_creation_error(e, &identity_of(kafka_config)))?;
    consumer
        .subscribe(&[&settings.kafka.topic])
        .map_err(|e| ConfigError::new("--topic / HISTORY_KAFKA_TOPIC", e.to_string()))?;
    let ports = DriverPorts {
        assigned: supervisor.clone().recipient(),
        revoked: supervisor.clone().recipient(),
        commits: actors.checkpoint.clone().recipient(),
        joined: supervisor.clone().recipient(),
        stopped: supervisor.clone().recipient(),
        fetch: supervisor.clone().recipient(),
        rewinding: supervisor.clone().recipient(),
        restarted: supervisor.clone().recipient(),
        rewound: supervisor.clone().recipient(),
        resets: supervisor.clone().recipient(),
        resets_resumed: supervisor.clone().recipient(),
    };
    Ok((consumer, ports))
}

/// Whether `run` may wait for a database it cannot reach at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DatabaseAtStart {
    /// Fail (tests, the demo and the bench, which start their own database).
    Required,
    /// Wait, up and unready, with the reason on the admin address.
    WaitForIt,
}

/// The first wait between two attempts to reach the database at start; it doubles up to
/// [`DATABASE_RETRY_MAX`].
const DATABASE_RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
const DATABASE_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(15);
/// Every this many failed attempts in a row the log says again that the service still waits.
const DATABASE_WAIT_REMINDER: u64 = 10;

/// Applies the migrations once the database can be reached, serving the waiting pages on the
/// listeners meanwhile: the report, and the waiting servers if it waited (still running; the
/// caller stops them once the real servers run, so that a request in between is answered, not
/// dropped). `None`: a SIGINT or SIGTERM came first. A migration that fails on a reachable
/// database still stops the start: waiting would not fix it.
async fn migrate_when_reachable(
    pool: &Pool,
    (admin_listener, metrics_listener): (&TcpListener, Option<&TcpListener>),
    metrics: &Metrics,
    tls: Option<&admin::tls::AdminTls>,
) -> Result<Option<(crate::inbox::MigrationReport, Option<admin::ServersHandle>)>, StartupError> {
    use crate::admin::waiting::{self, WaitingState};
    use crate::inbox::MigrateError;
    let mut waiting: Option<(WaitingState, admin::ServersHandle)> = None;
    let mut delay = DATABASE_RETRY_FIRST;
    let signal = wait_for_signal();
    tokio::pin!(signal);
    loop {
        let outcome = crate::inbox::migrate_pool(pool).await;
        let reason = match outcome {
            Err(MigrateError::Connect(error)) => crate::error_text::chain(&error),
            done => {
                let Some((state, servers)) = waiting.take() else {
                    return Ok(Some((done?, None)));
                };
                let report = match done {
                    Ok(report) => report,
                    Err(error) => {
                        servers.stop(false).await;
                        return Err(error.into());
                    }
                };
                let waited = state.now();
                tracing::info!(
                    attempts = waited.attempts,
                    since = %waited.since,
                    "the database answers; starting"
                );
                return Ok(Some((report, Some(servers))));
            }
        };
        match &waiting {
            None => {
                tracing::warn!(
                    error = %reason,
                    "cannot reach the database; waiting for it (up, not ready: /readyz and the \
                     admin address say why), retrying"
                );
                let state = WaitingState::new(reason, metrics.clone());
                let servers = waiting::server(admin_listener, metrics_listener, state.clone(), tls)
                    .map_err(|source| StartupError::Bind {
                        addr: admin_listener
                            .local_addr()
                            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
                        source,
                    })?
                    .spawn();
                waiting = Some((state, servers));
            }
            Some((state, _)) => {
                let before = state.now();
                if before.reason != reason {
                    tracing::warn!(error = %reason, "still cannot reach the database, now failing otherwise");
                } else if (before.attempts + 1) % DATABASE_WAIT_REMINDER == 0 {
                    tracing::warn!(
                        error = %reason,
                        attempts = before.attempts + 1,
                        since = %before.since,
                        "still waiting for the database"
                    );
                }
                state.failed_again(reason);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = &mut signal => {
                tracing::info!("signal received while waiting for the database; stopping");
                if let Some((_, servers)) = waiting.take() {
                    servers.stop(false).await;
                }
                return Ok(None);
            }
        }
        delay = (delay * 2).min(DATABASE_RETRY_MAX);
    }
}

/// How long the driver waits, once asked to stop, for its partitions to be given up before it
/// closes the consumer anyway: twice the drain timeout (every partition drains in parallel).
fn shutdown_deadline(drain_timeout: std::time::Duration) -> std::time::Duration {
    drain_timeout * 2
}

/// The longest a graceful stop (SIGINT/SIGTERM) takes with this `--drain-timeout`, from the
/// signal to the process's exit but for closing librdkafka's connections: the driver's
/// shutdown deadline (the partitions drain within it), the final commit
/// ([`FINAL_COMMIT_TIMEOUT`](crate::kafka::timeouts::FINAL_COMMIT_TIMEOUT)), librdkafka leaving
/// the group ([`LEAVE_TIMEOUT`](crate::kafka::timeouts::LEAVE_TIMEOUT), a dynamic member only),
/// and the admin listeners closing ([`ADMIN_SHUTDOWN_GRACE`](admin::ADMIN_SHUTDOWN_GRACE)).
/// Whatever kills the process after a timeout of its own (Kubernetes'
/// terminationGracePeriodSeconds, systemd's TimeoutStopSec) must wait longer than this;
/// `tests/it/kubernetes.rs` checks the manifests against it.
pub fn longest_graceful_stop(drain_timeout: std::time::Duration) -> std::time::Duration {
    shutdown_deadline(drain_timeout)
        + crate::kafka::timeouts::FINAL_COMMIT_TIMEOUT
        + crate::kafka::timeouts::LEAVE_TIMEOUT
        + admin::ADMIN_SHUTDOWN_GRACE
}

/// Watches the driver thread (its own catch reports a panic of its loop; this catches one
/// anywhere else, closing the consumer included): the panic's text if it ended by one, `None`
/// if it ended normally (it then reported `DriverStopped` itself). Polls instead of joining on
/// a blocking thread, which the runtime would wait for at its shutdown.
async fn driver_panicked(driver: std::thread::JoinHandle<()>) -> Option<String> {
    const EVERY: std::time::Duration = std::time::Duration::from_millis(100);
    while !driver.is_finished() {
        tokio::time::sleep(EVERY).await;
    }
    driver.join().err().map(|panic| {
        format!(
            "the kafka driver thread panicked: {}",
            crate::kafka::driver::panic_text(panic.as_ref())
        )
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// A listener on `addr` and the address it got (port 0 picks one).
fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), StartupError> {
    let error = |source| StartupError::Bind { addr, source };
    let listener = TcpListener::bind(addr).map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    Ok((listener, bound))
}

/// librdkafka names the property it rejects; so do we (never a secret's value).
pub fn kafka_config_error(error: rdkafka::error::KafkaError) -> ConfigError {
    match &error {
        rdkafka::error::KafkaError::ClientConfig(_, message, key, value) => ConfigError::new(
            format!("kafka property {key}"),
            format!(
                "{:?} rejected by librdkafka: {message}",
                crate::config::kafka::shown_value(key, value)
            ),
        ),
        _ => ConfigError::new("kafka properties", error.to_string()),
    }
}

/// A client librdkafka could not create: a TLS file it cannot read is named with what to fix.
fn kafka_creation_error(
    error: rdkafka::error::KafkaError,
    identity: &crate::domain::ClientIdentity,
) -> ConfigError {
    let rdkafka::error::KafkaError::ClientCreation(text) = &error else {
        return kafka_config_error(error);
    };
    match crate::domain::connection::classify_creation(text, identity) {
        Some(cause) => ConfigError::new(
            cause.problem.unreadable_file().map_or_else(
                || "kafka properties".to_owned(),
                |property| format!("kafka property {property}"),
            ),
            format!("{} ({})", cause.message(), cause.detail),
        ),
        None => kafka_config_error(error),
    }
}

/// This machine's host name (for the status page and the Kafka client id).
pub fn hostname() -> String {
    let name = gethostname::gethostname().to_string_lossy().into_owned();
    if name.is_empty() {
        "unknown-host".to_owned()
    } else {
        name
    }
}
