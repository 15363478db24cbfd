//! A throwaway PostgreSQL cluster from the machine's own binaries, for tests, `demo` and `bench`.
//!
//! `initdb` into a temporary directory, `postgres` on a free loopback port, as `nobody` when we
//! run as root (PostgreSQL refuses root). A watchdog process stops the server and removes the
//! directory when this process dies, however it dies, so nothing outlives a crashed test run.
//! Optionally with TLS and a `pg_hba.conf` that takes TCP connections over TLS only; the
//! cluster's own administration (creating databases and roles) goes through its Unix socket,
//! which stays trusted.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian installs the server binaries (`/usr/lib/postgresql/<major>/bin`).
const DEBIAN_PG_ROOT: &str = "/usr/lib/postgresql";
const NOBODY: u32 = 65534;
const NOGROUP: u32 = 65534;
const STARTUP_DEADLINE: Duration = Duration::from_secs(30);

/// The cluster could not be created or started.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "PostgreSQL server binaries (initdb, postgres) were found neither on PATH nor under \
         {DEBIAN_PG_ROOT}/*/bin; install them (Debian/Ubuntu: `apt-get install postgresql`) or \
         point HISTORY_PG_BIN at their directory"
    )]
    BinariesNotFound,
    #[error("{what} failed")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("initdb failed ({status}): {output}")]
    Initdb { status: String, output: String },
    #[error("postgres did not accept connections within {seconds} s; its log:\n{log}")]
    NotReady { seconds: u64, log: String },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
    let what = what.into();
    move |source| ClusterError::Io { what, source }
}

/// Settings of a throwaway cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// `fsync=off` and friends: much faster, and fine for data nobody keeps.
    pub durable: bool,
    pub max_connections: u32,
    /// TLS on (`ssl=on`) with these files.
    pub tls: Option<ServerTls>,
    /// Who may connect, and how.
    pub access: Access,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            durable: false,
            max_connections: 300,
            tls: None,
            access: Access::Trusted,
        }
    }
}

/// The server's TLS files. They are copied into the cluster's directory, the key made the
/// server user's own with mode 0600 (PostgreSQL refuses a key others can read).
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The authority client certificates must chain to (`ssl_ca_file`), for [`Login::Certificate`].
    pub client_ca: Option<PathBuf>,
}

/// `pg_hba.conf`: who may connect over TCP, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Access {
    /// initdb's: every connection trusted, with TLS or without.
    #[default]
    Trusted,
    /// Over TLS only (`hostssl`): each role logs in as the first rule naming it (or `all`)
    /// says; no rule, no login.
    TlsOnly(Vec<(String, Login)>),
}

/// How a role proves who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Login {
    Trust,
    /// A client certificate whose common name is the role (`cert`).
    Certificate,
    /// The role's password (`scram-sha-256`).
    Password,
}

impl Access {
    /// The `pg_hba.conf` text, `None` for initdb's own.
    fn hba(&self) -> Option<String> {
        let Access::TlsOnly(rules) = self else {
            return None;
        };
        // The Unix socket stays trusted: the cluster administers itself through it.
        let mut text = String::from("local all all trust\n");
        for (role, login) in rules {
            let method = match login {
                Login::Trust => "trust",
                Login::Certificate => "cert",
                Login::Password => "scram-sha-256",
            };
            text.push_str(&format!("hostssl all {role} 127.0.0.1/32 {method}\n"));
        }
        Some(text)
    }
}

/// A running (or stopped, for outage tests) throwaway PostgreSQL server.
pub struct TempCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    options: ClusterOptions,
    server: Option<Child>,
    watchdog: Option<Child>,
}

impl TempCluster {
    /// Creates a cluster in a fresh temporary directory and starts it.
    pub fn start(options: ClusterOptions) -> Result<TempCluster, ClusterError> {
        let bin = find_binaries()?;
        let dir = tempfile::Builder::new()
            .prefix("history-pg-")
            .tempdir()
            .map_err(io("creating a temporary directory"))?;
        let as_nobody = is_root();
        if as_nobody {
            std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOGROUP))
                .map_err(io("handing the temporary directory to nobody"))?;
        }
        let data = dir.path().join("data");
        let output = server_command(&bin.join("initdb"), as_nobody)
            .args(["-D"])
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .output()
            .map_err(io("running initdb"))?;
        if !output.status.success() {
            return Err(ClusterError::Initdb {
                status: output.status.to_string(),
                output: String::from_utf8_lossy(&[output.stdout, output.stderr].concat())
                    .into_owned(),
            });
        }
        if let Some(hba) = options.access.hba() {
            std::fs::write(data.join("pg_hba.conf"), hba).map_err(io("writing pg_hba.conf"))?;
        }
        if let Some(tls) = &options.tls {
            install_tls(dir.path(), tls, as_nobody)?;
        }
        let mut cluster = TempCluster {
            dir,
            bin,
            port: free_port()?,
            options,
            server: None,
            watchdog: None,
        };
        cluster.start_server()?;
        Ok(cluster)
    }

    /// The TCP port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection URL for `database` as the superuser `postgres`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The directory holding the data directory and the server log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Creates a database and returns its URL.
    pub async fn create_database(&self, name: &str) -> Result<String, tokio_postgres::Error> {
        // Identifiers cannot be parameters; quote it as PostgreSQL does.
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        self.administer(&format!("CREATE DATABASE {quoted}"))
            .await
            .map(|()| self.url(name))
    }

    /// Runs `sql` as the superuser in the database `postgres`, through the Unix socket (the
    /// cluster's own connection: trusted whatever [`Access`] says, never TLS).
    pub async fn administer(&self, sql: &str) -> Result<(), tokio_postgres::Error> {
        let (client, connection) = tokio_postgres::Config::new()
            .host_path(self.dir.path())
            .port(self.port)
            .user("postgres")
            .dbname("postgres")
            .connect(tokio_postgres::NoTls)
            .await?;
        let driver = tokio::spawn(connection);
        let result = client.batch_execute(sql).await;
        drop(client);
        let _ = driver.await;
        result
    }

    /// Stops the server with a fast shutdown (clients are disconnected), keeping its data.
    pub fn stop(&mut self) -> Result<(), ClusterError> {
        if let Some(watchdog) = self.watchdog.as_mut() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        self.watchdog = None;
        if let Some(mut server) = self.server.take() {
            // SIGINT is PostgreSQL's fast shutdown.
            unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGINT) };
            server.wait().map_err(io("waiting for postgres to stop"))?;
        }
        Ok(())
    }

    /// Starts a stopped server again on the same port and data.
    pub fn restart(&mut self) -> Result<(), ClusterError> {
        if self.server.is_none() {
            self.start_server()?;
        }
        Ok(())
    }

    /// The server log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    fn start_server(&mut self) -> Result<(), ClusterError> {
        let as_nobody = is_root();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("postgres.log"))
            .map_err(io("opening the server log"))?;
        if as_nobody {
            let _ = std::os::unix::fs::chown(
                self.dir.path().join("postgres.log"),
                Some(NOBODY),
                Some(NOGROUP),
            );
        }
        let mut command = server_command(&self.bin.join("postgres"), as_nobody);
        command
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args([
                "-c",
                &format!("max_connections={}", self.options.max_connections),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(io("sharing the server log"))?)
            .stderr(log);
        if self.options.tls.is_some() {
            let tls = self.dir.path().join(TLS_DIR);
            command.args(["-c", "ssl=on"]);
            for (setting, file) in [
                ("ssl_cert_file", "server.crt"),
                ("ssl_key_file", "server.key"),
                ("ssl_ca_file", "ca.crt"),
            ] {
                let path = tls.join(file);
                if path.exists() {
                    command.args(["-c", &format!("{setting}={}", path.display())]);
                }
            }
        }
        if !self.options.durable {
            for setting in [
                "fsync=off",
                "synchronous_commit=off",
                "full_page_writes=off",
            ] {
                command.args(["-c", setting]);
            }
        }
        let server = command.spawn().map_err(io("starting postgres"))?;
        let watchdog = spawn_watchdog(server.id(), self.dir.path())?;
        self.server = Some(server);
        self.watchdog = Some(watchdog);
        self.wait_until_ready()
    }

    fn wait_until_ready(&mut self) -> Result<(), ClusterError> {
        let started = Instant::now();
        let ready = self.bin.join("pg_isready");
        while started.elapsed() < STARTUP_DEADLINE {
            let exited = self
                .server
                .as_mut()
                .and_then(|s| s.try_wait().ok().flatten())
                .is_some();
            if exited {
                break;
            }
            let status = Command::new(&ready)
                .args([
                    "-q",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                ])
                .status();
            if status.is_ok_and(|s| s.success()) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(ClusterError::NotReady {
            seconds: STARTUP_DEADLINE.as_secs(),
            log: self.log(),
        })
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        if let Some(mut server) = self.server.take() {
            // Immediate shutdown: the data is thrown away next.
            unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGQUIT) };
            let _ = server.wait();
        }
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}

/// Finds `initdb`/`postgres`: `HISTORY_PG_BIN`, then `PATH`, then the newest Debian version.
pub fn find_binaries() -> Result<PathBuf, ClusterError> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = std::env::var_os("HISTORY_PG_BIN").map(PathBuf::from) {
        return if has_server(&dir) {
            Ok(dir)
        } else {
            Err(ClusterError::BinariesNotFound)
        };
    }
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(dir) = std::env::split_paths(&path).find(|dir| has_server(dir)) {
            // PATH may hold symlinks to the real directory, where pg_isready lives beside them.
            let initdb =
                std::fs::canonicalize(dir.join("initdb")).map_err(io("resolving initdb"))?;
            if let Some(real) = initdb.parent().filter(|real| has_server(real)) {
                return Ok(real.to_path_buf());
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(DEBIAN_PG_ROOT)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            has_server(&bin).then_some((major, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or(ClusterError::BinariesNotFound)
}

/// The cluster directory's folder of TLS files.
const TLS_DIR: &str = "tls";

/// Copies the server's TLS files into the cluster's directory, readable by the server (whose
/// user may not reach the files' own folder), the key by it alone.
fn install_tls(dir: &Path, tls: &ServerTls, as_nobody: bool) -> Result<(), ClusterError> {
    use std::os::unix::fs::PermissionsExt;
    let target = dir.join(TLS_DIR);
    std::fs::create_dir_all(&target).map_err(io("creating the TLS folder"))?;
    let files = [
        (Some(&tls.cert), "server.crt", 0o644),
        (Some(&tls.key), "server.key", 0o600),
        (tls.client_ca.as_ref(), "ca.crt", 0o644),
    ];
    let mut owned = vec![target.clone()];
    for (source, name, mode) in files {
        let Some(source) = source else { continue };
        let path = target.join(name);
        std::fs::copy(source, &path).map_err(io(format!("copying {}", source.display())))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(io(format!("setting the mode of {name}")))?;
        owned.push(path);
    }
    if as_nobody {
        for path in owned {
            std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOGROUP))
                .map_err(io("handing the TLS files to nobody"))?;
        }
    }
    Ok(())
}

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

fn server_command(program: &Path, as_nobody: bool) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(program);
    if as_nobody {
        command.uid(NOBODY).gid(NOGROUP);
    }
    // Our locale may not exist in the cluster's view; the C locale always does.
    command.env("LC_ALL", "C").env_remove("PGDATA");
    command
}

fn free_port() -> Result<u16, ClusterError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io("finding a free port"))?;
    let port = listener
        .local_addr()
        .map_err(io("finding a free port"))?
        .port();
    Ok(port)
}

/// A shell that outlives us only long enough to stop the server and delete its directory.
fn spawn_watchdog(server_pid: u32, dir: &Path) -> Result<Child, ClusterError> {
    const SCRIPT: &str = r#"
        while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
        kill -0 "$1" 2>/dev/null && exit 0
        kill -QUIT "$2" 2>/dev/null
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$2" 2>/dev/null || break; sleep 0.5; done
        rm -rf "$3"
    "#;
    Command::new("sh")
        .args(["-c", SCRIPT, "history-pg-watchdog"])
        .arg(std::process::id().to_string())
        .arg(server_pid.to_string())
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(io("starting the cluster watchdog"))
}
