//! The Kafka connection's health as the service reports it: librdkafka's errors and statistics
//! go to the shared [`ConnectionHealth`]; each change is logged once (a warning when the
//! connection starts failing or its cause becomes clearer, an info line when it works again)
//! and published as metrics, never once per librdkafka retry. A refused broker certificate
//! gets a handshake of our own ([`super::tls_probe`]) to say why.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::statistics::Statistics;

use super::tls_probe::{self, Trust};
use crate::domain::connection::{self, CauseKind, ClientIdentity, Problem, verdict_of_x509_error};
use crate::domain::connection_health::{Change, ConnectionHealth};
use crate::kafka::timeouts::PROBE_TIMEOUT;
use crate::metrics::Metrics;

/// Who the client is, as far as a message may say: `sasl.mechanism` and `sasl.username` of
/// `config` (never `sasl.password`).
pub fn identity_of(config: &ClientConfig) -> ClientIdentity {
    let sasl = config
        .get("security.protocol")
        .is_some_and(|p| p.to_ascii_lowercase().starts_with("sasl"));
    ClientIdentity {
        sasl_mechanism: config
            .get("sasl.mechanism")
            .or_else(|| config.get("sasl.mechanisms"))
            .map(str::to_owned)
            .or_else(|| sasl.then(|| "GSSAPI".to_owned())),
        sasl_username: config.get("sasl.username").map(str::to_owned),
    }
}

/// Whether librdkafka's statistics show a broker up (its internal pseudo-broker aside).
pub fn any_broker_up(statistics: &Statistics) -> bool {
    statistics
        .brokers
        .values()
        .any(|b| b.source != "internal" && b.state == "UP")
}

/// Feeds the shared health and reports its changes.
pub struct HealthReporter {
    health: Arc<ConnectionHealth>,
    identity: ClientIdentity,
    trust: Option<Trust>,
    metrics: Metrics,
    /// A handshake of our own is under way.
    probing: Arc<AtomicBool>,
}

impl HealthReporter {
    /// A reporter for a client configured with `config`.
    pub fn new(health: Arc<ConnectionHealth>, config: &ClientConfig, metrics: Metrics) -> Self {
        metrics.set_kafka_connection_failing(None);
        HealthReporter {
            health,
            identity: identity_of(config),
            trust: Trust::of(config),
            metrics,
            probing: Arc::new(AtomicBool::new(false)),
        }
    }

    /// An error librdkafka reported; false when it is not about the connection (for the
    /// caller to report as it did).
    pub fn error(&self, code: RDKafkaErrorCode, reason: &str) -> bool {
        let Some(cause) = connection::classify(code, reason, &self.identity) else {
            return false;
        };
        // "All brokers down" sums up the errors of the brokers, and librdkafka 2.12 repeats it
        // at every re-bootstrap (about 20 a second while no broker accepts us): it is not
        // counted as one more error of a connection.
        if cause.problem != Problem::AllBrokersDown {
            self.metrics.observe_kafka_connection_error(cause.kind);
        }
        tracing::debug!(
            cause = cause.kind.as_str(),
            code = ?code,
            reason,
            "kafka connection error"
        );
        let broker = cause.broker.clone();
        let Some(change) = self.health.error(cause, chrono::Utc::now()) else {
            return true;
        };
        let refused = match &change {
            Change::Failing(failing) | Change::CauseChanged { to: failing, .. } => {
                failing.cause.problem == Problem::CertificateRefused
            }
            Change::Recovered(_) => false,
        };
        match (refused, broker) {
            (true, Some(broker)) => self.probe(broker, change),
            _ => report(&self.metrics, &change),
        }
        true
    }

    /// A broker failure librdkafka only logged (below error level, so without an error
    /// event): only a TLS or SASL mismatch it reveals is taken (a plaintext client dropped at
    /// its first request, a TLS handshake never answered); plain disconnects are left to the
    /// errors that follow them.
    pub fn logged_failure(&self, message: &str) {
        let Some(cause) = connection::classify(
            RDKafkaErrorCode::BrokerTransportFailure,
            connection::without_thread(message),
            &self.identity,
        ) else {
            return;
        };
        if cause.kind == CauseKind::Unreachable {
            return;
        }
        self.metrics.observe_kafka_connection_error(cause.kind);
        if let Some(change) = self.health.error(cause, chrono::Utc::now()) {
            report(&self.metrics, &change);
        }
    }

    /// librdkafka's statistics (once a second).
    pub fn statistics(&self, statistics: &Statistics) {
        let up = any_broker_up(statistics);
        if let Some(change) = self.health.statistics(up, chrono::Utc::now()) {
            report(&self.metrics, &change);
        }
    }

    /// Partitions were assigned.
    pub fn assigned(&self) {
        if let Some(change) = self.health.assigned(chrono::Utc::now()) {
            report(&self.metrics, &change);
        }
    }

