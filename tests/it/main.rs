//! Integration tests: one binary, real PostgreSQL and Kafka's real protocol (the librdkafka
//! mock cluster, and a tansu broker server for the Kafka-facing tests), records produced by a
//! real producer.

mod admin;
mod admin_security;
mod admin_tls;
mod bench;
mod browser;
mod codecs;
mod consumer;
mod consumer_batching;
mod demo;
mod deploy;
mod fetch;
mod group;
mod group_members;
mod guard;
mod inbox;
mod inbox_batch;
mod kafka_connection;
mod kafka_security;
mod kubernetes;
mod layout;
mod live_rewind;
mod logging;
mod migrations;
mod offset_reset;
mod outside;
mod pg_tls;
mod poison;
mod process;
mod produce;
mod readiness;
mod recovery;
mod reference;
mod rejections;
mod remedies;
mod resilience;
mod rolling;
mod schema;
mod support;
mod unreadable;
mod whole_group;
