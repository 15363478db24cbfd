//! The service under test, in process: production's settings except the batch size (and a
//! commit interval short enough not to dominate the timings), and a watch that sees when
//! records were first fetched (status snapshots, until then) and when each partition's
//! committed offset moved (the service's metrics: a snapshot copies every partition's recent
//! outcomes and Unknown backlog, too dear to take a hundred times a second).

use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::BenchError;
use super::measure::CommitTimeline;
use super::probe::CpuSnapshot;
use crate::actors::messages::SampleStatus;
use crate::actors::status::ServiceStatus;
use crate::config::admin::AdminSettings;
use crate::config::{KafkaSettings, RuntimeSettings, Settings};
use crate::error_text::chain;
use crate::startup::{AppHandle, Application, StartupError};

/// How often the watch looks at the service.
const POLL: Duration = Duration::from_millis(10);
/// How long a status snapshot may take before the poll does without it.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the committed offsets may stand still before a phase counts as stalled.
const STALL: Duration = Duration::from_secs(90);
/// How long the service may take to leave the group and stop.
const STOP_DEADLINE: Duration = Duration::from_secs(30);
/// The offset commit interval of the benchmark (production: 1 s): a run's end and each
/// record's commit are seen within this of the watermark moving.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(100);

/// The service's settings for one run: production defaults, `batch_size` records per
/// transaction (with a partition queue that can hold a batch), commits every
/// [`COMMIT_INTERVAL`].
pub fn settings(brokers: &str, topic: &str, database_url: &str, batch_size: usize) -> Settings {
    let defaults = RuntimeSettings::default();
    Settings {
        kafka: KafkaSettings {
            brokers: brokers.to_owned(),
            topic: topic.to_owned(),
            group: format!("bench-{:08x}", rand::random::<u32>()),
            group_instance_id: None,
            // The mock cluster waits session.timeout.ms - 1 s before it completes a rebalance,
            // and answers a fetch that finds no records only after fetch.wait.max.ms, even when
            // records arrive meanwhile (a real broker answers as soon as they do): with the
            // default 500 ms, latency would measure the mock.
            options: vec![
                ("session.timeout.ms".into(), "6000".into()),
                ("heartbeat.interval.ms".into(), "500".into()),
                ("fetch.wait.max.ms".into(), "10".into()),
            ]
            .into(),
        },
        database: database_url.into(),
        admin: AdminSettings {
            addr: ([127, 0, 0, 1], 0).into(),
            ..AdminSettings::default()
        },
        runtime: RuntimeSettings {
            batch_size,
            partition_queue: defaults.partition_queue.max(batch_size),
            commit_interval: COMMIT_INTERVAL,
            drain_timeout: Duration::from_secs(3),
            ..defaults
        },
    }
}

/// The running service.
pub struct Service {
    handle: AppHandle,
    task: JoinHandle<Result<(), StartupError>>,
}

impl Service {
    /// Builds the service (connecting to its database and migrating it) and runs it.
    pub async fn start(settings: Settings) -> Result<Service, BenchError> {
        Ok(Service::run(Service::build(settings).await?))
    }

    /// Builds the service without running it yet.
    pub async fn build(settings: Settings) -> Result<Application, BenchError> {
        Application::build(settings)
            .await
            .map_err(BenchError::Startup)
    }

    /// Runs a built service.
    pub fn run(app: Application) -> Service {
        Service {
            handle: app.handle(),
            task: actix_web::rt::spawn(app.run_until_stopped()),
        }
    }

    /// Where its admin UI listens.
    pub fn admin_addr(&self) -> std::net::SocketAddr {
        self.handle.admin_addr
    }

    /// The service's own pool on its database.
    pub fn pool(&self) -> &Pool {
        &self.handle.pool
    }

    /// The service's snapshot, Unknown backlogs summarised, if it answers in time.
    pub async fn status(&self) -> Option<ServiceStatus> {
        let asked = self.handle.supervisor.send(SampleStatus);
        tokio::time::timeout(STATUS_TIMEOUT, asked).await.ok()?.ok()
    }

