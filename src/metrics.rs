//! Prometheus metrics on a private registry (parallel tests never collide). Names are
//! `history_*` with units; labels come from bounded sets only (partition, outcome, cause,
//! reason, result, kind, method), never from event ids.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use crate::domain::CauseKind;
use crate::domain::DuplicateCause;
use crate::domain::ObservedOffsets;
use crate::domain::{Outcome, RejectReason};

struct Families {
    records: IntCounterVec,
    duplicates: IntCounterVec,
    dead_letters: IntCounterVec,
    offset_resets: IntCounterVec,
    offset_reset_gap: IntCounterVec,
    backlog: IntGaugeVec,
    oldest_unknown: prometheus::GaugeVec,
    watermark: IntGaugeVec,
    committed: IntGaugeVec,
    high_watermark: IntGaugeVec,
    lag: IntGaugeVec,
    fetch_paused: IntGaugeVec,
    stuck: IntGaugeVec,
    dead_letter_guard: IntGaugeVec,
    offset_reset_held: IntGaugeVec,
    lag_seconds: prometheus::GaugeVec,
    transaction: HistogramVec,
    commits: IntCounterVec,
    rebalances: IntCounterVec,
    kafka_errors: IntCounter,
    transactions_in_flight: IntGauge,
    kafka_connection_errors: IntCounterVec,
    kafka_connection_failing: IntGaugeVec,
    admin_auth_failures: IntCounterVec,
    admin_anonymous_reads_refused: IntCounter,
}

/// The service's metrics; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    families: Arc<Families>,
    described: Arc<[FamilyDescription]>,
}

/// One metric family of the service as it is registered: what `docs/metrics.md` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyDescription {
    pub name: String,
    /// `counter`, `gauge`, `histogram`, `summary` or `untyped`.
    pub kind: &'static str,
    pub help: String,
    /// The labels of its series, in order; none for a single series.
    pub labels: Vec<String>,
}

/// The registry being filled, with a description of every family registered, in order.
struct Registering {
    registry: Registry,
    described: RefCell<Vec<FamilyDescription>>,
}

impl Registering {
    fn register<C: prometheus::core::Collector + Clone + 'static>(&self, collector: C) -> C {
        self.described.borrow_mut().extend(describe(&collector));
        self.registry
            .register(Box::new(collector.clone()))
            .expect("metric names are unique");
        collector
    }
}

/// The families of `collector`: names, help and labels from its descriptions, types from what
/// it collects (a family without series yet is collected too, empty, with its type).
fn describe(collector: &dyn prometheus::core::Collector) -> Vec<FamilyDescription> {
    let collected = collector.collect();
    collector
        .desc()
        .into_iter()
        .map(|desc| FamilyDescription {
            name: desc.fq_name.clone(),
            kind: collected
                .iter()
                .find(|family| family.name() == desc.fq_name)
                .map_or("untyped", |family| kind_name(family.get_field_type())),
            help: desc.help.clone(),
            labels: desc.variable_labels.clone(),
        })
        .collect()
}

fn kind_name(kind: prometheus::proto::MetricType) -> &'static str {
    use prometheus::proto::MetricType;
    match kind {
        MetricType::COUNTER => "counter",
        MetricType::GAUGE => "gauge",
        MetricType::HISTOGRAM => "histogram",
        MetricType::SUMMARY => "summary",
        MetricType::UNTYPED => "untyped",
    }
}

