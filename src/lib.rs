//! history-consumer: consumes ticket status events from Kafka as a consumer group and keeps an
//! exactly-one-row-per-event projection in PostgreSQL through a transactional inbox.
//!
//! Layers, bottom up; a module uses only modules of the layers below it, never one of its own
//! layer or above (start with `inbox::contract`, the heart of it). `tests/it/layout.rs` reads
//! this list and checks every import against it.
//! 1. Pure values and rules, no I/O: [`domain`] (the event, the record it arrives in, outcomes,
//!    duplicate causes, dead letters, offsets, why the Kafka connection fails and its health),
//!    [`watermark`] (the contract's watermark), [`backoff`], [`stuck`] (when a partition
//!    counts as stuck).
//! 2. [`error_text`]: one line for an error and its causes.
//! 3. [`db`] (the connection string read as libpq reads it, TLS with its sslmode meaning, the
//!    pools) and [`metrics`] (the registry).
//! 4. [`config`]: the checked settings, every name and default in one place.
//! 5. [`inbox`]: `process_history_once` over a repository trait (the contract), the PostgreSQL
//!    repository and its batched form, dead letters and their replay, duplicate causes, the
//!    SQLSTATE table, migrations.
//! 6. [`work`]: one unit of a partition's work run against the database, outcome per record.
//! 7. [`actors`]: the supervisor, one actor per partition, the checkpoint, the monitor; their
//!    messages and status snapshots.
//! 8. [`kafka`]: the client configuration, the consumer context, the connection's health, the
//!    commits and the driver thread that feeds the actors.
//! 9. [`recovery`]: `verify` (the projection against the topic), `rewind` (a stopped group to a
//!    point in time) and what the admin's live rewind shares with them.
//! 10. [`group`]: the consumer group as one — what each member publishes about itself to the
//!     shared database and reads back about the others.
//! 11. [`admin`]: the HTTP server (pages, JSON API, actions, health, metrics).
//! 12. [`startup`]: the wiring; [`cli`]: the binary's command line.
//!
//! Beside them, [`tools`] (feature `tools`): `demo`, `bench`, `produce`, the throwaway
//! PostgreSQL server and the generated pages of `docs/`. The service never uses them.

pub mod actors;
pub mod admin;
pub mod backoff;
pub mod cli;
pub mod config;
pub mod db;
pub mod domain;
pub mod error_text;
pub mod group;
pub mod inbox;
pub mod kafka;
pub mod metrics;
pub mod recovery;
pub mod startup;
pub mod stuck;
#[cfg(feature = "tools")]
pub mod tools;
pub mod watermark;
pub mod work;
