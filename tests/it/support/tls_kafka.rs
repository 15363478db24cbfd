//! Kafka over TLS for tests: a tansu of its own behind Debian's stunnel4 (tansu 0.6 serves no
//! TLS itself), with certificates made on the spot (`tools::certs`). One per test process,
//! started on first use; tansu advertises the TLS front's port, so clients stay on TLS after
//! the metadata answer, and every client of it (the service, producers, offset readers) must
//! speak TLS: [`TlsKafka::topic`] gives a `TestKafka` whose clients do.
//!
//! More fronts can stand before the same tansu ([`TlsKafka::front`]): with another server
//! certificate (issued for another host, or by another authority), or asking clients for a
//! certificate (mutual TLS). A client bootstraps through them but is sent to the main front by
//! the metadata answer, so they serve to test what happens at the first handshake.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use history_consumer::tools::certs::{Authority, Issued};

use crate::support::helpers::{free_port, unique_name};
use crate::support::kafka::TestKafka;
use crate::support::tansu::{TansuServer, clean_up_at_exit, spawn_dying_with_us};

const STUNNEL: &str = "/usr/bin/stunnel4";
const STARTUP_DEADLINE: Duration = Duration::from_secs(10);

/// The broker behind its TLS front.
pub struct TlsKafka {
    /// `bootstrap.servers`: the TLS front tansu advertises, `127.0.0.1:<port>`.
    pub brokers: String,
    /// The authority that issued the front's certificate: what clients must trust.
    pub authority: Authority,
    /// Where the certificates are (kept for the whole test process).
    pub dir: PathBuf,
    /// The main front's certificate (for `localhost` and `127.0.0.1`).
    pub server: Issued,
    /// The main front, for as long as the test process.
    pub front: Front,
    tansu: TansuServer,
}

/// A TLS front (stunnel) before tansu; stopped on drop.
pub struct Front {
    /// `bootstrap.servers` for a client of this front: `127.0.0.1:<port>`.
    pub brokers: String,
    child: Child,
    log: PathBuf,
    /// Its configuration and log, unless they live in the broker's folder.
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Front {
    /// What stunnel wrote (connections, refused handshakes).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// How a front treats clients.
pub enum Clients<'a> {
    /// Any client (plain TLS).
    Any,
    /// Only clients with a certificate issued by the authority whose certificate is at this
    /// path (stunnel `verify = 2`, `CAfile`).
    CertifiedBy(&'a Path),
}

/// The TLS broker every TLS test of this process shares, started on first use.
pub fn server() -> &'static TlsKafka {
    static SERVER: OnceLock<TlsKafka> = OnceLock::new();
    SERVER.get_or_init(|| TlsKafka::start().unwrap_or_else(|error| panic!("{error}")))
}

/// A broker of its own reached only over mutual TLS: its front asks every client for a
/// certificate issued by an authority of its own, and tansu advertises that front, so every
/// connection after the bootstrap needs one too.
pub struct MutualKafka {
    pub brokers: String,
    /// The authority of the front's certificate (what clients trust).
    pub authority: Authority,
    /// A client certificate it accepts.
    pub client: Issued,
    _front: Front,
    _tansu: TansuServer,
}

/// The mutual-TLS broker of this test process, started on first use.
pub fn mutual_server() -> &'static MutualKafka {
    static SERVER: OnceLock<MutualKafka> = OnceLock::new();
    SERVER.get_or_init(|| MutualKafka::start().unwrap_or_else(|error| panic!("{error}")))
}

impl MutualKafka {
    fn start() -> Result<MutualKafka, String> {
        let dir = tempfile::Builder::new()
            .prefix("mtls-kafka")
            .tempdir()
            .map_err(|e| e.to_string())?
            .keep();
        let authority = Authority::new(&dir, "kafka-ca").map_err(|e| e.to_string())?;
        let clients = Authority::new(&dir, "client-ca").map_err(|e| e.to_string())?;
        let server = authority
            .issue_server("broker", &["localhost", "127.0.0.1"])
            .map_err(|e| e.to_string())?;
        let client = clients
            .issue_client("history", "history-consumer")
            .map_err(|e| e.to_string())?;
        let port = free_port();
        let tansu = TansuServer::start_advertising(Some(port))?;
        let front = start_front(
            &dir,
            &server,
            &tansu.brokers,
            port,
            Clients::CertifiedBy(&clients.cert_path),
        )?;
        clean_up_at_exit(front.child.id(), &dir);
        Ok(MutualKafka {
            brokers: front.brokers.clone(),
            authority,
            client,
            _front: front,
            _tansu: tansu,
        })
    }

    /// The properties of a client with the accepted certificate.
    pub fn options(&self) -> Vec<(String, String)> {
        let mut options = tls_options(&self.authority.cert_path);
        options.push((
            "ssl.certificate.location".into(),
            self.client.cert.display().to_string(),
        ));
        options.push((
            "ssl.key.location".into(),
            self.client.key.display().to_string(),
        ));
        options
    }

