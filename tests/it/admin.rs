//! The admin surface over real HTTP: every page and API route, authentication, CSRF,
//! conflicts, bad input, escaping, and metrics that match what happened.

use std::time::Duration;

use crate::support::app::{TestApp, spawn_app, spawn_app_with, test_settings};
use crate::support::helpers::{test_database, unique_name, wait_for};
use crate::support::http::{csrf_of, get, post_form, request, sign_in};
use crate::support::kafka::{TestKafka, payload, story_900, story_901};
use crate::support::metrics::value as metric;

use crate::support::app::ADMIN_TOKEN as TOKEN;

fn addr(app: &TestApp) -> String {
    app.handle.admin_addr.to_string()
}

/// Percent-encodes a path segment (tests send hostile ids).
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Signs in (an HttpOnly, SameSite=Strict session cookie); the session cookie and the CSRF
/// token of the signed-in partition page, for the partition's action forms.
pub async fn sign_in_to_act(addr: &str, partition: i32) -> (String, String) {
    let (cookie, set_cookie) = sign_in(addr).await;
    assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
    assert!(set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    let page = request(
        addr,
        "GET",
        &format!("/partitions/{partition}"),
        &[("Cookie", &cookie)],
        "",
    )
    .await;
    assert_eq!(page.status, 200);
    (cookie, csrf_of(&page.body))
}

async fn story(kafka: &TestKafka) {
    let producer = kafka.producer();
    let (e900, e901) = (story_900(), story_901());
    kafka.send(&producer, Some(0), "ticket-42", &e900).await;
    kafka.send(&producer, Some(0), "ticket-42", &e900).await;
    kafka.send(&producer, Some(0), "ticket-42", &e901).await;
    kafka
        .send(
            &producer,
            Some(0),
            "k",
            b"<script>alert('payload')</script>",
        )
        .await;
}

#[actix_web::test]
async fn every_page_and_api_route_answers() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    story(&kafka).await;
    app.wait_committed(&kafka, &[4]).await;
    let addr = addr(&app);

    for path in [
        "/",
        "/fragments/partition-rows",
        "/partitions/0",
        "/dead-letters",
        "/dead-letters?partition=0&reason=not_json",
        "/tickets/ticket-42",
        "/tickets?ticket_id=ticket-42",
        "/login",
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/status",
        "/api/partitions/0",
        "/api/dead-letters?partition=0",
        "/api/tickets/ticket-42",
        "/api/actions",
    ] {
        let response = get(&addr, path).await;
        assert_eq!(response.status, 200, "GET {path}: {}", response.body);
    }

    let status = get(&addr, "/api/status").await.json();
    assert_eq!(status["partitions"][0]["partition"], 0);
    assert_eq!(status["partitions"][0]["state"], "running");
    let ticket = get(&addr, "/api/tickets/ticket-42").await.json();
    let history = ticket["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(
        history[0]["event_id"], "event-ticket-900",
        "ordered by changed_at"
    );
    let letters = get(&addr, "/api/dead-letters").await.json();
    assert_eq!(letters["total"], 1);
    assert_eq!(letters["dead_letters"][0]["reason"], "not_json");

    let page = get(&addr, "/tickets/ticket-42").await.body;
    assert!(page.contains("event-ticket-901"), "{page}");
    let overview = get(&addr, "/").await.body;
    assert!(overview.contains("data-partition=\"0\""), "{overview}");
    assert!(
        overview.contains("<svg class=\"spark\""),
        "a trend per partition"
    );
    app.shutdown().await;
}

