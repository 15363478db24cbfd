//! The admin surface when it faces a network, over real HTTP: the metrics listener apart from
//! the admin one, sign-in for reading, redirects that stay on this server, security headers on
//! every route, throttled and counted wrong tokens, sessions that end, per-instance cookies,
//! the pages' own pool with its statement timeout, keyset pages of dead letters, and
//! `Authorization` schemes that are not ours.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use history_consumer::admin::sessions::MAX_SESSIONS;
use history_consumer::admin::throttle;
use history_consumer::admin::{ADMIN_WORKER_NICE, OVER_LIMIT_DELAY};

use crate::support::app::{TestApp, spawn_app, spawn_app_with, test_settings};
use crate::support::helpers::{TestDb, test_database, unique_name, wait_for};
use crate::support::http::{Response, csrf_of, get, post_form, request, request_from, sign_in};
use crate::support::kafka::TestKafka;
use crate::support::metrics;

use crate::support::app::ADMIN_TOKEN as TOKEN;

fn admin(app: &TestApp) -> String {
    app.handle.admin_addr.to_string()
}

/// An app with its settings changed by `change`, owning one partition.
async fn app_with(
    db: &TestDb,
    kafka: &TestKafka,
    change: impl FnOnce(&mut history_consumer::config::Settings),
) -> TestApp {
    let mut settings = test_settings(&db.url, kafka, &unique_name("group"));
    change(&mut settings);
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    app
}

async fn get_with_cookie(addr: &str, path: &str, cookie: &str) -> Response {
    request(addr, "GET", path, &[("Cookie", cookie)], "").await
}

/// Whether `cookie` is a live session: the partition page then carries a CSRF field.
async fn signed_in(addr: &str, cookie: &str) -> bool {
    let page = get_with_cookie(addr, "/partitions/0", cookie).await;
    assert_eq!(page.status, 200, "{}", page.body);
    page.body.contains("name=\"csrf\"")
}

#[actix_web::test]
async fn metrics_and_health_move_to_their_own_listener_and_leave_the_admin_port() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = app_with(&db, &kafka, |s| {
        s.admin.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let (admin, metrics) = (admin(&app), app.handle.metrics_addr.to_string());
    assert_ne!(admin, metrics);
    for path in ["/metrics", "/healthz", "/readyz"] {
        let on_metrics = get(&metrics, path).await;
        assert_eq!(on_metrics.status, 200, "{path} on the metrics listener");
        assert_eq!(
            get(&admin, path).await.status,
            404,
            "{path} on the admin listener"
        );
    }
    assert!(
        get(&metrics, "/metrics")
            .await
            .body
            .contains("history_admin_auth_failures_total")
    );
    for path in ["/", "/api/status", "/dead-letters", "/login"] {
        assert_eq!(get(&metrics, path).await.status, 404, "{path} on metrics");
        assert_eq!(get(&admin, path).await.status, 200, "{path} on admin");
    }
    app.shutdown().await;
}

#[actix_web::test]
async fn with_read_auth_every_read_needs_a_sign_in_but_metrics_and_health_stay_open() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = app_with(&db, &kafka, |s| s.admin.read_auth = true).await;
    let addr = admin(&app);

    for (path, login) in [
        ("/", "/login?next=/"),
        ("/partitions/0", "/login?next=/partitions/0"),
        (
            "/dead-letters?partition=0&reason=not_json",
            "/login?next=/dead-letters%3Fpartition%3D0%26reason%3Dnot_json",
        ),
        ("/tickets/ticket-42", "/login?next=/tickets/ticket-42"),
        ("/no/such/page", "/login?next=/no/such/page"),
    ] {
        let response = get(&addr, path).await;
        assert_eq!(response.status, 303, "GET {path}: {}", response.body);
        assert_eq!(response.header("location"), Some(login), "GET {path}");
    }
    for path in [
        "/api/status",
        "/api/partitions/0",
        "/api/dead-letters",
        "/api/tickets/ticket-42",
        "/api/actions",
        "/fragments/partition-rows",
    ] {
        let response = get(&addr, path).await;
        assert_eq!(response.status, 401, "GET {path}: {}", response.body);
        assert!(
            response.json()["error"]
                .as_str()
                .unwrap()
                .contains("Bearer")
        );
        assert!(
            response
                .header("www-authenticate")
                .is_some_and(|h| h.starts_with("Bearer")),
            "{path}"
        );
    }
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/login",
        "/static/admin.css",
        "/static/overview.js",
    ] {
        assert_eq!(get(&addr, path).await.status, 200, "GET {path}");
    }

    // The bearer token reads the API; a session reads everything.
    let bearer = format!("Bearer {TOKEN}");
    let api = request(
        &addr,
        "GET",
        "/api/actions",
        &[("Authorization", &bearer)],
        "",
    )
    .await;
    assert_eq!(api.status, 200, "{}", api.body);
    let wrong = request(
        &addr,
        "GET",
        "/api/status",
        &[("Authorization", "Bearer not-the-admin-token")],
        "",
    )
    .await;
    assert_eq!(wrong.status, 401);
    let login = post_form(
        &addr,
        "/login",
        None,
        &format!("token={TOKEN}&next=%2Fdead-letters%3Fpartition%3D0"),
    )
    .await;
    assert_eq!(login.status, 303);
    assert_eq!(
        login.header("location"),
        Some("/dead-letters?partition=0"),
        "back to the page asked for"
    );
    let cookie = login
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    for path in [
        "/",
        "/dead-letters?partition=0",
        "/api/status",
        "/fragments/partition-rows",
    ] {
        let response = get_with_cookie(&addr, path, cookie).await;
        assert_eq!(response.status, 200, "GET {path} signed in");
    }
    app.shutdown().await;
}

