//! A TCP proxy in front of a server that can hold the server's replies back: the client's
//! bytes reach the server, its answers wait until released. That is how a statement is caught
//! "in flight" (the server executed it, the client has no reply yet) to cancel it there.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy; it stops when dropped.
pub struct Proxy {
    pub port: u16,
    hold: Arc<watch::Sender<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Proxies `127.0.0.1:<new port>` to `upstream` (host:port).
    pub async fn start(upstream: String) -> Proxy {
        Proxy::start_on(0, upstream).await
    }

    /// The same on `127.0.0.1:port` (0: a new port): a server that comes up where a client
    /// was told to look.
    pub async fn start_on(port: u16, upstream: String) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("proxy port");
        let port = listener.local_addr().unwrap().port();
        let (hold, _) = watch::channel(false);
        let hold = Arc::new(hold);
        let held = hold.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, None));
                tokio::spawn(pump(server_read, client_write, Some(held.subscribe())));
            }
        });
        Proxy { port, hold, task }
    }

    /// From now on the server's replies wait (`true`) or flow again (`false`).
    pub fn hold_replies(&self, hold: bool) {
        self.hold.send_replace(hold);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut hold: Option<watch::Receiver<bool>>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if let Some(hold) = hold.as_mut() {
            if hold.wait_for(|held| !*held).await.is_err() {
                break;
            }
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// The URL of the database `url` names, reached through a proxy on `port`.
pub fn through(url: &str, port: u16) -> String {
    let config: tokio_postgres::Config = url.parse().expect("a database URL");
    let user = config.get_user().expect("a user");
    let dbname = config.get_dbname().expect("a database");
    format!("postgres://{user}@127.0.0.1:{port}/{dbname}")
}

/// `host:port` of the server `url` names.
pub fn upstream(url: &str) -> String {
    let config: tokio_postgres::Config = url.parse().expect("a database URL");
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("127.0.0.1:{port}")
}
