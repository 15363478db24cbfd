//! libpq's connection strings, read as libpq reads them: the URI form
//! (`postgresql://user:password@host:port/dbname?key=value&...`) and the key=value form
//! (`host=db.example.com dbname=history sslmode=verify-full`, values quoted with `'...'` and
//! `\` escapes). The TLS keys are taken out for [`super::sslmode`]; the rest goes to
//! tokio-postgres, which knows neither `verify-ca`/`verify-full` nor the certificate files.
//! Pure: no file is looked at here.

use std::fmt;
use std::path::PathBuf;

use super::sslmode::{RootCert, SslMode, TlsSettings};

/// A connection string could not be read. Messages name the key and never repeat a value that
/// could be a secret.
#[derive(Debug, thiserror::Error)]
pub enum ConninfoError {
    #[error("missing \"=\" after {0:?}")]
    MissingEquals(String),
    #[error("the quoted value of {0} has no closing quote")]
    Unterminated(String),
    #[error("the URI's {0} is not valid percent-encoding (%XX, never %00)")]
    PercentEncoding(String),
    #[error("the URI query parameter {0:?} has no \"=\" or more than one")]
    QueryParameter(String),
    #[error("the URI's IPv6 address has no closing \"]\" or is empty")]
    Ipv6,
    #[error("{key}={value} is not one of {allowed}")]
    Invalid {
        key: &'static str,
        value: String,
        allowed: &'static str,
    },
    #[error("{0} is a libpq setting this service does not support")]
    Unsupported(String),
    #[error("{0} is not a libpq connection setting")]
    Unknown(String),
    #[error("the PostgreSQL client refused it")]
    Client(#[source] tokio_postgres::Error),
}

/// A connection string read: the client's configuration (password included) and the TLS
/// settings as given.
#[derive(Debug, Clone)]
pub struct Conninfo {
    pub client: tokio_postgres::Config,
    pub tls: TlsSettings,
}

impl Conninfo {
    /// Whether the string carries a (non-empty) password.
    pub fn has_password(&self) -> bool {
        self.client.get_password().is_some_and(|p| !p.is_empty())
    }

    /// Whether every host is a Unix-domain socket (libpq ignores sslmode there).
    pub fn only_unix_sockets(&self) -> bool {
        let hosts = self.client.get_hosts();
        !hosts.is_empty()
            && self.client.get_hostaddrs().is_empty()
            && hosts
                .iter()
                .all(|h| !matches!(h, tokio_postgres::config::Host::Tcp(_)))
    }
}

/// Keys tokio-postgres reads itself, under libpq's names.
const CLIENT_KEYS: [&str; 17] = [
    "user",
    "password",
    "dbname",
    "options",
    "application_name",
    "host",
    "hostaddr",
    "port",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// Keys libpq knows that neither this crate nor tokio-postgres implements: refused by name
/// rather than ignored, since each changes how or where libpq would connect.
const UNSUPPORTED_KEYS: [&str; 20] = [
    "sslcrl",
    "sslcrldir",
    "sslcertmode",
    "sslcompression",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "requiressl",
    "gssencmode",
    "gsslib",
    "gssdelegation",
    "krbsrvname",
    "requirepeer",
    "require_auth",
    "passfile",
    "service",
    "client_encoding",
    "fallback_application_name",
    "replication",
    "scram_client_key",
    "scram_server_key",
];

const SSLMODES: &str = "disable, allow, prefer, require, verify-ca, verify-full";

/// Reads a connection string in either of libpq's forms.
pub fn parse(text: &str) -> Result<Conninfo, ConninfoError> {
    let pairs = match uri_body(text) {
        Some(body) => uri_pairs(body)?,
        None => keyword_pairs(text)?,
    };
    from_pairs(pairs)
}

/// The key/value pairs of a connection string, later ones overriding earlier ones as in
/// libpq. Values may be secrets: never shown.
struct Pairs(Vec<(String, String)>);

impl fmt::Debug for Pairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(key, _)| key))
            .finish()
    }
}

fn uri_body(text: &str) -> Option<&str> {
    let text = text.trim_start();
    ["postgresql://", "postgres://"]
        .iter()
        .find_map(|prefix| text.strip_prefix(prefix))
}

