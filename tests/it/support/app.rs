//! Running the service in process (inside the test's actix system) against a test database
//! and a test broker.

use std::time::Duration;

use history_consumer::actors::messages::GetStatus;
use history_consumer::actors::status::{PartitionView, ServiceStatus};
use history_consumer::config::admin::AdminSettings;
use history_consumer::config::{KafkaSettings, RuntimeSettings, Settings};
use history_consumer::startup::{AppHandle, Application};

use crate::support::helpers::{TestDb, unique_name, wait_for};
use crate::support::kafka::{Broker, TestKafka, wait_committed};

/// The admin token of every test instance.
pub const ADMIN_TOKEN: &str = "test-admin-token";

pub struct TestApp {
    pub handle: AppHandle,
    pub group: String,
    pub stopped: tokio::task::JoinHandle<Result<(), String>>,
}

/// Settings for tests: short session timeout (the mock waits that long to rebalance; tansu
/// takes that long to notice a dead member), fast commits and retries.
pub fn test_settings(db_url: &str, kafka: &TestKafka, group: &str) -> Settings {
    Settings {
        kafka: KafkaSettings {
            brokers: kafka.brokers.clone(),
            topic: kafka.topic.clone(),
            group: group.to_owned(),
            group_instance_id: None,
            options: [
                ("session.timeout.ms".into(), "6000".into()),
                ("heartbeat.interval.ms".into(), "500".into()),
            ]
            .into_iter()
            .chain(kafka.options.iter().cloned())
            .collect::<Vec<_>>()
            .into(),
        },
        database: db_url.into(),
        admin: AdminSettings {
            addr: "127.0.0.1:0".parse().unwrap(),
            token: Some(ADMIN_TOKEN.into()),
            // Tests poll the API far faster than a person would; one test checks the limit.
            anonymous_reads_per_sec: 0,
            ..AdminSettings::default()
        },
        runtime: RuntimeSettings {
            commit_interval: Duration::from_millis(100),
            drain_timeout: Duration::from_secs(3),
            retry: history_consumer::backoff::Backoff::new(
                Duration::from_millis(50),
                Duration::from_millis(500),
            ),
            ..RuntimeSettings::default()
        },
    }
}

pub async fn spawn_app_with(settings: Settings) -> TestApp {
    let group = settings.kafka.group.clone();
    let app = Application::build(settings)
        .await
        .expect("the service starts");
    let handle = app.handle();
    let stopped =
        actix_web::rt::spawn(
            async move { app.run_until_stopped().await.map_err(|e| e.to_string()) },
        );
    TestApp {
        handle,
        group,
        stopped,
    }
}

pub async fn spawn_app(db: &TestDb, kafka: &TestKafka) -> TestApp {
    spawn_app_with(test_settings(&db.url, kafka, &unique_name("group"))).await
}

impl TestApp {
    pub async fn status(&self) -> ServiceStatus {
        self.handle
            .supervisor
            .send(GetStatus)
            .await
            .expect("status")
    }

    pub async fn partition(&self, partition: i32) -> Option<PartitionView> {
        self.status()
            .await
            .partitions
            .into_iter()
            .find(|p| p.partition == partition)
    }

    /// Duplicates of `cause` counted over every partition this instance owns.
    pub async fn duplicates(&self, cause: history_consumer::domain::DuplicateCause) -> u64 {
        self.status()
            .await
            .partitions
            .iter()
            .filter_map(|p| p.actor.as_ref())
            .map(|a| a.counts.duplicates_of(cause))
            .sum()
    }

    /// Applies an operator action to a partition this instance owns.
    pub async fn operator(
        &self,
        partition: i32,
        action: history_consumer::actors::messages::PartitionAction,
    ) {
        self.handle
            .supervisor
            .send(history_consumer::actors::messages::PartitionCommand { partition, action })
            .await
            .expect("the supervisor answers")
            .expect("the partition is owned");
    }

    /// Waits until this instance owns `count` partitions (long enough for a group join on
    /// either broker).
    pub async fn wait_assigned(&self, count: usize) {
        wait_for(
            Broker::Tansu.join_deadline(),
            "partitions to be assigned",
            || async { (self.status().await.partitions.len() == count).then_some(()) },
        )
        .await;
    }

    /// Waits until the broker has `ends` committed for the group.
    pub async fn wait_committed(&self, kafka: &TestKafka, ends: &[i64]) {
        wait_committed(kafka, &self.group, ends, Duration::from_secs(60)).await;
    }

    /// Leaves the group gracefully and waits for the service to stop.
    pub async fn shutdown(self) {
        self.handle.shutdown();
        let result = tokio::time::timeout(Duration::from_secs(30), self.stopped)
            .await
            .expect("the service stops in time")
            .expect("the service task");
        result.expect("a clean stop");
    }
}
