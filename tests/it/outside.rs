//! The connectivity issue's check from outside, as a user on a managed setup meets it: a
//! PostgreSQL that accepts only TLS, reached with `sslmode=verify-full`; a broker reached only
//! over TLS, configured with plain librdkafka properties in a file; producers using every
//! codec, zstd included; a wrong certificate authority first, then the right one.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::codecs::{self, PARTITIONS};
use crate::kafka_connection::{not_ready_for, nothing_stored_nor_committed};
use crate::pg_tls::tls_server;
use crate::support::helpers::{TestDb, unique_name};
use crate::support::kafka::wait_committed;
use crate::support::service::ServiceProcess;
use crate::support::tls_kafka;

/// A properties file as a user writes it for librdkafka: the brokers, TLS and a CA file.
fn write_properties(file: &Path, brokers: &str, ca: &Path) {
    std::fs::write(
        file,
        format!(
            "# the broker accepts TLS only\nbootstrap.servers={brokers}\n\
             security.protocol=SSL\nssl.ca.location={}\n",
            ca.display()
        ),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn over_tls_everywhere_with_every_codec_a_wrong_ca_stores_nothing_and_the_right_one_is_exact()
{
    let postgres = tls_server().await;
    let database = postgres.database("postgres").await;
    let url = postgres.url(
        "postgres",
        "localhost",
        &database,
        &format!("sslmode=verify-full&sslrootcert={}", postgres.ca.display()),
    );
    let db = TestDb {
        url: url.clone(),
        pool: history_consumer::db::pool(&url, 2).unwrap(),
    };
    let broker = tls_kafka::server();
    let kafka = broker.topic(PARTITIONS).await;
    codecs::produce_every_codec(&kafka).await;
    let ends = kafka.ends().await;

    let properties = tempfile::NamedTempFile::new().unwrap();
    let flags = ["--kafka-config-file", properties.path().to_str().unwrap()];
    let wrong = broker.authority("wrong-ca");
    write_properties(properties.path(), &broker.brokers, &wrong.cert_path);
    let group = unique_name("outside");
    let mut service = ServiceProcess::spawn_with(&url, "", &kafka.topic, &group, &flags);
    let body = not_ready_for(&service.admin, "certificate_not_trusted").await;
    assert_eq!(body["kafka_connection"]["cause"], "tls", "{body}");
    // Up and not ready for a while: nothing is stored and nothing committed meanwhile.
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(5) {
        nothing_stored_nor_committed(&db, &kafka, &group).await;
        not_ready_for(&service.admin, "certificate_not_trusted").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    service.sigterm();
    assert_eq!(service.wait_exit(Duration::from_secs(30)).await, Some(0));

    write_properties(
        properties.path(),
        &broker.brokers,
        &broker.authority.cert_path,
    );
    let mut service = ServiceProcess::spawn_with(&url, "", &kafka.topic, &group, &flags);
    codecs::wait_all_stored(&db).await;
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    codecs::assert_every_codec_stored_once(&db).await;
    service.sigterm();
    assert_eq!(service.wait_exit(Duration::from_secs(30)).await, Some(0));
}
