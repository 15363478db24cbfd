//! The traffic loop: plans records at the configured rate and publishes them, batch by batch,
//! until told to stop (a batch under way is finished, so the tally stays exact).

use std::time::{Duration, Instant};

use rand::Rng;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use super::kafka::Publisher;
use super::traffic::{Generator, Pacer, RecordKind};

/// How often a batch goes out.
const TICK: Duration = Duration::from_millis(20);

/// Publishes `rate` records per second from `generator` until `stop` turns true.
pub async fn run<R: Rng>(
    publisher: Publisher,
    mut generator: Generator<R>,
    rate: u32,
    mut stop: watch::Receiver<bool>,
) {
    let mut pacer = Pacer::new(rate);
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last = Instant::now();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
        let now = Instant::now();
        let due = pacer.due(now - last);
        last = now;
        let records: Vec<_> = (0..due).map(|_| generator.next_record()).collect();
        let landed = publisher.publish(&records).await;
        for (record, at) in records.into_iter().zip(landed) {
            if let (RecordKind::Fresh(event), Some(_)) = (record.kind, at) {
                generator.acknowledged(event);
            }
        }
    }
}
