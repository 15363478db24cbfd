//! Operator actions on a partition, from a signed-in form or with a bearer token.

use super::routed::{Routed, RoutedAnswer, owned_here, route};
use super::*;

/// What became of an action: applied here, or carried to the member owning the partition.
pub(super) enum Acted {
    Here(i32, PartitionAction),
    Routed(RoutedAnswer),
}

/// Checks an action, then applies it here or routes it to the partition's owner.
pub(super) async fn act(
    state: &AdminState,
    request: &HttpRequest,
    partition: &str,
    action: &str,
    csrf: Option<&str>,
) -> Result<Acted, AdminError> {
    let principal = authorize(state, request, csrf).await?;
    let partition = parse_partition(partition)?;
    let action = parse_action(action)?;
    let actor = principal.describe(request);
    if !owned_here(state, partition).await? {
        return route(state, &actor, partition, Routed::Action(action))
            .await
            .map(Acted::Routed);
    }
    apply(state, &actor, partition, action).await?;
    Ok(Acted::Here(partition, action))
}

/// Applies an action to a partition of this member and records it (the member's own routes
/// and the commands routed to it both come here).
pub(super) async fn apply(
    state: &AdminState,
    actor: &str,
    partition: i32,
    action: PartitionAction,
) -> Result<(), AdminError> {
    let applied = state
        .supervisor
        .send(PartitionCommand { partition, action })
        .await
        .unwrap_or(Err(NotOwned(partition)));
    let result = if applied.is_ok() { "ok" } else { "not owned" };
    tracing::info!(partition, action = action.as_str(), %actor, result, "admin action");
    audit(
        state,
        &audit_trail::Action {
            partition: Some(partition),
            offset: None,
            action: action.as_str(),
            actor,
            result,
            detail: None,
        },
    )
    .await;
    applied?;
    Ok(())
}

#[post("/partitions/{partition}/actions/{action}")]
pub(super) async fn partition_action(
    state: State,
    request: HttpRequest,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> HttpResponse {
    let (partition, action) = path.into_inner();
    let acted = act(&state, &request, &partition, &action, form.csrf.as_deref()).await;
    let page = acted.map(|acted| match acted {
        Acted::Here(partition, action) => {
            see_other(&format!("/partitions/{partition}?done={}", action.as_str()))
        }
        Acted::Routed(routed) => routed.page(),
    });
    page_or_error(&state, &request, page)
}

#[post("/api/partitions/{partition}/actions/{action}")]
pub(super) async fn api_partition_action(
    state: State,
    request: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AdminError> {
    let (partition, action) = path.into_inner();
    require_bearer(&state, &request)?;
    match act(&state, &request, &partition, &action, None).await? {
        Acted::Here(partition, action) => Ok(HttpResponse::Ok().json(serde_json::json!({
            "partition": partition, "action": action, "result": "ok"
        }))),
        Acted::Routed(routed) => Ok(routed.response()),
    }
}
