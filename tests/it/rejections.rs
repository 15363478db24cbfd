//! What real PostgreSQL errors say about a row (`inbox::sqlstate`): the incident's index limit,
//! a trigger, a CHECK and a column limit reject the row at the INSERT that meets them; a
//! deferred constraint failing at COMMIT and an unreachable server never do.

use history_consumer::domain::TicketEvent;
use history_consumer::domain::story::event_900;
use history_consumer::inbox::batch::{BatchItem, process_batch};
use history_consumer::inbox::{
    ErrorClass, Origin, PgInbox, PgInboxError, Processed, Step, process_history_once,
};

use crate::support::faults::Trigger;
use crate::support::helpers::{TestDb, free_port, test_database};

const AT_7: Origin = Origin {
    partition: 0,
    offset: 7,
};

/// `count` pseudo-random characters of four bytes each: text PostgreSQL cannot compress.
pub fn incompressible(count: usize) -> String {
    let mut state: u32 = 0x2545_f491;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            char::from_u32(0x2_0000 + state % 0xA000).expect("a CJK extension character")
        })
        .collect()
}

async fn stored(db: &TestDb) -> (i64, i64) {
    (
        db.scalar("SELECT count(*) FROM inbox").await,
        db.scalar("SELECT count(*) FROM history_events").await,
    )
}

async fn process(db: &TestDb, event: &TicketEvent) -> PgInboxError {
    let mut repo = PgInbox::new(db.pool.clone());
    match process_history_once(&mut repo, event, AT_7).await {
        Processed::Unknown(error) => error,
        other => panic!("expected an error, got {:?}", other.outcome()),
    }
}

#[tokio::test]
async fn the_incidents_long_ticket_id_is_an_index_limit_that_rejects_the_row_at_its_insert() {
    let db = test_database().await;
    // Past validation on purpose: the database's own verdict on the incident's record.
    let event = event_900().with_ticket_id(&incompressible(1000));
    let error = process(&db, &event).await;
    assert_eq!(error.step(), Some(Step::InsertHistory));
    assert_eq!(error.sqlstate(), Some("54000"));
    assert_eq!(error.class(), ErrorClass::RowRejected);
    assert!(error.rejects_the_row());
    let text = history_consumer::error_text::chain(&error);
    assert!(
        text.starts_with("inserting the history row failed: ")
            && text.contains(
                "index row size 4024 exceeds btree version 4 maximum 2704 for index \"history_events_ticket_idx\""
            ),
        "{text}"
    );
    assert_eq!(stored(&db).await, (0, 0), "the transaction rolled back");

    // In a batch the same row fails the whole batch with the same verdict.
    let fine = event_900().with_event_id("event-fine");
    let items = [
        BatchItem::Event {
            event: &fine,
            origin: AT_7,
        },
        BatchItem::Event {
            event: &event,
            origin: Origin {
                partition: 0,
                offset: 8,
            },
        },
    ];
    let error = process_batch(&db.pool, &items).await.unwrap_err();
    assert!(error.rejects_the_row(), "{error:?}");
    // A batch's markers and history rows are one statement: its error names both.
    assert_eq!(error.step(), Some(Step::InsertEvents));
    assert_eq!(
        error.to_string(),
        "inserting the inbox markers and history rows failed"
    );
    assert_eq!(stored(&db).await, (0, 0));
}

#[tokio::test]
async fn a_trigger_a_check_and_a_column_limit_reject_their_row_at_the_insert_that_meets_them() {
    let db = test_database().await;
    Trigger::before("refuse_poison", "INSERT", "history_events")
        .refusing(
            "NEW.ticket_id = 'poison'",
            "'ticket % is refused', NEW.ticket_id",
        )
        .install(&db)
        .await;
    let client = db.pool.get().await.unwrap();
    client
        .batch_execute(
            "ALTER TABLE history_events ADD CONSTRAINT no_reopen CHECK (to_status <> 'reopened'); \
             ALTER TABLE history_events ALTER COLUMN from_status TYPE varchar(10);",
        )
        .await
        .unwrap();
    drop(client);
    type Change = fn(&TicketEvent) -> TicketEvent;
    let cases: [(&str, Change, &str); 3] = [
        ("a trigger", |e| e.with_ticket_id("poison"), "P0001"),
        ("a CHECK", |e| e.with_to_status("reopened"), "23514"),
        (
            "a column limit",
            |e| e.with_from_status("a status longer than ten"),
            "22001",
        ),
    ];
    for (what, change, state) in cases {
        let event = change(&event_900());
        let error = process(&db, &event).await;
        assert_eq!(error.step(), Some(Step::InsertHistory), "{what}");
        assert_eq!(error.sqlstate(), Some(state), "{what}");
        assert!(error.rejects_the_row(), "{what}: {error:?}");
    }
    assert_eq!(stored(&db).await, (0, 0));
    // The rows those rules allow are stored as always.
    let mut repo = PgInbox::new(db.pool.clone());
    let fine = process_history_once(&mut repo, &event_900(), AT_7).await;
    assert!(matches!(fine, Processed::Applied), "{:?}", fine.error());
}

#[tokio::test]
async fn a_deferred_constraint_failing_at_commit_is_unknown_and_never_a_rejection() {
    let db = test_database().await;
    Trigger::at_commit("refuse_at_commit", "history_events")
        .refusing("true", "'refused at commit'")
        .install(&db)
        .await;
    let error = process(&db, &event_900()).await;
    assert_eq!(error.step(), Some(Step::Commit));
    assert_eq!(error.sqlstate(), Some("P0001"));
    assert_eq!(error.class(), ErrorClass::Transient);
    assert!(!error.rejects_the_row());
}

#[tokio::test]
async fn a_database_that_cannot_be_reached_is_unavailable_and_never_a_rejection() {
    let url = format!("postgres://nobody@127.0.0.1:{}/nothing", free_port());
    let pool = history_consumer::db::pool(&url, 1).unwrap();
    let mut repo = PgInbox::new(pool);
    let Processed::Unknown(error) = process_history_once(&mut repo, &event_900(), AT_7).await
    else {
        panic!("nothing listens there");
    };
    assert_eq!(error.class(), ErrorClass::Unavailable);
    assert!(error.is_unavailable() && !error.rejects_the_row());
}
