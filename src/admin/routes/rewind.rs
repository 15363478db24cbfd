//! The live rewind of a partition or of the whole instance: from a signed-in form in two steps
//! (a confirmation page showing how many records will be replayed, then the rewind), or with a
//! bearer token (`dry_run=true` answers the confirmation step as JSON).

use actix_web::routes;
use chrono::{DateTime, Utc};

use super::routed::{MemberPart, Routed, group_rewind, owned_here, route};
use super::*;
use crate::actors::messages::LiveRewound;
use crate::admin::rewind::{self as live, RewindPage, Scope};
use crate::admin::rewind::{Plan, PlanRow};
use crate::domain::parse_point_in_time;
use crate::group::commands::Outcome;

#[derive(Deserialize)]
pub(super) struct RewindForm {
    csrf: Option<String>,
    to: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct RewindQuery {
    to: Option<String>,
    dry_run: Option<String>,
}

fn parse_to(text: Option<&str>) -> Result<DateTime<Utc>, AdminError> {
    parse_point_in_time(text.unwrap_or_default())
        .map_err(|e| AdminError::BadRequest(format!("to: {}", chain(&e))))
}

fn parse_dry_run(text: Option<&str>) -> Result<bool, AdminError> {
    match text.map(str::trim) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(AdminError::BadRequest(format!(
            "dry_run must be true or false, got {:?}",
            truncate(other)
        ))),
    }
}

/// A form step: checks the sign-in and the CSRF token and the time, then shows the
/// confirmation or carries the rewind out.
async fn form_step(
    state: &AdminState,
    request: &HttpRequest,
    scope: Result<Scope, AdminError>,
    form: &RewindForm,
    confirm: bool,
) -> HttpResponse {
    let page = async {
        let principal = authorize(state, request, form.csrf.as_deref()).await?;
        let scope = scope?;
        let to = parse_to(form.to.as_deref())?;
        if let Scope::Partition(partition) = scope
            && !owned_here(state, partition).await?
        {
            let actor = principal.describe(request);
            let routed = if confirm {
                Routed::Rewind { to }
            } else {
                Routed::RewindPlan { to }
            };
            return Ok(route(state, &actor, partition, routed).await?.page());
        }
        let title = format!("Rewind {}", scope.describe());
        let page = if confirm {
            let actor = principal.describe(request);
            let results = live::execute(state, scope, to, &actor).await?;
            RewindPage::result(layout(state, request, &title), scope, to, &results)
        } else {
            let plan = live::plan(state, scope, to).await?;
            RewindPage::confirmation(layout(state, request, &title), scope, &plan)
        };
        Ok(html(StatusCode::OK, &page))
    };
    page_or_error(state, request, page.await)
}

/// The two steps of a partition's rewind: the confirmation page, then (`/confirm`) the rewind.
#[routes]
#[post("/partitions/{partition}/rewind")]
#[post("/partitions/{partition}/rewind/confirm")]
pub(super) async fn partition_rewind(
    state: State,
    request: HttpRequest,
    path: web::Path<String>,
    form: web::Form<RewindForm>,
) -> HttpResponse {
    let scope = parse_partition(&path).map(Scope::Partition);
    let confirm = confirms(&request);
    form_step(&state, &request, scope, &form, confirm).await
}

/// The two steps of the whole instance's rewind, as a partition's.
#[routes]
#[post("/rewind")]
#[post("/rewind/confirm")]
pub(super) async fn instance_rewind(
    state: State,
    request: HttpRequest,
    form: web::Form<RewindForm>,
) -> HttpResponse {
    let confirm = confirms(&request);
    form_step(&state, &request, Ok(Scope::Instance), &form, confirm).await
}

/// Whether the form came to the confirming step (its path ends in `/confirm`).
fn confirms(request: &HttpRequest) -> bool {
    request.path().ends_with("/confirm")
}

/// The API: the bearer token only, as for the other actions.
async fn api_step(
    state: &AdminState,
    request: &HttpRequest,
    scope: Result<Scope, AdminError>,
    query: &RewindQuery,
) -> Result<HttpResponse, AdminError> {
    require_bearer(state, request)?;
    let principal = authorize(state, request, None).await?;
    let dry_run = parse_dry_run(query.dry_run.as_deref())?;
    let scope = scope?;
    let to = parse_to(query.to.as_deref())?;
    if let Scope::Partition(partition) = scope
        && !owned_here(state, partition).await?
    {
        let actor = principal.describe(request);
        let routed = if dry_run {
            Routed::RewindPlan { to }
        } else {
            Routed::Rewind { to }
        };
        return Ok(route(state, &actor, partition, routed).await?.response());
    }
    let body = if dry_run {
        let plan = live::plan(state, scope, to).await?;
        serde_json::json!({ "dry_run": true, "plan": plan })
    } else {
        let actor = principal.describe(request);
        let results = live::execute(state, scope, to, &actor).await?;
        serde_json::json!({ "dry_run": false, "to": to, "partitions": results })
    };
    Ok(HttpResponse::Ok().json(body))
}

