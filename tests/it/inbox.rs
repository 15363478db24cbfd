//! The inbox transaction on a real PostgreSQL server (SPEC §3–§4).

use std::time::Duration;

use chrono::Utc;
use history_consumer::domain::story::{event_900, event_901};
use history_consumer::domain::{Outcome, TicketEvent};
use history_consumer::inbox::{
    InboxRepository, Origin, PgInbox, PgInboxError, process_history_once,
};
use tokio::sync::oneshot;

use crate::support::helpers::{TestDb, test_database, test_database_with, wait_for};
use crate::support::proxy::{Proxy, through, upstream};

const AT_7: Origin = Origin {
    partition: 0,
    offset: 7,
};
const AT_8: Origin = Origin {
    partition: 0,
    offset: 8,
};

async fn rows_for(db: &TestDb, event_id: &str) -> (i64, i64) {
    let client = db.pool.get().await.unwrap();
    let inbox: i64 = client
        .query_one(
            "SELECT count(*) FROM inbox WHERE event_id = $1",
            &[&event_id],
        )
        .await
        .unwrap()
        .get(0);
    let history: i64 = client
        .query_one(
            "SELECT count(*) FROM history_events WHERE event_id = $1",
            &[&event_id],
        )
        .await
        .unwrap()
        .get(0);
    (inbox, history)
}

#[tokio::test]
async fn event_900_delivered_twice_is_one_row_applied_then_already_applied() {
    let db = test_database().await;
    let mut repo = PgInbox::new(db.pool.clone());

    let first = process_history_once(&mut repo, &event_900(), AT_7).await;
    assert_eq!(first.outcome(), Outcome::Applied, "{:?}", first.error());
    let second = process_history_once(&mut repo, &event_900(), AT_8).await;
    assert_eq!(
        second.outcome(),
        Outcome::AlreadyApplied,
        "{:?}",
        second.error()
    );

    assert_eq!(rows_for(&db, "event-ticket-900").await, (1, 1));
    let client = db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT ticket_id, from_status, to_status, changed_at FROM history_events",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "ticket-42");
    assert_eq!(row.get::<_, String>(1), "open");
    assert_eq!(row.get::<_, String>(2), "resolved");
    assert_eq!(
        row.get::<_, chrono::DateTime<Utc>>(3),
        event_900().changed_at
    );
}

#[tokio::test]
async fn event_901_of_the_same_ticket_is_a_second_row() {
    let db = test_database().await;
    let mut repo = PgInbox::new(db.pool.clone());
    assert_eq!(
        process_history_once(&mut repo, &event_900(), AT_7)
            .await
            .outcome(),
        Outcome::Applied
    );
    assert_eq!(
        process_history_once(&mut repo, &event_901(), AT_8)
            .await
            .outcome(),
        Outcome::Applied
    );
    let for_ticket = db
        .scalar("SELECT count(*) FROM history_events WHERE ticket_id = 'ticket-42'")
        .await;
    assert_eq!(for_ticket, 2);
}

#[tokio::test]
async fn a_new_marker_records_where_the_event_was_first_seen() {
    let db = test_database().await;
    let mut repo = PgInbox::new(db.pool.clone());
    process_history_once(&mut repo, &event_900(), AT_7).await;
    process_history_once(&mut repo, &event_900(), AT_8).await;
    let client = db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT first_partition, first_offset, first_seen_at IS NOT NULL FROM inbox",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<i32>>(0), Some(0));
    assert_eq!(
        row.get::<_, Option<i64>>(1),
        Some(7),
        "the first delivery's offset stays"
    );
    assert!(row.get::<_, bool>(2));
}

/// A real repository whose commit reaches the server and whose reply is then "lost".
struct LostCommitReply(PgInbox);

