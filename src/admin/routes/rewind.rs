//! The live rewind of a partition or of the whole instance: from a signed-in form in two steps
//! (a confirmation page showing how many records will be replayed, then the rewind), or with a
//! bearer token (`dry_run=true` answers the confirmation step as JSON).

use chrono::{DateTime, Utc};

use super::routed::{Routed, owned_here, route};
use super::*;
use crate::admin::rewind::{self as live, RewindPage, Scope};
use crate::domain::parse_point_in_time;

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

#[post("/partitions/{partition}/rewind")]
pub(super) async fn partition_rewind(
    state: State,
    request: HttpRequest,
    path: web::Path<String>,
    form: web::Form<RewindForm>,
) -> HttpResponse {
    let scope = parse_partition(&path).map(Scope::Partition);
    form_step(&state, &request, scope, &form, false).await
}

#[post("/partitions/{partition}/rewind/confirm")]
pub(super) async fn partition_rewind_confirm(
    state: State,
    request: HttpRequest,
    path: web::Path<String>,
    form: web::Form<RewindForm>,
) -> HttpResponse {
    let scope = parse_partition(&path).map(Scope::Partition);
    form_step(&state, &request, scope, &form, true).await
}

#[post("/rewind")]
pub(super) async fn instance_rewind(
    state: State,
    request: HttpRequest,
    form: web::Form<RewindForm>,
) -> HttpResponse {
    form_step(&state, &request, Ok(Scope::Instance), &form, false).await
}

#[post("/rewind/confirm")]
pub(super) async fn instance_rewind_confirm(
    state: State,
    request: HttpRequest,
    form: web::Form<RewindForm>,
) -> HttpResponse {
    form_step(&state, &request, Ok(Scope::Instance), &form, true).await
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
    let dry_run = match query.dry_run.as_deref().map(str::trim) {
        None | Some("" | "false" | "0") => false,
        Some("true" | "1") => true,
        Some(other) => {
            return Err(AdminError::BadRequest(format!(
                "dry_run must be true or false, got {:?}",
                truncate(other)
            )));
        }
    };
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
