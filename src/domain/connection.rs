//! Why the Kafka connection fails, in words an operator can act on: librdkafka's error code and
//! text classified into a cause (authentication, TLS, unreachable brokers) whose message names
//! the setting to fix. Nothing secret goes in: the service's own SASL mechanism and user name
//! are inputs, its password never is.
//!
//! The texts are librdkafka 2.12's (`rdkafka_broker.c`, `rdkafka_ssl.c`, `rdkafka_request.c`,
//! `rdkafka_sasl_*.c`), with OpenSSL 3's error strings inside. OpenSSL says only "certificate
//! verify failed" for both an untrusted certificate and one issued for another host: that cause
//! is [`Problem::CertificateRefused`] until the verdict of a handshake of our own
//! ([`verdict_of_x509_error`]) refines it.

use rdkafka::error::RDKafkaErrorCode;
use serde::Serialize;

/// Who the service is to its brokers, as far as a message may say: never a password.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientIdentity {
    /// `sasl.mechanism`, when SASL is on (`SCRAM-SHA-256`, `PLAIN`, `OAUTHBEARER`, ...).
    pub sasl_mechanism: Option<String>,
    /// `sasl.username`.
    pub sasl_username: Option<String>,
}

/// The kind of a connection failure: the `cause` label of the connection metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum CauseKind {
    /// SASL: credentials, mechanism, token.
    Authentication,
    /// TLS: certificates, keys, a listener that speaks (or does not speak) TLS.
    Tls,
    /// No broker answers: name resolution, refused or broken connections.
    Unreachable,
}

impl CauseKind {
    /// Every kind, in a stable order (for metrics).
    pub const ALL: &'static [CauseKind] = <Self as strum::VariantArray>::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What exactly went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Problem {
    /// The broker refused the user name and password.
    InvalidCredentials,
    /// The broker does not accept the SASL mechanism.
    MechanismRefused,
    /// No OAUTHBEARER token could be obtained.
    TokenUnavailable,
    /// SASL failed otherwise.
    AuthenticationFailed,
    /// The broker's certificate failed verification; why is not known yet.
    CertificateRefused,
    /// The broker's certificate is not signed by an authority the service trusts.
    CertificateNotTrusted,
    /// The broker's certificate is not issued for the host name the service connects to.
    HostNameMismatch,
    /// The broker's certificate has expired or is not valid yet.
    CertificateExpired,
    /// The broker refused the client certificate, or its absence.
    ClientCertificateRefused,
    /// The client's certificate file could not be read.
    ClientCertificateUnreadable,
    /// The client's private key could not be read.
    KeyUnreadable,
    /// The trusted authorities' certificates could not be read.
    AuthorityUnreadable,
    /// The service speaks TLS to a listener that does not.
    NotTls,
    /// The listener closed the connection at the first request: it expects TLS or SASL.
    TlsOrSaslExpected,
    /// The listener never answered the TLS handshake: it may not speak TLS.
    TlsHandshakeUnanswered,
    /// The TLS handshake failed otherwise.
    TlsFailed,
    /// The broker's host name does not resolve.
    HostNotFound,
    /// A broker refused or dropped the connection.
    Unreachable,
    /// librdkafka reports every broker down.
    AllBrokersDown,
}

impl Problem {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn kind(self) -> CauseKind {
        use Problem::*;
        match self {
            InvalidCredentials | MechanismRefused | TokenUnavailable | AuthenticationFailed => {
                CauseKind::Authentication
            }
            CertificateRefused
            | CertificateNotTrusted
            | HostNameMismatch
            | CertificateExpired
            | ClientCertificateRefused
            | ClientCertificateUnreadable
            | KeyUnreadable
            | AuthorityUnreadable
            | NotTls
            | TlsOrSaslExpected
            | TlsHandshakeUnanswered
            | TlsFailed => CauseKind::Tls,
            HostNotFound | Unreachable | AllBrokersDown => CauseKind::Unreachable,
        }
    }

    /// The librdkafka property of a file it could not read, for a client that cannot be
    /// created.
    pub fn unreadable_file(self) -> Option<&'static str> {
        match self {
            Problem::KeyUnreadable => Some("ssl.key.location"),
            Problem::ClientCertificateUnreadable => Some("ssl.certificate.location"),
            Problem::AuthorityUnreadable => Some("ssl.ca.location"),
            _ => None,
        }
    }

    /// How much this problem says: while the connection fails, a cause is replaced only by one
    /// that says more (a refused certificate's reason, a refusal after "all brokers down"), so
    /// that librdkafka's retries against several brokers do not make it flap.
    pub fn specificity(self) -> u8 {
        match self {
            Problem::HostNotFound | Problem::Unreachable | Problem::AllBrokersDown => 0,
            Problem::CertificateRefused
            | Problem::TlsFailed
            | Problem::TlsOrSaslExpected
            | Problem::TlsHandshakeUnanswered => 1,
            _ => 2,
        }
    }
}

