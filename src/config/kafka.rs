//! How to reach the Kafka cluster — the brokers, TLS, SASL, a librdkafka properties file and
//! `--kafka-option`s — as one set of flags shared by `run`, `verify`, `rewind` and `produce`,
//! and the checked librdkafka properties they give.
//!
//! Precedence, lowest first: the properties file (`--kafka-config-file`, the `client.properties`
//! users already have), the first-class flags (`--kafka-security-protocol`, ...), then each
//! `--kafka-option`. Secrets (passwords, client secrets, key passphrases) are read from files or
//! the environment; one given as a flag works but warns, since every local user can read a
//! process's command line. [`KafkaProperties`] never shows a secret's value.

use std::fmt;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaConfRes;

use super::secret::given_on_command_line;
use super::{ConfigError, Key, Secret, defaults, key, parse_kafka_option, parse_secret};

/// `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    fn property(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "plaintext",
            SecurityProtocol::Ssl => "ssl",
            SecurityProtocol::SaslPlaintext => "sasl_plaintext",
            SecurityProtocol::SaslSsl => "sasl_ssl",
        }
    }
}

/// `sasl.mechanism`. Kerberos (GSSAPI) is not built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SaslMechanism {
    #[value(name = "PLAIN")]
    Plain,
    #[value(name = "SCRAM-SHA-256")]
    ScramSha256,
    #[value(name = "SCRAM-SHA-512")]
    ScramSha512,
    #[value(name = "OAUTHBEARER")]
    OauthBearer,
}

impl SaslMechanism {
    fn property(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OauthBearer => "OAUTHBEARER",
        }
    }
}

