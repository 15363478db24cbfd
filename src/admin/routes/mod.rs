//! Handlers. Pages and their JSON twins read the monitor's overview and the database; actions
//! are POST only and go through [`super::auth`]. Bad input gets a 4xx with a message, a
//! database that is down or slow a 503 with a generic message (the detail goes to the log) —
//! never a 500.
//!
//! Layout: [`pages`] (HTML), [`session`] (sign in and out), [`actions`] (operator actions),
//! [`rewind`] (the live rewind), [`api`] (JSON), [`gate`] (sign-in for reading), [`assets`]
//! (stylesheet and script); this file holds the shared plumbing and the health endpoints.

mod actions;
mod api;
mod assets;
mod gate;
mod pages;
mod rewind;
mod session;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, ContentType};
use actix_web::{HttpRequest, HttpResponse, Responder, get, post, web};
use askama::Template;
use serde::Deserialize;

use super::auth::{Denied, Principal};
use super::pages::{
    AuditView, BacklogView, DeadLetterView, DeadLettersPage, ErrorPage, HistoryView, Layout,
    LoginPage, OverviewPage, PartitionPage, PartitionRowsFragment, RecentView, RowView, TicketPage,
    human_duration,
};
use super::queries::{
    self, Cursor, DEAD_LETTER_COUNT_CAP, DEAD_LETTERS_PER_PAGE, DeadLetterFilter, DeadLetterPage,
    Page,
};
use super::redirect::safe_next;
use super::{AdminState, OVER_LIMIT_DELAY};
use crate::actors::messages::GetOverview;
use crate::actors::messages::{GetStatus, NotOwned, PartitionAction, PartitionCommand};
use crate::actors::monitor::Overview;
use crate::domain::{MAX_EVENT_ID_CHARS, RejectReason};
use crate::error_text::chain;
use crate::inbox::PgInboxError;
use tokio_postgres::error::SqlState;

pub(super) use gate::read_gate;

pub(super) type State = web::Data<AdminState>;

/// `/metrics`, `/healthz` and `/readyz`: never behind a sign-in.
pub fn configure_metrics(config: &mut web::ServiceConfig) {
    config.service(healthz).service(readyz).service(metrics);
}

/// The admin UI and its API; the paths [`gate::exempt`] names stay open with `--admin-read-auth`.
pub fn configure_admin(config: &mut web::ServiceConfig) {
    config
        .service(assets::stylesheet)
        .service(assets::overview_script)
        .service(pages::overview_page)
        .service(pages::partition_rows)
        .service(pages::partition_page)
        .service(actions::partition_action)
        .service(rewind::partition_rewind)
        .service(rewind::partition_rewind_confirm)
        .service(rewind::instance_rewind)
        .service(rewind::instance_rewind_confirm)
        .service(rewind::api_partition_rewind)
        .service(rewind::api_instance_rewind)
        .service(pages::dead_letters_page)
        .service(pages::ticket_search)
        .service(pages::ticket_page)
        .service(session::login_form)
        .service(session::login)
        .service(session::logout)
        .service(api::api_status)
        .service(api::api_partition)
        .service(actions::api_partition_action)
        .service(api::api_dead_letters)
        .service(api::api_ticket)
        .service(api::api_actions)
        .default_service(web::to(not_found));
}

