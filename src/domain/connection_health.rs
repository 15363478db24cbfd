//! The health of the Kafka connection, shared by the consumer's context (which feeds it
//! librdkafka's errors and statistics on the driver thread) and its readers (`/readyz`, the
//! overview). Pure state behind a lock: every method returns the change it made, if any, so
//! that the caller logs and publishes each change once, never each of librdkafka's retries.
//!
//! The connection is *failing* from an authentication, TLS or reachability error until
//! statistics show a broker up (or partitions are assigned). An error while the latest
//! statistics showed a broker up is only held: one broker of several refusing us is not a
//! failing connection, and the next statistics decide (still none up: failing).

use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::connection::{ClientIdentity, ConnectionCause, Problem};

/// A failing connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failing {
    pub cause: ConnectionCause,
    pub since: DateTime<Utc>,
    /// Errors librdkafka reported since (it retries, and reports an identical error again
    /// only after 30 s).
    pub errors: u64,
    pub last_error_at: DateTime<Utc>,
}

/// What readers are shown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConnectionStatus {
    /// `None` while the connection works (or nothing says otherwise yet).
    pub failing: Option<Failing>,
}

/// A change of the connection's health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// It started failing.
    Failing(Failing),
    /// It still fails, for a reason better known now.
    CauseChanged { from: ConnectionCause, to: Failing },
    /// It works again.
    Recovered(Failing),
}

#[derive(Debug, Default)]
struct State {
    failing: Option<Failing>,
    /// What the latest statistics showed (`None` before the first).
    broker_up: Option<bool>,
    /// An error seen while a broker was up, for the next statistics to decide on.
    held: Option<ConnectionCause>,
}

/// The connection's health; share it in an `Arc`.
#[derive(Debug, Default)]
pub struct ConnectionHealth {
    state: Mutex<State>,
}

impl State {
    /// The connection fails from `now` for `cause`.
    fn start_failing(&mut self, cause: ConnectionCause, now: DateTime<Utc>) -> Change {
        let failing = Failing {
            cause,
            since: now,
            errors: 1,
            last_error_at: now,
        };
        self.failing = Some(failing.clone());
        Change::Failing(failing)
    }
}

impl ConnectionHealth {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent whatever panicked while holding it: every method
        // changes it in one assignment.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What readers are shown now.
    pub fn status(&self) -> ConnectionStatus {
        ConnectionStatus {
            failing: self.state().failing.clone(),
        }
    }

    /// A connection error librdkafka reported.
    pub fn error(&self, cause: ConnectionCause, now: DateTime<Utc>) -> Option<Change> {
        let mut state = self.state();
        if let Some(failing) = &mut state.failing {
            failing.errors += 1;
            failing.last_error_at = now;
            if cause.problem.specificity() <= failing.cause.problem.specificity() {
                if cause.problem == failing.cause.problem {
                    failing.cause.detail = cause.detail;
                }
                return None;
            }
            let from = std::mem::replace(&mut failing.cause, cause);
            return Some(Change::CauseChanged {
                from,
                to: failing.clone(),
            });
        }
        let all_down = cause.problem == Problem::AllBrokersDown;
        if state.broker_up == Some(true) && !all_down {
            let keep = state
                .held
                .as_ref()
                .is_some_and(|held| held.problem.specificity() >= cause.problem.specificity());
            if !keep {
                state.held = Some(cause);
            }
            return None;
        }
        state.held = None;
        Some(state.start_failing(cause, now))
    }

    /// librdkafka's statistics: whether any broker is up.
    pub fn statistics(&self, broker_up: bool, now: DateTime<Utc>) -> Option<Change> {
        let mut state = self.state();
        state.broker_up = Some(broker_up);
        if broker_up {
            state.held = None;
            return state.failing.take().map(Change::Recovered);
        }
        if state.failing.is_some() {
            return None;
        }
        let cause = state.held.take()?;
        Some(state.start_failing(cause, now))
    }

    /// Partitions were assigned: the group coordinator answered, so a broker is up.
    pub fn assigned(&self, now: DateTime<Utc>) -> Option<Change> {
        self.statistics(true, now)
    }