#[actix_web::test]
async fn a_sign_in_never_redirects_to_another_origin() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let addr = admin(&app);
    for (next, location) in [
        ("%2Fpartitions%2F0", "/partitions/0"),
        ("%2F%09%2Fevil.example", "/"),
        ("%2F%0a%2Fevil.example", "/"),
        ("%2F%0D%0A%2Fevil.example", "/"),
        ("%2F%5Cevil.example", "/"),
        ("%2F%5C%2Fevil.example", "/"),
        ("%2F%2Fevil.example", "/"),
        ("https%3A%2F%2Fevil.example%2F", "/"),
        ("javascript%3Aalert(1)", "/"),
    ] {
        let response =
            post_form(&addr, "/login", None, &format!("token={TOKEN}&next={next}")).await;
        assert_eq!(response.status, 303, "next={next}: {}", response.body);
        assert_eq!(response.header("location"), Some(location), "next={next}");
    }
    // The form carries only a safe target either.
    let form = get(&addr, "/login?next=%2F%09%2Fevil.example").await;
    assert!(
        form.body.contains("name=\"next\" value=\"/\""),
        "{}",
        form.body
    );
    app.shutdown().await;
}

/// Checks the headers every response must carry; `cacheable` for the static files.
fn assert_security_headers(what: &str, response: &Response, cacheable: bool) {
    let csp = response
        .header("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"));
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(directive), "{what}: {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{what}: {csp}");
    assert_eq!(
        response.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        response.header("referrer-policy"),
        Some("no-referrer"),
        "{what}"
    );
    assert_eq!(response.header("x-frame-options"), Some("DENY"), "{what}");
    let cache = response.header("cache-control").unwrap_or_default();
    if cacheable {
        assert!(cache.contains("max-age"), "{what}: {cache}");
    } else {
        assert_eq!(cache, "no-store", "{what}");
    }
}

