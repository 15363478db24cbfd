//! history-consumer: consumes ticket status events from Kafka as a consumer group and keeps an
//! exactly-one-row-per-event projection in PostgreSQL through a transactional inbox.
//!
//! Layers, bottom up; a module uses only modules of the layers below it (start with
//! `inbox::contract`, the heart of it):
//! 1. Pure values and rules, no I/O: [`domain`] (the event, the record it arrives in, outcomes,
//!    duplicate causes, dead letters, offsets), [`watermark`] (SPEC §5), [`backoff`],
//!    [`stuck`] (when a partition counts as stuck).
//! 2. Plumbing: [`config`] (the checked settings), [`db`] (connection pools), [`metrics`]
//!    (the registry), [`error_text`] (one line for an error and its causes).
//! 3. [`inbox`]: `process_history_once` over a repository trait (SPEC §4), the PostgreSQL
//!    repository and its batched form, dead letters, duplicate causes, migrations.
//! 4. [`work`]: one unit of a partition's work run against the database, outcome per record.
//! 5. [`actors`]: the supervisor, one actor per partition, the checkpoint, the monitor; their
//!    messages and status snapshots.
//! 6. [`kafka`]: the client configuration, the consumer context, the commits and the driver
//!    thread that feeds the actors.
//! 7. [`recovery`]: `verify` (the projection against the topic), `rewind` (a stopped group to a
//!    point in time) and what the admin's live rewind shares with them.
//! 8. [`admin`]: the HTTP server (pages, JSON API, actions, health, metrics).
//! 9. [`startup`]: the wiring; [`cli`]: the binary's command line.
//!
//! Beside them, [`tools`] (feature `tools`): `demo`, `bench`, `produce` and the throwaway
//! PostgreSQL server. The service never uses them.

pub mod actors;
pub mod admin;
pub mod backoff;
pub mod cli;
pub mod config;
pub mod db;
pub mod domain;
pub mod error_text;
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
