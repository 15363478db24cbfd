//! history-consumer: consumes ticket status events from Kafka as a consumer group and keeps an
//! exactly-one-row-per-event projection in PostgreSQL through a transactional inbox.
//!
//! Layout — start with `inbox::contract`, the heart of it:
//! - [`domain`]: the event (parsing, validation) and the outcome of processing one; no I/O.
//! - [`inbox`]: `process_history_once` over a repository trait (SPEC §4), the PostgreSQL
//!   repository (SPEC §3) and the migrations.
//! - [`db`]: connection pools to the service's database.
//! - [`pg_cluster`]: a throwaway PostgreSQL server for tests, `demo` and `bench`.
//! - [`error_text`]: one-line rendering of an error with its causes.

pub mod db;
pub mod domain;
pub mod error_text;
pub mod inbox;
pub mod pg_cluster;
