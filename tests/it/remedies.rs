//! The operator's remedies for poison records over the JSON API, with their audit rows:
//! dead-letter a record that blocks its partition (a skip), and replay dead letters — one, or
//! every letter of a filter — back through the inbox transaction once the cause is fixed.

use std::time::Duration;

use serde_json::Value;

use crate::poison::dead_letters;
use crate::support::app::{TestApp, spawn_app, spawn_app_with, test_settings};
use crate::support::faults::{Trigger, held_poison, refuse_rows, stop_refusing};
use crate::support::helpers::{TestDb, test_database, unique_name, wait_for};
use crate::support::http::{Response, get, post_form, request};
use crate::support::kafka::{TestKafka, numbered_event, payload, point_in_time};

use crate::support::app::ADMIN_TOKEN as TOKEN;

fn addr(app: &TestApp) -> String {
    app.handle.admin_addr.to_string()
}

async fn post_api(addr: &str, path: &str, body: &str) -> Response {
    let bearer = format!("Bearer {TOKEN}");
    request(
        addr,
        "POST",
        path,
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        body,
    )
    .await
}

/// The latest audit rows, newest first.
async fn audit(addr: &str) -> Vec<Value> {
    let response = get(addr, "/api/actions").await;
    assert_eq!(response.status, 200, "{}", response.body);
    response.json()["actions"]
        .as_array()
        .cloned()
        .expect("an actions array")
}

async fn history_rows(db: &TestDb, event_id: &str) -> i64 {
    let client = db.pool.get().await.unwrap();
    client
        .query_one(
            "SELECT count(*) FROM history_events WHERE event_id = $1",
            &[&event_id],
        )
        .await
        .unwrap()
        .get(0)
}

pub fn poison() -> Vec<u8> {
    payload(
        "event-poison",
        "poison",
        "open",
        "resolved",
        "2026-10-03T08:00:00Z",
    )
}

