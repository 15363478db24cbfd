//! The guard against mass dead-lettering across restarts: during a database-wide rejection the
//! partition's guard is kept in the database, so a member restarted in process, killed with
//! `kill -9` or stopped with SIGTERM hands it to the next owner engaged. The dead letters stay
//! within the guard's bound in total (not once more per restart), and once the database takes
//! rows again the partitions flow and every event is stored once.

use std::time::Duration;

use history_consumer::domain::{DeadLetter, RejectReason, Rejection, UnknownCause};
use history_consumer::inbox::guards::{self, GuardRow, Verdict};
use history_consumer::inbox::replay::{Selection, replay_matching};
use serde_json::Value;

use crate::support::app::{TestApp, spawn_app_with, test_settings};
use crate::support::faults::{refuse_rows, stop_refusing};
use crate::support::helpers::{TestDb, assert_stored_once, test_database, unique_name, wait_for};
use crate::support::http::get;
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka, produce, wait_committed};
use crate::support::metrics;
use crate::support::metrics::value as metric;
use crate::support::service::ServiceProcess;

/// Records rejected in a row that one partition may dead-letter.
const LIMIT: u32 = 3;
const PARTITIONS: i32 = 2;
const EVENTS: usize = 20;
/// Records of each partition: all rejected while the trigger is there.
const PER_PARTITION: i64 = EVENTS as i64 / PARTITIONS as i64;

async fn rejected_letters(db: &TestDb) -> i64 {
    db.scalar("SELECT count(*) FROM dead_letters WHERE reason = 'rejected_by_database'")
        .await
}

/// Every event stored once: the ones the consumer stored, and the dead letters replayed.
async fn replay_and_assert_every_event_stored_once(db: &TestDb) {
    let selection = Selection {
        reason: Some("rejected_by_database".into()),
        ..Selection::default()
    };
    let summary = replay_matching(&db.pool, &selection, "test", 256 * 1024, 1000)
        .await
        .expect("the replay runs");
    assert_eq!(summary.applied, (LIMIT as u64) * PARTITIONS as u64);
    assert_stored_once(db, EVENTS).await;
}

// ----- in process: two graceful restarts -----------------------------------------------------

on_both_brokers!(the_dead_letter_guard_stays_engaged_across_two_restarts_in_process);

/// Waits until every partition of `app` holds its rejected records with the guard engaged.
async fn wait_held(app: &TestApp) {
    let partitions = wait_for(
        Duration::from_secs(60),
        "every partition to hold its rejected records",
        || async {
            let status = app.status().await;
            let actors: Vec<_> = status
                .partitions
                .iter()
                .filter_map(|p| p.actor.clone())
                .collect();
            let held = actors.len() == PARTITIONS as usize
                && actors.iter().all(|a| {
                    a.guard.engaged
                        && a.backlog.len() as i64 == PER_PARTITION - LIMIT as i64
                        && a.backlog.iter().all(|e| e.cause == UnknownCause::Rejected)
                });
            held.then_some(actors)
        },
    )
    .await;
    for actor in partitions {
        assert_eq!(actor.guard.limit, LIMIT);
        assert_eq!(actor.guard.dead_lettered, LIMIT, "{:?}", actor.guard);
    }
}

