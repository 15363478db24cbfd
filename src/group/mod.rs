//! The consumer group as one: what each member publishes about itself to the database the
//! members share, and what any member reads back to show the whole group. Kafka assigns the
//! partitions; nothing here coordinates them. Members share state only through the service's
//! own PostgreSQL.
//!
//! Layout: [`identity`] (who this member is to the others), [`members`] (the rows and their
//! SQL), [`publisher`] (the heartbeat), [`probe`] (the group as Kafka tells it, cached),
//! [`status`] (a partition's status judged over a window, Burrow's way), [`view`] (all of it
//! on one page).

pub mod commands;
pub mod identity;
pub mod members;
pub mod probe;
pub mod publisher;
pub mod status;
pub mod view;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::Addr;
use deadpool_postgres::Pool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use identity::MemberIdentity;

use crate::actors::Monitor;
use crate::config::Settings;
use crate::config::members::MemberSettings;
use crate::db::Database;
use crate::inbox::PgInboxError;
use probe::{KafkaProbe, ProbeConfig};
use view::GroupView;

/// The newest offset resets the group view counts (a topic with more has bigger problems).
const RESETS_SHOWN: i64 = 1000;

/// How long a stopping member waits for its heartbeat task to record the leave.
const STOP_WAIT: Duration = Duration::from_secs(3);

/// This member of the group: its identity, and its heartbeat once started.
pub struct GroupMember {
    pub member: Arc<MemberIdentity>,
    pub settings: MemberSettings,
    /// The consumer's pool: a heartbeat must not wait behind page loads.
    pool: Pool,
    /// For the connection of its own that listens for commands.
    database: Database,
    /// The group as Kafka tells it.
    probe: KafkaProbe,
    /// The member's listening connection (routed commands and their answers).
    pub listener: Arc<commands::Listener>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl GroupMember {
    /// The member a service of `settings` is, on `host` with the Kafka client id `client_id`,
    /// its admin listening on `admin_addr` (over HTTPS when `https`).
    pub fn of_service(
        settings: &Settings,
        database: &Database,
        pool: &Pool,
        (host, client_id): (&str, &str),
        admin_addr: SocketAddr,
        https: bool,
    ) -> GroupMember {
        let members = settings.admin.members.clone();
        let url = identity::admin_url(members.public_url.as_deref(), admin_addr, host, https);
        let member = MemberIdentity::new(
            &settings.kafka.group,
            &settings.kafka.topic,
            host,
            client_id,
            url,
        );
        let probe = ProbeConfig {
            connection: settings.kafka.connection(),
            topic: settings.kafka.topic.clone(),
            group: settings.kafka.group.clone(),
        };
        GroupMember::new(member, members, probe, pool.clone(), database.clone())
    }

    pub fn new(
        member: MemberIdentity,
        settings: MemberSettings,
        probe: ProbeConfig,
        pool: Pool,
        database: Database,
    ) -> GroupMember {
        GroupMember {
            member: Arc::new(member),
            settings,
            pool,
            database,
            probe: KafkaProbe::new(probe),
            listener: Arc::new(commands::Listener::default()),
            stop: watch::channel(false).0,
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The connection settings of the shared database.
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// The consumer's pool, as the group's own writes use it.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The whole group: the members' rows read through `pool`, and Kafka's side (at most a
    /// couple of seconds old).
    pub async fn view(&self, pool: &Pool) -> Result<GroupView, PgInboxError> {
        let rows = members::read(pool, &self.member.group, &self.member.topic).await?;
        // Partitions a live member reports its lag in seconds for need no look-up.
        let reported: BTreeSet<i32> = rows
            .iter()
            .filter(|m| m.alive(self.settings.gone_after))
            .flat_map(|m| m.partitions.iter())
            .filter(|p| p.lag_seconds.is_some())
            .map(|p| p.partition)
            .collect();
        let kafka = self.probe.read(&reported).await;
        let mut view = view::build(&view::Inputs {
            self_id: &self.member.id,
            group: &self.member.group,
            topic: &self.member.topic,
            members: &rows,
            kafka: &kafka,
            gone_after: self.settings.gone_after,
        });
        // The gaps offset resets left (issue 21): shown beside each partition, so that a
        // partition read on past a reset is not taken for one that lost nothing.
        match crate::inbox::offset_resets::list_from(pool, &self.member.topic, None, RESETS_SHOWN)
            .await
        {
            Ok(resets) => view::PartitionRow::count_resets(&mut view.partitions, &resets),
            Err(error) => view.notes.push(format!(
                "the offset resets on record could not be read: {error}"
            )),
        }
        Ok(view)
    }

    /// Starts the heartbeat (publishing what `monitor` sees). Must run inside the runtime.
    pub fn start(&self, monitor: Addr<Monitor>) {
        let publisher = publisher::Publisher {
            pool: self.pool.clone(),
            monitor,
            member: self.member.clone(),
            settings: self.settings.clone(),
        };
        let stop = self.stop.subscribe();
        self.spawn(publisher.run(stop));
        let listener = self.listener.clone();
        let database = self.database.clone();
        let id = self.member.id.clone();
        let stop = self.stop.subscribe();
        self.spawn(async move { listener.run(&database, &id, stop).await });
    }

    /// Runs `task` until the member stops.
    pub fn spawn(&self, task: impl std::future::Future<Output = ()> + 'static) {
        let handle = actix::spawn(task);
        self.tasks.lock().expect("group tasks lock").push(handle);
    }

    /// A receiver that turns true when the member stops.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Stops the heartbeat (recording the graceful leave) and the other tasks.
    pub async fn stop(&self) {
        self.stop.send_replace(true);
        let tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *self.tasks.lock().expect("group tasks lock"));
        for task in tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(STOP_WAIT, task).await.is_err() {
                abort.abort();
            }
        }
    }
}
