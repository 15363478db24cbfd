//! The deployment assets, checked by the tools that will run them: docker-compose accepts the
//! compose file, promtool the Prometheus config and the alert rules (and runs their unit
//! tests), every metric the dashboard and the rules name is exported, and a real Prometheus
//! scraping an in-process consumer through duplicates, dead letters and a database outage
//! evaluates every dashboard query and alert rule.
//!
//! `docker-compose` and `prometheus` (with `promtool`) are Debian packages; without them these
//! tests fail and say so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use history_consumer::actors::messages::PartitionAction;
use history_consumer::stuck::StuckRules;
use serde_json::Value;

use crate::support::app::{TestApp, spawn_app_with, test_settings};
use crate::support::helpers::{free_port, own_database};
use crate::support::helpers::{test_database, unique_name, wait_for};
use crate::support::http::get;
use crate::support::kafka::{TestKafka, numbered_event, story_900};
use crate::support::repo::read;

const COMPOSE_FILE: &str = "docker-compose.yml";
const DASHBOARD: &str = "dashboards/history-consumer.json";
const ALERTS: &str = "deploy/alerts.yml";
const ALERT_TESTS: &str = "deploy/alerts.test.yml";
const PROMETHEUS_CONFIG: &str = "deploy/prometheus.yml";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

// ----- external tools -------------------------------------------------------------------------

/// A command for a tool these tests need, failing with what to install when it is missing.
pub(crate) fn tool(name: &str, package: &str) -> Command {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()));
    assert!(
        found,
        "`{name}` is not installed: the deployment tests need the Debian package `{package}` \
         (apt-get install {package}); CI must install it before scripts/test"
    );
    let mut command = Command::new(name);
    command.current_dir(repo());
    command
}

/// What a bounded run of a command produced; `status` is `None` when it was killed at the
/// deadline.
pub(crate) struct Ran {
    pub(crate) status: Option<ExitStatus>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Ran {
    pub(crate) fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    pub(crate) fn describe(&self) -> String {
        format!(
            "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `command` to completion or kills it after `timeout`. Output goes to files, so a chatty
/// tool cannot block on a full pipe.
pub(crate) fn run_bounded(mut command: Command, timeout: Duration) -> Ran {
    let out = tempfile::NamedTempFile::new().expect("a temp file");
    let err = tempfile::NamedTempFile::new().expect("a temp file");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out.reopen().expect("reopen"))
        .stderr(err.reopen().expect("reopen"))
        .spawn()
        .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        status,
        stdout: std::fs::read_to_string(out.path()).unwrap_or_default(),
        stderr: std::fs::read_to_string(err.path()).unwrap_or_default(),
    }
}

pub(crate) fn run_ok(command: Command, what: &str) -> Ran {
    let ran = run_bounded(command, Duration::from_secs(60));
    assert!(ran.success(), "{what} failed: {}", ran.describe());
    ran
}

// ----- docker-compose and the Dockerfile ------------------------------------------------------

/// docker-compose with only the compose file's own defaults: no inherited HISTORY_* or COMPOSE_*
/// variables and an empty env file (a developer's `.env` must not hide a missing default).
fn compose(env_file: &Path, args: &[&str]) -> Command {
    let mut command = tool("docker-compose", "docker-compose");
    command.env_clear();
    for key in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    command
        .arg("--file")
        .arg(COMPOSE_FILE)
        .arg("--env-file")
        .arg(env_file)
        .args(args);
    command
}

#[test]
fn docker_compose_passes_every_secret_as_a_file_never_as_an_environment_value() {
    let env_file = tempfile::NamedTempFile::new().expect("an empty env file");
    let resolved = run_ok(
        compose(env_file.path(), &["config"]),
        "docker-compose config",
    )
    .stdout;
    for setting in [
        "HISTORY_ADMIN_TOKEN:",
        "HISTORY_KAFKA_SASL_PASSWORD:",
        "POSTGRES_PASSWORD:",
        "GF_SECURITY_ADMIN_PASSWORD:",
        "history:history@",
    ] {
        assert!(
            !resolved.contains(setting),
            "`{setting}` in the resolved compose file:\n{resolved}"
        );
    }
    for (setting, count) in [
        ("HISTORY_ADMIN_TOKEN_FILE: /run/secrets/admin_token", 3),
        (
            "HISTORY_DATABASE_PASSWORD_FILE: /run/secrets/db_password",
            3,
        ),
        ("POSTGRES_PASSWORD_FILE: /run/secrets/db_password", 1),
        (
            "GF_SECURITY_ADMIN_PASSWORD__FILE: /run/secrets/grafana_admin_password",
            1,
        ),
    ] {
        assert_eq!(
            resolved.matches(setting).count(),
            count,
            "`{setting}` in the resolved compose file:\n{resolved}"
        );
    }
    for secret in ["admin_token", "db_password", "grafana_admin_password"] {
        let source = repo().join("secrets").join(secret).display().to_string();
        assert!(
            resolved.contains(&format!("file: {source}")),
            "secret {secret} is not the file {source}:\n{resolved}"
        );
    }
}

#[test]
fn compose_secrets_makes_random_readable_files_in_a_private_folder_and_keeps_them() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let secrets = dir.path().join("secrets");
    let script = repo().join("scripts/compose-secrets");
    let make = || {
        let mut command = Command::new(&script);
        command.arg(&secrets);
        run_ok(command, "scripts/compose-secrets")
    };
    make();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&secrets), 0o700);
    let mut first = Vec::new();
    for name in ["admin_token", "db_password", "grafana_admin_password"] {
        let file = secrets.join(name);
        assert_eq!(mode(&file), 0o644, "{name}");
        let value = std::fs::read_to_string(&file).unwrap();
        assert!(
            value.len() >= 32 && value.chars().all(|c| c.is_ascii_hexdigit()),
            "{name}: {value:?}"
        );
        first.push(value);
    }
    assert_ne!(first[0], first[1], "each secret is its own");
    make();
    let again: Vec<String> = ["admin_token", "db_password", "grafana_admin_password"]
        .iter()
        .map(|name| std::fs::read_to_string(secrets.join(name)).unwrap())
        .collect();
    assert_eq!(
        first, again,
        "a second run keeps what the database already has"
    );
}

