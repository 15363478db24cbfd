//! tansu, a Kafka-compatible broker server in a process of its own: one per test process,
//! started on first use on a free loopback port with in-memory storage, and killed by the
//! kernel when the test process ends, however it ends (`PR_SET_PDEATHSIG`), so nothing
//! outlives `cargo test`. Tests share it through unique topic and group names.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;

/// The release series the tests were written against (`tansu --version`).
const SERIES: &str = "tansu 0.6";
const STARTUP_DEADLINE: Duration = Duration::from_secs(30);
/// A port taken by someone else between our probe and tansu's bind: try another.
const START_ATTEMPTS: usize = 3;

/// The running broker.
pub struct TansuServer {
    /// `bootstrap.servers` for librdkafka: `127.0.0.1:<port>`.
    pub brokers: String,
    /// Where the broker writes its output (left behind only if the test process crashes).
    pub log: PathBuf,
    /// Held, never waited for: the broker runs as long as the test process.
    pub process: Child,
}

/// The broker every tansu test of this process shares, started on first use.
pub fn server() -> &'static TansuServer {
    static SERVER: OnceLock<TansuServer> = OnceLock::new();
    SERVER.get_or_init(|| TansuServer::start().unwrap_or_else(|error| panic!("{error}")))
}

impl TansuServer {
    fn start() -> Result<TansuServer, String> {
        TansuServer::start_advertising(None)
    }

    /// Starts a broker of its own (for as long as the test process) on a free port. It tells
    /// clients to connect to `127.0.0.1:<advertised>` (a TLS front, say) when given, else to
    /// itself.
    pub fn start_advertising(advertised: Option<u16>) -> Result<TansuServer, String> {
        TansuServer::launch(&Launch {
            binary: find_binary()?,
            storage: "memory://tansu/",
            dir: None,
            authentication: None,
            advertised,
        })
    }

    /// Starts a broker of its own as `launch` says, on a free port, for as long as the test
    /// process.
    pub fn launch(launch: &Launch<'_>) -> Result<TansuServer, String> {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match start_on(launch, crate::support::helpers::free_port()) {
                Ok(server) => {
                    clean_up_at_exit(server.process.id(), &server.log);
                    return Ok(server);
                }
                Err(failure) => failures.push(failure),
            }
        }
        Err(format!(
            "tansu ({}) did not start:\n{}",
            launch.binary.display(),
            failures.join("\n")
        ))
    }

    /// Creates `topic` with `partitions` partitions through the Kafka admin API.
    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        let mut client = ClientConfig::new();
        client.set("bootstrap.servers", &self.brokers);
        create_topic(client, topic, partitions).await;
    }
}

/// How often a write tansu answered with `Unknown` (-1) is tried in all, and the first pause
/// between two tries (it grows by itself each time).
///
/// tansu 0.6's sqlite engine (the SASL brokers, several processes on one `users.db`) opens
/// every write with `BEGIN IMMEDIATE` and sets no busy timeout, so a write that meets another
/// connection's write fails at once with SQLITE_BUSY ("database is locked" in its log), which it
/// answers as UNKNOWN_SERVER_ERROR (-1, no message) having written nothing (tansu-storage 0.6.0:
/// `lite.rs` `transaction()`, `service/create_topics.rs` and `service/produce.rs` map every
/// storage error to -1). Seen on the wire in the SASL tests run in parallel (about 2 runs in
/// 100): the request valid and sent after SASL succeeded, the answer -1 within milliseconds.
/// Theirs, not ours; a refusal that lasts still fails the test after the last try.
/// Since then each SASL broker that serves tests has a file of its own (`sasl_kafka::USERS`;
/// the broker that wrote the users shares it but serves no test); the retry stays for any
/// other meeting.
pub const TANSU_BUSY_TRIES: u32 = 5;
pub const TANSU_BUSY_PAUSE: Duration = Duration::from_millis(100);

