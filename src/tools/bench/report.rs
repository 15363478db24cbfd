//! A benchmark's results as values: every end-to-end case with its ceiling 2, the latency and
//! backlog phases, and the series the plots and targets read out of them. No I/O; `targets`
//! judges them, `render` and `charts` turn them into text and pictures.

use std::time::Duration;

use super::machine::Machine;
use super::measure::{Latency, micros_per_record, ratio};
use super::probe::CpuUsage;

/// How the events' ids are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdKind {
    /// `evt-<run>-<seq>`: ordered within a run, as an outbox's sequence gives them.
    #[default]
    Ordered,
    /// UUIDv4 text: random, as most outboxes make them.
    Random,
}

impl IdKind {
    pub fn name(self) -> &'static str {
        match self {
            IdKind::Ordered => "ordered",
            IdKind::Random => "UUIDv4",
        }
    }
}

/// What one end-to-end run varied. The anchor case (default B, `--partitions`, an empty inbox,
/// `--duplicates`, fresh records, ordered ids) belongs to every series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Case {
    pub batch_size: usize,
    pub partitions: i32,
    /// Rows in the inbox (and as many history rows) before the run.
    pub inbox_rows: u64,
    /// Share of the records that republish an earlier event.
    pub duplicates: f64,
    /// A second consumer group re-reading a topic whose events the inbox already holds.
    pub replay: bool,
    /// The kind of the run's event ids (and of the rows already in the inbox).
    pub ids: IdKind,
    /// Batches a partition may have in its database at once (`--batches-in-flight`).
    pub batches_in_flight: usize,
}

impl Case {
    /// What sets this case apart from `anchor`, in words.
    pub fn label(&self, anchor: &Case) -> String {
        if self.replay {
            return "replay: a second group re-reads the topic".into();
        }
        let mut parts = Vec::new();
        if self.batch_size != anchor.batch_size {
            parts.push(format!("B = {}", self.batch_size));
        }
        if self.partitions != anchor.partitions {
            parts.push(format!("{} partitions", self.partitions));
        }
        if self.inbox_rows != anchor.inbox_rows {
            parts.push(format!("{} rows in the inbox", rows(self.inbox_rows)));
        }
        if self.duplicates != anchor.duplicates {
            parts.push(format!("{:.0} % duplicates", self.duplicates * 100.0));
        }
        if self.ids != anchor.ids {
            parts.push(format!("{} ids", self.ids.name()));
        }
        if self.batches_in_flight != anchor.batches_in_flight {
            parts.push(match self.batches_in_flight {
                1 => "1 batch in flight (no pipelining)".to_owned(),
                n => format!("{n} batches in flight"),
            });
        }
        if parts.is_empty() {
            "default (empty inbox)".into()
        } else {
            parts.join(", ")
        }
    }
}

/// End-to-end throughput of one run.
#[derive(Debug, Clone)]
pub struct Throughput {
    pub records: u64,
    pub unique: u64,
    pub elapsed: Duration,
    pub rate: f64,
    pub peak_rss: Option<u64>,
    pub cpu: CpuUsage,
}

impl Throughput {
    /// This process's CPU time per record, in microseconds (its cores busy over the run's
    /// interval, times the interval, over the records); `None` without records.
    pub fn cpu_per_event_us(&self) -> Option<f64> {
        micros_per_record(self.cpu.process, self.elapsed, self.records)
    }

    /// The same of the service's threads alone ([`CpuUsage::service`]).
    pub fn service_cpu_per_event_us(&self) -> Option<f64> {
        micros_per_record(self.cpu.service, self.elapsed, self.records)
    }
}

/// A ceiling: the same records through one side alone.
#[derive(Debug, Clone)]
pub struct CeilingResult {
    pub records: u64,
    /// Concurrent tasks (one per partition's share) and the connections they shared.
    pub tasks: usize,
    pub connections: usize,
    pub elapsed: Duration,
    pub rate: f64,
    pub peak_rss: Option<u64>,
    pub cpu: CpuUsage,
}

