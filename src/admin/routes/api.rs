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
    match pages::dead_letters_and_count(&state, &filter).await {
        // `older` and `newer` are cursors for `before=` and `after=`.
        Ok((page, total)) => HttpResponse::Ok().json(serde_json::json!({
            "total": total.min(DEAD_LETTER_COUNT_CAP),
            "total_capped": total > DEAD_LETTER_COUNT_CAP,
            "per_page": DEAD_LETTERS_PER_PAGE,
            "older": page.older.map(|c| c.encode()),
            "newer": page.newer.map(|c| c.encode()),
            "dead_letters": page.rows,
        })),
        Err(error) => {
            let (status, message) = query_failed("dead letters", &error);
            json_error(status, message)
        }
    }
}

#[get("/api/tickets/{ticket_id}")]
pub(super) async fn api_ticket(state: State, path: web::Path<String>) -> HttpResponse {
    let ticket_id = match parse_ticket(&path) {
        Ok(t) => t,
        Err(message) => return json_error(StatusCode::BAD_REQUEST, message),
    };
    match queries::ticket_history(&state.pages_pool, &ticket_id).await {
        Ok(rows) => {
            HttpResponse::Ok().json(serde_json::json!({ "ticket_id": ticket_id, "history": rows }))
        }
        Err(error) => {
            let (status, message) = query_failed("ticket history", &error);
            json_error(status, message)
        }
    }
}

#[get("/api/actions")]
pub(super) async fn api_actions(state: State) -> HttpResponse {
    match queries::recent_actions(&state.pages_pool, None, 100).await {
        Ok(rows) => HttpResponse::Ok().json(serde_json::json!({ "actions": rows })),
        Err(error) => {
            let (status, message) = query_failed("audit trail", &error);
            json_error(status, message)
        }
    }
}
