//! The batched inbox transaction on a real PostgreSQL server (issue 7): per-event outcomes,
//! atomicity, and concurrent batches sharing event ids.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use history_consumer::domain::DuplicateCause::{self, Conflicting, Redelivery, Republish};
use history_consumer::domain::{DeadLetter, RejectReason, Rejection, TicketEvent};
use history_consumer::inbox::MarkersHeld;
use history_consumer::inbox::Origin;
use history_consumer::inbox::batch::{
    BatchItem, BatchOutcome, HeldElsewhere, Shape, process_batch, process_batch_shaped,
    process_batch_telling,
};
use history_consumer::inbox::duplicates::classify_many;
use history_consumer::inbox::recently_applied::{Copies, RecentlyApplied};
use history_consumer::work::{Payload, Policy, Work, execute_batch};

use crate::support::faults::Trigger;
use crate::support::helpers::{TestDb, test_database, test_database_with};

use BatchOutcome::{AlreadyApplied, Applied, DeadLettered};

/// Event number `n`, with an id whose text order is its numeric order.
fn event(n: usize) -> TicketEvent {
    TicketEvent::new(
        &format!("event-{n:05}"),
        &format!("ticket-{}", n % 7),
        "open",
        "resolved",
        Utc.with_ymd_and_hms(2026, 10, 3, 8, 0, 0).unwrap() + chrono::Duration::seconds(n as i64),
    )
}

fn at(offset: i64) -> Origin {
    Origin {
        partition: 3,
        offset,
    }
}

fn dead_letter(offset: i64) -> DeadLetter {
    DeadLetter {
        topic: "ticket-status".into(),
        partition: 3,
        offset,
        key: Some(b"ticket-1".to_vec()),
        payload: Some(b"{not json".to_vec()),
        rejection: Rejection {
            reason: RejectReason::NotJson,
            message: "expected a JSON object".into(),
        },
    }
}

/// Events at consecutive offsets starting at `first_offset`.
fn events_at<'a>(events: &'a [TicketEvent], first_offset: i64) -> Vec<BatchItem<'a>> {
    events
        .iter()
        .zip(first_offset..)
        .map(|(event, offset)| BatchItem::Event {
            event,
            origin: at(offset),
        })
        .collect()
}

/// (inbox markers, history rows, dead letters).
async fn stored(db: &TestDb) -> (i64, i64, i64) {
    (
        db.scalar("SELECT count(*) FROM inbox").await,
        db.scalar("SELECT count(*) FROM history_events").await,
        db.scalar("SELECT count(*) FROM dead_letters").await,
    )
}

async fn first_seen(db: &TestDb, event_id: &str) -> (Option<i32>, Option<i64>, bool) {
    let client = db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT first_partition, first_offset, first_seen_at IS NOT NULL \
             FROM inbox WHERE event_id = $1",
            &[&event_id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

fn count(outcomes: &[BatchOutcome], wanted: BatchOutcome) -> usize {
    outcomes.iter().filter(|o| **o == wanted).count()
}

#[tokio::test]
async fn a_batch_of_new_events_is_all_applied_with_one_row_each_and_its_origin() {
    let db = test_database().await;
    let events: Vec<TicketEvent> = (0..5).map(event).collect();

    let outcomes = process_batch(&db.pool, &events_at(&events, 100))
        .await
        .unwrap();

    assert_eq!(outcomes, [Applied; 5]);
    assert_eq!(stored(&db).await, (5, 5, 0));
    assert_eq!(
        first_seen(&db, "event-00003").await,
        (Some(3), Some(103), true)
    );
    let client = db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT ticket_id, from_status, to_status, changed_at \
             FROM history_events WHERE event_id = 'event-00004'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), events[4].ticket_id());
    assert_eq!(row.get::<_, String>(1), "open");
    assert_eq!(row.get::<_, String>(2), "resolved");
    assert_eq!(row.get::<_, chrono::DateTime<Utc>>(3), events[4].changed_at);
}

