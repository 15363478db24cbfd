//! The admin surface's settings: where it listens, the token and how it is given, whether reading
//! needs a sign-in, the session cookie, and the admin pages' own database pool. The flags are
//! flattened into `run`'s; each check names the key to fix.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::members::{MemberSettings, MembersArgs};
use super::{ConfigError, Secret, defaults, key, parse_duration, parse_secret};

/// Characters an admin token has at least.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The admin flags of `run`.
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// Address of the admin UI and its JSON API (and of /metrics and the health endpoints
    /// unless --metrics-addr moves them).
    #[arg(long = key::ADMIN_ADDR.long, env = key::ADMIN_ADDR.env,
          default_value = defaults::ADMIN_ADDR)]
    pub admin_addr: SocketAddr,
    /// Address of /metrics, /healthz and /readyz, so that Prometheus can scrape while the admin
    /// UI stays private. Default: the admin address.
    #[arg(long = key::METRICS_ADDR.long, env = key::METRICS_ADDR.env)]
    pub metrics_addr: Option<SocketAddr>,
    /// Token that unlocks admin actions (at least 16 characters); without one the admin UI is
    /// read-only. Prefer the environment variable or --admin-token-file: a flag is visible to
    /// every local user in /proc/<pid>/cmdline.
    #[arg(long = key::ADMIN_TOKEN.long, env = key::ADMIN_TOKEN.env, hide_env_values = true,
          value_parser = parse_secret)]
    pub admin_token: Option<Secret>,
    /// A file holding the admin token (a trailing newline is ignored), e.g. a mounted secret.
    #[arg(long = key::ADMIN_TOKEN_FILE.long, env = key::ADMIN_TOKEN_FILE.env,
          value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,
    /// Require a sign-in (or the bearer token) for reading the pages and the JSON API too, not
    /// only for acting; /metrics, /healthz and /readyz stay open. Needs a token.
    #[arg(long = key::ADMIN_READ_AUTH.long, env = key::ADMIN_READ_AUTH.env)]
    pub admin_read_auth: bool,
    /// Mark the session cookie `Secure` (with the `__Host-` prefix): only for an admin UI served
    /// over HTTPS, e.g. behind a TLS-terminating proxy. Implied by --admin-tls-cert.
    #[arg(long = key::ADMIN_SECURE_COOKIE.long, env = key::ADMIN_SECURE_COOKIE.env)]
    pub admin_secure_cookie: bool,
    /// Serve the admin UI, and /metrics with the health endpoints (on --metrics-addr too), over
    /// HTTPS with this certificate chain: a PEM file, the server's certificate first. Needs
    /// --admin-tls-key.
    #[arg(long = key::ADMIN_TLS_CERT.long, env = key::ADMIN_TLS_CERT.env, value_name = "PATH")]
    pub admin_tls_cert: Option<PathBuf>,
    /// The private key of --admin-tls-cert: an unencrypted PEM file.
    #[arg(long = key::ADMIN_TLS_KEY.long, env = key::ADMIN_TLS_KEY.env, value_name = "PATH")]
    pub admin_tls_key: Option<PathBuf>,
    /// A session not used for this long ends.
    #[arg(long = key::ADMIN_SESSION_IDLE.long, env = key::ADMIN_SESSION_IDLE.env,
          default_value = defaults::ADMIN_SESSION_IDLE, value_parser = parse_duration)]
    pub admin_session_idle: Duration,
    /// A session ends this long after sign-in, used or not.
    #[arg(long = key::ADMIN_SESSION_MAX.long, env = key::ADMIN_SESSION_MAX.env,
          default_value = defaults::ADMIN_SESSION_MAX, value_parser = parse_duration)]
    pub admin_session_max: Duration,
    /// PostgreSQL connections of the admin pages (apart from the consumer's --db-pool-size).
    #[arg(long = key::ADMIN_DB_POOL_SIZE.long, env = key::ADMIN_DB_POOL_SIZE.env,
          default_value_t = defaults::ADMIN_DB_POOL_SIZE)]
    pub admin_db_pool_size: usize,
    /// Longest an admin page's query may run (PostgreSQL statement_timeout).
    #[arg(long = key::ADMIN_STATEMENT_TIMEOUT.long, env = key::ADMIN_STATEMENT_TIMEOUT.env,
          default_value = defaults::ADMIN_STATEMENT_TIMEOUT, value_parser = parse_duration)]
    pub admin_statement_timeout: Duration,
    /// Page loads per second of readers who did not sign in, over all addresses (twice that at
    /// once; half of it per address); beyond, 429. 0: no limit.
    #[arg(long = key::ADMIN_ANONYMOUS_READS_PER_SEC.long,
          env = key::ADMIN_ANONYMOUS_READS_PER_SEC.env,
          default_value_t = defaults::ADMIN_ANONYMOUS_READS_PER_SEC)]
    pub admin_anonymous_reads_per_sec: u32,
    #[command(flatten)]
    pub members: MembersArgs,
}