impl InboxRepository for LostCommitReply {
    type Error = PgInboxError;
    async fn begin(&mut self) -> Result<(), PgInboxError> {
        self.0.begin().await
    }
    async fn try_inbox(&mut self, event_id: &str, origin: Origin) -> Result<bool, PgInboxError> {
        self.0.try_inbox(event_id, origin).await
    }
    async fn save_history(&mut self, event: &TicketEvent) -> Result<(), PgInboxError> {
        self.0.save_history(event).await
    }
    async fn commit(&mut self) -> Result<(), PgInboxError> {
        self.0.commit().await?;
        // The connection went back to the pool: give the rollback one to fail on, as after a
        // dropped connection.
        self.0.begin().await?;
        Err(PgInboxError::Misuse("commit reply lost"))
    }
    async fn rollback(&mut self) -> Result<(), PgInboxError> {
        self.0.rollback().await
    }
}

#[tokio::test]
async fn a_lost_commit_reply_is_unknown_and_the_redelivery_is_already_applied_with_one_pair() {
    let db = test_database().await;
    let mut lossy = LostCommitReply(PgInbox::new(db.pool.clone()));
    let first = process_history_once(&mut lossy, &event_900(), AT_7).await;
    assert_eq!(first.outcome(), Outcome::Unknown);
    assert!(
        first
            .error()
            .unwrap()
            .to_string()
            .contains("commit reply lost")
    );

    let mut repo = PgInbox::new(db.pool.clone());
    let redelivery = process_history_once(&mut repo, &event_900(), AT_7).await;
    assert_eq!(redelivery.outcome(), Outcome::AlreadyApplied);
    assert_eq!(rows_for(&db, "event-ticket-900").await, (1, 1));
}

#[tokio::test]
async fn a_failed_history_insert_leaves_no_marker_behind() {
    let db = test_database().await;
    let mut repo = PgInbox::new(db.pool.clone());
    // A ticket id the column cannot take makes step 2 fail inside the transaction.
    let broken = event_900().with_ticket_id("nul\0byte");
    let processed = process_history_once(&mut repo, &broken, AT_7).await;
    assert_eq!(processed.outcome(), Outcome::Unknown);
    assert_eq!(rows_for(&db, "event-ticket-900").await, (0, 0));
    // The connection went back clean: the proper event is applied.
    let retried = process_history_once(&mut repo, &event_900(), AT_7).await;
    assert_eq!(retried.outcome(), Outcome::Applied, "{:?}", retried.error());
}

/// A real repository that stops before its commit until released.
struct HeldBeforeCommit {
    inner: PgInbox,
    reached_commit: Option<oneshot::Sender<()>>,
    release: Option<oneshot::Receiver<()>>,
}

impl InboxRepository for HeldBeforeCommit {
    type Error = PgInboxError;
    async fn begin(&mut self) -> Result<(), PgInboxError> {
        self.inner.begin().await
    }
    async fn try_inbox(&mut self, event_id: &str, origin: Origin) -> Result<bool, PgInboxError> {
        self.inner.try_inbox(event_id, origin).await
    }
    async fn save_history(&mut self, event: &TicketEvent) -> Result<(), PgInboxError> {
        self.inner.save_history(event).await
    }
    async fn commit(&mut self) -> Result<(), PgInboxError> {
        if let Some(reached) = self.reached_commit.take() {
            let _ = reached.send(());
        }
        if let Some(release) = self.release.take() {
            let _ = release.await;
        }
        self.inner.commit().await
    }
    async fn rollback(&mut self) -> Result<(), PgInboxError> {
        self.inner.rollback().await
    }
}

