//! The service as the real release-built binary started from outside, as an operator would:
//! one member of a group, killed or stopped by signals.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::helpers::{
    TestDb, free_port, killed_when_the_spawning_thread_ends, unique_name, wait_for,
};
use crate::support::kafka::TestKafka;

/// A running `history-consumer run` process.
pub struct ServiceProcess {
    child: Child,
    pub admin: String,
    pub log: PathBuf,
}

impl ServiceProcess {
    /// Starts a member on the test's thread; it dies with that thread at the latest.
    pub fn spawn(db: &TestDb, kafka: &TestKafka, group: &str) -> ServiceProcess {
        ServiceProcess::spawn_with_options(db, kafka, group, &kafka.options)
    }

    /// The same, with the librdkafka properties `options` (`--kafka-option`s) instead of the
    /// broker's own (a wrong certificate authority or password, say).
    pub fn spawn_with_options(
        db: &TestDb,
        kafka: &TestKafka,
        group: &str,
        options: &[(String, String)],
    ) -> ServiceProcess {
        let args: Vec<String> = options
            .iter()
            .flat_map(|(key, value)| ["--kafka-option".to_owned(), format!("{key}={value}")])
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ServiceProcess::spawn_with(&db.url, &kafka.brokers, &kafka.topic, group, &args)
    }

    /// Starts a member with `extra` arguments after the usual ones (they win over them).
    pub fn spawn_with(
        database_url: &str,
        brokers: &str,
        topic: &str,
        group: &str,
        extra: &[&str],
    ) -> ServiceProcess {
        ServiceProcess::spawn_with_env(database_url, brokers, topic, group, extra, &[])
    }

    /// The same, with environment variables `env` set for the process.
    pub fn spawn_with_env(
        database_url: &str,
        brokers: &str,
        topic: &str,
        group: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> ServiceProcess {
        let admin = format!("127.0.0.1:{}", free_port());
        let log = std::env::temp_dir().join(format!("{}.log", unique_name("history-consumer")));
        let file = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_history-consumer"));
        killed_when_the_spawning_thread_ends(&mut command);
        let child = command
            .arg("run")
            // No --brokers: from the Kafka config file among `extra`, say.
            .args(
                ["--brokers", brokers]
                    .iter()
                    .filter(|_| !brokers.is_empty()),
            )
            .args(["--topic", topic, "--group", group])
            .args(["--database-url", database_url, "--admin-addr", &admin])
            .args(["--kafka-option", "session.timeout.ms=6000"])
            .args(["--kafka-option", "heartbeat.interval.ms=500"])
            .args(["--commit-interval", "100ms", "--drain-timeout", "3s"])
            .args(extra)
            .env("HISTORY_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start the binary");
        ServiceProcess { child, admin, log }
    }

    pub fn kill_9(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }

    pub fn sigterm(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
    }

    /// Waits for the process to exit; its exit code.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let log = self.log.clone();
        let status = wait_for(timeout, "the process to exit", || {
            let status = self.child.try_wait().unwrap();
            async move { status }
        })
        .await;
        if !status.success() {
            eprintln!("{}", std::fs::read_to_string(log).unwrap_or_default());
        }
        status.code()
    }

    /// `GET path` on the admin server: the JSON body, if it answered 200.
    pub async fn get_json(&self, path: &str) -> Option<serde_json::Value> {
        let response = reqwest::get(format!("http://{}{path}", self.admin))
            .await
            .ok()?;
        if response.status() != reqwest::StatusCode::OK {
            return None;
        }
        serde_json::from_str(&response.text().await.ok()?).ok()
    }

    pub async fn owned_partitions(&self) -> usize {
        self.get_json("/api/status")
            .await
            .and_then(|s| s["partitions"].as_array().map(Vec::len))
            .unwrap_or(0)
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
