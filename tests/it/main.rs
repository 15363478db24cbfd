//! Integration tests: one binary, real PostgreSQL and Kafka's real protocol (the librdkafka
//! mock cluster, and a tansu broker server for the Kafka-facing tests), records produced by a
//! real producer.

mod admin;
mod admin_security;
mod app;
mod batch;
mod batching;
mod bench;
mod browser;
mod consumer;
mod demo;
mod deploy;
mod fetch;
mod helpers;
mod http;
mod inbox;
mod kafka;
mod layout;
mod live_rewind;
mod migrations;
mod process;
mod produce;
mod proxy;
mod recovery;
mod resilience;
mod tansu;
mod webdriver;
