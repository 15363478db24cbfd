//! The Kubernetes manifests (`deploy/kubernetes`), checked by the tools a cluster would use:
//! every kustomization renders with `kubectl kustomize`; every object validates against the
//! schemas of a current Kubernetes release (`kubernetes-validate --strict`) and the custom
//! resources against their CRDs' JSON schemas (`check-jsonschema`, deploy/kubernetes/schemas);
//! the PrometheusRule is `deploy/alerts.yml` and passes `promtool`, the dashboard ConfigMap is
//! the dashboard; every flag and variable given to the consumer is one `run` knows; and what
//! the issue asks of the objects (probes, stop budget, secrets as files, disruption budget,
//! who reaches the metrics port, autoscaling capped at the partitions) holds in the rendered
//! output, not only in the files. Last, the binary is started with the rendered arguments and
//! environment, as the kubelet would: its probes answer, it stores every event as the static
//! member named after its pod (on the mock and on tansu), and SIGTERM ends it within the grace
//! period with the end of every partition committed.
//!
//! The validators come from PyPI into target/tools/kube-venv (scripts/install-deps); kubectl
//! comes with the machine image; promtool with Debian's `prometheus`. Without them these tests
//! fail and say so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::deploy::{run_bounded, run_ok, tool};
use crate::support::kafka::on_both_brokers;
use crate::support::repo::{help_of_run, names_flag, read};

/// The Kubernetes release the manifests are validated against (kubernetes-validate 1.37.0's
/// newest schemas).
const KUBERNETES_VERSION: &str = "1.37.0";
const BASE: &str = "deploy/kubernetes/base";
const EXAMPLE: &str = "deploy/kubernetes/overlays/example";
const EXAMPLE_HPA: &str = "deploy/kubernetes/overlays/example-hpa";
const SCHEMAS: &str = "deploy/kubernetes/schemas";
const ALERTS: &str = "deploy/alerts.yml";
const DASHBOARD: &str = "dashboards/history-consumer.json";
const LAG_RULE_TESTS: &str = "deploy/kubernetes/autoscaling/hpa/lag.test.yml";
const ADAPTER_RULES: &str = "deploy/kubernetes/autoscaling/hpa/prometheus-adapter-rules.yaml";

/// The custom resources and the schema each is checked against.
const CRD_SCHEMAS: [(&str, &str, &str); 4] = [
    (
        "keda.sh/v1alpha1",
        "ScaledObject",
        "scaledobject_v1alpha1.json",
    ),
    (
        "keda.sh/v1alpha1",
        "TriggerAuthentication",
        "triggerauthentication_v1alpha1.json",
    ),
    (
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitor_v1.json",
    ),
    (
        "monitoring.coreos.com/v1",
        "PrometheusRule",
        "prometheusrule_v1.json",
    ),
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A program of the validators' virtualenv (scripts/install-deps puts it there).
fn venv_tool(name: &str) -> Command {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    let target = if target.is_relative() {
        repo().join(target)
    } else {
        target
    };
    let path = target.join("tools/kube-venv/bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: scripts/install-deps installs kubernetes-validate and check-jsonschema \
         from PyPI into that virtualenv; run it first",
        path.display()
    );
    let mut command = Command::new(path);
    command.current_dir(repo());
    command
}

/// YAML documents as JSON values, through the virtualenv's PyYAML (the same parser
/// kubernetes-validate uses).
fn yaml_documents(yaml: &str) -> Vec<Value> {
    let file = tempfile::NamedTempFile::new().expect("a temp file");
    std::fs::write(file.path(), yaml).expect("writing the YAML");
    let mut python = venv_tool("python");
    python.arg("-c").arg(
        "import json, sys, yaml\n\
         print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]))",
    );
    python.arg(file.path());
    let ran = run_ok(python, "parsing YAML");
    serde_json::from_str(&ran.stdout).expect("PyYAML's JSON")
}

/// `kubectl kustomize <dir>`: the objects a `kubectl apply -k <dir>` would send.
fn render(dir: &str) -> Vec<Value> {
    let mut kubectl = tool("kubectl", "kubectl (part of the machine image)");
    kubectl.args(["kustomize", dir]);
    let ran = run_ok(kubectl, &format!("kubectl kustomize {dir}"));
    let objects = yaml_documents(&ran.stdout);
    assert!(
        objects.len() >= 7,
        "{dir} rendered {} objects",
        objects.len()
    );
    objects
}

fn kind_of(object: &Value) -> &str {
    object["kind"].as_str().expect("every object has a kind")
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"]
        .as_str()
        .expect("every object has a name")
}

/// The one object of `kind` (named `name`, when given).
fn find<'a>(objects: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| kind_of(o) == kind && name.is_none_or(|n| name_of(o) == n))
        .collect();
    assert_eq!(found.len(), 1, "objects of kind {kind} named {name:?}");
    found[0]
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {value}"))
}

fn u64_at(value: &Value, pointer: &str) -> u64 {
    value
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no number at {pointer} in {value}"))
}

fn is_custom(object: &Value) -> bool {
    let api = object["apiVersion"].as_str().unwrap_or_default();
    CRD_SCHEMAS.iter().any(|(group, _, _)| api == *group)
}

// ----- schemas --------------------------------------------------------------------------------

