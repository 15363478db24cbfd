//! Handlers. Pages and their JSON twins read the monitor's overview and the database; actions
//! are POST only and go through [`super::auth`]. Bad input gets a 4xx with a message, a
//! database that is down or slow a 503 with a generic message (the detail goes to the log) —
//! never a 500.
//!
//! Layout: [`pages`] (HTML), [`group`] (the whole consumer group), [`session`] (sign in and
//! out), [`actions`] (operator actions),
//! [`remedies`] (dead-letter a record, replay dead letters), [`rewind`] (the live rewind),
//! [`api`] (JSON), [`gate`] (sign-in for reading), [`assets`] (stylesheet and script); this
//! file holds the shared plumbing and the health endpoints.

mod actions;
mod api;
mod assets;
mod gate;
mod group;
mod pages;
mod remedies;
mod rewind;
mod routed;
mod session;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, ContentType};
use actix_web::{HttpRequest, HttpResponse, Responder, ResponseError, get, post, web};
use askama::Template;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::auth::{Denied, Principal, bearer_token};
use super::error::AdminError;
use super::pages::{
    AuditView, BacklogView, BlockingView, ConnectionView, DeadLetterView, DeadLettersPage,
    ErrorPage, HeldView, HistoryView, Layout, LoginPage, OverviewPage, PartitionPage,
    PartitionRowsFragment, RecentView, ResetView, RowView, TicketPage, guard_text, human_duration,
};
use super::queries::{
    self, Cursor, DEAD_LETTER_COUNT_CAP, DEAD_LETTERS_PER_PAGE, DeadLetterFilter, DeadLetterPage,
    Page,
};
use super::redirect::safe_next;
use super::{AdminState, OVER_LIMIT_DELAY};
use crate::actors::messages::GetOverview;
use crate::actors::messages::{NotOwned, PartitionAction, PartitionCommand, SampleStatus};
use crate::actors::monitor::Overview;
use crate::actors::status::{BacklogDetail, PartitionSummary};
use crate::domain::Trouble;
use crate::domain::{LetterState, MAX_TICKET_ID_CHARS, RejectReason, parse_point_in_time_or_utc};
use crate::error_text::chain;
use crate::inbox::offset_resets;
use crate::inbox::{PgInboxError, Selection, audit_trail};
use pages::dead_letter_link;

pub(super) use gate::read_gate;
pub use routed::serve as serve_routed_commands;

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
        .service(group::group_page)
        .service(group::group_rows)
        .service(group::group_members)
        .service(group::api_group)
        .service(actions::partition_action)
        .service(remedies::skip_form)
        .service(remedies::skip_api)
        .service(remedies::replay_all_form)
        .service(remedies::replay_all_api)
        .service(remedies::replay_form)
        .service(remedies::replay_api)
        .service(rewind::partition_rewind)
        .service(rewind::instance_rewind)
        .service(rewind::api_partition_rewind)
        .service(rewind::api_instance_rewind)
        .service(rewind::group_rewind_form)
        .service(rewind::group_rewind_confirm)
        .service(rewind::api_group_rewind)
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

/// An error as a page: the same status, text and `Retry-After` as in JSON.
pub(super) fn error_page(
    state: &AdminState,
    request: &HttpRequest,
    error: &AdminError,
) -> HttpResponse {
    let status = error.status_code();
    let title = status.canonical_reason().unwrap_or("Error");
    let mut response = html(
        status,
        &ErrorPage {
            layout: layout(state, request, title),
            status: status.as_u16(),
            message: error.to_string(),
        },
    );
    error.add_headers(&mut response);
    response
}

/// A page, or the page of its error.
pub(super) fn page_or_error(
    state: &AdminState,
    request: &HttpRequest,
    page: Result<HttpResponse, AdminError>,
) -> HttpResponse {
    page.unwrap_or_else(|error| error_page(state, request, &error))
}

/// Who may act: a session with its form's CSRF token, or the bearer token. A refusal for
/// going over a limit comes late (see [`tarpit`]).
pub(super) async fn authorize(
    state: &AdminState,
    request: &HttpRequest,
    csrf: Option<&str>,
) -> Result<Principal, AdminError> {
    match state.auth.authorize(request, csrf) {
        Ok(principal) => Ok(principal),
        Err(denied) => {
            tarpit(&denied).await;
            Err(denied.into())
        }
    }
}

