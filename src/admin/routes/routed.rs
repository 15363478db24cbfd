//! Actions on a partition another member owns, carried to that member through the shared
//! database ([`crate::group::commands`]): the asking side ([`route`]) and the owner's side
//! ([`serve`]), which carries a command out with the same functions (and so the same actor
//! messages) as its own routes, after checking that the partition is still the one the command
//! was asked for: owned by this member, in the same generation. A command for a partition that
//! moved in between is refused, never applied to whoever owns it now.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::*;
use crate::admin::rewind::{self as live, Scope};
use crate::group::commands::{self, Answer, Command, NewCommand, Outcome};
use crate::group::members;

/// An action that can be routed.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Routed {
    Action(PartitionAction),
    DeadLetter {
        offset: i64,
        comment: String,
    },
    /// The live rewind's confirmation step (nothing changes).
    RewindPlan {
        to: DateTime<Utc>,
    },
    Rewind {
        to: DateTime<Utc>,
    },
    /// Every partition of a member, as listed with their generations when asked (one command
    /// per member for a rewind of the whole group).
    MemberRewindPlan {
        to: DateTime<Utc>,
        partitions: Vec<(i32, Option<i64>)>,
    },
    MemberRewind {
        to: DateTime<Utc>,
        partitions: Vec<(i32, Option<i64>)>,
    },
}

impl Routed {
    fn name(&self) -> &'static str {
        match self {
            Routed::Action(action) => action.as_str(),
            Routed::DeadLetter { .. } => "dead_letter",
            Routed::RewindPlan { .. } => "rewind_plan",
            Routed::Rewind { .. } => "rewind",
            Routed::MemberRewindPlan { .. } => "rewind_member_plan",
            Routed::MemberRewind { .. } => "rewind_member",
        }
    }

    fn arguments(&self, generation: Option<i64>) -> Value {
        let mut arguments = match self {
            Routed::Action(_) => json!({}),
            Routed::DeadLetter { offset, comment } => {
                json!({ "offset": offset, "comment": comment })
            }
            Routed::RewindPlan { to } | Routed::Rewind { to } => json!({ "to": to }),
            Routed::MemberRewindPlan { to, partitions }
            | Routed::MemberRewind { to, partitions } => {
                let listed: Vec<Value> = partitions
                    .iter()
                    .map(|(p, g)| json!({ "partition": p, "generation": g }))
                    .collect();
                json!({ "to": to, "partitions": listed })
            }
        };
        arguments["generation"] = json!(generation);
        arguments
    }

    /// The command as its owner reads it back.
    fn parse(action: &str, arguments: &Value) -> Result<Routed, String> {
        let to = || {
            arguments["to"]
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc))
                .ok_or_else(|| format!("the command has no time to rewind to: {arguments}"))
        };
        match action {
            "dead_letter" => Ok(Routed::DeadLetter {
                offset: arguments["offset"]
                    .as_i64()
                    .ok_or_else(|| format!("the command has no offset: {arguments}"))?,
                comment: arguments["comment"].as_str().unwrap_or_default().to_owned(),
            }),
            "rewind_plan" => Ok(Routed::RewindPlan { to: to()? }),
            "rewind_member_plan" => Ok(Routed::MemberRewindPlan {
                to: to()?,
                partitions: listed(arguments)?,
            }),
            "rewind_member" => Ok(Routed::MemberRewind {
                to: to()?,
                partitions: listed(arguments)?,
            }),
            "rewind" => Ok(Routed::Rewind { to: to()? }),
            other => parse_action(other)
                .map(Routed::Action)
                .map_err(|e| e.to_string()),
        }
    }
}

/// Partitions with their generations, as a member's rewind lists them.
type Listed = Vec<(i32, Option<i64>)>;

/// The partitions a member's rewind lists, with their generations.
fn listed(arguments: &Value) -> Result<Listed, String> {
    arguments["partitions"]
        .as_array()
        .ok_or_else(|| format!("the command lists no partitions: {arguments}"))?
        .iter()
        .map(|p| {
            let partition = p["partition"]
                .as_i64()
                .and_then(|p| i32::try_from(p).ok())
                .ok_or_else(|| format!("not a partition: {p}"))?;
            Ok((partition, p["generation"].as_i64()))
        })
        .collect()
}

/// What the owner answered (or the asker concluded when it did not).
pub(super) struct RoutedAnswer {
    pub id: Option<i64>,
    pub owner: String,
    pub answer: Answer,
}