/// Validates rendered objects: built-in kinds with kubernetes-validate, custom resources with
/// check-jsonschema. Returns the failures' output (empty when all passed).
fn validate(objects: &[Value]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut builtin = Vec::new();
    let mut custom: BTreeMap<&str, Vec<PathBuf>> = BTreeMap::new();
    for (i, object) in objects.iter().enumerate() {
        let path = dir.path().join(format!(
            "{i:02}-{}-{}.json",
            kind_of(object),
            name_of(object)
        ));
        std::fs::write(&path, object.to_string()).expect("writing an object");
        if is_custom(object) {
            let (_, _, schema) = CRD_SCHEMAS
                .iter()
                .find(|(api, kind, _)| object["apiVersion"] == *api && kind_of(object) == *kind)
                .unwrap_or_else(|| {
                    panic!(
                        "no schema in {SCHEMAS} for {} {}",
                        object["apiVersion"],
                        kind_of(object)
                    )
                });
            custom.entry(schema).or_default().push(path);
        } else {
            builtin.push(path);
        }
    }
    let mut failures = Vec::new();
    let mut validate = venv_tool("kubernetes-validate");
    validate
        .args(["--strict", "--kubernetes-version", KUBERNETES_VERSION])
        .args(&builtin);
    let ran = run_bounded(validate, Duration::from_secs(120));
    // An unknown kind is only a warning to kubernetes-validate: here it is a failure.
    if !ran.success() || ran.stdout.contains("Couldn't find schema") || ran.stdout.contains("ERROR")
    {
        failures.push(format!("kubernetes-validate: {}", ran.describe()));
    }
    for (schema, files) in custom {
        let mut check = venv_tool("check-jsonschema");
        check
            .arg("--schemafile")
            .arg(repo().join(SCHEMAS).join(schema))
            .args(&files);
        let ran = run_bounded(check, Duration::from_secs(120));
        if !ran.success() {
            failures.push(format!("check-jsonschema {schema}: {}", ran.describe()));
        }
    }
    failures
}

#[test]
fn every_kustomization_validates_against_kubernetes_and_the_custom_resources_schemas() {
    let mut kinds = BTreeSet::new();
    for dir in [BASE, EXAMPLE, EXAMPLE_HPA] {
        let objects = render(dir);
        let failures = validate(&objects);
        assert!(failures.is_empty(), "{dir}:\n{}", failures.join("\n"));
        kinds.extend(objects.iter().map(|o| kind_of(o).to_owned()));
    }
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ConfigMap",
        "StatefulSet",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ServiceMonitor",
        "PrometheusRule",
        "ScaledObject",
        "TriggerAuthentication",
        "HorizontalPodAutoscaler",
    ] {
        assert!(kinds.contains(kind), "no {kind} in any kustomization");
    }
}

#[test]
fn the_validators_refuse_a_misspelt_field_of_a_built_in_and_of_a_custom_resource() {
    let objects = render(EXAMPLE);
    let mut statefulset = find(&objects, "StatefulSet", None).clone();
    statefulset["spec"]["template"]["spec"]["terminationGracePeriod"] = Value::from(45);
    let failures = validate(&[statefulset]);
    assert!(
        failures.len() == 1 && failures[0].contains("terminationGracePeriod"),
        "{failures:?}"
    );
    let mut scaled = find(&objects, "ScaledObject", None).clone();
    scaled["spec"]["maxReplicas"] = Value::from(6);
    let failures = validate(&[scaled]);
    assert!(
        failures.len() == 1 && failures[0].contains("maxReplicas"),
        "{failures:?}"
    );
}

// ----- rules and dashboard --------------------------------------------------------------------

fn promtool(args: &[&str]) -> Command {
    let mut command = tool("promtool", "prometheus");
    command.args(args);
    command
}

#[test]
fn the_prometheus_rules_are_deploy_alerts_yml_and_pass_promtool() {
    let objects = render(EXAMPLE_HPA);
    let alerts = find(&objects, "PrometheusRule", Some("history-consumer"));
    let source = yaml_documents(&read(ALERTS)).remove(0);
    assert_eq!(
        alerts["spec"], source,
        "the PrometheusRule differs from {ALERTS}: run scripts/kubernetes-generate"
    );

    let dir = tempfile::tempdir().expect("a temp dir");
    let alerts_file = dir.path().join("alerts.rules.yml");
    std::fs::write(&alerts_file, alerts["spec"].to_string()).unwrap();
    let lag = find(
        &objects,
        "PrometheusRule",
        Some("history-consumer-autoscaling"),
    );
    let lag_file = dir.path().join("lag.rules.yml");
    std::fs::write(&lag_file, lag["spec"].to_string()).unwrap();
    let ran = run_ok(
        promtool(&[
            "check",
            "rules",
            alerts_file.to_str().unwrap(),
            lag_file.to_str().unwrap(),
        ]),
        "promtool check rules",
    );
    assert!(
        ran.stdout.contains("SUCCESS: 11 rules found") && ran.stdout.contains("SUCCESS: 1 rules"),
        "{}",
        ran.describe()
    );

    // The recording rule the HPA reads: stuck partitions left out, a partition counted once.
    let tests = dir.path().join("lag.test.yml");
    std::fs::copy(repo().join(LAG_RULE_TESTS), &tests).unwrap();
    let ran = run_ok(
        promtool(&["test", "rules", tests.to_str().unwrap()]),
        "promtool test rules (lag)",
    );
    assert!(ran.stdout.contains("SUCCESS"), "{}", ran.describe());
}

