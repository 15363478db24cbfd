//! Kafka: the consumer's client configuration, its context (what librdkafka calls back), the
//! offset commits and the driver thread that is the only caller of the consumer. Above the
//! actors: it delivers to them through their recipients and serves their requests.

pub mod client;
pub mod commits;
pub mod context;
pub mod driver;

pub use client::consumer_config;
pub use context::KafkaContext;
pub use driver::{DriverPorts, DriverSettings, spawn_driver};