impl RoutedAnswer {
    /// The answer as the API gives it: the owner's status and body, with where it ran.
    pub(super) fn response(&self) -> HttpResponse {
        let status = StatusCode::from_u16(self.answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut body = match (&self.answer.body, self.answer.outcome) {
            (Value::Object(_), Outcome::Done) => self.answer.body.clone(),
            _ => json!({ "error": self.answer.message }),
        };
        body["routed_to"] = json!(self.owner);
        body["command"] = json!(self.id);
        body["outcome"] = json!(self.answer.outcome);
        body["message"] = json!(self.answer.message);
        HttpResponse::build(status).json(body)
    }

    /// Where a form goes after it: the group page, showing the answer.
    pub(super) fn page(&self) -> HttpResponse {
        match self.id {
            Some(id) => see_other(&format!("/group?command={id}")),
            None => see_other("/group"),
        }
    }
}

/// Whether this member owns `partition` now (then its action runs here).
pub(super) async fn owned_here(state: &AdminState, partition: i32) -> Result<bool, AdminError> {
    Ok(overview_of(state).await?.partition(partition).is_some())
}

/// The live member of ours that publishes `partition` as its own, other than this one: its id
/// and the partition's generation there.
async fn owner_of(
    state: &AdminState,
    partition: i32,
) -> Result<Option<(String, Option<i64>)>, AdminError> {
    let group = &state.group;
    let rows = members::read(&state.pool, &group.member.group, &group.member.topic)
        .await
        .map_err(|e| AdminError::database("group members", e))?;
    Ok(rows
        .iter()
        .filter(|m| m.alive(group.settings.gone_after) && m.id != group.member.id)
        .find_map(|m| {
            let report = m.partitions.iter().find(|p| p.partition == partition)?;
            Some((m.id.clone(), report.generation))
        }))
}

/// Asks the member that owns `partition` to carry `routed` out and waits for its answer (at
/// most `--command-timeout`). `Err(NotOwned)` when no live member of ours owns it.
pub(super) async fn route(
    state: &AdminState,
    actor: &str,
    partition: i32,
    routed: Routed,
) -> Result<RoutedAnswer, AdminError> {
    let Some((owner, generation)) = owner_of(state, partition).await? else {
        audit(
            state,
            &audit_trail::Action {
                partition: Some(partition),
                offset: None,
                action: routed.name(),
                actor,
                result: "not owned",
                detail: Some("no live member of the group owns the partition"),
            },
        )
        .await;
        return Err(AdminError::Conflict(format!(
            "{}, and no live member of the group owns it (its owner is gone, publishes \
             nothing, or the partition does not exist): there is nobody to carry the action \
             out; the group page shows every partition's owner",
            NotOwned(partition)
        )));
    };
    ask(state, actor, &owner, Some(partition), &routed, generation).await
}

/// Sends `routed` to the member `owner` and waits for its answer (at most
/// `--command-timeout`).
pub(super) async fn ask(
    state: &AdminState,
    actor: &str,
    owner: &str,
    partition: Option<i32>,
    routed: &Routed,
    generation: Option<i64>,
) -> Result<RoutedAnswer, AdminError> {
    let owner = owner.to_owned();
    let group = &state.group;
    let mut answers = group.listener.answers.subscribe();
    let id = commands::insert(
        &state.pool,
        &NewCommand {
            group: &group.member.group,
            topic: &group.member.topic,
            partition,
            owner: &owner,
            action: routed.name(),
            arguments: routed.arguments(generation),
            asked_by: actor,
            asked_from_member: &group.member.id,
            asked_from_address: Some(group.member.admin_url.as_str()),
        },
    )
    .await
    .map_err(|e| AdminError::database("group commands", e))?;
    tracing::info!(id, ?partition, action = routed.name(), %owner, %actor, "admin action routed to the partition's owner");
    let timeout = group.settings.command_timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    let answer = loop {
        if let Some(answer) = read_answer(state, id).await? {
            break Some(answer);
        }
        if tokio::time::Instant::now() >= deadline {
            break None;
        }
        let wait =
            tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + commands::POLL));
        tokio::pin!(wait);
        loop {
            tokio::select! {
                _ = &mut wait => break,
                answered = answers.recv() => match answered {
                    Ok(answered) if answered != id => continue,
                    _ => break,
                },
            }
        }
    };
    let answer = match answer {
        Some(answer) => answer,
        None => unanswered(state, id, &owner, routed.name(), partition, actor, timeout).await?,
    };
    tracing::info!(id, ?partition, %owner, outcome = answer.outcome.as_str(), message = %answer.message, "routed admin action answered");
    Ok(RoutedAnswer {
        id: Some(id),
        owner,
        answer,
    })
}

