//! The consumer group as one, in process: a member publishes itself and its partitions to the
//! shared database every heartbeat, records its graceful leave, and keeps consuming when it
//! cannot write.

use std::time::Duration;

use crate::support::app::{spawn_app_with, test_settings};
use crate::support::faults::Trigger;
use crate::support::helpers::{TestDb, test_database, unique_name, wait_for};
use crate::support::kafka::{TestKafka, produce};

/// Settings with a fast heartbeat.
fn fast_heartbeat(db: &TestDb, kafka: &TestKafka) -> history_consumer::config::Settings {
    let mut settings = test_settings(&db.url, kafka, &unique_name("group"));
    settings.admin.members.heartbeat = Duration::from_millis(300);
    settings.admin.members.gone_after = Duration::from_secs(3);
    settings
}

async fn published_partitions(db: &TestDb) -> Vec<(i32, Option<i64>)> {
    let client = db.pool.get().await.unwrap();
    client
        .query(
            "SELECT kafka_partition, committed_offset FROM group_member_partitions \
             ORDER BY kafka_partition",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[actix_web::test]
async fn a_member_publishes_itself_and_its_partitions_every_heartbeat_and_records_its_leave() {
    let db = test_database().await;
    let kafka = TestKafka::start(2);
    let app = spawn_app_with(fast_heartbeat(&db, &kafka)).await;
    app.wait_assigned(2).await;
    produce(&kafka, 0..10).await;
    app.wait_committed(&kafka, &[5, 5]).await;
    wait_for(
        Duration::from_secs(10),
        "the committed offsets to be published",
        || async {
            (published_partitions(&db).await == vec![(0, Some(5)), (1, Some(5))]).then_some(())
        },
    )
    .await;
    let client = db.pool.get().await.unwrap();
    let member = client
        .query_one(
            "SELECT member_id, consumer_group, topic, host, pid, version, client_id, \
               kafka_member_id, admin_url, heartbeat_at, left_at IS NULL \
             FROM group_members",
            &[],
        )
        .await
        .unwrap();
    let id: String = member.get(0);
    let pid: i32 = member.get(4);
    assert_eq!(pid as u32, std::process::id());
    assert_eq!(member.get::<_, String>(1), app.group);
    assert_eq!(member.get::<_, String>(2), kafka.topic);
    let host: String = member.get(3);
    assert!(id.starts_with(&format!("{host}-{pid}-")), "{id}");
    assert_eq!(member.get::<_, String>(5), env!("CARGO_PKG_VERSION"));
    assert_eq!(
        member.get::<_, String>(6),
        format!("history-consumer-{host}-{pid}")
    );
    assert!(member.get::<_, Option<String>>(7).is_some(), "joined Kafka");
    assert_eq!(
        member.get::<_, String>(8),
        format!("http://{}", app.handle.admin_addr)
    );
    assert!(member.get::<_, bool>(10), "not left");
    let first: chrono::DateTime<chrono::Utc> = member.get(9);
    wait_for(Duration::from_secs(5), "a later heartbeat", || async {
        let at: chrono::DateTime<chrono::Utc> = client
            .query_one("SELECT heartbeat_at FROM group_members", &[])
            .await
            .unwrap()
            .get(0);
        (at > first).then_some(())
    })
    .await;
    drop(client);

    app.shutdown().await;
    let client = db.pool.get().await.unwrap();
    let left: bool = client
        .query_one("SELECT left_at IS NOT NULL FROM group_members", &[])
        .await
        .unwrap()
        .get(0);
    assert!(left, "a graceful leave is recorded");
    assert!(
        published_partitions(&db).await.is_empty(),
        "a member that left owns nothing"
    );
}

#[actix_web::test]
async fn a_member_that_cannot_write_its_heartbeat_keeps_consuming_and_publishes_once_it_can() {
    let db = test_database().await;
    let refusal = Trigger::before("refuse_members", "INSERT OR UPDATE", "group_members")
        .refusing("true", "'members refused by the test'");
    refusal.install(&db).await;
    let kafka = TestKafka::start(2);
    let app = spawn_app_with(fast_heartbeat(&db, &kafka)).await;
    app.wait_assigned(2).await;
    produce(&kafka, 0..20).await;
    app.wait_committed(&kafka, &[10, 10]).await;
    assert_eq!(db.scalar("SELECT count(*) FROM group_members").await, 0);

    refusal.remove(&db).await;
    wait_for(Duration::from_secs(10), "the member to publish", || async {
        (published_partitions(&db).await == vec![(0, Some(10)), (1, Some(10))]).then_some(())
    })
    .await;
    app.shutdown().await;
}
