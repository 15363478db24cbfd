//! What the broker says about a partition's offsets.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// One partition's offsets from librdkafka statistics (`-1` when unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ObservedOffsets {
    pub partition: i32,
    /// The high watermark: the offset the next produced record will get.
    pub high_watermark: i64,
    /// The last stable offset (read_committed consumers stop there).
    pub last_stable: i64,
    /// The committed offset as the broker knows it.
    pub committed: i64,
    /// When librdkafka reported them (its statistics come once a second).
    pub observed_at: DateTime<Utc>,
}
