//! Kafka: the consumer's client configuration, its context (rebalance, commit and statistics
//! callbacks) and the dedicated driver thread that serves librdkafka off the actix threads.

pub mod client;
pub mod context;
pub mod driver;

pub use client::consumer_config;
pub use context::HistoryContext;
pub use driver::{DriverCommand, Limits, spawn_driver};