#[test]
fn the_dashboard_config_map_is_the_dashboard_for_grafanas_sidecar() {
    let objects = render(EXAMPLE);
    let map = find(&objects, "ConfigMap", Some("history-consumer-dashboard"));
    assert_eq!(str_at(map, "/metadata/labels/grafana_dashboard"), "1");
    let data = map["data"].as_object().expect("data");
    assert_eq!(data.len(), 1, "{data:?}");
    let shipped: Value = serde_json::from_str(str_at(map, "/data/history-consumer.json"))
        .expect("the ConfigMap holds JSON");
    let source: Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    assert_eq!(
        shipped, source,
        "the dashboard ConfigMap differs from {DASHBOARD}: run scripts/kubernetes-generate"
    );
}

// ----- flags and variables --------------------------------------------------------------------

/// The consumer's container of a rendered kustomization.
fn consumer(objects: &[Value]) -> &Value {
    let statefulset = find(objects, "StatefulSet", None);
    let containers = statefulset["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// Every variable the container gets: `env` (name -> the object) and the keys of the
/// ConfigMaps of `envFrom` (name -> value).
fn environment(objects: &[Value]) -> (BTreeMap<String, Value>, BTreeMap<String, String>) {
    let container = consumer(objects);
    let env = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (str_at(e, "/name").to_owned(), e.clone()))
        .collect();
    let mut from_maps = BTreeMap::new();
    for source in container["envFrom"].as_array().into_iter().flatten() {
        let name = str_at(source, "/configMapRef/name");
        let map = find(objects, "ConfigMap", Some(name));
        for (key, value) in map["data"].as_object().expect("data") {
            from_maps.insert(key.clone(), value.as_str().unwrap().to_owned());
        }
    }
    (env, from_maps)
}

#[test]
fn every_flag_and_variable_the_manifests_pass_is_one_the_service_knows() {
    let help = help_of_run();
    let keys = read("src/config/key.rs");
    let known_envs: BTreeSet<&str> = keys
        .split('"')
        .filter(|s| s.starts_with("HISTORY_"))
        .collect();
    assert!(known_envs.len() > 40, "{known_envs:?}");

    for dir in [BASE, EXAMPLE, EXAMPLE_HPA] {
        let objects = render(dir);
        let container = consumer(&objects);
        let args: Vec<&str> = container["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args.first(), Some(&"run"), "{dir}: {args:?}");
        assert!(
            container["command"].is_null(),
            "{dir}: the image's entrypoint is kept"
        );
        let flags: Vec<&str> = args
            .iter()
            .filter(|a| a.starts_with("--"))
            .map(|a| a.split('=').next().unwrap())
            .collect();
        assert!(flags.len() >= 3, "{dir}: {flags:?}");
        for flag in flags {
            assert!(
                names_flag(&help, flag),
                "{dir}: `run --help` has no {flag}:\n{help}"
            );
        }

        let (env, from_maps) = environment(&objects);
        assert!(env.len() >= 5 && from_maps.len() >= 8, "{dir}");
        for name in env.keys().chain(from_maps.keys()) {
            assert!(
                known_envs.contains(name.as_str()),
                "{dir}: {name} is not a key of src/config/key.rs"
            );
            // `[env: NAME=value]`, or `[env: NAME]` for a setting whose value is hidden.
            assert!(
                help.contains(&format!("[env: {name}="))
                    || help.contains(&format!("[env: {name}]")),
                "{dir}: `run --help` does not read {name}"
            );
        }
        // Static membership: each member's instance id is its stable pod name.
        let instance = &env["HISTORY_KAFKA_GROUP_INSTANCE_ID"];
        assert_eq!(
            str_at(instance, "/valueFrom/fieldRef/fieldPath"),
            "metadata.name",
            "{dir}"
        );
    }
}

// ----- the consumer's objects -----------------------------------------------------------------

fn pod_labels(objects: &[Value]) -> &serde_json::Map<String, Value> {
    find(objects, "StatefulSet", None)["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .expect("pod labels")
}

/// Whether `selector` (matchLabels, or a plain label map) selects every label it names in
/// `labels`.
fn selects(selector: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    let wanted = selector
        .get("matchLabels")
        .unwrap_or(selector)
        .as_object()
        .expect("a label selector");
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The container port number of a named port.
fn container_port(container: &Value, name: &str) -> u64 {
    container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["name"] == name)
        .map(|p| u64_at(p, "/containerPort"))
        .unwrap_or_else(|| panic!("no port {name}"))
}

/// The port of an `--x-addr=HOST:PORT` argument.
fn addr_port(container: &Value, flag: &str) -> u64 {
    container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str()?.strip_prefix(&format!("{flag}=")))
        .map(|addr| addr.rsplit_once(':').unwrap().1.parse().unwrap())
        .next()
        .unwrap_or_else(|| panic!("no {flag}=HOST:PORT"))
}

/// The largest peak RSS BENCHMARKS.md measured (its targets table), in bytes.
fn measured_peak_rss() -> u64 {
    let text = read("BENCHMARKS.md");
    let line = text
        .lines()
        .find(|l| l.starts_with("| peak RSS, database down"))
        .expect("the peak RSS target in BENCHMARKS.md");
    // Whole megabytes, or with decimals when the figure rounds to its goal ("149.6 MB").
    let megabytes: f64 = line
        .split('|')
        .nth(2)
        .and_then(|cell| cell.trim().strip_suffix(" MB"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no MB figure in {line}"));
    (megabytes * 1_000_000.0).ceil() as u64
}

/// A Kubernetes memory quantity (Mi or Gi) in bytes.
fn memory_bytes(quantity: &str) -> u64 {
    if let Some(n) = quantity.strip_suffix("Mi") {
        n.parse::<u64>().unwrap() << 20
    } else if let Some(n) = quantity.strip_suffix("Gi") {
        n.parse::<u64>().unwrap() << 30
    } else {
        panic!("a memory quantity in Mi or Gi: {quantity}")
    }
}

#[test]
fn the_members_have_probes_a_stop_budget_measured_resources_and_secrets_as_files() {
    let objects = render(EXAMPLE);
    let statefulset = find(&objects, "StatefulSet", None);
    let pod = &statefulset["spec"]["template"]["spec"];
    let container = consumer(&objects);
    let (env, from_maps) = environment(&objects);

    // Stable names for static membership, members started together.
    assert_eq!(str_at(statefulset, "/spec/podManagementPolicy"), "Parallel");
    let governing = find(
        &objects,
        "Service",
        Some(str_at(statefulset, "/spec/serviceName")),
    );
    assert_eq!(str_at(governing, "/spec/clusterIP"), "None");
    assert_eq!(governing["spec"]["publishNotReadyAddresses"], true);

    // Probes on the metrics listener, where --metrics-addr puts /healthz and /readyz.
    let metrics_port = container_port(container, "metrics");
    assert_eq!(metrics_port, addr_port(container, "--metrics-addr"));
    assert_eq!(
        container_port(container, "admin"),
        addr_port(container, "--admin-addr")
    );
    for (probe, path) in [
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
        ("startupProbe", "/healthz"),
    ] {
        let probe = &container[probe];
        assert_eq!(str_at(probe, "/httpGet/path"), path);
        assert_eq!(str_at(probe, "/httpGet/port"), "metrics");
        // Both endpoints answer within a second: a probe waits at least that long.
        assert!(u64_at(probe, "/timeoutSeconds") >= 1, "{probe}");
    }
    // Migrations run at start: minutes, not the liveness probe's 30 s.
    let startup = &container["startupProbe"];
    assert!(
        u64_at(startup, "/periodSeconds") * u64_at(startup, "/failureThreshold") >= 300,
        "{startup}"
    );

    // SIGKILL only after the longest graceful stop the code allows, with room to spare.
    let drain = history_consumer::config::parse_duration(&from_maps["HISTORY_DRAIN_TIMEOUT"])
        .expect("HISTORY_DRAIN_TIMEOUT parses");
    let stop = history_consumer::startup::longest_graceful_stop(drain);
    let grace = Duration::from_secs(u64_at(pod, "/terminationGracePeriodSeconds"));
    assert!(
        grace >= stop + Duration::from_secs(10),
        "terminationGracePeriodSeconds {grace:?}, the longest graceful stop {stop:?}"
    );

    // Memory for the worst case measured: the database down with a backlog over 64
    // partitions; a request equal to the limit, so the node never reclaims it.
    let limit = memory_bytes(str_at(container, "/resources/limits/memory"));
    let request = memory_bytes(str_at(container, "/resources/requests/memory"));
    let measured = measured_peak_rss();
    assert!(
        limit > measured && request == limit,
        "memory request {request}, limit {limit}, measured peak {measured}"
    );
    assert!(container["resources"]["requests"]["cpu"].is_string());

    // Secrets: files of a mounted Secret, named by the *_FILE settings; never a value.
    let mounts: Vec<(&str, &str)> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (str_at(m, "/name"), str_at(m, "/mountPath")))
        .collect();
    let volumes = pod["volumes"].as_array().unwrap();
    let secret_files: BTreeSet<String> = volumes
        .iter()
        .filter(|v| v["secret"].is_object())
        .flat_map(|v| {
            let (_, at) = mounts
                .iter()
                .find(|(name, _)| v["name"] == *name)
                .expect("the secret volume is mounted");
            v["secret"]["items"]
                .as_array()
                .expect("the Secret's keys are listed")
                .iter()
                .map(move |item| format!("{at}/{}", str_at(item, "/path")))
        })
        .collect();
    for setting in [
        "HISTORY_DATABASE_PASSWORD_FILE",
        "HISTORY_KAFKA_SASL_PASSWORD_FILE",
        "HISTORY_ADMIN_TOKEN_FILE",
        "HISTORY_KAFKA_SSL_CA_FILE",
    ] {
        let file = env
            .get(setting)
            .map(|e| str_at(e, "/value"))
            .unwrap_or_else(|| panic!("{setting} is not set"));
        assert!(
            secret_files.contains(file),
            "{setting}={file} is not a file of a mounted Secret: {secret_files:?}"
        );
    }
    for (name, variable) in &env {
        assert!(
            variable["valueFrom"]["secretKeyRef"].is_null(),
            "{name} takes a secret as a value"
        );
    }
    for secret in [
        "HISTORY_ADMIN_TOKEN",
        "HISTORY_KAFKA_SASL_PASSWORD",
        "HISTORY_KAFKA_OAUTH_CLIENT_SECRET",
    ] {
        assert!(
            !env.contains_key(secret) && !from_maps.contains_key(secret),
            "{secret} given as a value"
        );
    }
    // The database URL has no password, and its CA is the mounted one.
    let url = &from_maps["HISTORY_DATABASE_URL"];
    let authority = url
        .strip_prefix("postgres://")
        .and_then(|rest| rest.split_once('@'))
        .map(|(user, _)| user)
        .expect("postgres://user@host/...");
    assert!(!authority.contains(':'), "a password in {url}");
    let root_cert = url
        .split(['?', '&'])
        .find_map(|p| p.strip_prefix("sslrootcert="))
        .expect("sslrootcert in the database URL");
    assert!(secret_files.contains(root_cert), "{root_cert}");
    assert!(url.contains("sslmode=verify-full"), "{url}");

    // The pod runs as the image's unprivileged user, with nothing to write but /tmp.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
}

#[test]
fn one_member_at_a_time_may_go_and_only_prometheus_reaches_the_metrics_port() {
    let objects = render(EXAMPLE);
    let labels = pod_labels(&objects);
    let container = consumer(&objects);

    let budget = find(&objects, "PodDisruptionBudget", None);
    assert!(selects(&budget["spec"]["selector"], labels));
    assert_eq!(u64_at(budget, "/spec/maxUnavailable"), 1);
    assert_eq!(
        str_at(budget, "/spec/unhealthyPodEvictionPolicy"),
        "AlwaysAllow"
    );

    // A Service for the metrics and one for the admin, each on its own port.
    let services: Vec<&Value> = objects.iter().filter(|o| kind_of(o) == "Service").collect();
    assert_eq!(services.len(), 2);
    let by_port = |port: &str| {
        let found: Vec<&&Value> = services
            .iter()
            .filter(|s| s["spec"]["ports"][0]["targetPort"] == port)
            .collect();
        assert_eq!(found.len(), 1, "Services on {port}");
        *found[0]
    };
    let metrics = by_port("metrics");
    let admin = by_port("admin");
    for service in [metrics, admin] {
        assert!(selects(&service["spec"]["selector"], labels), "{service}");
        assert_eq!(service["spec"]["ports"].as_array().unwrap().len(), 1);
    }

    // Prometheus scrapes the metrics Service only, with the labels the alert rules use.
    let monitor = find(&objects, "ServiceMonitor", None);
    let service_labels = |s: &Value| s["metadata"]["labels"].as_object().unwrap().clone();
    assert!(selects(
        &monitor["spec"]["selector"],
        &service_labels(metrics)
    ));
    assert!(!selects(
        &monitor["spec"]["selector"],
        &service_labels(admin)
    ));
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(str_at(endpoint, "/port"), "metrics");
    assert_eq!(str_at(endpoint, "/path"), "/metrics");
    let job = service_labels(metrics)[str_at(monitor, "/spec/jobLabel")].clone();
    assert!(
        read(ALERTS).contains(&format!("up{{job={job}}}")),
        "the job label {job} is not the alert rules' job"
    );
    let relabel = &endpoint["relabelings"][0];
    assert_eq!(
        relabel["sourceLabels"],
        serde_json::json!(["__meta_kubernetes_pod_name"])
    );
    assert_eq!(str_at(relabel, "/targetLabel"), "instance");

    // The NetworkPolicy: the metrics port from Prometheus alone, nothing open to all.
    let policy = find(&objects, "NetworkPolicy", None);
    assert!(selects(&policy["spec"]["podSelector"], labels));
    let rules = policy["spec"]["ingress"].as_array().expect("ingress rules");
    let mut metrics_rules = 0;
    for rule in rules {
        let from = rule["from"].as_array().expect("every rule names its peers");
        assert!(!from.is_empty(), "a rule open to all: {rule}");
        let ports: Vec<&Value> = rule["ports"].as_array().expect("ports").iter().collect();
        let reaches_metrics = ports
            .iter()
            .any(|p| p["port"] == "metrics" || p["port"] == metrics_port_number(container));
        if reaches_metrics {
            metrics_rules += 1;
            assert_eq!(ports.len(), 1, "{rule}");
            for peer in from {
                assert_eq!(
                    peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"], "prometheus",
                    "{peer}"
                );
                assert!(peer["namespaceSelector"].is_object(), "{peer}");
                assert!(peer["ipBlock"].is_null(), "{peer}");
            }
        }
    }
    assert_eq!(metrics_rules, 1, "{rules:?}");
}

fn metrics_port_number(container: &Value) -> Value {
    Value::from(container_port(container, "metrics"))
}

// ----- autoscaling ----------------------------------------------------------------------------

/// The example topic's partitions: the topic compose creates (`--partitions N`).
fn example_partitions() -> u64 {
    let compose = read("docker-compose.yml");
    let mut lines = compose.lines().map(str::trim);
    lines
        .by_ref()
        .find(|l| *l == "- --partitions")
        .expect("kafka-init's --partitions");
    lines
        .next()
        .and_then(|l| l.trim_start_matches("- ").trim_matches('"').parse().ok())
        .expect("a partition count")
}

#[test]
fn the_autoscalers_follow_the_lag_capped_at_the_partitions_and_ignore_stuck_partitions() {
    let partitions = example_partitions();

    let objects = render(EXAMPLE);
    let (_, settings) = environment(&objects);
    let statefulset = find(&objects, "StatefulSet", None);
    assert!(
        statefulset["spec"]["replicas"].is_null(),
        "the autoscaler owns the member count"
    );
    let scaled = find(&objects, "ScaledObject", None);
    assert_eq!(str_at(scaled, "/spec/scaleTargetRef/kind"), "StatefulSet");
    assert_eq!(
        str_at(scaled, "/spec/scaleTargetRef/name"),
        name_of(statefulset)
    );
    let max = u64_at(scaled, "/spec/maxReplicaCount");
    let min = u64_at(scaled, "/spec/minReplicaCount");
    assert!(
        1 <= min && min <= max && max <= partitions,
        "{min}..{max} members for {partitions} partitions"
    );
    let triggers = scaled["spec"]["triggers"].as_array().unwrap();
    assert_eq!(triggers.len(), 1);
    let trigger = &triggers[0];
    assert_eq!(str_at(trigger, "/type"), "kafka");
    let meta = &trigger["metadata"];
    for (key, value) in [
        ("excludePersistentLag", "true"),
        ("allowIdleConsumers", "false"),
        ("scaleToZeroOnInvalidOffset", "false"),
        ("offsetResetPolicy", "earliest"),
        (
            "bootstrapServers",
            settings["HISTORY_KAFKA_BROKERS"].as_str(),
        ),
        ("consumerGroup", settings["HISTORY_KAFKA_GROUP"].as_str()),
        ("topic", settings["HISTORY_KAFKA_TOPIC"].as_str()),
        ("tls", "enable"),
    ] {
        assert_eq!(meta[key], value, "trigger metadata {key}");
    }
    // scram_sha512 is SCRAM-SHA-512 in KEDA's words.
    let letters = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    assert_eq!(
        letters(str_at(meta, "/sasl")),
        letters(&settings["HISTORY_KAFKA_SASL_MECHANISM"])
    );
    let threshold: u64 = str_at(meta, "/lagThreshold").parse().expect("a number");

    // KEDA signs in as the members do: the Secret they mount, the user name they use.
    let auth = find(
        &objects,
        "TriggerAuthentication",
        Some(str_at(trigger, "/authenticationRef/name")),
    );
    let secret = find(&objects, "StatefulSet", None)["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|v| v["secret"].as_object())
        .expect("the members' Secret");
    let keys: BTreeSet<&str> = secret["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| str_at(i, "/key"))
        .collect();
    for reference in auth["spec"]["secretTargetRef"].as_array().unwrap() {
        assert_eq!(reference["name"], secret["secretName"]);
        assert!(keys.contains(str_at(reference, "/key")), "{reference}");
    }
    for variable in auth["spec"]["env"].as_array().unwrap() {
        assert!(
            settings.contains_key(str_at(variable, "/name")),
            "{variable}"
        );
        assert_eq!(variable["containerName"], consumer(&objects)["name"]);
    }

    // The plain HPA: the same arithmetic on the lag the members export.
    let objects = render(EXAMPLE_HPA);
    assert!(find(&objects, "StatefulSet", None)["spec"]["replicas"].is_null());
    assert!(!objects.iter().any(|o| kind_of(o) == "ScaledObject"));
    let hpa = find(&objects, "HorizontalPodAutoscaler", None);
    assert_eq!(str_at(hpa, "/spec/scaleTargetRef/kind"), "StatefulSet");
    assert_eq!(u64_at(hpa, "/spec/maxReplicas"), max);
    assert_eq!(u64_at(hpa, "/spec/minReplicas"), min);
    let metric = &hpa["spec"]["metrics"][0]["external"];
    assert_eq!(str_at(metric, "/target/type"), "AverageValue");
    assert_eq!(
        str_at(metric, "/target/averageValue")
            .parse::<u64>()
            .unwrap(),
        threshold
    );
    // prometheus-adapter serves the recorded series under the name the HPA asks for.
    let adapter = yaml_documents(&read(ADAPTER_RULES)).remove(0);
    let rule = &adapter["externalRules"][0];
    assert_eq!(rule["name"]["as"], metric["metric"]["name"]);
    let recorded = find(
        &objects,
        "PrometheusRule",
        Some("history-consumer-autoscaling"),
    );
    let record = str_at(recorded, "/spec/groups/0/rules/0/record");
    assert!(
        str_at(rule, "/seriesQuery").starts_with(&format!("{record}{{")),
        "{rule}"
    );
    assert!(
        str_at(recorded, "/spec/groups/0/rules/0/expr").contains("history_partition_stuck"),
        "stuck partitions are left out"
    );
}

// ----- the member as the manifest starts it ---------------------------------------------------

/// A self-signed certificate authority in PEM, made with the openssl command.
fn certificate_authority(path: &Path) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut openssl = tool("openssl", "openssl");
    openssl
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=history-consumer test CA", "-keyout"])
        .arg(dir.path().join("ca.key"))
        .arg("-out")
        .arg(path);
    run_ok(openssl, "openssl req -x509");
}

/// The binary started with the example overlay's arguments and environment, as the kubelet
/// starts the container of `history-consumer-0`; only what points outside the test is
/// replaced: brokers, database, topic and group by the test's own, the Secret's mount by a
/// folder of files, the listeners' host by the loopback, and the settings in `overrides`
/// (`None` removes one).
struct ManifestMember {
    child: std::process::Child,
    container: Value,
    grace: Duration,
    metrics: String,
    log: tempfile::NamedTempFile,
    _secrets: tempfile::TempDir,
}

impl ManifestMember {
    fn start(
        database_url: &str,
        kafka: &crate::support::kafka::TestKafka,
        group: &str,
        overrides: &[(&str, Option<&str>)],
    ) -> ManifestMember {
        let objects = render(EXAMPLE);
        let container = consumer(&objects).clone();
        let pod = &find(&objects, "StatefulSet", None)["spec"]["template"]["spec"];
        let grace = Duration::from_secs(u64_at(pod, "/terminationGracePeriodSeconds"));
        let (env, settings) = environment(&objects);

        // The Secret's files.
        let secrets = tempfile::tempdir().expect("a temp dir");
        let mount = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "secrets")
            .map(|m| str_at(m, "/mountPath").to_owned())
            .expect("the secrets mount");
        std::fs::write(secrets.path().join("database-password"), "unused\n").unwrap();
        std::fs::write(
            secrets.path().join("kafka-sasl-password"),
            "a-kafka-password\n",
        )
        .unwrap();
        std::fs::write(
            secrets.path().join("admin-token"),
            "an-admin-token-of-32-characters!\n",
        )
        .unwrap();
        certificate_authority(&secrets.path().join("ca.crt"));
        let in_secrets = |value: &str| value.replace(&mount, secrets.path().to_str().unwrap());

        let mut variables: BTreeMap<String, String> = settings
            .iter()
            .map(|(k, v)| (k.clone(), in_secrets(v)))
            .collect();
        for (name, variable) in &env {
            let value = match variable["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.name") => "history-consumer-0".to_owned(),
                Some(other) => panic!("{name}: a field the test does not know: {other}"),
                None => in_secrets(str_at(variable, "/value")),
            };
            variables.insert(name.clone(), value);
        }
        variables.insert("HISTORY_KAFKA_BROKERS".into(), kafka.brokers.clone());
        variables.insert("HISTORY_KAFKA_TOPIC".into(), kafka.topic.clone());
        variables.insert("HISTORY_KAFKA_GROUP".into(), group.to_owned());
        variables.insert("HISTORY_DATABASE_URL".into(), database_url.to_owned());
        // The test database trusts local connections: no password file for it.
        variables.remove("HISTORY_DATABASE_PASSWORD_FILE");
        for (name, value) in overrides {
            match value {
                Some(value) => variables.insert((*name).to_owned(), (*value).to_owned()),
                None => variables.remove(*name),
            };
        }

        let metrics = format!("127.0.0.1:{}", crate::support::helpers::free_port());
        let admin = format!("127.0.0.1:{}", crate::support::helpers::free_port());
        let args: Vec<String> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let a = a.as_str().unwrap();
                if a.starts_with("--metrics-addr=") {
                    format!("--metrics-addr={metrics}")
                } else if a.starts_with("--admin-addr=") {
                    format!("--admin-addr={admin}")
                } else {
                    a.to_owned()
                }
            })
            .collect();

        let log = tempfile::NamedTempFile::new().expect("a log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_history-consumer"));
        crate::support::helpers::killed_when_the_spawning_thread_ends(&mut command);
        command
            .env_clear()
            .envs(std::env::var_os("PATH").map(|p| ("PATH", p)))
            .envs(&variables)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(log.reopen().unwrap())
            .stderr(log.reopen().unwrap());
        let child = command.spawn().expect("start the binary");
        ManifestMember {
            child,
            container,
            grace,
            metrics,
            log,
            _secrets: secrets,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// One probe of the container, as the kubelet sends it (with its timeout): the status, or
    /// `None` without an answer in time.
    async fn probe(&self, name: &str) -> Option<u16> {
        let probe = &self.container[name];
        let url = format!("http://{}{}", self.metrics, str_at(probe, "/httpGet/path"));
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(u64_at(probe, "/timeoutSeconds")))
            .build()
            .unwrap();
        let response = client.get(&url).send().await.ok()?;
        Some(response.status().as_u16())
    }

    /// Waits until the startup probe passes (the member must not exit meanwhile).
    async fn started(&mut self) {
        let startup = &self.container["startupProbe"];
        let budget = Duration::from_secs(
            u64_at(startup, "/periodSeconds") * u64_at(startup, "/failureThreshold"),
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(60).min(budget);
        loop {
            let exited = self.child.try_wait().unwrap();
            assert!(
                exited.is_none(),
                "the member exited: {exited:?}\n{}",
                self.log()
            );
            if self.probe("startupProbe").await == Some(200) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the startup probe did not pass\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM, as the kubelet sends it; how long the member took to exit, which it must do
    /// with status 0 before the grace period ends (the kubelet's SIGKILL).
    async fn terminate(&mut self) -> Duration {
        let stopping = std::time::Instant::now();
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                stopping.elapsed() < self.grace,
                "still running after the grace period {:?}\n{}",
                self.grace,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let took = stopping.elapsed();
        assert!(status.success(), "{status:?}\n{}", self.log());
        eprintln!("SIGTERM to exit: {took:?} (grace period {:?})", self.grace);
        took
    }
}

/// With the manifest's settings as they are (SASL over TLS, against a plaintext mock broker
/// here): every setting is accepted, the probes answer on the port they name within their
/// timeouts, the member is not ready for the reason an operator would be shown, and SIGTERM
/// ends it within terminationGracePeriodSeconds.
#[actix_web::test]
async fn a_member_started_as_the_manifest_starts_it_answers_its_probes_and_stops_in_its_grace_period()
 {
    let db = crate::support::helpers::test_database().await;
    let kafka = crate::support::kafka::TestKafka::start(2);
    let mut member = ManifestMember::start(&db.url, &kafka, &unique_group(), &[]);
    member.started().await;
    for _ in 0..3 {
        assert_eq!(
            member.probe("livenessProbe").await,
            Some(200),
            "{}",
            member.log()
        );
        // Answered within its timeout.
        let ready = member.probe("readinessProbe").await;
        assert!(
            matches!(ready, Some(200 | 503)),
            "/readyz: {ready:?}\n{}",
            member.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let text = member.log();
    assert!(!text.contains("invalid configuration"), "{text}");
    // Not ready for the reason an operator would be shown: the broker speaks no TLS.
    let readyz = format!("http://{}/readyz", member.metrics);
    crate::support::helpers::wait_for(
        Duration::from_secs(30),
        "/readyz naming the Kafka connection",
        || {
            let readyz = readyz.clone();
            async move {
                let response = reqwest::get(&readyz).await.ok()?;
                let status = response.status().as_u16();
                let body = response.text().await.ok()?;
                (status == 503 && body.contains("kafka_connection")).then_some(())
            }
        },
    )
    .await;
    member.terminate().await;
}

/// With the manifest's settings but a plaintext connection (the test brokers speak no SASL
/// over TLS): the member joins as the static member `history-consumer-0`, becomes ready,
/// stores every event once, and on SIGTERM drains, commits the end of every partition and
/// exits within the grace period.
async fn a_member_started_as_the_manifest_starts_it_stores_everything_and_commits_on_sigterm(
    broker: crate::support::kafka::Broker,
) {
    use crate::support::kafka::{TestKafka, produce};
    let db = crate::support::helpers::test_database().await;
    let kafka = TestKafka::start_on(broker, 4).await;
    let group = unique_group();
    let plaintext = [
        ("HISTORY_KAFKA_SECURITY_PROTOCOL", Some("plaintext")),
        ("HISTORY_KAFKA_SASL_MECHANISM", None),
        ("HISTORY_KAFKA_SASL_USERNAME", None),
        ("HISTORY_KAFKA_SASL_PASSWORD_FILE", None),
        ("HISTORY_KAFKA_SSL_CA_FILE", None),
    ];
    let first_start = std::time::Instant::now();
    let mut member = ManifestMember::start(&db.url, &kafka, &group, &plaintext);
    member.started().await;
    crate::support::helpers::wait_for(kafka.join_deadline(), "the member to be ready", || {
        let ready = member.probe("readinessProbe");
        async move { (ready.await == Some(200)).then_some(()) }
    })
    .await;
    eprintln!(
        "first start of the member, process start to ready: {:?}",
        first_start.elapsed()
    );
    produce(&kafka, 0..400).await;
    crate::support::helpers::wait_for(Duration::from_secs(60), "every event stored", || async {
        (db.scalar("SELECT count(*) FROM inbox").await == 400).then_some(())
    })
    .await;
    crate::support::helpers::assert_stored_once(&db, 400).await;
    member.terminate().await;
    // HISTORY_KAFKA_GROUP_INSTANCE_ID from the pod name made it a static member.
    assert!(
        member.log().contains("stopping as a static member"),
        "{}",
        member.log()
    );
    assert_eq!(
        kafka.committed(&group).await,
        kafka.ends().await,
        "the final commit reached every partition's end\n{}",
        member.log()
    );

    // The StatefulSet's restart: the same pod name back within session.timeout.ms, and the
    // records published meanwhile stored once and committed. The time from the new process's
    // start to that commit is printed: neither test broker hands a returning static member
    // its assignment at once as Apache Kafka does (KIP-345): librdkafka 2.12's mock
    // coordinator finds members by member id only, so the new process waits out the old
    // one's session (45 s); tansu takes as long as a first join (docs/kubernetes.md).
    produce(&kafka, 400..500).await;
    let restarted = std::time::Instant::now();
    let mut member = ManifestMember::start(&db.url, &kafka, &group, &plaintext);
    let ends = kafka.ends().await;
    crate::support::helpers::wait_for(
        Duration::from_secs(120),
        "the restarted member to commit the new records",
        || {
            let committed = kafka.committed(&group);
            let ends = ends.clone();
            async move { (committed.await == ends).then_some(()) }
        },
    )
    .await;
    eprintln!(
        "restart of the static member, process start to the new records committed: {:?}",
        restarted.elapsed()
    );
    crate::support::helpers::assert_stored_once(&db, 500).await;
    member.terminate().await;
}

on_both_brokers!(
    a_member_started_as_the_manifest_starts_it_stores_everything_and_commits_on_sigterm
);

fn unique_group() -> String {
    crate::support::helpers::unique_name("k8s-group")
}