#[actix_web::test]
async fn an_operator_dead_letters_a_blocking_record_through_the_api_and_the_partition_commits_past_it()
 {
    let db = test_database().await;
    held_poison().install(&db).await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    for body in [numbered_event(0), poison(), numbered_event(1)] {
        kafka.send(&producer, Some(0), "k", &body).await;
    }
    wait_for(Duration::from_secs(30), "the poison to block", || async {
        let actor = app.partition(0).await?.actor?;
        (actor.counts.applied == 2 && actor.backlog.len() == 1).then_some(())
    })
    .await;
    app.wait_committed(&kafka, &[1]).await;
    let addr = addr(&app);
    let path = "/api/partitions/0/backlog/1/dead-letter";
    let comment = r#"{"comment": "ticket poison is a test ticket, INC-42"}"#;

    let anonymous = request(&addr, "POST", path, &[], comment).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    for (body, status, message) in [
        ("", 400, "must be JSON"),
        ("{}", 400, "a comment is required"),
        (r#"{"comment": "   "}"#, 400, "a comment is required"),
    ] {
        let refused = post_api(&addr, path, body).await;
        assert_eq!(refused.status, status, "{body}: {}", refused.body);
        assert!(refused.body.contains(message), "{}", refused.body);
    }
    let resolved = post_api(&addr, "/api/partitions/0/backlog/0/dead-letter", comment).await;
    assert_eq!(resolved.status, 404, "{}", resolved.body);
    assert!(resolved.body.contains("not in the Unknown backlog"));
    let foreign = post_api(&addr, "/api/partitions/7/backlog/1/dead-letter", comment).await;
    assert_eq!(foreign.status, 409, "{}", foreign.body);

    let skipped = post_api(&addr, path, comment).await;
    assert_eq!(skipped.status, 200, "{}", skipped.body);
    let skipped = skipped.json();
    assert_eq!(skipped["outcome"], "done", "{skipped}");
    assert!(
        skipped["result"]
            .as_str()
            .unwrap()
            .starts_with("dead-lettered: stored in dead_letters as skipped_by_operator"),
        "{skipped}"
    );
    app.wait_committed(&kafka, &[3]).await;
    // The API's numbers agree with each other: the end of the partition is never below the
    // watermark, whatever the age of librdkafka's statistics, and the lag is measured to it.
    let summary = wait_for(Duration::from_secs(10), "the partition's end", || async {
        let summary = get(&addr, "/api/partitions/0").await.json();
        (summary["checkpoint"]["watermark"] == 3 && summary["end"].is_i64()).then_some(summary)
    })
    .await;
    let end = summary["end"].as_i64().unwrap();
    assert!(end >= 3, "{summary}");
    assert_eq!(
        summary["lag"].as_i64(),
        Some(end - summary["checkpoint"]["committed"].as_i64().unwrap_or(0)),
        "{summary}"
    );
    let letters = dead_letters(&db).await;
    assert_eq!(letters.len(), 1);
    let (offset, reason, message, bytes) = &letters[0];
    assert_eq!((*offset, reason.as_str()), (1, "skipped_by_operator"));
    assert!(
        message.starts_with("ticket poison is a test ticket, INC-42 (dead-lettered by api token from 127.0.0.1 after ")
            && message.contains("ticket poison is locked"),
        "{message}"
    );
    assert_eq!(bytes.as_deref(), Some(poison().as_slice()));
    assert_eq!(history_rows(&db, "event-poison").await, 0);
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 2);

    let actions = audit(&addr).await;
    let latest = &actions[0];
    assert_eq!(latest["action"], "dead_letter");
    assert_eq!(latest["partition"], 0);
    assert_eq!(latest["offset"], 1);
    assert_eq!(
        latest["result"], "done",
        "the skip's real outcome, not that it was asked"
    );
    assert_eq!(latest["detail"], "ticket poison is a test ticket, INC-42");
    let refusals: Vec<&str> = actions[1..]
        .iter()
        .map(|a| a["result"].as_str().unwrap())
        .collect();
    assert_eq!(
        refusals,
        ["not owned", "not in the backlog"],
        "refused actions that reached a partition are audited too"
    );
    app.shutdown().await;
}