#[actix_web::test]
async fn actions_need_the_token_a_csrf_token_and_an_owned_partition() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let addr = addr(&app);

    // Only POST acts.
    assert_eq!(get(&addr, "/partitions/0/actions/pause").await.status, 404);
    // No token, no session.
    let anonymous = post_form(&addr, "/partitions/0/actions/pause", None, "csrf=x").await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let api_anonymous = request(&addr, "POST", "/api/partitions/0/actions/pause", &[], "").await;
    assert_eq!(api_anonymous.status, 401);
    let wrong = request(
        &addr,
        "POST",
        "/api/partitions/0/actions/pause",
        &[("Authorization", "Bearer nope-nope")],
        "",
    )
    .await;
    assert_eq!(wrong.status, 401);
    let bad_login = post_form(&addr, "/login", None, "token=wrong-token").await;
    assert_eq!(bad_login.status, 401);
    assert!(bad_login.body.contains("the admin token is wrong"));

    // A session without its CSRF token is refused.
    let (cookie, csrf) = sign_in_to_act(&addr, 0).await;
    let forged = post_form(
        &addr,
        "/partitions/0/actions/pause",
        Some(&cookie),
        "csrf=forged",
    )
    .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(forged.body.contains("CSRF"));
    let missing = post_form(&addr, "/partitions/0/actions/pause", Some(&cookie), "").await;
    assert_eq!(missing.status, 403);

    // With both, the action happens and is audited.
    let paused = post_form(
        &addr,
        "/partitions/0/actions/pause",
        Some(&cookie),
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(paused.status, 303, "{}", paused.body);
    assert_eq!(paused.header("location"), Some("/partitions/0?done=pause"));
    wait_for(
        Duration::from_secs(10),
        "the partition to show paused",
        || async {
            (get(&addr, "/api/partitions/0").await.json()["state"] == "paused").then_some(())
        },
    )
    .await;
    let resumed = request(
        &addr,
        "POST",
        "/api/partitions/0/actions/resume",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        "",
    )
    .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    wait_for(
        Duration::from_secs(10),
        "the partition to run again",
        || async {
            (get(&addr, "/api/partitions/0").await.json()["state"] == "running").then_some(())
        },
    )
    .await;
    let audit = get(&addr, "/api/actions").await.json();
    let actions: Vec<&str> = audit["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, vec!["resume", "pause"]);
    assert!(
        get(&addr, "/").await.body.contains("session "),
        "the audit trail is on the overview"
    );

    // A partition this instance does not own.
    let foreign = post_form(
        &addr,
        "/partitions/7/actions/retry_now",
        Some(&cookie),
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(foreign.status, 409, "{}", foreign.body);
    assert!(
        foreign
            .body
            .contains("partition 7 is not assigned to this instance")
    );
    let foreign_api = request(
        &addr,
        "POST",
        "/api/partitions/7/actions/retry_now",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        "",
    )
    .await;
    assert_eq!(foreign_api.status, 409);
    assert!(
        foreign_api.json()["error"]
            .as_str()
            .unwrap()
            .contains("not assigned")
    );
    app.shutdown().await;
}

#[actix_web::test]
async fn without_a_token_the_admin_is_read_only() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.admin.token = None;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let addr = addr(&app);
    let api = request(
        &addr,
        "POST",
        "/api/partitions/0/actions/pause",
        &[("Authorization", "Bearer anything")],
        "",
    )
    .await;
    assert_eq!(api.status, 403);
    assert!(api.json()["error"].as_str().unwrap().contains("read-only"));
    let form = post_form(&addr, "/partitions/0/actions/pause", None, "csrf=x").await;
    assert_eq!(form.status, 403);
    let login = post_form(&addr, "/login", None, "token=anything").await;
    assert_eq!(login.status, 403);
    assert!(
        get(&addr, "/partitions/0")
            .await
            .body
            .contains("Actions are disabled")
    );
    app.shutdown().await;
}

#[actix_web::test]
async fn bad_paths_and_parameters_get_a_4xx_with_a_message() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let addr = addr(&app);
    let cases = [
        ("/partitions/abc", 400, "non-negative integer"),
        ("/partitions/-1", 400, "non-negative integer"),
        ("/partitions/99999999999", 400, "non-negative integer"),
        ("/partitions/5", 404, "not assigned"),
        (
            "/dead-letters?page=2",
            400,
            "page numbers are not supported",
        ),
        ("/dead-letters?before=abc", 400, "not a dead-letter cursor"),
        ("/dead-letters?before=1.0.0&after=1.0.0", 400, "not both"),
        ("/dead-letters?reason=%3Cscript%3E", 400, "unknown reason"),
        ("/dead-letters?partition=x", 400, "non-negative integer"),
        ("/tickets?ticket_id=", 400, "ticket id is required"),
        ("/no/such/page", 404, "nothing at"),
        ("/api/partitions/abc", 400, "non-negative integer"),
        (
            "/api/dead-letters?after=1.2",
            400,
            "not a dead-letter cursor",
        ),
        ("/api/nothing", 404, "nothing at"),
    ];
    for (path, status, message) in cases {
        let response = get(&addr, path).await;
        assert_eq!(response.status, status, "GET {path}: {}", response.body);
        assert!(
            response.body.contains(message),
            "GET {path}: {}",
            response.body
        );
    }
    let (cookie, csrf) = sign_in_to_act(&addr, 0).await;
    let unknown = post_form(
        &addr,
        "/partitions/0/actions/explode",
        Some(&cookie),
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(unknown.status, 400);
    assert!(unknown.body.contains("unknown action"));
    app.shutdown().await;
}

#[actix_web::test]
async fn hostile_ids_and_payloads_render_inert() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    let event_id = "<script>alert('event')</script>";
    let ticket_id = "<script>alert('ticket')</script>";
    let body = payload(
        event_id,
        ticket_id,
        "<b>open</b>",
        "resolved",
        "2026-10-03T08:00:00Z",
    );
    kafka.send(&producer, None, "k", &body).await;
    kafka
        .send(
            &producer,
            None,
            "k",
            b"<script>alert('dead letter')</script>",
        )
        .await;
    app.wait_committed(&kafka, &[2]).await;
    let addr = addr(&app);

    for path in [
        format!("/tickets/{}", encode(ticket_id)),
        "/partitions/0".to_owned(),
        "/dead-letters".to_owned(),
        "/".to_owned(),
    ] {
        let page = get(&addr, &path).await;
        assert_eq!(page.status, 200, "{path}");
        assert!(
            !page.body.contains("<script>alert"),
            "{path} renders a live script: {}",
            page.body
        );
        assert!(!page.body.contains("<b>open</b>"), "{path}");
    }
    let ticket = get(&addr, &format!("/tickets/{}", encode(ticket_id)))
        .await
        .body;
    assert!(
        ticket.contains("&#60;script&#62;alert(&#39;event&#39;)&#60;/script&#62;"),
        "{ticket}"
    );
    let letters = get(&addr, "/dead-letters").await.body;
    assert!(letters.contains("&#60;script&#62;alert("), "{letters}");
    app.shutdown().await;
}