    /// A fresh topic with `partitions` partitions, reached over mutual TLS.
    pub async fn topic(&self, partitions: i32) -> TestKafka {
        let topic = unique_name("tickets");
        let kafka = TestKafka::on(self.brokers.clone(), self.options(), topic, partitions);
        crate::support::tansu::create_topic(kafka.client(), &kafka.topic, partitions).await;
        kafka
    }
}

/// librdkafka properties of a client that speaks TLS and trusts the authority at `ca`.
pub fn tls_options(ca: &Path) -> Vec<(String, String)> {
    vec![
        ("security.protocol".into(), "ssl".into()),
        ("ssl.ca.location".into(), ca.display().to_string()),
    ]
}

impl TlsKafka {
    fn start() -> Result<TlsKafka, String> {
        if !Path::new(STUNNEL).is_file() {
            return Err(format!(
                "{STUNNEL} is missing: install Debian's stunnel4 package"
            ));
        }
        // Certificates and the main front's files, removed when the process exits.
        let dir = tempfile::Builder::new()
            .prefix("tls-kafka")
            .tempdir()
            .map_err(|e| e.to_string())?
            .keep();
        let authority = Authority::new(&dir, "kafka-ca").map_err(|e| e.to_string())?;
        let server = authority
            .issue_server("broker", &["localhost", "127.0.0.1"])
            .map_err(|e| e.to_string())?;
        let port = free_port();
        let tansu = TansuServer::start_advertising(Some(port))?;
        let front = start_front(&dir, &server, &tansu.brokers, port, Clients::Any)?;
        clean_up_at_exit(front.child.id(), &dir);
        Ok(TlsKafka {
            brokers: front.brokers.clone(),
            authority,
            dir,
            server,
            front,
            tansu,
        })
    }

    /// The properties of a client that trusts this broker's authority.
    pub fn options(&self) -> Vec<(String, String)> {
        tls_options(&self.authority.cert_path)
    }

    /// A fresh topic with `partitions` partitions, reached over TLS.
    pub async fn topic(&self, partitions: i32) -> TestKafka {
        let topic = unique_name("tickets");
        let kafka = TestKafka::on(self.brokers.clone(), self.options(), topic, partitions);
        crate::support::tansu::create_topic(kafka.client(), &kafka.topic, partitions).await;
        kafka
    }

    /// Another TLS front before the same tansu, presenting `server` and treating clients as
    /// `clients` say; stopped when dropped.
    pub fn front(&self, server: &Issued, clients: Clients<'_>) -> Front {
        let dir = tempfile::tempdir().expect("a folder for stunnel");
        let mut front = start_front(
            dir.path(),
            server,
            &self.tansu.brokers,
            free_port(),
            clients,
        )
        .unwrap_or_else(|error| panic!("{error}"));
        front._dir = Some(dir);
        front
    }

    /// A new authority (in this broker's folder) for certificates nobody here trusts, or for
    /// clients.
    pub fn authority(&self, name: &str) -> Authority {
        Authority::new(&self.dir, &unique_name(name)).expect("an authority")
    }
}

/// Starts stunnel on `port`, forwarding to `backend`, with its files in `dir`, and waits until
/// it accepts connections.
pub fn start_front(
    dir: &Path,
    server: &Issued,
    backend: &str,
    port: u16,
    clients: Clients<'_>,
) -> Result<Front, String> {
    let log = dir.join(format!("stunnel-{port}.log"));
    let verify = match clients {
        Clients::Any => String::new(),
        Clients::CertifiedBy(ca) => format!("verify = 2\nCAfile = {}\n", ca.display()),
    };
    let config = format!(
        "foreground = yes\npid =\noutput = {log}\ndebug = notice\n\n[kafka]\n\
         accept = 127.0.0.1:{port}\nconnect = {backend}\ncert = {cert}\nkey = {key}\n{verify}",
        log = log.display(),
        cert = server.cert.display(),
        key = server.key.display(),
    );
    let path = dir.join(format!("stunnel-{port}.conf"));
    std::fs::write(&path, config).map_err(|e| format!("writing {path:?}: {e}"))?;
    let mut command = Command::new(STUNNEL);
    command
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = spawn_dying_with_us(command).map_err(|e| format!("spawning stunnel: {e}"))?;
    let started = Instant::now();
    let address = format!("127.0.0.1:{port}");
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("stunnel exited ({status}); its log:\n{text}"));
        }
        if TcpStream::connect(&address).is_ok() {
            return Ok(Front {
                brokers: address,
                child,
                log,
                _dir: None,
            });
        }
        if started.elapsed() > STARTUP_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!(
                "stunnel did not listen on {address} within {STARTUP_DEADLINE:?}; its log:\n{text}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
