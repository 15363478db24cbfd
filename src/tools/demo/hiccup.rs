//! Scripted database outages: the demo stops its own PostgreSQL for a few seconds now and
//! then, so that records turn Unknown, their partitions stop committing, and then heal.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::tools::pg_cluster::{ClusterError, TempCluster};

/// How long PostgreSQL stays down in each outage.
pub const OUTAGE: Duration = Duration::from_secs(4);
/// When the first outage comes: early, so that even a short run shows one.
const FIRST_AFTER: Duration = Duration::from_secs(8);

/// When outages start, counted from the start of the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    first: Duration,
    every: Duration,
}

impl Schedule {
    /// One outage every `every` (the first after at most 8 s); `None` for zero.
    pub fn every(every: Duration) -> Option<Schedule> {
        (!every.is_zero()).then(|| {
            // The database must be up between two outages for the backlog to drain.
            let every = every.max(OUTAGE * 2);
            Schedule {
                first: FIRST_AFTER.min(every),
                every,
            }
        })
    }

    /// The start of outage `n` (from 0).
    pub fn start_of(&self, n: u32) -> Duration {
        self.first + self.every * n
    }
}

/// The cluster back from the outage task, with what happened.
pub struct Outages {
    pub cluster: TempCluster,
    pub count: u32,
    /// Set when PostgreSQL could not be stopped or started again.
    pub error: Option<ClusterError>,
}

/// Runs outages on `cluster` by `schedule` until `stop` turns true; an outage under way when
/// it does is cut short, so the cluster always comes back running.
pub async fn run(
    mut cluster: TempCluster,
    schedule: Schedule,
    started: Instant,
    mut stop: watch::Receiver<bool>,
) -> Outages {
    let mut count = 0;
    loop {
        if stopped_before(&mut stop, started + schedule.start_of(count)).await {
            return Outages {
                cluster,
                count,
                error: None,
            };
        }
        count += 1;
        let (back, result) = outage(cluster, count, &mut stop).await;
        cluster = back;
        if result.is_err() || *stop.borrow() {
            return Outages {
                cluster,
                count,
                error: result.err(),
            };
        }
    }
}

/// One outage: stop, wait [`OUTAGE`] (or until `stop`), start again.
async fn outage(
    cluster: TempCluster,
    number: u32,
    stop: &mut watch::Receiver<bool>,
) -> (TempCluster, Result<(), ClusterError>) {
    println!(
        "!! database hiccup #{number}: PostgreSQL stops for {} s - records turn Unknown and \
         their partitions stop committing",
        OUTAGE.as_secs()
    );
    let down_at = Instant::now();
    let (cluster, stopped) = blocking(cluster, TempCluster::stop).await;
    if stopped.is_ok() {
        stopped_before(stop, Instant::now() + OUTAGE).await;
    }
    let (cluster, restarted) = blocking(cluster, TempCluster::restart).await;
    match stopped.and(restarted) {
        Ok(()) => {
            println!(
                "** database hiccup #{number} over: PostgreSQL is back after {:.1} s - Unknown \
                 records are retried and resolve",
                down_at.elapsed().as_secs_f64()
            );
            (cluster, Ok(()))
        }
        Err(error) => {
            println!(
                "!! database hiccup #{number}: {}",
                crate::error_text::chain(&error)
            );
            (cluster, Err(error))
        }
    }
}

/// Waits until `at`; true when `stop` turned true (or its sender went away) first.
async fn stopped_before(stop: &mut watch::Receiver<bool>, at: Instant) -> bool {
    tokio::select! {
        _ = tokio::time::sleep_until(at.into()) => false,
        _ = stop.wait_for(|stopped| *stopped) => true,
    }
}

/// Runs a blocking cluster operation (stop, restart) off the actix thread.
async fn blocking(
    mut cluster: TempCluster,
    operation: fn(&mut TempCluster) -> Result<(), ClusterError>,
) -> (TempCluster, Result<(), ClusterError>) {
    tokio::task::spawn_blocking(move || {
        let result = operation(&mut cluster);
        (cluster, result)
    })
    .await
    .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_outage_comes_early_and_the_next_ones_at_the_period() {
        let schedule = Schedule::every(Duration::from_secs(30)).unwrap();
        assert_eq!(schedule.start_of(0), Duration::from_secs(8));
        assert_eq!(schedule.start_of(2), Duration::from_secs(68));
        let fast = Schedule::every(Duration::from_secs(5)).unwrap();
        assert_eq!(fast.start_of(0), OUTAGE * 2);
        assert_eq!(
            fast.start_of(1),
            OUTAGE * 4,
            "the database is up between outages"
        );
        assert_eq!(Schedule::every(Duration::ZERO), None);
    }
}