/// One case: the service end to end, and the database alone on the same events.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub case: Case,
    pub run: Throughput,
    /// Ceiling 2 in the same database state, where the case has one, run right after the
    /// end-to-end run.
    pub ceiling: Option<CeilingResult>,
    /// The rate of a ceiling 2 of the same events run right before the end-to-end run, where
    /// one was (the default case's runs, see [`bracket`]).
    pub ceiling_before: Option<f64>,
    /// What PostgreSQL did meanwhile, where it was measured (the inbox-size cases).
    pub database: Option<DatabaseState>,
}

impl CaseResult {
    /// Ceiling 2's rate to compare the run with: the mean of the ceilings right before and
    /// right after it where both ran (the machine's drift between them then weighs on both
    /// sides alike), else the one after it.
    pub fn ceiling_rate(&self) -> Option<f64> {
        let after = self.ceiling.as_ref()?.rate;
        Some(
            self.ceiling_before
                .map_or(after, |before| (before + after) / 2.0),
        )
    }

    /// End to end over ceiling 2 ([`CaseResult::ceiling_rate`]).
    pub fn vs_ceiling(&self) -> Option<f64> {
        ratio(self.run.rate, self.ceiling_rate()?)
    }

    /// End to end over the ceiling 2 run right after it alone.
    pub fn vs_ceiling_after(&self) -> Option<f64> {
        ratio(self.run.rate, self.ceiling.as_ref()?.rate)
    }
}

/// Runs of one case that ran in turn, each followed by its ceiling 2 (in time order): each run
/// after the first gets the ceiling that ran right before it, the one after the run before.
/// A run that had one measured before it already keeps it.
pub fn bracket(series: &mut [CaseResult]) {
    for i in 1..series.len() {
        if series[i].ceiling_before.is_none() {
            series[i].ceiling_before = series[i - 1].ceiling.as_ref().map(|c| c.rate);
        }
    }
}

/// Bytes of the two primary-key indexes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexSizes {
    pub inbox: u64,
    pub history: u64,
}

/// What PostgreSQL counted over one run (differences of its statistics; the WAL and the
/// checkpoints are the whole cluster's, the blocks the run's database's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DbActivity {
    /// Events the run handled (records, duplicates included).
    pub events: u64,
    /// Blocks found in shared buffers, and read from the kernel (its page cache or the disk).
    pub blocks_hit: u64,
    pub blocks_read: u64,
    /// The same for the two primary-key indexes alone.
    pub index_hit: u64,
    pub index_read: u64,
    pub wal_bytes: u64,
    /// Full-page images written to the WAL (a page's first change after a checkpoint).
    pub wal_fpi: u64,
    pub checkpoints: u64,
}

impl DbActivity {
    /// Blocks found in shared buffers over blocks asked for.
    pub fn hit_ratio(&self) -> Option<f64> {
        ratio(
            self.blocks_hit as f64,
            (self.blocks_hit + self.blocks_read) as f64,
        )
    }

    /// The same for the primary-key indexes.
    pub fn index_hit_ratio(&self) -> Option<f64> {
        ratio(
            self.index_hit as f64,
            (self.index_hit + self.index_read) as f64,
        )
    }

    pub fn wal_per_event(&self) -> Option<f64> {
        ratio(self.wal_bytes as f64, self.events as f64)
    }

    pub fn fpi_per_event(&self) -> Option<f64> {
        ratio(self.wal_fpi as f64, self.events as f64)
    }
}

/// A case's database: its indexes' size and what the runs into it cost PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseState {
    /// PostgreSQL's `shared_buffers`.
    pub shared_buffers: u64,
    /// How long the prefill took, if there was one.
    pub prefill: Option<std::time::Duration>,
    /// Before the end-to-end run (after any prefill), and after it.
    pub before: IndexSizes,
    pub after: IndexSizes,
    pub run: DbActivity,
    pub ceiling: Option<DbActivity>,
}

