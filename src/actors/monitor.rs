//! The monitor: samples the service's status every second, decides which partitions are
//! stuck (see [`crate::stuck`]), keeps a few minutes of lag and throughput per partition for
//! the overview's trend lines, and publishes the derived metrics.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use chrono::{DateTime, Utc};

use super::messages::{GetOverview, GetStatus, SampleStatus};
use super::status::{BacklogDetail, PartitionState, PartitionView, ServiceStatus};
pub use super::status::{DisplayState, Overview, PartitionSummary, StateReason, TrendPoint};
use super::supervisor::Supervisor;
use crate::domain::ConnectionHealth;
use crate::domain::Trouble;
use crate::metrics::Metrics;
use crate::stuck::{RejectionsHeld, StuckReason, StuckRules, evaluate};

const SAMPLE_EVERY: Duration = Duration::from_secs(1);
const TREND_EVERY: Duration = Duration::from_secs(5);
/// Ten minutes of trend points.
const TREND_POINTS: usize = 120;

struct Track {
    /// The assignment the watermark belongs to: a new one (a rebalance, a live rewind) starts
    /// a new watermark, which has moved whatever its value.
    generation: Option<u64>,
    watermark: Option<i64>,
    moved_at: Instant,
    trend: VecDeque<TrendPoint>,
    resolved_total: u64,
    trend_at: Instant,
}

impl Track {
    /// Notes the partition's watermark now. A live rewind can replay a partition back to the
    /// same watermark between two samples: its new assignment is movement, not a stall.
    fn observe(&mut self, generation: Option<u64>, watermark: Option<i64>, now: Instant) {
        if self.watermark != watermark || self.generation != generation {
            self.generation = generation;
            self.watermark = watermark;
            self.moved_at = now;
        }
    }
}

/// Derives stuck states, lag in seconds and trends from the supervisor's snapshots.
pub struct Monitor {
    supervisor: Addr<Supervisor>,
    metrics: Metrics,
    rules: StuckRules,
    tracks: BTreeMap<i32, Track>,
    /// The Kafka connection's health, shown above the partitions.
    connection: Arc<ConnectionHealth>,
}

impl Monitor {
    pub fn new(
        supervisor: Addr<Supervisor>,
        metrics: Metrics,
        rules: StuckRules,
        connection: Arc<ConnectionHealth>,
    ) -> Self {
        Monitor {
            supervisor,
            metrics,
            rules,
            tracks: BTreeMap::new(),
            connection,
        }
    }

    fn summarise(&mut self, status: ServiceStatus) -> Overview {
        let now = Instant::now();
        let wall = Utc::now();
        self.tracks
            .retain(|p, _| status.partitions.iter().any(|v| v.partition == *p));
        // Taken, not cloned: a partition's view holds its whole Unknown backlog, and this runs
        // every second.
        let mut partitions: Vec<PartitionSummary> = status
            .partitions
            .into_iter()
            .map(|view| self.summarise_partition(view, now, wall))
            .collect();
        partitions.sort_by_key(|p| (p.stuck.is_none(), p.view.partition));
        Overview {
            group: status.group,
            topic: status.topic,
            member_id: status.member_id,
            host: status.host,
            started_at: status.started_at,
            uptime_seconds: (wall - status.started_at).num_seconds().max(0) as u64,
            shutting_down: status.shutting_down,
            kafka_connection: self.connection.status(),
            partitions,
        }
    }

