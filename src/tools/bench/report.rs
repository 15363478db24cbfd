//! A benchmark's results, the targets judged on them, and what limits a missed one —
//! all values, no I/O; `render` turns them into the table and `BENCHMARKS.md`.

use std::time::Duration;

use super::machine::Machine;
use super::measure::{Latency, ratio};
use super::probe::CpuUsage;

/// End-to-end at the default batch size over ceiling 2, at least.
pub const TARGET_VS_DATABASE: f64 = 0.6;
/// End-to-end at the default batch size over B = 1, at least.
pub const TARGET_VS_ONE: f64 = 20.0;
/// Peak RSS with the database down and a backlog in the topic, below.
pub const TARGET_BACKLOG_RSS: u64 = 150 * 1_000_000;

/// One batch size, end to end.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub batch_size: usize,
    pub records: u64,
    pub unique: u64,
    pub elapsed: Duration,
    pub rate: f64,
    pub latency: Option<Latency>,
    pub peak_rss: Option<u64>,
    pub cpu: CpuUsage,
}

/// A ceiling: the same records through one side alone.
#[derive(Debug, Clone)]
pub struct CeilingResult {
    pub records: u64,
    pub elapsed: Duration,
    pub rate: f64,
    pub peak_rss: Option<u64>,
    pub cpu: CpuUsage,
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
    /// What it could hold at most: per partition the queue and the Unknown bound.
    pub held_bound: u64,
    /// From the database's restart to the committed offsets reaching the end.
    pub drained_in: Duration,
}

/// The backlog phase, or why it did not run.
#[derive(Debug, Clone)]
pub enum Backlog {
    Measured(BacklogResult),
    Skipped(String),
}

/// How the benchmark was set up.
#[derive(Debug, Clone)]
pub struct Setup {
    pub command: String,
    pub release_build: bool,
    pub events: u64,
    pub partitions: i32,
    pub duplicates: f64,
    pub default_batch: usize,
    /// A throwaway durable cluster (else `--database-url`).
    pub own_database: bool,
    pub commit_interval: Duration,
    pub latency_load: f64,
    pub latency_window: Duration,
}

/// Everything one benchmark measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub written_at: chrono::DateTime<chrono::Utc>,
    pub machine: Machine,
    pub setup: Setup,
    pub runs: Vec<RunResult>,
    pub kafka_only: CeilingResult,
    pub database_only: CeilingResult,
    /// One backlog run per partition count.
    pub backlog: Vec<Backlog>,
}

/// One target of the issue, judged.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub what: &'static str,
    pub measured: Option<f64>,
    pub goal: &'static str,
    pub met: Option<bool>,
}

impl Report {
    /// The run at the default batch size.
    pub fn default_run(&self) -> Option<&RunResult> {
        self.runs
            .iter()
            .find(|r| r.batch_size == self.setup.default_batch)
    }

    /// The run at B = 1, if measured.
    pub fn one_run(&self) -> Option<&RunResult> {
        self.runs.iter().find(|r| r.batch_size == 1)
    }

    pub fn vs_database(&self) -> Option<f64> {
        ratio(self.default_run()?.rate, self.database_only.rate)
    }

    pub fn vs_one(&self) -> Option<f64> {
        ratio(self.default_run()?.rate, self.one_run()?.rate)
    }

    /// The highest peak RSS of the backlog runs.
    pub fn backlog_peak(&self) -> Option<u64> {
        self.backlog
            .iter()
            .filter_map(|backlog| match backlog {
                Backlog::Measured(b) => b.peak_rss,
                Backlog::Skipped(_) => None,
            })
            .max()
    }

    /// The three targets.
    pub fn targets(&self) -> [Target; 3] {
        let vs_database = self.vs_database();
        let vs_one = self.vs_one();
        let peak = self.backlog_peak();
        [
            Target {
                what: "end-to-end at the default B / ceiling 2 (database alone)",
                measured: vs_database,
                goal: "≥ 0.6",
                met: vs_database.map(|r| r >= TARGET_VS_DATABASE),
            },
            Target {
                what: "end-to-end at the default B / end-to-end at B = 1",
                measured: vs_one,
                goal: "≥ 20",
                met: vs_one.map(|r| r >= TARGET_VS_ONE),
            },
            Target {
                what: "peak RSS, database down with a backlog, any partition count (MB)",
                measured: peak.map(megabytes),
                goal: "< 150 MB",
                met: peak.map(|p| p < TARGET_BACKLOG_RSS),
            },
        ]
    }