#[actix_web::test]
async fn every_route_sends_the_security_headers() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = app_with(&db, &kafka, |s| {
        s.admin.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let addr = admin(&app);
    let metrics = app.handle.metrics_addr.to_string();
    let (cookie, _) = sign_in(&addr).await;
    let csrf = csrf_of(&get_with_cookie(&addr, "/partitions/0", &cookie).await.body);
    let bearer = format!("Bearer {TOKEN}");

    let mut checked = Vec::new();
    for path in [
        "/",
        "/fragments/partition-rows",
        "/partitions/0",
        "/partitions/abc",
        "/dead-letters",
        "/dead-letters?page=2",
        "/tickets/ticket-42",
        "/tickets?ticket_id=ticket-42",
        "/login",
        "/api/status",
        "/api/partitions/0",
        "/api/dead-letters",
        "/api/tickets/ticket-42",
        "/api/actions",
        "/api/nothing",
        "/no/such/page",
    ] {
        for cookie in [None, Some(cookie.as_str())] {
            let headers: Vec<(&str, &str)> = cookie.map(|c| ("Cookie", c)).into_iter().collect();
            let response = request(&addr, "GET", path, &headers, "").await;
            assert_security_headers(&format!("GET {path}"), &response, false);
            checked.push(response.status);
        }
    }
    for path in ["/static/admin.css", "/static/overview.js"] {
        assert_security_headers(path, &get(&addr, path).await, true);
    }
    for path in ["/metrics", "/healthz", "/readyz", "/nothing"] {
        assert_security_headers(
            &format!("GET {path} (metrics)"),
            &get(&metrics, path).await,
            false,
        );
    }
    let posts = [
        post_form(&addr, "/login", None, "token=wrong-token-0123").await,
        post_form(&addr, "/login", None, "").await,
        post_form(&addr, "/partitions/0/actions/pause", None, "csrf=x").await,
        post_form(
            &addr,
            "/partitions/0/actions/resume",
            Some(&cookie),
            &format!("csrf={csrf}"),
        )
        .await,
        request(
            &addr,
            "POST",
            "/api/partitions/0/actions/resume",
            &[("Authorization", &bearer)],
            "",
        )
        .await,
        request(&addr, "POST", "/api/partitions/0/actions/pause", &[], "").await,
        // The live rewind: its preview pages, a form without a valid CSRF token, the API.
        post_form(
            &addr,
            "/partitions/0/rewind",
            Some(&cookie),
            &format!("csrf={csrf}&to=2026-12-02T10%3A00%3A00Z"),
        )
        .await,
        post_form(
            &addr,
            "/rewind",
            Some(&cookie),
            &format!("csrf={csrf}&to=2026-12-02T10%3A00%3A00Z"),
        )
        .await,
        post_form(
            &addr,
            "/partitions/0/rewind/confirm",
            Some(&cookie),
            "csrf=x&to=2026-12-02T10%3A00%3A00Z",
        )
        .await,
        request(
            &addr,
            "POST",
            "/api/rewind?to=2026-12-02T10:00:00Z&dry_run=true",
            &[("Authorization", &bearer)],
            "",
        )
        .await,
        // The remedies for poison records, refused and carried out.
        post_form(
            &addr,
            "/partitions/0/backlog/0/dead-letter",
            Some(&cookie),
            "csrf=x&comment=why",
        )
        .await,
        request(
            &addr,
            "POST",
            "/api/partitions/0/backlog/5/dead-letter",
            &[("Authorization", &bearer)],
            r#"{"comment": "why"}"#,
        )
        .await,
        request(&addr, "POST", "/api/dead-letters/0/0/replay", &[], "").await,
        request(
            &addr,
            "POST",
            "/api/dead-letters/replay",
            &[("Authorization", &bearer)],
            "",
        )
        .await,
        post_form(
            &addr,
            "/dead-letters/replay",
            Some(&cookie),
            &format!("csrf={csrf}"),
        )
        .await,
        post_form(&addr, "/logout", Some(&cookie), &format!("csrf={csrf}")).await,
    ];
    let rewinds: Vec<u16> = posts[6..10].iter().map(|r| r.status).collect();
    assert_eq!(
        rewinds,
        [200, 200, 403, 200],
        "the rewind previews, a confirmation without the CSRF token, the API's dry run"
    );
    for response in &posts {
        assert_security_headers(&format!("POST → {}", response.status), response, false);
        checked.push(response.status);
    }
    // Successes, redirects, client errors and refusals were all among them.
    for status in [200, 303, 400, 401, 404] {
        assert!(checked.contains(&status), "{status} in {checked:?}");
    }
    app.shutdown().await;
}

#[actix_web::test]
async fn wrong_tokens_are_throttled_per_address_and_counted_by_method() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let addr = admin(&app);
    let burst = throttle::RULES.per_address.burst;
    let attacker = Ipv4Addr::new(127, 0, 0, 2);
    for _ in 0..burst {
        let refused = request_from(
            attacker,
            &addr,
            "POST",
            "/login",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            "token=wrong-token-01234",
        )
        .await;
        assert_eq!(refused.status, 401, "{}", refused.body);
    }
    // The next attempt is refused before the token is even compared: right or wrong.
    let throttled = request_from(
        attacker,
        &addr,
        "POST",
        "/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &format!("token={TOKEN}"),
    )
    .await;
    assert_eq!(throttled.status, 429, "{}", throttled.body);
    assert!(throttled.body.contains("too many wrong admin tokens"));
    let retry_after: u64 = throttled.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=12).contains(&retry_after), "{retry_after}");
    let bearer = format!("Bearer {TOKEN}");
    let api = request_from(
        attacker,
        &addr,
        "POST",
        "/api/partitions/0/actions/resume",
        &[("Authorization", &bearer)],
        "",
    )
    .await;
    assert_eq!(
        api.status, 429,
        "the bearer path shares the address's bucket"
    );
    assert!(api.header("retry-after").is_some());

    // Another address is not held back by this one.
    let operator = post_form(&addr, "/login", None, &format!("token={TOKEN}")).await;
    assert_eq!(operator.status, 303);
    let wrong_bearer = request(
        &addr,
        "POST",
        "/api/partitions/0/actions/resume",
        &[("Authorization", "Bearer wrong-token-01234")],
        "",
    )
    .await;
    assert_eq!(wrong_bearer.status, 401);

    let exposition = get(&addr, "/metrics").await.body;
    let count = |labels: &str| {
        metrics::value(
            &exposition,
            &format!("history_admin_auth_failures_total{{{labels}}}"),
        )
    };
    assert_eq!(
        count("method=\"sign_in\",reason=\"wrong_token\""),
        Some(f64::from(burst))
    );
    assert_eq!(count("method=\"sign_in\",reason=\"throttled\""), Some(1.0));
    assert_eq!(count("method=\"bearer\",reason=\"throttled\""), Some(1.0));
    assert_eq!(count("method=\"bearer\",reason=\"wrong_token\""), Some(1.0));
    app.shutdown().await;
}