impl Metrics {
    /// Creates the metrics on a new private registry (with process metrics where supported).
    pub fn new() -> Metrics {
        let registry = Registry::new();
        // The process's own metrics are the prometheus crate's, not described with ours.
        #[cfg(target_os = "linux")]
        {
            let process = prometheus::process_collector::ProcessCollector::for_self();
            let _ = registry.register(Box::new(process));
        }
        let r = &Registering {
            registry,
            described: RefCell::new(Vec::new()),
        };
        let counter = |name: &str, help: &str, labels: &[&str]| {
            r.register(IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"))
        };
        let gauge = |name: &str, help: &str| {
            r.register(
                IntGaugeVec::new(Opts::new(name, help), &["partition"]).expect("valid metric"),
            )
        };
        let families = Families {
            records: counter(
                "history_records_total",
                "Records resolved or attempted, by partition and outcome (applied, already_applied, dead_lettered, unknown).",
                &["partition", "outcome"],
            ),
            duplicates: counter(
                "history_duplicates_total",
                "Duplicate deliveries by partition and cause (redelivery, republish, conflicting, unclassified).",
                &["partition", "cause"],
            ),
            dead_letters: counter(
                "history_dead_letters_total",
                "Records stored in dead_letters, by partition and reason.",
                &["partition", "reason"],
            ),
            offset_resets: counter(
                "history_offset_resets_total",
                "Positions found out of their partition's log (records gone unread), by partition and what the service did (hold, continue); each is recorded in offset_resets.",
                &["partition", "policy"],
            ),
            offset_reset_gap: counter(
                "history_offset_reset_gap_offsets_total",
                "Offsets passed over unread because they were no longer in the partition's log, by partition (counted when reading goes on past a recorded gap).",
                &["partition"],
            ),
            offset_reset_held: gauge(
                "history_partition_offset_reset_held",
                "1 while the partition is held at a recorded offset reset (its position is no longer in the log; --offset-reset-policy hold) until an operator rewinds it live.",
            ),
            backlog: gauge(
                "history_unknown_backlog_records",
                "Records whose outcome is Unknown and that wait for a retry.",
            ),
            oldest_unknown: r.register(
                prometheus::GaugeVec::new(
                    Opts::new(
                        "history_oldest_unknown_age_seconds",
                        "Age of the oldest Unknown record of the partition (0 when none).",
                    ),
                    &["partition"],
                )
                .expect("valid metric"),
            ),
            watermark: gauge(
                "history_watermark_offset",
                "Last contiguous resolved offset + 1: the position that may be committed.",
            ),
            committed: gauge(
                "history_committed_offset",
                "The offset committed to Kafka for the partition.",
            ),
            high_watermark: gauge(
                "history_high_watermark_offset",
                "The partition's high watermark (last stable offset for read_committed).",
            ),
            lag: gauge(
                "history_lag_records",
                "Records between the committed offset and the end of the partition.",
            ),
            fetch_paused: gauge(
                "history_partition_fetch_paused",
                "1 while the partition takes no new records (operator pause, or its Unknown backlog \
                 at its bound); its prefetch queue fills and librdkafka stops fetching it.",
            ),
            stuck: gauge(
                "history_partition_stuck",
                "1 while the partition is stuck (old Unknown record, or watermark stalled with lag).",
            ),
            dead_letter_guard: gauge(
                "history_partition_dead_letter_guard_engaged",
                "1 while dead-lettering is stopped on the partition: more records in a row than \
                 --max-consecutive-rejections were rejected by the database; they wait as Unknown.",
            ),
            lag_seconds: r.register(
                prometheus::GaugeVec::new(
                    Opts::new(
                        "history_lag_seconds",
                        "Age of the newest record taken up while records wait (0 when caught up).",
                    ),
                    &["partition"],
                )
                .expect("valid metric"),
            ),
            transaction: r.register(
                HistogramVec::new(
                    HistogramOpts::new(
                        "history_transaction_duration_seconds",
                        "Duration of one record's database work, by outcome.",
                    )
                    .buckets(vec![
                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                        5.0, 10.0,
                    ]),
                    &["outcome"],
                )
                .expect("valid metric"),
            ),
            transactions_in_flight: r.register(
                IntGauge::new(
                    "history_transactions_in_flight",
                    "Inbox transactions of records the member runs now, over all its partitions; \
                     a partition's next batch joins its running one only while this is below \
                     --transactions-in-flight.",
                )
                .expect("valid metric"),
            ),
            commits: counter(
                "history_offset_commits_total",
                "Offset commits to Kafka by result (ok, error).",
                &["result"],
            ),
            rebalances: counter(
                "history_rebalances_total",
                "Rebalance callbacks by kind (assign, revoke, lost).",
                &["kind"],
            ),
            kafka_errors: r.register(
                IntCounter::new(
                    "history_kafka_errors_total",
                    "Errors reported by the Kafka client (broker down, timeouts, ...).",
                )
                .expect("valid metric"),
            ),
            kafka_connection_errors: counter(
                "history_kafka_connection_errors_total",
                "Kafka connection errors by cause (authentication, tls, unreachable); librdkafka \
                 reports an identical error of a broker again only after 30 s.",
                &["cause"],
            ),
            kafka_connection_failing: r.register(
                IntGaugeVec::new(
                    Opts::new(
                        "history_kafka_connection_failing",
                        "1 for the cause while the Kafka connection fails (no broker up since an \
                         authentication, TLS or reachability error); nothing is read or committed.",
                    ),
                    &["cause"],
                )
                .expect("valid metric"),
            ),
            admin_auth_failures: counter(
                "history_admin_auth_failures_total",
                "Admin tokens refused, by how they were presented (sign_in, bearer) and why (wrong_token, throttled).",
                &["method", "reason"],
            ),
            admin_anonymous_reads_refused: r.register(
                IntCounter::new(
                    "history_admin_anonymous_reads_refused_total",
                    "Admin page loads refused because readers who did not sign in exceeded their limit.",
                )
                .expect("valid metric"),
            ),
        };
        // Every refusal exists from the start: a rate over them has a series before the first.
        for method in ["sign_in", "bearer"] {
            for reason in ["wrong_token", "throttled"] {
                families
                    .admin_auth_failures
                    .with_label_values(&[method, reason]);
            }
        }
        // Every cause exists from the start (at 0): a rate and the alert see the first failure.
        for cause in CauseKind::ALL {
            families
                .kafka_connection_errors
                .with_label_values(&[cause.as_str()]);
            families
                .kafka_connection_failing
                .with_label_values(&[cause.as_str()]);
        }
        // Both results exist from the start, so a rate over commit errors has a series to read.
        for result in ["ok", "error"] {
            families.commits.with_label_values(&[result]);
        }
        Metrics {
            registry: r.registry.clone(),
            families: Arc::new(families),
            described: r.described.take().into(),
        }
    }

    /// Every `history_*` family, in the order registered: name, type, help and labels.
    pub fn described(&self) -> &[FamilyDescription] {
        &self.described
    }

    /// The registry, for the exporter and for tests.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Per partition, the committed offset `history_committed_offset` reports, read from
    /// that family alone (no gather of the registry, whose process collector reads `/proc`).
    pub fn committed_offsets(&self) -> Vec<(i32, i64)> {
        use prometheus::core::Collector;
        self.families
            .committed
            .collect()
            .iter()
            .flat_map(|family| family.get_metric())
            .filter_map(|metric| {
                let partition = metric
                    .get_label()
                    .iter()
                    .find(|l| l.name() == "partition")?
                    .value()
                    .parse()
                    .ok()?;
                Some((partition, metric.get_gauge().value() as i64))
            })
            .collect()
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buffer)
            .expect("text encoding of gathered metrics");
        String::from_utf8(buffer).expect("exposition is UTF-8")
    }