/// The key=value form, with libpq's rules: blanks around `=` allowed; a value is either
/// unquoted (up to the next blank, `\` escaping the next character) or in single quotes (`\'`
/// and `\\` inside).
fn keyword_pairs(text: &str) -> Result<Pairs, ConninfoError> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(Pairs(pairs));
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(ConninfoError::MissingEquals(key));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    None => return Err(ConninfoError::Unterminated(key)),
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

/// The URI form after its scheme, split as libpq's `conninfo_uri_parse_options` does:
/// `[user[:password]@][host][:port][,host[:port]...][/dbname][?key=value&...]`, every part
/// percent-decoded, an IPv6 address in brackets, `ssl=true` read as `sslmode=require` (JDBC's
/// spelling, which libpq accepts too).
fn uri_pairs(body: &str) -> Result<Pairs, ConninfoError> {
    let mut pairs = Vec::new();
    // libpq looks for the user designator up to the first '/' only.
    let mut rest = body;
    let credentials_end = body.find(['@', '/']);
    if let Some(at) = credentials_end.filter(|i| body.as_bytes()[*i] == b'@') {
        let credentials = &body[..at];
        rest = &body[at + 1..];
        let (user, password) = match credentials.split_once(':') {
            Some((user, password)) => (user, Some(password)),
            None => (credentials, None),
        };
        if !user.is_empty() {
            pairs.push(("user".to_owned(), decode(user, "user")?));
        }
        if let Some(password) = password.filter(|p| !p.is_empty()) {
            pairs.push(("password".to_owned(), decode(password, "password")?));
        }
    }
    let (mut hosts, mut ports) = (String::new(), String::new());
    let mut terminator;
    loop {
        let host;
        if let Some(after) = rest.strip_prefix('[') {
            let close = after
                .find(']')
                .filter(|i| *i > 0)
                .ok_or(ConninfoError::Ipv6)?;
            host = &after[..close];
            rest = &after[close + 1..];
            if !rest.is_empty() && !rest.starts_with([':', '/', '?', ',']) {
                return Err(ConninfoError::Ipv6);
            }
        } else {
            let end = rest.find([':', '/', '?', ',']).unwrap_or(rest.len());
            host = &rest[..end];
            rest = &rest[end..];
        }
        hosts.push_str(host);
        terminator = rest.chars().next();
        if terminator == Some(':') {
            let after = &rest[1..];
            let end = after.find(['/', '?', ',']).unwrap_or(after.len());
            ports.push_str(&after[..end]);
            rest = &after[end..];
            terminator = rest.chars().next();
        }
        if terminator != Some(',') {
            break;
        }
        rest = &rest[1..];
        hosts.push(',');
        ports.push(',');
    }
    if !hosts.is_empty() {
        pairs.push(("host".to_owned(), decode(&hosts, "host")?));
    }
    if !ports.is_empty() {
        pairs.push(("port".to_owned(), decode(&ports, "port")?));
    }
    if terminator == Some('/') {
        let after = &rest[1..];
        let end = after.find('?').unwrap_or(after.len());
        if end > 0 {
            pairs.push(("dbname".to_owned(), decode(&after[..end], "dbname")?));
        }
        rest = &after[end..];
        terminator = rest.chars().next();
    }
    if terminator == Some('?') {
        let parameters: Vec<&str> = rest[1..].split('&').collect();
        for (i, parameter) in parameters.iter().enumerate() {
            // libpq allows one trailing '&' (and a bare '?'), no other empty parameter.
            if parameter.is_empty() && i + 1 == parameters.len() {
                break;
            }
            let mut parts = parameter.split('=');
            let (Some(key), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
                let shown = parameter.split('=').next().unwrap_or_default();
                return Err(ConninfoError::QueryParameter(shown.to_owned()));
            };
            let key = decode(key, "query parameter name")?;
            let value = decode(value, &format!("value of {key}"))?;
            if key == "ssl" && value == "true" {
                pairs.push(("sslmode".to_owned(), "require".to_owned()));
            } else {
                pairs.push((key, value));
            }
        }
    }
    Ok(Pairs(pairs))
}

