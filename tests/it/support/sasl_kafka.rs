//! Kafka with SASL SCRAM for tests: a tansu that requires authentication, one per test process,
//! started on first use. tansu keeps SCRAM users only in a storage engine that persists them,
//! and creates the first one only through a broker that does not authenticate: so a tansu built
//! with the SQLite engine (`scripts/install-tansu --with-users`) runs twice on one file, a plain
//! broker to create the user and the authenticating one clients talk to (both read the file).
//! The prebuilt tansu cannot do it on any storage: its dynostore engine (memory:// and s3://)
//! accepts a new user and forgets it at once, so two brokers on one S3 bucket answer a SCRAM
//! login with "unknown-user".

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use history_consumer::tools::certs::Authority;

use crate::support::helpers::{free_port, unique_name};
use crate::support::kafka::TestKafka;
use crate::support::tansu::{Launch, TansuServer};
use crate::support::tls_kafka::{Clients, Front, start_front};

/// The mechanism the user is created for.
pub const MECHANISM: &str = "SCRAM-SHA-256";

/// The authenticating broker and its users.
pub struct SaslKafka {
    /// `bootstrap.servers` of the authenticating broker.
    pub brokers: String,
    /// A user with a SCRAM-SHA-256 credential.
    pub user: String,
    pub password: String,
    /// A user with a SCRAM-SHA-512 credential.
    pub user_512: String,
    pub password_512: String,
    binary: PathBuf,
    _users: Users,
    _authenticating: TansuServer,
}

/// An authenticating broker on the same users, reached only over TLS (SASL_SSL): tansu
/// advertises its TLS front.
pub struct SaslTlsKafka {
    pub brokers: String,
    pub authority: Authority,
    _front: Front,
    _tansu: TansuServer,
    _users: Users,
}

/// The SASL broker every SASL test of this process shares, started on first use.
pub fn server() -> &'static SaslKafka {
    static SERVER: OnceLock<SaslKafka> = OnceLock::new();
    SERVER.get_or_init(|| SaslKafka::start().unwrap_or_else(|error| panic!("{error}")))
}

/// A tansu with the SQLite engine: `$TANSU_WITH_USERS`, else the cache
/// `scripts/install-tansu --with-users` fills (target/tools/with-users/bin/tansu).
pub fn find_binary() -> Result<PathBuf, String> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os("TANSU_WITH_USERS") {
        candidates.push(path.into());
    }
    if let Some(target) = Path::new(env!("CARGO_TARGET_TMPDIR")).parent() {
        candidates.push(target.join("tools/with-users/bin/tansu"));
    }
    candidates.into_iter().find(|c| c.is_file()).ok_or_else(|| {
        "no tansu with the SQLite engine: run `scripts/install-tansu --with-users` and \
             export TANSU_WITH_USERS=<the path it prints>"
            .to_owned()
    })
}

/// librdkafka properties of a client that logs in as `user` with `password`.
pub fn sasl_options(user: &str, password: &str) -> Vec<(String, String)> {
    vec![
        ("security.protocol".into(), "sasl_plaintext".into()),
        ("sasl.mechanism".into(), MECHANISM.into()),
        ("sasl.username".into(), user.into()),
        ("sasl.password".into(), password.into()),
    ]
}

/// The users of a broker: `users.db` in a folder of its own, written by a broker without
/// authentication that stays up with it (tansu creates users through a broker).
struct Users {
    dir: PathBuf,
    _plain: TansuServer,
}

/// The two users every SASL broker has (names and passwords).
struct Credentials<'a> {
    user: &'a str,
    password: &'a str,
    user_512: &'a str,
    password_512: &'a str,
}

