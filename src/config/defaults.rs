//! Every default of `run`, in one place: the command line declares them, and the settings a
//! library user or a tool builds without a command line (`RuntimeSettings::default()`,
//! `AdminSettings::default()`) are made of the same values. Durations are written as on the
//! command line (`100ms`, `10s`, `2m`).

pub const BROKERS: &str = "localhost:9092";
pub const TOPIC: &str = "tickets.status.v1";
pub const GROUP: &str = "history";

pub const MAX_UNRESOLVED: usize = 1000;
pub const RETRY_INITIAL: &str = "100ms";
pub const RETRY_MAX: &str = "10s";
pub const COMMIT_INTERVAL: &str = "1s";
pub const DRAIN_TIMEOUT: &str = "5s";
pub const DB_POOL_SIZE: usize = 16;
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;
pub const MAX_CONSECUTIVE_REJECTIONS: u32 = 10;
/// Hold a partition whose position left its log until an operator rewinds it.
pub const OFFSET_RESET_POLICY: &str = "hold";
pub const PARTITION_QUEUE: usize = 1024;
pub const PARTITION_FETCH_KB: usize = 512;
pub const WORK_TIMEOUT: &str = "30s";
pub const BATCH_SIZE: usize = 256;
pub const BATCH_LINGER: &str = "2ms";
pub const BATCHES_IN_FLIGHT: usize = 2;
pub const TRANSACTIONS_IN_FLIGHT: usize = 4;
pub const STUCK_UNKNOWN: &str = "1m";
pub const STALL: &str = "2m";

pub const ADMIN_ADDR: &str = "127.0.0.1:8080";
pub const ADMIN_SESSION_IDLE: &str = "30m";
pub const ADMIN_SESSION_MAX: &str = "12h";
pub const ADMIN_DB_POOL_SIZE: usize = 2;
pub const ADMIN_STATEMENT_TIMEOUT: &str = "2s";
pub const ADMIN_ANONYMOUS_READS_PER_SEC: u32 = 20;

pub const MEMBER_HEARTBEAT: &str = "2s";
pub const MEMBER_GONE_AFTER: &str = "10s";
pub const MEMBER_FORGET_AFTER: &str = "1h";
pub const COMMAND_TIMEOUT: &str = "5s";

/// A default duration as a value (the defaults above are checked by the unit tests to parse).
pub fn duration(text: &str) -> std::time::Duration {
    super::parse_duration(text).expect("a default duration parses")
}
