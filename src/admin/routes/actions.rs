//! Operator actions on a partition, from a signed-in form or with a bearer token.

use super::*;
use crate::admin::auth::bearer_token;

/// Why an action was not carried out.
pub(super) enum Refused {
    BadRequest(String),
    Denied(Denied),
    NotOwned(NotOwned),
}

/// Checks, applies and records an action; the audit line says who did what.
pub(super) async fn act(
    state: &AdminState,
    request: &HttpRequest,
    partition: &str,
    action: &str,
    csrf: Option<&str>,
) -> Result<(i32, PartitionAction), Refused> {
    let principal = state
        .auth
        .authorize(request, csrf)
        .map_err(Refused::Denied)?;
    let partition = parse_partition(partition).map_err(Refused::BadRequest)?;
    let action = parse_action(action).map_err(Refused::BadRequest)?;
    let applied = state
        .supervisor
        .send(PartitionCommand { partition, action })
        .await
        .unwrap_or(Err(NotOwned(partition)));
    let actor = principal.describe(request);
    let result = if applied.is_ok() { "ok" } else { "not owned" };
    tracing::info!(partition, action = action.as_str(), %actor, result, "admin action");
    audit(
        state,
        &queries::Action {
            partition: Some(partition),
            offset: None,
            action: action.as_str(),
            actor: &actor,
            result,
            detail: None,
        },
    )
    .await;
    applied.map_err(Refused::NotOwned)?;
    Ok((partition, action))
}

#[post("/partitions/{partition}/actions/{action}")]
pub(super) async fn partition_action(
    state: State,
    request: HttpRequest,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> HttpResponse {
    let (partition, action) = path.into_inner();
    match act(&state, &request, &partition, &action, form.csrf.as_deref()).await {
        Ok((partition, action)) => {
            see_other(&format!("/partitions/{partition}?done={}", action.as_str()))
        }
        Err(Refused::BadRequest(message)) => {
            error_page(&state, &request, StatusCode::BAD_REQUEST, message)
        }
        Err(Refused::Denied(denied)) => {
            tarpit(&denied).await;
            denied_response(&state, &request, &denied, false, "")
        }
        Err(Refused::NotOwned(error)) => {
            error_page(&state, &request, StatusCode::CONFLICT, error.to_string())
        }
    }
}

#[post("/api/partitions/{partition}/actions/{action}")]
pub(super) async fn api_partition_action(
    state: State,
    request: HttpRequest,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (partition, action) = path.into_inner();
    // The API authenticates with the bearer token only: a session cookie is not enough here,
    // so a cross-site request can never act through it.
    if bearer_token(&request).is_none() {
        let denied = if state.auth.read_only() {
            Denied::ReadOnly
        } else {
            Denied::NotSignedIn
        };
        return denied_response(
            &state,
            &request,
            &denied,
            true,
            "; send Authorization: Bearer <token>",
        );
    }
    match act(&state, &request, &partition, &action, None).await {
        Ok((partition, action)) => HttpResponse::Ok().json(serde_json::json!({
            "partition": partition, "action": action, "result": "ok"
        })),
        Err(Refused::BadRequest(message)) => json_error(StatusCode::BAD_REQUEST, message),
        Err(Refused::Denied(denied)) => {
            tarpit(&denied).await;
            denied_response(&state, &request, &denied, true, "")
        }
        Err(Refused::NotOwned(error)) => json_error(StatusCode::CONFLICT, error.to_string()),
    }
}
