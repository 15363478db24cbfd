//! How long the Kafka side waits for an answer, each wait named once: the driver thread's
//! requests to librdkafka and the group coordinator, the connection probe, and the reader's
//! and the group view's queries. A wait that runs out is reported, never waited out forever.

use std::time::Duration;

/// How long a revoke waits for the commit in flight and then for the final commit (a live
/// rewind waits as long for the commit in flight before it commits the rewound offsets).
pub const FINAL_COMMIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long asking the group coordinator for committed offsets at an assignment may take.
pub const START_OFFSETS_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a member that gave up its partitions waits for librdkafka to leave the group
/// before the consumer is closed anyway.
pub const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a seek may take (it is carried out by librdkafka's own threads).
pub const SEEK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long asking the group coordinator for committed offsets during a live rewind may take.
pub const COMMITTED_TIMEOUT: Duration = Duration::from_secs(10);
/// How long asking a partition's leader for its log's bounds may take.
pub const WATERMARKS_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the connection probe's handshake of our own may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Metadata, offset and group queries of the reader and of the group view.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(15);