#[actix_web::test]
async fn wrong_tokens_from_many_addresses_meet_the_global_limit() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let addr = admin(&app);
    let rules = throttle::RULES;
    let mut failures = 0;
    let mut host = 10u8;
    // Each address stays within its own burst; together they use up the global one.
    while failures < rules.global.burst {
        for _ in 0..rules.per_address.burst.min(rules.global.burst - failures) {
            let refused = request_from(
                Ipv4Addr::new(127, 0, 1, host),
                &addr,
                "POST",
                "/api/partitions/0/actions/pause",
                &[("Authorization", "Bearer wrong-token-01234")],
                "",
            )
            .await;
            assert_eq!(refused.status, 401, "{}", refused.body);
            failures += 1;
        }
        host += 1;
    }
    // An address without a failure of its own is refused now. The global bucket drains one
    // failure a second, so a slow machine may let a few more through first.
    let throttled = loop {
        let attempt = request_from(
            Ipv4Addr::new(127, 0, 1, host),
            &addr,
            "POST",
            "/login",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            "token=wrong-token-01234",
        )
        .await;
        if attempt.status == 429 {
            break attempt;
        }
        assert_eq!(attempt.status, 401, "{}", attempt.body);
        host += 1;
        assert!(host < 40, "the global limit never refused an attempt");
    };
    assert!(throttled.body.contains("too many wrong admin tokens"));
    let exposition = get(&addr, "/metrics").await.body;
    assert_eq!(
        metrics::value(
            &exposition,
            "history_admin_auth_failures_total{method=\"bearer\",reason=\"wrong_token\"}"
        ),
        Some(f64::from(rules.global.burst))
    );
    app.shutdown().await;
}

#[actix_web::test]
async fn sessions_end_after_their_idle_time_and_at_their_maximum_age() {
    const IDLE: Duration = Duration::from_millis(1500);
    const MAX: Duration = Duration::from_secs(4);
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = app_with(&db, &kafka, |s| {
        s.admin.session_idle = IDLE;
        s.admin.session_max = MAX;
    })
    .await;
    let addr = admin(&app);

    let (idle, set_cookie) = sign_in(&addr).await;
    assert!(set_cookie.contains("Max-Age=4"), "{set_cookie}");
    assert!(signed_in(&addr, &idle).await);
    // Nothing to poll for: the session must simply go unused for longer than its idle time.
    tokio::time::sleep(IDLE + Duration::from_millis(300)).await;
    assert!(
        !signed_in(&addr, &idle).await,
        "idle for longer than {IDLE:?}"
    );

    let (busy, _) = sign_in(&addr).await;
    let started = Instant::now();
    let ended = wait_for(
        Duration::from_secs(15),
        "the busy session to end",
        || async {
            let alive = signed_in(&addr, &busy).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            (!alive).then(Instant::now)
        },
    )
    .await;
    assert!(
        ended - started >= MAX - Duration::from_millis(300),
        "a session used every 200 ms ended after {:?}",
        ended - started
    );
    app.shutdown().await;
}

