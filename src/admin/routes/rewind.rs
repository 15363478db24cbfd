//! The live rewind of a partition or of the whole instance: from a signed-in form in two steps
//! (a confirmation page showing how many records will be replayed, then the rewind), or with a
//! bearer token (`dry_run=true` answers the confirmation step as JSON).

use chrono::{DateTime, Utc};

use super::*;
use crate::admin::auth::bearer_token;
use crate::admin::rewind::{self as live, Refused, RewindPage, Scope};
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

fn parse_to(text: Option<&str>) -> Result<DateTime<Utc>, String> {
    parse_point_in_time(text.unwrap_or_default()).map_err(|e| format!("to: {}", chain(&e)))
}

fn refused_status(refused: &Refused) -> StatusCode {
    match refused {
        Refused::NotOwned(_) | Refused::Nothing => StatusCode::CONFLICT,
        Refused::Lookup | Refused::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// A form step: checks the sign-in and the CSRF token and the time, then runs `step`.
async fn form_step(
    state: &AdminState,
    request: &HttpRequest,
    scope: Result<Scope, String>,
    form: &RewindForm,
    confirm: bool,
) -> HttpResponse {
    let principal = match state.auth.authorize(request, form.csrf.as_deref()) {
        Ok(principal) => principal,
        Err(denied) => {
            tarpit(&denied).await;
            return denied_response(state, request, &denied, false, "");
        }
    };
    let (scope, to) = match (scope, parse_to(form.to.as_deref())) {
        (Ok(scope), Ok(to)) => (scope, to),
        (Err(message), _) | (_, Err(message)) => {
            return error_page(state, request, StatusCode::BAD_REQUEST, message);
        }
    };
    let title = format!("Rewind {}", scope.describe());
    let outcome = if confirm {
        let actor = principal.describe(request);
        live::execute(state, scope, to, &actor)
            .await
            .map(|results| RewindPage::result(layout(state, request, &title), scope, to, &results))
    } else {
        live::plan(state, scope, to)
            .await
            .map(|plan| RewindPage::confirmation(layout(state, request, &title), scope, &plan))
    };
    match outcome {
        Ok(page) => html(StatusCode::OK, &page),
        Err(refused) => error_page(state, request, refused_status(&refused), refused.message()),
    }
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
    scope: Result<Scope, String>,
    query: &RewindQuery,
) -> HttpResponse {
    if bearer_token(request).is_none() {
        let denied = if state.auth.read_only() {
            Denied::ReadOnly
        } else {
            Denied::NotSignedIn
        };
        let hint = "; send Authorization: Bearer <token>";
        return denied_response(state, request, &denied, true, hint);
    }
    let principal = match state.auth.authorize(request, None) {
        Ok(principal) => principal,
        Err(denied) => {
            tarpit(&denied).await;
            return denied_response(state, request, &denied, true, "");
        }
    };
    let dry_run = match query.dry_run.as_deref().map(str::trim) {
        None | Some("" | "false" | "0") => false,
        Some("true" | "1") => true,
        Some(other) => {
            let message = format!("dry_run must be true or false, got {:?}", truncate(other));
            return json_error(StatusCode::BAD_REQUEST, message);
        }
    };
    let (scope, to) = match (scope, parse_to(query.to.as_deref())) {
        (Ok(scope), Ok(to)) => (scope, to),
        (Err(message), _) | (_, Err(message)) => {
            return json_error(StatusCode::BAD_REQUEST, message);
        }
    };
    let outcome = if dry_run {
        live::plan(state, scope, to)
            .await
            .map(|plan| serde_json::json!({ "dry_run": true, "plan": plan }))
    } else {
        let actor = principal.describe(request);
        live::execute(state, scope, to, &actor)
            .await
            .map(|results| serde_json::json!({ "dry_run": false, "to": to, "partitions": results }))
    };
    match outcome {
        Ok(body) => HttpResponse::Ok().json(body),
        Err(refused) => json_error(refused_status(&refused), refused.message()),
    }
}

#[post("/api/partitions/{partition}/rewind")]
pub(super) async fn api_partition_rewind(
    state: State,
    request: HttpRequest,
    path: web::Path<String>,
    query: web::Query<RewindQuery>,
) -> HttpResponse {
    let scope = parse_partition(&path).map(Scope::Partition);
    api_step(&state, &request, scope, &query).await
}

#[post("/api/rewind")]
pub(super) async fn api_instance_rewind(
    state: State,
    request: HttpRequest,
    query: web::Query<RewindQuery>,
) -> HttpResponse {
    api_step(&state, &request, Ok(Scope::Instance), &query).await
}