/// The API authenticates with the bearer token only: a session cookie is not enough there,
/// so a cross-site request can never act through it.
pub(super) fn require_bearer(state: &AdminState, request: &HttpRequest) -> Result<(), AdminError> {
    if bearer_token(request).is_some() {
        return Ok(());
    }
    let denied = if state.auth.read_only() {
        Denied::ReadOnly
    } else {
        Denied::NotSignedIn
    };
    Err(AdminError::Denied {
        denied,
        hint: "; send Authorization: Bearer <token>",
    })
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

pub(super) fn parse_partition(text: &str) -> Result<i32, AdminError> {
    text.parse::<i32>().ok().filter(|p| *p >= 0).ok_or_else(|| {
        AdminError::BadRequest(format!(
            "partition must be a non-negative integer, got {:?}",
            truncate(text)
        ))
    })
}

pub(super) fn parse_action(text: &str) -> Result<PartitionAction, AdminError> {
    match text {
        "retry_now" => Ok(PartitionAction::RetryNow),
        "pause" => Ok(PartitionAction::Pause),
        "resume" => Ok(PartitionAction::Resume),
        other => Err(AdminError::BadRequest(format!(
            "unknown action {:?}; the actions are retry_now, pause and resume",
            truncate(other)
        ))),
    }
}

pub(super) fn parse_offset(text: &str) -> Result<i64, AdminError> {
    text.parse::<i64>().ok().filter(|o| *o >= 0).ok_or_else(|| {
        AdminError::BadRequest(format!(
            "offset must be a non-negative integer, got {:?}",
            truncate(text)
        ))
    })
}

/// A time of the dead-letter filter: a point in time, or a browser's `2026-10-03T08:00` or
/// `2026-10-03` read as UTC.
pub(super) fn parse_time(field: &str, text: &str) -> Result<DateTime<Utc>, AdminError> {
    parse_point_in_time_or_utc(text).map_err(|e| {
        AdminError::BadRequest(format!(
            "{field} must be a time like 2026-10-03T08:00 (read as UTC): {e}"
        ))
    })
}

/// Records an operator action in the audit trail (the consumer's pool: see `AdminState`); a
/// failure is logged, never the action's. The row's id, if it was recorded.
pub(super) async fn audit(state: &AdminState, action: &audit_trail::Action<'_>) -> Option<i64> {
    match audit_trail::record(&state.pool, action).await {
        Ok(id) => Some(id),
        Err(error) => {
            tracing::warn!(error = %chain(&error), "admin action not recorded in the audit trail");
            None
        }
    }
}

pub(super) fn parse_ticket(text: &str) -> Result<String, AdminError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        Err(AdminError::BadRequest("a ticket id is required".into()))
    } else if trimmed.chars().count() > MAX_TICKET_ID_CHARS {
        Err(AdminError::BadRequest(format!(
            "a ticket id has at most {MAX_TICKET_ID_CHARS} characters"
        )))
    } else {
        Ok(trimmed.to_owned())
    }
}

pub(super) fn truncate(text: &str) -> String {
    text.chars().take(64).collect()
}

pub(super) async fn overview_of(state: &AdminState) -> Result<Overview, AdminError> {
    let overview = state
        .monitor
        .send(GetOverview(BacklogDetail::Entries))
        .await
        .ok()
        .flatten();
    overview.ok_or(AdminError::ShuttingDown)
}

/// The summary of a partition this instance owns.
pub(super) fn owned(overview: &Overview, partition: i32) -> Result<&PartitionSummary, AdminError> {
    overview
        .partition(partition)
        .ok_or_else(|| AdminError::NotFound(NotOwned(partition).to_string()))
}

pub(super) fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish()
}

pub(super) async fn not_found(state: State, request: HttpRequest) -> HttpResponse {
    let error = AdminError::NotFound(format!("there is nothing at {}", truncate(request.path())));
    if request.path().starts_with("/api/") {
        error.error_response()
    } else {
        error_page(&state, &request, &error)
    }
}