#[actix_web::test]
async fn replaying_a_dead_letter_whose_cause_was_fixed_stores_it_once_and_records_its_state() {
    let db = test_database().await;
    refuse_rows(&db, "NEW.ticket_id = 'poison'").await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    for body in [numbered_event(0), poison()] {
        kafka.send(&producer, Some(0), "k", &body).await;
    }
    app.wait_committed(&kafka, &[2]).await;
    let addr = addr(&app);
    let path = "/api/dead-letters/0/1/replay";
    assert_eq!(request(&addr, "POST", path, &[], "").await.status, 401);
    let missing = post_api(&addr, "/api/dead-letters/0/9/replay", "").await;
    assert_eq!(missing.status, 404, "{}", missing.body);

    // Not fixed yet: still rejected, and nothing stored.
    let still = post_api(&addr, path, "").await;
    assert_eq!(still.status, 200, "{}", still.body);
    let still = still.json();
    assert_eq!(still["state"], "still_rejected");
    assert!(
        still["message"]
            .as_str()
            .unwrap()
            .contains("ticket poison is refused"),
        "{still}"
    );
    assert_eq!(history_rows(&db, "event-poison").await, 0);

    stop_refusing(&db).await;
    let applied = post_api(&addr, path, "").await.json();
    assert_eq!(applied["state"], "applied");
    assert_eq!(applied["message"], "stored by the replay");
    let again = post_api(&addr, path, "").await.json();
    assert_eq!(again["state"], "applied");
    assert_eq!(
        again["message"],
        "stored already (the replay was a duplicate)"
    );
    assert_eq!(history_rows(&db, "event-poison").await, 1, "stored once");
    let first_seen = db
        .scalar("SELECT first_offset FROM inbox WHERE event_id = 'event-poison'")
        .await;
    assert_eq!(first_seen, 1, "the letter's place is the event's origin");

    let listed = get(&addr, "/api/dead-letters?state=applied").await.json();
    let letter = &listed["dead_letters"][0];
    assert_eq!(letter["offset"], 1);
    assert_eq!(letter["state"], "applied");
    assert_eq!(letter["replayed_by"], "api token from 127.0.0.1");
    assert!(letter["replayed_at"].is_string());
    assert_eq!(
        get(&addr, "/api/dead-letters?state=new").await.json()["total"],
        0
    );
    let bad = get(&addr, "/api/dead-letters?state=lost").await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("unknown state"));

    let replays: Vec<Value> = audit(&addr)
        .await
        .into_iter()
        .filter(|a| a["action"] == "replay")
        .collect();
    let results: Vec<(&str, &str)> = replays
        .iter()
        .map(|a| {
            (
                a["result"].as_str().unwrap(),
                a["detail"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert_eq!(
        results[0],
        ("ok", "stored already (the replay was a duplicate)")
    );
    assert_eq!(results[1], ("ok", "stored by the replay"));
    assert!(results[2].1.starts_with("still rejected: "), "{results:?}");
    assert_eq!(results[3].0, "not found");
    app.shutdown().await;
}

#[actix_web::test]
async fn replaying_every_matching_dead_letter_replays_only_the_filter_and_counts_what_became_of_them()
 {
    let db = test_database().await;
    refuse_rows(&db, "NEW.ticket_id = 'poison'").await;
    let kafka = TestKafka::start(2);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(2).await;
    let producer = kafka.producer();
    let at = "2026-10-03T08:00:00Z";
    for partition in 0..2 {
        for i in 0..3 {
            let id = format!("event-poison-{partition}-{i}");
            let body = payload(&id, "poison", "open", "resolved", at);
            kafka.send(&producer, Some(partition), "k", &body).await;
        }
        kafka
            .send(&producer, Some(partition), "k", b"not json")
            .await;
    }
    app.wait_committed(&kafka, &[4, 4]).await;
    assert_eq!(dead_letters(&db).await.len(), 8);
    stop_refusing(&db).await;
    let addr = addr(&app);

    let future = post_api(&addr, "/api/dead-letters/replay?since=2999-01-01", "").await;
    assert_eq!(future.status, 200, "{}", future.body);
    assert_eq!(future.json()["replayed"], 0);
    let bad = post_api(&addr, "/api/dead-letters/replay?until=yesterday", "").await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("until must be a time"), "{}", bad.body);

    // Partition 0 only: three stored, its malformed record still rejected.
    let first = post_api(&addr, "/api/dead-letters/replay?partition=0", "").await;
    assert_eq!(first.status, 200, "{}", first.body);
    let first = first.json();
    assert_eq!(
        (
            &first["replayed"],
            &first["applied"],
            &first["still_rejected"],
            &first["more"]
        ),
        (
            &Value::from(4),
            &Value::from(3),
            &Value::from(1),
            &Value::from(false)
        )
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events WHERE event_id LIKE 'event-poison-0-%'")
            .await,
        3
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events WHERE event_id LIKE 'event-poison-1-%'")
            .await,
        0,
        "the other partition's letters were not replayed"
    );
    // Everything of the reason: partition 0's are applied already and not replayed again.
    let second = post_api(
        &addr,
        "/api/dead-letters/replay?reason=rejected_by_database",
        "",
    )
    .await
    .json();
    assert_eq!(
        (&second["replayed"], &second["applied"]),
        (&Value::from(3), &Value::from(3))
    );
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 6);
    assert_eq!(
        db.scalar("SELECT count(*) FROM dead_letters WHERE state = 'applied'")
            .await,
        6
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM dead_letters WHERE state = 'still_rejected'")
            .await,
        1
    );

    let matching: Vec<Value> = audit(&addr)
        .await
        .into_iter()
        .filter(|a| a["action"] == "replay_matching")
        .collect();
    assert_eq!(matching.len(), 3);
    assert_eq!(matching[0]["partition"], Value::Null);
    assert!(
        matching[0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("letters of reason rejected_by_database: 3 replayed: 3 stored"),
        "{}",
        matching[0]["detail"]
    );
    assert_eq!(matching[1]["partition"], 0);
    app.shutdown().await;
}

#[tokio::test]
async fn replaying_matching_letters_stops_at_its_limit_and_a_state_filter_goes_on_past_the_still_rejected()
 {
    use history_consumer::domain::{DeadLetter, LetterState, RejectReason, Rejection};
    use history_consumer::inbox::dead_letters::store;
    use history_consumer::inbox::replay::{Selection, replay_matching};

    let db = test_database().await;
    for offset in 0..5 {
        let letter = DeadLetter {
            topic: "tickets".into(),
            partition: 0,
            offset,
            key: None,
            payload: Some(b"not json".to_vec()),
            rejection: Rejection::new(RejectReason::NotJson, "payload is not JSON"),
        };
        store(&db.pool, &letter).await.unwrap();
    }
    let all = Selection::default();
    let first = replay_matching(&db.pool, &all, "test", 1024, 2)
        .await
        .unwrap();
    assert_eq!((first.still_rejected, first.more), (2, true));
    let only_new = Selection {
        state: Some(LetterState::New),
        ..Selection::default()
    };
    let second = replay_matching(&db.pool, &only_new, "test", 1024, 2)
        .await
        .unwrap();
    assert_eq!((second.still_rejected, second.more), (2, true));
    let third = replay_matching(&db.pool, &only_new, "test", 1024, 2)
        .await
        .unwrap();
    assert_eq!((third.still_rejected, third.more), (1, false));
    assert_eq!(
        db.scalar("SELECT count(*) FROM dead_letters WHERE state = 'still_rejected'")
            .await,
        5
    );
}

#[actix_web::test]
async fn the_remedy_forms_need_a_session_and_its_csrf_token_and_a_read_only_admin_offers_none() {
    let db = test_database().await;
    held_poison().install(&db).await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    for body in [poison(), b"not json".to_vec()] {
        kafka.send(&producer, Some(0), "k", &body).await;
    }
    wait_for(
        Duration::from_secs(30),
        "the poison held and the malformed record dead-lettered",
        || async {
            let actor = app.partition(0).await?.actor?;
            (actor.backlog.len() == 1 && actor.counts.dead_lettered == 1).then_some(())
        },
    )
    .await;
    let addr = addr(&app);
    let skip = "/partitions/0/backlog/0/dead-letter";
    let replay = "/dead-letters/0/1/replay";
    let replay_all = "/dead-letters/replay";
    let (cookie, csrf) = crate::admin::sign_in_to_act(&addr, 0).await;

    for path in [skip, replay, replay_all] {
        let form = "csrf=x&comment=why";
        let anonymous = post_form(&addr, path, None, form).await;
        assert_eq!(anonymous.status, 401, "{path}: {}", anonymous.body);
        let forged = post_form(&addr, path, Some(&cookie), form).await;
        assert_eq!(forged.status, 403, "{path}: {}", forged.body);
        assert!(forged.body.contains("CSRF"), "{path}: {}", forged.body);
        let missing = post_form(&addr, path, Some(&cookie), "comment=why").await;
        assert_eq!(missing.status, 403, "{path}: {}", missing.body);
    }
    // The API acts with the bearer token only, never with the session's cookie.
    let api = request(
        &addr,
        "POST",
        &format!("/api{replay}"),
        &[("Cookie", &cookie)],
        "",
    )
    .await;
    assert_eq!(api.status, 401, "{}", api.body);
    // Nothing happened, and what was refused before reaching a partition left no audit row.
    let actor = app.partition(0).await.unwrap().actor.unwrap();
    assert!(!actor.backlog[0].dead_letter_requested);
    assert_eq!(
        db.scalar("SELECT count(*) FROM dead_letters WHERE state = 'new'")
            .await,
        1
    );
    assert!(audit(&addr).await.is_empty());

    // The comment is checked by the server too, not only by the browser.
    let empty = post_form(
        &addr,
        skip,
        Some(&cookie),
        &format!("csrf={csrf}&comment=+"),
    )
    .await;
    assert_eq!(empty.status, 400, "{}", empty.body);
    assert!(
        empty.body.contains("a comment is required"),
        "{}",
        empty.body
    );
    // With the session and its token, each form acts and sends the browser back.
    let skipped = post_form(
        &addr,
        skip,
        Some(&cookie),
        &format!("csrf={csrf}&comment=a+test+ticket"),
    )
    .await;
    assert_eq!(skipped.status, 303, "{}", skipped.body);
    assert_eq!(
        skipped.header("location"),
        Some("/partitions/0?done=dead_letter&offset=0&outcome=done")
    );
    app.wait_committed(&kafka, &[2]).await;
    let replayed = post_form(&addr, replay, Some(&cookie), &format!("csrf={csrf}")).await;
    assert_eq!(replayed.status, 303, "{}", replayed.body);
    assert_eq!(
        replayed.header("location"),
        Some("/dead-letters?partition=0&replayed=1")
    );
    let all = post_form(
        &addr,
        replay_all,
        Some(&cookie),
        &format!("csrf={csrf}&partition=0&reason=not_json&state=&since=&until="),
    )
    .await;
    assert_eq!(all.status, 303, "{}", all.body);
    // Still not JSON, whatever the database says.
    assert_eq!(
        all.header("location"),
        Some("/dead-letters?partition=0&reason=not_json&summary=0.0.1.0")
    );
    let page = request(
        &addr,
        "GET",
        all.header("location").unwrap(),
        &[("Cookie", &cookie)],
        "",
    )
    .await;
    assert!(
        page.body
            .contains("Replayed 1: 0 stored by the replay, 0 stored already, 1 still rejected."),
        "{}",
        page.body
    );
    let actions: Vec<String> = audit(&addr)
        .await
        .iter()
        .map(|a| format!("{} {}", a["action"], a["result"]))
        .collect();
    assert_eq!(
        actions,
        [
            "\"replay_matching\" \"ok\"",
            "\"replay\" \"ok\"",
            "\"dead_letter\" \"done\""
        ]
    );
    app.shutdown().await;

    // Without a token the admin is read-only: no remedy is offered, and none is taken.
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.admin.token = None;
    let read_only = spawn_app_with(settings).await;
    read_only.wait_assigned(1).await;
    let addr = read_only.handle.admin_addr.to_string();
    wait_for(Duration::from_secs(30), "the poison held again", || async {
        let actor = read_only.partition(0).await?.actor?;
        (actor.backlog.len() == 1).then_some(())
    })
    .await;
    let partition = get(&addr, "/partitions/0").await.body;
    assert!(!partition.contains("/backlog/0/dead-letter"), "{partition}");
    let letters = get(&addr, "/dead-letters").await.body;
    assert!(
        !letters.contains("/replay") && letters.contains("poison"),
        "{letters}"
    );
    for path in [skip, replay, replay_all] {
        let refused = post_form(&addr, path, None, "csrf=x&comment=why").await;
        assert_eq!(refused.status, 403, "{path}: {}", refused.body);
    }
    read_only.shutdown().await;
}

// ----- what became of a skip ------------------------------------------------------------------

/// A trigger that refuses ticket `poison` with an error that may pass while `poison_gate` is
/// closed, and makes its INSERT wait while the test holds advisory lock 21: a retry of the
/// record can be caught in flight, and made to store the record or to fail again.
async fn gate_poison(db: &TestDb) {
    db.pool
        .get()
        .await
        .unwrap()
        .batch_execute(
            "CREATE TABLE poison_gate (open boolean NOT NULL); \
             INSERT INTO poison_gate VALUES (false);",
        )
        .await
        .unwrap();
    Trigger::before("gate_poison", "INSERT", "history_events")
        .running(
            "IF NEW.ticket_id = 'poison' THEN \
               PERFORM pg_advisory_xact_lock_shared(21); \
               IF NOT (SELECT open FROM poison_gate) THEN \
                 RAISE EXCEPTION 'ticket poison is locked' USING ERRCODE = 'lock_not_available'; \
               END IF; \
             END IF;",
        )
        .install(db)
        .await;
}

/// Holds advisory lock 21 until dropped: the poison's INSERT waits meanwhile.
struct Held(deadpool_postgres::Object);

impl Held {
    async fn take(db: &TestDb) -> Held {
        let client = db.pool.get().await.unwrap();
        client
            .execute("SELECT pg_advisory_lock(21)", &[])
            .await
            .unwrap();
        Held(client)
    }

    async fn release(self) {
        self.0
            .execute("SELECT pg_advisory_unlock(21)", &[])
            .await
            .unwrap();
    }
}

/// Starts the service with the poison blocking partition 0 at offset 1, caught in a retry that
/// waits for the lock the test holds.
async fn poison_caught_in_a_retry(db: &TestDb, kafka: &TestKafka) -> (TestApp, Held) {
    gate_poison(db).await;
    let app = spawn_app(db, kafka).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    for body in [numbered_event(0), poison(), numbered_event(1)] {
        kafka.send(&producer, Some(0), "k", &body).await;
    }
    wait_for(Duration::from_secs(30), "the poison to block", || async {
        let actor = app.partition(0).await?.actor?;
        (actor.counts.applied == 2 && actor.backlog.len() == 1).then_some(())
    })
    .await;
    let held = Held::take(db).await;
    wait_for(
        Duration::from_secs(10),
        "a retry to wait for the lock",
        || async {
            // pg_locks is the whole cluster's, and the other tests of this file wait for
            // lock 21 in their own databases at the same time: count this database's only, or
            // a retry seen waiting there lets this test ask for its skip between two retries.
            let waiting = db
                .scalar(
                    "SELECT count(*) FROM pg_locks \
                     WHERE locktype = 'advisory' AND NOT granted \
                       AND database = (SELECT oid FROM pg_database \
                                       WHERE datname = current_database())",
                )
                .await;
            (waiting > 0).then_some(())
        },
    )
    .await;
    (app, held)
}

/// Asks for the skip of offset 1 in the background; returns once the partition took it.
async fn skip_in_the_background(
    app: &TestApp,
    comment: &'static str,
) -> tokio::task::JoinHandle<Response> {
    let addr = addr(app);
    let skip = actix_web::rt::spawn(async move {
        let body = format!(r#"{{"comment": "{comment}"}}"#);
        post_api(&addr, "/api/partitions/0/backlog/1/dead-letter", &body).await
    });
    // An answer before the partition shows the request is a failure of its own: say what it was.
    let taken = wait_for(
        Duration::from_secs(30),
        "the skip to be requested",
        || async {
            let requested = app
                .partition(0)
                .await
                .and_then(|p| p.actor)
                .is_some_and(|a| a.backlog.first().is_some_and(|e| e.dead_letter_requested));
            (requested || skip.is_finished()).then_some(requested)
        },
    )
    .await;
    if !taken {
        let answer = skip.await.unwrap();
        panic!(
            "the skip was answered before its partition took it: {} {}",
            answer.status, answer.body
        );
    }
    skip
}

#[actix_web::test]
async fn a_skip_overtaken_by_a_retry_that_stores_the_record_is_answered_and_audited_as_overtaken() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let (app, held) = poison_caught_in_a_retry(&db, &kafka).await;
    // The cause is fixed while the retry waits: that retry stores the record.
    db.pool
        .get()
        .await
        .unwrap()
        .execute("UPDATE poison_gate SET open = true", &[])
        .await
        .unwrap();
    let skip = skip_in_the_background(&app, "overtaken on purpose").await;
    held.release().await;

    let answer = skip.await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer = answer.json();
    assert_eq!(answer["outcome"], "overtaken", "{answer}");
    assert!(
        answer["result"]
            .as_str()
            .unwrap()
            .starts_with("not dead-lettered: a retry stored it first"),
        "{answer}"
    );
    app.wait_committed(&kafka, &[3]).await;
    assert_eq!(history_rows(&db, "event-poison").await, 1);
    assert!(dead_letters(&db).await.is_empty(), "nothing set aside");
    let latest = &audit(&addr(&app)).await[0];
    assert_eq!(latest["action"], "dead_letter");
    assert_eq!(latest["result"], "overtaken", "{latest}");
    assert_eq!(latest["detail"], "overtaken on purpose");
    app.shutdown().await;
}

#[actix_web::test]
async fn a_skip_dropped_because_its_partition_was_taken_away_before_it_ran_is_answered_and_audited_as_dropped()
 {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let start = chrono::Utc::now() - chrono::Duration::hours(1);
    let (app, held) = poison_caught_in_a_retry(&db, &kafka).await;
    let skip = skip_in_the_background(&app, "dropped on purpose").await;
    // A live rewind drains the partition's actor (as a revoke does) while the retry waits:
    // the skip never runs there.
    let rewind = post_api(
        &addr(&app),
        &format!("/api/partitions/0/rewind?to={}", point_in_time(start)),
        "",
    )
    .await;
    assert_eq!(rewind.status, 200, "{}", rewind.body);

    let answer = skip.await.unwrap();
    assert_eq!(answer.status, 409, "{}", answer.body);
    assert!(
        answer
            .body
            .contains("not dead-lettered: the partition was revoked"),
        "{}",
        answer.body
    );
    held.release().await;
    assert!(dead_letters(&db).await.is_empty(), "nothing set aside");
    let latest = audit(&addr(&app))
        .await
        .into_iter()
        .find(|a| a["action"] == "dead_letter")
        .expect("the skip is audited");
    assert_eq!(latest["result"], "dropped", "{latest}");
    assert_eq!(latest["detail"], "dropped on purpose");
    // The new assignment holds the record again, to be set aside there if it must.
    wait_for(Duration::from_secs(30), "the poison held again", || async {
        let actor = app.partition(0).await?.actor?;
        (actor.backlog.len() == 1 && !actor.backlog[0].dead_letter_requested).then_some(())
    })
    .await;
    app.shutdown().await;
}

#[actix_web::test]
async fn a_skip_that_has_not_run_in_time_is_answered_as_pending_and_its_audit_row_gets_the_outcome_later()
 {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let (app, held) = poison_caught_in_a_retry(&db, &kafka).await;
    db.pool
        .get()
        .await
        .unwrap()
        .execute("UPDATE poison_gate SET open = true", &[])
        .await
        .unwrap();
    // The retry in flight waits longer than the skip is waited for.
    let skip = skip_in_the_background(&app, "pending on purpose").await;
    let answer = skip.await.unwrap();
    assert_eq!(answer.status, 202, "{}", answer.body);
    let answer = answer.json();
    assert_eq!(answer["outcome"], "pending", "{answer}");
    let addr = addr(&app);
    assert_eq!(audit(&addr).await[0]["result"], "pending");

    held.release().await;
    wait_for(
        Duration::from_secs(10),
        "the audit row to get the outcome",
        || async { (audit(&addr).await[0]["result"] == "overtaken").then_some(()) },
    )
    .await;
    app.wait_committed(&kafka, &[3]).await;
    app.shutdown().await;
}
