//! The HTML pages: overview, partition, dead letters, ticket history.

use super::*;

#[get("/")]
pub(super) async fn overview_page(state: State, request: HttpRequest) -> HttpResponse {
    let Some(overview) = overview_of(&state).await else {
        return error_page(
            &state,
            &request,
            StatusCode::SERVICE_UNAVAILABLE,
            "the service is shutting down",
        );
    };
    let (audit, audit_error) = match queries::recent_actions(&state.pool, None, 10).await {
        Ok(rows) => (AuditView::list(rows), String::new()),
        Err(error) => (Vec::new(), error.to_string()),
    };
    html(
        StatusCode::OK,
        &OverviewPage {
            layout: layout(&state, &request, "Overview"),
            member_id: overview
                .member_id
                .clone()
                .unwrap_or_else(|| "joining…".into()),
            uptime: human_duration(overview.uptime_seconds as f64),
            rows: overview.partitions.iter().map(RowView::new).collect(),
            group: overview.group,
            topic: overview.topic,
            host: overview.host,
            shutting_down: overview.shutting_down,
            audit,
            audit_error,
        },
    )
}

/// The overview's table body, for refreshing it in place.
#[get("/fragments/partition-rows")]
pub(super) async fn partition_rows(state: State) -> HttpResponse {
    let rows = overview_of(&state)
        .await
        .map(|o| o.partitions.iter().map(RowView::new).collect())
        .unwrap_or_default();
    html(StatusCode::OK, &PartitionRowsFragment { rows })
}

#[derive(Deserialize)]
pub(super) struct Flash {
    done: Option<String>,
}

#[get("/partitions/{partition}")]
pub(super) async fn partition_page(
    state: State,
    request: HttpRequest,
    path: web::Path<String>,
    flash: web::Query<Flash>,
) -> HttpResponse {
    let partition = match parse_partition(&path) {
        Ok(p) => p,
        Err(message) => return error_page(&state, &request, StatusCode::BAD_REQUEST, message),
    };
    let overview = overview_of(&state).await;
    let Some(summary) = overview.as_ref().and_then(|o| o.partition(partition)) else {
        return error_page(
            &state,
            &request,
            StatusCode::NOT_FOUND,
            format!("partition {partition} is not assigned to this instance"),
        );
    };
    let filter = DeadLetterFilter {
        partition: Some(partition),
        reason: None,
        page: 1,
    };
    let (dead_letters, dead_letters_error) = match queries::dead_letters(&state.pool, &filter).await
    {
        Ok((rows, _)) => (
            DeadLetterView::list(rows.into_iter().take(10).collect()),
            String::new(),
        ),
        Err(error) => (Vec::new(), error.to_string()),
    };
    let (audit, audit_error) = match queries::recent_actions(&state.pool, Some(partition), 10).await
    {
        Ok(rows) => (AuditView::list(rows), String::new()),
        Err(error) => (Vec::new(), error.to_string()),
    };
    let actor = summary.view.actor.as_ref();
    html(
        StatusCode::OK,
        &PartitionPage {
            layout: layout(&state, &request, format!("Partition {partition}")),
            partition,
            row: RowView::new(summary),
            flash: flash
                .done
                .as_deref()
                .and_then(|a| parse_action(a).ok())
                .map(|a| format!("{} requested", a.as_str().replace('_', " ")))
                .unwrap_or_default(),
            backlog: actor
                .map(|a| a.backlog.iter().map(BacklogView::from).collect())
                .unwrap_or_default(),
            recent: actor
                .map(|a| a.recent.iter().map(RecentView::from).collect())
                .unwrap_or_default(),
            dead_letters,
            dead_letters_error,
            audit,
            audit_error,
        },
    )
}

pub(super) fn dead_letter_link(filter: &DeadLetterFilter, page: i64) -> String {
    let mut link = format!("/dead-letters?page={page}");
    if let Some(p) = filter.partition {
        link.push_str(&format!("&partition={p}"));
    }
    if let Some(r) = &filter.reason {
        link.push_str(&format!("&reason={r}"));
    }
    link
}

#[get("/dead-letters")]
pub(super) async fn dead_letters_page(
    state: State,
    request: HttpRequest,
    query: web::Query<DeadLetterQuery>,
) -> HttpResponse {
    let filter = match query.filter() {
        Ok(f) => f,
        Err(message) => return error_page(&state, &request, StatusCode::BAD_REQUEST, message),
    };
    let (rows, total) = match queries::dead_letters(&state.pool, &filter).await {
        Ok(found) => found,
        Err(error) => {
            return error_page(
                &state,
                &request,
                StatusCode::SERVICE_UNAVAILABLE,
                error.to_string(),
            );
        }
    };
    let pages = ((total + DEAD_LETTERS_PER_PAGE - 1) / DEAD_LETTERS_PER_PAGE).max(1);
    html(
        StatusCode::OK,
        &DeadLettersPage {
            layout: layout(&state, &request, "Dead letters"),
            partition: filter.partition.map(|p| p.to_string()).unwrap_or_default(),
            reason: filter.reason.clone().unwrap_or_default(),
            reasons: RejectReason::ALL
                .iter()
                .map(|r| r.as_str().to_owned())
                .collect(),
            total,
            rows: DeadLetterView::list(rows),
            page: filter.page,
            pages,
            previous: if filter.page > 1 {
                dead_letter_link(&filter, filter.page - 1)
            } else {
                String::new()
            },
            next: if filter.page < pages {
                dead_letter_link(&filter, filter.page + 1)
            } else {
                String::new()
            },
        },
    )
}

#[derive(Deserialize)]
pub(super) struct TicketQuery {
    ticket_id: Option<String>,
}

/// The search box: `/tickets?ticket_id=...`.
#[get("/tickets")]
pub(super) async fn ticket_search(
    state: State,
    request: HttpRequest,
    query: web::Query<TicketQuery>,
) -> HttpResponse {
    render_ticket(
        &state,
        &request,
        query.ticket_id.as_deref().unwrap_or_default(),
    )
    .await
}

#[get("/tickets/{ticket_id}")]
pub(super) async fn ticket_page(
    state: State,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    render_ticket(&state, &request, &path).await
}

pub(super) async fn render_ticket(
    state: &AdminState,
    request: &HttpRequest,
    ticket: &str,
) -> HttpResponse {
    let ticket_id = match parse_ticket(ticket) {
        Ok(t) => t,
        Err(message) => return error_page(state, request, StatusCode::BAD_REQUEST, message),
    };
    match queries::ticket_history(&state.pool, &ticket_id).await {
        Ok(rows) => html(
            StatusCode::OK,
            &TicketPage {
                layout: layout(state, request, format!("Ticket {ticket_id}")),
                ticket_id,
                rows: HistoryView::list(rows),
            },
        ),
        Err(error) => error_page(
            state,
            request,
            StatusCode::SERVICE_UNAVAILABLE,
            error.to_string(),
        ),
    }
}