#[test]
fn docker_compose_accepts_the_compose_file_with_its_defaults() {
    let env_file = tempfile::NamedTempFile::new().expect("an empty env file");
    let quiet = run_ok(
        compose(env_file.path(), &["config", "-q"]),
        "docker-compose config -q",
    );
    assert!(
        !quiet.stderr.contains("variable is not set"),
        "every variable needs a default: {}",
        quiet.stderr
    );

    let services = run_ok(
        compose(env_file.path(), &["config", "--services"]),
        "docker-compose config --services",
    );
    let services: BTreeSet<&str> = services.stdout.lines().map(str::trim).collect();
    for service in [
        "kafka",
        "kafka-init",
        "postgres",
        "history-1",
        "history-2",
        "history-3",
        "prometheus",
        "grafana",
    ] {
        assert!(
            services.contains(service),
            "no service {service}: {services:?}"
        );
    }

    // The resolved file: three members of one group, each configured through HISTORY_*.
    let resolved = run_ok(
        compose(env_file.path(), &["config"]),
        "docker-compose config",
    )
    .stdout;
    for (setting, count) in [
        ("HISTORY_KAFKA_BROKERS: kafka:9092", 3),
        ("HISTORY_KAFKA_TOPIC: tickets.status.v1", 3),
        ("HISTORY_KAFKA_GROUP: history", 3),
        (
            "HISTORY_DATABASE_URL: postgres://history@postgres:5432/history",
            3,
        ),
        ("HISTORY_ADMIN_ADDR: 0.0.0.0:8080", 3),
        ("HISTORY_METRICS_ADDR: 0.0.0.0:9100", 3),
        ("HISTORY_ADMIN_READ_AUTH: \"true\"", 3),
        ("condition: service_completed_successfully", 3),
        ("POSTGRES_DB: history", 1),
        ("image: postgres:15", 1),
    ] {
        assert_eq!(
            resolved.matches(setting).count(),
            count,
            "`{setting}` in the resolved compose file:\n{resolved}"
        );
    }
    // Every file the services mount is in the repository.
    let root = repo().display().to_string();
    let mounts: Vec<&str> = resolved
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .filter(|item| item.starts_with(&root))
        .map(|item| item.split(':').next().unwrap())
        .collect();
    assert!(mounts.len() >= 5, "bind mounts: {mounts:?}");
    for source in mounts {
        assert!(
            Path::new(source).exists(),
            "mounted {source} does not exist"
        );
    }

    // Prometheus scrapes exactly the consumer services, on their metrics port.
    let consumers: BTreeSet<String> = services
        .iter()
        .filter(|s| s.starts_with("history-"))
        .map(|s| format!("{s}:9100"))
        .collect();
    let targets: BTreeSet<String> = read(PROMETHEUS_CONFIG)
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- history-"))
        .map(|rest| format!("history-{rest}"))
        .collect();
    assert_eq!(targets, consumers, "scrape targets vs consumer services");
}

