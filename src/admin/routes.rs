//! Handlers. Pages and their JSON twins read the monitor's overview and the database; actions
//! are POST only and go through [`super::auth`]. Bad input gets a 4xx with a message, a
//! database that is down a 503 — never a 500.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, ContentType};
use actix_web::{HttpRequest, HttpResponse, Responder, get, post, web};
use askama::Template;
use serde::Deserialize;

use super::AdminState;
use super::auth::{Denied, Principal};
use super::pages::{
    AuditView, BacklogView, DeadLetterView, DeadLettersPage, ErrorPage, HistoryView, Layout,
    LoginPage, OverviewPage, PartitionPage, PartitionRowsFragment, RecentView, RowView, TicketPage,
    human_duration,
};
use super::queries::{self, DEAD_LETTERS_PER_PAGE, DeadLetterFilter};
use crate::actors::messages::{GetStatus, NotOwned, PartitionAction, PartitionCommand};
use crate::actors::monitor::{GetOverview, Overview};
use crate::domain::{MAX_EVENT_ID_CHARS, RejectReason};

type State = web::Data<AdminState>;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(healthz)
        .service(readyz)
        .service(metrics)
        .service(overview_page)
        .service(partition_rows)
        .service(partition_page)
        .service(partition_action)
        .service(dead_letters_page)
        .service(ticket_search)
        .service(ticket_page)
        .service(login_form)
        .service(login)
        .service(logout)
        .service(api_status)
        .service(api_partition)
        .service(api_partition_action)
        .service(api_dead_letters)
        .service(api_ticket)
        .service(api_actions)
        .default_service(web::to(not_found));
}

// ----- plumbing -------------------------------------------------------------------------------

fn layout(state: &AdminState, request: &HttpRequest, title: impl Into<String>) -> Layout {
    let session = state.auth.session(request);
    Layout {
        title: title.into(),
        read_only: state.auth.read_only(),
        signed_in: session.is_some(),
        csrf: match session {
            Some(Principal::Session { csrf, .. }) => csrf,
            _ => String::new(),
        },
    }
}

fn html(status: StatusCode, page: &impl Template) -> HttpResponse {
    match page.render() {
        Ok(body) => HttpResponse::build(status)
            .content_type(ContentType::html())
            .body(body),
        Err(error) => {
            tracing::error!(error = %error, "template rendering failed");
            HttpResponse::ServiceUnavailable()
                .content_type(ContentType::plaintext())
                .body("the page could not be rendered\n")
        }
    }
}

fn error_page(
    state: &AdminState,
    request: &HttpRequest,
    status: StatusCode,
    message: impl Into<String>,
) -> HttpResponse {
    let title = status.canonical_reason().unwrap_or("Error");
    html(
        status,
        &ErrorPage {
            layout: layout(state, request, title),
            status: status.as_u16(),
            message: message.into(),
        },
    )
}

fn json_error(status: StatusCode, message: impl Into<String>) -> HttpResponse {
    HttpResponse::build(status).json(serde_json::json!({ "error": message.into() }))
}

fn denied_status(denied: &Denied) -> StatusCode {
    match denied {
        Denied::ReadOnly | Denied::Csrf => StatusCode::FORBIDDEN,
        Denied::NotSignedIn | Denied::WrongToken => StatusCode::UNAUTHORIZED,
    }
}

fn parse_partition(text: &str) -> Result<i32, String> {
    text.parse::<i32>().ok().filter(|p| *p >= 0).ok_or_else(|| {
        format!(
            "partition must be a non-negative integer, got {:?}",
            truncate(text)
        )
    })
}

fn parse_action(text: &str) -> Result<PartitionAction, String> {
    match text {
        "retry_now" => Ok(PartitionAction::RetryNow),
        "pause" => Ok(PartitionAction::Pause),
        "resume" => Ok(PartitionAction::Resume),
        other => Err(format!(
            "unknown action {:?}; the actions are retry_now, pause and resume",
            truncate(other)
        )),
    }
}

fn parse_ticket(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        Err("a ticket id is required".into())
    } else if trimmed.chars().count() > MAX_EVENT_ID_CHARS {
        Err(format!(
            "a ticket id has at most {MAX_EVENT_ID_CHARS} characters"
        ))
    } else {
        Ok(trimmed.to_owned())
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(64).collect()
}

