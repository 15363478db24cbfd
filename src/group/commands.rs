//! Operator actions carried from the member they were asked on to the member that owns the
//! partition, through the shared database: a row of `group_commands` inserted with a
//! `NOTIFY history_group_commands` naming the owner; the owner takes it at most once (an
//! `UPDATE … WHERE taken_at IS NULL AND answered_at IS NULL RETURNING`), carries it out with the
//! same actor messages as its own actions, and writes its answer with a
//! `NOTIFY history_group_answers` naming the command. An asker that waited long enough answers
//! a command nobody took `expired` itself, in the same guarded update, so it can never run late.
//!
//! Every member keeps one connection of its own that LISTENs on both channels ([`Listener`]);
//! both sides also look again every [`POLL`], so a notification lost while that connection
//! was down only delays, never loses, a command or an answer. Carrying a command out belongs to
//! the admin (`admin::routes::routed`); this module is the table and the waiting.

use std::time::Duration;

use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast};

use crate::db::Database;
use crate::error_text::chain;
use crate::inbox::PgInboxError;

/// The channel a new command is announced on (payload: the owner's member id).
pub const COMMANDS_CHANNEL: &str = "history_group_commands";
/// The channel an answer is announced on (payload: the command's id).
pub const ANSWERS_CHANNEL: &str = "history_group_answers";
/// How often both sides look again without a notification.
pub const POLL: Duration = Duration::from_millis(500);
/// How long the listening connection waits before connecting again after it failed.
const RECONNECT: Duration = Duration::from_secs(2);

/// A command as asked.
#[derive(Debug, Clone)]
pub struct NewCommand<'a> {
    pub group: &'a str,
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub owner: &'a str,
    pub action: &'a str,
    pub arguments: serde_json::Value,
    /// Who asked, as the audit trail names them ("api token from 10.0.0.7").
    pub asked_by: &'a str,
    pub asked_from_member: &'a str,
    pub asked_from_address: Option<&'a str>,
}

/// A command as its owner takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub id: i64,
    pub partition: Option<i32>,
    pub action: String,
    pub arguments: serde_json::Value,
    pub asked_by: String,
    pub asked_from_member: String,
    pub asked_from_address: Option<String>,
    /// How long ago it was asked (by the database's clock).
    pub age: Duration,
}

impl Command {
    /// Who asked and where, as the owner's audit trail names them.
    pub fn actor(&self) -> String {
        format!(
            "{} at member {}{}",
            self.asked_by,
            self.asked_from_member,
            self.asked_from_address
                .as_deref()
                .map(|a| format!(" ({a})"))
                .unwrap_or_default()
        )
    }
}

/// What came of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    /// Carried out (the body says what it did).
    Done,
    /// The owner would not (the partition is not its own any more, bad arguments).
    Refused,
    /// The owner tried and failed (its database, the broker).
    Failed,
    /// Nobody took it in time: it will never run.
    Expired,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The owner's answer: what its own API would have answered (status and JSON body), and the
/// same in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub outcome: Outcome,
    pub status: u16,
    pub message: String,
    #[serde(default)]
    pub body: serde_json::Value,
    /// The member that answered.
    pub by: String,
}

/// A command as the asker finds it again.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub id: i64,
    pub partition: Option<i32>,
    pub owner: String,
    pub action: String,
    pub taken: bool,
    pub answer: Option<Answer>,
}

const INSERT: &str = "WITH asked AS (INSERT INTO group_commands (consumer_group, topic, \
       kafka_partition, owner_member_id, action, arguments, asked_by, asked_from_member, \
       asked_from_address) VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7, $8, $9) RETURNING id) \
     SELECT id, pg_notify($10, $4) FROM asked";

/// Inserts a command and announces it to its owner (the notification goes out as the insert
/// commits); its id.
pub async fn insert(pool: &Pool, command: &NewCommand<'_>) -> Result<i64, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(INSERT).await?;
    let row = client
        .query_one(
            &statement,
            &[
                &command.group,
                &command.topic,
                &command.partition,
                &command.owner,
                &command.action,
                &command.arguments.to_string(),
                &command.asked_by,
                &command.asked_from_member,
                &command.asked_from_address,
                &COMMANDS_CHANNEL,
            ],
        )
        .await?;
    Ok(row.get(0))
}

const TAKE: &str = "UPDATE group_commands SET taken_at = now() \
     WHERE id IN (SELECT id FROM group_commands \
       WHERE owner_member_id = $1 AND taken_at IS NULL AND answered_at IS NULL \
       ORDER BY id FOR UPDATE SKIP LOCKED) \
     RETURNING id, kafka_partition, action, arguments::text, asked_by, asked_from_member, \
       asked_from_address, extract(epoch FROM now() - created_at)::float8";

