//! Connections to the service's own PostgreSQL database: its connection string read as libpq
//! reads it ([`conninfo`]), libpq's sslmode and certificate files ([`sslmode`]), OpenSSL's
//! side of it ([`tls`]), and the pools every part of the product connects through.

pub mod conninfo;
pub mod sslmode;
pub mod tls;

use std::path::{Path, PathBuf};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;
use tokio_postgres::config::{SslMode as ClientSslMode, SslNegotiation};

pub use self::conninfo::ConninfoError;
pub use self::sslmode::{PlanError, SslMode};
pub use self::tls::{SetupError, TlsError};

/// The database could not be reached or prepared. The connection string's mistakes name their
/// key and are shown as they are (an operator's error message starts with the flag).
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Conninfo(#[from] ConninfoError),
    #[error(transparent)]
    Tls(#[from] PlanError),
    #[error(transparent)]
    TlsFiles(#[from] SetupError),
    #[error("could not build the connection pool: {0}")]
    Pool(String),
}

/// A database the product connects to: where it is, who logs in, and what TLS that takes,
/// all checked (the files TLS needs were read). `Debug` shows no password.
#[derive(Debug, Clone)]
pub struct Database {
    config: tokio_postgres::Config,
    /// `None`: no TLS (`sslmode=disable`, or only Unix-domain sockets).
    tls: Option<tls::Connector>,
    mode: SslMode,
}

impl Database {
    /// Reads `conninfo` (a `postgres://` URI or libpq's key=value form) with `password`, when
    /// given apart, as the password; sets a connect timeout and keepalives, so that a vanished
    /// server is noticed, unless the string sets them.
    pub fn new(conninfo: &str, password: Option<&str>) -> Result<Database, DbError> {
        let parsed = conninfo::parse(conninfo)?;
        let only_sockets = parsed.only_unix_sockets();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let plan = parsed.tls.plan(home.as_deref(), Path::exists)?;
        let mut config = parsed.client;
        if let Some(password) = password {
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        if config.get_application_name().is_none() {
            config.application_name("history-consumer");
        }
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30));
        let mode = plan.mode;
        // libpq ignores sslmode on Unix-domain sockets; so does this.
        let tls = if mode == SslMode::Disable || only_sockets {
            config.ssl_mode(ClientSslMode::Disable);
            None
        } else {
            if mode >= SslMode::Require {
                config.ssl_mode(ClientSslMode::Require);
                // Direct, as far as tokio-postgres knows: the connector asks for TLS itself
                // unless the string said sslnegotiation=direct (see `TlsPlan::asks_server`).
                config.ssl_negotiation(SslNegotiation::Direct);
            } else {
                // allow as prefer: TLS first when the server offers it (libpq tries without
                // TLS first; tokio-postgres cannot retry).
                config.ssl_mode(ClientSslMode::Prefer);
                config.ssl_negotiation(SslNegotiation::Postgres);
            }
            Some(tls::Connector::new(plan)?)
        };
        Ok(Database { config, tls, mode })
    }

    /// The client's configuration (for settings on top, as the admin pool's timeout).
    pub fn config_mut(&mut self) -> &mut tokio_postgres::Config {
        &mut self.config
    }

    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The sslmode in effect (`prefer` when the string names none).
    pub fn ssl_mode(&self) -> SslMode {
        self.mode
    }

    /// One connection outside any pool, its driver spawned on the current runtime.
    pub async fn connect(&self) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        let client = match &self.tls {
            None => {
                let (client, connection) = self.config.connect(NoTls).await?;
                tokio::spawn(connection);
                client
            }
            Some(tls) => {
                let (client, connection) = self.config.connect(tls.clone()).await?;
                tokio::spawn(connection);
                client
            }
        };
        Ok(client)
    }

    /// One connection outside any pool whose notifications (LISTEN) come out of the receiver;
    /// the receiver ends when the connection does.
    pub async fn connect_listening(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio::sync::mpsc::UnboundedReceiver<tokio_postgres::Notification>,
        ),
        tokio_postgres::Error,
    > {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let client = match &self.tls {
            None => {
                let (client, connection) = self.config.connect(NoTls).await?;
                tokio::spawn(forward_notifications(connection, sender));
                client
            }
            Some(tls) => {
                let (client, connection) = self.config.connect(tls.clone()).await?;
                tokio::spawn(forward_notifications(connection, sender));
                client
            }
        };
        Ok((client, receiver))
    }

    /// A pool of at most `size` connections; a checkout waits at most 10 s.
    pub fn pool(&self, size: usize) -> Result<Pool, DbError> {
        pool_of(self.clone(), size, Duration::from_secs(10))
    }
}