#[tokio::test]
async fn a_batch_mixing_new_and_stored_events_is_applied_or_already_applied_per_event() {
    for shape in [Shape::OneRoundTrip, Shape::MarkersFirst] {
        let db = test_database().await;
        let stored_before = [event(1), event(3)];
        process_batch_shaped(&db.pool, &events_at(&stored_before, 10), shape)
            .await
            .unwrap();

        let batch: Vec<TicketEvent> = (0..5).map(event).collect();
        let mut items = events_at(&batch, 20);
        let letter = dead_letter(25);
        items.push(BatchItem::DeadLetter(&letter));
        let outcomes = process_batch_shaped(&db.pool, &items, shape).await.unwrap();

        assert_eq!(
            outcomes,
            [
                Applied,
                AlreadyApplied,
                Applied,
                AlreadyApplied,
                Applied,
                DeadLettered
            ],
            "{shape:?}"
        );
        assert_eq!(stored(&db).await, (5, 5, 1), "{shape:?}");
        assert_eq!(
            first_seen(&db, "event-00003").await.1,
            Some(11),
            "{shape:?}: the stored marker keeps its first origin"
        );
        // Nothing new at all.
        let replay = process_batch_shaped(&db.pool, &events_at(&stored_before, 30), shape)
            .await
            .unwrap();
        assert_eq!(replay, [AlreadyApplied, AlreadyApplied], "{shape:?}");
        assert_eq!(stored(&db).await, (5, 5, 1), "{shape:?}");
    }
}