/// The certificate chain and private key files of the admin listeners, both given. They are read
/// and checked as the service starts ([`crate::admin::tls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The admin surface, checked.
#[derive(Debug, Clone)]
pub struct AdminSettings {
    pub addr: SocketAddr,
    /// `None`: /metrics and the health endpoints are served on `addr`.
    pub metrics_addr: Option<SocketAddr>,
    pub token: Option<Secret>,
    pub read_auth: bool,
    pub secure_cookie: bool,
    /// `None`: plain HTTP.
    pub tls: Option<TlsFiles>,
    pub session_idle: Duration,
    pub session_max: Duration,
    pub db_pool_size: usize,
    pub statement_timeout: Duration,
    /// 0: no limit.
    pub anonymous_reads_per_sec: u32,
    /// How the members of the group see one another, and this member's public admin URL.
    pub members: MemberSettings,
}

impl Default for AdminSettings {
    /// What `run` uses when no admin flag is given ([`defaults`]).
    fn default() -> Self {
        AdminSettings {
            addr: defaults::ADMIN_ADDR
                .parse()
                .expect("the default admin address parses"),
            metrics_addr: None,
            token: None,
            read_auth: false,
            secure_cookie: false,
            tls: None,
            session_idle: defaults::duration(defaults::ADMIN_SESSION_IDLE),
            session_max: defaults::duration(defaults::ADMIN_SESSION_MAX),
            db_pool_size: defaults::ADMIN_DB_POOL_SIZE,
            statement_timeout: defaults::duration(defaults::ADMIN_STATEMENT_TIMEOUT),
            anonymous_reads_per_sec: defaults::ADMIN_ANONYMOUS_READS_PER_SEC,
            members: MemberSettings::default(),
        }
    }
}

impl AdminSettings {
    /// Reads the token file, if one is named, and checks the result.
    pub fn from_args(args: AdminArgs) -> Result<AdminSettings, ConfigError> {
        let token = match (&args.admin_token, &args.admin_token_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    format!("{} and {}", key::ADMIN_TOKEN, key::ADMIN_TOKEN_FILE),
                    "give the token one way only",
                ));
            }
            (_, Some(path)) => Some(read_token_file(path)?),
            (token, None) => token.clone(),
        };
        if token.is_some()
            && args.admin_token_file.is_none()
            && super::secret::given_on_command_line(key::ADMIN_TOKEN)
        {
            tracing::warn!(
                "the admin token was given as a command-line flag, which every local user can \
                 read in /proc; use {} or {} instead",
                key::ADMIN_TOKEN.env,
                key::ADMIN_TOKEN_FILE
            );
        }
        let tls = tls_files(args.admin_tls_cert.clone(), args.admin_tls_key.clone())?;
        let settings = AdminSettings {
            addr: args.admin_addr,
            metrics_addr: args.metrics_addr,
            token,
            read_auth: args.admin_read_auth,
            secure_cookie: args.admin_secure_cookie,
            tls,
            session_idle: args.admin_session_idle,
            session_max: args.admin_session_max,
            db_pool_size: args.admin_db_pool_size,
            statement_timeout: args.admin_statement_timeout,
            anonymous_reads_per_sec: args.admin_anonymous_reads_per_sec,
            members: MemberSettings::from_args(args.members)?,
        };
        settings.validate()?;
        Ok(settings)
    }

    /// The metrics listener's address when it is not the admin listener's (port 0 always is:
    /// it asks for a port of its own).
    pub fn separate_metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
            .filter(|addr| *addr != self.addr || addr.port() == 0)
    }

    /// Whether the session cookie is `Secure`: asked for, or the admin is served over HTTPS
    /// (where a cookie without it would be needlessly sent over plain HTTP to the same host).
    pub fn cookie_secure(&self) -> bool {
        self.secure_cookie || self.tls.is_some()
    }

    /// Checks that name the key to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(token) = &self.token {
            check_token(token.expose())
                .map_err(|message| ConfigError::at(key::ADMIN_TOKEN, message))?;
        }
        if self.read_auth && self.token.is_none() {
            return Err(ConfigError::at(
                key::ADMIN_READ_AUTH,
                format!(
                    "needs {} or {}: nobody could sign in to read",
                    key::ADMIN_TOKEN,
                    key::ADMIN_TOKEN_FILE
                ),
            ));
        }
        if self.session_idle.is_zero() {
            return Err(ConfigError::at(
                key::ADMIN_SESSION_IDLE,
                "must be longer than zero",
            ));
        }
        if self.session_max < self.session_idle {
            return Err(ConfigError::at(
                key::ADMIN_SESSION_MAX,
                format!(
                    "{} is shorter than the idle limit ({})",
                    humantime::format_duration(self.session_max),
                    humantime::format_duration(self.session_idle)
                ),
            ));
        }
        if self.db_pool_size == 0 {
            return Err(ConfigError::at(
                key::ADMIN_DB_POOL_SIZE,
                "must be at least 1",
            ));
        }
        if self.statement_timeout < Duration::from_millis(10) {
            return Err(ConfigError::at(
                key::ADMIN_STATEMENT_TIMEOUT,
                "must be at least 10ms",
            ));
        }
        self.members.validate()
    }
}