    /// A better known problem for a refused broker certificate (see
    /// [`super::connection::verdict_of_x509_error`]); nothing changes unless the connection
    /// still fails for a certificate refused without a known reason.
    pub fn refine(&self, problem: Problem, identity: &ClientIdentity) -> Option<Change> {
        let mut state = self.state();
        let failing = state.failing.as_mut()?;
        if failing.cause.problem != Problem::CertificateRefused
            || problem == Problem::CertificateRefused
        {
            return None;
        }
        let refined = failing.cause.refined(problem, identity);
        let from = std::mem::replace(&mut failing.cause, refined);
        Some(Change::CauseChanged {
            from,
            to: failing.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::error::RDKafkaErrorCode as Code;

    use super::*;
    use crate::domain::connection::{CauseKind, classify};

    const UNTRUSTED: &str = "ssl://127.0.0.1:40123/bootstrap: SSL handshake failed: \
                             error:0A000086:SSL routines::certificate verify failed: broker \
                             certificate could not be verified (after 3ms in state SSL_HANDSHAKE)";
    const WRONG_PASSWORD: &str = "sasl_ssl://b:9093/1: SASL authentication error: \
                                  Authentication failed during authentication due to invalid \
                                  credentials with SASL mechanism SCRAM-SHA-256";

    fn cause(code: Code, reason: &str) -> ConnectionCause {
        classify(code, reason, &ClientIdentity::default()).expect("a connection cause")
    }

    fn at(second: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + second, 0).unwrap()
    }

    #[test]
    fn the_first_error_starts_a_failure_and_retries_only_count() {
        let health = ConnectionHealth::new();
        let started = health.error(cause(Code::SSL, UNTRUSTED), at(0));
        assert!(matches!(started, Some(Change::Failing(_))), "{started:?}");
        for second in 1..=5 {
            assert_eq!(health.error(cause(Code::SSL, UNTRUSTED), at(second)), None);
            assert_eq!(health.statistics(false, at(second)), None);
        }
        let failing = health.status().failing.expect("failing");
        assert_eq!(failing.errors, 6);
        assert_eq!(failing.since, at(0));
        assert_eq!(failing.last_error_at, at(5));
        assert_eq!(failing.cause.kind, CauseKind::Tls);
    }

    #[test]
    fn a_broker_up_in_the_statistics_ends_the_failure_once() {
        let health = ConnectionHealth::new();
        health.error(cause(Code::Authentication, WRONG_PASSWORD), at(0));
        let recovered = health.statistics(true, at(9));
        let Some(Change::Recovered(failing)) = recovered else {
            panic!("{recovered:?}");
        };
        assert_eq!(failing.since, at(0));
        assert_eq!(health.statistics(true, at(10)), None);
        assert_eq!(health.status(), ConnectionStatus::default());
    }

    #[test]
    fn an_assignment_ends_the_failure_too() {
        let health = ConnectionHealth::new();
        health.error(cause(Code::AllBrokersDown, "1/1 brokers are down"), at(0));
        assert!(matches!(health.assigned(at(3)), Some(Change::Recovered(_))));
    }

    #[test]
    fn an_error_while_another_broker_is_up_waits_for_the_next_statistics() {
        let health = ConnectionHealth::new();
        health.statistics(true, at(0));
        let refused = "ssl://kafka-2:9093/2: Connect to ipv4#10.0.0.2:9093 failed: \
                       Connection refused (after 0ms in state CONNECT)";
        assert_eq!(
            health.error(cause(Code::BrokerTransportFailure, refused), at(1)),
            None
        );
        assert_eq!(health.status().failing, None);
        // The other broker is still up: the held error is dropped.
        assert_eq!(health.statistics(true, at(2)), None);
        assert_eq!(health.statistics(false, at(3)), None);

        // Held again, and this time no broker is up at the next statistics.
        health.statistics(true, at(4));
        health.error(cause(Code::BrokerTransportFailure, refused), at(5));
        let started = health.statistics(false, at(6));
        let Some(Change::Failing(failing)) = started else {
            panic!("{started:?}");
        };
        assert_eq!(failing.since, at(6));
    }

    #[test]
    fn all_brokers_down_fails_at_once_even_after_a_broker_was_up() {
        let health = ConnectionHealth::new();
        health.statistics(true, at(0));
        assert!(matches!(
            health.error(cause(Code::AllBrokersDown, "1/1 brokers are down"), at(1)),
            Some(Change::Failing(_))
        ));
    }

    #[test]
    fn a_more_specific_cause_replaces_a_vaguer_one_but_not_the_other_way_round() {
        let health = ConnectionHealth::new();
        health.error(cause(Code::AllBrokersDown, "1/1 brokers are down"), at(0));
        let changed = health.error(cause(Code::SSL, UNTRUSTED), at(1));
        let Some(Change::CauseChanged { from, to }) = changed else {
            panic!("{changed:?}");
        };
        assert_eq!(from.problem, Problem::AllBrokersDown);
        assert_eq!(to.cause.problem, Problem::CertificateRefused);
        assert_eq!(to.since, at(0), "the failure goes on");
        assert_eq!(
            health.error(cause(Code::AllBrokersDown, "1/1 brokers are down"), at(2)),
            None
        );
        assert_eq!(
            health.status().failing.unwrap().cause.problem,
            Problem::CertificateRefused
        );
    }

    #[test]
    fn a_verdict_refines_a_refused_certificate_once_and_retries_keep_it() {
        let health = ConnectionHealth::new();
        let identity = ClientIdentity::default();
        assert_eq!(
            health.refine(Problem::HostNameMismatch, &identity),
            None,
            "nothing fails"
        );
        health.error(cause(Code::SSL, UNTRUSTED), at(0));
        let refined = health.refine(Problem::HostNameMismatch, &identity);
        assert!(
            matches!(&refined, Some(Change::CauseChanged { to, .. })
                if to.cause.problem == Problem::HostNameMismatch),
            "{refined:?}"
        );
        assert_eq!(
            health.refine(Problem::CertificateNotTrusted, &identity),
            None
        );
        // librdkafka's next retry says "verify failed" again: the verdict stays.
        assert_eq!(health.error(cause(Code::SSL, UNTRUSTED), at(30)), None);
        let failing = health.status().failing.unwrap();
        assert_eq!(failing.cause.problem, Problem::HostNameMismatch);
        assert_eq!(failing.errors, 2);
    }

    #[test]
    fn before_any_statistics_an_error_fails_at_once() {
        let health = ConnectionHealth::new();
        let refused = "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection \
                       refused (after 0ms in state CONNECT)";
        assert!(matches!(
            health.error(cause(Code::BrokerTransportFailure, refused), at(0)),
            Some(Change::Failing(_))
        ));
    }
}