/// The service with its database down and a backlog in the topic, then healed.
#[derive(Debug, Clone)]
pub struct BacklogResult {
    pub partitions: i32,
    pub records: u64,
    pub unique: u64,
    pub outage: Duration,
    /// RSS when the service started (broker with the backlog, benchmark's data).
    pub baseline_rss: Option<u64>,
    pub peak_rss: Option<u64>,
    /// RSS once a second during the outage.
    pub rss_samples: Vec<u64>,
    /// Records the service had taken from Kafka, not yet resolved, at the end of the outage.
    pub held: u64,
    /// What it could hold at most: per partition the window, the Unknown bound and a batch.
    pub held_bound: u64,
    /// From the database's restart to the committed offsets reaching the end.
    pub drained_in: Duration,
}

impl BacklogResult {
    /// Peak RSS above the baseline per record held: what a held record costs.
    pub fn bytes_per_held(&self) -> Option<f64> {
        let grown = self.peak_rss?.checked_sub(self.baseline_rss?)?;
        ratio(grown as f64, self.held as f64)
    }
}

/// The backlog phase, or why it did not run.
#[derive(Debug, Clone)]
pub enum Backlog {
    Measured(BacklogResult),
    Skipped(String),
}

/// The default case's records consumed from one topic in plaintext and over TLS
/// (`sslmode=verify-full`), back to back.
#[derive(Debug, Clone)]
pub struct TlsPair {
    pub plain: Throughput,
    pub tls: Throughput,
    /// Which of the two ran first (the order alternates from pair to pair).
    pub tls_first: bool,
}

impl TlsPair {
    /// Over TLS over plaintext.
    pub fn ratio(&self) -> Option<f64> {
        ratio(self.tls.rate, self.plain.rate)
    }
}

/// The TLS phase, or why it did not run.
#[derive(Debug, Clone)]
pub enum TlsCost {
    Measured(Vec<TlsPair>),
    Skipped(String),
}

/// The latency phase: a steady producer at a share of the anchor's rate.
#[derive(Debug, Clone)]
pub struct LatencyResult {
    pub latency: Latency,
    pub window: Duration,
}

/// How busy the machine was (load averages over 1, 5 and 15 minutes).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Load {
    pub at_start: Option<[f64; 3]>,
    pub at_end: Option<[f64; 3]>,
}

/// How the benchmark was set up.
#[derive(Debug, Clone)]
pub struct Setup {
    pub command: String,
    pub release_build: bool,
    pub quick: bool,
    pub events: u64,
    pub partitions: i32,
    pub duplicates: f64,
    pub default_batch: usize,
    /// A throwaway durable cluster (else `--database-url`).
    pub own_database: bool,
    pub commit_interval: Duration,
    /// The service's connection pool (ceiling 2 uses as many connections at most).
    pub db_pool_size: usize,
    pub latency_load: f64,
}

/// Everything one benchmark measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub written_at: chrono::DateTime<chrono::Utc>,
    pub machine: Machine,
    pub load: Load,
    pub setup: Setup,
    /// Every end-to-end case, in the order run; the first is the anchor.
    pub cases: Vec<CaseResult>,
    /// The anchor's other back-to-back runs (the one in `cases` had their median ratio).
    pub anchor_others: Vec<CaseResult>,
    /// The anchor case run once more at the very end: how much the machine drifted.
    pub anchor_again: Option<Throughput>,
    /// Ceiling 1, on the anchor's topic.
    pub kafka_only: CeilingResult,
    pub latency: Option<LatencyResult>,
    /// One backlog run per partition count.
    pub backlog: Vec<Backlog>,
    /// The default case over TLS beside plaintext.
    pub tls: TlsCost,
    /// The replay's ceiling 2 again in the service's shape for it (markers first), where the
    /// replay ran with a ceiling.
    pub replay_markers_first: Option<CeilingResult>,
}

impl Report {
    /// The case every series shares.
    pub fn anchor_case(&self) -> Case {
        Case {
            batch_size: self.setup.default_batch,
            partitions: self.setup.partitions,
            inbox_rows: 0,
            duplicates: self.setup.duplicates,
            replay: false,
            ids: IdKind::Ordered,
            batches_in_flight: crate::config::defaults::BATCHES_IN_FLIGHT,
        }
    }