#[test]
fn the_dockerfile_declares_two_stages_and_a_non_root_user() {
    let dockerfile = read("Dockerfile");
    let instructions: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<&&str> = instructions
        .iter()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(froms.len(), 2, "{froms:?}");
    assert!(froms[0].starts_with("FROM rust:1-bookworm AS builder"));
    assert!(froms[1].starts_with("FROM debian:bookworm-slim"));
    let user = instructions
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER instruction");
    assert!(
        !user.starts_with("root") && !user.starts_with("0"),
        "runs as {user}"
    );
    assert!(instructions.contains(&r#"ENTRYPOINT ["history-consumer"]"#));
    assert!(instructions.contains(&r#"CMD ["run"]"#));
    // What the build copies exists and is not excluded from the build context.
    let ignored: Vec<String> = read(".dockerignore")
        .lines()
        .map(|l| l.trim().trim_end_matches('/').to_owned())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for line in instructions
        .iter()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let words: Vec<&str> = line.split_whitespace().collect();
        for source in &words[1..words.len() - 1] {
            assert!(repo().join(source).exists(), "COPY {source}: missing");
            assert!(
                !ignored.iter().any(|i| i == source),
                "COPY {source}: excluded by .dockerignore"
            );
        }
    }
}

#[test]
fn the_image_serves_metrics_and_health_apart_from_the_admin_ui() {
    let dockerfile = read("Dockerfile");
    for expected in [
        "HISTORY_ADMIN_ADDR=0.0.0.0:8080",
        "HISTORY_METRICS_ADDR=0.0.0.0:9100",
        "EXPOSE 8080 9100",
    ] {
        assert!(
            dockerfile.contains(expected),
            "{expected} in the Dockerfile"
        );
    }
}

// ----- promtool -------------------------------------------------------------------------------

fn promtool(args: &[&str]) -> Command {
    let mut command = tool("promtool", "prometheus");
    command.args(args);
    command
}

#[test]
fn promtool_accepts_the_prometheus_config_and_the_alert_rules() {
    run_ok(
        promtool(&["check", "config", PROMETHEUS_CONFIG]),
        "promtool check config",
    );
    run_ok(
        promtool(&["check", "rules", ALERTS]),
        "promtool check rules",
    );
}

/// The alert names of the rules file.
fn alert_names() -> BTreeSet<String> {
    read(ALERTS)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
fn every_alert_has_unit_tests_that_fire_and_stay_silent_and_promtool_passes_them() {
    let alerts = alert_names();
    assert!(alerts.len() >= 6, "{alerts:?}");
    // alertname -> (silent cases, firing cases)
    let mut cases: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let tests = read(ALERT_TESTS);
    let mut lines = tests.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("alertname:") else {
            continue;
        };
        let expected = lines
            .by_ref()
            .find(|l| l.starts_with("exp_alerts:"))
            .unwrap_or_else(|| panic!("no exp_alerts after alertname {name}"));
        let entry = cases.entry(name.trim().to_owned()).or_default();
        if expected.trim_end() == "exp_alerts: []" {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
    for alert in &alerts {
        let (silent, firing) = cases.get(alert).copied().unwrap_or_default();
        assert!(
            silent > 0 && firing > 0,
            "{alert}: {firing} firing and {silent} silent cases in {ALERT_TESTS}"
        );
    }
    let unknown: Vec<&String> = cases.keys().filter(|n| !alerts.contains(*n)).collect();
    assert!(unknown.is_empty(), "tests of unknown alerts: {unknown:?}");

    let ran = run_ok(
        promtool(&["test", "rules", ALERT_TESTS]),
        "promtool test rules",
    );
    assert!(ran.stdout.contains("SUCCESS"), "{}", ran.describe());
}

// ----- what the dashboard and the rules query -------------------------------------------------

/// A dashboard panel and its queries.
struct Panel {
    title: String,
    exprs: Vec<String>,
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON")
}

/// Every panel that is not a row, including those nested in collapsed rows.
fn panels(dashboard: &Value) -> Vec<Panel> {
    fn walk(list: &Value, out: &mut Vec<Panel>) {
        for panel in list.as_array().into_iter().flatten() {
            if panel["type"] == "row" {
                walk(&panel["panels"], out);
                continue;
            }
            let exprs = panel["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["expr"].as_str().map(str::to_owned))
                .collect();
            out.push(Panel {
                title: panel["title"].as_str().unwrap_or("?").to_owned(),
                exprs,
            });
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// The query variables as (name, selector, label) from `label_values(selector, label)`.
fn query_variables(dashboard: &Value) -> Vec<(String, String, String)> {
    dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .filter(|v| v["type"] == "query")
        .map(|v| {
            let query = v["query"]["query"]
                .as_str()
                .or_else(|| v["query"].as_str())
                .expect("a variable query");
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
                .unwrap_or_else(|| panic!("not label_values(..): {query}"));
            let (selector, label) = inner
                .rsplit_once(',')
                .expect("label_values(selector, label)");
            (
                v["name"].as_str().unwrap().to_owned(),
                selector.trim().to_owned(),
                label.trim().to_owned(),
            )
        })
        .collect()
}

/// Grafana's variables replaced by values Prometheus understands.
fn substitute(expr: &str, instance: &str, partition: &str) -> String {
    let text = expr
        .replace("$__rate_interval", "1m")
        .replace("${instance}", instance)
        .replace("$instance", instance)
        .replace("${partition}", partition)
        .replace("$partition", partition);
    assert!(!text.contains('$'), "an unknown variable in {expr}");
    text
}

/// The `expr:` of every rule in the rules file (inline or a `|` block).
fn rule_exprs() -> Vec<String> {
    let text = read(ALERTS);
    let lines: Vec<&str> = text.lines().collect();
    let mut exprs = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(value) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let value = value.trim();
        if !value.starts_with('|') && !value.starts_with('>') {
            exprs.push(value.to_owned());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let block: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
            .map(|l| l.trim())
            .collect();
        exprs.push(block.join("\n"));
    }
    exprs
}

/// Words of PromQL that are never metric names (aggregations, operators, modifiers).
const PROMQL_WORDS: &str = "sum min max avg group stddev stdvar count count_values bottomk topk \
                            quantile and or unless bool offset atan2";

/// Label-list modifiers: the parenthesised list after them names labels, not metrics.
const LABEL_LIST_WORDS: &str = "by without on ignoring group_left group_right";

fn is_one_of(words: &str, word: &str) -> bool {
    words.split_whitespace().any(|w| w == word)
}

/// The metric names a PromQL expression selects: identifiers outside strings, label matchers
/// and ranges that are neither functions, aggregations, keywords nor label lists.
fn metric_names(expr: &str) -> BTreeSet<String> {
    // Strings, then {label matchers} and [ranges], go first.
    let mut bare = String::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' | '`' => {
                while let Some(d) = chars.next() {
                    if d == '\\' && c != '`' {
                        chars.next();
                    } else if d == c {
                        break;
                    }
                }
            }
            '{' => {
                for d in chars.by_ref() {
                    if d == '}' {
                        break;
                    }
                }
                bare.push(' ');
            }
            '[' => {
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                }
                bare.push(' ');
            }
            _ => bare.push(c),
        }
    }
    let chars: Vec<char> = bare.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            // A number or a duration (5m, 0.99, 1e3).
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        if !(c.is_ascii_alphabetic() || c == '_' || c == ':') {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
        {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let mut next = i;
        while next < chars.len() && chars[next].is_whitespace() {
            next += 1;
        }
        let call = chars.get(next) == Some(&'(');
        if is_one_of(LABEL_LIST_WORDS, &word) {
            if call {
                while next < chars.len() && chars[next] != ')' {
                    next += 1;
                }
                i = next + 1;
            }
            continue;
        }
        if call || is_one_of(PROMQL_WORDS, &word.to_ascii_lowercase()) {
            continue;
        }
        names.insert(word);
    }
    names
}

#[test]
fn the_metric_name_extractor_skips_functions_labels_keywords_strings_and_ranges() {
    let names = |e: &str| metric_names(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(
            r#"histogram_quantile(0.99, sum by (le, outcome) (rate(a_bucket{instance=~"x|y", le!="1"}[5m])))"#
        ),
        ["a_bucket"]
    );
    assert_eq!(
        names("sum(b_total) by (reason) > 0 or c unless on(instance) group_left(p) d offset 15m"),
        ["b_total", "c", "d"]
    );
    assert_eq!(
        names(r#"max(up{job="by"}) == bool 1 and count(x:y) > .5"#),
        ["up", "x:y"]
    );
}

/// Metric families of a text exposition: name -> type.
fn families(exposition: &str) -> BTreeMap<String, String> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_owned(), kind.trim().to_owned()))
        .collect()
}

/// Whether `name` is a series of an exported family (histogram and summary series carry
/// suffixes; `up` is Prometheus's own).
fn exported(families: &BTreeMap<String, String>, name: &str) -> bool {
    if name == "up" || families.contains_key(name) {
        return true;
    }
    ["_bucket", "_sum", "_count"].iter().any(|suffix| {
        name.strip_suffix(suffix)
            .and_then(|base| families.get(base))
            .is_some_and(|kind| kind == "histogram" || (kind == "summary" && *suffix != "_bucket"))
    })
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Waits until the app's own exposition contains `needle`; returns the exposition.
async fn exposition_with(addr: &str, needle: &str) -> String {
    wait_for(
        Duration::from_secs(30),
        &format!("{needle} in /metrics"),
        || async {
            let body = get(addr, "/metrics").await.body;
            body.contains(needle).then_some(body)
        },
    )
    .await
}

#[actix_web::test]
async fn every_metric_the_dashboard_and_the_rules_query_is_exported_by_a_live_service() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.runtime.partition_queue = 2;
    settings.runtime.partition_fetch_kb = 1;
    settings.runtime.batch_size = 2;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let addr = app.handle.metrics_addr.to_string();
    // A story that creates every labelled series: applied, a republished duplicate, a dead
    // letter, and a partition whose fetching pauses (paused by the operator, queue full).
    let producer = kafka.producer();
    let e900 = story_900();
    kafka.send(&producer, Some(0), "ticket-42", &e900).await;
    kafka.send(&producer, Some(0), "ticket-42", &e900).await;
    kafka.send(&producer, Some(0), "k", b"not json").await;
    app.wait_committed(&kafka, &[3]).await;
    operator(&app, 0, PartitionAction::Pause).await;
    for i in 0..8 {
        kafka
            .send(&producer, Some(0), "k", &numbered_event(i))
            .await;
    }
    exposition_with(&addr, "history_partition_fetch_paused{partition=\"0\"} 1").await;
    operator(&app, 0, PartitionAction::Resume).await;
    app.wait_committed(&kafka, &[11]).await;
    exposition_with(&addr, "history_partition_stuck{partition=\"0\"}").await;
    // Lag comes from librdkafka's statistics, once a second: wait for it too.
    let exposition = exposition_with(&addr, "history_lag_records{partition=\"0\"}").await;
    let families = families(&exposition);

    let dashboard = dashboard();
    let mut queries: Vec<(String, String)> = panels(&dashboard)
        .into_iter()
        .flat_map(|p| p.exprs.into_iter().map(move |e| (p.title.clone(), e)))
        .collect();
    for (name, selector, _) in query_variables(&dashboard) {
        queries.push((format!("variable {name}"), selector));
    }
    for expr in rule_exprs() {
        queries.push((ALERTS.to_owned(), expr));
    }
    assert!(queries.len() >= 20, "{} queries", queries.len());
    let mut referenced = BTreeSet::new();
    for (source, expr) in &queries {
        let names = metric_names(&substitute(expr, ".*", ".*"));
        assert!(!names.is_empty(), "{source}: no metric in {expr}");
        for name in names {
            assert!(
                exported(&families, &name),
                "{source}: `{name}` is not exported by the service (query: {expr})"
            );
            referenced.insert(name);
        }
    }
    // The dashboard covers the whole metric table.
    for family in families.keys().filter(|f| f.starts_with("history_")) {
        let used = referenced
            .iter()
            .any(|r| r == family || r.strip_suffix("_bucket") == Some(family.as_str()));
        assert!(used, "{family} is exported but no panel or rule uses it");
    }
    app.shutdown().await;
}

async fn operator(app: &TestApp, partition: i32, action: PartitionAction) {
    app.operator(partition, action).await;
}

// ----- the compose health check ---------------------------------------------------------------

/// The consumer's health check command from the compose file (on the metrics port), aimed at
/// `port`.
fn health_check(port: u16) -> Command {
    let compose = read(COMPOSE_FILE);
    let line = compose
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("test:") && l.contains("/readyz"))
        .expect("the consumer's health check");
    // The flow sequence is written in the JSON subset of YAML.
    let argv: Vec<String> = serde_json::from_str(line.trim_start_matches("test:").trim())
        .expect("the health check is a JSON-style list");
    assert_eq!(argv[0], "CMD", "{argv:?}");
    let mut command = Command::new(&argv[1]);
    for arg in &argv[2..] {
        command.arg(arg.replace("127.0.0.1/9100", &format!("127.0.0.1/{port}")));
    }
    command
}

async fn healthy(port: u16) -> bool {
    tokio::task::spawn_blocking(move || {
        run_bounded(health_check(port), Duration::from_secs(10)).success()
    })
    .await
    .expect("health check task")
}

/// Settings as compose sets them: metrics apart, reading behind a sign-in.
fn compose_like(db_url: &str, kafka: &TestKafka) -> history_consumer::config::Settings {
    let mut settings = test_settings(db_url, kafka, &unique_name("group"));
    settings.admin.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    settings.admin.read_auth = true;
    settings
}

#[actix_web::test]
async fn the_compose_health_check_passes_on_a_ready_consumer_and_fails_without_one() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app_with(compose_like(&db.url, &kafka)).await;
    app.wait_assigned(1).await;
    let port = app.handle.metrics_addr.port();
    assert!(
        healthy(port).await,
        "the health check fails on a ready consumer"
    );
    let closed = free_port();
    assert!(
        !healthy(closed).await,
        "the health check passes with nothing listening"
    );
    app.shutdown().await;
}

