//! history-consumer: consumes ticket status events from Kafka as a consumer group and keeps an
//! exactly-one-row-per-event projection in PostgreSQL through a transactional inbox.
//!
//! Layout — start with `inbox::contract`, the heart of it:
//! - [`domain`]: the event (parsing, validation) and the outcome of processing one; no I/O.
//! - [`inbox`]: `process_history_once` over a repository trait (SPEC §4), the PostgreSQL
//!   repository (SPEC §3) and the migrations.
//! - [`watermark`]: the contiguous-resolved watermark per partition (SPEC §5); no I/O.
//! - [`backoff`]: capped exponential backoff with jitter; no I/O.
//! - [`stuck`]: when a partition counts as stuck (Burrow's rules); no I/O.
//! - [`actors`]: supervisor, partition actors and the checkpoint, their messages and status.
//! - [`kafka`]: client configuration, the consumer context and the driver thread.
//! - [`dead_letters`]: storing records that can never succeed.
//! - [`admin`]: the HTTP server (health, JSON status, metrics); [`metrics`]: the registry.
//! - [`config`]: the command line and the checked settings; [`startup`]: the wiring.
//! - [`demo`]: `history-consumer demo`, the whole product with an embedded Kafka and traffic.
//! - [`bench`]: `history-consumer bench`, throughput against the database's ceiling.
//! - [`db`]: connection pools to the service's database.
//! - [`pg_cluster`]: a throwaway PostgreSQL server for tests, `demo` and `bench`.
//! - [`produce`]: `history-consumer produce`, a load generator for a real Kafka.
//! - [`error_text`]: one-line rendering of an error with its causes.

pub mod actors;
pub mod admin;
pub mod backoff;
pub mod bench;
pub mod config;
pub mod db;
pub mod dead_letters;
pub mod demo;
pub mod domain;
pub mod error_text;
pub mod inbox;
pub mod kafka;
pub mod metrics;
pub mod pg_cluster;
pub mod produce;
pub mod startup;
pub mod stuck;
pub mod watermark;