/// Creates `topic` with `partitions` partitions through the Kafka admin API of the broker that
/// `client` (`bootstrap.servers` and, say, TLS settings) reaches.
pub async fn create_topic(client: ClientConfig, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = client.create().expect("admin client");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for attempt in 1..=TANSU_BUSY_TRIES {
        let results = admin
            .create_topics(
                &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
                &options,
            )
            .await
            .unwrap_or_else(|error| panic!("creating {topic} on tansu: {error}"));
        match results.into_iter().find_map(Result::err) {
            None => break,
            // A retry of a creation whose answer was lost: it is there.
            Some((_, RDKafkaErrorCode::TopicAlreadyExists)) if attempt > 1 => break,
            Some((_, RDKafkaErrorCode::Unknown)) if attempt < TANSU_BUSY_TRIES => {
                tokio::time::sleep(TANSU_BUSY_PAUSE * attempt).await;
            }
            Some((name, code)) => panic!("tansu refused to create {name}: {code:?}"),
        }
    }
    // Metadata may trail the creation: wait until every partition has a leader.
    let name = topic.to_owned();
    tokio::task::spawn_blocking(move || wait_for_partitions(&client, &name, partitions))
        .await
        .expect("topic metadata task")
        .unwrap_or_else(|error| panic!("{error}"));
}

/// How a broker of its own is started.
pub struct Launch<'a> {
    pub binary: PathBuf,
    /// `--storage-engine`: `memory://tansu/`, or `sqlite://<file>` (with a build that has it).
    pub storage: &'a str,
    /// The working directory (a sqlite file is always relative to it).
    pub dir: Option<&'a Path>,
    /// `--authentication`, and the client properties that pass it (for the readiness check).
    pub authentication: Option<&'a [(String, String)]>,
    /// The port it tells clients to connect to, if not its own.
    pub advertised: Option<u16>,
}

/// Starts tansu on `port` as `launch` says and waits until it answers a metadata request.
fn start_on(launch: &Launch<'_>, port: u16) -> Result<TansuServer, String> {
    let log = std::env::temp_dir().join(format!(
        "{}.log",
        crate::support::helpers::unique_name("tansu")
    ));
    let file = std::fs::File::create(&log).map_err(|e| format!("creating {log:?}: {e}"))?;
    let address = format!("127.0.0.1:{port}");
    let url = format!("tcp://{address}");
    let advertised_url = format!("tcp://127.0.0.1:{}", launch.advertised.unwrap_or(port));
    let mut command = Command::new(&launch.binary);
    command
        .arg("broker")
        .args(["--listener-url", &url])
        .args(["--advertised-listener-url", &advertised_url])
        .args(["--storage-engine", launch.storage]);
    if launch.authentication.is_some() {
        command.arg("--authentication");
    }
    if let Some(dir) = launch.dir {
        command.current_dir(dir);
    }
    command
        // tansu reads these too; a developer's own settings must not leak into the tests.
        .env_remove("CLUSTER_ID")
        .env_remove("SCHEMA_REGISTRY")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env(
            "RUST_LOG",
            std::env::var("TANSU_LOG").unwrap_or("warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(file.try_clone().map_err(|e| e.to_string())?)
        .stderr(file);
    let mut child = spawn_dying_with_us(command).map_err(|e| format!("spawning tansu: {e}"))?;
    let started = Instant::now();
    // Each probe is a new client (with SASL, a SCRAM exchange on both sides): on a loaded
    // machine half a second may never be enough, so the wait for an answer grows.
    let mut probe = Duration::from_millis(500);
    let failure = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break format!("tansu exited ({status})");
        }
        if started.elapsed() > STARTUP_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break format!("no metadata answer within {STARTUP_DEADLINE:?}");
        }
        if answers_metadata(&address, launch.authentication.unwrap_or_default(), probe) {
            return Ok(TansuServer {
                brokers: address,
                log,
                process: child,
            });
        }
        probe = (probe * 2).min(Duration::from_secs(4));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    Err(format!("{failure} on {url}; its log:\n{text}"))
}

/// Whether a broker at `address` answers a real metadata request with itself in it, to a
/// client with `options`, within `wait`.
fn answers_metadata(address: &str, options: &[(String, String)], wait: Duration) -> bool {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", address)
        .set("log_level", "0");
    for (key, value) in options {
        config.set(key, value);
    }
    let Ok(client) = config.create::<BaseConsumer>() else {
        return false;
    };
    client
        .fetch_metadata(None, wait)
        .is_ok_and(|metadata| !metadata.brokers().is_empty())
}