// ----- a real Prometheus ----------------------------------------------------------------------

/// A Prometheus server on a free port scraping `target` every second with the repository's
/// alert rules; killed on drop.
struct Prometheus {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl Prometheus {
    async fn start(target: &str) -> Prometheus {
        let mut command = tool("prometheus", "prometheus");
        let dir = tempfile::tempdir().expect("a temp dir");
        let config = dir.path().join("prometheus.yml");
        let rules = repo().join(ALERTS);
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {rules}\n\
                 scrape_configs:\n  - job_name: history-consumer\n    static_configs:\n      \
                 - targets: ['{target}']\n",
                rules = rules.display()
            ),
        )
        .expect("write the config");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("a log file");
        let child = command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect(&prometheus.addr)
                .await
                .is_ok()
                && get(&prometheus.addr, "/-/ready").await.status == 200
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus did not get ready: {}",
                prometheus.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        prometheus
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    async fn api(&self, path: &str) -> Value {
        let response = get(&self.addr, path).await;
        serde_json::from_str(&response.body)
            .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {}", response.body))
    }

    /// Evaluates `query` now: the result vector, or the error Prometheus reported.
    async fn query(&self, query: &str) -> Result<Vec<Value>, String> {
        let body = self
            .api(&format!("/api/v1/query?query={}", encode(query)))
            .await;
        if body["status"] != "success" {
            return Err(format!("{}: {}", body["errorType"], body["error"]));
        }
        Ok(body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// The states (pending, firing) of the active alerts named `alert`.
    async fn alert_states(&self, alert: &str) -> Vec<String> {
        self.api("/api/v1/alerts").await["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["labels"]["alertname"] == alert)
            .filter_map(|a| a["state"].as_str().map(str::to_owned))
            .collect()
    }

    async fn wait_alert(&self, alert: &str, states: &[&str]) {
        wait_for(
            Duration::from_secs(60),
            &format!("alert {alert} to be {states:?}"),
            || async {
                let now = self.alert_states(alert).await;
                now.iter()
                    .any(|s| states.contains(&s.as_str()))
                    .then_some(())
            },
        )
        .await;
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[actix_web::test]
async fn prometheus_evaluates_every_panel_and_alert_against_a_consumer_through_an_outage() {
    // A cluster of its own: this test stops it.
    let (mut cluster, url) = own_database("deploy").await;
    let kafka = TestKafka::start(3);
    let mut settings = compose_like(&url, &kafka);
    settings.runtime.stuck = StuckRules {
        unknown_age: Duration::from_secs(2),
        stall: Duration::from_secs(5),
    };
    settings.runtime.max_unresolved = 10;
    settings.runtime.partition_queue = 4;
    settings.runtime.partition_fetch_kb = 1;
    settings.runtime.batch_size = 4;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(3).await;
    let target = app.handle.metrics_addr.to_string();
    let prometheus = Prometheus::start(&target).await;
    wait_for(Duration::from_secs(30), "the first scrape", || async {
        let up = prometheus.query("up{job=\"history-consumer\"} == 1").await;
        up.is_ok_and(|r| !r.is_empty()).then_some(())
    })
    .await;

    // Traffic with duplicates and dead letters on every partition.
    let producer = kafka.producer();
    for i in 0..30 {
        let partition = (i % 3) as i32;
        kafka
            .send(&producer, Some(partition), "k", &numbered_event(i))
            .await;
    }
    for i in 0..3 {
        kafka
            .send(&producer, Some(i as i32), "k", &numbered_event(i))
            .await;
        kafka
            .send(&producer, Some(i as i32), "k", b"not json")
            .await;
    }
    kafka
        .send(&producer, Some(0), "k", br#"{"event_id":"event-x"}"#)
        .await;
    app.wait_committed(&kafka, &kafka.ends().await).await;
    prometheus
        .wait_alert("HistoryDeadLetters", &["firing"])
        .await;
    let ready_port = app.handle.metrics_addr.port();
    assert!(healthy(ready_port).await, "healthy before the outage");

    // The database goes away: Unknowns pile up, partition 0 fills its backlog and pauses.
    cluster.stop().expect("stop postgres");
    for i in 100..140 {
        kafka
            .send(&producer, Some(0), "k", &numbered_event(i))
            .await;
    }
    kafka
        .send(&producer, Some(1), "k", &numbered_event(140))
        .await;
    exposition_with(&target, "history_partition_fetch_paused{partition=\"0\"} 1").await;
    prometheus
        .wait_alert("HistoryPartitionStuck", &["pending", "firing"])
        .await;
    assert!(
        !healthy(ready_port).await,
        "the health check passes while the database is down"
    );

    cluster.restart().expect("restart postgres");
    app.wait_committed(&kafka, &kafka.ends().await).await;
    wait_for(
        Duration::from_secs(30),
        "the recovery to be scraped",
        || async {
            let backlog = prometheus
                .query("sum(history_unknown_backlog_records) == 0")
                .await;
            backlog.is_ok_and(|r| !r.is_empty()).then_some(())
        },
    )
    .await;

    // Every panel query, with "All" and with one instance and partition selected.
    let dashboard = dashboard();
    let panels = panels(&dashboard);
    assert!(panels.len() >= 12, "{} panels", panels.len());
    for (instance, partition) in [(".*", ".*"), (target.as_str(), "0")] {
        for panel in &panels {
            assert!(
                !panel.exprs.is_empty(),
                "panel {} has no query",
                panel.title
            );
            for expr in &panel.exprs {
                let query = substitute(expr, instance, partition);
                let result = prometheus
                    .query(&query)
                    .await
                    .unwrap_or_else(|e| panic!("panel {}: {query}: {e}", panel.title));
                assert!(
                    !result.is_empty(),
                    "panel {} returns no data: {query}",
                    panel.title
                );
            }
        }
        for (name, selector, label) in query_variables(&dashboard) {
            let query = format!(
                "count by ({label}) ({})",
                substitute(&selector, instance, partition)
            );
            let values = prometheus
                .query(&query)
                .await
                .unwrap_or_else(|e| panic!("variable {name}: {query}: {e}"));
            assert!(!values.is_empty(), "variable {name} has no values: {query}");
        }
    }

    // Every alert rule: loaded, healthy, and its expression evaluates.
    let rules = prometheus.api("/api/v1/rules").await;
    let rules: Vec<&Value> = rules["data"]["groups"]
        .as_array()
        .expect("rule groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect();
    let loaded: BTreeSet<String> = rules
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(loaded, alert_names(), "rules loaded by Prometheus");
    for rule in rules {
        assert_eq!(
            rule["health"], "ok",
            "rule {}: {}",
            rule["name"], rule["lastError"]
        );
        let query = rule["query"].as_str().expect("a rule query");
        if let Err(e) = prometheus.query(query).await {
            panic!("rule {}: {query}: {e}", rule["name"]);
        }
    }
    drop(prometheus);
    app.shutdown().await;
}