#[derive(Deserialize)]
pub(super) struct DeadLetterQuery {
    partition: Option<String>,
    reason: Option<String>,
    state: Option<String>,
    /// Stored at or after (see [`parse_time`]).
    since: Option<String>,
    /// Stored before.
    until: Option<String>,
    /// Letters older than this cursor.
    before: Option<String>,
    /// Letters newer than this cursor.
    after: Option<String>,
    /// Offset pages are gone (a deep one made PostgreSQL skip every row above it); refused so
    /// that a script paging by number does not loop over the first page forever.
    page: Option<String>,
    /// The page after a replay: the offset replayed (of `partition`).
    replayed: Option<String>,
    /// The page after replaying every matching letter: its counts.
    summary: Option<String>,
}

impl DeadLetterQuery {
    pub(super) fn filter(&self) -> Result<DeadLetterFilter, AdminError> {
        let partition = match self.partition.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(parse_partition(text)?),
        };
        let reason = match self.reason.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(
                RejectReason::from_name(text)
                    .ok_or_else(|| {
                        AdminError::BadRequest(format!("unknown reason {:?}", truncate(text)))
                    })?
                    .as_str()
                    .to_owned(),
            ),
        };
        let state = match self.state.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(LetterState::from_name(text).ok_or_else(|| {
                AdminError::BadRequest(format!("unknown state {:?}", truncate(text)))
            })?),
        };
        let time = |field: &str, text: Option<&str>| match text.map(str::trim) {
            None | Some("") => Ok(None),
            Some(text) => parse_time(field, text).map(Some),
        };
        let since = time("since", self.since.as_deref())?;
        let until = time("until", self.until.as_deref())?;
        if self.page.is_some() {
            return Err(AdminError::BadRequest(
                "page numbers are not supported: follow the `before` and `after` cursors of \
                 the older and newer links"
                    .into(),
            ));
        }
        let cursor = |text: &str| {
            Cursor::parse(text.trim()).ok_or_else(|| {
                AdminError::BadRequest(format!("not a dead-letter cursor: {:?}", truncate(text)))
            })
        };
        let page = match (self.before.as_deref(), self.after.as_deref()) {
            (Some(_), Some(_)) => {
                return Err(AdminError::BadRequest(
                    "give `before` or `after`, not both".into(),
                ));
            }
            (Some(text), None) => Page::Older(cursor(text)?),
            (None, Some(text)) => Page::Newer(cursor(text)?),
            (None, None) => Page::Newest,
        };
        Ok(DeadLetterFilter {
            selection: Selection {
                partition,
                reason,
                state,
                since,
                until,
            },
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

/// How long `/readyz` waits for each of its checks (they run together): it answers within a
/// second whatever the broker or the database do, with room for a busy machine (measured: 1.01 s
/// with a 500 ms bound while five builds ran), and a check that took longer is not ready.
pub(super) const READY_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(400);

/// The database answers, the consumer joined its group (or owns partitions) and the Kafka
/// connection does not fail; 503 with what is not ready (and why the connection fails)
/// otherwise.
#[get("/readyz")]
pub(super) async fn readyz(state: State) -> impl Responder {
    let database = async {
        match state.pool.get().await {
            Ok(client) => client.simple_query("SELECT 1").await.is_ok(),
            Err(_) => false,
        }
    };
    let joined = async {
        state
            .supervisor
            .send(SampleStatus)
            .await
            .map(|s| s.member_id.is_some() || !s.partitions.is_empty())
            .unwrap_or(false)
    };
    let (database, joined) = futures::join!(
        tokio::time::timeout(READY_CHECK_TIMEOUT, database),
        tokio::time::timeout(READY_CHECK_TIMEOUT, joined)
    );
    let timed_out: Vec<&str> = [("database", database.is_err()), ("group", joined.is_err())]
        .into_iter()
        .filter_map(|(check, late)| late.then_some(check))
        .collect();
    let (database, joined) = (database.unwrap_or(false), joined.unwrap_or(false));
    let failing = state.connection.status().failing;
    let connected = failing.is_none();
    let connection = match failing {
        None => serde_json::json!({ "failing": false }),
        Some(failing) => serde_json::json!({
            "failing": true,
            "cause": failing.cause.kind,
            "problem": failing.cause.problem,
            "message": failing.cause.message(),
            "since": failing.since,
        }),
    };
    let body = serde_json::json!({
        "database": database,
        "group_joined": joined,
        "timed_out": timed_out,
        "kafka_connection": connection,
    });
    if database && joined && connected {
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