async fn read_answer(state: &AdminState, id: i64) -> Result<Option<Answer>, AdminError> {
    let group = &state.group.member;
    let asked = commands::read(&state.pool, id, &group.group, &group.topic)
        .await
        .map_err(|e| AdminError::database("group commands", e))?;
    Ok(asked.and_then(|a| a.answer))
}

/// The owner did not answer in time: the command is withdrawn if it was not taken (it then
/// never runs), else the operator is told it is under way.
async fn unanswered(
    state: &AdminState,
    id: i64,
    owner: &str,
    action: &str,
    partition: Option<i32>,
    actor: &str,
    timeout: Duration,
) -> Result<Answer, AdminError> {
    let what = match partition {
        Some(p) => format!("which owns partition {p}"),
        None => "asked for its partitions".to_owned(),
    };
    let expired = Answer {
        outcome: Outcome::Expired,
        status: 504,
        message: format!(
            "member {owner}, {what}, did not take the command within \
             {} s: it was withdrawn and will not run. The member may be overloaded or cut off \
             from the database; its heartbeat on the group page tells whether it is alive",
            timeout.as_secs()
        ),
        body: Value::Null,
        by: state.group.member.id.clone(),
    };
    let withdrawn = commands::expire(&state.pool, id, &expired)
        .await
        .map_err(|e| AdminError::database("group commands", e))?;
    if withdrawn {
        audit(
            state,
            &audit_trail::Action {
                partition,
                offset: None,
                action,
                actor,
                result: "expired",
                detail: Some(&expired.message),
            },
        )
        .await;
        return Ok(expired);
    }
    // Taken in the meantime: its answer may be there now.
    if let Some(answer) = read_answer(state, id).await? {
        return Ok(answer);
    }
    Ok(Answer {
        outcome: Outcome::Failed,
        status: 504,
        message: format!(
            "member {owner} took the command but did not answer within {} s; it is carried out \
             there, and the audit trail (recent operator actions) will show its outcome",
            timeout.as_secs()
        ),
        body: Value::Null,
        by: state.group.member.id.clone(),
    })
}

/// The owner's side: takes the commands addressed to this member as they are announced (and
/// every [`commands::POLL`] in case an announcement was missed), each carried out in a task of
/// its own, until the member stops.
pub async fn serve(state: web::Data<AdminState>) {
    let mut stop = state.group.stopping();
    let mut failing = false;
    loop {
        tokio::select! {
            _ = state.group.listener.commands.notified() => {}
            _ = tokio::time::sleep(commands::POLL * 2) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        match commands::take(&state.pool, &state.group.member.id).await {
            Ok(taken) => {
                failing = false;
                for command in taken {
                    let state = state.clone();
                    actix::spawn(async move {
                        let answer = carry_out(&state, &command).await;
                        if let Err(error) =
                            commands::answer_command(&state.pool, command.id, &answer).await
                        {
                            tracing::warn!(id = command.id, error = %chain(&error), "the answer to a routed command was not written");
                        }
                    });
                }
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(error = %chain(&error), "routed commands cannot be read; trying again");
                }
                failing = true;
            }
        }
    }
}

