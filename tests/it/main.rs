//! Integration tests: one binary, real PostgreSQL and Kafka's real protocol (the librdkafka
//! mock cluster), records produced by a real producer.

mod app;
mod consumer;
mod helpers;
mod inbox;
mod kafka;
mod migrations;
mod process;
mod resilience;