#[actix_web::test]
async fn metrics_match_the_source_documents_story_and_pass_promtool() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    story(&kafka).await;
    app.wait_committed(&kafka, &[4]).await;
    let addr = addr(&app);
    let exposition = wait_for(
        Duration::from_secs(10),
        "the committed offset in the metrics",
        || async {
            let body = get(&addr, "/metrics").await.body;
            (metric(&body, "history_committed_offset{partition=\"0\"}") == Some(4.0))
                .then_some(body)
        },
    )
    .await;
    let value = |name: &str, labels: &[&str]| -> Option<f64> {
        crate::support::metrics::values(&exposition, &format!("{name}{{"), labels).next()
    };
    assert_eq!(
        value(
            "history_records_total",
            &["outcome=\"applied\"", "partition=\"0\""]
        ),
        Some(2.0)
    );
    assert_eq!(
        value("history_records_total", &["outcome=\"already_applied\""]),
        Some(1.0)
    );
    assert_eq!(
        value("history_duplicates_total", &["cause=\"republish\""]),
        Some(1.0)
    );
    assert_eq!(
        value("history_duplicates_total", &["cause=\"redelivery\""]),
        None
    );
    assert_eq!(
        value("history_dead_letters_total", &["reason=\"not_json\""]),
        Some(1.0)
    );
    assert_eq!(
        value("history_unknown_backlog_records", &["partition=\"0\""]),
        Some(0.0)
    );
    assert_eq!(
        value("history_watermark_offset", &["partition=\"0\""]),
        Some(4.0)
    );
    assert!(value("history_offset_commits_total", &["result=\"ok\""]).unwrap_or(0.0) >= 1.0);
    assert!(value("history_rebalances_total", &["kind=\"assign\""]).unwrap_or(0.0) >= 1.0);
    assert!(exposition.contains("history_transaction_duration_seconds_bucket"));
    assert!(exposition.contains("process_resident_memory_bytes"));
    wait_for(Duration::from_secs(10), "the stuck gauge", || async {
        let body = get(&addr, "/metrics").await.body;
        (metric(&body, "history_partition_stuck{partition=\"0\"}") == Some(0.0)).then_some(())
    })
    .await;

    let mut promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) is installed");
    use std::io::Write;
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let output = promtool.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    app.shutdown().await;
}