    /// The first run of the anchor case.
    pub fn anchor(&self) -> Option<&CaseResult> {
        let anchor = self.anchor_case();
        self.cases.iter().find(|c| c.case == anchor)
    }

    /// Every run of the default case: the median one (the anchor) first, then the others.
    pub fn default_runs(&self) -> impl Iterator<Item = &CaseResult> {
        self.anchor().into_iter().chain(&self.anchor_others)
    }

    /// The runs that differ from the anchor only in what `varies` leaves free, sorted by
    /// `key`.
    fn series(
        &self,
        varies: impl Fn(&mut Case, &Case),
        key: impl Fn(&Case) -> f64,
    ) -> Vec<&CaseResult> {
        let anchor = self.anchor_case();
        let mut series: Vec<&CaseResult> = Vec::new();
        for result in &self.cases {
            let mut expected = anchor;
            varies(&mut expected, &result.case);
            let seen = series.iter().any(|s| s.case == result.case);
            if result.case == expected && !seen {
                series.push(result);
            }
        }
        series.sort_by(|a, b| key(&a.case).total_cmp(&key(&b.case)));
        series
    }

    /// The anchor at every inbox size measured, empty first.
    pub fn by_inbox(&self) -> Vec<&CaseResult> {
        self.series(|e, c| e.inbox_rows = c.inbox_rows, |c| c.inbox_rows as f64)
    }

    /// The anchor with random ids at every inbox size measured (prefilled with random ids).
    pub fn by_inbox_random(&self) -> Vec<&CaseResult> {
        self.series(
            |e, c| {
                e.inbox_rows = c.inbox_rows;
                e.ids = IdKind::Random;
            },
            |c| c.inbox_rows as f64,
        )
    }

    /// The anchor at every partition count measured.
    pub fn by_partitions(&self) -> Vec<&CaseResult> {
        self.series(
            |e, c| e.partitions = c.partitions,
            |c| f64::from(c.partitions),
        )
    }

    /// The anchor at every duplicate share measured (fresh records).
    pub fn by_duplicates(&self) -> Vec<&CaseResult> {
        self.series(|e, c| e.duplicates = c.duplicates, |c| c.duplicates)
    }

    /// The all-replay run, if measured.
    pub fn replay(&self) -> Option<&CaseResult> {
        self.cases.iter().find(|c| c.case.replay)
    }

    /// The run whose topic the replay re-read: the same records, inserted fresh.
    pub fn replayed(&self) -> Option<&CaseResult> {
        let replay = self.replay()?;
        let fresh = Case {
            replay: false,
            ..replay.case
        };
        self.cases.iter().find(|c| c.case == fresh)
    }

    /// The TLS pairs measured (none when the phase was skipped).
    pub fn tls_pairs(&self) -> &[TlsPair] {
        match &self.tls {
            TlsCost::Measured(pairs) => pairs,
            TlsCost::Skipped(_) => &[],
        }
    }

    /// The TLS pair with the median ratio, the one the target judges.
    pub fn tls_median(&self) -> Option<&TlsPair> {
        let mut pairs: Vec<&TlsPair> = self.tls_pairs().iter().collect();
        pairs.sort_by(|a, b| {
            let ratio = |p: &TlsPair| p.ratio().unwrap_or(0.0);
            ratio(a).total_cmp(&ratio(b))
        });
        pairs.get(pairs.len() / 2).copied()
    }

    /// The largest partition count's backlog run.
    pub fn widest_backlog(&self) -> Option<&BacklogResult> {
        self.backlog
            .iter()
            .filter_map(|b| match b {
                Backlog::Measured(b) => Some(b),
                Backlog::Skipped(_) => None,
            })
            .max_by_key(|b| b.partitions)
    }
}

/// Rows in short: "1 M", "250 k", "900".
pub fn rows(n: u64) -> String {
    if n >= 1_000_000 && n % 100_000 == 0 {
        let m = n as f64 / 1_000_000.0;
        if m.fract() == 0.0 {
            format!("{m:.0} M")
        } else {
            format!("{m:.1} M")
        }
    } else if n >= 1_000 && n % 1_000 == 0 {
        format!("{} k", n / 1_000)
    } else {
        whole(n as f64)
    }
}

