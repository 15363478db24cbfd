//! The heartbeat: every `--member-heartbeat` this member writes itself and its partitions (from
//! its monitor's overview) to the shared database, and now and then removes the rows of members
//! gone longer than `--member-forget-after`. It is not on the data path: a member that cannot
//! write keeps consuming, and says so in the log once when the writes start failing and once
//! when they work again ([`WriteHealth`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Addr;
use deadpool_postgres::Pool;
use tokio::sync::watch;

use super::identity::MemberIdentity;
use super::members::{self, PartitionReport};
use crate::actors::Monitor;
use crate::actors::messages::GetOverview;
use crate::actors::status::BacklogDetail;
use crate::config::members::MemberSettings;
use crate::error_text::chain;

/// How often the rows of long-gone members (and old commands) are looked for.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// Whether the heartbeat's writes work, to log only their changes (pure).
#[derive(Debug, Default)]
pub struct WriteHealth {
    /// Since when, and how many heartbeats failed in a row.
    failing: Option<(Instant, u64)>,
}

/// A change worth a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteChange {
    /// The first failed heartbeat after working ones.
    Failing,
    /// A heartbeat worked after `missed` failed ones over `for_`.
    Recovered { missed: u64, for_: Duration },
}

impl WriteHealth {
    /// Notes one heartbeat's outcome at `now`; what changed, if anything.
    pub fn observe(&mut self, ok: bool, now: Instant) -> Option<WriteChange> {
        match (&mut self.failing, ok) {
            (None, true) => None,
            (None, false) => {
                self.failing = Some((now, 1));
                Some(WriteChange::Failing)
            }
            (Some((_, missed)), false) => {
                *missed += 1;
                None
            }
            (Some((since, missed)), true) => {
                let change = WriteChange::Recovered {
                    missed: *missed,
                    for_: now.duration_since(*since),
                };
                self.failing = None;
                Some(change)
            }
        }
    }
}

/// What the heartbeat needs.
pub struct Publisher {
    pub pool: Pool,
    pub monitor: Addr<Monitor>,
    pub member: Arc<MemberIdentity>,
    pub settings: MemberSettings,
}

impl Publisher {
    /// Publishes every heartbeat until `stop` turns true, then records the graceful leave.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut health = WriteHealth::default();
        let mut ticks = tokio::time::interval(self.settings.heartbeat);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut forgot_at: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stop.changed() => break,
            }
            if *stop.borrow() {
                break;
            }
            let outcome = self.beat().await;
            match (health.observe(outcome.is_ok(), Instant::now()), &outcome) {
                (Some(WriteChange::Failing), Err(error)) => tracing::warn!(
                    member = %self.member.id,
                    error = %error,
                    "member heartbeat not written: the other members see this one as gone until \
                     it is; consuming goes on"
                ),
                (Some(WriteChange::Recovered { missed, for_ }), _) => tracing::info!(
                    member = %self.member.id,
                    missed,
                    failed_for_s = for_.as_secs(),
                    "member heartbeat written again"
                ),
                _ => {}
            }
            if outcome.is_ok() && forgot_at.is_none_or(|at| at.elapsed() >= FORGET_EVERY) {
                forgot_at = Some(Instant::now());
                self.forget().await;
            }
        }
        let left = tokio::time::timeout(
            self.write_timeout(),
            members::leave(&self.pool, &self.member.id),
        )
        .await;
        match left {
            Ok(Ok(())) => tracing::info!(member = %self.member.id, "member left the group view"),
            Ok(Err(error)) => {
                tracing::warn!(member = %self.member.id, error = %chain(&error), "member leave not written")
            }
            Err(_) => tracing::warn!(member = %self.member.id, "member leave not written in time"),
        }
    }

    /// A write waits at most a heartbeat (and at least a second).
    fn write_timeout(&self) -> Duration {
        self.settings.heartbeat.max(Duration::from_secs(1))
    }

    /// One heartbeat: the overview, then the write.
    async fn beat(&self) -> Result<(), String> {
        let overview = tokio::time::timeout(
            self.write_timeout(),
            self.monitor.send(GetOverview(BacklogDetail::Summary)),
        )
        .await
        .map_err(|_| "the monitor did not answer in time".to_owned())?
        .map_err(|_| "the monitor is gone".to_owned())?
        .ok_or_else(|| "the service is shutting down".to_owned())?;
        let reports: Vec<PartitionReport> = overview
            .partitions
            .iter()
            .map(PartitionReport::of)
            .collect();
        let written = members::publish(
            &self.pool,
            &self.member,
            overview.started_at,
            overview.member_id.as_deref(),
            &reports,
        );
        match tokio::time::timeout(self.write_timeout(), written).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(chain(&error)),
            Err(_) => Err("the database did not answer in time".to_owned()),
        }
    }

    async fn forget(&self) {
        let forgotten = tokio::time::timeout(
            self.write_timeout(),
            members::forget(&self.pool, self.settings.forget_after),
        )
        .await;
        match forgotten {
            Ok(Ok((0, 0))) => {}
            Ok(Ok((members, commands))) => {
                tracing::info!(
                    members,
                    commands,
                    "forgot long-gone members and old commands"
                )
            }
            Ok(Err(error)) => tracing::debug!(error = %chain(&error), "forgetting members failed"),
            Err(_) => tracing::debug!("forgetting members timed out"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_writes_are_told_once_when_they_start_and_once_when_they_work_again() {
        let mut health = WriteHealth::default();
        let t0 = Instant::now();
        assert_eq!(health.observe(true, t0), None);
        assert_eq!(health.observe(false, t0), Some(WriteChange::Failing));
        assert_eq!(health.observe(false, t0 + Duration::from_secs(2)), None);
        assert_eq!(health.observe(false, t0 + Duration::from_secs(4)), None);
        assert_eq!(
            health.observe(true, t0 + Duration::from_secs(6)),
            Some(WriteChange::Recovered {
                missed: 3,
                for_: Duration::from_secs(6)
            })
        );
        assert_eq!(health.observe(true, t0 + Duration::from_secs(8)), None);
    }
}