    pub fn observe_dead_letter(&self, partition: i32, reason: RejectReason) {
        self.families
            .dead_letters
            .with_label_values(&[&partition.to_string(), reason.as_str()])
            .inc();
    }

    /// A position out of its partition's log was found (and is being recorded).
    pub fn observe_offset_reset(&self, partition: i32, policy: &str) {
        self.families
            .offset_resets
            .with_label_values(&[&partition.to_string(), policy])
            .inc();
    }

    /// Makes a newly assigned partition's offset reset series exist at 0, so that a query or
    /// an alert sees the first reset as an increase.
    pub fn init_offset_resets(&self, partition: i32) {
        let p = partition.to_string();
        let f = &self.families;
        for policy in crate::domain::offset_reset::ResetPolicy::ALL {
            f.offset_resets.with_label_values(&[&p, policy.as_str()]);
        }
        f.offset_reset_gap.with_label_values(&[&p]);
        f.offset_reset_held.with_label_values(&[&p]).set(0);
    }

    /// Whether the partition is held at a recorded offset reset.
    pub fn set_offset_reset_held(&self, partition: i32, held: bool) {
        self.families
            .offset_reset_held
            .with_label_values(&[&partition.to_string()])
            .set(i64::from(held));
    }

    /// Reading went on past a recorded gap of `offsets` offsets.
    pub fn observe_offset_reset_gap(&self, partition: i32, offsets: u64) {
        self.families
            .offset_reset_gap
            .with_label_values(&[&partition.to_string()])
            .inc_by(offsets);
    }