/// What a thread of this process does, for the notes.
pub fn thread_role(name: &str) -> &'static str {
    match name {
        n if n.starts_with("history-consum") => {
            "the actix system thread: every actor, and the benchmark's own polling"
        }
        "kafka-driver" => "polls the consumer and routes records to the partition actors",
        "kafka-committer" => "commits offsets",
        n if n.starts_with("rdk:broker") => "librdkafka's broker threads: fetching and producing",
        "rdk:mock" => "the embedded broker",
        n if n.starts_with("rdk:") => "librdkafka internals",
        n if n.starts_with("producer poll") => "the benchmark's producer",
        n if n.starts_with("tokio") || n.starts_with("actix") => "runtime workers",
        _ => "other",
    }
}

/// Bytes as (decimal) megabytes.
pub fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

/// A whole number with thousands separators.
pub fn whole(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub fn machine() -> Machine {
        Machine {
            cores: 2,
            memory_bytes: Some(24 << 30),
            cpu_model: "Test CPU".into(),
            kernel: "6.1".into(),
            postgres: "postgres (PostgreSQL) 15.4".into(),
            data_filesystem: Some("ext4".into()),
            kernel_costs: Some(super::super::machine::KernelCosts {
                syscall_us: 0.25,
                wake_round_trip_us: 9.5,
            }),
        }
    }

    pub fn throughput(rate: f64) -> Throughput {
        Throughput {
            records: 200_000,
            unique: 180_000,
            elapsed: Duration::from_secs_f64(200_000.0 / rate),
            rate,
            peak_rss: Some(60_000_000),
            cpu: CpuUsage {
                process: 0.15,
                service: 0.14,
                threads: vec![("history-consume".into(), 0.1)],
                postgres: 1.2,
            },
        }
    }

    pub fn ceiling(rate: f64, tasks: usize) -> CeilingResult {
        CeilingResult {
            records: 200_000,
            tasks,
            connections: tasks.min(16),
            elapsed: Duration::from_secs_f64(200_000.0 / rate),
            rate,
            peak_rss: Some(50_000_000),
            cpu: CpuUsage {
                process: 0.1,
                service: 0.1,
                threads: Vec::new(),
                postgres: 1.5,
            },
        }
    }

    pub fn anchor() -> Case {
        Case {
            batch_size: 256,
            partitions: 4,
            inbox_rows: 0,
            duplicates: 0.1,
            replay: false,
            ids: IdKind::Ordered,
            batches_in_flight: 2,
        }
    }

    pub fn case(
        change: impl FnOnce(&mut Case),
        rate: f64,
        ceiling_rate: Option<f64>,
    ) -> CaseResult {
        let mut case = anchor();
        change(&mut case);
        CaseResult {
            case,
            run: throughput(rate),
            ceiling: ceiling_rate.map(|r| ceiling(r, case.partitions as usize)),
            ceiling_before: None,
            database: None,
        }
    }

    /// A 10 M-row random-id database: 720 + 730 MB of primary keys, 95 % of blocks hit end to
    /// end (90 % of the keys'), 6,000 WAL bytes and 0.5 full-page images per record.
    pub fn state() -> DatabaseState {
        let activity = |hit: u64, read: u64, wal: u64| DbActivity {
            events: 200_000,
            blocks_hit: hit,
            blocks_read: read,
            index_hit: 900_000,
            index_read: 100_000,
            wal_bytes: wal,
            wal_fpi: 100_000,
            checkpoints: 1,
        };
        DatabaseState {
            shared_buffers: 128 << 20,
            prefill: Some(Duration::from_secs(250)),
            before: IndexSizes {
                inbox: 700_000_000,
                history: 710_000_000,
            },
            after: IndexSizes {
                inbox: 720_000_000,
                history: 730_000_000,
            },
            run: activity(1_900_000, 100_000, 1_200_000_000),
            ceiling: Some(activity(1_960_000, 40_000, 1_000_000_000)),
        }
    }

    pub fn backlog(partitions: i32, peak: u64) -> Backlog {
        Backlog::Measured(BacklogResult {
            partitions,
            records: 264_000,
            unique: 237_000,
            outage: Duration::from_secs(15),
            baseline_rss: Some(40_000_000),
            peak_rss: Some(peak),
            rss_samples: vec![50_000_000, peak],
            held: 100_000,
            held_bound: 145_920,
            drained_in: Duration::from_secs(5),
        })
    }

    /// A run that meets every target.
    pub fn report() -> Report {
        Report {
            written_at: chrono::Utc::now(),
            machine: machine(),
            load: Load {
                at_start: Some([0.3, 0.5, 0.7]),
                at_end: Some([1.9, 1.2, 0.9]),
            },
            setup: Setup {
                command: "history-consumer bench".into(),
                release_build: true,
                quick: false,
                events: 200_000,
                partitions: 4,
                duplicates: 0.1,
                default_batch: 256,
                own_database: true,
                commit_interval: Duration::from_millis(100),
                db_pool_size: 16,
                latency_load: 0.5,
            },
            cases: vec![
                case(|_| {}, 90_000.0, Some(100_000.0)),
                case(|c| c.batch_size = 1, 5_000.0, None),
                case(|c| c.batch_size = 32, 45_000.0, None),
                case(|c| c.inbox_rows = 1_000_000, 85_000.0, Some(95_000.0)),
                case(|c| c.inbox_rows = 10_000_000, 70_000.0, Some(80_000.0)),
                case(|c| c.partitions = 16, 88_000.0, Some(99_000.0)),
                case(|c| c.partitions = 64, 85_000.0, Some(98_000.0)),
                case(|c| c.duplicates = 0.0, 88_000.0, Some(99_000.0)),
                case(
                    |c| {
                        c.duplicates = 0.0;
                        c.replay = true;
                    },
                    200_000.0,
                    Some(300_000.0),
                ),
                case(|c| c.duplicates = 0.5, 120_000.0, Some(140_000.0)),
                case(|c| c.ids = IdKind::Random, 88_000.0, Some(99_000.0)),
                CaseResult {
                    database: Some(state()),
                    ..case(
                        |c| {
                            c.ids = IdKind::Random;
                            c.inbox_rows = 10_000_000;
                        },
                        60_000.0,
                        Some(68_000.0),
                    )
                },
            ],
            anchor_others: vec![
                case(|_| {}, 85_000.0, Some(100_000.0)),
                case(|_| {}, 92_000.0, Some(98_000.0)),
            ],
            anchor_again: Some(throughput(87_000.0)),
            kafka_only: ceiling(1_000_000.0, 1),
            latency: Some(LatencyResult {
                latency: Latency {
                    records: 200_000,
                    offered_rate: 45_000.0,
                    p50: Duration::from_millis(80),
                    p90: Duration::from_millis(120),
                    p99: Duration::from_millis(150),
                    p999: Duration::from_millis(190),
                    max: Duration::from_millis(260),
                },
                window: Duration::from_secs(5),
            }),
            backlog: vec![backlog(4, 70_000_000), backlog(64, 130_000_000)],
            tls: TlsCost::Measured(vec![
                tls_pair(88_000.0, 84_000.0, false),
                tls_pair(87_000.0, 80_000.0, true),
                tls_pair(89_000.0, 86_000.0, false),
            ]),
            replay_markers_first: None,
        }
    }

    pub fn tls_pair(plain: f64, tls: f64, tls_first: bool) -> TlsPair {
        TlsPair {
            plain: throughput(plain),
            tls: throughput(tls),
            tls_first,
        }
    }

    #[test]
    fn each_series_holds_the_anchor_and_the_runs_that_vary_one_thing() {
        let report = report();
        let inbox: Vec<u64> = report
            .by_inbox()
            .iter()
            .map(|c| c.case.inbox_rows)
            .collect();
        assert_eq!(inbox, [0, 1_000_000, 10_000_000]);
        let random: Vec<u64> = report
            .by_inbox_random()
            .iter()
            .map(|c| c.case.inbox_rows)
            .collect();
        assert_eq!(random, [0, 10_000_000]);
        let partitions: Vec<i32> = report
            .by_partitions()
            .iter()
            .map(|c| c.case.partitions)
            .collect();
        assert_eq!(partitions, [4, 16, 64]);
        let shares: Vec<f64> = report
            .by_duplicates()
            .iter()
            .map(|c| c.case.duplicates)
            .collect();
        assert_eq!(shares, [0.0, 0.1, 0.5]);
        assert_eq!(report.replay().unwrap().run.rate, 200_000.0);
        assert_eq!(report.replayed().unwrap().case.duplicates, 0.0);
        assert_eq!(report.anchor().unwrap().run.rate, 90_000.0);
        assert_eq!(report.widest_backlog().unwrap().partitions, 64);
        // Ratios 0.95, 0.92, 0.97: the median pair is the first.
        assert_eq!(report.tls_median().unwrap().plain.rate, 88_000.0);
    }

    #[test]
    fn a_case_is_labelled_by_what_sets_it_apart() {
        let anchor = anchor();
        assert_eq!(anchor.label(&anchor), "default (empty inbox)");
        let big = Case {
            inbox_rows: 10_000_000,
            ..anchor
        };
        assert_eq!(big.label(&anchor), "10 M rows in the inbox");
        let wide = Case {
            partitions: 64,
            duplicates: 0.5,
            ..anchor
        };
        assert_eq!(wide.label(&anchor), "64 partitions, 50 % duplicates");
        let replay = Case {
            replay: true,
            ..anchor
        };
        assert!(replay.label(&anchor).starts_with("replay"));
        let random = Case {
            inbox_rows: 10_000_000,
            ids: IdKind::Random,
            ..anchor
        };
        assert_eq!(random.label(&anchor), "10 M rows in the inbox, UUIDv4 ids");
        let one = Case {
            batches_in_flight: 1,
            ..anchor
        };
        assert_eq!(one.label(&anchor), "1 batch in flight (no pipelining)");
    }

    #[test]
    fn rows_and_numbers_are_written_short_and_grouped() {
        assert_eq!(rows(10_000_000), "10 M");
        assert_eq!(rows(1_500_000), "1.5 M");
        assert_eq!(rows(100_000), "100 k");
        assert_eq!(rows(950), "950");
        assert_eq!(whole(0.0), "0");
        assert_eq!(whole(999.4), "999");
        assert_eq!(whole(1_234_567.0), "1,234,567");
    }

    #[test]
    fn a_run_is_compared_with_the_ceilings_around_it() {
        let unpipelined = |c: &mut Case| c.batches_in_flight = 1;
        let mut series = vec![
            case(|_| {}, 90_000.0, Some(100_000.0)),
            case(unpipelined, 80_000.0, Some(120_000.0)),
            case(|_| {}, 99_000.0, Some(80_000.0)),
        ];
        series[0].ceiling_before = Some(110_000.0);
        bracket(&mut series);
        // The first keeps the ceiling measured before it; the others get the one before them.
        let before: Vec<_> = series.iter().map(|r| r.ceiling_before).collect();
        assert_eq!(before, [Some(110_000.0), Some(100_000.0), Some(120_000.0)]);
        let rates: Vec<_> = series.iter().map(|r| r.ceiling_rate().unwrap()).collect();
        assert_eq!(rates, [105_000.0, 110_000.0, 100_000.0]);
        assert_eq!(series[2].vs_ceiling(), Some(0.99));
        assert_eq!(series[2].vs_ceiling_after(), Some(99_000.0 / 80_000.0));
        // Without a ceiling after it, a run has none to be compared with.
        let mut lone = vec![series.remove(0), case(|_| {}, 1.0, None)];
        bracket(&mut lone);
        assert_eq!(lone[1].ceiling_rate(), None);
        assert_eq!(lone[1].vs_ceiling(), None);
    }

    #[test]
    fn a_held_record_costs_the_growth_over_the_baseline() {
        let Backlog::Measured(b) = backlog(64, 130_000_000) else {
            unreachable!()
        };
        assert_eq!(b.bytes_per_held(), Some(900.0));
    }
}