#[actix_web::test]
async fn a_full_session_store_gives_up_the_least_recently_used_session() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let addr = admin(&app);
    let mut cookies = Vec::new();
    for _ in 0..MAX_SESSIONS {
        cookies.push(sign_in(&addr).await.0);
    }
    // The oldest sign-in is used again; the second oldest is now the least recently used.
    assert!(signed_in(&addr, &cookies[0]).await, "within the cap");
    sign_in(&addr).await;
    assert!(
        !signed_in(&addr, &cookies[1]).await,
        "given up for the new one"
    );
    assert!(signed_in(&addr, &cookies[0]).await);
    assert!(signed_in(&addr, &cookies[2]).await);
    assert!(signed_in(&addr, &cookies[MAX_SESSIONS - 1]).await);
    app.shutdown().await;
}

#[actix_web::test]
async fn instances_on_one_host_keep_their_own_sign_ins() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let one = spawn_app(&db, &kafka).await;
    let two = spawn_app(&db, &kafka).await;
    one.wait_assigned(1).await;
    two.wait_assigned(1).await;
    let (a, b) = (admin(&one), admin(&two));
    let (cookie_a, _) = sign_in(&a).await;
    let (cookie_b, _) = sign_in(&b).await;
    let name = |cookie: &str| cookie.split('=').next().unwrap().to_owned();
    assert_ne!(
        name(&cookie_a),
        name(&cookie_b),
        "one cookie name per instance"
    );
    // A browser sends every cookie of the host to every port.
    let jar = format!("{cookie_a}; {cookie_b}");
    assert!(signed_in(&a, &jar).await);
    assert!(signed_in(&b, &jar).await);
    one.shutdown().await;
    two.shutdown().await;
}

#[actix_web::test]
async fn the_secure_cookie_mode_sends_a_secure_host_only_cookie() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = app_with(&db, &kafka, |s| s.admin.secure_cookie = true).await;
    let (cookie, set_cookie) = sign_in(&admin(&app)).await;
    assert!(cookie.starts_with("__Host-history_session_"), "{cookie}");
    for attribute in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    let plain = spawn_app(&db, &kafka).await;
    plain.wait_assigned(1).await;
    let (_, set_cookie) = sign_in(&admin(&plain)).await;
    assert!(!set_cookie.contains("Secure"), "opt-in only: {set_cookie}");
    app.shutdown().await;
    plain.shutdown().await;
}

#[actix_web::test]
async fn a_slow_admin_query_ends_at_the_statement_timeout_and_the_client_gets_a_generic_message() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = app_with(&db, &kafka, |s| {
        s.admin.statement_timeout = Duration::from_millis(300);
    })
    .await;
    let addr = admin(&app);
    // Holding a lock the audit trail's read waits for makes that read slow.
    let mut locker = db.pool.get().await.unwrap();
    let transaction = locker.transaction().await.unwrap();
    transaction
        .batch_execute("LOCK TABLE admin_actions IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();

    let started = Instant::now();
    let api = get(&addr, "/api/actions").await;
    let waited = started.elapsed();
    assert_eq!(api.status, 503, "{}", api.body);
    assert!(waited < Duration::from_secs(3), "answered after {waited:?}");
    let message = api.json()["error"].as_str().unwrap().to_owned();
    assert!(message.contains("took too long"), "{message}");
    for detail in [
        "canceling statement",
        "admin_actions",
        "statement_timeout =",
    ] {
        assert!(!api.body.contains(detail), "{detail} leaked: {}", api.body);
    }
    let overview = get(&addr, "/").await;
    assert_eq!(overview.status, 200, "the overview shows what it has");
    assert!(overview.body.contains("took too long"));
    assert!(!overview.body.contains("canceling statement"));

    // The pages' connections are their own, named apart from the consumer's.
    let admin_connections = db
        .scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = 'history-consumer-admin' AND datname = current_database()",
        )
        .await;
    assert!(
        (1..=2).contains(&admin_connections),
        "{admin_connections} admin connections"
    );
    transaction.rollback().await.unwrap();
    assert_eq!(get(&addr, "/api/actions").await.status, 200);
    app.shutdown().await;
}

