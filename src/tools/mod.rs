//! The tools around the service, which the service itself never uses: `demo` (the whole
//! product with nothing installed), `bench` (throughput against the database's ceiling),
//! `produce` (a load generator for a real Kafka), `docs` (the generated pages of `docs/`,
//! [`reference`]), the throwaway PostgreSQL server they and the
//! tests run on, and the certificates of the servers they start with TLS. Built with the
//! `tools` feature (on by default).

pub mod args;
pub mod bench;
pub mod certs;
pub mod demo;
pub mod pg_cluster;
pub mod produce;
pub mod reference;