async fn the_dead_letter_guard_stays_engaged_across_two_restarts_in_process(broker: Broker) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, PARTITIONS).await;
    let group = unique_name("group");
    let settings = || {
        let mut settings = test_settings(&db.url, &kafka, &group);
        settings.runtime.max_consecutive_rejections = LIMIT;
        settings
    };
    // A trigger gone wrong: every row is refused.
    refuse_rows(&db, "true").await;
    produce(&kafka, 0..EVENTS).await;
    let mut app = spawn_app_with(settings()).await;
    app.wait_assigned(PARTITIONS as usize).await;
    wait_held(&app).await;
    assert_eq!(
        rejected_letters(&db).await,
        (LIMIT * PARTITIONS as u32) as i64
    );

    for restart in 1..=2 {
        app.shutdown().await;
        app = spawn_app_with(settings()).await;
        app.wait_assigned(PARTITIONS as usize).await;
        // Engaged from the start: read from the database, not learned again by dead-lettering
        // another LIMIT records of each partition.
        wait_for(
            Duration::from_secs(10),
            "the new member to show the guard engaged",
            || async {
                let status = app.status().await;
                let engaged = status
                    .partitions
                    .iter()
                    .filter_map(|p| p.actor.as_ref())
                    .filter(|a| a.guard.engaged)
                    .count();
                (engaged == PARTITIONS as usize).then_some(())
            },
        )
        .await;
        assert_eq!(
            rejected_letters(&db).await,
            (LIMIT * PARTITIONS as u32) as i64,
            "restart {restart}: engaged before dead-lettering more"
        );
        for partition in 0..PARTITIONS {
            let series =
                format!("history_partition_dead_letter_guard_engaged{{partition=\"{partition}\"}}");
            assert_eq!(metrics::of(&app, &series), Some(1.0), "restart {restart}");
        }
        // The overview and the partition page say so.
        let addr = app.handle.admin_addr.to_string();
        let summary = wait_for(
            Duration::from_secs(10),
            "the partition to be stuck",
            || async {
                let summary = get(&addr, "/api/partitions/0").await.json();
                (summary["state"] == "stuck").then_some(summary)
            },
        )
        .await;
        assert_eq!(summary["stuck"]["kind"], "rejections_held", "{summary}");
        let page = get(&addr, "/partitions/0").await.body;
        assert!(
            page.contains("id=\"guard\">Dead-letter guard engaged since "),
            "{page}"
        );
        wait_held(&app).await;
        assert_eq!(
            rejected_letters(&db).await,
            (LIMIT * PARTITIONS as u32) as i64,
            "restart {restart}: the dead letters stay within the guard's bound"
        );
    }

    // The DBA drops the trigger: the held records are stored, the guard lets go.
    stop_refusing(&db).await;
    let ends = vec![PER_PARTITION; PARTITIONS as usize];
    app.wait_committed(&kafka, &ends).await;
    let released = wait_for(Duration::from_secs(10), "the guard to let go", || async {
        let status = app.status().await;
        status
            .partitions
            .iter()
            .filter_map(|p| p.actor.as_ref())
            .all(|a| !a.guard.engaged && a.guard.dead_lettered == 0)
            .then_some(())
    })
    .await;
    let () = released;
    assert_eq!(
        db.scalar("SELECT count(*) FROM partition_guards WHERE dead_lettered > 0 OR engaged_at IS NOT NULL")
            .await,
        0,
        "released in the database too"
    );
    assert_eq!(
        rejected_letters(&db).await,
        (LIMIT * PARTITIONS as u32) as i64
    );
    app.shutdown().await;
    replay_and_assert_every_event_stored_once(&db).await;
}

// ----- the binary: kill -9, then SIGTERM -----------------------------------------------------

on_both_brokers!(the_dead_letter_guard_stays_engaged_when_the_binary_is_killed_and_then_stopped);

/// The partitions of a member's `/api/status` once it owns all of them.
async fn actors_of(service: &ServiceProcess) -> Option<Vec<Value>> {
    let status = service.get_json("/api/status").await?;
    let actors: Vec<Value> = status["partitions"]
        .as_array()?
        .iter()
        .filter_map(|p| p.get("actor").filter(|a| a.is_object()).cloned())
        .collect();
    (actors.len() == PARTITIONS as usize).then_some(actors)
}