    /// Leaves the group gracefully and waits until the service stopped.
    pub async fn stop(self) -> Result<(), BenchError> {
        self.handle.shutdown();
        match tokio::time::timeout(STOP_DEADLINE, self.task).await {
            Err(_) => Err(BenchError::ServiceStopped(format!(
                "it did not stop within {} s",
                STOP_DEADLINE.as_secs()
            ))),
            Ok(Err(error)) => Err(BenchError::ServiceStopped(error.to_string())),
            Ok(Ok(Err(error))) => Err(BenchError::ServiceStopped(chain(&error))),
            Ok(Ok(Ok(()))) => Ok(()),
        }
    }

    fn has_stopped(&self) -> bool {
        self.task.is_finished()
    }

    /// Per partition, the committed offset the service's metrics report
    /// (`history_committed_offset`, set when a commit is acknowledged). Read every
    /// [`POLL`], so it reads that family alone: a gather of the whole registry would charge
    /// the run a read of `/proc` (the process collector) a hundred times a second.
    pub fn committed(&self) -> Vec<(i32, i64)> {
        self.handle.metrics.committed_offsets()
    }
}

/// What the watch saw: the first fetch and every move of the committed offsets.
pub struct Watch {
    pub timeline: CommitTimeline,
    /// When a partition actor was first seen holding a record, and the CPU times then.
    pub first_fetch: Option<(Instant, CpuSnapshot)>,
    /// Whether to look for the first fetch (in status snapshots, until it is seen).
    look_for_fetch: bool,
}

impl Watch {
    pub fn new(partitions: i32) -> Watch {
        Watch {
            timeline: CommitTimeline::new(partitions),
            first_fetch: None,
            look_for_fetch: true,
        }
    }

    /// A watch of the commits only (no status snapshots at all).
    pub fn commits_only(partitions: i32) -> Watch {
        Watch {
            look_for_fetch: false,
            ..Watch::new(partitions)
        }
    }

    /// Polls the service every [`POLL`] until every partition's committed offset reached the
    /// ends `ends()` gives (`None`: not known yet, keep polling); returns the moment it saw
    /// that. Fails when the service stops or the commits stand still for [`STALL`].
    pub async fn until_committed(
        &mut self,
        service: &Service,
        phase: &str,
        ends: impl Fn() -> Option<Vec<i64>>,
    ) -> Result<Instant, BenchError> {
        let mut ticker = tokio::time::interval(POLL);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let (mut progress, mut moved) = (None, Instant::now());
        loop {
            ticker.tick().await;
            if service.has_stopped() {
                return Err(BenchError::ServiceStopped(format!(
                    "it stopped during {phase}"
                )));
            }
            if self.look_for_fetch && self.first_fetch.is_none() {
                self.look_for_first_fetch(service).await;
            }
            let now = Instant::now();
            let mut committed_sum = 0;
            for (partition, committed) in service.committed() {
                self.timeline.observe(now, partition, committed);
                committed_sum += committed;
            }
            if progress != Some(committed_sum) {
                (progress, moved) = (Some(committed_sum), now);
            }
            if let Some(ends) = ends() {
                if self.timeline.reached(&ends) {
                    return Ok(now);
                }
                if moved.elapsed() > STALL {
                    let committed: Vec<Option<i64>> = (0..ends.len() as i32)
                        .map(|p| self.timeline.committed(p))
                        .collect();
                    return Err(BenchError::Stalled {
                        phase: phase.to_owned(),
                        detail: format!(
                            "committed {committed:?} of {ends:?}, unchanged for {} s",
                            STALL.as_secs()
                        ),
                    });
                }
            }
        }
    }

    async fn look_for_first_fetch(&mut self, service: &Service) {
        let Some(status) = service.status().await else {
            return;
        };
        let fetched = status
            .partitions
            .iter()
            .any(|view| view.actor.as_ref().is_some_and(|a| a.last_offset.is_some()));
        if fetched {
            self.first_fetch = Some((Instant::now(), CpuSnapshot::take()));
        }
    }
}
