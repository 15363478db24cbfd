//! The operator's path through a real browser (headless Chromium): a database outage makes a
//! partition stuck, the overview shows it first and highlighted, the operator opens it, signs
//! in, presses "retry now" once the database is back, and sees it running again — with the
//! stylesheet and the refresh script working under the Content-Security-Policy. With
//! `--admin-read-auth`, the browser signs in first and lands on the page it asked for.

use std::path::PathBuf;
use std::time::Duration;

use history_consumer::stuck::StuckRules;

use crate::support::app::{ADMIN_TOKEN, spawn_app_with, test_settings};
use crate::support::faults::{held_poison, refuse_rows};
use crate::support::helpers::{own_database, test_database};
use crate::support::helpers::{unique_name, wait_for};
use crate::support::http::get;
use crate::support::kafka::{TestKafka, numbered_event};
use crate::support::webdriver::{Browser, processes_mentioning};

/// Where screenshots go: kept with the build, not in the source tree.
fn artifact(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("browser")
        .join(name)
}

#[actix_web::test]
async fn an_operator_finds_the_stuck_partition_signs_in_and_heals_it_with_retry_now() {
    let (mut cluster, url) = own_database("browser").await;
    let kafka = TestKafka::start(2);
    let mut settings = test_settings(&url, &kafka, &unique_name("group"));
    settings.runtime.stuck = StuckRules {
        unknown_age: Duration::from_secs(2),
        stall: Duration::from_secs(30),
    };
    // Slow automatic retries, so that "retry now" is what heals the partition.
    settings.runtime.retry.initial = Duration::from_secs(20);
    settings.runtime.retry.max = Duration::from_secs(60);
    let app = spawn_app_with(settings).await;
    app.wait_assigned(2).await;
    let admin = app.handle.admin_addr.to_string();
    let producer = kafka.producer();
    for i in 0..6 {
        kafka
            .send(&producer, Some(0), "k", &numbered_event(i))
            .await;
    }
    app.wait_committed(&kafka, &[6, -1]).await;

    // The outage: partition 1's records cannot be stored.
    cluster.stop().expect("stop postgres");
    for i in 6..10 {
        kafka
            .send(&producer, Some(1), "k", &numbered_event(i))
            .await;
    }
    wait_for(
        Duration::from_secs(30),
        "partition 1 to be stuck",
        || async {
            let status = get(&admin, "/api/partitions/1").await;
            (status.status == 200 && status.json()["state"] == "stuck").then_some(())
        },
    )
    .await;

    let browser = Browser::start().await;
    browser.goto(&format!("http://{admin}/")).await;
    // The stylesheet is a file of its own under the Content-Security-Policy: it still applies.
    assert_eq!(
        browser.css_value("header", "background-color").await,
        "rgba(17, 24, 39, 1)"
    );
    let first_row = browser
        .attribute("#partition-rows tr", "data-partition")
        .await;
    assert_eq!(first_row, "1", "the stuck partition sorts first");
    assert!(
        browser
            .attribute("tr[data-partition='1']", "class")
            .await
            .contains("stuck")
    );
    assert_eq!(browser.text("tr[data-partition='1'] .state").await, "stuck");
    assert_eq!(
        browser.text("tr[data-partition='0'] .state").await,
        "running"
    );
    browser.screenshot(&artifact("overview-stuck.png")).await;

    browser.click("tr[data-partition='1'] a.partition").await;
    browser.wait_for_element("#partition-state").await;
    assert_eq!(browser.text("#partition-state").await, "stuck");
    assert!(
        browser
            .text("#state-reason")
            .await
            .contains("oldest Unknown record")
    );
    assert!(
        browser.text("#backlog").await.contains("event-6"),
        "the backlog lists the blocked event"
    );

    cluster.restart().expect("restart postgres");
    browser.click("#sign-in-to-act").await;
    browser.sign_in(ADMIN_TOKEN).await;
    // Signed in and back on the partition page, where the actions now are.
    browser.wait_for_element("#retry-now").await;
    assert!(
        browser
            .current_url()
            .await
            .ends_with(&format!("{admin}/partitions/1"))
    );
    browser.click("#retry-now").await;
    browser.wait_for_element("#flash").await;
    assert_eq!(browser.text("#flash").await, "retry now requested");

    wait_for(
        Duration::from_secs(20),
        "the partition to run again in the browser",
        || async {
            browser.goto(&format!("http://{admin}/partitions/1")).await;
            (browser.text("#partition-state").await == "running").then_some(())
        },
    )
    .await;
    app.wait_committed(&kafka, &[6, 4]).await;
    browser.goto(&format!("http://{admin}/")).await;
    // The refresh script (external, allowed by the policy) replaces the rows in place.
    browser
        .execute("document.querySelector('#partition-rows tr').setAttribute('data-stale', '1')")
        .await;
    wait_for(
        Duration::from_secs(10),
        "the overview script to refresh the rows",
        || async {
            let stale = browser.find("#partition-rows tr[data-stale]").await;
            stale.is_none().then_some(())
        },
    )
    .await;
    browser.screenshot(&artifact("overview-healed.png")).await;
    assert_eq!(
        browser.text("tr[data-partition='1'] .state").await,
        "running"
    );
    let audit = get(&admin, "/api/actions").await.json();
    assert_eq!(audit["actions"][0]["action"], "retry_now");
    app.shutdown().await;
}