    pub fn set_backlog(&self, partition: i32, records: usize, oldest: Duration) {
        let p = partition.to_string();
        self.families
            .backlog
            .with_label_values(&[&p])
            .set(records as i64);
        self.families
            .oldest_unknown
            .with_label_values(&[&p])
            .set(oldest.as_secs_f64());
    }

    pub fn set_watermark(&self, partition: i32, watermark: Option<i64>, committed: Option<i64>) {
        let p = partition.to_string();
        if let Some(w) = watermark {
            self.families.watermark.with_label_values(&[&p]).set(w);
        }
        if let Some(c) = committed {
            self.families.committed.with_label_values(&[&p]).set(c);
        }
    }

    pub fn set_observed(&self, offsets: &ObservedOffsets) {
        let p = offsets.partition.to_string();
        let end = if offsets.last_stable >= 0 {
            offsets.last_stable
        } else {
            offsets.high_watermark
        };
        if end >= 0 {
            self.families
                .high_watermark
                .with_label_values(&[&p])
                .set(end);
            if offsets.committed >= 0 {
                self.families
                    .lag
                    .with_label_values(&[&p])
                    .set((end - offsets.committed).max(0));
            }
        }
    }

    pub fn set_fetch_paused(&self, partition: i32, paused: bool) {
        self.families
            .fetch_paused
            .with_label_values(&[&partition.to_string()])
            .set(i64::from(paused));
    }

    pub fn set_partition_health(&self, partition: i32, stuck: bool, lag_seconds: f64) {
        let p = partition.to_string();
        self.families
            .stuck
            .with_label_values(&[&p])
            .set(i64::from(stuck));
        self.families
            .lag_seconds
            .with_label_values(&[&p])
            .set(lag_seconds);
    }

    /// Whether the partition's guard against mass dead-lettering is engaged.
    pub fn set_dead_letter_guard(&self, partition: i32, engaged: bool) {
        self.families
            .dead_letter_guard
            .with_label_values(&[&partition.to_string()])
            .set(i64::from(engaged));
    }

    pub fn observe_commit(&self, ok: bool) {
        self.families
            .commits
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .inc();
    }

    pub fn observe_rebalance(&self, kind: &str) {
        self.families.rebalances.with_label_values(&[kind]).inc();
    }

    /// The member's count of transactions in flight (see `actors::partition::transactions`).
    pub fn transactions_in_flight(&self) -> IntGauge {
        self.families.transactions_in_flight.clone()
    }

    pub fn observe_kafka_error(&self) {
        self.families.kafka_errors.inc();
    }

    /// A Kafka connection error of `cause`.
    pub fn observe_kafka_connection_error(&self, cause: CauseKind) {
        self.families
            .kafka_connection_errors
            .with_label_values(&[cause.as_str()])
            .inc();
    }

    /// The Kafka connection fails for `cause` (1 for it, 0 for the others), or works (`None`).
    pub fn set_kafka_connection_failing(&self, cause: Option<CauseKind>) {
        for kind in CauseKind::ALL {
            self.families
                .kafka_connection_failing
                .with_label_values(&[kind.as_str()])
                .set(i64::from(Some(*kind) == cause));
        }
    }