/// Carries one command out here, or refuses it; the answer.
async fn carry_out(state: &AdminState, command: &Command) -> Answer {
    let me = state.group.member.id.clone();
    let answer = |outcome: Outcome, status: u16, message: String, body: Value| Answer {
        outcome,
        status,
        message,
        body,
        by: me.clone(),
    };
    let refuse = |message: String| answer(Outcome::Refused, 409, message, Value::Null);
    // The executed action's result: done, or refused (4xx) or failed (5xx) with its message.
    let answer_done = |done: Result<(String, Value), AdminError>| match done {
        Ok((message, body)) => answer(Outcome::Done, 200, message, body),
        Err(error) => {
            let status = error.status_code().as_u16();
            let outcome = if status < 500 {
                Outcome::Refused
            } else {
                Outcome::Failed
            };
            answer(outcome, status, error.to_string(), Value::Null)
        }
    };
    let timeout = state.group.settings.command_timeout;
    if command.age > timeout {
        return answer(
            Outcome::Expired,
            504,
            format!(
                "member {me} took the command {:.1} s after it was asked, later than the asker \
                 waits ({} s): not carried out",
                command.age.as_secs_f64(),
                timeout.as_secs()
            ),
            Value::Null,
        );
    }
    let routed = match Routed::parse(&command.action, &command.arguments) {
        Ok(routed) => routed,
        Err(why) => return answer(Outcome::Refused, 400, why, Value::Null),
    };
    let actor = command.actor();
    if let Routed::MemberRewindPlan { to, partitions } | Routed::MemberRewind { to, partitions } =
        &routed
    {
        let confirm = matches!(routed, Routed::MemberRewind { .. });
        let done = member_rewind(state, &actor, *to, partitions, confirm).await;
        return answer_done(done);
    }
    let Some(partition) = command.partition else {
        return refuse("the command names no partition".to_owned());
    };
    // The partition must be the one the command was asked for.
    let expected = command.arguments["generation"].as_i64();
    let now = match overview_of(state).await {
        Ok(overview) => overview
            .partition(partition)
            .map(|summary| members::generation_of(&summary.view)),
        Err(error) => {
            return answer(Outcome::Failed, 503, error.to_string(), Value::Null);
        }
    };
    let refused = match now {
        None => Some(format!(
            "partition {partition} is not owned by member {me} any more (it moved after the \
             command was asked): refused, not carried out anywhere; ask again where the group \
             page shows its new owner"
        )),
        Some(now) if expected.is_some() && now != expected => Some(format!(
            "partition {partition} left member {me} and came back after the command was asked \
             (generation {} then, {} now): refused; ask again",
            expected.unwrap_or_default(),
            now.unwrap_or_default()
        )),
        Some(_) => None,
    };
    if let Some(message) = refused {
        tracing::info!(id = command.id, partition, %actor, action = %command.action, "routed admin action refused: {message}");
        audit(
            state,
            &audit_trail::Action {
                partition: Some(partition),
                offset: None,
                action: routed.name(),
                actor: &actor,
                result: "refused: owner changed",
                detail: Some(&message),
            },
        )
        .await;
        return refuse(message);
    }
    let done = match routed {
        Routed::MemberRewindPlan { .. } | Routed::MemberRewind { .. } => {
            unreachable!("carried out above")
        }
        Routed::Action(action) => super::actions::apply(state, &actor, partition, action)
            .await
            .map(|()| {
                (
                    format!(
                        "{} done on partition {partition} by member {me}",
                        action.as_str()
                    ),
                    json!({ "partition": partition, "action": action, "result": "ok" }),
                )
            }),
        Routed::DeadLetter { offset, comment } => {
            super::remedies::skip_as(state, &actor, partition, offset, comment)
                .await
                .map(|answer| {
                    (
                        answer["result"].as_str().unwrap_or_default().to_owned(),
                        answer,
                    )
                })
        }
        Routed::RewindPlan { to } => live::plan(state, Scope::Partition(partition), to)
            .await
            .map(|plan| {
                (
                    format!(
                        "rewinding partition {partition} on member {me} to {} replays {} records",
                        to.to_rfc3339(),
                        plan.replayed
                    ),
                    json!({ "dry_run": true, "plan": plan }),
                )
            }),
        Routed::Rewind { to } => live::execute(state, Scope::Partition(partition), to, &actor)
            .await
            .map(|results| {
                let text = results
                    .iter()
                    .map(|r| {
                        crate::recovery::audit::result_text(
                            r.decision.as_ref(),
                            to,
                            r.error.as_deref(),
                            r.pending.as_deref(),
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                (
                    format!("partition {partition} on member {me}: {text}"),
                    json!({ "dry_run": false, "to": to, "partitions": results }),
                )
            }),
    };
    answer_done(done)
}

/// A rewind of every partition of this member, as listed when the group's rewind was asked:
/// refused when the member's partitions changed since (a partition left, came back or was
/// added), so that nothing is rewound that the operator did not preview.
async fn member_rewind(
    state: &AdminState,
    actor: &str,
    to: DateTime<Utc>,
    listed: &[(i32, Option<i64>)],
    confirm: bool,
) -> Result<(String, Value), AdminError> {
    let me = &state.group.member.id;
    let overview = overview_of(state).await?;
    let mut now: Vec<(i32, Option<i64>)> = overview
        .partitions
        .iter()
        .map(|p| (p.view.partition, members::generation_of(&p.view)))
        .collect();
    now.sort_unstable();
    let mut asked = listed.to_vec();
    asked.sort_unstable();
    if now != asked {
        let names = |l: &[(i32, Option<i64>)]| {
            l.iter()
                .map(|(p, g)| format!("{p} (generation {})", g.unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(AdminError::Conflict(format!(
            "the partitions of member {me} changed since the rewind was asked (asked for: {}; \
             owns now: {}): refused, nothing rewound here; preview again",
            names(&asked),
            names(&now)
        )));
    }
    if confirm {
        let results = live::execute(state, Scope::Group, to, actor).await?;
        let replayed: i64 = results
            .iter()
            .filter_map(|r| r.decision.as_ref())
            .map(|d| d.replayed())
            .sum();
        Ok((
            format!(
                "member {me} rewound {} partitions: {replayed} offsets replayed",
                results.len()
            ),
            json!({ "dry_run": false, "to": to, "partitions": results }),
        ))
    } else {
        let plan = live::plan(state, Scope::Group, to).await?;
        Ok((
            format!(
                "member {me}: {} partitions, {} records to replay",
                plan.partitions.len(),
                plan.replayed
            ),
            json!({ "dry_run": true, "plan": plan }),
        ))
    }
}

/// One member's part of a rewind of the whole group.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct MemberPart {
    pub member: String,
    pub outcome: Outcome,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<live::Plan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<crate::actors::messages::LiveRewound>>,
}

/// A rewind of every partition of the group: this member's here, one command for each other
/// live member that publishes partitions; each member's part as it answered.
pub(super) async fn group_rewind(
    state: &AdminState,
    actor: &str,
    to: DateTime<Utc>,
    confirm: bool,
) -> Result<Vec<MemberPart>, AdminError> {
    let group = &state.group;
    let rows = members::read(&state.pool, &group.member.group, &group.member.topic)
        .await
        .map_err(|e| AdminError::database("group members", e))?;
    let others: Vec<(String, Listed)> = rows
        .iter()
        .filter(|m| m.alive(group.settings.gone_after) && m.id != group.member.id)
        .filter(|m| !m.partitions.is_empty())
        .map(|m| {
            let listed = m
                .partitions
                .iter()
                .map(|p| (p.partition, p.generation))
                .collect();
            (m.id.clone(), listed)
        })
        .collect();
    let here = async {
        let me = group.member.id.clone();
        let part = |outcome, message, plan, partitions| MemberPart {
            member: me.clone(),
            outcome,
            message,
            plan,
            partitions,
        };
        let owned = !overview_of(state).await?.partitions.is_empty();
        if !owned {
            return Ok::<_, AdminError>(None);
        }
        let done = if confirm {
            live::execute(state, Scope::Group, to, actor)
                .await
                .map(|r| part(Outcome::Done, format!("member {me} rewound"), None, Some(r)))
        } else {
            live::plan(state, Scope::Group, to)
                .await
                .map(|p| part(Outcome::Done, format!("member {me}"), Some(p), None))
        };
        Ok(Some(done.unwrap_or_else(|e| {
            part(Outcome::Failed, e.to_string(), None, None)
        })))
    };
    let there = futures::future::join_all(others.into_iter().map(|(owner, listed)| async move {
        let routed = if confirm {
            Routed::MemberRewind {
                to,
                partitions: listed,
            }
        } else {
            Routed::MemberRewindPlan {
                to,
                partitions: listed,
            }
        };
        match ask(state, actor, &owner, None, &routed, None).await {
            Ok(routed) => {
                let body = &routed.answer.body;
                MemberPart {
                    member: owner,
                    outcome: routed.answer.outcome,
                    message: routed.answer.message.clone(),
                    plan: serde_json::from_value(body["plan"].clone()).ok(),
                    partitions: serde_json::from_value(body["partitions"].clone()).ok(),
                }
            }
            Err(error) => MemberPart {
                member: owner,
                outcome: Outcome::Failed,
                message: error.to_string(),
                plan: None,
                partitions: None,
            },
        }
    }));
    let (here, there) = futures::join!(here, there);
    let mut parts: Vec<MemberPart> = here?.into_iter().collect();
    parts.extend(there);
    if parts.is_empty() {
        return Err(AdminError::Conflict(
            "no live member of the group owns a partition right now".to_owned(),
        ));
    }
    Ok(parts)
}