impl Users {
    /// `credentials`' users in a new folder.
    fn create(binary: &Path, credentials: &Credentials<'_>) -> Result<Users, String> {
        // Kept until the process ends (the brokers hold the file); in the temp folder.
        let dir = tempfile::Builder::new()
            .prefix("sasl-kafka")
            .tempdir()
            .map_err(|e| e.to_string())?
            .keep();
        let plain = TansuServer::launch(&Launch {
            binary: binary.to_owned(),
            storage: USERS,
            dir: Some(&dir),
            authentication: None,
            advertised: None,
        })?;
        for (name, secret, mechanism) in [
            (credentials.user, credentials.password, "scram256"),
            (credentials.user_512, credentials.password_512, "scram512"),
        ] {
            let created = Command::new(binary)
                .args(["user", "create", name, secret])
                .args(["--mechanism", mechanism])
                .args(["--broker", &format!("tcp://{}", plain.brokers)])
                .current_dir(&dir)
                .output()
                .map_err(|e| format!("running tansu user create: {e}"))?;
            if !created.status.success() {
                return Err(format!(
                    "tansu user create failed ({}): {}",
                    created.status,
                    String::from_utf8_lossy(&created.stderr)
                ));
            }
        }
        Ok(Users { dir, _plain: plain })
    }
}

/// The storage of every SASL broker: its users and its topics, relative to its folder. Each
/// serving broker has a file of its own: tansu 0.6's sqlite engine fails a write that meets
/// another process's at once (see `tansu::TANSU_BUSY_TRIES`).
const USERS: &str = "sqlite://users.db";

impl SaslKafka {
    fn start() -> Result<SaslKafka, String> {
        let binary = find_binary()?;
        let (user, password) = ("history".to_owned(), unique_name("secret"));
        let (user_512, password_512) = ("history512".to_owned(), unique_name("secret"));
        let users = Users::create(
            &binary,
            &Credentials {
                user: &user,
                password: &password,
                user_512: &user_512,
                password_512: &password_512,
            },
        )?;
        let options = sasl_options(&user, &password);
        let authenticating = TansuServer::launch(&Launch {
            binary: binary.clone(),
            storage: USERS,
            dir: Some(&users.dir),
            authentication: Some(&options),
            advertised: None,
        })?;
        Ok(SaslKafka {
            brokers: authenticating.brokers.clone(),
            user,
            password,
            user_512,
            password_512,
            binary,
            _users: users,
            _authenticating: authenticating,
        })
    }

    /// The properties of a client that logs in as the broker's user.
    pub fn options(&self) -> Vec<(String, String)> {
        sasl_options(&self.user, &self.password)
    }

    /// An authenticating broker on the same users behind a TLS front, started once.
    pub fn over_tls(&self) -> &'static SaslTlsKafka {
        static SERVER: OnceLock<SaslTlsKafka> = OnceLock::new();
        SERVER.get_or_init(|| {
            self.start_over_tls()
                .unwrap_or_else(|error| panic!("{error}"))
        })
    }

    fn start_over_tls(&self) -> Result<SaslTlsKafka, String> {
        // The same users in a file of its own (see `USERS`).
        let users = Users::create(
            &self.binary,
            &Credentials {
                user: &self.user,
                password: &self.password,
                user_512: &self.user_512,
                password_512: &self.password_512,
            },
        )?;
        let authority = Authority::new(&users.dir, "sasl-kafka-ca").map_err(|e| e.to_string())?;
        let server = authority
            .issue_server("sasl-broker", &["localhost", "127.0.0.1"])
            .map_err(|e| e.to_string())?;
        let port = free_port();
        let options = self.options();
        let tansu = TansuServer::launch(&Launch {
            binary: self.binary.clone(),
            storage: USERS,
            dir: Some(&users.dir),
            authentication: Some(&options),
            advertised: Some(port),
        })?;
        let front = start_front(&users.dir, &server, &tansu.brokers, port, Clients::Any)?;
        Ok(SaslTlsKafka {
            brokers: front.brokers.clone(),
            authority,
            _front: front,
            _tansu: tansu,
            _users: users,
        })
    }

    /// A fresh topic with `partitions` partitions, reached with the user's credentials.
    pub async fn topic(&self, partitions: i32) -> TestKafka {
        let topic = unique_name("tickets");
        let kafka = TestKafka::on(self.brokers.clone(), self.options(), topic, partitions);
        crate::support::tansu::create_topic(kafka.client(), &kafka.topic, partitions).await;
        kafka
    }
}
