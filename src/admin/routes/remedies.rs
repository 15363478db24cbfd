//! The remedies for poison records, from a signed-in form (CSRF) or with the bearer token, each
//! recorded in the audit trail: dead-letter an Unknown record of a partition (a skip, with a
//! required comment; the watermark moves past it), and replay dead letters back through the
//! inbox transaction, one or every letter matching a filter.
//!
//! A skip is answered, and audited, with what became of it: done (dead-lettered), overtaken (a
//! retry running already resolved the record first) or dropped (the partition was taken away
//! before the skip ran). One that has not run within [`SKIP_WAIT`] is answered and audited as
//! pending, and its audit row gets the outcome once it is known.

use std::time::Duration;

use super::routed::{Routed, RoutedAnswer, owned_here, route};
use super::*;
use crate::actors::messages::{DeadLetterRecord, SkipOutcome, SkipRefused};
use crate::inbox::replay::{self, LetterId, ReplayError, ReplaySummary, Replayed};

/// Letters one "replay all matching" replays at most: each is a transaction of its own, and the
/// request waits for them.
pub const REPLAY_LIMIT: u64 = 1000;

/// The longest comment an operator may give, in characters.
const MAX_COMMENT_CHARS: usize = 1000;

fn parse_comment(comment: Option<&str>) -> Result<String, AdminError> {
    let comment = comment.map(str::trim).unwrap_or_default();
    if comment.is_empty() {
        return Err(AdminError::BadRequest(
            "a comment is required: say why the record is set aside".into(),
        ));
    }
    if comment.chars().count() > MAX_COMMENT_CHARS {
        return Err(AdminError::BadRequest(format!(
            "a comment has at most {MAX_COMMENT_CHARS} characters"
        )));
    }
    Ok(comment.to_owned())
}

// ----- dead-letter an Unknown record --------------------------------------------------------

/// How long an operator's skip is waited for. It runs after the partition's unit of work in
/// flight, so it is at once unless the database is slow or down (each unit ends within
/// `--work-timeout`).
pub const SKIP_WAIT: Duration = Duration::from_secs(10);

/// What an operator is told about their skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skipped {
    Settled(SkipOutcome),
    /// Not run within [`SKIP_WAIT`]: its audit row is settled later.
    Pending,
}

impl Skipped {
    fn as_str(self) -> &'static str {
        match self {
            Skipped::Settled(outcome) => outcome.as_str(),
            Skipped::Pending => "pending",
        }
    }

    fn message(self) -> String {
        match self {
            Skipped::Settled(outcome) => outcome.message(),
            Skipped::Pending => format!(
                "dead-lettering requested, not run within {} s (the database is slow or down): \
                 it runs as the partition's next unit of work, and the audit trail records its \
                 outcome once known",
                SKIP_WAIT.as_secs()
            ),
        }
    }
}

/// Checks, asks the partition to dead-letter the record, waits for what became of it and
/// records that; `principal` is the authorised operator.
async fn skip(
    state: &AdminState,
    request: &HttpRequest,
    principal: Principal,
    (partition, offset): (&str, &str),
    comment: Option<&str>,
) -> Result<SkipDone, AdminError> {
    let partition = parse_partition(partition)?;
    let offset = parse_offset(offset)?;
    let comment = parse_comment(comment)?;
    let actor = principal.describe(request);
    if !owned_here(state, partition).await? {
        let routed = Routed::DeadLetter { offset, comment };
        return route(state, &actor, partition, routed)
            .await
            .map(SkipDone::Routed);
    }
    skip_here(state, actor, partition, offset, comment)
        .await
        .map(|(p, o, s)| SkipDone::Here(p, o, s))
}

/// A skip, done here or carried to the partition's owner.
enum SkipDone {
    Here(i32, i64, Skipped),
    Routed(RoutedAnswer),
}

/// A skip routed to this member: what its API would answer.
pub(super) async fn skip_as(
    state: &AdminState,
    actor: &str,
    partition: i32,
    offset: i64,
    comment: String,
) -> Result<serde_json::Value, AdminError> {
    let comment = parse_comment(Some(&comment))?;
    let (partition, offset, skipped) =
        skip_here(state, actor.to_owned(), partition, offset, comment).await?;
    Ok(skip_body(partition, offset, skipped))
}