/// libpq's percent-decoding: `%XX` with two hex digits, `%00` refused, `+` left alone.
fn decode(text: &str, part: &str) -> Result<String, ConninfoError> {
    let bad = || ConninfoError::PercentEncoding(part.to_owned());
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err(bad());
            }
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            let byte = u8::from_str_radix(hex, 16).map_err(|_| bad())?;
            if byte == 0 {
                return Err(bad());
            }
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// `text` with `password` as its password, in libpq's key=value form (for tools that pass
/// connection strings around; the result holds the secret).
pub fn with_password(text: &str, password: &str) -> Result<String, ConninfoError> {
    let mut pairs = match uri_body(text) {
        Some(body) => uri_pairs(body)?,
        None => keyword_pairs(text)?,
    };
    pairs.0.push(("password".to_owned(), password.to_owned()));
    let rendered: Vec<String> = pairs
        .0
        .iter()
        .map(|(key, value)| format!("{key}={}", quote(value)))
        .collect();
    Ok(rendered.join(" "))
}

/// `value` single-quoted for a key=value connection string, as libpq and tokio-postgres read
/// it back.
pub fn quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        if c == '\'' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('\'');
    quoted
}

/// Sorts the pairs into the TLS settings and the client's configuration. An empty value counts
/// as not given.
fn from_pairs(pairs: Pairs) -> Result<Conninfo, ConninfoError> {
    let mut tls = TlsSettings::default();
    let mut client_text = String::new();
    let mut password = None;
    for (key, value) in pairs.0 {
        if value.is_empty() {
            continue;
        }
        match key.as_str() {
            "sslmode" => tls.mode = Some(sslmode(&value)?),
            "sslrootcert" if value == "system" => tls.root_cert = Some(RootCert::System),
            "sslrootcert" => tls.root_cert = Some(RootCert::File(PathBuf::from(value))),
            "sslcert" => tls.cert = Some(PathBuf::from(value)),
            "sslkey" => tls.key = Some(PathBuf::from(value)),
            "sslpassword" => tls.key_password = Some(value.into()),
            "sslsni" => tls.sni = flag("sslsni", &value)?,
            "sslnegotiation" => tls.direct = negotiation(&value)?,
            "password" => password = Some(value),
            key if CLIENT_KEYS.contains(&key) => {
                // libpq's name; tokio-postgres calls it keepalives_retries.
                let key = if key == "keepalives_count" {
                    "keepalives_retries"
                } else {
                    key
                };
                client_text.push_str(key);
                client_text.push('=');
                client_text.push_str(&quote(&value));
                client_text.push(' ');
            }
            key if UNSUPPORTED_KEYS.contains(&key) => {
                return Err(ConninfoError::Unsupported(key.to_owned()));
            }
            _ => return Err(ConninfoError::Unknown(key)),
        }
    }
    let mut client: tokio_postgres::Config = client_text.parse().map_err(ConninfoError::Client)?;
    if let Some(password) = password {
        client.password(password);
    }
    Ok(Conninfo { client, tls })
}

fn sslmode(value: &str) -> Result<SslMode, ConninfoError> {
    Ok(match value {
        "disable" => SslMode::Disable,
        "allow" => SslMode::Allow,
        "prefer" => SslMode::Prefer,
        "require" => SslMode::Require,
        "verify-ca" => SslMode::VerifyCa,
        "verify-full" => SslMode::VerifyFull,
        _ => {
            return Err(ConninfoError::Invalid {
                key: "sslmode",
                value: value.to_owned(),
                allowed: SSLMODES,
            });
        }
    })
}

fn flag(key: &'static str, value: &str) -> Result<bool, ConninfoError> {
    match value {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(ConninfoError::Invalid {
            key,
            value: value.to_owned(),
            allowed: "0, 1",
        }),
    }
}