/// A broker as librdkafka names it in its errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokerAddress {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Why the connection fails: what happened and what to change, one line each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectionCause {
    pub kind: CauseKind,
    pub problem: Problem,
    /// What happened ("the broker's certificate is not trusted").
    pub what: String,
    /// The setting to fix ("check ssl.ca.location / --kafka-ssl-ca-file").
    pub fix: String,
    /// The broker the error came from, when librdkafka named it.
    pub broker: Option<BrokerAddress>,
    /// librdkafka's own text (never holds a password), for the pages.
    pub detail: String,
}

impl ConnectionCause {
    /// `what: fix`, the line for logs and `/readyz`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.what, self.fix)
    }

    /// The same failure with a better known problem (see [`verdict_of_x509_error`]).
    pub fn refined(&self, problem: Problem, identity: &ClientIdentity) -> ConnectionCause {
        describe(
            problem,
            identity,
            self.broker.clone(),
            None,
            self.detail.clone(),
        )
    }
}

/// The service's flags for librdkafka properties that have one (`--kafka-option KEY=VALUE`
/// sets any); a message names both.
const FLAGS: &[(&str, &str)] = &[
    ("security.protocol", "--kafka-security-protocol"),
    ("sasl.mechanism", "--kafka-sasl-mechanism"),
    ("sasl.username", "--kafka-sasl-username"),
    ("sasl.password", "--kafka-sasl-password-file"),
    ("ssl.ca.location", "--kafka-ssl-ca-file"),
    ("ssl.certificate.location", "--kafka-ssl-cert-file"),
    ("ssl.key.location", "--kafka-ssl-key-file"),
    ("ssl.key.password", "--kafka-ssl-key-password-file"),
    (
        "sasl.oauthbearer.token.endpoint.url",
        "--kafka-oauth-token-url",
    ),
    ("sasl.oauthbearer.client.id", "--kafka-oauth-client-id"),
    (
        "sasl.oauthbearer.client.secret",
        "--kafka-oauth-client-secret-file",
    ),
];

/// `property`, with its flag when it has one: "ssl.ca.location / --kafka-ssl-ca-file".
fn setting(property: &str) -> String {
    match FLAGS.iter().find(|(p, _)| *p == property) {
        Some((_, flag)) => format!("{property} / {flag}"),
        None => property.to_owned(),
    }
}

/// Classifies an error librdkafka reported (its code and text) as a connection failure;
/// `None` for errors of another sort (a topic that does not exist, a timeout, ...).
pub fn classify(
    code: RDKafkaErrorCode,
    reason: &str,
    identity: &ClientIdentity,
) -> Option<ConnectionCause> {
    let problem = problem_of(code, reason)?;
    let offered = offered_mechanisms(reason);
    Some(describe(
        problem,
        identity,
        broker_of(reason),
        offered,
        reason.trim().to_owned(),
    ))
}

/// Whether an error of this code is about the connection whatever its text (the consumer's
/// poll hands back, without their text, the errors already passed to the context).
pub fn is_connection_error(code: RDKafkaErrorCode) -> bool {
    problem_of(code, "").is_some()
}

/// Classifies the error librdkafka gives when it cannot create the client (files named by
/// `ssl.*` settings that cannot be read); `None` for other errors.
pub fn classify_creation(reason: &str, identity: &ClientIdentity) -> Option<ConnectionCause> {
    let problem = file_problem(reason)?;
    Some(describe(
        problem,
        identity,
        None,
        None,
        reason.trim().to_owned(),
    ))
}

fn file_problem(reason: &str) -> Option<Problem> {
    const FILES: &[(&str, Problem)] = &[
        ("ssl.key.location failed", Problem::KeyUnreadable),
        ("ssl.key.pem failed", Problem::KeyUnreadable),
        ("ssl_key (in-memory) failed", Problem::KeyUnreadable),
        ("ssl.key.password", Problem::KeyUnreadable),
        ("ssl.keystore.location", Problem::KeyUnreadable),
        (
            "ssl.certificate.location failed",
            Problem::ClientCertificateUnreadable,
        ),
        (
            "ssl.certificate.pem failed",
            Problem::ClientCertificateUnreadable,
        ),
        ("ssl.ca.location failed", Problem::AuthorityUnreadable),
        ("ssl.ca.pem failed", Problem::AuthorityUnreadable),
    ];
    FILES
        .iter()
        .find(|(needle, _)| reason.contains(needle))
        .map(|(_, problem)| *problem)
}

