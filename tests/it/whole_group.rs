//! Three members of one group as real binaries, on the mock cluster and on tansu: any member's
//! group page and `/api/group` show every partition with its true owner (checked against the
//! members' own `/api/status`), and a member killed with `kill -9` shows as gone with its
//! partitions unowned until Kafka gives them to the others.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::helpers::{TestDb, assert_stored_once, test_database, unique_name, wait_for};
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka, produce, wait_committed};
use crate::support::service::ServiceProcess;

/// The admin token of the members (actions need it).
pub const TOKEN: &str = "group-admin-token-0123";
/// A member counts as gone 2 s after its last heartbeat (every 500 ms).
pub const GONE_AFTER: Duration = Duration::from_secs(2);

/// A member of the test's group, with its own member id.
pub struct Member {
    pub process: ServiceProcess,
    pub id: String,
}

impl Member {
    /// Starts a member publishing every 500 ms.
    pub async fn start(db: &TestDb, kafka: &TestKafka, group: &str, extra: &[&str]) -> Member {
        let mut args = vec!["--member-heartbeat", "500ms", "--member-gone-after", "2s"];
        args.extend_from_slice(extra);
        let kafka_options: Vec<String> = kafka
            .options
            .iter()
            .flat_map(|(k, v)| ["--kafka-option".to_owned(), format!("{k}={v}")])
            .collect();
        args.extend(kafka_options.iter().map(String::as_str));
        let process = ServiceProcess::spawn_with_env(
            &db.url,
            &kafka.brokers,
            &kafka.topic,
            group,
            &args,
            &[("HISTORY_ADMIN_TOKEN", TOKEN)],
        );
        let id = wait_for(Duration::from_secs(60), "the member's own id", || async {
            let group = process.get_json("/api/group").await?;
            group["self"].as_str().map(str::to_owned)
        })
        .await;
        Member { process, id }
    }

    /// The partitions the member's own status says it owns.
    pub async fn owned(&self) -> Option<Vec<i64>> {
        let status = self.process.get_json("/api/status").await?;
        let mut owned: Vec<i64> = status["partitions"]
            .as_array()?
            .iter()
            .filter_map(|p| p["partition"].as_i64())
            .collect();
        owned.sort_unstable();
        Some(owned)
    }

    pub async fn group(&self) -> Option<Value> {
        self.process.get_json("/api/group").await
    }
}