#[actix_web::test]
async fn with_read_auth_the_browser_signs_in_first_and_lands_on_the_page_it_asked_for() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.admin.read_auth = true;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let admin = app.handle.admin_addr.to_string();
    let producer = kafka.producer();
    kafka.send(&producer, Some(0), "k", b"not json").await;
    app.wait_committed(&kafka, &[1]).await;

    let browser = Browser::start().await;
    browser
        .goto(&format!("http://{admin}/dead-letters?partition=0"))
        .await;
    browser.wait_for_element("#token").await;
    assert!(
        browser.current_url().await.contains("/login?next="),
        "{}",
        browser.current_url().await
    );
    browser.sign_in(ADMIN_TOKEN).await;
    browser.wait_for_element("#dead-letters").await;
    assert!(
        browser
            .current_url()
            .await
            .ends_with(&format!("{admin}/dead-letters?partition=0"))
    );
    assert!(browser.text("#dead-letters").await.contains("not_json"));
    browser.click("#logout").await;
    browser.wait_for_element("#token").await;
    app.shutdown().await;
}

/// The number in the element matching `css`.
async fn number(browser: &Browser, css: &str) -> i64 {
    let text = browser.text(css).await;
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{css} is not a number: {text:?}"))
}

#[actix_web::test]
async fn an_operator_dead_letters_a_blocking_record_and_replays_it_once_fixed_in_the_browser() {
    let db = test_database().await;
    held_poison().install(&db).await;
    let kafka = TestKafka::start(1);
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.runtime.stuck = StuckRules {
        unknown_age: Duration::from_secs(2),
        stall: Duration::from_secs(30),
    };
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let admin = app.handle.admin_addr.to_string();
    let producer = kafka.producer();
    let records = [
        numbered_event(0),
        crate::remedies::poison(),
        numbered_event(1),
        b"not json".to_vec(),
    ];
    for body in &records {
        kafka.send(&producer, Some(0), "k", body).await;
    }
    wait_for(
        Duration::from_secs(30),
        "the poison record to make the partition stuck",
        || async {
            let status = get(&admin, "/api/partitions/0").await;
            (status.json()["state"] == "stuck").then_some(())
        },
    )
    .await;

    let browser = Browser::start().await;
    browser.goto(&format!("http://{admin}/partitions/0")).await;
    // The cause at a glance: which record, how often tried, why, for how long, what to do.
    assert_eq!(number(&browser, "#blocking-offset").await, 1);
    assert_eq!(browser.text("#blocking-event").await, "event-poison");
    assert!(number(&browser, "#blocking-attempts").await >= 1);
    assert_eq!(browser.text("#blocking-cause").await, "refused (may pass)");
    assert_eq!(
        browser.text("#blocking-error").await,
        "inserting the history row failed: db error: ERROR: ticket poison is locked (SQLSTATE 55P03)"
    );
    assert!(browser.text("#blocking-age").await.ends_with(" s"));
    assert!(
        browser
            .text("#blocking-remedy")
            .await
            .contains("dead-letter it"),
        "{}",
        browser.text("#blocking-remedy").await
    );
    assert!(
        number(&browser, "#watermark").await <= number(&browser, "#high-watermark").await,
        "the end of the partition is never shown below its watermark"
    );
    browser
        .screenshot(&artifact("partition-blocking.png"))
        .await;

    browser.click("#sign-in-to-act").await;
    browser.sign_in(ADMIN_TOKEN).await;
    browser.wait_for_element("#dead-letter-1").await;
    // The comment is required: the browser refuses an empty one and stays on the page.
    browser.click("#dead-letter-1").await;
    assert_eq!(
        browser
            .execute("return document.querySelector('#comment-1').validity.valueMissing")
            .await,
        serde_json::Value::Bool(true),
        "the empty comment is what the browser refuses"
    );
    assert!(
        browser.current_url().await.ends_with("/partitions/0"),
        "no empty comment sent"
    );
    browser.element("#dead-letter-1").await;
    browser
        .type_into("#comment-1", "ticket poison is a test ticket (INC-7)")
        .await;
    browser.click("#dead-letter-1").await;
    browser.wait_for_element("#flash").await;
    assert!(
        browser
            .text("#flash")
            .await
            .starts_with("offset 1: dead-lettered")
    );
    app.wait_committed(&kafka, &[4]).await;
    wait_for(
        Duration::from_secs(10),
        "the partition to run again in the browser",
        || async {
            browser.goto(&format!("http://{admin}/partitions/0")).await;
            (browser.text("#partition-state").await == "running").then_some(())
        },
    )
    .await;
    assert!(browser.find("#blocking").await.is_none());

    // The cause is fixed: the operator replays the letter from the dead-letter page.
    held_poison().remove(&db).await;
    browser
        .goto(&format!(
            "http://{admin}/dead-letters?partition=0&state=new"
        ))
        .await;
    let row = browser.text("#dead-letters tr[data-offset='1']").await;
    assert!(
        row.contains("skipped_by_operator") && row.contains("ticket poison is a test ticket"),
        "{row}"
    );
    browser.click("#replay-0-1").await;
    browser.wait_for_element("#flash").await;
    assert_eq!(
        browser.text("#flash").await,
        "Partition 0, offset 1 replayed: applied, stored by the replay"
    );
    assert!(
        browser
            .text("#dead-letters tr[data-offset='1'] .letter")
            .await
            .contains("applied")
    );
    // Every letter of a filter: the malformed record stays rejected, and says so.
    browser
        .goto(&format!("http://{admin}/dead-letters?reason=not_json"))
        .await;
    browser.click("#replay-all").await;
    browser.wait_for_element("#flash").await;
    assert_eq!(
        browser.text("#flash").await,
        "Replayed 1: 0 stored by the replay, 0 stored already, 1 still rejected."
    );
    assert!(
        browser
            .text("#dead-letters tr[data-offset='3'] .letter")
            .await
            .contains("still_rejected")
    );
    browser
        .goto(&format!("http://{admin}/dead-letters?state=new"))
        .await;
    assert!(
        browser
            .text("#dead-letters")
            .await
            .contains("No dead letters match")
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events WHERE event_id = 'event-poison'")
            .await,
        1
    );
    let audit = get(&admin, "/api/actions").await.json();
    let actions: Vec<(&str, &str)> = audit["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap(),
                a["actor"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(actions.len(), 3, "{actions:?}");
    assert_eq!(actions[0].0, "replay_matching");
    assert_eq!(actions[1].0, "replay");
    assert_eq!(actions[2].0, "dead_letter");
    assert!(actions.iter().all(|(_, by)| by.starts_with("session ")));
    app.shutdown().await;
}

#[actix_web::test]
async fn the_overview_fits_a_1280_pixel_window_without_horizontal_scrolling() {
    let db = test_database().await;
    refuse_rows(&db, "NEW.ticket_id = 'ticket-3'").await;
    let kafka = TestKafka::start(4);
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    // One rejection in a row engages the guard: its partition is stuck with the longest reason.
    settings.runtime.max_consecutive_rejections = 0;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(4).await;
    let admin = app.handle.admin_addr.to_string();
    let producer = kafka.producer();
    for i in 0..40 {
        let body = crate::support::kafka::payload(
            &format!("event-{i}"),
            &format!("ticket-{}", i % 4),
            "open",
            "resolved",
            "2026-10-03T08:00:00Z",
        );
        kafka.send(&producer, Some(i % 4), "k", &body).await;
    }
    kafka
        .send(&producer, Some(0), "k", b"not json at all")
        .await;
    wait_for(
        Duration::from_secs(30),
        "a partition held by its guard",
        || async {
            let status = get(&admin, "/api/status").await.json();
            let held = status["partitions"]
                .as_array()?
                .iter()
                .any(|p| p["stuck"]["kind"] == "rejections_held");
            held.then_some(())
        },
    )
    .await;

    let browser = Browser::start().await;
    browser.set_window_size(1280, 900).await;
    browser.goto(&format!("http://{admin}/")).await;
    browser.wait_for_element("#partition-rows tr.stuck").await;
    let sizes = browser
        .execute(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth, \
             window.innerWidth];",
        )
        .await;
    let (scroll, client, inner) = (
        sizes[0].as_i64().unwrap(),
        sizes[1].as_i64().unwrap(),
        sizes[2].as_i64().unwrap(),
    );
    assert!(inner >= 1264, "the window is 1280 pixels wide: {sizes}");
    browser.screenshot(&artifact("overview-1280.png")).await;
    assert!(
        scroll <= client,
        "the overview scrolls sideways at 1280 pixels: {scroll} > {client}"
    );
    assert!(
        browser
            .text("#partition-rows tr.stuck")
            .await
            .contains("dead-lettering stopped")
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_browser_leaves_no_process_behind() {
    let browser = Browser::start().await;
    let profile = browser.profile().display().to_string();
    assert!(!processes_mentioning(&profile).is_empty(), "Chromium runs");
    drop(browser);
    wait_for(
        Duration::from_secs(10),
        "every Chromium process of the session to end",
        || async { processes_mentioning(&profile).is_empty().then_some(()) },
    )
    .await;
}