/// Where the Kafka cluster is and how to authenticate to it.
#[derive(Debug, Clone, Default, Args)]
pub struct KafkaConnectionArgs {
    /// Kafka bootstrap servers, comma separated [default: bootstrap.servers of
    /// --kafka-config-file, else localhost:9092].
    #[arg(long = key::BROKERS.long, env = key::BROKERS.env)]
    pub brokers: Option<String>,
    /// A librdkafka properties file (`key=value` lines, e.g. the client.properties a Kafka
    /// provider gives), applied first: the flags below and --kafka-option win over it.
    #[arg(long = key::KAFKA_CONFIG_FILE.long, env = key::KAFKA_CONFIG_FILE.env,
          value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    /// `security.protocol`: plaintext, ssl, sasl_plaintext or sasl_ssl.
    #[arg(long = key::KAFKA_SECURITY_PROTOCOL.long, env = key::KAFKA_SECURITY_PROTOCOL.env,
          value_enum, ignore_case = true)]
    pub security_protocol: Option<SecurityProtocol>,
    /// `sasl.mechanism`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (Kerberos is not
    /// built in).
    #[arg(long = key::KAFKA_SASL_MECHANISM.long, env = key::KAFKA_SASL_MECHANISM.env,
          value_enum, ignore_case = true)]
    pub sasl_mechanism: Option<SaslMechanism>,
    /// `sasl.username` (for PLAIN and SCRAM; an API key on Confluent Cloud).
    #[arg(long = key::KAFKA_SASL_USERNAME.long, env = key::KAFKA_SASL_USERNAME.env)]
    pub sasl_username: Option<String>,
    /// `sasl.password`. Prefer the environment variable or --kafka-sasl-password-file: a flag
    /// is visible to every local user.
    #[arg(long = key::KAFKA_SASL_PASSWORD.long, env = key::KAFKA_SASL_PASSWORD.env,
          hide_env_values = true, value_parser = parse_secret)]
    pub sasl_password: Option<Secret>,
    /// A file holding `sasl.password` (a trailing newline is ignored), e.g. a mounted secret.
    #[arg(long = key::KAFKA_SASL_PASSWORD_FILE.long, env = key::KAFKA_SASL_PASSWORD_FILE.env,
          value_name = "FILE")]
    pub sasl_password_file: Option<PathBuf>,
    /// PEM file of the certificate authorities that sign the brokers' certificates
    /// (`ssl.ca.location`); without it, the system's trust store.
    #[arg(long = key::KAFKA_SSL_CA_FILE.long, env = key::KAFKA_SSL_CA_FILE.env,
          value_name = "FILE")]
    pub ssl_ca_file: Option<PathBuf>,
    /// PEM file of this client's certificate, for mutual TLS (`ssl.certificate.location`).
    #[arg(long = key::KAFKA_SSL_CERT_FILE.long, env = key::KAFKA_SSL_CERT_FILE.env,
          value_name = "FILE")]
    pub ssl_cert_file: Option<PathBuf>,
    /// PEM file of this client's private key, for mutual TLS (`ssl.key.location`).
    #[arg(long = key::KAFKA_SSL_KEY_FILE.long, env = key::KAFKA_SSL_KEY_FILE.env,
          value_name = "FILE")]
    pub ssl_key_file: Option<PathBuf>,
    /// A file holding the passphrase of an encrypted --kafka-ssl-key-file (`ssl.key.password`).
    #[arg(long = key::KAFKA_SSL_KEY_PASSWORD_FILE.long,
          env = key::KAFKA_SSL_KEY_PASSWORD_FILE.env, value_name = "FILE")]
    pub ssl_key_password_file: Option<PathBuf>,
    /// OAUTHBEARER with OIDC client credentials: the token endpoint
    /// (`sasl.oauthbearer.token.endpoint.url`; sets `sasl.oauthbearer.method=oidc`).
    #[arg(long = key::KAFKA_OAUTH_TOKEN_URL.long, env = key::KAFKA_OAUTH_TOKEN_URL.env,
          value_name = "URL")]
    pub oauth_token_url: Option<String>,
    /// The OIDC client id (`sasl.oauthbearer.client.id`).
    #[arg(long = key::KAFKA_OAUTH_CLIENT_ID.long, env = key::KAFKA_OAUTH_CLIENT_ID.env)]
    pub oauth_client_id: Option<String>,
    /// The OIDC client secret (`sasl.oauthbearer.client.secret`). Prefer the environment
    /// variable or --kafka-oauth-client-secret-file.
    #[arg(long = key::KAFKA_OAUTH_CLIENT_SECRET.long, env = key::KAFKA_OAUTH_CLIENT_SECRET.env,
          hide_env_values = true, value_parser = parse_secret)]
    pub oauth_client_secret: Option<Secret>,
    /// A file holding the OIDC client secret.
    #[arg(long = key::KAFKA_OAUTH_CLIENT_SECRET_FILE.long,
          env = key::KAFKA_OAUTH_CLIENT_SECRET_FILE.env, value_name = "FILE")]
    pub oauth_client_secret_file: Option<PathBuf>,
    /// The OIDC scope to ask for (`sasl.oauthbearer.scope`).
    #[arg(long = key::KAFKA_OAUTH_SCOPE.long, env = key::KAFKA_OAUTH_SCOPE.env)]
    pub oauth_scope: Option<String>,
    /// A librdkafka property as key=value (repeatable), applied last, e.g.
    /// `session.timeout.ms=10000`.
    #[arg(long = "kafka-option", value_name = "KEY=VALUE", value_parser = parse_kafka_option)]
    pub kafka_options: Vec<(String, String)>,
}

/// librdkafka properties, in the order they are applied (a later one wins). `Debug` shows every
/// key but never the value of a secret one ([`is_secret_property`]).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KafkaProperties(Vec<(String, String)>);

impl KafkaProperties {
    pub fn new() -> KafkaProperties {
        KafkaProperties::default()
    }

    /// Adds `key = value` over whatever was set before.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.0.push((key.into(), value.into()));
        self
    }

    /// The value in effect for `key`: the last one set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every property in the order it is applied.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Sets every property on a librdkafka configuration, in order.
    pub fn apply_to(&self, config: &mut rdkafka::ClientConfig) {
        for (key, value) in self.iter() {
            config.set(key, value);
        }
    }

    /// The SASL mechanism and user name in effect, for messages about a failed sign-in.
    pub fn sasl_identity(&self) -> Option<(String, Option<String>)> {
        let protocol = self.get("security.protocol")?.to_ascii_lowercase();
        if !protocol.starts_with("sasl") {
            return None;
        }
        let mechanism = self.get("sasl.mechanism").unwrap_or("GSSAPI").to_owned();
        let user = match mechanism.to_ascii_uppercase().as_str() {
            "OAUTHBEARER" => self.get("sasl.oauthbearer.client.id"),
            _ => self.get("sasl.username"),
        };
        Some((mechanism, user.map(str::to_owned)))
    }
}

impl From<Vec<(String, String)>> for KafkaProperties {
    fn from(pairs: Vec<(String, String)>) -> KafkaProperties {
        KafkaProperties(pairs)
    }
}

