//! The JSON API mirroring the pages.

use super::*;

#[get("/api/status")]
pub(super) async fn api_status(state: State) -> Result<HttpResponse, AdminError> {
    Ok(HttpResponse::Ok().json(overview_of(&state).await?))
}

#[get("/api/partitions/{partition}")]
pub(super) async fn api_partition(
    state: State,
    path: web::Path<String>,
) -> Result<HttpResponse, AdminError> {
    let partition = parse_partition(&path)?;
    let overview = overview_of(&state).await?;
    let mut body = serde_json::to_value(owned(&overview, partition)?).unwrap_or_default();
    // Recorded offset resets of the partition (`offset_resets`), newest first; `null` with
    // `offset_resets_error` when the database cannot say.
    let (resets, error) = match offset_resets::list_from(
        &state.pages_pool,
        &state.topic,
        Some(partition),
        10,
    )
    .await
    {
        Ok(rows) => (serde_json::to_value(rows).unwrap_or_default(), None),
        Err(error) => (
            serde_json::Value::Null,
            Some(AdminError::database("offset resets", error).to_string()),
        ),
    };
    if let Some(object) = body.as_object_mut() {
        object.insert("offset_resets".into(), resets);
        object.insert("offset_resets_error".into(), serde_json::json!(error));
    }
    Ok(HttpResponse::Ok().json(body))
}

#[get("/api/dead-letters")]
pub(super) async fn api_dead_letters(
    state: State,
    query: web::Query<DeadLetterQuery>,
) -> Result<HttpResponse, AdminError> {
    let filter = query.filter()?;
    let (page, total) = pages::dead_letters_and_count(&state, &filter).await?;
    // `older` and `newer` are cursors for `before=` and `after=`.
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "total": total.min(DEAD_LETTER_COUNT_CAP),
        "total_capped": total > DEAD_LETTER_COUNT_CAP,
        "per_page": DEAD_LETTERS_PER_PAGE,
        "older": page.older.map(|c| c.encode()),
        "newer": page.newer.map(|c| c.encode()),
        "dead_letters": page.rows,
    })))
}

#[get("/api/tickets/{ticket_id}")]
pub(super) async fn api_ticket(
    state: State,
    path: web::Path<String>,
) -> Result<HttpResponse, AdminError> {
    let ticket_id = parse_ticket(&path)?;
    let rows = queries::ticket_history(&state.pages_pool, &ticket_id)
        .await
        .map_err(|e| AdminError::database("ticket history", e))?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "ticket_id": ticket_id, "history": rows })))
}

#[get("/api/actions")]
pub(super) async fn api_actions(state: State) -> Result<HttpResponse, AdminError> {
    let rows = queries::recent_actions(&state.pages_pool, None, 100)
        .await
        .map_err(|e| AdminError::database("audit trail", e))?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "actions": rows })))
}
