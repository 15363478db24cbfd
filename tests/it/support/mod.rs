//! What the tests share: a PostgreSQL database per test, a Kafka topic on either broker, the
//! service in process or as the real binary, an HTTP client, a browser, a TCP proxy that can cut
//! connections, Kafka over TLS and with SASL. Nothing here is a test; every test module imports from here.

pub mod app;
pub mod faults;
pub mod helpers;
pub mod http;
pub mod kafka;
pub mod metrics;
pub mod proxy;
pub mod raw_batch;
pub mod sasl_kafka;
pub mod service;
pub mod tansu;
pub mod tls_kafka;
pub mod webdriver;