impl fmt::Debug for KafkaProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (key, value) in self.iter() {
            if is_secret_property(key) {
                map.entry(&key, &"[redacted]");
            } else {
                map.entry(&key, &value);
            }
        }
        map.finish()
    }
}

/// Whether a librdkafka (or Java client) property holds a secret: its value is never shown.
pub fn is_secret_property(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "jaas",
        "oauthbearer.config",
        "ssl.key.pem",
        "ssl_key",
    ]
    .iter()
    .any(|part| key.contains(part))
}

/// A property's value as messages may show it.
pub fn shown_value<'a>(key: &str, value: &'a str) -> &'a str {
    if is_secret_property(key) {
        "[redacted]"
    } else {
        value
    }
}

/// Properties the service sets itself: the group's offsets move only past resolved records,
/// and a position out of its partition's log is the service's to handle (`--offset-reset-policy`),
/// never librdkafka's silent `auto.offset.reset`.
pub const RESERVED_PROPERTIES: [&str; 5] = [
    "enable.auto.commit",
    "enable.auto.offset.store",
    "group.id",
    "bootstrap.servers",
    "auto.offset.reset",
];

/// The brokers and the properties that reach them, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaConnection {
    pub brokers: String,
    pub properties: KafkaProperties,
}

impl KafkaConnection {
    /// Plaintext to `brokers`, nothing else set (tests, the demo, the bench).
    pub fn plaintext(brokers: impl Into<String>) -> KafkaConnection {
        KafkaConnection {
            brokers: brokers.into(),
            properties: KafkaProperties::new(),
        }
    }
}

impl KafkaConnectionArgs {
    /// Reads the files, merges file, flags and options in their order and checks the result;
    /// every error names the key to fix.
    pub fn resolve(self) -> Result<KafkaConnection, ConfigError> {
        let mut properties = KafkaProperties::new();
        let mut file_brokers = None;
        if let Some(path) = &self.config_file {
            let text = read_file(path, key::KAFKA_CONFIG_FILE)?;
            let parsed = parse_properties(&text).map_err(|(line, message)| {
                ConfigError::at(
                    key::KAFKA_CONFIG_FILE,
                    format!("{} line {line}: {message}", path.display()),
                )
            })?;
            let from_file = from_java_client(parsed).map_err(|message| {
                ConfigError::at(
                    key::KAFKA_CONFIG_FILE,
                    format!("{}: {message}", path.display()),
                )
            })?;
            for (name, value) in from_file {
                match name.as_str() {
                    "bootstrap.servers" => file_brokers = Some(value),
                    name if RESERVED_PROPERTIES.contains(&name) => {
                        tracing::warn!(
                            file = %path.display(),
                            property = name,
                            "ignoring a property of the kafka config file that the service sets \
                             itself"
                        );
                    }
                    name => match known_to_librdkafka(name, &value) {
                        Known::Yes => {
                            properties.set(name, value);
                        }
                        Known::Unknown => tracing::warn!(
                            file = %path.display(),
                            property = name,
                            "ignoring a property of the kafka config file that librdkafka does \
                             not know (a Java client's setting?)"
                        ),
                        Known::Invalid(message) => {
                            return Err(ConfigError::at(
                                key::KAFKA_CONFIG_FILE,
                                format!(
                                    "{}: {name}={}: {message}",
                                    path.display(),
                                    shown_value(name, &value)
                                ),
                            ));
                        }
                    },
                }
            }
        }
        self.first_class(&mut properties)?;
        for (name, value) in &self.kafka_options {
            if RESERVED_PROPERTIES.contains(&name.as_str()) {
                return Err(ConfigError::new(
                    format!("--kafka-option {name}"),
                    "is set by the service itself (use --brokers/--group/--offset-reset-policy; \
                     offsets are committed only past resolved records)",
                ));
            }
            let refused = match known_to_librdkafka(name, value) {
                Known::Yes => None,
                Known::Unknown => Some("librdkafka has no such property".to_owned()),
                Known::Invalid(message) => Some(format!(
                    "{:?} rejected by librdkafka: {message}",
                    shown_value(name, value)
                )),
            };
            if let Some(message) = refused {
                return Err(ConfigError::new(format!("--kafka-option {name}"), message));
            }
            if is_secret_property(name) {
                tracing::warn!(
                    property = %name,
                    "a kafka secret was given with --kafka-option, which every local user can \
                     read; prefer the *_FILE settings or the environment"
                );
            }
            properties.set(name.clone(), value.clone());
        }
        let brokers = self
            .brokers
            .or(file_brokers)
            .unwrap_or_else(|| defaults::BROKERS.to_owned());
        super::not_empty(&brokers, key::BROKERS)?;
        check_security(&properties)?;
        Ok(KafkaConnection {
            brokers,
            properties,
        })
    }