/// Waits until every partition of `service` holds its rejected records with the guard engaged
/// and the metric says so. With `inherited`, the guard must be engaged before the member
/// dead-lettered anything more: read from the database when its actors started.
async fn wait_held_by(service: &ServiceProcess, kafka: &TestKafka, db: &TestDb, inherited: bool) {
    if inherited {
        wait_for(
            kafka.join_deadline() + Duration::from_secs(30),
            "the new member to show the guard engaged",
            || async {
                let actors = actors_of(service).await?;
                actors
                    .iter()
                    .all(|a| a["guard"]["engaged"] == true)
                    .then_some(())
            },
        )
        .await;
        assert_eq!(
            rejected_letters(db).await,
            (LIMIT * PARTITIONS as u32) as i64,
            "engaged before dead-lettering more"
        );
    }
    let actors = wait_for(
        kafka.join_deadline() + Duration::from_secs(60),
        "every partition to hold its rejected records",
        || async {
            let actors = actors_of(service).await?;
            actors
                .iter()
                .all(|a| {
                    let backlog = a["backlog"].as_array().cloned().unwrap_or_default();
                    a["guard"]["engaged"] == true
                        && backlog.len() as i64 == PER_PARTITION - LIMIT as i64
                        && backlog.iter().all(|e| e["cause"] == "rejected")
                })
                .then_some(actors)
        },
    )
    .await;
    for actor in actors {
        assert_eq!(actor["guard"]["dead_lettered"], LIMIT, "{actor}");
    }
    let metrics = reqwest::get(format!("http://{}/metrics", service.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for partition in 0..PARTITIONS {
        let series =
            format!("history_partition_dead_letter_guard_engaged{{partition=\"{partition}\"}}");
        assert_eq!(
            metric(&metrics, &series),
            Some(1.0),
            "{series} in\n{metrics}"
        );
    }
}

async fn the_dead_letter_guard_stays_engaged_when_the_binary_is_killed_and_then_stopped(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, PARTITIONS).await;
    let group = unique_name("group");
    let limit = LIMIT.to_string();
    let args = [
        "--max-consecutive-rejections",
        &limit,
        "--retry-max",
        "500ms",
    ];
    let spawn = || ServiceProcess::spawn_with(&db.url, &kafka.brokers, &kafka.topic, &group, &args);
    refuse_rows(&db, "true").await;
    produce(&kafka, 0..EVENTS).await;

    let mut first = spawn();
    wait_held_by(&first, &kafka, &db, false).await;
    assert_eq!(
        rejected_letters(&db).await,
        (LIMIT * PARTITIONS as u32) as i64
    );
    first.kill_9();

    let mut second = spawn();
    wait_held_by(&second, &kafka, &db, true).await;
    assert_eq!(
        rejected_letters(&db).await,
        (LIMIT * PARTITIONS as u32) as i64,
        "after kill -9: the dead letters stay within the guard's bound"
    );
    second.sigterm();
    assert_eq!(second.wait_exit(Duration::from_secs(30)).await, Some(0));

    let mut third = spawn();
    wait_held_by(&third, &kafka, &db, true).await;
    assert_eq!(
        rejected_letters(&db).await,
        (LIMIT * PARTITIONS as u32) as i64,
        "after SIGTERM: the dead letters stay within the guard's bound"
    );

    stop_refusing(&db).await;
    let ends = vec![PER_PARTITION; PARTITIONS as usize];
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    wait_for(Duration::from_secs(10), "the guard to let go", || async {
        let actors = actors_of(&third).await?;
        actors
            .iter()
            .all(|a| a["guard"]["engaged"] == false)
            .then_some(())
    })
    .await;
    third.sigterm();
    assert_eq!(third.wait_exit(Duration::from_secs(30)).await, Some(0));
    assert_eq!(
        rejected_letters(&db).await,
        (LIMIT * PARTITIONS as u32) as i64
    );
    replay_and_assert_every_event_stored_once(&db).await;
}

// ----- the transaction that decides ----------------------------------------------------------

fn rejected(offset: i64) -> DeadLetter {
    DeadLetter {
        topic: "tickets".into(),
        partition: 4,
        offset,
        key: None,
        payload: Some(b"{}".to_vec()),
        rejection: Rejection::new(RejectReason::RejectedByDatabase, "refused"),
    }
}

#[tokio::test]
async fn two_owners_dead_lettering_one_partition_at_once_never_pass_the_guards_bound() {
    let db = test_database().await;
    let letters: Vec<DeadLetter> = (0..12).map(rejected).collect();
    let verdicts = futures::future::join_all(
        letters
            .iter()
            .map(|letter| guards::dead_letter_rejected(&db.pool, letter, LIMIT)),
    )
    .await;
    let counted = verdicts
        .iter()
        .filter(|v| matches!(v, Ok(Verdict::DeadLettered { counted: true, .. })))
        .count();
    let held = verdicts
        .iter()
        .filter(|v| matches!(v, Ok(Verdict::Held { .. })))
        .count();
    assert_eq!(
        (counted, held),
        (LIMIT as usize, 12 - LIMIT as usize),
        "{verdicts:?}"
    );
    assert_eq!(rejected_letters(&db).await, LIMIT as i64);
    let row = guards::load(&db.pool, "tickets", 4).await.unwrap();
    assert_eq!(row.dead_lettered, LIMIT);
    assert!(row.engaged());
    assert_eq!(
        guards::load(&db.pool, "tickets", 5).await.unwrap(),
        GuardRow::default(),
        "another partition has a guard of its own"
    );
}

#[tokio::test]
async fn a_rejected_record_delivered_again_finds_its_dead_letter_and_is_counted_once() {
    let db = test_database().await;
    let first = guards::dead_letter_rejected(&db.pool, &rejected(0), LIMIT).await;
    assert!(matches!(
        first,
        Ok(Verdict::DeadLettered { counted: true, .. })
    ));
    let again = guards::dead_letter_rejected(&db.pool, &rejected(0), LIMIT).await;
    assert!(
        matches!(again, Ok(Verdict::DeadLettered { counted: false, guard }) if guard.dead_lettered == 1),
        "{again:?}"
    );
    for offset in 1..LIMIT as i64 {
        guards::dead_letter_rejected(&db.pool, &rejected(offset), LIMIT)
            .await
            .unwrap();
    }
    // At the bound, a record with a letter already is still resolved by it: not held.
    let at_bound = guards::dead_letter_rejected(&db.pool, &rejected(0), LIMIT).await;
    assert!(
        matches!(at_bound, Ok(Verdict::DeadLettered { counted: false, .. })),
        "{at_bound:?}"
    );
    let held = guards::dead_letter_rejected(&db.pool, &rejected(7), LIMIT).await;
    assert!(matches!(held, Ok(Verdict::Held { .. })), "{held:?}");
    assert_eq!(rejected_letters(&db).await, LIMIT as i64);

    // A record stored ends the run: the next rejected one is dead-lettered again.
    assert!(guards::release(&db.pool, "tickets", 4).await.unwrap());
    assert!(
        !guards::release(&db.pool, "tickets", 4).await.unwrap(),
        "once"
    );
    assert_eq!(
        guards::load(&db.pool, "tickets", 4).await.unwrap(),
        GuardRow::default()
    );
    let after = guards::dead_letter_rejected(&db.pool, &rejected(8), LIMIT).await;
    assert!(
        matches!(after, Ok(Verdict::DeadLettered { counted: true, .. })),
        "{after:?}"
    );
}