fn skip_body(partition: i32, offset: i64, skipped: Skipped) -> serde_json::Value {
    serde_json::json!({
        "partition": partition,
        "offset": offset,
        "outcome": skipped.as_str(),
        "result": skipped.message(),
    })
}

/// Dead-letters a record of a partition this member owns, under `actor`.
async fn skip_here(
    state: &AdminState,
    actor: String,
    partition: i32,
    offset: i64,
    comment: String,
) -> Result<(i32, i64, Skipped), AdminError> {
    let answer = state
        .supervisor
        .send(DeadLetterRecord {
            partition,
            offset,
            comment: comment.clone(),
            by: actor.clone(),
        })
        .await
        .unwrap_or(Err(SkipRefused::NotOwned(NotOwned(partition))));
    let (answer, pending) = match answer {
        Ok(mut ticket) => match tokio::time::timeout(SKIP_WAIT, &mut ticket).await {
            Ok(outcome) => (Ok(Skipped::Settled(outcome)), None),
            Err(_) => (Ok(Skipped::Pending), Some(ticket)),
        },
        Err(refused) => (Err(refused), None),
    };
    let result = match &answer {
        Ok(skipped) => skipped.as_str(),
        Err(SkipRefused::NotOwned(_)) => "not owned",
        Err(SkipRefused::NotInBacklog { .. }) => "not in the backlog",
    };
    tracing::info!(partition, offset, %actor, result, "admin action: dead-letter a record");
    let id = audit(
        state,
        &audit_trail::Action {
            partition: Some(partition),
            offset: Some(offset),
            action: "dead_letter",
            actor: &actor,
            result,
            detail: Some(&comment),
        },
    )
    .await;
    if let (Some(ticket), Some(id)) = (pending, id) {
        let pool = state.pool.clone();
        actix_web::rt::spawn(async move {
            let outcome = ticket.await;
            let result = outcome.as_str();
            tracing::info!(
                partition,
                offset,
                result,
                "admin action settled: dead-letter a record"
            );
            if let Err(error) = audit_trail::settle(&pool, id, result).await {
                tracing::warn!(id, result, error = %chain(&error), "a skip's outcome not recorded in the audit trail");
            }
        });
    }
    match answer {
        Ok(Skipped::Settled(outcome @ SkipOutcome::Dropped)) => Err(AdminError::Conflict(format!(
            "offset {offset} of partition {partition}: {}",
            outcome.message()
        ))),
        Ok(skipped) => Ok((partition, offset, skipped)),
        Err(refused @ SkipRefused::NotOwned(_)) => Err(AdminError::Conflict(refused.to_string())),
        Err(refused) => Err(AdminError::NotFound(refused.to_string())),
    }
}

#[derive(Deserialize)]
pub(super) struct SkipForm {
    csrf: Option<String>,
    comment: Option<String>,
}

#[post("/partitions/{partition}/backlog/{offset}/dead-letter")]
pub(super) async fn skip_form(
    state: State,
    request: HttpRequest,
    path: web::Path<(String, String)>,
    form: web::Form<SkipForm>,
) -> HttpResponse {
    let (partition, offset) = path.into_inner();
    let skipped = async {
        let principal = authorize(&state, &request, form.csrf.as_deref()).await?;
        let place = (partition.as_str(), offset.as_str());
        skip(&state, &request, principal, place, form.comment.as_deref()).await
    }
    .await;
    let page = skipped.map(|done| match done {
        SkipDone::Here(partition, offset, skipped) => see_other(&format!(
            "/partitions/{partition}?done=dead_letter&offset={offset}&outcome={}",
            skipped.as_str()
        )),
        SkipDone::Routed(routed) => routed.page(),
    });
    page_or_error(&state, &request, page)
}

#[derive(Deserialize)]
struct SkipBody {
    comment: Option<String>,
}

