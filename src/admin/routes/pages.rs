//! The HTML pages: overview, partition, dead letters, ticket history.

use super::*;

#[get("/")]
pub(super) async fn overview_page(state: State, request: HttpRequest) -> HttpResponse {
    let page = overview(&state, &request).await;
    page_or_error(&state, &request, page)
}

/// A list the page shows if it can, or the reason it cannot.
fn listed<T, R>(
    what: &'static str,
    found: Result<Vec<R>, PgInboxError>,
    view: impl FnOnce(Vec<R>) -> Vec<T>,
) -> (Vec<T>, String) {
    match found {
        Ok(rows) => (view(rows), String::new()),
        Err(error) => (Vec::new(), AdminError::database(what, error).to_string()),
    }
}

async fn overview(state: &AdminState, request: &HttpRequest) -> Result<HttpResponse, AdminError> {
    let overview = overview_of(state).await?;
    let (audit, audit_error) = listed(
        "audit trail",
        queries::recent_actions(&state.pages_pool, None, 10).await,
        AuditView::list,
    );
    Ok(html(
        StatusCode::OK,
        &OverviewPage {
            layout: layout(state, request, "Overview"),
            connection: ConnectionView::of(&overview.kafka_connection),
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
    ))
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
    offset: Option<i64>,
    /// What became of a skip (`done`, `overtaken`, `pending`).
    outcome: Option<String>,
}

impl Flash {
    /// What the action the browser comes back from did, in words (known actions only: the
    /// query is anybody's to write).
    fn text(&self) -> String {
        match (self.done.as_deref(), self.offset) {
            (Some("dead_letter"), Some(offset)) => match self.outcome.as_deref() {
                Some("done") => format!(
                    "offset {offset}: dead-lettered (skipped_by_operator); the committed offset \
                     moves past it"
                ),
                Some("overtaken") => format!(
                    "offset {offset}: not dead-lettered: a retry resolved it first, before the \
                     skip ran"
                ),
                _ => format!(
                    "offset {offset}: dead-lettering requested; it runs as the partition's next \
                     unit of work"
                ),
            },
            (Some(action), _) => parse_action(action)
                .map(|a| format!("{} requested", a.as_str().replace('_', " ")))
                .unwrap_or_default(),
            (None, _) => String::new(),
        }
    }
}

#[get("/partitions/{partition}")]
pub(super) async fn partition_page(
    state: State,
    request: HttpRequest,
    path: web::Path<String>,
    flash: web::Query<Flash>,
) -> HttpResponse {
    let page = partition(&state, &request, &path, &flash).await;
    page_or_error(&state, &request, page)
}

async fn partition(
    state: &AdminState,
    request: &HttpRequest,
    partition: &str,
    flash: &Flash,
) -> Result<HttpResponse, AdminError> {
    let partition = parse_partition(partition)?;
    let overview = overview_of(state).await?;
    let summary = owned(&overview, partition)?;
    let filter = DeadLetterFilter {
        selection: Selection {
            partition: Some(partition),
            ..Selection::default()
        },
        ..DeadLetterFilter::default()
    };
    let (dead_letters, dead_letters_error) = listed(
        "dead letters",
        queries::dead_letters(&state.pages_pool, &filter, 10)
            .await
            .map(|page| page.rows),
        DeadLetterView::list,
    );
    let (audit, audit_error) = listed(
        "audit trail",
        queries::recent_actions(&state.pages_pool, Some(partition), 10).await,
        AuditView::list,
    );
    let (resets, resets_error) = listed(
        "offset resets",
        offset_resets::list_from(&state.pages_pool, &state.topic, Some(partition), 10).await,
        ResetView::list,
    );
    let actor = summary.view.actor.as_ref();
    Ok(html(
        StatusCode::OK,
        &PartitionPage {
            layout: layout(state, request, format!("Partition {partition}")),
            partition,
            row: RowView::new(summary),
            flash: flash.text(),
            as_of: chrono::Utc::now().format("%H:%M:%S UTC").to_string(),
            guard: actor.map(|a| guard_text(&a.guard)).unwrap_or_default(),
            held: match &summary.view.fetch {
                Some(Trouble::Held(held)) => Some(HeldView::of(held)),
                _ => None,
            },
            blocking: actor.and_then(|a| BlockingView::of(&a.backlog, &a.guard)),
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
            resets,
            resets_error,
        },
    ))
}

/// The list's link to `page` under the same filter.
pub(super) fn dead_letter_link(filter: &DeadLetterFilter, page: Page) -> String {
    let mut query = Vec::new();
    if let Some(p) = filter.selection.partition {
        query.push(format!("partition={p}"));
    }
    if let Some(r) = &filter.selection.reason {
        query.push(format!("reason={r}"));
    }
    if let Some(s) = filter.selection.state {
        query.push(format!("state={s}"));
    }
    // RFC 3339 in UTC with `Z`: nothing in it needs escaping in a query.
    let time = |at: DateTime<Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
    if let Some(at) = filter.selection.since {
        query.push(format!("since={}", time(at)));
    }
    if let Some(at) = filter.selection.until {
        query.push(format!("until={}", time(at)));
    }
    match page {
        Page::Newest => {}
        Page::Older(cursor) => query.push(format!("before={}", cursor.encode())),
        Page::Newer(cursor) => query.push(format!("after={}", cursor.encode())),
    }
    if query.is_empty() {
        "/dead-letters".to_owned()
    } else {
        format!("/dead-letters?{}", query.join("&"))
    }
}

/// A page of dead letters and how many match (up to the cap).
pub(super) async fn dead_letters_and_count(
    state: &AdminState,
    filter: &DeadLetterFilter,
) -> Result<(DeadLetterPage, i64), AdminError> {
    let failed = |e| AdminError::database("dead letters", e);
    let page = queries::dead_letters(&state.pages_pool, filter, DEAD_LETTERS_PER_PAGE)
        .await
        .map_err(failed)?;
    let total = queries::count_dead_letters(&state.pages_pool, filter)
        .await
        .map_err(failed)?;
    Ok((page, total))
}

#[get("/dead-letters")]
pub(super) async fn dead_letters_page(
    state: State,
    request: HttpRequest,
    query: web::Query<DeadLetterQuery>,
) -> HttpResponse {
    let page = dead_letters(&state, &request, &query).await;
    page_or_error(&state, &request, page)
}

async fn dead_letters(
    state: &AdminState,
    request: &HttpRequest,
    query: &DeadLetterQuery,
) -> Result<HttpResponse, AdminError> {
    let filter = query.filter()?;
    let (page, total) = dead_letters_and_count(state, &filter).await?;
    let link = |page: Option<Page>| {
        page.map(|p| dead_letter_link(&filter, p))
            .unwrap_or_default()
    };
    let flash = replay_flash(state, &filter, query).await;
    let time = |at: Option<chrono::DateTime<chrono::Utc>>| {
        at.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
            .unwrap_or_default()
    };
    Ok(html(
        StatusCode::OK,
        &DeadLettersPage {
            layout: layout(state, request, "Dead letters"),
            partition: filter
                .selection
                .partition
                .map(|p| p.to_string())
                .unwrap_or_default(),
            reason: filter.selection.reason.clone().unwrap_or_default(),
            reasons: RejectReason::ALL
                .iter()
                .map(|r| r.as_str().to_owned())
                .collect(),
            state: filter
                .selection
                .state
                .map(|s| s.to_string())
                .unwrap_or_default(),
            states: LetterState::ALL.iter().map(|s| s.to_string()).collect(),
            since: time(filter.selection.since),
            until: time(filter.selection.until),
            flash,
            total: if total > DEAD_LETTER_COUNT_CAP {
                format!("more than {DEAD_LETTER_COUNT_CAP}")
            } else {
                total.to_string()
            },
            rows: DeadLetterView::list(page.rows),
            newest: link((filter.page != Page::Newest).then_some(Page::Newest)),
            newer: link(page.newer.map(Page::Newer)),
            older: link(page.older.map(Page::Older)),
        },
    ))
}

/// What a replay the browser comes back from did: the letter's state as stored now, or the
/// counts of a replay of every matching letter (numbers only: the query is anybody's to write).
async fn replay_flash(
    state: &AdminState,
    filter: &DeadLetterFilter,
    query: &DeadLetterQuery,
) -> String {
    if let Some(counts) = query.summary.as_deref() {
        let numbers: Vec<u64> = counts.split('.').filter_map(|n| n.parse().ok()).collect();
        if let [applied, already, still, more] = numbers[..] {
            let mut text = format!(
                "Replayed {}: {applied} stored by the replay, {already} stored already, {still} \
                 still rejected.",
                applied + already + still
            );
            if more > 0 {
                text.push_str(" More match: replay again to go on.");
            }
            return text;
        }
    }
    let (Some(partition), Some(offset)) = (
        filter.selection.partition,
        query.replayed.as_deref().and_then(|o| parse_offset(o).ok()),
    ) else {
        return String::new();
    };
    match queries::dead_letter(&state.pages_pool, &state.topic, partition, offset).await {
        Ok(Some(letter)) => format!(
            "Partition {partition}, offset {offset} replayed: {}, {}",
            letter.state,
            letter.replay_message.unwrap_or_default()
        ),
        Ok(None) => String::new(),
        Err(error) => AdminError::database("dead letter", error).to_string(),
    }
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
    let page = ticket_history(state, request, ticket).await;
    page_or_error(state, request, page)
}

async fn ticket_history(
    state: &AdminState,
    request: &HttpRequest,
    ticket: &str,
) -> Result<HttpResponse, AdminError> {
    let ticket_id = parse_ticket(ticket)?;
    let rows = queries::ticket_history(&state.pages_pool, &ticket_id)
        .await
        .map_err(|e| AdminError::database("ticket history", e))?;
    Ok(html(
        StatusCode::OK,
        &TicketPage {
            layout: layout(state, request, format!("Ticket {ticket_id}")),
            ticket_id,
            rows: HistoryView::list(rows),
        },
    ))
}