#[tokio::test]
async fn with_the_history_table_locked_only_markers_first_resolves_stored_events() {
    let db = test_database_with(2).await;
    let stored_before = [event(1), event(2)];
    process_batch(&db.pool, &events_at(&stored_before, 10))
        .await
        .unwrap();
    // A migration, say, holds history_events.
    let locker_pool = history_consumer::db::pool(&db.url, 1).unwrap();
    let locker = locker_pool.get().await.unwrap();
    locker
        .batch_execute("BEGIN; LOCK TABLE history_events IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();

    // Markers first: every event is stored already, so the table is never touched.
    let replay = tokio::time::timeout(
        Duration::from_secs(10),
        process_batch_shaped(
            &db.pool,
            &events_at(&stored_before, 20),
            Shape::MarkersFirst,
        ),
    )
    .await
    .expect("markers first does not touch the locked table");
    assert_eq!(replay.unwrap(), [AlreadyApplied, AlreadyApplied]);

    // In one round trip the statement names the table, and waits for its lock.
    let waited = tokio::time::timeout(
        Duration::from_millis(500),
        process_batch_shaped(
            &db.pool,
            &events_at(&stored_before, 30),
            Shape::OneRoundTrip,
        ),
    )
    .await;
    assert!(waited.is_err(), "one round trip waits for the lock");
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(stored(&db).await, (2, 2, 0));
}

#[tokio::test]
async fn the_same_event_id_twice_in_a_batch_is_applied_once_then_already_applied() {
    let db = test_database().await;
    let first = event(7);
    let second = event(7).with_to_status("closed");
    let items = [
        BatchItem::Event {
            event: &first,
            origin: at(40),
        },
        BatchItem::Event {
            event: &second,
            origin: at(41),
        },
    ];

    let outcomes = process_batch(&db.pool, &items).await.unwrap();

    assert_eq!(outcomes, [Applied, AlreadyApplied]);
    assert_eq!(stored(&db).await, (1, 1, 0));
    assert_eq!(first_seen(&db, "event-00007").await.1, Some(40));
    let to_status: String = db
        .pool
        .get()
        .await
        .unwrap()
        .query_one("SELECT to_status FROM history_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        to_status, "resolved",
        "the first occurrence's row is stored"
    );
}

#[tokio::test]
async fn malformed_records_are_dead_lettered_in_the_same_transaction_and_a_replay_changes_nothing()
{
    let db = test_database().await;
    let (a, b) = (event(1), event(2));
    let (bad_5, bad_6) = (dead_letter(5), dead_letter(6));
    let items = [
        BatchItem::Event {
            event: &a,
            origin: at(4),
        },
        BatchItem::DeadLetter(&bad_5),
        BatchItem::DeadLetter(&bad_6),
        BatchItem::Event {
            event: &b,
            origin: at(7),
        },
    ];

    let outcomes = process_batch(&db.pool, &items).await.unwrap();
    assert_eq!(outcomes, [Applied, DeadLettered, DeadLettered, Applied]);
    assert_eq!(stored(&db).await, (2, 2, 2));
    let client = db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT record_key, payload, reason, message FROM dead_letters \
             WHERE topic = 'ticket-status' AND kafka_partition = 3 AND kafka_offset = 6",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<Vec<u8>>>(0), bad_6.key);
    assert_eq!(row.get::<_, Option<Vec<u8>>>(1), bad_6.payload);
    assert_eq!(row.get::<_, String>(2), "not_json");
    assert_eq!(row.get::<_, String>(3), "expected a JSON object");

    let replay = process_batch(&db.pool, &items).await.unwrap();
    assert_eq!(
        replay,
        [AlreadyApplied, DeadLettered, DeadLettered, AlreadyApplied]
    );
    assert_eq!(stored(&db).await, (2, 2, 2));
}

#[tokio::test]
async fn a_dead_letter_without_key_or_payload_is_stored_with_nulls() {
    let db = test_database().await;
    let mut empty = dead_letter(9);
    empty.key = None;
    empty.payload = None;
    let outcomes = process_batch(&db.pool, &[BatchItem::DeadLetter(&empty)])
        .await
        .unwrap();
    assert_eq!(outcomes, [DeadLettered]);
    let nulls = db
        .scalar("SELECT count(*) FROM dead_letters WHERE record_key IS NULL AND payload IS NULL")
        .await;
    assert_eq!(nulls, 1);
}

#[tokio::test]
async fn a_failing_statement_fails_the_whole_batch_and_stores_nothing_of_it() {
    let db = test_database_with(1).await;
    let good: Vec<TicketEvent> = (0..3).map(event).collect();
    // PostgreSQL text cannot hold NUL: the history insert fails after the markers went in.
    let broken = event(9).with_ticket_id("nul\u{0}byte");
    let letter = dead_letter(8);
    let mut items = events_at(&good, 0);
    items.push(BatchItem::DeadLetter(&letter));
    items.push(BatchItem::Event {
        event: &broken,
        origin: at(9),
    });

    let failed = process_batch(&db.pool, &items).await;

    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(
        stored(&db).await,
        (0, 0, 0),
        "no marker, row or dead letter"
    );
    // The only pooled connection came back outside any transaction: the good part applies.
    items.pop();
    let retried = process_batch(&db.pool, &items).await.unwrap();
    assert_eq!(retried, [Applied, Applied, Applied, DeadLettered]);
    assert_eq!(stored(&db).await, (3, 3, 1));
}

#[tokio::test]
async fn a_batchs_markers_history_rows_and_dead_letters_are_written_by_one_transaction() {
    // The history rows, the dead letters and COMMIT go out together, behind the markers: the
    // rows' xmin (the id of the transaction that wrote them) shows that none of them ran in a
    // transaction of its own, as it would if COMMIT overtook a write.
    let db = test_database_with(1).await;
    let events: Vec<TicketEvent> = (0..20).map(event).collect();
    let letter = dead_letter(30);
    let mut items = events_at(&events, 0);
    items.push(BatchItem::DeadLetter(&letter));
    let outcomes = process_batch(&db.pool, &items).await.unwrap();
    assert_eq!(outcomes.iter().filter(|o| **o == Applied).count(), 20);
    let writers = db
        .scalar(
            "SELECT count(DISTINCT xmin::text) FROM \
             (SELECT xmin FROM inbox UNION ALL SELECT xmin FROM history_events \
              UNION ALL SELECT xmin FROM dead_letters) AS rows",
        )
        .await;
    assert_eq!(writers, 1);
    assert_eq!(stored(&db).await, (20, 20, 1));
}

#[tokio::test]
async fn a_failing_dead_letter_insert_fails_the_whole_batch_and_stores_nothing_of_it() {
    let db = test_database_with(1).await;
    let events: Vec<TicketEvent> = (0..3).map(event).collect();
    // PostgreSQL text cannot hold NUL: the dead-letter insert fails beside the history rows.
    let mut broken = dead_letter(8);
    broken.rejection.message = "nul\u{0}byte".into();
    let mut items = events_at(&events, 0);
    items.push(BatchItem::DeadLetter(&broken));

    let failed = process_batch(&db.pool, &items).await;

    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(stored(&db).await, (0, 0, 0));
    // The only pooled connection came back outside any transaction.
    items.pop();
    let retried = process_batch(&db.pool, &items).await.unwrap();
    assert_eq!(retried, [Applied, Applied, Applied]);
    assert_eq!(stored(&db).await, (3, 3, 0));
}

#[tokio::test]
async fn a_failed_commit_is_an_error_and_stores_nothing_of_the_batch() {
    let db = test_database_with(1).await;
    // A deferred constraint trigger makes COMMIT itself fail for one ticket.
    Trigger::at_commit("refuse_at_commit", "history_events")
        .refusing("NEW.ticket_id = 'refused'", "'refused at commit'")
        .install(&db)
        .await;
    let refused = event(2).with_ticket_id("refused");
    let events = [event(1), refused];
    let letter = dead_letter(5);
    let mut items = events_at(&events, 0);
    items.push(BatchItem::DeadLetter(&letter));

    let failed = process_batch(&db.pool, &items).await;

    let error = failed.expect_err("the commit fails");
    let text = history_consumer::error_text::chain(&error);
    assert!(text.contains("refused at commit"), "{text}");
    assert_eq!(stored(&db).await, (0, 0, 0));
    let retried = process_batch(&db.pool, &items[..1]).await.unwrap();
    assert_eq!(retried, [Applied]);
}

#[tokio::test]
async fn a_batch_of_500_events_with_duplicates_gives_exactly_the_right_counts() {
    let db = test_database().await;
    // Events 0..50 are stored beforehand.
    let earlier: Vec<TicketEvent> = (0..50).map(event).collect();
    process_batch(&db.pool, &events_at(&earlier, 0))
        .await
        .unwrap();
    // 500 records: every tenth (i % 10 == 9) repeats the event nine records earlier, so 450
    // distinct events; 45 of them (i < 50) are among the stored ones.
    let events: Vec<TicketEvent> = (0..500)
        .map(|i| event(if i % 10 == 9 { i - 9 } else { i }))
        .collect();
    let items = events_at(&events, 1000);

    let started = Instant::now();
    let outcomes = process_batch(&db.pool, &items).await.unwrap();
    let elapsed = started.elapsed();
    eprintln!("a batch of 500 events took {elapsed:?}");

    assert_eq!(outcomes.len(), 500);
    assert_eq!(count(&outcomes, Applied), 450 - 45);
    // The 45 stored events, the 5 repeats of them and the 45 repeats of events this batch
    // applied.
    assert_eq!(count(&outcomes, AlreadyApplied), 45 + 5 + 45);
    assert_eq!(outcomes[9], AlreadyApplied);
    assert_eq!(outcomes[100], Applied);
    assert_eq!(outcomes[109], AlreadyApplied);
    assert_eq!(stored(&db).await, (50 + 405, 50 + 405, 0));
    assert_eq!(
        first_seen(&db, "event-00100").await.1,
        Some(1100),
        "the first occurrence's offset, not the repeat's (1109)"
    );
}

#[tokio::test]
async fn two_concurrent_batches_sharing_event_ids_apply_each_shared_id_exactly_once() {
    let db = test_database_with(4).await;
    for round in 0..5 {
        let base = round * 1000;
        // Shared ids 100..200, in opposite orders: unsorted inserts would lock them in opposite
        // orders and deadlock.
        let left: Vec<TicketEvent> = (base..base + 200).map(event).collect();
        let right: Vec<TicketEvent> = (base + 100..base + 300).rev().map(event).collect();
        let (left_items, right_items) = (events_at(&left, 0), events_at(&right, 0));

        let (left_outcomes, right_outcomes) =
            tokio::time::timeout(Duration::from_secs(30), async {
                tokio::join!(
                    process_batch(&db.pool, &left_items),
                    process_batch(&db.pool, &right_items)
                )
            })
            .await
            .expect("concurrent batches never wait on each other forever");
        let (left_outcomes, right_outcomes) = (left_outcomes.unwrap(), right_outcomes.unwrap());

        for (n, outcome) in (base..).zip(&left_outcomes) {
            if n >= base + 100 {
                let other = right_outcomes[base + 299 - n];
                assert!(
                    matches!(
                        (outcome, other),
                        (Applied, AlreadyApplied) | (AlreadyApplied, Applied)
                    ),
                    "event {n}: {outcome:?} and {other:?}"
                );
            } else {
                assert_eq!(*outcome, Applied);
            }
        }
        assert_eq!(
            count(&right_outcomes[..100], Applied),
            100,
            "right-only ids"
        );
    }
    assert_eq!(stored(&db).await, (5 * 300, 5 * 300, 0));
}

/// A partition's next batch runs while its previous one commits (`--batches-in-flight`): when
/// both hold the same event id, the later one waits at the inbox's unique index for the earlier
/// transaction and takes the outcome it leaves. One row either way.
#[tokio::test]
async fn a_batch_meeting_an_earlier_batchs_uncommitted_event_takes_the_outcome_it_leaves() {
    let db = test_database_with(2).await;
    let earlier_pool = history_consumer::db::pool(&db.url, 1).unwrap();
    for earlier_commits in [true, false] {
        let (shared, own) = if earlier_commits {
            (event(1), event(2))
        } else {
            (event(3), event(4))
        };
        // The earlier batch: the shared event's marker and history row, not yet committed.
        let earlier = earlier_pool.get().await.unwrap();
        earlier
            .batch_execute(&format!(
                "BEGIN; \
                 INSERT INTO inbox (event_id, first_partition, first_offset) \
                     VALUES ('{id}', 3, 10); \
                 INSERT INTO history_events (event_id, ticket_id, from_status, to_status, changed_at) \
                     VALUES ('{id}', 'ticket-1', 'open', 'resolved', now())",
                id = shared.event_id()
            ))
            .await
            .unwrap();
        let later = [shared.clone(), own.clone()];
        let items = events_at(&later, 20);
        let running = process_batch(&db.pool, &items);
        tokio::pin!(running);
        let waited = tokio::time::timeout(Duration::from_millis(300), &mut running).await;
        assert!(waited.is_err(), "the later batch waits for the earlier one");
        let end = if earlier_commits {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        earlier.batch_execute(end).await.unwrap();
        let outcomes = tokio::time::timeout(Duration::from_secs(10), running)
            .await
            .expect("the later batch goes on once the earlier one ended")
            .unwrap();
        let (first_partition, first_offset, _) = first_seen(&db, shared.event_id()).await;
        if earlier_commits {
            assert_eq!(outcomes, [AlreadyApplied, Applied]);
            assert_eq!((first_partition, first_offset), (Some(3), Some(10)));
        } else {
            assert_eq!(outcomes, [Applied, Applied]);
            assert_eq!((first_partition, first_offset), (Some(3), Some(20)));
        }
        let rows: i64 = db
            .scalar(&format!(
                "SELECT count(*) FROM history_events WHERE event_id = '{}'",
                shared.event_id()
            ))
            .await;
        assert_eq!(rows, 1, "one row for the shared event ({end})");
    }
    assert_eq!(stored(&db).await, (4, 4, 0));
}

/// The ids an earlier batch of the partition may still hold are inserted last: while the later
/// batch waits for the shared id, it already holds the markers of its own ids (another insert
/// of one of them has to wait for it). Without that hint the shared id, sorting first, holds
/// up the whole insert and nothing of the later batch is held yet. The outcomes are the same.
#[tokio::test]
async fn a_batch_inserts_the_ids_an_earlier_open_batch_may_hold_after_its_own() {
    let db = test_database_with(2).await;
    let earlier_pool = history_consumer::db::pool(&db.url, 1).unwrap();
    let probe_pool = history_consumer::db::pool(&db.url, 1).unwrap();
    for (round, hinted) in [(0, true), (1, false)] {
        let (shared, own) = (event(10 * round + 1), event(10 * round + 2));
        let earlier = earlier_pool.get().await.unwrap();
        earlier
            .batch_execute(&format!(
                "BEGIN; INSERT INTO inbox (event_id, first_partition, first_offset) \
                     VALUES ('{}', 3, 10)",
                shared.event_id()
            ))
            .await
            .unwrap();
        let later = [shared.clone(), own.clone()];
        let items = events_at(&later, 20);
        let elsewhere = if hinted {
            HeldElsewhere::new(vec![shared.id_hash()])
        } else {
            HeldElsewhere::default()
        };
        let running = process_batch_telling(
            &db.pool,
            &items,
            MarkersHeld::default(),
            &elsewhere,
            Shape::OneRoundTrip,
        );
        tokio::pin!(running);
        let waited = tokio::time::timeout(Duration::from_millis(300), &mut running).await;
        assert!(waited.is_err(), "the later batch waits for the earlier one");

        // Does the later batch hold its own id's marker while it waits?
        let probe = probe_pool.get().await.unwrap();
        probe
            .batch_execute("BEGIN; SET LOCAL lock_timeout = '200ms'")
            .await
            .unwrap();
        let inserted = probe
            .execute(
                "INSERT INTO inbox (event_id, first_partition, first_offset) VALUES ($1, 3, 99)",
                &[&own.event_id()],
            )
            .await;
        probe.batch_execute("ROLLBACK").await.unwrap();
        if hinted {
            let error = inserted.expect_err("the later batch holds its own id's marker");
            assert_eq!(
                error.code(),
                Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
            );
        } else {
            assert_eq!(
                inserted.unwrap(),
                1,
                "nothing of the later batch is held yet"
            );
        }

        earlier.batch_execute("COMMIT").await.unwrap();
        let outcomes = tokio::time::timeout(Duration::from_secs(10), running)
            .await
            .expect("the later batch goes on once the earlier one ended")
            .unwrap();
        assert_eq!(outcomes, [AlreadyApplied, Applied], "hinted: {hinted}");
        assert_eq!(first_seen(&db, own.event_id()).await.1, Some(21));
    }
    assert_eq!(stored(&db).await, (4, 2, 0));
}

#[tokio::test]
async fn a_batch_cancelled_mid_transaction_never_hands_its_transaction_to_the_next_user() {
    let db = test_database_with(1).await;
    // Another session holds event 1's marker uncommitted, so the batch waits inside its
    // transaction until it is cancelled.
    let blocker_pool = history_consumer::db::pool(&db.url, 1).unwrap();
    let blocker = blocker_pool.get().await.unwrap();
    blocker
        .batch_execute("BEGIN; INSERT INTO inbox (event_id) VALUES ('event-00001')")
        .await
        .unwrap();
    let events = [event(1)];
    let items = events_at(&events, 0);
    let cancelled =
        tokio::time::timeout(Duration::from_millis(300), process_batch(&db.pool, &items)).await;
    assert!(cancelled.is_err(), "the batch was waiting on the marker");
    blocker.batch_execute("ROLLBACK").await.unwrap();

    // The cancelled batch had sent its COMMIT behind its statement (one round trip), so its
    // server session, unblocked, may still commit: the next batch then finds the event stored
    // (AlreadyApplied), or, inserting first, stores it itself (Applied). With the cancelled
    // session handed on instead, its uncommitted marker would make this a false AlreadyApplied
    // and the event would be lost with the rollback: one row either way is the point.
    let outcomes = process_batch(&db.pool, &items).await.unwrap();
    assert!(
        outcomes == [Applied] || outcomes == [AlreadyApplied],
        "{outcomes:?}"
    );
    assert_eq!(stored(&db).await, (1, 1, 0));
}

#[tokio::test]
async fn an_empty_batch_touches_no_database() {
    let unreachable = history_consumer::db::pool("postgres://nobody@127.0.0.1:1/nothing", 1)
        .expect("a pool is built without connecting");
    assert_eq!(process_batch(&unreachable, &[]).await.unwrap(), []);
}

/// A unit of work for one event delivered at `offset`.
fn work(event: &TicketEvent, offset: i64) -> Work {
    Work::Event {
        event: event.clone(),
        origin: at(offset),
        timestamp: None,
        key: None,
        payload: Payload::Apart(None),
    }
}

/// How a unit's events are copied for the partition's memory.
#[derive(Clone, Copy)]
enum Copied {
    /// As it starts (a first pass).
    First,
    /// Once its transaction committed (a retry).
    After,
}

/// Runs `deliveries` as one unit of work with the partition's memory `applied`, its events
/// `copied` as said; returns each delivery's duplicate cause as the unit gave it, after
/// checking that the database, asked afterwards about the same deliveries, gives the same
/// causes.
async fn causes_of(
    db: &TestDb,
    deliveries: &[Work],
    applied: &RefCell<RecentlyApplied>,
    copied: Copied,
) -> Vec<Option<DuplicateCause>> {
    let policy = Policy {
        topic: "ticket-status",
        timeout: Duration::from_secs(30),
        max_consecutive_rejections: 10,
    };
    let works: Vec<&Work> = deliveries.iter().collect();
    let executed = execute_batch(
        &db.pool,
        &works,
        match copied {
            Copied::First => Some(Copies::of(works.iter().map(|work| work.event_at()))),
            Copied::After => None,
        },
        &policy,
        applied,
        Default::default(),
        &Default::default(),
        Shape::default(),
    )
    .await;
    let given: Vec<Option<DuplicateCause>> = executed.iter().map(|e| e.duplicate).collect();
    let duplicates: Vec<(&TicketEvent, Origin)> = deliveries
        .iter()
        .zip(&given)
        .filter(|(_, cause)| cause.is_some())
        .map(|(work, _)| match work {
            Work::Event { event, origin, .. } => (event, *origin),
            Work::DeadLetter { .. } => unreachable!("a dead letter has no duplicate cause"),
        })
        .collect();
    let asked = classify_many(&db.pool, &duplicates).await.unwrap();
    let given_to_duplicates: Vec<DuplicateCause> = given.iter().flatten().copied().collect();
    assert_eq!(given_to_duplicates, asked, "the database's own answer");
    given
}

#[tokio::test]
async fn a_duplicate_is_given_the_same_cause_whether_its_first_copy_is_in_its_batch_or_stored() {
    let db = test_database().await;
    let (old, new) = (event(1), event(2));
    let conflicting = new.with_to_status("closed");
    process_batch(&db.pool, &events_at(std::slice::from_ref(&old), 10))
        .await
        .unwrap();
    let applied = RefCell::default();

    // Event 1 stored before (asked of the database); event 2's first copy in this batch.
    let batch = [
        work(&old, 10),
        work(&new, 20),
        work(&old, 21),
        work(&new, 22),
        work(&conflicting, 23),
    ];
    assert_eq!(
        causes_of(&db, &batch, &applied, Copied::First).await,
        [
            Some(Redelivery),
            None,
            Some(Republish),
            Some(Republish),
            Some(Conflicting)
        ]
    );

    // A later batch, copied once it committed (as a retry is): event 2's first copy is
    // remembered as applied, event 1's is not.
    let later = [
        work(&new, 20),
        work(&new, 30),
        work(&conflicting, 31),
        work(&old, 32),
    ];
    assert_eq!(
        causes_of(&db, &later, &applied, Copied::After).await,
        [
            Some(Redelivery),
            Some(Republish),
            Some(Conflicting),
            Some(Republish)
        ]
    );
    assert_eq!(applied.borrow().len(), 1, "only event 2 was applied here");
    assert_eq!(stored(&db).await, (2, 2, 0));
}

#[tokio::test]
async fn one_event_at_a_time_remembers_what_it_applied_and_classifies_from_it() {
    // B = 1, and the isolation of a failed batch's records, run the §4 transaction itself.
    let db = test_database().await;
    let (first, second) = (event(1), event(2));
    let applied = RefCell::default();
    assert_eq!(
        causes_of(&db, &[work(&first, 10)], &applied, Copied::First).await,
        [None]
    );
    assert_eq!(
        causes_of(&db, &[work(&second, 11)], &applied, Copied::After).await,
        [None]
    );
    assert_eq!(applied.borrow().len(), 2);
    assert_eq!(
        applied
            .borrow_mut()
            .settle(Copies::of([Some((&first, at(12)))].into_iter()), &[], &[0]),
        [Some(Republish)],
        "remembered, so its duplicates need no query"
    );
    assert_eq!(
        causes_of(&db, &[work(&first, 10)], &applied, Copied::First).await,
        [Some(Redelivery)]
    );
    assert_eq!(
        causes_of(&db, &[work(&second, 12)], &applied, Copied::After).await,
        [Some(Republish)]
    );
    assert_eq!(stored(&db).await, (2, 2, 0));
}
