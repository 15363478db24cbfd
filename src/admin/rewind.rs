//! The live rewind from the admin, shared by the pages and the API: its confirmation step
//! (where each partition is now, where the point in time is, how many records will be
//! replayed) and its execution through the supervisor, recorded in the audit trail.
//!
//! The point in time is looked up in the topic by a throwaway reader on a blocking thread, both
//! for the confirmation and again when the rewind is carried out (the confirmation's numbers
//! are a preview: processing goes on in between). The driver thread decides each partition
//! with the exact position it drained at.

use askama::Template;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::AdminState;
use super::error::AdminError;
use super::pages::Layout;
use crate::actors::messages::{GetOverview, LiveRewound, NotOwned, RewindPartitions};
use crate::actors::status::{BacklogDetail, Overview, PartitionView};
use crate::domain::rewind::{Decision, TimeOffset, decide, restart_past_gap};
use crate::domain::{Held, HeldCause, Trouble};
use crate::error_text::chain;
use crate::kafka::reader::Found;
use crate::recovery::{audit, find_time};

/// Which partitions a rewind is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One partition this instance owns.
    Partition(i32),
    /// Every partition this instance owns.
    Instance,
    /// Every partition of the group: this instance's here, each other member's carried to it
    /// (one command per member); here it plans and rewinds what [`Scope::Instance`] does.
    Group,
}

impl Scope {
    /// For people: "partition 3" or "every partition of this instance".
    pub fn describe(self) -> String {
        match self {
            Scope::Partition(p) => format!("partition {p}"),
            Scope::Instance => "every partition of this instance".to_owned(),
            Scope::Group => "every partition of the group".to_owned(),
        }
    }
}

/// One partition of the confirmation step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRow {
    pub partition: i32,
    /// Where the partition reads next: its first record not resolved, else its committed offset.
    pub position: Option<i64>,
    pub target: TimeOffset,
    /// `broker` or `read` (see `kafka::reader`).
    pub found_by: String,
    pub decision: Decision,
}

/// The confirmation step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub to: DateTime<Utc>,
    pub partitions: Vec<PlanRow>,
    /// Offsets that will be read again, in all (at least: processing goes on meanwhile).
    pub replayed: i64,
}

/// Where a partition reads next, as its status shows it (see `Watermark::resume_at`).
pub fn position_now(view: &PartitionView) -> Option<i64> {
    view.checkpoint
        .as_ref()
        .and_then(|c| c.watermark.or(c.first_unresolved))
        .or_else(|| view.committed())
}

/// The confirmation step: looks the point in time up for the scope's partitions.
pub async fn plan(state: &AdminState, scope: Scope, to: DateTime<Utc>) -> Result<Plan, AdminError> {
    let overview: Overview = state
        .monitor
        .send(GetOverview(BacklogDetail::Summary))
        .await
        .ok()
        .flatten()
        .ok_or(AdminError::ShuttingDown)?;
    let views: Vec<&PartitionView> = match scope {
        Scope::Partition(partition) => vec![
            &overview
                .partition(partition)
                .ok_or(AdminError::NotOwned(NotOwned(partition)))?
                .view,
        ],
        Scope::Instance | Scope::Group => overview.partitions.iter().map(|p| &p.view).collect(),
    };
    if views.is_empty() {
        return Err(AdminError::Conflict(
            "this instance owns no partition right now".to_owned(),
        ));
    }
    let partitions: Vec<i32> = views.iter().map(|v| v.partition).collect();
    let found = find_time(state.reader.clone(), partitions, to)
        .await
        .map_err(|error| {
            tracing::warn!(error = %chain(&error), "rewind lookup failed");
            AdminError::Unavailable(
                "the point in time could not be looked up in the topic; the service log has \
                 the details"
                    .to_owned(),
            )
        })?;
    let mut rows: Vec<PlanRow> = views
        .iter()
        .filter_map(|view| {
            let &(target, how) = found.get(&view.partition)?;
            // A partition held at an offset reset reads on from its log's start (or moves back
            // to an earlier target), as the driver will decide.
            let gap = match &view.fetch {
                Some(Trouble::Held(Held {
                    offset: Some(from),
                    cause:
                        HeldCause::OffsetOutOfRange {
                            log_start: Some(start),
                            ..
                        },
                    ..
                })) => Some((*from, *start)),
                _ => None,
            };
            let (position, decision) = match gap {
                Some((from, start)) => (Some(from), restart_past_gap(from, start, target).decision),
                None => {
                    let position = position_now(view);
                    (position, decide(position, target))
                }
            };
            Some(PlanRow {
                partition: view.partition,
                position,
                target,
                found_by: match how {
                    Found::Broker => "broker",
                    Found::Read => "read",
                }
                .to_owned(),
                decision,
            })
        })
        .collect();
    rows.sort_by_key(|r| r.partition);
    Ok(Plan {
        to,
        replayed: rows.iter().map(|r| r.decision.replayed()).sum(),
        partitions: rows,
    })
}

