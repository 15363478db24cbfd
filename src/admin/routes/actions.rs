//! Operator actions on a partition, from a signed-in form or with a bearer token.

use super::*;

/// Checks, applies and records an action; the audit line says who did what.
pub(super) async fn act(
    state: &AdminState,
    request: &HttpRequest,
    partition: &str,
    action: &str,
    csrf: Option<&str>,
) -> Result<(i32, PartitionAction), AdminError> {
    let principal = authorize(state, request, csrf).await?;
    let partition = parse_partition(partition)?;
    let action = parse_action(action)?;
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
    applied?;
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
    let acted = act(&state, &request, &partition, &action, form.csrf.as_deref()).await;
    let page = acted.map(|(partition, action)| {
        see_other(&format!("/partitions/{partition}?done={}", action.as_str()))
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
    let (partition, action) = act(&state, &request, &partition, &action, None).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "partition": partition, "action": action, "result": "ok"
    })))
}