/// Drives `connection`, passing its notifications on until it ends (or nobody listens).
async fn forward_notifications<S, T>(
    mut connection: tokio_postgres::Connection<S, T>,
    sender: tokio::sync::mpsc::UnboundedSender<tokio_postgres::Notification>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures::StreamExt;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    while let Some(message) = messages.next().await {
        match message {
            Ok(tokio_postgres::AsyncMessage::Notification(notification)) => {
                if sender.send(notification).is_err() {
                    break;
                }
            }
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(error = %error, "listening connection ended");
                break;
            }
        }
    }
}

/// A pool of at most `size` connections to the database `conninfo` names (password included).
pub fn pool(conninfo: &str, size: usize) -> Result<Pool, DbError> {
    Database::new(conninfo, None)?.pool(size)
}

/// A pool of at most `size` connections to `database`; a checkout waits at most `wait`.
pub fn pool_of(database: Database, size: usize, wait: Duration) -> Result<Pool, DbError> {
    let manager_config = ManagerConfig {
        // A closed connection (server restarted) is noticed and replaced on checkout.
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match database.tls {
        None => Manager::from_config(database.config, NoTls, manager_config),
        Some(tls) => Manager::from_config(database.config, tls, manager_config),
    };
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(Duration::from_secs(5)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()
        .map_err(|e| DbError::Pool(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_gets_a_timeout_keepalives_and_a_name_unless_the_string_sets_them() {
        let database = Database::new("postgres://u@localhost/db", None).unwrap();
        let config = database.config();
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(5)));
        assert_eq!(config.get_application_name(), Some("history-consumer"));
        assert!(config.get_keepalives());
        assert_eq!(database.ssl_mode(), SslMode::Prefer);
        let named = Database::new("host=h application_name=mine connect_timeout=9", None).unwrap();
        assert_eq!(named.config().get_application_name(), Some("mine"));
        assert_eq!(
            named.config().get_connect_timeout(),
            Some(&Duration::from_secs(9))
        );
    }

    #[test]
    fn a_password_given_apart_is_the_password_and_never_shown() {
        let database = Database::new("host=h user=u", Some("hunter2")).unwrap();
        assert_eq!(database.config().get_password(), Some(&b"hunter2"[..]));
        assert!(!format!("{database:?}").contains("hunter2"));
    }

    #[test]
    fn tokio_postgres_is_told_to_leave_the_asking_to_the_connector_when_tls_is_required() {
        let required = Database::new("host=h sslmode=require", None).unwrap();
        assert_eq!(required.config().get_ssl_mode(), ClientSslMode::Require);
        assert_eq!(
            required.config().get_ssl_negotiation(),
            SslNegotiation::Direct
        );
        assert!(required.tls.as_ref().unwrap().plan().asks_server());
        let preferred = Database::new("host=h sslmode=allow", None).unwrap();
        assert_eq!(preferred.config().get_ssl_mode(), ClientSslMode::Prefer);
        let disabled = Database::new("host=h sslmode=disable", None).unwrap();
        assert!(disabled.tls.is_none());
        let socket = Database::new("host=/run/postgresql sslmode=require", None).unwrap();
        assert!(socket.tls.is_none());
        assert_eq!(socket.config().get_ssl_mode(), ClientSslMode::Disable);
    }
}
