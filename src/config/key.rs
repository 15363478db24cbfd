//! Every setting's names — its flag and its environment variable — in one place: the command
//! line is declared with them and every configuration error names them, so the two can never
//! disagree.

use std::fmt;

/// A setting's flag (without `--`) and environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub long: &'static str,
    pub env: &'static str,
}

impl Key {
    pub const fn new(long: &'static str, env: &'static str) -> Key {
        Key { long, env }
    }
}

impl fmt::Display for Key {
    /// `--flag / HISTORY_FLAG`, as errors name it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--{} / {}", self.long, self.env)
    }
}

pub const LOG: Key = Key::new("log", "HISTORY_LOG");
pub const BROKERS: Key = Key::new("brokers", "HISTORY_KAFKA_BROKERS");
pub const TOPIC: Key = Key::new("topic", "HISTORY_KAFKA_TOPIC");
pub const GROUP: Key = Key::new("group", "HISTORY_KAFKA_GROUP");
pub const GROUP_INSTANCE_ID: Key = Key::new("group-instance-id", "HISTORY_KAFKA_GROUP_INSTANCE_ID");
pub const KAFKA_CONFIG_FILE: Key = Key::new("kafka-config-file", "HISTORY_KAFKA_CONFIG_FILE");
pub const KAFKA_SECURITY_PROTOCOL: Key =
    Key::new("kafka-security-protocol", "HISTORY_KAFKA_SECURITY_PROTOCOL");
pub const KAFKA_SASL_MECHANISM: Key =
    Key::new("kafka-sasl-mechanism", "HISTORY_KAFKA_SASL_MECHANISM");
pub const KAFKA_SASL_USERNAME: Key = Key::new("kafka-sasl-username", "HISTORY_KAFKA_SASL_USERNAME");
pub const KAFKA_SASL_PASSWORD: Key = Key::new("kafka-sasl-password", "HISTORY_KAFKA_SASL_PASSWORD");
pub const KAFKA_SASL_PASSWORD_FILE: Key = Key::new(
    "kafka-sasl-password-file",
    "HISTORY_KAFKA_SASL_PASSWORD_FILE",
);
pub const KAFKA_SSL_CA_FILE: Key = Key::new("kafka-ssl-ca-file", "HISTORY_KAFKA_SSL_CA_FILE");
pub const KAFKA_SSL_CERT_FILE: Key = Key::new("kafka-ssl-cert-file", "HISTORY_KAFKA_SSL_CERT_FILE");
pub const KAFKA_SSL_KEY_FILE: Key = Key::new("kafka-ssl-key-file", "HISTORY_KAFKA_SSL_KEY_FILE");
pub const KAFKA_SSL_KEY_PASSWORD_FILE: Key = Key::new(
    "kafka-ssl-key-password-file",
    "HISTORY_KAFKA_SSL_KEY_PASSWORD_FILE",
);
pub const KAFKA_OAUTH_TOKEN_URL: Key =
    Key::new("kafka-oauth-token-url", "HISTORY_KAFKA_OAUTH_TOKEN_URL");
pub const KAFKA_OAUTH_CLIENT_ID: Key =
    Key::new("kafka-oauth-client-id", "HISTORY_KAFKA_OAUTH_CLIENT_ID");
pub const KAFKA_OAUTH_CLIENT_SECRET: Key = Key::new(
    "kafka-oauth-client-secret",
    "HISTORY_KAFKA_OAUTH_CLIENT_SECRET",
);
pub const KAFKA_OAUTH_CLIENT_SECRET_FILE: Key = Key::new(
    "kafka-oauth-client-secret-file",
    "HISTORY_KAFKA_OAUTH_CLIENT_SECRET_FILE",
);
pub const KAFKA_OAUTH_SCOPE: Key = Key::new("kafka-oauth-scope", "HISTORY_KAFKA_OAUTH_SCOPE");
pub const DATABASE_URL: Key = Key::new("database-url", "HISTORY_DATABASE_URL");
pub const DATABASE_PASSWORD_FILE: Key =
    Key::new("database-password-file", "HISTORY_DATABASE_PASSWORD_FILE");