/// `true`: TLS right away, without asking first (`sslnegotiation=direct`).
fn negotiation(value: &str) -> Result<bool, ConninfoError> {
    match value {
        "postgres" => Ok(false),
        "direct" => Ok(true),
        _ => Err(ConninfoError::Invalid {
            key: "sslnegotiation",
            value: value.to_owned(),
            allowed: "postgres, direct",
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;
    use tokio_postgres::config::Host;

    use super::*;

    fn read(text: &str) -> Conninfo {
        parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn error(text: &str) -> String {
        match parse(text) {
            Ok(parsed) => panic!("{text} was accepted: {parsed:?}"),
            Err(e) => crate::error_text::chain(&e),
        }
    }

    fn hosts(conninfo: &Conninfo) -> Vec<String> {
        conninfo
            .client
            .get_hosts()
            .iter()
            .map(|h| match h {
                Host::Tcp(name) => name.clone(),
                Host::Unix(path) => path.display().to_string(),
            })
            .collect()
    }

    #[test]
    fn a_uri_gives_user_password_hosts_ports_database_and_the_tls_keys() {
        let parsed = read(
            "postgres://history:s%3Acr%40t@db.example.com:6432/history?sslmode=verify-full\
             &sslrootcert=/etc/ca.crt&sslcert=/c.crt&sslkey=/c.key&application_name=hc",
        );
        let client = &parsed.client;
        assert_eq!(client.get_user(), Some("history"));
        assert_eq!(client.get_password(), Some(&b"s:cr@t"[..]));
        assert_eq!(hosts(&parsed), ["db.example.com"]);
        assert_eq!(client.get_ports(), [6432]);
        assert_eq!(client.get_dbname(), Some("history"));
        assert_eq!(client.get_application_name(), Some("hc"));
        let tls = &parsed.tls;
        assert_eq!(tls.mode, Some(SslMode::VerifyFull));
        assert_eq!(tls.root_cert, Some(RootCert::File("/etc/ca.crt".into())));
        assert_eq!(tls.cert.as_deref(), Some(Path::new("/c.crt")));
        assert_eq!(tls.key.as_deref(), Some(Path::new("/c.key")));
        assert!(parsed.has_password());
    }

    #[test]
    fn the_key_value_form_gives_the_same_with_libpqs_quoting() {
        let parsed = read(
            "host=db.example.com port = 6432 dbname='my history' user=history \
             password='it\\'s \\\\ secret' sslmode=verify-ca sslrootcert=/etc/ca\\ dir/ca.crt",
        );
        let client = &parsed.client;
        assert_eq!(hosts(&parsed), ["db.example.com"]);
        assert_eq!(client.get_ports(), [6432]);
        assert_eq!(client.get_dbname(), Some("my history"));
        assert_eq!(client.get_password(), Some(&b"it's \\ secret"[..]));
        assert_eq!(parsed.tls.mode, Some(SslMode::VerifyCa));
        assert_eq!(
            parsed.tls.root_cert,
            Some(RootCert::File("/etc/ca dir/ca.crt".into()))
        );
    }

    #[test]
    fn every_sslmode_of_libpq_is_read_in_both_forms() {
        for (text, mode) in [
            ("disable", SslMode::Disable),
            ("allow", SslMode::Allow),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            let uri = read(&format!("postgresql://h/db?sslmode={text}"));
            let keywords = read(&format!("host=h dbname=db sslmode={text}"));
            assert_eq!(uri.tls.mode, Some(mode), "{text}");
            assert_eq!(keywords.tls.mode, Some(mode), "{text}");
            assert_eq!(mode.to_string(), text);
        }
        assert_eq!(read("postgres://h/db").tls.mode, None);
        assert_eq!(
            read("postgres://h/db?ssl=true").tls.mode,
            Some(SslMode::Require)
        );
    }

    #[test]
    fn the_system_trust_store_is_the_value_system() {
        let parsed = read("host=h sslrootcert=system");
        assert_eq!(parsed.tls.root_cert, Some(RootCert::System));
    }

    #[test]
    fn several_hosts_ipv6_and_socket_directories_are_read_as_libpq_does() {
        let parsed = read("postgres://u@a:1,[::1]:2,b/db");
        assert_eq!(hosts(&parsed), ["a", "::1", "b"]);
        assert_eq!(parsed.client.get_ports(), [1, 2, 5432]);
        let socket = read("postgresql://%2Fvar%2Frun%2Fpostgresql/db");
        assert_eq!(hosts(&socket), ["/var/run/postgresql"]);
        assert!(socket.only_unix_sockets());
        assert!(!parsed.only_unix_sockets());
    }

    #[test]
    fn the_libpq_spelling_keepalives_count_reaches_tokio_postgres() {
        let parsed = read("host=h keepalives_count=7 connect_timeout=3");
        assert_eq!(parsed.client.get_keepalives_retries(), Some(7));
        assert_eq!(
            parsed.client.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
    }

    #[test]
    fn an_unknown_sslmode_is_refused_naming_the_key_and_the_choices() {
        let text = error("postgres://h/db?sslmode=verify-everything");
        assert_eq!(
            text,
            "sslmode=verify-everything is not one of disable, allow, prefer, require, \
             verify-ca, verify-full"
        );
        assert!(error("host=h sslmode=verify-everything").starts_with("sslmode="));
        assert!(error("host=h sslnegotiation=maybe").starts_with("sslnegotiation="));
        assert!(error("host=h sslsni=yes").starts_with("sslsni="));
    }

    #[test]
    fn other_mistakes_name_the_key_and_never_the_password() {
        let cases = [
            ("host=h sslcrl=/x.crl", "sslcrl is a libpq setting"),
            (
                "host=h colour=blue",
                "colour is not a libpq connection setting",
            ),
            ("postgres://h/db?hots=x", "hots is not a libpq"),
            ("host=h dbname", "missing \"=\" after \"dbname\""),
            ("host=h password='hunter2", "the quoted value of password"),
            (
                "postgres://u:hunter2%zz@h/db",
                "the URI's password is not valid",
            ),
            ("postgres://h/db?sslmode", "query parameter \"sslmode\""),
            ("postgres://h/db?a=b=c", "query parameter \"a\""),
            ("postgres://[::1/db", "IPv6"),
            (
                "postgres://h:notaport/db",
                "invalid value for option `port`",
            ),
        ];
        for (text, expected) in cases {
            let message = error(text);
            assert!(message.contains(expected), "{text}: {message}");
            assert!(!message.contains("hunter2"), "{text}: {message}");
        }
    }

    #[test]
    fn a_password_never_shows_in_debug_output() {
        let parsed = read("postgres://u:hunter2@h/db?sslpassword=swordfish");
        let shown = format!("{parsed:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("swordfish"),
            "{shown}"
        );
        let pairs = keyword_pairs("password=hunter2").unwrap();
        assert!(!format!("{pairs:?}").contains("hunter2"));
    }

    #[test]
    fn empty_values_count_as_not_given() {
        let parsed = read("postgres://u:@h/db?sslmode=&sslrootcert=");
        assert!(!parsed.has_password());
        assert_eq!(parsed.tls.mode, None);
        assert_eq!(parsed.tls.root_cert, None);
    }

    #[test]
    fn a_password_joins_either_form_as_a_key_value_string() {
        let joined = with_password("postgres://u@h:5/db?sslmode=require", "it's").unwrap();
        let parsed = read(&joined);
        assert_eq!(parsed.client.get_password(), Some(&b"it's"[..]));
        assert_eq!(parsed.client.get_user(), Some("u"));
        assert_eq!(parsed.client.get_ports(), [5]);
        assert_eq!(parsed.tls.mode, Some(SslMode::Require));
        let joined = with_password("host=h dbname=db", "pw").unwrap();
        assert_eq!(read(&joined).client.get_password(), Some(&b"pw"[..]));
    }

    proptest! {
        #[test]
        fn a_quoted_value_reads_back_as_itself(value in "\\PC{1,40}") {
            let text = format!("application_name={}", quote(&value));
            let ours = keyword_pairs(&text).unwrap();
            prop_assert_eq!(&ours.0[0].1, &value);
            let theirs: tokio_postgres::Config = text.parse().unwrap();
            prop_assert_eq!(theirs.get_application_name(), Some(value.as_str()));
        }

        #[test]
        fn percent_encoding_every_byte_reads_back_as_the_text(value in "\\PC{1,40}") {
            let encoded: String = value.bytes().map(|b| format!("%{b:02X}")).collect();
            let parsed = read(&format!("postgres://u:{encoded}@h/db"));
            prop_assert_eq!(parsed.client.get_password(), Some(value.as_bytes()));
        }
    }
}