fn wait_for_partitions(client: &ClientConfig, topic: &str, partitions: i32) -> Result<(), String> {
    let client: BaseConsumer = client.create().map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = String::new();
    while Instant::now() < deadline {
        match client.fetch_metadata(Some(topic), Duration::from_secs(2)) {
            Ok(metadata) => {
                let ready = metadata.topics().iter().any(|t| {
                    t.name() == topic
                        && t.error().is_none()
                        && t.partitions().len() == partitions as usize
                        && t.partitions().iter().all(|p| p.leader() >= 0)
                });
                if ready {
                    return Ok(());
                }
                last = format!("{:?}", metadata.topics().first().map(|t| t.error()));
            }
            Err(error) => last = error.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "tansu never showed {topic} with {partitions} led partitions: {last}"
    ))
}

/// The tansu binary: `$TANSU`, then `tansu` on PATH, `~/.cargo/bin/tansu` and our cache
/// `target/tools/bin/tansu`, as `scripts/install-tansu` looks for it.
pub fn find_binary() -> Result<PathBuf, String> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os("TANSU") {
        candidates.push(path.into());
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("tansu")));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join(".cargo/bin/tansu"));
    }
    // Integration tests get target/tmp; the cache is beside it.
    if let Some(target) = Path::new(env!("CARGO_TARGET_TMPDIR")).parent() {
        candidates.push(target.join("tools/bin/tansu"));
    }
    let mut rejected = Vec::new();
    for candidate in candidates.into_iter().filter(|c| c.is_file()) {
        match version_of(&candidate) {
            Some(version) if version.starts_with(&format!("{SERIES}.")) => return Ok(candidate),
            version => rejected.push(format!("{} ({version:?})", candidate.display())),
        }
    }
    Err(format!(
        "no {SERIES}.x broker binary found (looked at $TANSU, PATH, ~/.cargo/bin and \
         target/tools/bin{}); run `scripts/install-tansu` (scripts/test does) and export \
         TANSU=<the path it prints>",
        if rejected.is_empty() {
            String::new()
        } else {
            format!("; unusable: {}", rejected.join(", "))
        }
    ))
}

fn version_of(binary: &Path) -> Option<String> {
    let output = Command::new(binary).arg("--version").output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Spawns `command` so that the kernel kills the child when this process ends, however it
/// ends (a panic, `kill -9`): the death signal fires when the spawning *thread* ends, and test
/// threads end with their test, so the child is spawned from a thread that lives as long as
/// the process.
pub fn spawn_dying_with_us(mut command: Command) -> io::Result<Child> {
    crate::support::helpers::killed_when_the_spawning_thread_ends(&mut command);
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("tansu-parent".into())
        .spawn(move || {
            let _ = sender.send(command.spawn());
            loop {
                std::thread::park();
            }
        })?;
    receiver
        .recv()
        .map_err(|_| io::Error::other("the spawning thread died"))?
}

/// Stops a server, reaps it and deletes its log (a file or a folder) when the test process
/// exits normally (Rust never drops statics). After a crash the kernel still kills the broker; the log stays for
/// the post-mortem.
pub fn clean_up_at_exit(pid: u32, log: &Path) {
    static SERVERS: Mutex<Vec<(u32, PathBuf)>> = Mutex::new(Vec::new());
    extern "C" fn clean_up() {
        let servers = std::mem::take(&mut *SERVERS.lock().unwrap_or_else(|e| e.into_inner()));
        for (pid, log) in servers {
            // SAFETY: our own child, never reaped before (its `Child` is never waited for).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
            // `HISTORY_TEST_KEEP_LOGS=1` keeps them, to read what a broker said after a failure.
            if std::env::var_os("HISTORY_TEST_KEEP_LOGS").is_none() {
                let _ = std::fs::remove_file(&log).or_else(|_| std::fs::remove_dir_all(&log));
            }
        }
    }
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    SERVERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((pid, log.to_owned()));
    // SAFETY: registers a plain function that reads an initialised static.
    REGISTERED.call_once(|| unsafe {
        libc::atexit(clean_up);
    });
}