pub const MAX_UNRESOLVED: Key = Key::new("max-unresolved", "HISTORY_MAX_UNRESOLVED");
pub const RETRY_INITIAL: Key = Key::new("retry-initial", "HISTORY_RETRY_INITIAL");
pub const RETRY_MAX: Key = Key::new("retry-max", "HISTORY_RETRY_MAX");
pub const COMMIT_INTERVAL: Key = Key::new("commit-interval", "HISTORY_COMMIT_INTERVAL");
pub const DRAIN_TIMEOUT: Key = Key::new("drain-timeout", "HISTORY_DRAIN_TIMEOUT");
pub const DB_POOL_SIZE: Key = Key::new("db-pool-size", "HISTORY_DB_POOL_SIZE");
pub const MAX_PAYLOAD_BYTES: Key = Key::new("max-payload-bytes", "HISTORY_MAX_PAYLOAD_BYTES");
pub const MAX_CONSECUTIVE_REJECTIONS: Key = Key::new(
    "max-consecutive-rejections",
    "HISTORY_MAX_CONSECUTIVE_REJECTIONS",
);
pub const OFFSET_RESET_POLICY: Key = Key::new("offset-reset-policy", "HISTORY_OFFSET_RESET_POLICY");
pub const PARTITION_QUEUE: Key = Key::new("partition-queue", "HISTORY_PARTITION_QUEUE");
pub const PARTITION_FETCH_KB: Key = Key::new("partition-fetch-kb", "HISTORY_PARTITION_FETCH_KB");
pub const WORK_TIMEOUT: Key = Key::new("work-timeout", "HISTORY_WORK_TIMEOUT");
pub const BATCH_SIZE: Key = Key::new("batch-size", "HISTORY_BATCH_SIZE");
pub const BATCH_LINGER: Key = Key::new("batch-linger", "HISTORY_BATCH_LINGER");
pub const BATCHES_IN_FLIGHT: Key = Key::new("batches-in-flight", "HISTORY_BATCHES_IN_FLIGHT");
pub const TRANSACTIONS_IN_FLIGHT: Key =
    Key::new("transactions-in-flight", "HISTORY_TRANSACTIONS_IN_FLIGHT");
pub const STUCK_UNKNOWN: Key = Key::new("stuck-unknown", "HISTORY_STUCK_UNKNOWN");
pub const STALL: Key = Key::new("stall", "HISTORY_STALL");

pub const ADMIN_ADDR: Key = Key::new("admin-addr", "HISTORY_ADMIN_ADDR");
pub const METRICS_ADDR: Key = Key::new("metrics-addr", "HISTORY_METRICS_ADDR");
pub const ADMIN_TOKEN: Key = Key::new("admin-token", "HISTORY_ADMIN_TOKEN");
pub const ADMIN_TOKEN_FILE: Key = Key::new("admin-token-file", "HISTORY_ADMIN_TOKEN_FILE");
pub const ADMIN_READ_AUTH: Key = Key::new("admin-read-auth", "HISTORY_ADMIN_READ_AUTH");
pub const ADMIN_SECURE_COOKIE: Key = Key::new("admin-secure-cookie", "HISTORY_ADMIN_SECURE_COOKIE");
pub const ADMIN_TLS_CERT: Key = Key::new("admin-tls-cert", "HISTORY_ADMIN_TLS_CERT");
pub const ADMIN_TLS_KEY: Key = Key::new("admin-tls-key", "HISTORY_ADMIN_TLS_KEY");
pub const ADMIN_SESSION_IDLE: Key = Key::new("admin-session-idle", "HISTORY_ADMIN_SESSION_IDLE");
pub const ADMIN_SESSION_MAX: Key = Key::new("admin-session-max", "HISTORY_ADMIN_SESSION_MAX");
pub const ADMIN_DB_POOL_SIZE: Key = Key::new("admin-db-pool-size", "HISTORY_ADMIN_DB_POOL_SIZE");
pub const ADMIN_STATEMENT_TIMEOUT: Key =
    Key::new("admin-statement-timeout", "HISTORY_ADMIN_STATEMENT_TIMEOUT");
pub const ADMIN_ANONYMOUS_READS_PER_SEC: Key = Key::new(
    "admin-anonymous-reads-per-sec",
    "HISTORY_ADMIN_ANONYMOUS_READS_PER_SEC",
);
pub const ADMIN_PUBLIC_URL: Key = Key::new("admin-public-url", "HISTORY_ADMIN_PUBLIC_URL");

pub const MEMBER_HEARTBEAT: Key = Key::new("member-heartbeat", "HISTORY_MEMBER_HEARTBEAT");
pub const MEMBER_GONE_AFTER: Key = Key::new("member-gone-after", "HISTORY_MEMBER_GONE_AFTER");
pub const MEMBER_FORGET_AFTER: Key = Key::new("member-forget-after", "HISTORY_MEMBER_FORGET_AFTER");
pub const COMMAND_TIMEOUT: Key = Key::new("command-timeout", "HISTORY_COMMAND_TIMEOUT");