#[post("/api/partitions/{partition}/rewind")]
pub(super) async fn api_partition_rewind(
    state: State,
    request: HttpRequest,
    path: web::Path<String>,
    query: web::Query<RewindQuery>,
) -> Result<HttpResponse, AdminError> {
    let scope = parse_partition(&path).map(Scope::Partition);
    api_step(&state, &request, scope, &query).await
}

#[post("/api/rewind")]
pub(super) async fn api_instance_rewind(
    state: State,
    request: HttpRequest,
    query: web::Query<RewindQuery>,
) -> Result<HttpResponse, AdminError> {
    api_step(&state, &request, Ok(Scope::Instance), &query).await
}

// ----- every partition of the group ----------------------------------------------------------

/// The offsets a member part replays.
fn part_replayed(part: &MemberPart) -> i64 {
    match (&part.plan, &part.partitions) {
        (Some(plan), _) => plan.replayed,
        (None, Some(results)) => results
            .iter()
            .filter_map(|r| r.decision.as_ref())
            .map(|d| d.replayed())
            .sum(),
        _ => 0,
    }
}

/// The members that did not do their part, in words.
fn part_notes(parts: &[MemberPart]) -> Vec<String> {
    parts
        .iter()
        .filter(|p| p.outcome != Outcome::Done)
        .map(|p| {
            format!(
                "member {}: {} — {}",
                p.member,
                p.outcome.as_str(),
                p.message
            )
        })
        .collect()
}

/// A form step of the group's rewind: the preview (each member's plan) or the rewind.
async fn group_form_step(
    state: &AdminState,
    request: &HttpRequest,
    form: &RewindForm,
    confirm: bool,
) -> HttpResponse {
    let page = async {
        let principal = authorize(state, request, form.csrf.as_deref()).await?;
        let to = parse_to(form.to.as_deref())?;
        let actor = principal.describe(request);
        let parts = group_rewind(state, &actor, to, confirm).await?;
        let title = "Rewind every partition of the group";
        let layout = layout(state, request, title);
        let mut page = if confirm {
            let results: Vec<LiveRewound> = parts
                .iter()
                .flat_map(|p| p.partitions.clone().unwrap_or_default())
                .collect();
            RewindPage::result(layout, Scope::Group, to, &results)
        } else {
            let mut rows: Vec<PlanRow> = parts
                .iter()
                .flat_map(|p| p.plan.as_ref().map(|plan| plan.partitions.clone()))
                .flatten()
                .collect();
            rows.sort_by_key(|r| r.partition);
            let plan = Plan {
                to,
                replayed: parts.iter().map(part_replayed).sum(),
                partitions: rows,
            };
            RewindPage::confirmation(layout, Scope::Group, &plan)
        };
        page.notes = part_notes(&parts);
        Ok(html(StatusCode::OK, &page))
    };
    page_or_error(state, request, page.await)
}

#[post("/group/rewind")]
pub(super) async fn group_rewind_form(
    state: State,
    request: HttpRequest,
    form: web::Form<RewindForm>,
) -> HttpResponse {
    group_form_step(&state, &request, &form, false).await
}

#[post("/group/rewind/confirm")]
pub(super) async fn group_rewind_confirm(
    state: State,
    request: HttpRequest,
    form: web::Form<RewindForm>,
) -> HttpResponse {
    group_form_step(&state, &request, &form, true).await
}

/// Every partition of the group, one command per member; `dry_run=true` gives each member's
/// plan.
#[post("/api/group/rewind")]
pub(super) async fn api_group_rewind(
    state: State,
    request: HttpRequest,
    query: web::Query<RewindQuery>,
) -> Result<HttpResponse, AdminError> {
    require_bearer(&state, &request)?;
    let principal = authorize(&state, &request, None).await?;
    let dry_run = parse_dry_run(query.dry_run.as_deref())?;
    let to = parse_to(query.to.as_deref())?;
    let actor = principal.describe(&request);
    let parts = group_rewind(&state, &actor, to, !dry_run).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "dry_run": dry_run,
        "to": to,
        "replayed": parts.iter().map(part_replayed).sum::<i64>(),
        "members": parts,
    })))
}
