//! `history-consumer produce`: publishes generated ticket events to a real Kafka topic — a
//! number of events, or a rate for a duration — keyed by ticket, with outbox-style republished
//! duplicates and malformed records, and a progress bar on stderr.

use std::io::Write;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use rdkafka::ClientConfig;
use rdkafka::producer::FutureProducer;

use crate::config::{ConfigError, KafkaConnection};
use crate::tools::args::ProduceArgs;
use crate::tools::demo::kafka::Publisher;
use crate::tools::demo::traffic::{Generator, Mix, Pacer, PlannedRecord, RecordKind, Tally};

/// Records published per round in `--events` mode, at most. Republishes can only pick events
/// already acknowledged, so small runs use smaller rounds to leave room for them.
const MAX_CHUNK: u64 = 500;
const TICK: Duration = Duration::from_millis(20);

/// `produce` could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("no record was acknowledged by Kafka ({failed} failed); is {brokers} reachable?")]
    NothingDelivered { failed: u64, brokers: String },
}

/// What was published.
#[derive(Debug, Clone, Copy)]
pub struct Produced {
    pub tally: Tally,
    pub elapsed: Duration,
}

/// Publishes as `args` says and prints a summary line.
pub async fn run(args: ProduceArgs) -> Result<Produced, ProduceError> {
    args.validate()?;
    let connection = args.kafka.clone().resolve()?;
    let producer = producer(&connection)?;
    let publisher = Publisher::to_topic(producer, &args.topic);
    let run_id = args
        .run_id
        .clone()
        .unwrap_or_else(|| format!("{:08x}", rand::random::<u32>()));
    let mix = Mix {
        republish: args.duplicates,
        malformed: args.malformed,
    };
    let mut generator = Generator::new(StdRng::from_os_rng(), &run_id, args.tickets as usize, mix);
    let started = Instant::now();
    let mut progress = Progress::new(&args);
    match args.rate {
        None => {
            let chunk = (args.events / 20).clamp(50, MAX_CHUNK);
            let mut remaining = args.events;
            while remaining > 0 {
                let take = remaining.min(chunk);
                remaining -= take;
                publish(&publisher, &mut generator, take as usize).await;
                progress.show(&publisher.sent().tally, started.elapsed());
            }
        }
        Some(rate) => {
            let deadline = args.duration;
            let mut pacer = Pacer::new(rate);
            let mut ticker = tokio::time::interval(TICK);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last = Instant::now();
            while started.elapsed() < deadline {
                ticker.tick().await;
                let now = Instant::now();
                let due = pacer.due(now - last);
                last = now;
                publish(&publisher, &mut generator, due).await;
                progress.show(&publisher.sent().tally, started.elapsed());
            }
        }
    }
    let tally = publisher.sent().tally;
    let elapsed = started.elapsed();
    progress.finish(&tally, elapsed);
    publisher.close().await;
    println!(
        "produced: topic={} total={} unique_valid={} republished={} malformed={} failed={} \
         seconds={:.1} event_id_prefix={}",
        args.topic,
        tally.total(),
        tally.unique_valid,
        tally.republished,
        tally.malformed,
        tally.failed,
        elapsed.as_secs_f64(),
        crate::tools::demo::traffic::event_id_prefix(&run_id),
    );
    if tally.total() == 0 && tally.failed > 0 {
        return Err(ProduceError::NothingDelivered {
            failed: tally.failed,
            brokers: connection.brokers,
        });
    }
    Ok(Produced { tally, elapsed })
}

fn producer(connection: &KafkaConnection) -> Result<FutureProducer, ConfigError> {
    let mut config = ClientConfig::new();
    config
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000");
    connection.properties.apply_to(&mut config);
    config.set("bootstrap.servers", &connection.brokers);
    config.create().map_err(crate::startup::kafka_config_error)
}

async fn publish<R: rand::Rng>(publisher: &Publisher, generator: &mut Generator<R>, count: usize) {
    let records: Vec<PlannedRecord> = (0..count).map(|_| generator.next_record()).collect();
    let landed = publisher.publish(&records).await;
    for (record, at) in records.into_iter().zip(landed) {
        if let (RecordKind::Fresh(event), Some(_)) = (record.kind, at) {
            generator.acknowledged(event);
        }
    }
}

/// A one-line progress bar on stderr, redrawn at most every 200 ms.
struct Progress {
    /// Records (count mode) or seconds (rate mode) to reach.
    goal: f64,
    by_time: bool,
    drawn: Instant,
}

impl Progress {
    fn new(args: &ProduceArgs) -> Progress {
        Progress {
            goal: match args.rate {
                Some(_) => args.duration.as_secs_f64(),
                None => args.events as f64,
            },
            by_time: args.rate.is_some(),
            drawn: Instant::now() - Duration::from_secs(1),
        }
    }

    fn show(&mut self, tally: &Tally, elapsed: Duration) {
        if self.drawn.elapsed() >= Duration::from_millis(200) {
            self.drawn = Instant::now();
            eprint!("\r{}", bar(self.goal, self.by_time, tally, elapsed));
            let _ = std::io::stderr().flush();
        }
    }

    fn finish(&mut self, tally: &Tally, elapsed: Duration) {
        eprintln!("\r{}", bar(self.goal, self.by_time, tally, elapsed));
    }
}

/// `[#########-----------]  4500/10000  2250/s  dup 225  bad 45  failed 0` (pure).
fn bar(goal: f64, by_time: bool, tally: &Tally, elapsed: Duration) -> String {
    const WIDTH: usize = 30;
    let done = if by_time {
        elapsed.as_secs_f64()
    } else {
        (tally.total() + tally.failed) as f64
    };
    let share = if goal > 0.0 {
        (done / goal).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let filled = (share * WIDTH as f64).round() as usize;
    let rate = tally.total() as f64 / elapsed.as_secs_f64().max(1e-3);
    let position = if by_time {
        format!("{:>4.0}/{} s", done, goal)
    } else {
        format!("{:>7}/{}", done as u64, goal as u64)
    };
    format!(
        "[{}{}] {position}  {rate:>7.0}/s  dup {}  bad {}  failed {}",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        tally.republished,
        tally.malformed,
        tally.failed,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_progress_and_never_overflows() {
        let tally = Tally {
            unique_valid: 40,
            republished: 5,
            malformed: 5,
            failed: 0,
        };
        let half = bar(100.0, false, &tally, Duration::from_secs(1));
        assert!(
            half.starts_with(&format!("[{}{}]", "#".repeat(15), "-".repeat(15))),
            "{half}"
        );
        assert!(
            half.contains("50/100") && half.contains("dup 5") && half.contains("bad 5"),
            "{half}"
        );
        let over = bar(10.0, false, &tally, Duration::from_secs(1));
        assert!(over.starts_with(&format!("[{}]", "#".repeat(30))), "{over}");
        let timed = bar(60.0, true, &tally, Duration::from_secs(30));
        assert!(timed.contains("30/60 s"), "{timed}");
    }
}