pub(super) fn layout(
    state: &AdminState,
    request: &HttpRequest,
    title: impl Into<String>,
) -> Layout {
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

pub(super) fn html(status: StatusCode, page: &impl Template) -> HttpResponse {
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

pub(super) fn error_page(
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

pub(super) fn json_error(status: StatusCode, message: impl Into<String>) -> HttpResponse {
    HttpResponse::build(status).json(serde_json::json!({ "error": message.into() }))
}

pub(super) fn denied_status(denied: &Denied) -> StatusCode {
    match denied {
        Denied::ReadOnly | Denied::Csrf => StatusCode::FORBIDDEN,
        Denied::NotSignedIn | Denied::WrongToken => StatusCode::UNAUTHORIZED,
        Denied::Throttled { .. } | Denied::TooManyReads { .. } => StatusCode::TOO_MANY_REQUESTS,
    }
}

/// Waits [`OVER_LIMIT_DELAY`] when `denied` is for going over a limit.
pub(super) async fn tarpit(denied: &Denied) {
    if matches!(
        denied,
        Denied::Throttled { .. } | Denied::TooManyReads { .. }
    ) {
        actix_web::rt::time::sleep(OVER_LIMIT_DELAY).await;
    }
}

/// A refusal as a page or as JSON, with `Retry-After` when throttled and the bearer challenge
/// for the API.
pub(super) fn denied_response(
    state: &AdminState,
    request: &HttpRequest,
    denied: &Denied,
    json: bool,
    hint: &str,
) -> HttpResponse {
    let mut response = if json {
        json_error(denied_status(denied), format!("{denied}{hint}"))
    } else {
        error_page(state, request, denied_status(denied), denied.to_string())
    };
    let headers = response.headers_mut();
    if let Denied::Throttled { retry_after_secs } | Denied::TooManyReads { retry_after_secs } =
        denied
    {
        headers.insert(header::RETRY_AFTER, (*retry_after_secs).into());
    }
    if json && matches!(denied, Denied::NotSignedIn | Denied::WrongToken) {
        headers.insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"history-consumer admin\""),
        );
    }
    response
}

/// Logs a failed admin query with its detail; the status and the generic text for the client
/// (database errors can carry names, values and addresses).
pub(super) fn query_failed(what: &'static str, error: &PgInboxError) -> (StatusCode, &'static str) {
    tracing::warn!(what, error = %chain(error), "admin query failed");
    let message = match error {
        PgInboxError::Db(db) if db.code() == Some(&SqlState::QUERY_CANCELED) => {
            "the database took too long to answer (statement timeout); narrow the filter or \
             try again"
        }
        PgInboxError::Pool(deadpool_postgres::PoolError::Timeout(_)) => {
            "the admin pages are busy; try again in a moment"
        }
        _ => "the database is unavailable right now; the service log has the details",
    };
    (StatusCode::SERVICE_UNAVAILABLE, message)
}

pub(super) fn parse_partition(text: &str) -> Result<i32, String> {
    text.parse::<i32>().ok().filter(|p| *p >= 0).ok_or_else(|| {
        format!(
            "partition must be a non-negative integer, got {:?}",
            truncate(text)
        )
    })
}

pub(super) fn parse_action(text: &str) -> Result<PartitionAction, String> {
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

pub(super) fn parse_ticket(text: &str) -> Result<String, String> {
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

pub(super) fn truncate(text: &str) -> String {
    text.chars().take(64).collect()
}

pub(super) async fn overview_of(state: &AdminState) -> Option<Overview> {
    state.monitor.send(GetOverview).await.ok().flatten()
}

pub(super) fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish()
}

pub(super) async fn not_found(state: State, request: HttpRequest) -> HttpResponse {
    let message = format!("there is nothing at {}", truncate(request.path()));
    if request.path().starts_with("/api/") {
        json_error(StatusCode::NOT_FOUND, message)
    } else {
        error_page(&state, &request, StatusCode::NOT_FOUND, message)
    }
}

#[derive(Deserialize)]
pub(super) struct DeadLetterQuery {
    partition: Option<String>,
    reason: Option<String>,
    /// Letters older than this cursor.
    before: Option<String>,
    /// Letters newer than this cursor.
    after: Option<String>,
    /// Offset pages are gone (a deep one made PostgreSQL skip every row above it); refused so
    /// that a script paging by number does not loop over the first page forever.
    page: Option<String>,
}

impl DeadLetterQuery {
    pub(super) fn filter(&self) -> Result<DeadLetterFilter, String> {
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
        if self.page.is_some() {
            return Err(
                "page numbers are not supported: follow the `before` and `after` \
                        cursors of the older and newer links"
                    .into(),
            );
        }
        let cursor = |text: &str| {
            Cursor::parse(text.trim())
                .ok_or_else(|| format!("not a dead-letter cursor: {:?}", truncate(text)))
        };
        let page = match (self.before.as_deref(), self.after.as_deref()) {
            (Some(_), Some(_)) => return Err("give `before` or `after`, not both".into()),
            (Some(text), None) => Page::Older(cursor(text)?),
            (None, Some(text)) => Page::Newer(cursor(text)?),
            (None, None) => Page::Newest,
        };
        Ok(DeadLetterFilter {
            partition,
            reason,
            page,
        })
    }
}

#[derive(Deserialize)]
pub(super) struct CsrfForm {
    pub(super) csrf: Option<String>,
}

// Health and metrics.

/// The process is alive and serving HTTP.
#[get("/healthz")]
pub(super) async fn healthz() -> impl Responder {
    HttpResponse::Ok()
        .content_type(ContentType::plaintext())
        .body("ok\n")
}

/// The database answers and the consumer joined its group (or owns partitions).
#[get("/readyz")]
pub(super) async fn readyz(state: State) -> impl Responder {
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
pub(super) async fn metrics(state: State) -> impl Responder {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render())
}
