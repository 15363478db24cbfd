//! `history-consumer demo`: the whole product on one machine with nothing running — an
//! embedded Kafka, a throwaway PostgreSQL, the consumer with its admin UI, and traffic with
//! republished duplicates, malformed records and scripted database outages.
//!
//! Everything runs on the actix system thread (the mock cluster is not `Send`); blocking work
//! (starting and stopping PostgreSQL, dropping the producer) goes to `spawn_blocking`.

mod database;
mod hiccup;
pub(crate) mod kafka;
mod load;
mod report;
mod story;
pub mod traffic;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::actors::messages::GetStatus;
use crate::actors::status::ServiceStatus;
use crate::backoff::Backoff;
use crate::config::admin::AdminSettings;
use crate::config::database::DatabaseSettings;
use crate::config::{KafkaSettings, RuntimeSettings, Settings};
use crate::error_text::chain;
use crate::startup::{AppHandle, Application, StartupError};
use crate::tools::args::DemoArgs;
use crate::tools::pg_cluster::{ClusterError, TempCluster};

use self::database::Database;
use self::kafka::{EmbeddedKafka, PARTITIONS, Publisher, TOPIC};
use self::report::{Progress, Summary};
use self::traffic::{Generator, Mix};

/// Tickets the traffic moves through their workflow.
const TICKETS: usize = 500;
/// How often a progress line is printed.
const REPORT_EVERY: Duration = Duration::from_secs(5);
/// How long the end waits for every Unknown to resolve and every record to be committed.
const SETTLE_DEADLINE: Duration = Duration::from_secs(60);
/// How long the service may take to leave the group and stop.
const STOP_DEADLINE: Duration = Duration::from_secs(30);
/// How long a status snapshot may take before the demo does without it.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// The demo could not start or ended in trouble.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(
        "cannot listen on {addr} for the admin UI (choose another address with --admin-addr, \
         e.g. --admin-addr 127.0.0.1:0 for any free port)"
    )]
    AdminAddr {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the embedded kafka failed")]
    Kafka(#[source] rdkafka::error::KafkaError),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("database query failed")]
    Query(#[source] tokio_postgres::Error),
    #[error("no database connection")]
    Pool(#[source] deadpool_postgres::PoolError),
    #[error("database query failed")]
    Inbox(#[source] crate::inbox::PgInboxError),
    #[error(transparent)]
    Startup(StartupError),
    #[error("the embedded kafka did not take {0}")]
    Publish(String),
    #[error("the consumer did not store the story's two events within {0} s")]
    StoryTimeout(u64),
    #[error("the consumer stopped: {0}")]
    ServiceStopped(String),
    #[error("cannot listen for Ctrl-C")]
    Signal(#[source] std::io::Error),
    #[error("a demo task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// Why the demo is ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `--duration` is over.
    Finished,
    /// Ctrl-C: the service drains and leaves the group by itself.
    Interrupted,
    /// The service stopped (SIGTERM, or a fatal consumer error).
    ServiceStopped,
}

/// Runs the demo until `--duration` is over or Ctrl-C.
pub async fn run(args: DemoArgs) -> Result<(), DemoError> {
    check_admin_addr(args.admin_addr)?;
    let kafka = EmbeddedKafka::start().map_err(DemoError::Kafka)?;
    let mut database = Database::prepare(
        args.database_url.clone(),
        args.database_password_file.as_deref(),
    )
    .await?;
    let token = format!("{:032x}", rand::random::<u128>());
    let settings = demo_settings(
        &kafka.brokers,
        database.settings.clone(),
        args.admin_addr,
        &token,
    );
    let app = Application::build(settings)
        .await
        .map_err(|error| match error {
            StartupError::Bind { addr, source } => DemoError::AdminAddr { addr, source },
            other => DemoError::Startup(other),
        })?;
    let handle = app.handle();
    let service = Service::spawn(app);
    print_banner(&args, &kafka, &database, &handle, &token);
    let publisher = Publisher::new(kafka.producer().map_err(DemoError::Kafka)?);
    let interrupt = signal(SignalKind::interrupt()).map_err(DemoError::Signal)?;
    let mut demo = Demo {
        args,
        handle,
        service,
        publisher,
        interrupt,
        run_id: format!("{:08x}", rand::random::<u32>()),
        started: Instant::now(),
        last_progress: Progress::default(),
    };
    let outcome = demo.play(&mut database).await;
    if outcome.is_err() {
        demo.handle.shutdown();
        let _ = tokio::time::timeout(STOP_DEADLINE, demo.service.finished()).await;
    }
    demo.publisher.close().await;
    if let Some(cluster) = database.cluster.take() {
        // Stops the server and removes its data directory.
        let _ = tokio::task::spawn_blocking(move || drop(cluster)).await;
    }
    drop(kafka);
    outcome
}

/// Fails early, before anything starts, when the admin address is taken.
fn check_admin_addr(addr: SocketAddr) -> Result<(), DemoError> {
    TcpListener::bind(addr)
        .map(drop)
        .map_err(|source| DemoError::AdminAddr { addr, source })
}

/// The service's settings for the demo.
fn demo_settings(
    brokers: &str,
    database: DatabaseSettings,
    admin_addr: SocketAddr,
    token: &str,
) -> Settings {
    Settings {
        kafka: KafkaSettings {
            brokers: brokers.to_owned(),
            topic: TOPIC.to_owned(),
            group: "history-demo".to_owned(),
            group_instance_id: None,
            // The mock cluster waits session.timeout.ms - 1 s before it completes a rebalance.
            options: vec![
                ("session.timeout.ms".into(), "6000".into()),
                ("heartbeat.interval.ms".into(), "500".into()),
            ]
            .into(),
        },
        database,
        admin: AdminSettings {
            addr: admin_addr,
            token: Some(token.into()),
            ..AdminSettings::default()
        },
        runtime: RuntimeSettings {
            commit_interval: Duration::from_millis(500),
            drain_timeout: Duration::from_secs(3),
            // Short retries, so that an outage visibly heals within seconds of its end.
            retry: Backoff::new(Duration::from_millis(100), Duration::from_secs(2)),
            ..RuntimeSettings::default()
        },
    }
}

fn print_banner(
    args: &DemoArgs,
    kafka: &EmbeddedKafka,
    database: &Database,
    app: &AppHandle,
    token: &str,
) {
    println!("history-consumer demo: the whole product on this machine");
    println!(
        "  kafka        embedded (librdkafka mock cluster) at {}; topic {TOPIC}, {PARTITIONS} \
         partitions",
        kafka.brokers
    );
    match &database.cluster {
        Some(cluster) => println!(
            "  postgresql   throwaway cluster on 127.0.0.1:{}, data in {} (removed at exit)",
            cluster.port(),
            cluster.dir().display()
        ),
        None => println!("  postgresql   the database of --database-url"),
    }
    println!(
        "  admin UI     http://{}/   (JSON: /api/status, Prometheus: /metrics)",
        app.admin_addr
    );
    println!("  admin token  {token}   (sign in with it to retry, pause and resume partitions)");
    let mix = Mix::default();
    println!(
        "  traffic      {} events/s over {TICKETS} tickets, ~{:.0}% republished, ~{:.0}% \
         malformed",
        args.rate,
        mix.republish * 100.0,
        mix.malformed * 100.0
    );
    let hiccups = match (
        &database.cluster,
        hiccup::Schedule::every(args.hiccup_every),
    ) {
        (None, _) => "none (the demo does not own the database)".to_owned(),
        (Some(_), None) => "none (--hiccup-every 0s)".to_owned(),
        (Some(_), Some(s)) => format!(
            "PostgreSQL stops for {} s at {} s of traffic, then every {} s",
            hiccup::OUTAGE.as_secs(),
            s.start_of(0).as_secs(),
            (s.start_of(1) - s.start_of(0)).as_secs()
        ),
    };
    println!("  hiccups      {hiccups}");
    println!("  logs         errors only on stderr; `--log info` shows the service's own log");
    match args.duration {
        Some(duration) => println!(
            "  ends         after {}, or on Ctrl-C",
            humantime::format_duration(duration)
        ),
        None => println!("  ends         on Ctrl-C"),
    }
    println!();
}

/// The running service task; remembers how it ended.
struct Service {
    task: Option<JoinHandle<Result<(), StartupError>>>,
    outcome: Option<Result<(), String>>,
}

impl Service {
    fn spawn(app: Application) -> Service {
        Service {
            task: Some(actix_web::rt::spawn(app.run_until_stopped())),
            outcome: None,
        }
    }

    /// Waits until the service stopped. Cancel-safe: it can lose a `select!` and be awaited
    /// again.
    async fn finished(&mut self) {
        if let Some(task) = self.task.as_mut() {
            let result = task.await;
            self.task = None;
            self.outcome = Some(match result {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(chain(&error)),
                Err(error) => Err(error.to_string()),
            });
        }
    }
}

/// The demo's running state.
struct Demo {
    args: DemoArgs,
    handle: AppHandle,
    service: Service,
    publisher: Publisher,
    interrupt: Signal,
    run_id: String,
    started: Instant,
    last_progress: Progress,
}

impl Demo {
    /// The story, the traffic, the end; then the summary.
    async fn play(&mut self, database: &mut Database) -> Result<(), DemoError> {
        let ending = tokio::select! {
            played = story::play(&self.publisher, &self.handle) => played.map(|()| None)?,
            ending = interruption(&mut self.interrupt, &mut self.service) => Some(ending),
        };
        let (ending, outages) = match ending {
            Some(ending) => (ending, None),
            None => self.traffic(database.cluster.take()).await,
        };
        let (hiccups, outage_error) = match outages {
            Some(outages) => {
                database.cluster = Some(outages.cluster);
                (outages.count, outages.error)
            }
            None => (0, None),
        };
        let status = self.wind_down(ending).await;
        self.handle.shutdown();
        let stopped = tokio::time::timeout(STOP_DEADLINE, self.service.finished())
            .await
            .is_ok();
        let summary = self
            .summary(status, hiccups, ending != Ending::Finished)
            .await?;
        println!("{summary}");
        if !stopped {
            return Err(DemoError::ServiceStopped(format!(
                "it did not stop within {} s",
                STOP_DEADLINE.as_secs()
            )));
        }
        if let Some(Err(error)) = self.service.outcome.take() {
            return Err(DemoError::ServiceStopped(error));
        }
        outage_error.map_or(Ok(()), |error| Err(error.into()))
    }

    /// Realistic traffic (and outages, with a cluster of our own) until the end; returns why
    /// it ended and the cluster back from the outage task.
    async fn traffic(&mut self, cluster: Option<TempCluster>) -> (Ending, Option<hiccup::Outages>) {
        println!("2. Traffic: many tickets, republished duplicates, malformed records");
        let (stop, stopped) = watch::channel(false);
        let generator =
            Generator::new(StdRng::from_os_rng(), &self.run_id, TICKETS, Mix::default());
        let load = actix_web::rt::spawn(load::run(
            self.publisher.clone(),
            generator,
            self.args.rate,
            stopped.clone(),
        ));
        let schedule = hiccup::Schedule::every(self.args.hiccup_every);
        let (idle, outages) = match (cluster, schedule) {
            (Some(cluster), Some(schedule)) => {
                let run = hiccup::run(cluster, schedule, Instant::now(), stopped);
                (None, Some(actix_web::rt::spawn(run)))
            }
            (cluster, _) => (cluster, None),
        };
        let ending = self.report_until_the_end().await;
        let _ = stop.send(true);
        if let Err(error) = load.await {
            tracing::error!(error = %error, "the demo traffic task failed");
        }
        let outages = match outages {
            Some(task) => Some(
                task.await
                    .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic())),
            ),
            None => idle.map(|cluster| hiccup::Outages {
                cluster,
                count: 0,
                error: None,
            }),
        };
        (ending, outages)
    }

    /// Prints a progress line every few seconds until the duration is over, Ctrl-C, or the
    /// service stops.
    async fn report_until_the_end(&mut self) -> Ending {
        let deadline = self.args.duration.map(|d| self.started + d);
        let mut ticker =
            tokio::time::interval_at((Instant::now() + REPORT_EVERY).into(), REPORT_EVERY);
        let mut previous = (Instant::now(), 0, 0);
        loop {
            tokio::select! {
                _ = ticker.tick() => previous = self.report(previous).await,
                _ = until(deadline) => return Ending::Finished,
                ending = interruption(&mut self.interrupt, &mut self.service) => return ending,
            }
        }
    }

    /// Prints one progress line; returns the totals the next line's rates start from.
    async fn report(&mut self, (at, sent, resolved): (Instant, u64, u64)) -> (Instant, u64, u64) {
        let Some(status) = status(&self.handle).await else {
            return (at, sent, resolved);
        };
        let progress = Progress::of(&status);
        let now = (
            Instant::now(),
            self.publisher.sent().tally.total(),
            progress.resolved(),
        );
        println!(
            "{}",
            report::progress_line(
                self.started.elapsed(),
                now.0 - at,
                (sent, now.1),
                (resolved, now.2),
                &progress
            )
        );
        self.last_progress = progress;
        now
    }

    /// After the traffic stopped: with the duration over, waits until the consumer processed
    /// everything; after Ctrl-C, takes what there is. Returns the last status seen.
    async fn wind_down(&mut self, ending: Ending) -> Option<ServiceStatus> {
        if ending != Ending::Finished {
            println!(
                "3. Interrupted: the consumer drains its partitions and leaves the group; \
                 records not yet resolved stay uncommitted and are replayed on the next start"
            );
            return status(&self.handle).await;
        }
        println!(
            "3. Traffic stopped; waiting (at most {} s) until every Unknown resolved and every \
             record is committed",
            SETTLE_DEADLINE.as_secs()
        );
        let ends = self.publisher.sent().ends;
        let began = Instant::now();
        let settled = tokio::select! {
            settled = settle(&self.handle, &ends) => settled,
            _ = interruption(&mut self.interrupt, &mut self.service) => None,
        };
        match settled {
            Some(status) => {
                let committed: Vec<String> =
                    ends.iter().map(|(p, end)| format!("{p}:{end}")).collect();
                println!(
                    "   done after {:.1} s: no Unknown left; committed offsets (partition:offset) {}",
                    began.elapsed().as_secs_f64(),
                    committed.join(" ")
                );
                Some(status)
            }
            None => {
                let last = status(&self.handle).await;
                println!("   not settled; the summary shows where it stands");
                for line in last.iter().flat_map(|s| report::unsettled(s, &ends)) {
                    println!("   {line}");
                }
                last
            }
        }
    }

    async fn summary(
        &mut self,
        status: Option<ServiceStatus>,
        hiccups: u32,
        interrupted: bool,
    ) -> Result<Summary, DemoError> {
        // A draining service may already have stopped its partition actors: then the last
        // progress line knows more.
        let progress = status
            .as_ref()
            .map(Progress::of)
            .filter(|p| p.resolved() >= self.last_progress.resolved())
            .unwrap_or_else(|| self.last_progress.clone());
        let ids = story::event_ids();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let prefix = traffic::event_id_prefix(&self.run_id);
        let rows = database::count_rows(&self.handle.pool, Some(&prefix), &ids).await?;
        Ok(Summary {
            sent: self.publisher.sent().tally,
            rows,
            progress,
            hiccups,
            interrupted,
        })
    }
}

/// Polls until everything produced is committed with no Unknown left (`None` after
/// [`SETTLE_DEADLINE`]).
async fn settle(app: &AppHandle, ends: &BTreeMap<i32, i64>) -> Option<ServiceStatus> {
    let deadline = Instant::now() + SETTLE_DEADLINE;
    while Instant::now() < deadline {
        if let Some(status) = status(app).await {
            if report::settled(&status, ends) {
                return Some(status);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

/// The service's snapshot, if it answers in time.
async fn status(app: &AppHandle) -> Option<ServiceStatus> {
    let asked = app.supervisor.send(GetStatus);
    tokio::time::timeout(STATUS_TIMEOUT, asked).await.ok()?.ok()
}

/// Resolves on Ctrl-C or when the service stopped by itself.
async fn interruption(interrupt: &mut Signal, service: &mut Service) -> Ending {
    tokio::select! {
        _ = interrupt.recv() => Ending::Interrupted,
        _ = service.finished() => Ending::ServiceStopped,
    }
}

/// Resolves at `deadline`, never without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