async fn overview_of(state: &AdminState) -> Option<Overview> {
    state.monitor.send(GetOverview).await.ok().flatten()
}

/// A local redirect target only (no open redirect).
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(path) if path.starts_with('/') && !path.starts_with("//") && !path.contains('\\') => {
            path.to_owned()
        }
        _ => "/".to_owned(),
    }
}

fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish()
}

async fn not_found(state: State, request: HttpRequest) -> HttpResponse {
    let message = format!("there is nothing at {}", truncate(request.path()));
    if request.path().starts_with("/api/") {
        json_error(StatusCode::NOT_FOUND, message)
    } else {
        error_page(&state, &request, StatusCode::NOT_FOUND, message)
    }
}

// ----- health and metrics ---------------------------------------------------------------------

/// The process is alive and serving HTTP.
#[get("/healthz")]
async fn healthz() -> impl Responder {
    HttpResponse::Ok()
        .content_type(ContentType::plaintext())
        .body("ok\n")
}

/// The database answers and the consumer joined its group (or owns partitions).
#[get("/readyz")]
async fn readyz(state: State) -> impl Responder {
    let database = match state.pool.get().await {
        Ok(client) => client.simple_query("SELECT 1").await.is_ok(),
        Err(_) => false,
    };
    let joined = state
        .supervisor
        .send(GetStatus)
        .await
        .map(|s| s.member_id.is_some() || !s.partitions.is_empty())
        .unwrap_or(false);
    let body = serde_json::json!({ "database": database, "group_joined": joined });
    if database && joined {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

#[get("/metrics")]
async fn metrics(state: State) -> impl Responder {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render())
}

// ----- pages ----------------------------------------------------------------------------------

#[get("/")]
async fn overview_page(state: State, request: HttpRequest) -> HttpResponse {
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
async fn partition_rows(state: State) -> HttpResponse {
    let rows = overview_of(&state)
        .await
        .map(|o| o.partitions.iter().map(RowView::new).collect())
        .unwrap_or_default();
    html(StatusCode::OK, &PartitionRowsFragment { rows })
}

#[derive(Deserialize)]
struct Flash {
    done: Option<String>,
}

#[get("/partitions/{partition}")]
async fn partition_page(
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

#[derive(Deserialize)]
struct DeadLetterQuery {
    partition: Option<String>,
    reason: Option<String>,
    page: Option<String>,
}

impl DeadLetterQuery {
    fn filter(&self) -> Result<DeadLetterFilter, String> {
        let partition = match self.partition.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(parse_partition(text)?),
        };
        let reason = match self.reason.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(
                RejectReason::from_name(text)
                    .ok_or_else(|| format!("unknown reason {:?}", truncate(text)))?
                    .as_str()
                    .to_owned(),
            ),
        };
        let page = match self.page.as_deref().map(str::trim) {
            None | Some("") => 1,
            Some(text) => text
                .parse::<i64>()
                .ok()
                .filter(|p| (1..=100_000).contains(p))
                .ok_or_else(|| format!("page must be a number from 1, got {:?}", truncate(text)))?,
        };
        Ok(DeadLetterFilter {
            partition,
            reason,
            page,
        })
    }
}

fn dead_letter_link(filter: &DeadLetterFilter, page: i64) -> String {
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
async fn dead_letters_page(
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
struct TicketQuery {
    ticket_id: Option<String>,
}

/// The search box: `/tickets?ticket_id=...`.
#[get("/tickets")]
async fn ticket_search(
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
async fn ticket_page(state: State, request: HttpRequest, path: web::Path<String>) -> HttpResponse {
    render_ticket(&state, &request, &path).await
}

async fn render_ticket(state: &AdminState, request: &HttpRequest, ticket: &str) -> HttpResponse {
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

// ----- signing in -----------------------------------------------------------------------------

#[derive(Deserialize)]
struct NextQuery {
    next: Option<String>,
}

#[get("/login")]
async fn login_form(
    state: State,
    request: HttpRequest,
    query: web::Query<NextQuery>,
) -> HttpResponse {
    html(
        StatusCode::OK,
        &LoginPage {
            layout: layout(&state, &request, "Sign in"),
            message: String::new(),
            next: safe_next(query.next.as_deref()),
        },
    )
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

#[post("/login")]
async fn login(state: State, request: HttpRequest, form: web::Form<LoginForm>) -> HttpResponse {
    let next = safe_next(form.next.as_deref());
    match state.auth.sign_in(&form.token) {
        Ok(cookie) => HttpResponse::SeeOther()
            .insert_header((header::LOCATION, next))
            .cookie(cookie)
            .finish(),
        Err(denied) => {
            tracing::warn!(peer = ?request.peer_addr(), "admin sign-in refused");
            html(
                denied_status(&denied),
                &LoginPage {
                    layout: layout(&state, &request, "Sign in"),
                    message: denied.to_string(),
                    next,
                },
            )
        }
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: Option<String>,
}

#[post("/logout")]
async fn logout(state: State, request: HttpRequest, form: web::Form<CsrfForm>) -> HttpResponse {
    if let Err(denied) = state.auth.authorize(&request, form.csrf.as_deref()) {
        return error_page(&state, &request, denied_status(&denied), denied.to_string());
    }
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/"))
        .cookie(state.auth.sign_out(&request))
        .finish()
}

// ----- actions --------------------------------------------------------------------------------

/// Why an action was not carried out.
enum Refused {
    BadRequest(String),
    Denied(Denied),
    NotOwned(NotOwned),
}

/// Checks, applies and records an action; the audit line says who did what.
async fn act(
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
    if let Err(error) =
        queries::record_action(&state.pool, partition, action.as_str(), &actor, result).await
    {
        tracing::warn!(error = %error, "admin action not recorded in the audit trail");
    }
    applied.map_err(Refused::NotOwned)?;
    Ok((partition, action))
}

#[post("/partitions/{partition}/actions/{action}")]
async fn partition_action(
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
            error_page(&state, &request, denied_status(&denied), denied.to_string())
        }
        Err(Refused::NotOwned(error)) => {
            error_page(&state, &request, StatusCode::CONFLICT, error.to_string())
        }
    }
}

#[post("/api/partitions/{partition}/actions/{action}")]
async fn api_partition_action(
    state: State,
    request: HttpRequest,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (partition, action) = path.into_inner();
    // The API authenticates with the bearer token only: a session cookie is not enough here,
    // so a cross-site request can never act through it.
    if request.headers().get(header::AUTHORIZATION).is_none() {
        let denied = if state.auth.read_only() {
            Denied::ReadOnly
        } else {
            Denied::WrongToken
        };
        return json_error(
            denied_status(&denied),
            format!("{denied}; send Authorization: Bearer <token>"),
        );
    }
    match act(&state, &request, &partition, &action, None).await {
        Ok((partition, action)) => HttpResponse::Ok().json(serde_json::json!({
            "partition": partition, "action": action, "result": "ok"
        })),
        Err(Refused::BadRequest(message)) => json_error(StatusCode::BAD_REQUEST, message),
        Err(Refused::Denied(denied)) => json_error(denied_status(&denied), denied.to_string()),
        Err(Refused::NotOwned(error)) => json_error(StatusCode::CONFLICT, error.to_string()),
    }
}

// ----- JSON API -------------------------------------------------------------------------------

#[get("/api/status")]
async fn api_status(state: State) -> HttpResponse {
    match overview_of(&state).await {
        Some(overview) => HttpResponse::Ok().json(overview),
        None => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the service is shutting down",
        ),
    }
}

#[get("/api/partitions/{partition}")]
async fn api_partition(state: State, path: web::Path<String>) -> HttpResponse {
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
async fn api_dead_letters(state: State, query: web::Query<DeadLetterQuery>) -> HttpResponse {
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
async fn api_ticket(state: State, path: web::Path<String>) -> HttpResponse {
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
async fn api_actions(state: State) -> HttpResponse {
    match queries::recent_actions(&state.pool, None, 100).await {
        Ok(rows) => HttpResponse::Ok().json(serde_json::json!({ "actions": rows })),
        Err(error) => json_error(StatusCode::SERVICE_UNAVAILABLE, error.to_string()),
    }
}