/// Partition → owner (member id, or `None`) as a group view shows it.
pub fn owners(group: &Value) -> BTreeMap<i64, Option<String>> {
    group["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["partition"].as_i64().unwrap(),
                p["owner"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// Waits until `viewer`'s group view names, for every partition, the member whose own status
/// lists it, every member owning at least one; the owners.
pub async fn wait_true_owners(
    kafka: &TestKafka,
    viewer: &Member,
    members: &[&Member],
) -> BTreeMap<i64, Option<String>> {
    wait_for(
        kafka.join_deadline(),
        "the group view to name every partition's true owner",
        || async {
            let mut truth: BTreeMap<i64, Option<String>> = BTreeMap::new();
            for member in members {
                let owned = member.owned().await?;
                if owned.is_empty() {
                    return None;
                }
                for partition in owned {
                    truth.insert(partition, Some(member.id.clone()));
                }
            }
            if truth.len() != kafka.partitions as usize {
                return None;
            }
            let shown = owners(&viewer.group().await?);
            (shown == truth).then_some(truth)
        },
    )
    .await
}

on_both_brokers!(
    every_member_shows_the_whole_group_with_each_partitions_true_owner_and_a_killed_member_goes
);

async fn every_member_shows_the_whole_group_with_each_partitions_true_owner_and_a_killed_member_goes(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 6).await;
    let group = unique_name("group");
    let a = Member::start(&db, &kafka, &group, &[]).await;
    let b = Member::start(&db, &kafka, &group, &[]).await;
    let mut c = Member::start(&db, &kafka, &group, &[]).await;
    let members = [&a, &b, &c];
    let truth = wait_true_owners(&kafka, &a, &members).await;
    eprintln!(
        "owners: {truth:?}; logs {:?} {:?} {:?}",
        a.process.log, b.process.log, c.process.log
    );
    // Every member shows the same group.
    for viewer in [&b, &c] {
        let shown = wait_for(Duration::from_secs(10), "the same owners", || async {
            let shown = owners(&viewer.group().await?);
            (shown == truth).then_some(shown)
        })
        .await;
        assert_eq!(shown, truth);
    }
    let view = a.group().await.expect("the group view");
    assert_eq!(view["self"], a.id.as_str());
    // Neither broker here tells a group's members: the mock has no DescribeGroups, tansu 0.6
    // answers ListGroups with no group and DescribeGroups with a stable group without members.
    // Owners come from what the members publish (Kafka's assignments are decoded where a broker
    // gives them: unit tests of `group::view` and `kafka::assignment`).
    assert_eq!(view["owners_from"], "members", "{view}");
    let listed = view["members"].as_array().unwrap();
    assert_eq!(listed.len(), 3, "{view}");
    for member in listed {
        assert_eq!(member["alive"], true, "{member}");
        assert_eq!(member["version"], env!("CARGO_PKG_VERSION"));
        assert!(member["heartbeat_age_seconds"].as_f64().unwrap() < 2.0);
        let id = member["id"].as_str().unwrap();
        let process = [&a, &b, &c].into_iter().find(|m| m.id == id).unwrap();
        assert_eq!(
            member["admin_url"].as_str().unwrap(),
            format!("http://{}", process.process.admin)
        );
    }

    // Records flow: the view's committed offsets and ends are the broker's.
    produce(&kafka, 0..120).await;
    let ends = kafka.ends().await;
    wait_for(
        Duration::from_secs(60),
        "the group to be caught up",
        || async {
            let view = a.group().await?;
            let caught_up = view["partitions"].as_array()?.iter().all(|p| {
                let partition = p["partition"].as_i64().unwrap() as usize;
                p["committed"].as_i64() == Some(ends[partition])
                    && p["end"].as_i64() == Some(ends[partition])
                    && p["lag_records"] == 0
                    && p["lag_seconds"] == 0.0
                    && p["status"] == "ok"
            });
            caught_up.then_some(())
        },
    )
    .await;

    // kill -9: C is gone within the heartbeat window, its partitions without an owner, until
    // Kafka hands them to A or B.
    let c_partitions: Vec<i64> = truth
        .iter()
        .filter(|(_, owner)| owner.as_deref() == Some(c.id.as_str()))
        .map(|(p, _)| *p)
        .collect();
    let killed_at = Instant::now();
    c.process.kill_9();
    // Cells: the probe is polled as a closure making futures.
    let seen_gone_and_unowned = std::cell::Cell::new(None);
    let seen_gone = std::cell::Cell::new(None);
    wait_for(
        kafka.join_deadline(),
        "C's partitions to be owned by A or B",
        || async {
            let view = a.group().await?;
            let c_row = view["members"]
                .as_array()?
                .iter()
                .find(|m| m["id"] == c.id.as_str())?
                .clone();
            let owners = owners(&view);
            if c_row["alive"] == false {
                if seen_gone.get().is_none() {
                    seen_gone.set(Some(killed_at.elapsed()));
                }
                for partition in &c_partitions {
                    assert_ne!(
                        owners[partition].as_deref(),
                        Some(c.id.as_str()),
                        "a gone member owns nothing: {view}"
                    );
                }
                if c_partitions.iter().all(|p| owners[p].is_none())
                    && seen_gone_and_unowned.get().is_none()
                {
                    seen_gone_and_unowned.set(Some(killed_at.elapsed()));
                }
            }
            let moved = owners.values().all(|o| {
                o.as_deref() == Some(a.id.as_str()) || o.as_deref() == Some(b.id.as_str())
            });
            moved.then_some(())
        },
    )
    .await;
    let gone_after = seen_gone.get().expect("C was shown gone");
    assert!(
        gone_after < GONE_AFTER + Duration::from_secs(3),
        "C was shown gone {gone_after:?} after the kill"
    );
    eprintln!(
        "C gone after {gone_after:?}; its partitions unowned after {:?}; moved after {:?}",
        seen_gone_and_unowned.get(),
        killed_at.elapsed()
    );
    assert!(
        seen_gone_and_unowned.get().is_some(),
        "C's partitions were shown without an owner before they moved"
    );
    let moved = wait_true_owners(&kafka, &a, &[&a, &b]).await;
    assert_eq!(moved.len(), 6);
}

/// `POST path` on `member`'s admin with the bearer token: the status and the JSON body.
pub async fn post_api(member: &Member, path: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(format!("http://{}{path}", member.process.admin))
        .header("Authorization", format!("Bearer {TOKEN}"));
    if let Some(body) = body {
        request = request
            .header("Content-Type", "application/json")
            .body(body.to_string());
    }
    let response = request.send().await.expect("the member answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A row of `group view`'s partitions.
fn partition_row(view: &Value, partition: i64) -> Value {
    view["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["partition"] == partition)
        .cloned()
        .unwrap()
}

on_both_brokers!(
    an_action_asked_on_one_member_runs_on_the_partitions_owner_and_a_moved_partition_is_refused
);

async fn an_action_asked_on_one_member_runs_on_the_partitions_owner_and_a_moved_partition_is_refused(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 4).await;
    let group = unique_name("group");
    let timeout = ["--command-timeout", "3s"];
    let a = Member::start(&db, &kafka, &group, &timeout).await;
    let b = Member::start(&db, &kafka, &group, &timeout).await;
    let truth = wait_true_owners(&kafka, &a, &[&a, &b]).await;
    let owned_by = |member: &Member| -> Vec<i64> {
        truth
            .iter()
            .filter(|(_, o)| o.as_deref() == Some(member.id.as_str()))
            .map(|(p, _)| *p)
            .collect()
    };
    let (on_a, on_b) = (owned_by(&a), owned_by(&b));
    let p = on_b[0];
    eprintln!("A {} owns {on_a:?}, B {} owns {on_b:?}", a.id, b.id);

    // A pause asked on A for B's partition runs on B, and A gives B's answer.
    let (status, answer) = post_api(&a, &format!("/api/partitions/{p}/actions/pause"), None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["routed_to"], b.id.as_str(), "{answer}");
    assert_eq!(answer["outcome"], "done", "{answer}");
    assert_eq!(answer["result"], "ok", "{answer}");
    let paused = b
        .process
        .get_json(&format!("/api/partitions/{p}"))
        .await
        .expect("B's partition");
    assert_eq!(paused["actor"]["operator_paused"], true, "{paused}");
    // Audited on B with who asked on which member.
    let actions = b.process.get_json("/api/actions").await.unwrap();
    let audited = actions["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["action"] == "pause" && r["partition"] == p)
        .cloned()
        .unwrap_or_else(|| panic!("the pause is audited: {actions}"));
    let actor = audited["actor"].as_str().unwrap();
    assert!(
        actor.starts_with("api token from 127.0.0.1 at member ") && actor.contains(&a.id),
        "{audited}"
    );

    // Records arrive: every partition but the paused one is committed to its end.
    produce(&kafka, 0..80).await;
    let ends = kafka.ends().await;
    wait_for(
        Duration::from_secs(60),
        "the other partitions to be committed",
        || async {
            let view = a.group().await?;
            let others = (0..4_i64)
                .filter(|q| *q != p)
                .all(|q| partition_row(&view, q)["committed"].as_i64() == Some(ends[q as usize]));
            others.then_some(())
        },
    )
    .await;
    let view = a.group().await.unwrap();
    let held = partition_row(&view, p);
    assert!(
        held["committed"].as_i64().unwrap_or(0) < ends[p as usize],
        "the paused partition is not committed while records arrive: {view}"
    );
    assert_eq!(held["owner"], b.id.as_str(), "{view}");
    assert_eq!(held["paused"], true, "{view}");
    assert_eq!(held["status"], "paused", "{view}");

    // Resume, asked on A: B commits the partition to its end.
    let (status, answer) = post_api(&a, &format!("/api/partitions/{p}/actions/resume"), None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["routed_to"], b.id.as_str());
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    assert_stored_once(&db, 80).await;

    // A command for a partition that is not (or no more) the addressee's is refused by it, and
    // taken once.
    let client = db.pool.get().await.unwrap();
    let refused_id: i64 = client
        .query_one(
            "WITH c AS (INSERT INTO group_commands (consumer_group, topic, kafka_partition, \
               owner_member_id, action, arguments, asked_by, asked_from_member) \
               VALUES ($1, $2, $3, $4, 'pause', '{}', 'test', 'test') RETURNING id) \
             SELECT id FROM c, pg_notify('history_group_commands', $4)",
            &[&group, &kafka.topic, &(on_a[0] as i32), &b.id],
        )
        .await
        .unwrap()
        .get(0);
    let moved_id: i64 = client
        .query_one(
            "WITH c AS (INSERT INTO group_commands (consumer_group, topic, kafka_partition, \
               owner_member_id, action, arguments, asked_by, asked_from_member) \
               VALUES ($1, $2, $3, $4, 'pause', '{\"generation\": 999}', 'test', 'test') \
               RETURNING id) \
             SELECT id FROM c, pg_notify('history_group_commands', $4)",
            &[&group, &kafka.topic, &(p as i32), &b.id],
        )
        .await
        .unwrap()
        .get(0);
    for (id, says) in [
        (refused_id, "is not owned by member"),
        (moved_id, "came back after the command was asked"),
    ] {
        let answer: Value = wait_for(Duration::from_secs(10), "B's refusal", || async {
            let row = client
                .query_one(
                    "SELECT answer::text, taken_at IS NOT NULL FROM group_commands WHERE id = $1",
                    &[&id],
                )
                .await
                .ok()?;
            let answer: Option<&str> = row.get(0);
            let answer = answer?;
            assert!(row.get::<_, bool>(1), "answered commands were taken");
            serde_json::from_str(answer).ok()
        })
        .await;
        assert_eq!(answer["outcome"], "refused", "{answer}");
        assert_eq!(answer["by"], b.id.as_str());
        assert!(
            answer["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }
    let status = b.process.get_json("/api/status").await.unwrap();
    for partition in status["partitions"].as_array().unwrap() {
        assert_eq!(partition["actor"]["operator_paused"], false, "{partition}");
    }
    let a_status = a
        .process
        .get_json(&format!("/api/partitions/{}", on_a[0]))
        .await
        .unwrap();
    assert_eq!(
        a_status["actor"]["operator_paused"], false,
        "never applied to A"
    );

    // An owner that does not answer: the command is withdrawn with a clear message. (A member
    // row that publishes a partition nobody else does, and never takes commands.)
    client
        .execute(
            "INSERT INTO group_members (member_id, consumer_group, topic, host, pid, version, \
               client_id, started_at, heartbeat_at) \
             VALUES ('silent-1', $1, $2, 'nowhere', 1, 'x', 'silent', now(), now() + interval '1 hour')",
            &[&group, &kafka.topic],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO group_member_partitions (member_id, kafka_partition, state, \
               unknown_records, paused, guard_engaged) VALUES ('silent-1', 77, 'running', 0, false, false)",
            &[],
        )
        .await
        .unwrap();
    let asked = Instant::now();
    let (status, answer) = post_api(&a, "/api/partitions/77/actions/retry_now", None).await;
    assert_eq!(status, 504, "{answer}");
    assert_eq!(answer["outcome"], "expired", "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("did not take the command within 3 s: it was withdrawn and will not run"),
        "{answer}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(6),
        "{:?}",
        asked.elapsed()
    );
    let never_taken = db
        .scalar("SELECT count(*) FROM group_commands WHERE owner_member_id = 'silent-1' AND taken_at IS NULL AND answer->>'outcome' = 'expired'")
        .await;
    assert_eq!(never_taken, 1);
    // No live member owns it: refused at once.
    let (status, answer) = post_api(&a, "/api/partitions/55/actions/pause", None).await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("no live member"),
        "{answer}"
    );
}

/// Where screenshots go: kept with the build, not in the source tree.
fn artifact(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("browser")
        .join(name)
}

#[actix_web::test]
async fn the_group_page_fits_1280_pixels_with_64_partitions_and_shows_a_stuck_partition_of_another_member_first()
 {
    let db = test_database().await;
    // One refused row in a row engages the guard: its partition is stuck.
    crate::support::faults::refuse_rows(&db, "NEW.ticket_id = 'ticket-stuck'").await;
    let kafka = TestKafka::start_on(Broker::Mock, 64).await;
    let group = unique_name("group");
    let extra = ["--max-consecutive-rejections", "0"];
    let a = Member::start(&db, &kafka, &group, &extra).await;
    let b = Member::start(&db, &kafka, &group, &extra).await;
    let truth = wait_true_owners(&kafka, &a, &[&a, &b]).await;
    let on_b: Vec<i64> = truth
        .iter()
        .filter(|(_, o)| o.as_deref() == Some(b.id.as_str()))
        .map(|(p, _)| *p)
        .collect();
    let stuck = on_b[on_b.len() / 2];
    // Eight more members, as the page would list them (rows only: they own nothing).
    let client = db.pool.get().await.unwrap();
    for i in 0..8 {
        client
            .execute(
                "INSERT INTO group_members (member_id, consumer_group, topic, host, pid, version, \
                   client_id, admin_url, started_at, heartbeat_at) \
                 VALUES ($1, $2, $3, $4, 4242, '0.1.0', 'history-consumer-x', \
                   'https://history-consumer-member.internal.example:8080', now(), now() + interval '1 hour')",
                &[
                    &format!("history-{i}-4242-abcd"),
                    &group,
                    &kafka.topic,
                    &format!("history-consumer-{i}.internal.example"),
                ],
            )
            .await
            .unwrap();
    }
    let producer = kafka.producer();
    for partition in 0..64 {
        let body = crate::support::kafka::payload(
            &format!("event-{partition}"),
            &format!("ticket-{partition}"),
            "open",
            "resolved",
            "2026-10-03T08:00:00Z",
        );
        kafka.send(&producer, Some(partition), "k", &body).await;
    }
    let poison = crate::support::kafka::payload(
        "event-stuck",
        "ticket-stuck",
        "open",
        "resolved",
        "2026-10-03T08:00:00Z",
    );
    kafka
        .send(&producer, Some(stuck as i32), "k", &poison)
        .await;
    wait_for(
        Duration::from_secs(60),
        "B's partition to show stuck on A's group page",
        || async {
            let view = a.group().await?;
            let first = &view["partitions"][0];
            (first["partition"] == stuck && first["status"] == "stuck").then_some(())
        },
    )
    .await;

    let browser = crate::support::webdriver::Browser::start().await;
    browser.set_window_size(1280, 900).await;
    browser
        .goto(&format!("http://{}/group", a.process.admin))
        .await;
    browser.wait_for_element("#group-rows tr.stuck").await;
    assert_eq!(
        browser.attribute("#group-rows tr", "data-partition").await,
        stuck.to_string(),
        "the stuck partition sorts first"
    );
    let first = browser.text("#group-rows tr").await;
    assert!(first.contains("stuck"), "{first}");
    assert!(
        browser
            .attribute("#group-rows tr a.partition", "href")
            .await
            .starts_with(&format!("http://{}/partitions/{stuck}", b.process.admin)),
        "the stuck partition links to its page on B"
    );
    let rows = browser
        .execute("return document.querySelectorAll('#group-rows tr').length;")
        .await;
    assert_eq!(rows, 64);
    let members = browser
        .execute("return document.querySelectorAll('#member-rows tr').length;")
        .await;
    assert_eq!(members, 10);
    let sizes = browser
        .execute(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth, \
             window.innerWidth];",
        )
        .await;
    let (scroll, client_width, inner) = (
        sizes[0].as_i64().unwrap(),
        sizes[1].as_i64().unwrap(),
        sizes[2].as_i64().unwrap(),
    );
    assert!(inner >= 1264, "the window is 1280 pixels wide: {sizes}");
    browser.screenshot(&artifact("group-1280.png")).await;
    browser
        .execute("window.scrollTo(0, document.getElementById('group-partitions').offsetTop - 60);")
        .await;
    browser
        .screenshot(&artifact("group-1280-partitions.png"))
        .await;
    assert!(
        scroll <= client_width,
        "the group page scrolls sideways at 1280 pixels: {scroll} > {client_width}"
    );

    // Signed in on A, the operator pauses B's stuck partition from A's group page: B's answer
    // is shown.
    browser
        .goto(&format!("http://{}/login?next=/group", a.process.admin))
        .await;
    browser.sign_in(TOKEN).await;
    browser.wait_for_element(&format!("#pause-{stuck}")).await;
    browser.click(&format!("#pause-{stuck}")).await;
    browser.wait_for_element("#command-answer").await;
    let answer = browser.text("#command-answer").await;
    assert_eq!(
        browser.attribute("#command-answer", "data-outcome").await,
        "done",
        "{answer}"
    );
    assert!(answer.contains(&b.id), "{answer}");
    assert!(answer.contains("pause done on partition"), "{answer}");
    browser
        .screenshot(&artifact("group-routed-pause.png"))
        .await;
    let paused = b
        .process
        .get_json(&format!("/api/partitions/{stuck}"))
        .await
        .unwrap();
    assert_eq!(paused["actor"]["operator_paused"], true, "{paused}");
}

/// Redeliveries `member` counted since it started, from its `/metrics`.
async fn redeliveries(member: &Member) -> u64 {
    let body = reqwest::get(format!("http://{}/metrics", member.process.admin))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("a body");
    crate::support::metrics::sum(
        &body,
        "history_duplicates_total{",
        &["cause=\"redelivery\""],
    ) as u64
}

on_both_brokers!(a_live_rewind_asked_on_one_member_replays_the_other_members_partition_exactly);

async fn a_live_rewind_asked_on_one_member_replays_the_other_members_partition_exactly(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 2).await;
    let group = unique_name("group");
    let a = Member::start(&db, &kafka, &group, &[]).await;
    let b = Member::start(&db, &kafka, &group, &[]).await;
    let truth = wait_true_owners(&kafka, &a, &[&a, &b]).await;
    let p = *truth
        .iter()
        .find(|(_, o)| o.as_deref() == Some(b.id.as_str()))
        .expect("B owns a partition")
        .0;
    produce(&kafka, 0..20).await;
    let at_middle = kafka.ends().await;
    let middle = crate::support::kafka::a_moment_between().await;
    produce(&kafka, 20..40).await;
    let ends = kafka.ends().await;
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    let replay = ends[p as usize] - at_middle[p as usize];
    assert!(
        replay > 0,
        "records after the middle in partition {p}: {ends:?}"
    );

    // The confirmation step, asked on A, answered by B.
    let path = format!(
        "/api/partitions/{p}/rewind?to={}",
        crate::support::kafka::point_in_time(middle)
    );
    let (status, plan) = post_api(&a, &format!("{path}&dry_run=true"), None).await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["routed_to"], b.id.as_str(), "{plan}");
    let row = &plan["plan"]["partitions"][0];
    assert_eq!(row["partition"], p, "{plan}");
    assert_eq!(row["position"], ends[p as usize], "{plan}");
    assert_eq!(row["target"]["offset"], at_middle[p as usize], "{plan}");
    assert_eq!(plan["plan"]["replayed"], replay, "{plan}");
    assert_eq!(redeliveries(&b).await, 0, "a dry run changes nothing");

    // The rewind, asked on A, carried out by B: exactly the records after the middle again.
    let (status, done) = post_api(&a, &path, None).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["routed_to"], b.id.as_str(), "{done}");
    let result = &done["partitions"][0];
    assert_eq!(result["error"], Value::Null, "{done}");
    assert_eq!(result["decision"]["from"], ends[p as usize], "{done}");
    assert_eq!(result["decision"]["to"], at_middle[p as usize], "{done}");
    let replayed = wait_for(Duration::from_secs(60), "B to replay", || async {
        let counted = redeliveries(&b).await;
        (counted >= replay as u64).then_some(counted)
    })
    .await;
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(replayed, replay as u64);
    assert_eq!(redeliveries(&b).await, replay as u64, "exactly once more");
    assert_eq!(redeliveries(&a).await, 0, "A replayed nothing");
    assert_stored_once(&db, 40).await;
    // Audited on B, with who asked on A.
    let actions = b.process.get_json("/api/actions").await.unwrap();
    let audited = actions["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["action"] == "rewind" && r["partition"] == p)
        .cloned()
        .unwrap_or_else(|| panic!("the rewind is audited: {actions}"));
    assert!(
        audited["actor"].as_str().unwrap().contains(&a.id),
        "{audited}"
    );

    // Every partition of the group, asked on A: each member's preview, then one command per
    // member, each replaying its own partitions exactly.
    let q = 1 - p;
    let group_path = format!(
        "/api/group/rewind?to={}",
        crate::support::kafka::point_in_time(middle)
    );
    let (status, preview) = post_api(&a, &format!("{group_path}&dry_run=true"), None).await;
    assert_eq!(status, 200, "{preview}");
    let parts = preview["members"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "{preview}");
    assert!(parts.iter().all(|m| m["outcome"] == "done"), "{preview}");
    let replay_q = ends[q as usize] - at_middle[q as usize];
    assert_eq!(preview["replayed"], replay + replay_q, "{preview}");
    assert_eq!(redeliveries(&a).await, 0, "a preview changes nothing");
    let (status, done) = post_api(&a, &group_path, None).await;
    assert_eq!(status, 200, "{done}");
    assert!(
        done["members"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["outcome"] == "done"),
        "{done}"
    );
    wait_for(
        Duration::from_secs(60),
        "both members to replay",
        || async {
            let (on_a, on_b) = (redeliveries(&a).await, redeliveries(&b).await);
            (on_a >= replay_q as u64 && on_b >= 2 * replay as u64).then_some(())
        },
    )
    .await;
    wait_committed(&kafka, &group, &ends, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(redeliveries(&a).await, replay_q as u64);
    assert_eq!(redeliveries(&b).await, 2 * replay as u64);
    assert_stored_once(&db, 40).await;
}

on_both_brokers!(a_blocking_record_of_another_members_partition_is_dead_lettered_from_this_member);

async fn a_blocking_record_of_another_members_partition_is_dead_lettered_from_this_member(
    broker: Broker,
) {
    let db = test_database().await;
    crate::support::faults::held_poison().install(&db).await;
    let kafka = TestKafka::start_on(broker, 2).await;
    let group = unique_name("group");
    let a = Member::start(&db, &kafka, &group, &[]).await;
    let b = Member::start(&db, &kafka, &group, &[]).await;
    let truth = wait_true_owners(&kafka, &a, &[&a, &b]).await;
    let p = *truth
        .iter()
        .find(|(_, o)| o.as_deref() == Some(b.id.as_str()))
        .expect("B owns a partition")
        .0;
    let producer = kafka.producer();
    for body in [
        crate::support::kafka::numbered_event(0),
        crate::remedies::poison(),
        crate::support::kafka::numbered_event(1),
    ] {
        kafka.send(&producer, Some(p as i32), "k", &body).await;
    }
    let blocked = wait_for(
        Duration::from_secs(60),
        "the poison to block on B",
        || async {
            let partition = b.process.get_json(&format!("/api/partitions/{p}")).await?;
            let backlog = partition["actor"]["backlog"].as_array()?;
            (backlog.len() == 1).then(|| backlog[0]["offset"].as_i64().unwrap())
        },
    )
    .await;

    // Asked on A, carried out by B: the record is dead-lettered and the partition moves on.
    let (status, answer) = post_api(
        &a,
        &format!("/api/partitions/{p}/backlog/{blocked}/dead-letter"),
        Some(serde_json::json!({ "comment": "test ticket, INC-7" })),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["routed_to"], b.id.as_str(), "{answer}");
    assert_eq!(answer["outcome"], "done", "{answer}");
    let ends = kafka.ends().await;
    wait_for(
        Duration::from_secs(60),
        "B to commit past the record",
        || async { (kafka.committed(&group).await[p as usize] == ends[p as usize]).then_some(()) },
    )
    .await;
    let letters = db
        .scalar("SELECT count(*) FROM dead_letters WHERE reason = 'skipped_by_operator'")
        .await;
    assert_eq!(letters, 1);
    let actions = b.process.get_json("/api/actions").await.unwrap();
    let audited = actions["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["action"] == "dead_letter")
        .cloned()
        .unwrap_or_else(|| panic!("the skip is audited: {actions}"));
    assert_eq!(audited["result"], "done", "{audited}");
    assert_eq!(audited["detail"], "test ticket, INC-7", "{audited}");
    assert!(
        audited["actor"].as_str().unwrap().contains(&a.id),
        "{audited}"
    );
}
