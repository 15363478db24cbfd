//! Integration tests: one binary, real PostgreSQL and Kafka's real protocol (the librdkafka
//! mock cluster), records produced by a real producer.

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
mod helpers;
mod http;
mod inbox;
mod kafka;
mod migrations;
mod process;
mod produce;
mod resilience;
mod webdriver;