    /// Asks the broker's certificate why it was refused, off the driver thread, one handshake
    /// at a time, and reports `change` (which made the cause a refused certificate). A failure
    /// that starts is reported once, with the reason when the handshake tells it.
    fn probe(&self, broker: connection::BrokerAddress, change: Change) {
        let Some(trust) = self.trust.clone() else {
            return report(&self.metrics, &change);
        };
        if self.probing.swap(true, Ordering::AcqRel) {
            return report(&self.metrics, &change);
        }
        // The gauge at once; the log line may wait for the handshake.
        if let Change::Failing(failing) = &change {
            self.metrics
                .set_kafka_connection_failing(Some(failing.cause.kind));
        } else {
            report(&self.metrics, &change);
        }
        let (health, identity, metrics, probing) = (
            self.health.clone(),
            self.identity.clone(),
            self.metrics.clone(),
            self.probing.clone(),
        );
        let deferred = change.clone();
        let spawned = std::thread::Builder::new()
            .name("kafka-tls-probe".into())
            .spawn(move || {
                let problem = match tls_probe::verify_result(&broker, &trust, PROBE_TIMEOUT) {
                    Ok(code) => {
                        tracing::debug!(broker = %broker, verify_result = code, "broker certificate probed");
                        verdict_of_x509_error(code)
                    }
                    Err(error) => {
                        tracing::debug!(
                            broker = %broker,
                            error = %crate::error_text::Chain(&error),
                            "broker certificate not probed"
                        );
                        None
                    }
                };
                let refined = problem.and_then(|problem| health.refine(problem, &identity));
                match (change, refined) {
                    (Change::Failing(_), Some(Change::CauseChanged { to, .. })) => {
                        report(&metrics, &Change::Failing(to))
                    }
                    (Change::Failing(failing), _) => {
                        // Unless it recovered meanwhile (its info line is out already).
                        let still = health
                            .status()
                            .failing
                            .is_some_and(|now| now.since == failing.since);
                        if still {
                            report(&metrics, &Change::Failing(failing));
                        }
                    }
                    (_, Some(refined)) => report(&metrics, &refined),
                    (_, None) => {}
                }
                probing.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            self.probing.store(false, Ordering::Release);
            if matches!(deferred, Change::Failing(_)) {
                report(&self.metrics, &deferred);
            }
        }
    }
}

/// Logs a change once and publishes it as metrics.
fn report(metrics: &Metrics, change: &Change) {
    match change {
        Change::Failing(failing) => {
            metrics.set_kafka_connection_failing(Some(failing.cause.kind));
            tracing::warn!(
                cause = failing.cause.kind.as_str(),
                problem = failing.cause.problem.as_str(),
                message = %failing.cause.message(),
                detail = %failing.cause.detail,
                "kafka connection failing; nothing is read or committed until it works"
            );
        }
        Change::CauseChanged { from, to } => {
            metrics.set_kafka_connection_failing(Some(to.cause.kind));
            tracing::warn!(
                cause = to.cause.kind.as_str(),
                problem = to.cause.problem.as_str(),
                message = %to.cause.message(),
                was = from.problem.as_str(),
                "kafka connection still failing; its cause is clearer"
            );
        }
        Change::Recovered(failing) => {
            metrics.set_kafka_connection_failing(None);
            let failed_for = (chrono::Utc::now() - failing.since)
                .to_std()
                .unwrap_or_default();
            tracing::info!(
                cause = failing.cause.kind.as_str(),
                problem = failing.cause.problem.as_str(),
                failed_for = %humantime::format_duration(Duration::from_secs(failed_for.as_secs())),
                errors = failing.errors,
                "kafka connection works again"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_the_mechanism_and_user_never_the_password() {
        let mut config = ClientConfig::new();
        config
            .set("security.protocol", "SASL_SSL")
            .set("sasl.mechanism", "SCRAM-SHA-512")
            .set("sasl.username", "history")
            .set("sasl.password", "hunter2");
        let identity = identity_of(&config);
        assert_eq!(identity.sasl_mechanism.as_deref(), Some("SCRAM-SHA-512"));
        assert_eq!(identity.sasl_username.as_deref(), Some("history"));
        assert!(!format!("{identity:?}").contains("hunter2"));

        let mut kerberos = ClientConfig::new();
        kerberos.set("security.protocol", "sasl_plaintext");
        assert_eq!(
            identity_of(&kerberos).sasl_mechanism.as_deref(),
            Some("GSSAPI"),
            "librdkafka's default mechanism"
        );
        assert_eq!(identity_of(&ClientConfig::new()), ClientIdentity::default());
    }

    #[test]
    fn a_refused_certificate_is_counted_and_sets_the_gauge_for_tls_once() {
        let metrics = Metrics::new();
        let health = Arc::new(ConnectionHealth::new());
        let reporter = HealthReporter::new(health.clone(), &ClientConfig::new(), metrics.clone());
        let reason = "ssl://127.0.0.1:1/bootstrap: SSL handshake failed: error:0A000086:SSL \
                      routines::certificate verify failed (after 3ms in state SSL_HANDSHAKE)";
        for _ in 0..3 {
            assert!(reporter.error(RDKafkaErrorCode::SSL, reason));
        }
        assert!(!reporter.error(RDKafkaErrorCode::OperationTimedOut, "Timed out"));
        let text = metrics.render();
        assert!(
            text.contains("history_kafka_connection_errors_total{cause=\"tls\"} 3"),
            "{text}"
        );
        assert!(text.contains("history_kafka_connection_failing{cause=\"tls\"} 1"));
        assert!(text.contains("history_kafka_connection_failing{cause=\"authentication\"} 0"));
        reporter.assigned();
        assert!(
            metrics
                .render()
                .contains("history_kafka_connection_failing{cause=\"tls\"} 0")
        );
        assert_eq!(health.status().failing, None);
    }
}