#[tokio::test]
async fn two_concurrent_transactions_for_one_new_event_id_store_exactly_one_row() {
    let db = test_database_with(4).await;
    let (reached_tx, reached_rx) = oneshot::channel();
    let (release_tx, release_rx) = oneshot::channel();
    let mut held = HeldBeforeCommit {
        inner: PgInbox::new(db.pool.clone()),
        reached_commit: Some(reached_tx),
        release: Some(release_rx),
    };
    let first = tokio::spawn(async move {
        process_history_once(&mut held, &event_900(), AT_7)
            .await
            .outcome()
    });
    reached_rx
        .await
        .expect("the first transaction holds its marker, uncommitted");

    let pool = db.pool.clone();
    let second = tokio::spawn(async move {
        let mut repo = PgInbox::new(pool);
        process_history_once(&mut repo, &event_900(), AT_8)
            .await
            .outcome()
    });

    // Proof that the second transaction waits on the unique index, not that it read "absent".
    wait_for(
        Duration::from_secs(10),
        "the second insert to wait on a lock",
        || async {
            let waiting = db
                .scalar(
                    "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock' \
                   AND query LIKE '%INSERT INTO inbox%'",
                )
                .await;
            (waiting == 1).then_some(())
        },
    )
    .await;
    assert!(!second.is_finished(), "the second transaction must block");

    release_tx.send(()).unwrap();
    assert_eq!(first.await.unwrap(), Outcome::Applied);
    assert_eq!(second.await.unwrap(), Outcome::AlreadyApplied);
    assert_eq!(rows_for(&db, "event-ticket-900").await, (1, 1));
}

/// The defect SPEC §3 warns about, written out: the marker committed in a transaction of its
/// own, then the process dies before the history row is committed in a second one.
async fn anti_pattern_commit_marker_then_crash(db: &TestDb, event: &TicketEvent) {
    let client = db.pool.get().await.unwrap();
    client.batch_execute("BEGIN").await.unwrap();
    client
        .execute(
            "INSERT INTO inbox (event_id) VALUES ($1) ON CONFLICT (event_id) DO NOTHING",
            &[&event.event_id()],
        )
        .await
        .unwrap();
    client.batch_execute("COMMIT").await.unwrap();
    // -- crash here: the second transaction (the history row) never happens --
}

#[tokio::test]
async fn committing_the_marker_in_its_own_transaction_loses_the_event_forever() {
    let db = test_database().await;
    anti_pattern_commit_marker_then_crash(&db, &event_900()).await;

    // Every redelivery now says "already applied"...
    let mut repo = PgInbox::new(db.pool.clone());
    for _ in 0..3 {
        let processed = process_history_once(&mut repo, &event_900(), AT_7).await;
        assert_eq!(processed.outcome(), Outcome::AlreadyApplied);
    }
    // ...and the history row never appears: a marker without a row, the event lost.
    assert_eq!(rows_for(&db, "event-ticket-900").await, (1, 0));
}

#[tokio::test]
async fn duplicates_are_classified_by_where_they_were_first_seen_and_by_payload() {
    use history_consumer::domain::DuplicateCause;
    use history_consumer::inbox::duplicates::classify;

    let db = test_database().await;
    let mut repo = PgInbox::new(db.pool.clone());
    process_history_once(&mut repo, &event_900(), AT_7).await;

    assert_eq!(
        classify(&db.pool, &event_900(), AT_7).await.unwrap(),
        DuplicateCause::Redelivery,
        "same partition and offset: the consumer replayed it"
    );
    assert_eq!(
        classify(&db.pool, &event_900(), AT_8).await.unwrap(),
        DuplicateCause::Republish,
        "another offset, same payload: the outbox published twice"
    );
    let changed = event_900().with_to_status("closed");
    assert_eq!(
        classify(&db.pool, &changed, AT_8).await.unwrap(),
        DuplicateCause::Conflicting,
        "another offset, another payload: a producer bug"
    );
    // Classifying never changes what is stored.
    assert_eq!(rows_for(&db, "event-ticket-900").await, (1, 1));
}

