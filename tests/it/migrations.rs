//! The versioned migrations on a real server.

use history_consumer::inbox::{MigrateError, migrate};

use crate::support::helpers::{empty_database, test_database};

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

#[tokio::test]
async fn a_second_migration_run_is_a_no_op() {
    let url = empty_database().await;
    let mut client = connect(&url).await;
    let first = migrate(&mut client).await.expect("first run");
    assert_eq!(
        first.applied.first().map(String::as_str),
        Some("V1__inbox_and_history.sql")
    );
    let second = migrate(&mut client).await.expect("second run");
    assert!(
        second.applied.is_empty(),
        "applied again: {:?}",
        second.applied
    );
}

#[tokio::test]
async fn the_first_migration_is_the_spec_schema_verbatim() {
    let db = test_database().await;
    let client = db.pool.get().await.unwrap();
    let columns: Vec<(String, String, String)> = client
        .query(
            "SELECT column_name::text, data_type::text, is_nullable::text FROM information_schema.columns \
             WHERE table_name = 'history_events' ORDER BY ordinal_position",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let expected = [
        ("event_id", "text", "NO"),
        ("ticket_id", "text", "NO"),
        ("from_status", "text", "NO"),
        ("to_status", "text", "NO"),
        ("changed_at", "timestamp with time zone", "NO"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(columns, expected);
    let foreign_keys = db
        .scalar(
            "SELECT count(*) FROM information_schema.table_constraints \
             WHERE table_name = 'history_events' AND constraint_type = 'FOREIGN KEY'",
        )
        .await;
    assert_eq!(foreign_keys, 1, "history_events.event_id references inbox");
}

#[tokio::test]
async fn a_failing_migration_names_its_file() {
    let url = empty_database().await;
    let mut client = connect(&url).await;
    // A table in the way of V3 makes exactly that migration fail.
    client
        .batch_execute("CREATE TABLE dead_letters (x int)")
        .await
        .unwrap();
    let error = migrate(&mut client).await.expect_err("V3 must fail");
    let text = error.to_string();
    assert!(matches!(error, MigrateError::File { .. }), "{error:?}");
    assert!(text.contains("migrations/V3__dead_letters.sql"), "{text}");
    assert!(
        text.contains("already exists"),
        "the cause is shown: {text}"
    );
    // Migrations before the failing one stay applied; the failing one left nothing behind.
    let row = client
        .query_one("SELECT count(*) FROM refinery_schema_history", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 2);
}