fn problem_of(code: RDKafkaErrorCode, reason: &str) -> Option<Problem> {
    use RDKafkaErrorCode as Code;
    let lower = reason.to_ascii_lowercase();
    let has = |needle: &str| lower.contains(needle);
    // SASL first: its texts may quote the broker, whatever that says.
    let sasl = matches!(
        code,
        Code::Authentication
            | Code::SaslAuthenticationFailed
            | Code::UnsupportedSASLMechanism
            | Code::IllegalSASLState
    ) || has("sasl authentication error")
        || has("sasl authentication failure");
    if sasl {
        return Some(
            if code == Code::UnsupportedSASLMechanism || has("mechanism handshake failed") {
                Problem::MechanismRefused
            } else if has("oauthbearer token") {
                Problem::TokenUnavailable
            } else if has("invalid credentials")
                || has("invalid-proof")
                || has("invalid username or password")
                || has("authentication failed")
                || code == Code::SaslAuthenticationFailed
            {
                Problem::InvalidCredentials
            } else {
                Problem::AuthenticationFailed
            },
        );
    }
    if let Some(problem) = file_problem(reason) {
        return Some(problem);
    }
    // The server's TLS alerts: it refused our certificate (or that we sent none). With TLS
    // 1.3 they come after the handshake, as a transport error.
    const CLIENT_CERTIFICATE_ALERTS: &[&str] = &[
        "alert certificate required",
        "alert bad certificate",
        "alert unknown ca",
        "alert certificate unknown",
        "alert certificate revoked",
        "alert certificate expired",
        "alert unsupported certificate",
        "alert access denied",
    ];
    if CLIENT_CERTIFICATE_ALERTS.iter().any(|alert| has(alert)) {
        return Some(Problem::ClientCertificateRefused);
    }
    if let Some(verdict) = lower
        .split_once("failed to verify broker certificate: ")
        .map(|(_, rest)| rest)
    {
        return Some(verdict_of_x509_text(verdict).unwrap_or(Problem::CertificateRefused));
    }
    if has("certificate verify failed") {
        return Some(Problem::CertificateRefused);
    }
    if has("wrong version number")
        || has("connecting to a plaintext broker listener")
        || has("packet length too long")
        || has("record layer failure")
    {
        return Some(Problem::NotTls);
    }
    // A plaintext client dropped at its first request; librdkafka says so as a hint, or only
    // logs the disconnect (at info level, as a reset).
    if has("connecting to a ssl listener")
        || has("broker might require sasl authentication")
        || (has("in state apiversion_query") && has("disconnected"))
    {
        return Some(Problem::TlsOrSaslExpected);
    }
    // Logged at warning level after socket.connection.setup.timeout.ms (30 s): a plaintext
    // listener waits for the rest of what it takes for a request.
    if has("timed out in state ssl_handshake") {
        return Some(Problem::TlsHandshakeUnanswered);
    }
    if code == Code::SSL || has("ssl handshake failed") || has("ssl transport error") {
        return Some(Problem::TlsFailed);
    }
    match code {
        Code::Resolve => Some(Problem::HostNotFound),
        Code::AllBrokersDown => Some(Problem::AllBrokersDown),
        Code::BrokerTransportFailure if has("failed to resolve") => Some(Problem::HostNotFound),
        Code::BrokerTransportFailure => Some(Problem::Unreachable),
        _ => None,
    }
}

/// The problem behind a certificate verification error of OpenSSL (`X509_V_ERR_*`); `None`
/// when the certificate passed or the code says nothing more than "refused".
pub fn verdict_of_x509_error(code: i32) -> Option<Problem> {
    match code {
        // HOSTNAME_MISMATCH, EMAIL_MISMATCH, IP_ADDRESS_MISMATCH
        62..=64 => Some(Problem::HostNameMismatch),
        // CERT_NOT_YET_VALID, CERT_HAS_EXPIRED
        9 | 10 => Some(Problem::CertificateExpired),
        // UNABLE_TO_GET_ISSUER_CERT, DEPTH_ZERO_SELF_SIGNED_CERT, SELF_SIGNED_CERT_IN_CHAIN,
        // UNABLE_TO_GET_ISSUER_CERT_LOCALLY, UNABLE_TO_VERIFY_LEAF_SIGNATURE, CERT_UNTRUSTED
        2 | 18..=21 | 27 => Some(Problem::CertificateNotTrusted),
        _ => None,
    }
}