/// Both TLS files or neither; with one, the error names the missing one.
fn tls_files(
    cert_path: Option<PathBuf>,
    key_path: Option<PathBuf>,
) -> Result<Option<TlsFiles>, ConfigError> {
    match (cert_path, key_path) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
        (None, None) => Ok(None),
        (Some(_), None) => Err(ConfigError::at(
            key::ADMIN_TLS_KEY,
            format!("missing: {} needs its private key", key::ADMIN_TLS_CERT),
        )),
        (None, Some(_)) => Err(ConfigError::at(
            key::ADMIN_TLS_CERT,
            format!("missing: {} needs its certificate", key::ADMIN_TLS_KEY),
        )),
    }
}

/// What a token must look like; the message says what is wrong.
fn check_token(token: &str) -> Result<(), String> {
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(format!("must be at least {MIN_TOKEN_CHARS} characters"));
    }
    if token.chars().any(|c| c.is_control() || c.is_whitespace()) {
        // A header value or a form field would not carry it intact.
        return Err("must not contain spaces or control characters".into());
    }
    Ok(())
}

fn read_token_file(path: &std::path::Path) -> Result<Secret, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        ConfigError::at(
            key::ADMIN_TOKEN_FILE,
            format!("cannot read {}: {error}", path.display()),
        )
    })?;
    let token = text.trim_end_matches(['\n', '\r']);
    check_token(token).map_err(|message| {
        ConfigError::at(
            key::ADMIN_TOKEN_FILE,
            format!("the token in {}: {message}", path.display()),
        )
    })?;
    Ok(Secret::new(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_shows_in_debug_output() {
        let settings = AdminSettings {
            token: Some(Secret::new("very-secret-admin-token")),
            ..AdminSettings::default()
        };
        let shown = format!("{settings:?}");
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }

    #[test]
    fn tokens_are_long_and_plain() {
        assert!(check_token("0123456789abcdef").is_ok());
        assert!(check_token("0123456789abcde").is_err());
        assert!(check_token("0123456789 abcdef").is_err());
        assert!(check_token("0123456789abcdef\t").is_err());
    }

    #[test]
    fn a_token_file_loses_its_trailing_newline() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, b"0123456789abcdef0123\n").unwrap();
        let token = read_token_file(file.path()).unwrap();
        assert_eq!(token.expose(), "0123456789abcdef0123");
        let missing = read_token_file(std::path::Path::new("/nonexistent/token")).unwrap_err();
        assert!(missing.key.contains("--admin-token-file"), "{missing}");
    }

    #[derive(Debug, clap::Parser)]
    struct AdminCommand {
        #[command(flatten)]
        admin: AdminArgs,
    }

    fn admin_args(extra: &[&str]) -> Result<AdminSettings, ConfigError> {
        let argv = std::iter::once("admin").chain(extra.iter().copied());
        let parsed = <AdminCommand as clap::Parser>::try_parse_from(argv).expect("flags parse");
        AdminSettings::from_args(parsed.admin)
    }

    #[test]
    fn tls_needs_both_files_and_names_the_missing_one() {
        let none = admin_args(&[]).unwrap();
        assert_eq!(none.tls, None);
        assert!(!none.cookie_secure());
        let both = admin_args(&["--admin-tls-cert", "a.crt", "--admin-tls-key", "a.key"]).unwrap();
        assert_eq!(
            both.tls,
            Some(TlsFiles {
                cert: "a.crt".into(),
                key: "a.key".into()
            })
        );
        assert!(both.cookie_secure(), "https makes the cookie Secure");
        let no_key = admin_args(&["--admin-tls-cert", "a.crt"]).unwrap_err();
        assert_eq!(no_key.key, key::ADMIN_TLS_KEY.to_string(), "{no_key}");
        let no_cert = admin_args(&["--admin-tls-key", "a.key"]).unwrap_err();
        assert_eq!(no_cert.key, key::ADMIN_TLS_CERT.to_string(), "{no_cert}");
    }

    #[test]
    fn metrics_on_the_admin_address_are_not_a_second_listener() {
        let mut settings = AdminSettings {
            metrics_addr: Some(([127, 0, 0, 1], 8080).into()),
            ..AdminSettings::default()
        };
        assert_eq!(settings.separate_metrics_addr(), None);
        settings.metrics_addr = Some(([0, 0, 0, 0], 9100).into());
        assert_eq!(
            settings.separate_metrics_addr(),
            Some(([0, 0, 0, 0], 9100).into())
        );
        settings.addr = ([127, 0, 0, 1], 0).into();
        settings.metrics_addr = Some(settings.addr);
        assert_eq!(settings.separate_metrics_addr(), Some(settings.addr));
    }
}
