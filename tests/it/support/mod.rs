//! What the tests share: a PostgreSQL database per test, a Kafka topic on either broker and
//! `on_both_brokers!` to run a test on each, database faults through triggers, metric reads,
//! the service in process or as the real binary, an HTTP client and the admin's sign-in, a
//! browser, a TCP proxy that can cut connections, Kafka over TLS and with SASL. Nothing here is
//! a test; every test module imports from here.

pub mod app;
pub mod faults;
pub mod helpers;
pub mod http;
pub mod kafka;
pub mod metrics;
pub mod proxy;
pub mod raw_batch;
pub mod repo;
pub mod sasl_kafka;
pub mod service;
pub mod tansu;
pub mod tls_kafka;
pub mod webdriver;