    /// The first-class flags as properties, over the file's.
    fn first_class(&self, properties: &mut KafkaProperties) -> Result<(), ConfigError> {
        if let Some(protocol) = self.security_protocol {
            properties.set("security.protocol", protocol.property());
        }
        if let Some(mechanism) = self.sasl_mechanism {
            properties.set("sasl.mechanism", mechanism.property());
        }
        if let Some(user) = &self.sasl_username {
            properties.set("sasl.username", user);
        }
        if let Some(password) = secret_of(
            &self.sasl_password,
            &self.sasl_password_file,
            key::KAFKA_SASL_PASSWORD,
            key::KAFKA_SASL_PASSWORD_FILE,
        )? {
            properties.set("sasl.password", password.expose());
        }
        let files = [
            (&self.ssl_ca_file, key::KAFKA_SSL_CA_FILE, "ssl.ca.location"),
            (
                &self.ssl_cert_file,
                key::KAFKA_SSL_CERT_FILE,
                "ssl.certificate.location",
            ),
            (
                &self.ssl_key_file,
                key::KAFKA_SSL_KEY_FILE,
                "ssl.key.location",
            ),
        ];
        for (path, key, property) in files {
            if let Some(path) = path {
                readable(path, key)?;
                properties.set(property, path.display().to_string());
            }
        }
        if let Some(path) = &self.ssl_key_password_file {
            let passphrase = read_secret_file(path, key::KAFKA_SSL_KEY_PASSWORD_FILE)?;
            properties.set("ssl.key.password", passphrase.expose());
        }
        if let Some(url) = &self.oauth_token_url {
            properties
                .set("sasl.oauthbearer.method", "oidc")
                .set("sasl.oauthbearer.token.endpoint.url", url);
        }
        if let Some(id) = &self.oauth_client_id {
            properties.set("sasl.oauthbearer.client.id", id);
        }
        if let Some(secret) = secret_of(
            &self.oauth_client_secret,
            &self.oauth_client_secret_file,
            key::KAFKA_OAUTH_CLIENT_SECRET,
            key::KAFKA_OAUTH_CLIENT_SECRET_FILE,
        )? {
            properties.set("sasl.oauthbearer.client.secret", secret.expose());
        }
        if let Some(scope) = &self.oauth_scope {
            properties.set("sasl.oauthbearer.scope", scope);
        }
        Ok(())
    }
}

/// A secret given as a value or as a file, not both; a value on the command line warns.
fn secret_of(
    value: &Option<Secret>,
    file: &Option<PathBuf>,
    value_key: Key,
    file_key: Key,
) -> Result<Option<Secret>, ConfigError> {
    match (value, file) {
        (Some(_), Some(_)) => Err(ConfigError::at(
            value_key,
            format!("give it one way only: this or {file_key}"),
        )),
        (None, Some(path)) => read_secret_file(path, file_key).map(Some),
        (Some(secret), None) => {
            if given_on_command_line(value_key) {
                tracing::warn!(
                    flag = value_key.long,
                    "a kafka secret was given as a command-line flag, which every local user can \
                     read; prefer the environment variable or the file"
                );
            }
            Ok(Some(secret.clone()))
        }
        (None, None) => Ok(None),
    }
}

fn read_file(path: &Path, key: Key) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError::at(key, format!("cannot read {}: {e}", path.display())))
}

/// A secret from a file: its content without the trailing newline, never shown.
fn read_secret_file(path: &Path, key: Key) -> Result<Secret, ConfigError> {
    let text = read_file(path, key)?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.is_empty() {
        return Err(ConfigError::at(key, format!("{} is empty", path.display())));
    }
    Ok(Secret::new(secret))
}

fn readable(path: &Path, key: Key) -> Result<(), ConfigError> {
    std::fs::File::open(path)
        .map(drop)
        .map_err(|e| ConfigError::at(key, format!("cannot read {}: {e}", path.display())))
}

