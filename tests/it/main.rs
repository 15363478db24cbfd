//! Integration tests: one binary, real PostgreSQL (and, where asked, Kafka's real protocol).

mod helpers;
mod inbox;
mod migrations;