/// Plans afresh, has the supervisor rewind, and records every partition's result in the audit
/// trail under `actor`.
pub async fn execute(
    state: &AdminState,
    scope: Scope,
    to: DateTime<Utc>,
    actor: &str,
) -> Result<Vec<LiveRewound>, AdminError> {
    let planned = match plan(state, scope, to).await {
        Ok(planned) => planned,
        Err(refused) => {
            if let AdminError::NotOwned(NotOwned(partition)) = refused {
                let result = format!("not owned, to {}", to.to_rfc3339());
                record(state, actor, &[(partition, result)]).await;
            }
            return Err(refused);
        }
    };
    let targets = planned
        .partitions
        .iter()
        .map(|row| (row.partition, row.target))
        .collect();
    let results = state
        .supervisor
        .send(RewindPartitions { targets })
        .await
        .map_err(|_| AdminError::ShuttingDown)??;
    let rows: Vec<(i32, String)> = results
        .iter()
        .map(|r| {
            let text = audit::result_text(
                r.decision.as_ref(),
                to,
                r.error.as_deref(),
                r.pending.as_deref(),
            );
            (r.partition, text)
        })
        .collect();
    tracing::info!(%actor, ?results, "admin rewind");
    record(state, actor, &rows).await;
    Ok(results)
}

/// The confirmation page, and after the rewind the result page.
#[derive(Template)]
#[template(path = "rewind.html")]
pub struct RewindPage {
    pub layout: Layout,
    pub scope: String,
    /// The point in time, shown and carried by the confirmation form.
    pub to: String,
    pub rows: Vec<RewindRowView>,
    /// Offsets to replay in all (confirmation) or a summary of the result.
    pub total: i64,
    /// Where the confirmation form posts.
    pub confirm: String,
    /// Back to where the operator came from.
    pub back: String,
    /// The result page rather than the confirmation.
    pub done: bool,
    /// What could not be planned or rewound (a member of the group that refused or did not
    /// answer).
    pub notes: Vec<String>,
}

/// One partition on the rewind page, formatted.
pub struct RewindRowView {
    pub partition: i32,
    pub position: String,
    pub target: String,
    pub found_by: String,
    pub after: String,
    pub replay: i64,
    pub note: String,
    pub failed: bool,
}

fn offset_text(offset: Option<i64>) -> String {
    offset.map_or_else(|| "—".to_owned(), |o| o.to_string())
}

fn decision_note(decision: &Decision) -> String {
    match decision {
        Decision::Rewind { .. } => "moves back".to_owned(),
        Decision::Keep { reason, .. } => format!("kept: {}", reason.describe()),
        Decision::PastGap { .. } => {
            "reads on from the log's start past a recorded offset reset".to_owned()
        }
    }
}