/// The same for OpenSSL's text of such an error (`X509_verify_cert_error_string`), which
/// librdkafka quotes when it verifies after the handshake.
fn verdict_of_x509_text(text: &str) -> Option<Problem> {
    let has = |needle: &str| text.contains(needle);
    if has("hostname mismatch") || has("ip address mismatch") {
        Some(Problem::HostNameMismatch)
    } else if has("has expired") || has("not yet valid") {
        Some(Problem::CertificateExpired)
    } else if has("issuer certificate") || has("self-signed") || has("self signed") {
        Some(Problem::CertificateNotTrusted)
    } else {
        None
    }
}

/// The broker an error came from: librdkafka starts its text with the broker's name
/// (`ssl://host:9093/1: ...`, `sasl_ssl://host:9093/bootstrap: ...`), or with a logical
/// broker's name and then its address (`GroupCoordinator: host:9093: ...`).
pub fn broker_of(reason: &str) -> Option<BrokerAddress> {
    let mut parts = reason.splitn(3, ": ");
    let first = parts.next()?;
    // The name is `[proto://]host:port/id`; a logical broker's is a word, its address next.
    let name = first.split_once("://").map_or(first, |(_, rest)| rest);
    let address = match name.split_once('/') {
        Some((address, _)) => address,
        None => parts.next()?,
    };
    let (host, port) = address.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port.parse().ok()?;
    (!host.is_empty() && !host.contains(char::is_whitespace)).then(|| BrokerAddress {
        host: host.to_owned(),
        port,
    })
}

/// A librdkafka log line without the thread it names first (`[thrd:main]: ...`), as its
/// errors read.
pub fn without_thread(line: &str) -> &str {
    line.strip_prefix("[thrd:")
        .and_then(|rest| rest.split_once("]: "))
        .map_or(line, |(_, message)| message)
}

/// The mechanisms a broker offers, from "... broker's supported mechanisms: PLAIN,SCRAM-SHA-256".
fn offered_mechanisms(reason: &str) -> Option<String> {
    let (_, rest) = reason.split_once("supported mechanisms: ")?;
    let offered = rest.split(" (after ").next()?.trim();
    (!offered.is_empty()).then(|| offered.to_owned())
}