    fn summarise_partition(
        &mut self,
        view: PartitionView,
        now: Instant,
        wall: DateTime<Utc>,
    ) -> PartitionSummary {
        let watermark = view.checkpoint.as_ref().and_then(|c| c.watermark);
        let generation = view.checkpoint.as_ref().map(|c| c.generation);
        let resolved_total = view.actor.as_ref().map_or(0, |a| {
            a.counts.applied + a.counts.already_applied + a.counts.dead_lettered
        });
        let track = self.tracks.entry(view.partition).or_insert_with(|| Track {
            generation,
            watermark,
            moved_at: now,
            trend: VecDeque::new(),
            resolved_total,
            trend_at: now,
        });
        track.observe(generation, watermark, now);
        let lag = view.lag();
        if now.duration_since(track.trend_at) >= TREND_EVERY || track.trend.is_empty() {
            let elapsed = now.duration_since(track.trend_at).as_secs_f64().max(1e-3);
            let per_second = resolved_total.saturating_sub(track.resolved_total) as f64 / elapsed;
            if track.trend.len() == TREND_POINTS {
                track.trend.pop_front();
            }
            track.trend.push_back(TrendPoint {
                at: wall,
                lag: lag.unwrap_or(0),
                per_second: if track.trend.is_empty() {
                    0.0
                } else {
                    per_second
                },
            });
            track.resolved_total = resolved_total;
            track.trend_at = now;
        }

        let oldest_unknown = view
            .actor
            .as_ref()
            .and_then(|a| a.oldest_unknown_since)
            .map(|first| (wall - first).to_std().unwrap_or_default());
        // Time lag: how old the newest record taken up is, while records still wait.
        let lag_seconds = match (lag, view.actor.as_ref().and_then(|a| a.last_record_time)) {
            (Some(l), Some(time)) if l > 0 => {
                Some((wall - time).num_milliseconds().max(0) as f64 / 1000.0)
            }
            (Some(_), _) => Some(0.0),
            (None, _) => None,
        };
        let held = view
            .actor
            .as_ref()
            .map(|a| a.guard)
            .filter(|g| g.engaged)
            .map(|g| RejectionsHeld {
                consecutive: g.consecutive,
                limit: g.limit,
            });
        let fetch_held = match &view.fetch {
            Some(Trouble::Held(held)) => Some(held),
            _ => None,
        };
        let stuck = match fetch_held {
            Some(held) => Some(StuckReason::Held {
                offset: held.offset,
            }),
            None => evaluate(
                &self.rules,
                held,
                oldest_unknown,
                now.duration_since(track.moved_at),
                lag.unwrap_or(0),
            ),
        };
        let (state, state_reason) = match (&stuck, view.actor.as_ref().map(|a| a.state)) {
            (_, Some(PartitionState::Draining)) => (DisplayState::Draining, None),
            (Some(reason), _) => (
                DisplayState::Stuck,
                Some(StateReason::Stuck(explain(reason, view.fetch.as_ref()))),
            ),
            (None, Some(PartitionState::Paused)) => {
                (DisplayState::Paused, Some(StateReason::PausedByOperator))
            }
            (None, Some(PartitionState::BacklogFull)) => {
                (DisplayState::Paused, Some(StateReason::BacklogAtBound))
            }
            (None, Some(PartitionState::Retrying)) => (DisplayState::Retrying, None),
            _ => (DisplayState::Running, None),
        };
        self.metrics.set_partition_health(
            view.partition,
            stuck.is_some(),
            lag_seconds.unwrap_or(0.0),
        );
        let end = view.end();
        PartitionSummary {
            trend: track.trend.iter().copied().collect(),
            view,
            state,
            state_reason,
            stuck,
            end,
            lag,
            lag_seconds,
            oldest_unknown_seconds: oldest_unknown.map(|d| d.as_secs_f64()),
        }
    }
}

/// A stuck partition's reason with what its fetching says about it: a held partition is
/// described by its hold, a stall by the fetch failure behind it.
fn explain(reason: &StuckReason, fetch: Option<&Trouble>) -> String {
    match (fetch, reason) {
        (Some(Trouble::Held(held)), _) => held.describe(),
        (Some(Trouble::Failing(failure)), StuckReason::Stalled { .. }) => {
            format!("{reason}; fetching fails: {}", failure.detail)
        }
        _ => reason.to_string(),
    }
}

impl Actor for Monitor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(SAMPLE_EVERY, |monitor, ctx| {
            let supervisor = monitor.supervisor.clone();
            ctx.spawn(
                async move { supervisor.send(SampleStatus).await.ok() }
                    .into_actor(monitor)
                    .map(|status, monitor, _ctx| {
                        if let Some(status) = status {
                            monitor.summarise(status);
                        }
                    }),
            );
        });
    }
}

impl Handler<GetOverview> for Monitor {
    type Result = ResponseActFuture<Self, Option<Overview>>;

    fn handle(
        &mut self,
        GetOverview(detail): GetOverview,
        _ctx: &mut Context<Self>,
    ) -> Self::Result {
        let supervisor = self.supervisor.clone();
        Box::pin(
            async move {
                match detail {
                    BacklogDetail::Entries => supervisor.send(GetStatus).await.ok(),
                    BacklogDetail::Summary => supervisor.send(SampleStatus).await.ok(),
                }
            }
            .into_actor(self)
            .map(|status, monitor, _ctx| status.map(|s| monitor.summarise(s))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(generation: u64, watermark: i64, at: Instant) -> Track {
        Track {
            generation: Some(generation),
            watermark: Some(watermark),
            moved_at: at,
            trend: VecDeque::new(),
            resolved_total: 0,
            trend_at: at,
        }
    }

    #[test]
    fn a_partition_replayed_back_to_the_same_watermark_by_a_new_assignment_has_moved() {
        let start = Instant::now();
        let later = start + Duration::from_secs(300);
        let mut unchanged = track(1, 6, start);
        unchanged.observe(Some(1), Some(6), later);
        assert_eq!(unchanged.moved_at, start, "the same assignment, unmoved");
        let mut rewound = track(1, 6, start);
        rewound.observe(Some(2), Some(6), later);
        assert_eq!(rewound.moved_at, later, "a live rewind's new assignment");
    }
}
