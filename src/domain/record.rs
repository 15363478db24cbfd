//! A Kafka record as the service works with it: copied out of the client library, no I/O.

use chrono::{DateTime, Utc};

/// A record of the partition, copied out of librdkafka by the driver thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    /// The record's Kafka timestamp.
    pub timestamp: Option<DateTime<Utc>>,
}