fn describe(
    problem: Problem,
    identity: &ClientIdentity,
    broker: Option<BrokerAddress>,
    offered: Option<String>,
    detail: String,
) -> ConnectionCause {
    let mechanism = identity.sasl_mechanism.as_deref().unwrap_or("SASL");
    let user = match &identity.sasl_username {
        Some(name) => format!("user \"{name}\""),
        None => "its user".to_owned(),
    };
    let host = broker
        .as_ref()
        .map_or_else(|| "the broker's".to_owned(), |b| format!("\"{}\"", b.host));
    let [
        protocol,
        mechanism_setting,
        username,
        password,
        ca,
        certificate,
        key,
        key_password,
    ] = [
        "security.protocol",
        "sasl.mechanism",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
    ]
    .map(setting);
    let brokers = "the broker addresses (--brokers)";
    let (what, fix) = match problem {
        Problem::InvalidCredentials => (
            format!("the broker refused the credentials of {user} with {mechanism}"),
            format!("check {username} and {password}"),
        ),
        Problem::MechanismRefused => (
            match offered {
                Some(offered) => format!(
                    "the broker does not accept the SASL mechanism {mechanism} (it offers {offered})"
                ),
                None => format!("the broker does not accept the SASL mechanism {mechanism}"),
            },
            format!("check {mechanism_setting}"),
        ),
        Problem::TokenUnavailable => (
            "no OAUTHBEARER token could be obtained".to_owned(),
            format!(
                "check {}, {} and {}",
                setting("sasl.oauthbearer.token.endpoint.url"),
                setting("sasl.oauthbearer.client.id"),
                setting("sasl.oauthbearer.client.secret")
            ),
        ),
        Problem::AuthenticationFailed => (
            format!("SASL authentication of {user} with {mechanism} failed"),
            format!("check {mechanism_setting}, {username} and {password}"),
        ),
        Problem::CertificateRefused => (
            "the broker's certificate was refused: it is not trusted, or not issued for the \
             broker's host name"
                .to_owned(),
            format!("check {ca} and {brokers}"),
        ),
        Problem::CertificateNotTrusted => (
            "the broker's certificate is not trusted".to_owned(),
            format!("check {ca}"),
        ),
        Problem::HostNameMismatch => (
            format!(
                "the broker's certificate is not issued for the host name {host} the service \
                 connects to"
            ),
            format!(
                "connect to a host name the certificate names ({brokers}, and the broker's \
                 advertised listeners), or have the certificate issued for this name"
            ),
        ),
        Problem::CertificateExpired => (
            "the broker's certificate has expired or is not valid yet".to_owned(),
            "renew the broker's certificate (or check this machine's clock)".to_owned(),
        ),
        Problem::ClientCertificateRefused => (
            "the broker refused the client certificate (or that none was sent)".to_owned(),
            format!("check {certificate} and {key}"),
        ),
        Problem::ClientCertificateUnreadable => (
            "the client certificate could not be read".to_owned(),
            format!("check {certificate}"),
        ),
        Problem::KeyUnreadable => (
            "the client's private key could not be read".to_owned(),
            format!("check {key} (and {key_password} if the key is encrypted)"),
        ),
        Problem::AuthorityUnreadable => (
            "the trusted authorities' certificates could not be read".to_owned(),
            format!("check {ca}"),
        ),
        Problem::NotTls => (
            "the broker does not speak TLS on this port".to_owned(),
            format!("check {protocol} and {brokers}"),
        ),
        Problem::TlsOrSaslExpected => (
            "the broker closed the connection at the first request: it may expect TLS or SASL \
             on this port"
                .to_owned(),
            format!("check {protocol}"),
        ),
        Problem::TlsHandshakeUnanswered => (
            "the broker did not answer the TLS handshake: the listener may not speak TLS"
                .to_owned(),
            format!("check {protocol} and {brokers}"),
        ),
        Problem::TlsFailed => (
            "the TLS handshake with the broker failed".to_owned(),
            format!("check {protocol} and {ca}"),
        ),
        Problem::HostNotFound => (
            "the broker's host name does not resolve".to_owned(),
            format!("check {brokers} and DNS"),
        ),
        Problem::Unreachable => (
            "the broker refused or dropped the connection".to_owned(),
            format!("check {brokers}, that the brokers run, and the network"),
        ),
        Problem::AllBrokersDown => (
            "no broker can be reached".to_owned(),
            format!(
                "check {brokers}, that the brokers run, the network, and {protocol} (a \
                 listener drops clients that do not speak its protocol)"
            ),
        ),
    };
    ConnectionCause {
        kind: problem.kind(),
        problem,
        what,
        fix,
        broker,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RDKafkaErrorCode as Code;

    fn scram(user: &str) -> ClientIdentity {
        ClientIdentity {
            sasl_mechanism: Some("SCRAM-SHA-256".into()),
            sasl_username: Some(user.into()),
        }
    }

    fn cause(code: Code, reason: &str) -> ConnectionCause {
        classify(code, reason, &ClientIdentity::default())
            .unwrap_or_else(|| panic!("not a connection failure: {reason}"))
    }

    #[test]
    fn a_wrong_scram_password_names_the_user_and_mechanism_and_never_a_password() {
        let reason = "sasl_ssl://kafka-1:9093/bootstrap: SASL authentication error: \
                      Authentication failed during authentication due to invalid credentials \
                      with SASL mechanism SCRAM-SHA-256 (after 5ms in state AUTH_REQ)";
        let cause = classify(Code::Authentication, reason, &scram("history")).unwrap();
        assert_eq!(cause.kind, CauseKind::Authentication);
        assert_eq!(cause.problem, Problem::InvalidCredentials);
        assert_eq!(
            cause.message(),
            "the broker refused the credentials of user \"history\" with SCRAM-SHA-256: \
             check sasl.username / --kafka-sasl-username and sasl.password / \
             --kafka-sasl-password-file"
        );
        assert_eq!(
            cause.broker,
            Some(BrokerAddress {
                host: "kafka-1".into(),
                port: 9093
            })
        );
        assert!(!cause.message().contains("password="));
    }

    #[test]
    fn a_scram_server_error_and_an_unknown_user_are_refused_credentials_too() {
        for reason in [
            "sasl_plaintext://b:9092/1: SASL authentication error: SASL SCRAM authentication \
             failed: broker responded with invalid-proof (after 3ms in state AUTH_REQ)",
            "sasl_plaintext://b:9092/1: SASL authentication error: Invalid username or password \
             (after 3ms in state AUTH_REQ)",
        ] {
            assert_eq!(
                cause(Code::Authentication, reason).problem,
                Problem::InvalidCredentials,
                "{reason}"
            );
        }
    }

    #[test]
    fn a_credentials_message_without_a_known_user_says_its_user() {
        let identity = ClientIdentity {
            sasl_mechanism: Some("PLAIN".into()),
            sasl_username: None,
        };
        let cause = classify(
            Code::Authentication,
            "sasl_ssl://b:9093/1: SASL authentication error: Authentication failed: Invalid \
             username or password (after 4ms in state AUTH_REQ)",
            &identity,
        )
        .unwrap();
        assert_eq!(
            cause.what,
            "the broker refused the credentials of its user with PLAIN"
        );
    }

    #[test]
    fn a_mechanism_the_broker_does_not_offer_names_what_it_offers() {
        let reason = "sasl_ssl://b:9093/bootstrap: SASL SCRAM-SHA-512 mechanism handshake \
                      failed: Broker: Unsupported SASL mechanism: broker's supported \
                      mechanisms: PLAIN,SCRAM-SHA-256 (after 2ms in state AUTH_HANDSHAKE)";
        let identity = ClientIdentity {
            sasl_mechanism: Some("SCRAM-SHA-512".into()),
            sasl_username: Some("history".into()),
        };
        let cause = classify(Code::Authentication, reason, &identity).unwrap();
        assert_eq!(cause.problem, Problem::MechanismRefused);
        assert_eq!(
            cause.message(),
            "the broker does not accept the SASL mechanism SCRAM-SHA-512 (it offers \
             PLAIN,SCRAM-SHA-256): check sasl.mechanism / --kafka-sasl-mechanism"
        );
    }

    #[test]
    fn an_oauthbearer_token_that_cannot_be_had_is_an_authentication_failure() {
        let cause = cause(
            Code::Authentication,
            "Failed to acquire SASL OAUTHBEARER token: Failed to retrieve OIDC token from \
             \"https://idp.example/token\": 401 Unauthorized",
        );
        assert_eq!(cause.problem, Problem::TokenUnavailable);
        assert_eq!(cause.kind, CauseKind::Authentication);
        assert!(cause.fix.contains("sasl.oauthbearer.token.endpoint.url"));
    }

    #[test]
    fn an_untrusted_broker_certificate_is_refused_until_a_verdict_says_why() {
        let reason = "ssl://127.0.0.1:40123/bootstrap: SSL handshake failed: \
                      error:0A000086:SSL routines::certificate verify failed: broker \
                      certificate could not be verified, verify that ssl.ca.location is \
                      correctly configured or root CA certificates are installed (install \
                      ca-certificates package) (after 3ms in state SSL_HANDSHAKE)";
        let refused = cause(Code::SSL, reason);
        assert_eq!(refused.kind, CauseKind::Tls);
        assert_eq!(refused.problem, Problem::CertificateRefused);
        assert!(
            refused
                .fix
                .contains("ssl.ca.location / --kafka-ssl-ca-file")
        );

        let untrusted = refused.refined(
            verdict_of_x509_error(20).unwrap(),
            &ClientIdentity::default(),
        );
        assert_eq!(
            untrusted.message(),
            "the broker's certificate is not trusted: check ssl.ca.location / --kafka-ssl-ca-file"
        );
        assert_eq!(untrusted.detail, refused.detail);

        let elsewhere = refused.refined(
            verdict_of_x509_error(64).unwrap(),
            &ClientIdentity::default(),
        );
        assert_eq!(elsewhere.problem, Problem::HostNameMismatch);
        assert!(
            elsewhere
                .what
                .contains("not issued for the host name \"127.0.0.1\""),
            "{}",
            elsewhere.what
        );
    }

    #[test]
    fn the_texts_measured_against_stunnel_are_classified_as_in_the_sources() {
        // librdkafka 2.12 with OpenSSL 3.0 at log level debug (the binary's default filter
        // makes rust-rdkafka raise librdkafka's log_level, which adds OpenSSL's file:line).
        let handshake = cause(
            Code::SSL,
            "ssl://127.0.0.1:45795/bootstrap: SSL handshake failed: \
             ../ssl/statem/statem_clnt.c:1889:tls_post_process_server_certificate \
             error:0A000086:SSL routines::certificate verify failed: broker certificate could \
             not be verified, verify that ssl.ca.location is correctly configured or root CA \
             certificates are installed (install ca-certificates package) (after 1ms in state \
             SSL_HANDSHAKE)",
        );
        assert_eq!(handshake.problem, Problem::CertificateRefused);
        // The same failure seen on the socket's write: a transport error without the prefix.
        let transport = cause(
            Code::BrokerTransportFailure,
            "ssl://127.0.0.1:39083/bootstrap: \
             ../ssl/statem/statem_clnt.c:1889:tls_post_process_server_certificate \
             error:0A000086:SSL routines::certificate verify failed (after 3ms in state \
             SSL_HANDSHAKE)",
        );
        assert_eq!(transport.problem, Problem::CertificateRefused);
        // TLS 1.3 with stunnel `verify = 2` and no client certificate.
        let required = cause(
            Code::BrokerTransportFailure,
            "ssl://127.0.0.1:37385/bootstrap: Receive failed: \
             ../ssl/record/rec_layer_s3.c:1602:ssl3_read_bytes error:0A00045C:SSL \
             routines::tlsv13 alert certificate required: SSL alert number 116 (after 0ms in \
             state APIVERSION_QUERY)",
        );
        assert_eq!(required.problem, Problem::ClientCertificateRefused);
        // A plaintext client at a TLS listener: only logged, at info level.
        let plain = cause(
            Code::BrokerTransportFailure,
            "127.0.0.1:45795/bootstrap: Disconnected: connection reset by peer (after 14ms in \
             state APIVERSION_QUERY)",
        );
        assert_eq!(plain.problem, Problem::TlsOrSaslExpected);
        // A TLS client at a plaintext listener: logged at warning level after 30 s.
        let unanswered = cause(
            Code::BrokerTransportFailure,
            "ssl://127.0.0.1:9092/bootstrap: Connection setup timed out in state SSL_HANDSHAKE \
             (after 30027ms in state SSL_HANDSHAKE)",
        );
        assert_eq!(unanswered.problem, Problem::TlsHandshakeUnanswered);
        assert!(unanswered.fix.contains("security.protocol"));
    }

    #[test]
    fn openssl_verify_errors_map_to_what_an_operator_fixes() {
        assert_eq!(verdict_of_x509_error(0), None);
        assert_eq!(verdict_of_x509_error(62), Some(Problem::HostNameMismatch));
        assert_eq!(verdict_of_x509_error(10), Some(Problem::CertificateExpired));
        assert_eq!(verdict_of_x509_error(9), Some(Problem::CertificateExpired));
        for untrusted in [2, 18, 19, 20, 21] {
            assert_eq!(
                verdict_of_x509_error(untrusted),
                Some(Problem::CertificateNotTrusted)
            );
        }
        assert_eq!(verdict_of_x509_error(23), None, "revoked: no refinement");
    }

    #[test]
    fn a_verification_after_the_handshake_quotes_openssl_and_is_classified_from_it() {
        let mismatch = cause(
            Code::SSL,
            "ssl://kafka-1:9093/1: Failed to verify broker certificate: Hostname mismatch \
             (after 4ms in state SSL_HANDSHAKE)",
        );
        assert_eq!(mismatch.problem, Problem::HostNameMismatch);
        assert!(mismatch.what.contains("\"kafka-1\""));
        let expired = cause(
            Code::SSL,
            "ssl://kafka-1:9093/1: Failed to verify broker certificate: certificate has expired",
        );
        assert_eq!(expired.problem, Problem::CertificateExpired);
    }

    #[test]
    fn a_refused_client_certificate_is_told_apart_from_an_untrusted_broker() {
        for reason in [
            // TLS 1.3: the server's alert arrives after the handshake, on the first read.
            "ssl://127.0.0.1:40123/bootstrap: SSL transport error: error:0A00045C:SSL \
             routines::tlsv13 alert certificate required (after 2ms in state APIVERSION_QUERY)",
            "ssl://127.0.0.1:40123/bootstrap: SSL handshake failed: error:0A000418:SSL \
             routines::tlsv1 alert unknown ca (after 2ms in state SSL_HANDSHAKE)",
            "ssl://127.0.0.1:40123/bootstrap: error:0A000412:SSL routines::sslv3 alert bad \
             certificate (after 1ms in state APIVERSION_QUERY)",
        ] {
            let cause = cause(Code::BrokerTransportFailure, reason);
            assert_eq!(cause.problem, Problem::ClientCertificateRefused, "{reason}");
            assert_eq!(
                cause.fix,
                "check ssl.certificate.location / --kafka-ssl-cert-file and ssl.key.location / \
                 --kafka-ssl-key-file"
            );
        }
    }

    #[test]
    fn files_librdkafka_cannot_read_at_start_name_their_setting() {
        let identity = ClientIdentity::default();
        // As measured: a key file that does not exist.
        let key = classify_creation(
            "ssl.key.location failed: error:0A080002:SSL routines::system lib",
            &identity,
        )
        .unwrap();
        assert_eq!(key.problem, Problem::KeyUnreadable);
        assert!(key.fix.starts_with("check ssl.key.location"));
        let ca = classify_creation(
            "ssl.ca.location failed: error:05880002:x509 certificate routines::system lib",
            &identity,
        )
        .unwrap();
        assert_eq!(ca.problem, Problem::AuthorityUnreadable);
        assert_eq!(ca.problem.unreadable_file(), Some("ssl.ca.location"));
        assert_eq!(key.problem.unreadable_file(), Some("ssl.key.location"));
        assert!(ca.fix.contains("--kafka-ssl-ca-file"));
        assert_eq!(
            classify_creation("Invalid value for configuration property", &identity),
            None
        );
    }

    #[test]
    fn speaking_tls_to_a_plain_listener_and_plain_to_a_tls_one_name_security_protocol() {
        for reason in [
            "ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: error:0A00010B:SSL \
             routines::wrong version number (after 1ms in state SSL_HANDSHAKE)",
            "ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: Disconnected: connecting to \
             a PLAINTEXT broker listener? (after 1ms in state SSL_HANDSHAKE)",
        ] {
            let cause = cause(Code::BrokerTransportFailure, reason);
            assert_eq!(cause.problem, Problem::NotTls, "{reason}");
            assert!(cause.fix.contains("security.protocol"));
        }
        let plain = cause(
            Code::BrokerTransportFailure,
            "127.0.0.1:9093/bootstrap: Disconnected while requesting ApiVersion: might be caused \
             by incorrect security.protocol configuration (connecting to a SSL listener?) or \
             broker version is < 0.10 (see api.version.request) (after 2ms in state \
             APIVERSION_QUERY)",
        );
        assert_eq!(plain.problem, Problem::TlsOrSaslExpected);
        assert_eq!(plain.kind, CauseKind::Tls);
    }

    #[test]
    fn brokers_that_cannot_be_reached_are_unreachable() {
        let refused = cause(
            Code::BrokerTransportFailure,
            "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused \
             (after 0ms in state CONNECT)",
        );
        assert_eq!(refused.problem, Problem::Unreachable);
        assert_eq!(refused.kind, CauseKind::Unreachable);
        let unknown = cause(
            Code::Resolve,
            "nowhere.invalid:9092/bootstrap: Failed to resolve 'nowhere.invalid:9092': Name or \
             service not known (after 3ms in state CONNECT)",
        );
        assert_eq!(unknown.problem, Problem::HostNotFound);
        assert!(unknown.fix.contains("--brokers"));
        let all = cause(Code::AllBrokersDown, "1/1 brokers are down");
        assert_eq!(all.problem, Problem::AllBrokersDown);
        assert_eq!(all.broker, None);
    }

    #[test]
    fn connection_error_codes_are_known_without_their_text() {
        for code in [
            Code::Authentication,
            Code::SSL,
            Code::BrokerTransportFailure,
            Code::Resolve,
            Code::AllBrokersDown,
        ] {
            assert!(is_connection_error(code), "{code:?}");
        }
        assert!(!is_connection_error(Code::OffsetOutOfRange));
        assert!(!is_connection_error(Code::TopicAuthorizationFailed));
    }

    #[test]
    fn errors_that_are_not_about_the_connection_are_left_alone() {
        let identity = ClientIdentity::default();
        for (code, reason) in [
            (
                Code::UnknownTopicOrPartition,
                "Subscribed topic not available: tickets: Broker: Unknown topic or partition",
            ),
            (
                Code::PollExceeded,
                "Application maximum poll interval (300000ms) exceeded by 12ms",
            ),
            (Code::OperationTimedOut, "Timed out"),
        ] {
            assert_eq!(classify(code, reason, &identity), None, "{reason}");
        }
    }

    #[test]
    fn the_broker_is_read_from_the_names_librdkafka_gives_it() {
        let at = |host: &str, port| {
            Some(BrokerAddress {
                host: host.into(),
                port,
            })
        };
        assert_eq!(
            broker_of("ssl://kafka-1.example:9093/2: SSL handshake failed: x"),
            at("kafka-1.example", 9093)
        );
        assert_eq!(
            broker_of("127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed"),
            at("127.0.0.1", 9092)
        );
        assert_eq!(
            broker_of("GroupCoordinator: kafka-2:9093: SSL handshake failed: x"),
            at("kafka-2", 9093)
        );
        assert_eq!(
            broker_of("sasl_ssl://[::1]:9093/bootstrap: SASL authentication error: x"),
            at("::1", 9093)
        );
        assert_eq!(broker_of("1/1 brokers are down"), None);
        assert_eq!(
            broker_of(without_thread(
                "[thrd:127.0.0.1:39305/bootstrap]: 127.0.0.1:39305/bootstrap: Disconnected: \
                 connection reset by peer (after 16ms in state APIVERSION_QUERY)"
            )),
            at("127.0.0.1", 39305)
        );
        assert_eq!(
            without_thread("1/1 brokers are down"),
            "1/1 brokers are down"
        );
        assert_eq!(
            BrokerAddress {
                host: "::1".into(),
                port: 9093
            }
            .to_string(),
            "[::1]:9093"
        );
    }

    #[test]
    fn only_a_more_specific_problem_replaces_a_cause() {
        assert!(Problem::CertificateRefused.specificity() > Problem::AllBrokersDown.specificity());
        assert!(
            Problem::HostNameMismatch.specificity() > Problem::CertificateRefused.specificity()
        );
        assert_eq!(
            Problem::InvalidCredentials.specificity(),
            Problem::CertificateNotTrusted.specificity()
        );
    }
}