/// Cross-property checks on what is in effect, so that a half-configured security setting
/// fails at start with its key rather than as a refused connection later.
fn check_security(properties: &KafkaProperties) -> Result<(), ConfigError> {
    let protocol = properties
        .get("security.protocol")
        .unwrap_or("plaintext")
        .to_ascii_lowercase();
    let sasl = protocol.starts_with("sasl");
    let mechanism = properties
        .get("sasl.mechanism")
        .map(str::to_ascii_uppercase);
    let protocol_key = "--kafka-security-protocol / security.protocol";
    let mechanism_key = "--kafka-sasl-mechanism / sasl.mechanism";
    if !sasl {
        if mechanism.is_some() || properties.get("sasl.username").is_some() {
            return Err(ConfigError::new(
                protocol_key,
                format!(
                    "is {protocol}, but SASL settings are given: use sasl_ssl (or \
                     sasl_plaintext on a trusted network)"
                ),
            ));
        }
        return Ok(());
    }
    match mechanism.as_deref() {
        None | Some("GSSAPI") => Err(ConfigError::new(
            mechanism_key,
            "is required with SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER \
             (Kerberos/GSSAPI is not built in)",
        )),
        Some("PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512") => {
            let user = properties.get("sasl.username").is_some();
            let password = properties.get("sasl.password").is_some();
            if !user {
                return Err(ConfigError::new(
                    "--kafka-sasl-username / sasl.username",
                    format!("is required with {}", mechanism.unwrap_or_default()),
                ));
            }
            if !password {
                return Err(ConfigError::new(
                    "--kafka-sasl-password-file / sasl.password",
                    format!("is required with {}", mechanism.unwrap_or_default()),
                ));
            }
            Ok(())
        }
        Some("OAUTHBEARER") => {
            let oidc = properties
                .get("sasl.oauthbearer.method")
                .is_some_and(|m| m.eq_ignore_ascii_case("oidc"));
            if oidc {
                for (property, flag) in [
                    (
                        "sasl.oauthbearer.token.endpoint.url",
                        "--kafka-oauth-token-url",
                    ),
                    ("sasl.oauthbearer.client.id", "--kafka-oauth-client-id"),
                    (
                        "sasl.oauthbearer.client.secret",
                        "--kafka-oauth-client-secret-file",
                    ),
                ] {
                    if properties.get(property).is_none() {
                        return Err(ConfigError::new(
                            format!("{flag} / {property}"),
                            "is required with OAUTHBEARER over OIDC",
                        ));
                    }
                }
            }
            Ok(())
        }
        Some(other) => Err(ConfigError::new(
            mechanism_key,
            format!("{other} is not supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"),
        )),
    }
}

/// What librdkafka says of one property.
enum Known {
    Yes,
    Unknown,
    Invalid(String),
}

fn known_to_librdkafka(name: &str, value: &str) -> Known {
    let mut config = rdkafka::ClientConfig::new();
    config.set(name, value);
    match config.create_native_config() {
        Ok(_) => Known::Yes,
        Err(KafkaError::ClientConfig(RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN, ..)) => Known::Unknown,
        Err(KafkaError::ClientConfig(_, message, ..)) => Known::Invalid(message),
        Err(other) => Known::Invalid(other.to_string()),
    }
}

/// A Java properties file's `key=value` (or `key: value`, `key value`) lines: `#` and `!`
/// comments, blank lines, a trailing backslash continuing a line, and the escapes `\\`, `\=`,
/// `\:`, `\ `, `\t`, `\n`. An error gives the line number.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, (usize, String)> {
    let mut properties = Vec::new();
    let mut logical = String::new();
    let mut first_line = 0;
    for (index, line) in text.lines().enumerate() {
        let line = if logical.is_empty() {
            first_line = index + 1;
            line.trim_start()
        } else {
            line.trim_start()
        };
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if ends_in_continuation(line) {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        properties.push(split_property(&logical).map_err(|e| (first_line, e))?);
        logical.clear();
    }
    if !logical.is_empty() {
        properties.push(split_property(&logical).map_err(|e| (first_line, e))?);
    }
    Ok(properties)
}