#[tokio::test]
async fn many_duplicates_classified_at_once_keep_their_own_causes_in_order() {
    use history_consumer::domain::DuplicateCause;
    use history_consumer::inbox::duplicates::classify_many;

    let db = test_database().await;
    let mut repo = PgInbox::new(db.pool.clone());
    process_history_once(&mut repo, &event_900(), AT_7).await;
    let changed = event_900().with_to_status("closed");
    let unknown = event_900().with_event_id("event-never-stored");

    let causes = classify_many(
        &db.pool,
        &[
            (&event_900(), AT_8),
            (&unknown, AT_7),
            (&event_900(), AT_7),
            (&changed, AT_8),
            (&event_900(), AT_7),
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        causes,
        [
            DuplicateCause::Republish,
            DuplicateCause::Unclassified,
            DuplicateCause::Redelivery,
            DuplicateCause::Conflicting,
            DuplicateCause::Redelivery,
        ]
    );
}

#[tokio::test]
async fn a_repository_dropped_mid_transaction_never_hands_its_transaction_to_the_next_user() {
    let db = test_database_with(1).await;
    {
        let mut cancelled = PgInbox::new(db.pool.clone());
        cancelled.begin().await.unwrap();
        assert!(cancelled.try_inbox("event-ticket-900", AT_7).await.unwrap());
        // Dropped here, as when the future running it is cancelled.
    }
    // The only pooled connection must not carry the open transaction with its marker.
    let mut repo = PgInbox::new(db.pool.clone());
    let processed = process_history_once(&mut repo, &event_900(), AT_7).await;
    assert_eq!(
        processed.outcome(),
        Outcome::Applied,
        "{:?}",
        processed.error()
    );
    assert_eq!(rows_for(&db, "event-ticket-900").await, (1, 1));
}

/// Whether the next statement on a pooled connection runs in a transaction of its own (and
/// not inside one a previous user left open: then `now()`, the transaction's start, is older).
async fn next_checkout_is_outside_any_transaction(pool: &deadpool_postgres::Pool) -> bool {
    let client = pool.get().await.expect("a connection");
    // The simple protocol: one message, so a statement of its own starts a transaction of its own.
    let messages = client
        .simple_query("SELECT now() = statement_timestamp()")
        .await
        .expect("a query");
    messages.iter().any(|message| match message {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0) == Some("t"),
        _ => false,
    })
}

#[tokio::test]
async fn a_begin_cancelled_while_in_flight_never_hands_its_transaction_to_the_next_user() {
    let db = test_database().await;
    let proxy = Proxy::start(upstream(&db.url)).await;
    let pool = history_consumer::db::pool(&through(&db.url, proxy.port), 1).unwrap();
    assert!(next_checkout_is_outside_any_transaction(&pool).await);

    // BEGIN reaches the server, its reply is held back, the work times out meanwhile.
    proxy.hold_replies(true);
    let mut repo = PgInbox::new(pool.clone());
    let begun = tokio::time::timeout(Duration::from_millis(300), repo.begin()).await;
    assert!(begun.is_err(), "BEGIN must still be in flight");
    drop(repo);
    proxy.hold_replies(false);

    assert!(
        next_checkout_is_outside_any_transaction(&pool).await,
        "the pooled connection came back inside the cancelled BEGIN's transaction"
    );
}

#[tokio::test]
async fn a_batch_cancelled_while_its_begin_is_in_flight_never_hands_its_transaction_on() {
    let db = test_database().await;
    let proxy = Proxy::start(upstream(&db.url)).await;
    let pool = history_consumer::db::pool(&through(&db.url, proxy.port), 1).unwrap();
    assert!(next_checkout_is_outside_any_transaction(&pool).await);

    proxy.hold_replies(true);
    let event = event_900();
    let items = [history_consumer::inbox::batch::BatchItem::Event {
        event: &event,
        origin: AT_7,
    }];
    let batch = history_consumer::inbox::batch::process_batch(&pool, &items);
    let processed = tokio::time::timeout(Duration::from_millis(300), batch).await;
    assert!(processed.is_err(), "BEGIN must still be in flight");
    proxy.hold_replies(false);

    assert!(next_checkout_is_outside_any_transaction(&pool).await);
    let mut repo = PgInbox::new(pool.clone());
    let processed = process_history_once(&mut repo, &event_900(), AT_7).await;
    assert_eq!(
        processed.outcome(),
        Outcome::Applied,
        "{:?}",
        processed.error()
    );
}