impl RewindPage {
    /// The confirmation step of `plan`.
    pub fn confirmation(layout: Layout, scope: Scope, plan: &Plan) -> RewindPage {
        let rows = plan
            .partitions
            .iter()
            .map(|row| RewindRowView {
                partition: row.partition,
                position: offset_text(row.position),
                target: match row.target {
                    TimeOffset::At { offset } => offset.to_string(),
                    TimeOffset::NoneAfter { .. } => "none".to_owned(),
                },
                found_by: row.found_by.clone(),
                after: offset_text(row.decision.after()),
                replay: row.decision.replayed(),
                note: decision_note(&row.decision),
                failed: false,
            })
            .collect();
        RewindPage {
            layout,
            scope: scope.describe(),
            to: plan.to.to_rfc3339_opts(SecondsFormat::Millis, true),
            rows,
            total: plan.replayed,
            confirm: match scope {
                Scope::Partition(p) => format!("/partitions/{p}/rewind/confirm"),
                Scope::Instance => "/rewind/confirm".to_owned(),
                Scope::Group => "/group/rewind/confirm".to_owned(),
            },
            back: back_link(scope),
            done: false,
            notes: Vec::new(),
        }
    }

    /// What the rewind did.
    pub fn result(
        layout: Layout,
        scope: Scope,
        to: DateTime<Utc>,
        results: &[LiveRewound],
    ) -> RewindPage {
        let rows = results
            .iter()
            .map(|r| {
                let decision = r.decision.as_ref();
                let note = match (decision, &r.error, &r.pending) {
                    (_, Some(error), _) => error.clone(),
                    (_, None, Some(pending)) => format!("reading again, commit pending: {pending}"),
                    (Some(Decision::Rewind { .. }), None, None) => "rewound".to_owned(),
                    (Some(decision), None, None) => decision_note(decision),
                    (None, None, None) => String::new(),
                };
                RewindRowView {
                    partition: r.partition,
                    position: offset_text(decision.and_then(Decision::before)),
                    target: String::new(),
                    found_by: String::new(),
                    after: offset_text(decision.and_then(Decision::after)),
                    replay: decision.map_or(0, Decision::replayed),
                    note,
                    failed: r.error.is_some(),
                }
            })
            .collect::<Vec<_>>();
        RewindPage {
            layout,
            scope: scope.describe(),
            to: to.to_rfc3339_opts(SecondsFormat::Millis, true),
            total: rows.iter().map(|r| r.replay).sum(),
            rows,
            confirm: String::new(),
            back: back_link(scope),
            done: true,
            notes: Vec::new(),
        }
    }
}

fn back_link(scope: Scope) -> String {
    match scope {
        Scope::Partition(p) => format!("/partitions/{p}"),
        Scope::Instance => "/".to_owned(),
        Scope::Group => "/group".to_owned(),
    }
}

async fn record(state: &AdminState, actor: &str, rows: &[(i32, String)]) {
    if let Err(error) = audit::record(&state.pool, actor, rows).await {
        tracing::warn!(error = %chain(&error), "admin rewind not recorded in the audit trail");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::status::CheckpointStatus;
    use crate::domain::ObservedOffsets;

    fn view(watermark: Option<i64>, first_unresolved: Option<i64>, broker: i64) -> PartitionView {
        PartitionView {
            partition: 0,
            actor: None,
            checkpoint: Some(CheckpointStatus {
                partition: 0,
                generation: 1,
                watermark,
                committed: None,
                unresolved: usize::from(first_unresolved.is_some()),
                first_unresolved,
                commits_ok: 0,
                commits_failed: 0,
                last_commit_error: None,
            }),
            observed: Some(ObservedOffsets {
                partition: 0,
                high_watermark: 100,
                last_stable: 100,
                committed: broker,
                observed_at: chrono::Utc::now(),
            }),
            fetch: None,
        }
    }

    #[test]
    fn a_partition_is_where_its_watermark_is_else_where_it_is_blocked_else_committed() {
        assert_eq!(position_now(&view(Some(40), Some(45), 30)), Some(40));
        assert_eq!(position_now(&view(None, Some(12), 10)), Some(12));
        assert_eq!(position_now(&view(None, None, 10)), Some(10));
        assert_eq!(position_now(&view(None, None, -1)), None);
    }
}
