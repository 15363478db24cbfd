//! The JSON API mirroring the pages.

use super::*;

#[get("/api/status")]
pub(super) async fn api_status(state: State) -> HttpResponse {
    match overview_of(&state).await {
        Some(overview) => HttpResponse::Ok().json(overview),
        None => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the service is shutting down",
        ),
    }
}

#[get("/api/partitions/{partition}")]
pub(super) async fn api_partition(state: State, path: web::Path<String>) -> HttpResponse {
    let partition = match parse_partition(&path) {
        Ok(p) => p,
        Err(message) => return json_error(StatusCode::BAD_REQUEST, message),
    };
    match overview_of(&state)
        .await
        .as_ref()
        .and_then(|o| o.partition(partition))
    {
        Some(summary) => HttpResponse::Ok().json(summary),
        None => json_error(
            StatusCode::NOT_FOUND,
            format!("partition {partition} is not assigned to this instance"),
        ),
    }
}

#[get("/api/dead-letters")]
pub(super) async fn api_dead_letters(
    state: State,
    query: web::Query<DeadLetterQuery>,
) -> HttpResponse {
    let filter = match query.filter() {
        Ok(f) => f,
        Err(message) => return json_error(StatusCode::BAD_REQUEST, message),
    };
    match queries::dead_letters(&state.pool, &filter).await {
        Ok((rows, total)) => HttpResponse::Ok().json(serde_json::json!({
            "total": total, "page": filter.page, "per_page": DEAD_LETTERS_PER_PAGE, "dead_letters": rows
        })),
        Err(error) => json_error(StatusCode::SERVICE_UNAVAILABLE, error.to_string()),
    }
}

#[get("/api/tickets/{ticket_id}")]
pub(super) async fn api_ticket(state: State, path: web::Path<String>) -> HttpResponse {
    let ticket_id = match parse_ticket(&path) {
        Ok(t) => t,
        Err(message) => return json_error(StatusCode::BAD_REQUEST, message),
    };
    match queries::ticket_history(&state.pool, &ticket_id).await {
        Ok(rows) => {
            HttpResponse::Ok().json(serde_json::json!({ "ticket_id": ticket_id, "history": rows }))
        }
        Err(error) => json_error(StatusCode::SERVICE_UNAVAILABLE, error.to_string()),
    }
}

#[get("/api/actions")]
pub(super) async fn api_actions(state: State) -> HttpResponse {
    match queries::recent_actions(&state.pool, None, 100).await {
        Ok(rows) => HttpResponse::Ok().json(serde_json::json!({ "actions": rows })),
        Err(error) => json_error(StatusCode::SERVICE_UNAVAILABLE, error.to_string()),
    }
}
