//! Recovery an operator can trust: check the projection against the topic ([`verify`]), and
//! move a consumer group back to a point in time ([`rewind`] for a stopped group; the admin's
//! live rewind goes through the supervisor and the driver thread, see
//! `KafkaRequest::Rewind`), with each rewind in the audit trail ([`audit`]).
//!
//! The pure parts: [`report`] (what verify found), [`progress`] (its bar); the decision where a
//! partition goes is `domain::rewind`. The Kafka reading is `kafka::reader`, run here on
//! blocking threads, never on an actix thread.

pub mod audit;
pub mod progress;
pub mod projection;
pub mod report;
pub mod rewind;
pub mod verify;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::domain::rewind::TimeOffset;
use crate::kafka::reader::{Found, ReaderConfig, ReaderError, TopicReader};

/// The time lookup failed.
#[derive(Debug, thiserror::Error)]
pub enum FindTimeError {
    #[error("could not look up the point in time in the topic")]
    Reader(#[from] ReaderError),
    #[error("the kafka lookup thread ended unexpectedly")]
    Thread(#[source] tokio::task::JoinError),
}

/// Where the first record at or after `at` is in each of `partitions`, found on a blocking
/// thread by a throwaway reader (for the admin's rewind, which must not block its actix thread).
pub async fn find_time(
    config: ReaderConfig,
    partitions: Vec<i32>,
    at: DateTime<Utc>,
) -> Result<BTreeMap<i32, (TimeOffset, Found)>, FindTimeError> {
    tokio::task::spawn_blocking(move || {
        let reader = TopicReader::open(&config)?;
        let partitions = reader.check_partitions(&partitions)?;
        Ok(reader.find_time(&partitions, at)?)
    })
    .await
    .map_err(FindTimeError::Thread)?
}