/// An odd number of trailing backslashes continues the line.
fn ends_in_continuation(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

fn split_property(line: &str) -> Result<(String, String), String> {
    let mut key = String::new();
    let mut chars = line.chars();
    let mut escaped = false;
    let mut rest = "";
    while let Some(c) = chars.next() {
        if escaped {
            key.push(unescape(c));
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => {
                rest = chars.as_str();
                break;
            }
            c if c.is_whitespace() => {
                let after = chars.as_str().trim_start();
                rest = after
                    .strip_prefix(['=', ':'])
                    .map_or(after, str::trim_start);
                break;
            }
            c => key.push(c),
        }
    }
    if key.is_empty() {
        return Err(format!("{line:?} has no key"));
    }
    let mut value = String::new();
    let mut escaped = false;
    for c in rest.trim_start().chars() {
        if escaped {
            value.push(unescape(c));
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else {
            value.push(c);
        }
    }
    Ok((key, value.trim_end().to_owned()))
}

fn unescape(c: char) -> char {
    match c {
        't' => '\t',
        'n' => '\n',
        'r' => '\r',
        'f' => '\u{c}',
        other => other,
    }
}

/// Turns a Java client's properties into librdkafka's where they differ: `sasl.jaas.config`'s
/// user name and password (PLAIN, SCRAM) or OIDC client id, secret and scope (OAUTHBEARER)
/// become librdkafka's own properties. Other login modules (Kerberos, AWS IAM) are refused.
pub fn from_java_client(
    properties: Vec<(String, String)>,
) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::with_capacity(properties.len());
    let endpoint = properties
        .iter()
        .any(|(k, _)| k == "sasl.oauthbearer.token.endpoint.url");
    for (name, value) in properties {
        if name != "sasl.jaas.config" {
            out.push((name, value));
            continue;
        }
        let jaas = parse_jaas(&value)?;
        let module = jaas.module.rsplit('.').next().unwrap_or_default();
        let option = |name: &str| {
            jaas.options
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        match module {
            "PlainLoginModule" | "ScramLoginModule" => {
                for (java, ours) in [("username", "sasl.username"), ("password", "sasl.password")] {
                    if let Some(value) = option(java) {
                        out.push((ours.to_owned(), value));
                    }
                }
            }
            "OAuthBearerLoginModule" => {
                if endpoint {
                    out.push(("sasl.oauthbearer.method".to_owned(), "oidc".to_owned()));
                }
                for (java, ours) in [
                    ("clientId", "sasl.oauthbearer.client.id"),
                    ("clientSecret", "sasl.oauthbearer.client.secret"),
                    ("scope", "sasl.oauthbearer.scope"),
                ] {
                    if let Some(value) = option(java) {
                        out.push((ours.to_owned(), value));
                    }
                }
            }
            other => {
                return Err(format!(
                    "sasl.jaas.config uses {other}, which this service cannot use (PLAIN, SCRAM \
                     and OAUTHBEARER are supported; Kerberos and AWS IAM are not)"
                ));
            }
        }
    }
    Ok(out)
}

/// `module.Class required key="value" key2='value2';`
struct Jaas {
    module: String,
    options: Vec<(String, String)>,
}

fn parse_jaas(text: &str) -> Result<Jaas, String> {
    let bad = || "sasl.jaas.config is not `LoginModule required key=\"value\" ...;`".to_owned();
    let text = text.trim().trim_end_matches(';').trim();
    let (module, rest) = text.split_once(char::is_whitespace).ok_or_else(bad)?;
    let rest = rest.trim_start();
    let (_flag, mut rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let mut options = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let (name, after) = rest.split_once('=').ok_or_else(bad)?;
        let after = after.trim_start();
        let (value, remainder) = match after.chars().next() {
            Some(quote @ ('"' | '\'')) => {
                let body = &after[1..];
                let end = body.find(quote).ok_or_else(bad)?;
                (body[..end].to_owned(), &body[end + 1..])
            }
            _ => {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                (after[..end].to_owned(), &after[end..])
            }
        };
        options.push((name.trim().to_owned(), value));
        rest = remainder;
    }
    Ok(Jaas {
        module: module.to_owned(),
        options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        kafka: KafkaConnectionArgs,
    }

    fn resolve(args: &[&str]) -> Result<KafkaConnection, String> {
        let mut argv = vec!["x"];
        argv.extend_from_slice(args);
        let parsed = Command::try_parse_from(argv).map_err(|e| e.to_string())?;
        parsed.kafka.resolve().map_err(|e| e.to_string())
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn a_properties_file_reads_as_java_writes_it() {
        let text = "# Confluent Cloud\n\
                    ! also a comment\n\
                    bootstrap.servers=pkc-1.europe-west1.gcp.confluent.cloud:9092\n\
                    security.protocol : SASL_SSL\n\
                    sasl.mechanism PLAIN\n\
                    long.value=a\\\n    b\\\n    c\n\
                    path=C\\:\\\\certs\\\\ca.pem\n\
                    empty=\n\
                    \n   spaced.key  =  value with spaces  \n";
        let parsed = parse_properties(text).unwrap();
        let pairs: Vec<(&str, &str)> = parsed
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                (
                    "bootstrap.servers",
                    "pkc-1.europe-west1.gcp.confluent.cloud:9092"
                ),
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "PLAIN"),
                ("long.value", "abc"),
                ("path", "C:\\certs\\ca.pem"),
                ("empty", ""),
                ("spaced.key", "value with spaces"),
            ]
        );
        assert_eq!(parse_properties("=value\n").unwrap_err().0, 1);
    }

    #[test]
    fn a_java_clients_jaas_login_becomes_librdkafkas_properties() {
        let plain = vec![(
            "sasl.jaas.config".to_owned(),
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username='API_KEY' password=\"API SECRET\";"
                .to_owned(),
        )];
        assert_eq!(
            from_java_client(plain).unwrap(),
            [
                ("sasl.username".to_owned(), "API_KEY".to_owned()),
                ("sasl.password".to_owned(), "API SECRET".to_owned()),
            ]
        );
        let oauth = vec![
            (
                "sasl.oauthbearer.token.endpoint.url".to_owned(),
                "https://idp/token".to_owned(),
            ),
            (
                "sasl.jaas.config".to_owned(),
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                 clientId='history' clientSecret='s3cret' scope='kafka';"
                    .to_owned(),
            ),
        ];
        let converted = from_java_client(oauth).unwrap();
        let properties = KafkaProperties::from(converted);
        assert_eq!(properties.get("sasl.oauthbearer.method"), Some("oidc"));
        assert_eq!(
            properties.get("sasl.oauthbearer.client.id"),
            Some("history")
        );
        assert_eq!(
            properties.get("sasl.oauthbearer.client.secret"),
            Some("s3cret")
        );
        assert_eq!(properties.get("sasl.oauthbearer.scope"), Some("kafka"));
        let kerberos = vec![(
            "sasl.jaas.config".to_owned(),
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;".to_owned(),
        )];
        let error = from_java_client(kerberos).unwrap_err();
        assert!(error.contains("Krb5LoginModule"), "{error}");
    }

    #[test]
    fn the_file_then_the_flags_then_the_options_each_win_over_the_one_before() {
        let props = file(
            "bootstrap.servers=from-file:9092\n\
             security.protocol=SASL_SSL\n\
             sasl.mechanism=PLAIN\n\
             sasl.username=file-user\n\
             sasl.password=file-password\n\
             session.timeout.ms=45000\n\
             key.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n\
             group.id=theirs\n",
        );
        let path = props.path().to_str().unwrap();
        let only_file = resolve(&["--kafka-config-file", path]).unwrap();
        assert_eq!(only_file.brokers, "from-file:9092");
        let p = &only_file.properties;
        assert_eq!(p.get("sasl.username"), Some("file-user"));
        assert_eq!(p.get("session.timeout.ms"), Some("45000"));
        assert_eq!(
            p.get("key.deserializer"),
            None,
            "a Java-only key is left out"
        );
        assert_eq!(p.get("group.id"), None, "the service's own key is left out");

        let password = file("flag-password\n");
        let ours = resolve(&[
            "--kafka-config-file",
            path,
            "--brokers",
            "flag:9092",
            "--kafka-sasl-mechanism",
            "scram-sha-512",
            "--kafka-sasl-username",
            "flag-user",
            "--kafka-sasl-password-file",
            password.path().to_str().unwrap(),
            "--kafka-option",
            "sasl.username=option-user",
        ])
        .unwrap();
        assert_eq!(ours.brokers, "flag:9092");
        let p = &ours.properties;
        assert_eq!(p.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(p.get("sasl.password"), Some("flag-password"));
        assert_eq!(p.get("sasl.username"), Some("option-user"));
    }

    #[test]
    fn no_secret_shows_in_debug_output_or_errors() {
        let props = file(
            "security.protocol=sasl_ssl\nsasl.mechanism=PLAIN\nsasl.username=u\n\
             sasl.password=file-secret-1\nssl.key.password=file-secret-2\n",
        );
        let connection = resolve(&[
            "--kafka-config-file",
            props.path().to_str().unwrap(),
            "--kafka-oauth-client-secret",
            "flag-secret-3",
        ])
        .unwrap();
        let shown = format!("{connection:?}");
        for secret in ["file-secret-1", "file-secret-2", "flag-secret-3"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("sasl.password"), "{shown}");
        let bad = file("sasl.password=file-secret-4\nsession.timeout.ms=soon\n");
        let error = resolve(&["--kafka-config-file", bad.path().to_str().unwrap()]).unwrap_err();
        assert!(error.contains("session.timeout.ms"), "{error}");
        assert!(!error.contains("file-secret-4"), "{error}");
    }

    #[test]
    fn each_half_configured_security_setting_is_named() {
        let password = file("pw\n");
        let password = password.path().to_str().unwrap();
        let cases: [(&[&str], &str); 9] = [
            (
                &["--kafka-security-protocol", "sasl_ssl"],
                "--kafka-sasl-mechanism",
            ),
            (
                &[
                    "--kafka-sasl-mechanism",
                    "PLAIN",
                    "--kafka-sasl-username",
                    "u",
                ],
                "--kafka-security-protocol",
            ),
            (
                &[
                    "--kafka-security-protocol",
                    "SASL_SSL",
                    "--kafka-sasl-mechanism",
                    "SCRAM-SHA-256",
                    "--kafka-sasl-password-file",
                    password,
                ],
                "--kafka-sasl-username",
            ),
            (
                &[
                    "--kafka-security-protocol",
                    "sasl_ssl",
                    "--kafka-sasl-mechanism",
                    "PLAIN",
                    "--kafka-sasl-username",
                    "u",
                ],
                "--kafka-sasl-password-file",
            ),
            (
                &[
                    "--kafka-sasl-password",
                    "x",
                    "--kafka-sasl-password-file",
                    password,
                ],
                "--kafka-sasl-password",
            ),
            (
                &["--kafka-ssl-ca-file", "/nonexistent/ca.pem"],
                "--kafka-ssl-ca-file",
            ),
            (
                &["--kafka-config-file", "/nonexistent/client.properties"],
                "--kafka-config-file",
            ),
            (
                &[
                    "--kafka-security-protocol",
                    "sasl_ssl",
                    "--kafka-sasl-mechanism",
                    "OAUTHBEARER",
                    "--kafka-oauth-token-url",
                    "https://idp/token",
                ],
                "--kafka-oauth-client-id",
            ),
            (&["--kafka-option", "group.id=x"], "group.id"),
        ];
        for (args, key) in cases {
            let error = resolve(args).expect_err(key);
            assert!(error.contains(key), "{args:?}: {error}");
        }
        let error = resolve(&["--kafka-sasl-mechanism", "GSSAPI"]).unwrap_err();
        assert!(
            error.contains("GSSAPI") || error.contains("invalid value"),
            "{error}"
        );
    }

    #[test]
    fn oidc_client_credentials_become_librdkafkas_oidc_properties() {
        let secret = file("client-secret\n");
        let connection = resolve(&[
            "--kafka-security-protocol",
            "sasl_ssl",
            "--kafka-sasl-mechanism",
            "oauthbearer",
            "--kafka-oauth-token-url",
            "https://idp.example/oauth2/token",
            "--kafka-oauth-client-id",
            "history",
            "--kafka-oauth-client-secret-file",
            secret.path().to_str().unwrap(),
            "--kafka-oauth-scope",
            "kafka",
        ])
        .unwrap();
        let p = &connection.properties;
        assert_eq!(p.get("sasl.mechanism"), Some("OAUTHBEARER"));
        assert_eq!(p.get("sasl.oauthbearer.method"), Some("oidc"));
        assert_eq!(
            p.get("sasl.oauthbearer.client.secret"),
            Some("client-secret")
        );
        assert_eq!(
            p.sasl_identity(),
            Some(("OAUTHBEARER".to_owned(), Some("history".to_owned())))
        );
        let mut config = rdkafka::ClientConfig::new();
        p.apply_to(&mut config);
        config
            .create_native_config()
            .expect("librdkafka takes them");
    }

    #[test]
    fn without_flags_it_is_plaintext_to_localhost() {
        let connection = resolve(&[]).unwrap();
        assert_eq!(connection, KafkaConnection::plaintext("localhost:9092"));
    }
}