#[actix_web::test]
async fn dead_letters_page_by_cursor_newest_first_without_gaps_or_repeats() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let addr = admin(&app);
    let producer = kafka.producer();
    const LETTERS: i64 = 120;
    for i in 0..LETTERS {
        let body = format!("not json {i}");
        kafka.send(&producer, Some(0), "k", body.as_bytes()).await;
    }
    app.wait_committed(&kafka, &[LETTERS]).await;

    let mut offsets = Vec::new();
    let mut pages = Vec::new();
    let mut path = "/api/dead-letters?partition=0".to_owned();
    loop {
        let page = get(&addr, &path).await.json();
        assert_eq!(page["total"], LETTERS);
        let rows = page["dead_letters"].as_array().unwrap();
        offsets.extend(rows.iter().map(|r| r["offset"].as_i64().unwrap()));
        pages.push(page.clone());
        match page["older"].as_str() {
            Some(cursor) => path = format!("/api/dead-letters?partition=0&before={cursor}"),
            None => break,
        }
    }
    let sizes: Vec<usize> = pages
        .iter()
        .map(|p| p["dead_letters"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, vec![50, 50, 20]);
    let expected: Vec<i64> = (0..LETTERS).rev().collect();
    assert_eq!(offsets, expected, "newest first, each once");
    assert!(
        pages[0]["newer"].is_null(),
        "nothing is newer than the first page"
    );

    // Back from the last page to the one before it.
    let newer = pages[2]["newer"].as_str().unwrap();
    let back = get(
        &addr,
        &format!("/api/dead-letters?partition=0&after={newer}"),
    )
    .await
    .json();
    assert_eq!(back["dead_letters"], pages[1]["dead_letters"]);

    // The HTML page links the same way.
    let html = get(&addr, "/dead-letters?partition=0").await.body;
    assert!(html.contains("120 in all"), "{html}");
    let (before, _) = html.split_once("id=\"older\"").expect("an older link");
    let (_, href) = before
        .rsplit_once("href=\"")
        .expect("the older link's href");
    let older = href
        .split('"')
        .next()
        .unwrap_or_default()
        .replace("&#38;", "&")
        .replace("&amp;", "&");
    let second = get(&addr, &older).await;
    assert_eq!(second.status, 200, "{older}");
    assert!(second.body.contains("id=\"newer\""));
    assert!(second.body.contains("id=\"newest\""));
    app.shutdown().await;
}