/// Takes the commands waiting for `owner`: each is taken once, by one taker.
pub async fn take(pool: &Pool, owner: &str) -> Result<Vec<Command>, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(TAKE).await?;
    let rows = client.query(&statement, &[&owner]).await?;
    Ok(rows
        .iter()
        .map(|row| Command {
            id: row.get(0),
            partition: row.get(1),
            action: row.get(2),
            arguments: serde_json::from_str(row.get::<_, &str>(3)).unwrap_or_default(),
            asked_by: row.get(4),
            asked_from_member: row.get(5),
            asked_from_address: row.get(6),
            age: Duration::from_secs_f64(row.get::<_, f64>(7).max(0.0)),
        })
        .collect())
}

const ANSWER: &str = "WITH answered AS (UPDATE group_commands SET answered_at = now(), \
       answer = $2::text::jsonb WHERE id = $1 AND answered_at IS NULL RETURNING id) \
     SELECT pg_notify($3, id::text) FROM answered";

/// Writes the owner's answer and announces it.
pub async fn answer_command(pool: &Pool, id: i64, answer: &Answer) -> Result<(), PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(ANSWER).await?;
    let answer = serde_json::to_string(answer).unwrap_or_else(|_| "null".to_owned());
    client
        .query(&statement, &[&id, &answer, &ANSWERS_CHANNEL])
        .await?;
    Ok(())
}

const EXPIRE: &str = "UPDATE group_commands SET answered_at = now(), answer = $2::text::jsonb \
     WHERE id = $1 AND taken_at IS NULL AND answered_at IS NULL RETURNING id";

/// Answers the command `expired` if nobody took it yet; whether it did (then it never runs).
pub async fn expire(pool: &Pool, id: i64, answer: &Answer) -> Result<bool, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(EXPIRE).await?;
    let answer = serde_json::to_string(answer).unwrap_or_else(|_| "null".to_owned());
    Ok(!client.query(&statement, &[&id, &answer]).await?.is_empty())
}

const READ: &str = "SELECT id, kafka_partition, owner_member_id, action, taken_at IS NOT NULL, \
       answer::text FROM group_commands WHERE id = $1 AND consumer_group = $2 AND topic = $3";

/// A command of the group, as it is now.
pub async fn read(
    pool: &Pool,
    id: i64,
    group: &str,
    topic: &str,
) -> Result<Option<Asked>, PgInboxError> {
    let client = pool.get().await.map_err(PgInboxError::Pool)?;
    let statement = client.prepare_cached(READ).await?;
    let row = client.query_opt(&statement, &[&id, &group, &topic]).await?;
    Ok(row.map(|row| Asked {
        id: row.get(0),
        partition: row.get(1),
        owner: row.get(2),
        action: row.get(3),
        taken: row.get(4),
        answer: row
            .get::<_, Option<&str>>(5)
            .and_then(|a| serde_json::from_str(a).ok()),
    }))
}

/// The member's listening connection, as the two sides wait on it.
pub struct Listener {
    /// Wakes the owner's loop: a command for this member was announced.
    pub commands: Notify,
    /// The ids of answered commands.
    pub answers: broadcast::Sender<i64>,
}

impl Default for Listener {
    fn default() -> Self {
        Listener {
            commands: Notify::new(),
            answers: broadcast::channel(256).0,
        }
    }
}

impl Listener {
    /// LISTENs on both channels for `member_id` until `stop`, connecting again after a failure
    /// (logged once per outage).
    pub async fn run(
        &self,
        database: &Database,
        member_id: &str,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut failing = false;
        loop {
            if *stop.borrow() {
                return;
            }
            let listened = async {
                let (client, mut notifications) = database.connect_listening().await?;
                client
                    .batch_execute(&format!(
                        "LISTEN {COMMANDS_CHANNEL}; LISTEN {ANSWERS_CHANNEL}"
                    ))
                    .await?;
                if failing {
                    tracing::info!("listening for routed commands again");
                    failing = false;
                }
                // Commands announced while nobody listened.
                self.commands.notify_one();
                while let Some(notification) = notifications.recv().await {
                    match notification.channel() {
                        COMMANDS_CHANNEL if notification.payload() == member_id => {
                            self.commands.notify_one()
                        }
                        ANSWERS_CHANNEL => {
                            if let Ok(id) = notification.payload().parse::<i64>() {
                                let _ = self.answers.send(id);
                            }
                        }
                        _ => {}
                    }
                }
                drop(client);
                Ok::<(), tokio_postgres::Error>(())
            };
            let outcome = tokio::select! {
                outcome = listened => outcome,
                _ = stop.changed() => return,
            };
            if !failing {
                match outcome {
                    Ok(()) => tracing::warn!(
                        "the connection listening for routed commands closed; commands are \
                         looked for every {} ms until it is back",
                        POLL.as_millis()
                    ),
                    Err(error) => tracing::warn!(
                        error = %chain(&error),
                        "cannot listen for routed commands; commands are looked for every {} ms \
                         until it works",
                        POLL.as_millis()
                    ),
                }
                failing = true;
            }
            tokio::select! {
                _ = tokio::time::sleep(RECONNECT) => {}
                _ = stop.changed() => return,
            }
        }
    }
}
