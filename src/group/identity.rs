//! Who this member is to the rest of the group: an id stable for the life of the process, the
//! host, the process id, the version, the Kafka client id the group's own description names it
//! by, and the admin URL the other members link to.

use std::net::SocketAddr;

use serde::Serialize;

/// This member, as it publishes itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberIdentity {
    /// `<host>-<pid>-<random>`: unique even when a process id comes back on the same host.
    pub id: String,
    /// The consumer group and topic it consumes (members of other groups sharing the database
    /// are not shown).
    pub group: String,
    pub topic: String,
    pub host: String,
    pub pid: u32,
    pub version: &'static str,
    /// `history-consumer-<host>-<pid>`, as Kafka's description of the group names the member.
    pub client_id: String,
    /// Where this member's admin UI is for the others (see [`admin_url`]).
    pub admin_url: String,
}

impl MemberIdentity {
    /// This process as a member of `group`, consuming `topic`, known to Kafka as `client_id`.
    pub fn new(
        group: &str,
        topic: &str,
        host: &str,
        client_id: &str,
        admin_url: String,
    ) -> MemberIdentity {
        let pid = std::process::id();
        MemberIdentity {
            id: member_id(host, pid, rand::random::<u16>()),
            group: group.to_owned(),
            topic: topic.to_owned(),
            host: host.to_owned(),
            pid,
            version: env!("CARGO_PKG_VERSION"),
            client_id: client_id.to_owned(),
            admin_url,
        }
    }
}

/// `<host>-<pid>-<4 hex digits>`.
pub fn member_id(host: &str, pid: u32, random: u16) -> String {
    format!("{host}-{pid}-{random:04x}")
}

/// The admin URL the other members link to: the one configured (`--admin-public-url`), else one
/// made from the address the admin listens on — its host name when it listens on every address
/// (a link to 0.0.0.0 leads nowhere).
pub fn admin_url(
    configured: Option<&str>,
    listening: SocketAddr,
    host: &str,
    https: bool,
) -> String {
    if let Some(url) = configured {
        return url.to_owned();
    }
    let scheme = if https { "https" } else { "http" };
    let port = listening.port();
    match listening {
        addr if addr.ip().is_unspecified() => format!("{scheme}://{host}:{port}"),
        SocketAddr::V4(addr) => format!("{scheme}://{}:{port}", addr.ip()),
        SocketAddr::V6(addr) => format!("{scheme}://[{}]:{port}", addr.ip()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_id_names_the_host_and_the_process_and_tells_reused_pids_apart() {
        assert_eq!(member_id("db-7", 4242, 0x0a1f), "db-7-4242-0a1f");
        assert_ne!(member_id("h", 1, 1), member_id("h", 1, 2));
    }

    #[test]
    fn the_admin_url_is_the_configured_one_else_made_from_the_listening_address() {
        let local: SocketAddr = "127.0.0.1:8081".parse().unwrap();
        assert_eq!(
            admin_url(Some("https://history-1.internal"), local, "h", false),
            "https://history-1.internal"
        );
        assert_eq!(admin_url(None, local, "h", false), "http://127.0.0.1:8081");
        let everywhere: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(
            admin_url(None, everywhere, "history-2", true),
            "https://history-2:8080"
        );
        let v6: SocketAddr = "[::1]:9000".parse().unwrap();
        assert_eq!(admin_url(None, v6, "h", false), "http://[::1]:9000");
    }
}