    /// An admin token refused: `method` is `sign_in` or `bearer`, `reason` `wrong_token` or
    /// `throttled`.
    pub fn observe_admin_auth_failure(&self, method: &'static str, reason: &'static str) {
        self.families
            .admin_auth_failures
            .with_label_values(&[method, reason])
            .inc();
    }

    /// An anonymous admin page load refused (over the limit).
    pub fn observe_admin_anonymous_read_refused(&self) {
        self.families.admin_anonymous_reads_refused.inc();
    }

    /// Drops the per-partition gauges of a partition this instance no longer owns, so that
    /// a dashboard summing over instances does not count it twice.
    pub fn forget_partition(&self, partition: i32) {
        let p = partition.to_string();
        let f = &self.families;
        for gauge in [
            &f.backlog,
            &f.watermark,
            &f.committed,
            &f.high_watermark,
            &f.lag,
            &f.fetch_paused,
            &f.stuck,
            &f.dead_letter_guard,
            &f.offset_reset_held,
        ] {
            let _ = gauge.remove_label_values(&[&p]);
        }
        let _ = f.oldest_unknown.remove_label_values(&[&p]);
        let _ = f.lag_seconds.remove_label_values(&[&p]);
    }
}

/// One partition's outcome series, held by its partition actor: each series is looked up once
/// (a lookup formats the partition, hashes the labels and takes the family's lock), then
/// counted through its handle. A series is created on first use, as a lookup would, so the
/// exposition is the same.
pub struct PartitionMetrics {
    metrics: Metrics,
    label: String,
    records: Vec<(Outcome, IntCounter)>,
    transaction: Vec<(Outcome, prometheus::local::LocalHistogram)>,
    duplicates: Vec<(DuplicateCause, IntCounter)>,
}

impl PartitionMetrics {
    /// `count` records of one unit of work ended with `outcome`; the unit took `elapsed`
    /// (observed once per record: the histogram is of database work per record).
    pub fn observe_outcomes(&mut self, outcome: Outcome, count: u64, elapsed: Duration) {
        let f = &self.metrics.families;
        let label = &self.label;
        held(&mut self.records, outcome, || {
            f.records.with_label_values(&[label, outcome.as_str()])
        })
        .inc_by(count);
        // Observed into a local copy and added once: one atomic update per bucket, not three
        // per record.
        let histogram = held(&mut self.transaction, outcome, || {
            f.transaction.with_label_values(&[outcome.as_str()]).local()
        });
        let seconds = elapsed.as_secs_f64();
        for _ in 0..count {
            histogram.observe(seconds);
        }
        histogram.flush();
    }

    pub fn observe_duplicates(&mut self, cause: DuplicateCause, count: u64) {
        let f = &self.metrics.families;
        let label = &self.label;
        held(&mut self.duplicates, cause, || {
            f.duplicates.with_label_values(&[label, cause.as_str()])
        })
        .inc_by(count);
    }
}

/// The handle of `key`, made by `make` the first time.
fn held<K: PartialEq + Copy, H>(
    handles: &mut Vec<(K, H)>,
    key: K,
    make: impl FnOnce() -> H,
) -> &mut H {
    let at = match handles.iter().position(|(k, _)| *k == key) {
        Some(at) => at,
        None => {
            handles.push((key, make()));
            handles.len() - 1
        }
    };
    &mut handles[at].1
}

impl Metrics {
    /// The outcome series of `partition`, for its partition actor to hold.
    pub fn partition(&self, partition: i32) -> PartitionMetrics {
        PartitionMetrics {
            metrics: self.clone(),
            label: partition.to_string(),
            records: Vec::new(),
            transaction: Vec::new(),
            duplicates: Vec::new(),
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_offsets_are_read_per_partition_from_their_family_alone() {
        let metrics = Metrics::new();
        assert!(metrics.committed_offsets().is_empty());
        metrics.set_watermark(3, Some(120), Some(100));
        metrics.set_watermark(0, Some(7), Some(7));
        metrics.set_watermark(1, Some(9), None);
        let mut committed = metrics.committed_offsets();
        committed.sort();
        assert_eq!(committed, vec![(0, 7), (3, 100)]);
    }
}
