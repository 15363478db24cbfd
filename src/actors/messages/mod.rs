//! Every message exchanged by the actors and the Kafka driver thread, one struct each, by
//! conversation: [`driver`] (the driver thread and the actors), [`pipeline`] (the actors among
//! themselves), [`commands`] (an operator's, through the admin) and [`queries`] (status).
//!
//! The path of a record: the driver thread reads each assigned partition from its own
//! librdkafka queue and hands the partition actor at most as many records as it asked for
//! ([`Fetched`], [`KafkaRequest::Demand`]); the actor resolves them through the inbox and
//! reports each outcome to the checkpoint ([`OutcomesReported`]); the checkpoint asks the driver
//! to commit watermarks that moved ([`KafkaRequest::Commit`]) and hears back
//! ([`CommitCompleted`]). Nothing else carries records or offsets.
//!
//! Every partition-scoped message names its [`Assignment`], so that a message left over from
//! an earlier assignment of the same partition is recognised and ignored.

pub mod commands;
pub mod driver;
pub mod pipeline;
pub mod queries;

pub use crate::domain::{Assignment, CommitPosition};
pub use commands::*;
pub use driver::*;
pub use pipeline::*;
pub use queries::*;