#[actix_web::test]
async fn another_authorization_scheme_falls_through_to_the_session() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = app_with(&db, &kafka, |s| s.admin.read_auth = true).await;
    let addr = admin(&app);
    let (cookie, _) = sign_in(&addr).await;
    // What a reverse proxy with HTTP Basic in front of the UI adds to every request.
    let basic = ("Authorization", "Basic b3BlcmF0b3I6cHJveHktcGFzc3dvcmQ=");
    let page = request(
        &addr,
        "GET",
        "/partitions/0",
        &[("Cookie", &cookie), basic],
        "",
    )
    .await;
    assert_eq!(page.status, 200, "{}", page.body);
    let csrf = csrf_of(&page.body);
    let acted = request(
        &addr,
        "POST",
        "/partitions/0/actions/retry_now",
        &[
            ("Cookie", &cookie),
            basic,
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(acted.status, 303, "{}", acted.body);
    // The API still wants the bearer token itself.
    let api = request(
        &addr,
        "POST",
        "/api/partitions/0/actions/pause",
        &[basic],
        "",
    )
    .await;
    assert_eq!(api.status, 401);
    assert!(api.body.contains("Authorization: Bearer"), "{}", api.body);
    let exposition = get(&addr, "/metrics").await.body;
    assert_eq!(
        metrics::value(
            &exposition,
            "history_admin_auth_failures_total{method=\"bearer\",reason=\"wrong_token\"}"
        ),
        Some(0.0),
        "Basic is not a wrong bearer token"
    );
    app.shutdown().await;
}

#[actix_web::test]
async fn anonymous_page_loads_are_limited_per_address_and_in_all_but_signed_in_ones_are_not() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = app_with(&db, &kafka, |s| s.admin.anonymous_reads_per_sec = 4).await;
    let addr = admin(&app);
    let (cookie, _) = sign_in(&addr).await;
    let from = |host: u8| Ipv4Addr::new(127, 0, 2, host);
    let page = |host: u8, path: &'static str, headers: Vec<(&'static str, String)>| {
        let addr = addr.clone();
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            request_from(from(host), &addr, "GET", path, &headers, "").await
        }
    };
    // 4 a second over all addresses, 8 at once; half of that per address: a burst of 4, then
    // one more every 500 ms. The loads themselves take time on a busy machine, so the bucket is
    // judged by what it let through against the time spent, not by the fifth load alone.
    let burst_started = Instant::now();
    let mut accepted = 0u32;
    let (refused, started) = loop {
        let path = if accepted % 2 == 0 {
            "/dead-letters"
        } else {
            "/api/status"
        };
        let started = Instant::now();
        let response = page(1, path, vec![]).await;
        if response.status != 200 {
            break (response, started);
        }
        accepted += 1;
        assert!(
            accepted <= 40,
            "40 anonymous loads from one address, none refused"
        );
    };
    let refilled = (burst_started.elapsed().as_secs_f64() / 0.5).floor() as u32;
    assert!(
        (4..=4 + refilled).contains(&accepted),
        "{accepted} anonymous loads accepted from one address before a refusal, \
         with {refilled} refilled"
    );
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(
        started.elapsed() >= OVER_LIMIT_DELAY,
        "a refusal over the limit is sent late"
    );
    assert!(refused.body.contains("sign in"), "{}", refused.body);
    assert!(refused.header("retry-after").is_some());
    // Signed in, the same address reads on; what is never behind a sign-in stays open too.
    let signed_in = page(1, "/dead-letters", vec![("Cookie", cookie.clone())]).await;
    assert_eq!(signed_in.status, 200);
    let bearer = page(
        1,
        "/api/status",
        vec![("Authorization", format!("Bearer {TOKEN}"))],
    )
    .await;
    assert_eq!(bearer.status, 200);
    for path in ["/metrics", "/healthz", "/static/admin.css", "/login"] {
        assert_eq!(page(1, path, vec![]).await.status, 200, "{path}");
    }
    // Other addresses have shares of their own, until together they use up the global one:
    // then a load within an address's share is refused.
    let mut refused_within_share = None;
    'addresses: for host in 2..30 {
        for _ in 0..4 {
            let response = page(host, "/", vec![]).await;
            if response.status == 429 {
                refused_within_share = Some(host);
                break 'addresses;
            }
            assert_eq!(response.status, 200, "{}", response.body);
        }
    }
    assert!(
        refused_within_share.is_some(),
        "the global limit never refused a page load"
    );
    let exposition = get(&app.handle.metrics_addr.to_string(), "/metrics")
        .await
        .body;
    let refusals =
        metrics::value(&exposition, "history_admin_anonymous_reads_refused_total").unwrap();
    assert!(refusals >= 2.0, "{refusals}");
    app.shutdown().await;
}

/// Name and nice value of every thread of this process (Linux).
fn threads() -> Vec<(String, i64)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        // The fields after the parenthesised name start with field 3; nice is field 19.
        let nice = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(16))
            .and_then(|n| n.parse().ok());
        if let Some(nice) = nice {
            found.push((name.trim().to_owned(), nice));
        }
    }
    found
}

#[actix_web::test]
async fn the_admin_server_worker_yields_the_cpu_to_record_processing() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    // The worker starts with the server; a request makes sure it has.
    assert_eq!(get(&admin(&app), "/healthz").await.status, 200);
    let workers: Vec<(String, i64)> = threads()
        .into_iter()
        .filter(|(name, _)| name.starts_with("actix-rt|system"))
        .collect();
    assert!(
        workers
            .iter()
            .any(|(_, nice)| *nice == i64::from(ADMIN_WORKER_NICE)),
        "{workers:?}"
    );
    let consumer = threads()
        .into_iter()
        .filter(|(name, _)| name == "kafka-driver")
        .collect::<Vec<_>>();
    assert!(!consumer.is_empty() && consumer.iter().all(|(_, nice)| *nice == 0));
    app.shutdown().await;
}