/// `{"comment": "..."}`, with the bearer token.
#[post("/api/partitions/{partition}/backlog/{offset}/dead-letter")]
pub(super) async fn skip_api(
    state: State,
    request: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, AdminError> {
    require_bearer(&state, &request)?;
    let (partition, offset) = path.into_inner();
    // Authorised before the body is looked at.
    let principal = authorize(&state, &request, None).await?;
    let comment = serde_json::from_slice::<SkipBody>(&body)
        .map_err(|error| {
            AdminError::BadRequest(format!(
                "the body must be JSON like {{\"comment\": \"why\"}}: {error}"
            ))
        })?
        .comment;
    let place = (partition.as_str(), offset.as_str());
    let (partition, offset, skipped) =
        match skip(&state, &request, principal, place, comment.as_deref()).await? {
            SkipDone::Here(partition, offset, skipped) => (partition, offset, skipped),
            SkipDone::Routed(routed) => return Ok(routed.response()),
        };
    let mut answer = match skipped {
        Skipped::Settled(_) => HttpResponse::Ok(),
        Skipped::Pending => HttpResponse::Accepted(),
    };
    Ok(answer.json(skip_body(partition, offset, skipped)))
}

// ----- replay dead letters ------------------------------------------------------------------

/// Checks, replays one letter and records it.
async fn replay_one(
    state: &AdminState,
    request: &HttpRequest,
    (partition, offset): (&str, &str),
    topic: Option<&str>,
    csrf: Option<&str>,
) -> Result<(LetterId, Replayed), AdminError> {
    let principal = authorize(state, request, csrf).await?;
    let id = LetterId {
        topic: topic
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or(&state.topic)
            .to_owned(),
        partition: parse_partition(partition)?,
        offset: parse_offset(offset)?,
    };
    let actor = principal.describe(request);
    let replayed = replay::replay(&state.pool, &id, &actor, state.max_payload_bytes).await;
    let (result, detail) = match &replayed {
        Ok(replayed) => ("ok", replayed.message()),
        Err(ReplayError::NotFound { .. }) => ("not found", String::new()),
        Err(error) => ("failed", chain(error)),
    };
    tracing::info!(partition = id.partition, offset = id.offset, %actor, result, detail, "admin action: replay a dead letter");
    audit(
        state,
        &audit_trail::Action {
            partition: Some(id.partition),
            offset: Some(id.offset),
            action: "replay",
            actor: &actor,
            result,
            detail: Some(&detail).filter(|d| !d.is_empty()).map(|d| d.as_str()),
        },
    )
    .await;
    match replayed {
        Ok(replayed) => Ok((id, replayed)),
        Err(error @ ReplayError::NotFound { .. }) => Err(AdminError::NotFound(error.to_string())),
        Err(error) => Err(AdminError::Unavailable(error.to_string())),
    }
}

#[derive(Deserialize)]
pub(super) struct ReplayForm {
    csrf: Option<String>,
    topic: Option<String>,
}

#[post("/dead-letters/{partition}/{offset}/replay")]
pub(super) async fn replay_form(
    state: State,
    request: HttpRequest,
    path: web::Path<(String, String)>,
    form: web::Form<ReplayForm>,
) -> HttpResponse {
    let (partition, offset) = path.into_inner();
    let replayed = replay_one(
        &state,
        &request,
        (&partition, &offset),
        form.topic.as_deref(),
        form.csrf.as_deref(),
    )
    .await;
    let page = replayed.map(|(id, _)| {
        see_other(&format!(
            "/dead-letters?partition={}&replayed={}",
            id.partition, id.offset
        ))
    });
    page_or_error(&state, &request, page)
}

#[derive(Deserialize)]
pub(super) struct TopicQuery {
    topic: Option<String>,
}

/// One letter (of the service's topic unless `?topic=`), with the bearer token.
#[post("/api/dead-letters/{partition}/{offset}/replay")]
pub(super) async fn replay_api(
    state: State,
    request: HttpRequest,
    path: web::Path<(String, String)>,
    query: web::Query<TopicQuery>,
) -> Result<HttpResponse, AdminError> {
    require_bearer(&state, &request)?;
    let (partition, offset) = path.into_inner();
    let (id, replayed) = replay_one(
        &state,
        &request,
        (&partition, &offset),
        query.topic.as_deref(),
        None,
    )
    .await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "topic": id.topic,
        "partition": id.partition,
        "offset": id.offset,
        "state": replayed.state(),
        "message": replayed.message(),
    })))
}