    /// What limits the results, in sentences: for each missed target what the phase numbers
    /// say, and whatever else stands out.
    pub fn limits(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let cores = self.machine.cores as f64;
        let c1 = self.kafka_only.rate;
        let c2 = self.database_only.rate;
        if let (Some(run), Some(ratio)) = (self.default_run(), self.vs_database()) {
            if ratio < TARGET_VS_DATABASE {
                notes.push(format!(
                    "End-to-end at B = {} reached {:.2} of ceiling 2 ({} of {} events/s).",
                    run.batch_size,
                    ratio,
                    whole(run.rate),
                    whole(c2)
                ));
                if c1 < c2 {
                    notes.push(format!(
                        "Kafka alone (ceiling 1, {} events/s) is slower than the database alone: \
                         reading the embedded broker, not PostgreSQL, is the tighter ceiling here.",
                        whole(c1)
                    ));
                }
                let busy = run.cpu.process + run.cpu.postgres;
                if busy < 0.5 * cores {
                    notes.push(format!(
                        "Only {busy:.2} of the {} cores were busy during the run (this process \
                         {:.2}, PostgreSQL {:.2}): neither the CPU nor the database was the \
                         limit; the service spent most of the run waiting for records.",
                        self.machine.cores, run.cpu.process, run.cpu.postgres
                    ));
                }
                if busy >= 0.85 * cores {
                    notes.push(format!(
                        "The {} cores were saturated during the run ({:.2} cores busy: this \
                         process {:.2}, PostgreSQL {:.2}); ceiling 2 had them without the broker, \
                         the Kafka clients and the actors (ceiling 2 used {:.2} + {:.2}).",
                        self.machine.cores,
                        busy,
                        run.cpu.process,
                        run.cpu.postgres,
                        self.database_only.cpu.process,
                        self.database_only.cpu.postgres
                    ));
                }
                if let Some((name, load)) = run.cpu.threads.first() {
                    if *load >= 0.85 {
                        notes.push(format!(
                            "One thread was nearly saturated: `{name}` at {load:.2} of a core \
                             ({}).",
                            thread_role(name)
                        ));
                    }
                }
            }
        }
        if let (Some(one), Some(run), Some(ratio)) =
            (self.one_run(), self.default_run(), self.vs_one())
        {
            if ratio < 2.0 {
                notes.push(format!(
                    "The batch size made little difference ({ratio:.1}×): something other \
                     than the inbox transactions bounds the rate."
                ));
            } else if ratio < TARGET_VS_ONE {
                let per_transaction =
                    1000.0 * f64::from(self.setup.partitions) / one.rate.max(f64::EPSILON);
                notes.push(format!(
                    "B = 1 runs {} events/s: about {per_transaction:.2} ms per one-event \
                     transaction on each of the {} partitions; B = {} is {ratio:.1}× that.",
                    whole(one.rate),
                    self.setup.partitions,
                    run.batch_size
                ));
                if let Some(bound) = super::measure::ratio(c2, one.rate) {
                    if bound < TARGET_VS_ONE {
                        notes.push(format!(
                            "Even the database alone is only {bound:.1}× B = 1 here, so no \
                             service could reach 20× on this machine."
                        ));
                    }
                }
            }
        }
        for backlog in &self.backlog {
            let Backlog::Measured(backlog) = backlog else {
                continue;
            };
            if let (Some(peak), Some(base)) = (backlog.peak_rss, backlog.baseline_rss) {
                if peak >= TARGET_BACKLOG_RSS {
                    notes.push(format!(
                        "Peak RSS with the database down over {} partitions was {:.0} MB, of \
                         which {:.0} MB were there before the service started (the embedded \
                         broker holding the backlog, the benchmark's own data).",
                        backlog.partitions,
                        megabytes(peak),
                        megabytes(base)
                    ));
                }
            }
            if backlog.held > backlog.held_bound {
                notes.push(format!(
                    "During the outage the service held {} records, more than its bound of {}.",
                    backlog.held, backlog.held_bound
                ));
            }
        }
        notes
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
        }
    }

    fn run(batch_size: usize, rate: f64) -> RunResult {
        RunResult {
            batch_size,
            records: 1000,
            unique: 900,
            elapsed: Duration::from_secs(1),
            rate,
            latency: Some(Latency {
                records: 100,
                offered_rate: rate / 2.0,
                p50: Duration::from_millis(80),
                p99: Duration::from_millis(190),
            }),
            peak_rss: Some(60_000_000),
            cpu: CpuUsage {
                process: 1.0,
                threads: vec![("history-consume".into(), 0.95)],
                postgres: 0.9,
            },
        }
    }

    fn ceiling(rate: f64) -> CeilingResult {
        CeilingResult {
            records: 1000,
            elapsed: Duration::from_secs(1),
            rate,
            peak_rss: Some(50_000_000),
            cpu: CpuUsage::default(),
        }
    }

    pub fn report(one: f64, default: f64, c1: f64, c2: f64, peak: u64) -> Report {
        Report {
            written_at: chrono::Utc::now(),
            machine: machine(),
            setup: Setup {
                command: "history-consumer bench".into(),
                release_build: true,
                events: 1000,
                partitions: 4,
                duplicates: 0.1,
                default_batch: 256,
                own_database: true,
                commit_interval: Duration::from_millis(100),
                latency_load: 0.5,
                latency_window: Duration::from_secs(5),
            },
            runs: vec![run(1, one), run(32, default / 2.0), run(256, default)],
            kafka_only: ceiling(c1),
            database_only: ceiling(c2),
            backlog: vec![Backlog::Measured(BacklogResult {
                partitions: 4,
                records: 120_000,
                unique: 108_000,
                outage: Duration::from_secs(15),
                baseline_rss: Some(40_000_000),
                peak_rss: Some(peak),
                rss_samples: vec![50_000_000, peak],
                held: 8_000,
                held_bound: 8_096,
                drained_in: Duration::from_secs(12),
            })],
        }
    }

    #[test]
    fn targets_met_say_so_and_need_no_explanation() {
        let report = report(1_000.0, 30_000.0, 100_000.0, 40_000.0, 90_000_000);
        let met: Vec<Option<bool>> = report.targets().iter().map(|t| t.met).collect();
        assert_eq!(met, vec![Some(true), Some(true), Some(true)]);
        assert_eq!(report.vs_one(), Some(30.0));
        assert!(report.limits().is_empty(), "{:?}", report.limits());
    }

    #[test]
    fn a_missed_database_ratio_names_the_tighter_ceiling_and_the_busy_thread() {
        let report = report(1_000.0, 12_000.0, 20_000.0, 40_000.0, 90_000_000);
        let [vs_database, ..] = report.targets();
        assert_eq!(vs_database.met, Some(false));
        let limits = report.limits().join("\n");
        assert!(limits.contains("0.30 of ceiling 2"), "{limits}");
        assert!(
            limits.contains("Kafka alone (ceiling 1, 20,000 events/s)"),
            "{limits}"
        );
        assert!(limits.contains("`history-consume`"), "{limits}");
        assert!(limits.contains("saturated"), "{limits}");
    }

    #[test]
    fn an_idle_machine_with_a_missed_ratio_says_the_service_was_waiting() {
        let mut report = report(1_000.0, 5_000.0, 2_000_000.0, 100_000.0, 90_000_000);
        for run in &mut report.runs {
            run.cpu = CpuUsage {
                process: 0.05,
                threads: vec![("kafka-driver".into(), 0.01)],
                postgres: 0.07,
            };
        }
        let limits = report.limits().join("\n");
        assert!(
            limits.contains("Only 0.12 of the 2 cores were busy"),
            "{limits}"
        );
        assert!(!limits.contains("saturated"), "{limits}");
    }

    #[test]
    fn a_missed_batch_ratio_explains_itself_and_no_batching_is_called_out() {
        let report = report(1_000.0, 15_000.0, 100_000.0, 16_000.0, 90_000_000);
        let limits = report.limits().join("\n");
        assert!(
            limits.contains("Even the database alone is only 16.0×"),
            "{limits}"
        );
        let flat = report_with_flat_batches();
        assert!(flat.limits().join("\n").contains("little difference"));
    }

    fn report_with_flat_batches() -> Report {
        report(1_000.0, 1_100.0, 100_000.0, 40_000.0, 90_000_000)
    }

    #[test]
    fn a_big_backlog_peak_fails_its_target_and_shows_the_baseline() {
        let report = report(1_000.0, 30_000.0, 100_000.0, 40_000.0, 180_000_000);
        assert_eq!(report.targets()[2].met, Some(false));
        assert!(report.limits().join("\n").contains("of which 40 MB"));
    }

    #[test]
    fn without_b_one_or_the_backlog_those_targets_are_not_judged() {
        let mut report = report(1_000.0, 30_000.0, 100_000.0, 40_000.0, 90_000_000);
        report.runs.retain(|r| r.batch_size != 1);
        report.backlog = vec![Backlog::Skipped("with --database-url".into())];
        let met: Vec<Option<bool>> = report.targets().iter().map(|t| t.met).collect();
        assert_eq!(met, vec![Some(true), None, None]);
    }

    #[test]
    fn whole_numbers_get_thousands_separators() {
        assert_eq!(whole(0.0), "0");
        assert_eq!(whole(999.4), "999");
        assert_eq!(whole(1_000.0), "1,000");
        assert_eq!(whole(1_234_567.0), "1,234,567");
    }
}