/// Checks, replays every matching letter not applied yet (up to [`REPLAY_LIMIT`]) and records
/// it.
async fn replay_all(
    state: &AdminState,
    request: &HttpRequest,
    query: &DeadLetterQuery,
    csrf: Option<&str>,
) -> Result<(DeadLetterFilter, ReplaySummary), AdminError> {
    let principal = authorize(state, request, csrf).await?;
    let filter = query.filter()?;
    let actor = principal.describe(request);
    let selection = &filter.selection;
    let replayed = replay::replay_matching(
        &state.pool,
        selection,
        &actor,
        state.max_payload_bytes,
        REPLAY_LIMIT,
    )
    .await;
    let described = describe_filter(&filter);
    let (result, detail) = match &replayed {
        Ok(summary) => ("ok", format!("{described}: {summary}")),
        Err(error) => ("failed", format!("{described}: {}", chain(error))),
    };
    tracing::info!(%actor, result, detail, "admin action: replay matching dead letters");
    audit(
        state,
        &audit_trail::Action {
            partition: filter.selection.partition,
            offset: None,
            action: "replay_matching",
            actor: &actor,
            result,
            detail: Some(&detail),
        },
    )
    .await;
    match replayed {
        Ok(summary) => Ok((filter, summary)),
        Err(error) => Err(AdminError::Unavailable(error.to_string())),
    }
}

/// The filter in words, for the audit trail.
fn describe_filter(filter: &DeadLetterFilter) -> String {
    let mut parts = Vec::new();
    if let Some(p) = filter.selection.partition {
        parts.push(format!("partition {p}"));
    }
    if let Some(r) = &filter.selection.reason {
        parts.push(format!("reason {r}"));
    }
    if let Some(s) = filter.selection.state {
        parts.push(format!("state {s}"));
    }
    if let Some(at) = filter.selection.since {
        parts.push(format!("since {}", at.to_rfc3339()));
    }
    if let Some(at) = filter.selection.until {
        parts.push(format!("until {}", at.to_rfc3339()));
    }
    if parts.is_empty() {
        "every letter".to_owned()
    } else {
        format!("letters of {}", parts.join(", "))
    }
}

#[derive(Deserialize)]
pub(super) struct ReplayAllForm {
    csrf: Option<String>,
    #[serde(flatten)]
    filter: DeadLetterQuery,
}

#[post("/dead-letters/replay")]
pub(super) async fn replay_all_form(
    state: State,
    request: HttpRequest,
    form: web::Form<ReplayAllForm>,
) -> HttpResponse {
    let form = form.into_inner();
    let replayed = replay_all(&state, &request, &form.filter, form.csrf.as_deref()).await;
    let page = replayed.map(|(filter, summary)| {
        let back = dead_letter_link(&filter, Page::Newest);
        let separator = if back.contains('?') { '&' } else { '?' };
        see_other(&format!(
            "{back}{separator}summary={}.{}.{}.{}",
            summary.applied,
            summary.already_applied,
            summary.still_rejected,
            u8::from(summary.more)
        ))
    });
    page_or_error(&state, &request, page)
}

/// Every letter matching `?partition=&reason=&state=&since=&until=`, with the bearer token.
#[post("/api/dead-letters/replay")]
pub(super) async fn replay_all_api(
    state: State,
    request: HttpRequest,
    query: web::Query<DeadLetterQuery>,
) -> Result<HttpResponse, AdminError> {
    require_bearer(&state, &request)?;
    let (_, summary) = replay_all(&state, &request, &query, None).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "replayed": summary.replayed(),
        "applied": summary.applied,
        "already_applied": summary.already_applied,
        "still_rejected": summary.still_rejected,
        "more": summary.more,
    })))
}
