//! The remedies for poison records, from a signed-in form (CSRF) or with the bearer token, each
//! recorded in the audit trail: dead-letter an Unknown record of a partition (a skip, with a
//! required comment; the watermark moves past it), and replay dead letters back through the
//! inbox transaction, one or every letter matching a filter.

use super::*;
use crate::actors::messages::{DeadLetterRecord, SkipRefused};
use crate::admin::auth::bearer_token;
use crate::inbox::replay::{self, LetterId, ReplayError, ReplaySummary, Replayed};

/// Letters one "replay all matching" replays at most: each is a transaction of its own, and the
/// request waits for them.
pub const REPLAY_LIMIT: u64 = 1000;

/// The longest comment an operator may give, in characters.
const MAX_COMMENT_CHARS: usize = 1000;

/// Why a remedy was not carried out.
pub(super) enum Refused {
    BadRequest(String),
    Denied(Denied),
    Conflict(String),
    NotFound(String),
    Unavailable(String),
}

impl Refused {
    fn status(&self) -> StatusCode {
        match self {
            Refused::BadRequest(_) => StatusCode::BAD_REQUEST,
            Refused::Denied(denied) => denied_status(denied),
            Refused::Conflict(_) => StatusCode::CONFLICT,
            Refused::NotFound(_) => StatusCode::NOT_FOUND,
            Refused::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    async fn page(self, state: &AdminState, request: &HttpRequest) -> HttpResponse {
        let status = self.status();
        match self {
            Refused::Denied(denied) => {
                tarpit(&denied).await;
                denied_response(state, request, &denied, false, "")
            }
            Refused::BadRequest(m)
            | Refused::Conflict(m)
            | Refused::NotFound(m)
            | Refused::Unavailable(m) => error_page(state, request, status, m),
        }
    }

    async fn json(self, state: &AdminState, request: &HttpRequest) -> HttpResponse {
        let status = self.status();
        match self {
            Refused::Denied(denied) => {
                tarpit(&denied).await;
                denied_response(state, request, &denied, true, "")
            }
            Refused::BadRequest(m)
            | Refused::Conflict(m)
            | Refused::NotFound(m)
            | Refused::Unavailable(m) => json_error(status, m),
        }
    }
}

/// The API acts with the bearer token only: a session cookie is not enough there, so a
/// cross-site request can never act through it.
fn bearer_required(state: &AdminState, request: &HttpRequest) -> Option<HttpResponse> {
    if bearer_token(request).is_some() {
        return None;
    }
    let denied = if state.auth.read_only() {
        Denied::ReadOnly
    } else {
        Denied::NotSignedIn
    };
    Some(denied_response(
        state,
        request,
        &denied,
        true,
        "; send Authorization: Bearer <token>",
    ))
}

fn parse_comment(comment: Option<&str>) -> Result<String, Refused> {
    let comment = comment.map(str::trim).unwrap_or_default();
    if comment.is_empty() {
        return Err(Refused::BadRequest(
            "a comment is required: say why the record is set aside".into(),
        ));
    }
    if comment.chars().count() > MAX_COMMENT_CHARS {
        return Err(Refused::BadRequest(format!(
            "a comment has at most {MAX_COMMENT_CHARS} characters"
        )));
    }
    Ok(comment.to_owned())
}

// ----- dead-letter an Unknown record --------------------------------------------------------

/// Checks, asks the partition to dead-letter the record, and records it.
async fn skip(
    state: &AdminState,
    request: &HttpRequest,
    (partition, offset): (&str, &str),
    comment: Option<&str>,
    csrf: Option<&str>,
) -> Result<(i32, i64), Refused> {
    let principal = state
        .auth
        .authorize(request, csrf)
        .map_err(Refused::Denied)?;
    let partition = parse_partition(partition).map_err(Refused::BadRequest)?;
    let offset = parse_offset(offset).map_err(Refused::BadRequest)?;
    let comment = parse_comment(comment)?;
    let actor = principal.describe(request);
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
    let result = match &answer {
        Ok(()) => "ok",
        Err(SkipRefused::NotOwned(_)) => "not owned",
        Err(SkipRefused::NotInBacklog { .. }) => "not in the backlog",
    };
    tracing::info!(partition, offset, %actor, result, "admin action: dead-letter a record");
    audit(
        state,
        &queries::Action {
            partition: Some(partition),
            offset: Some(offset),
            action: "dead_letter",
            actor: &actor,
            result,
            detail: Some(&comment),
        },
    )
    .await;
    match answer {
        Ok(()) => Ok((partition, offset)),
        Err(refused @ SkipRefused::NotOwned(_)) => Err(Refused::Conflict(refused.to_string())),
        Err(refused) => Err(Refused::NotFound(refused.to_string())),
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
    let skipped = skip(
        &state,
        &request,
        (&partition, &offset),
        form.comment.as_deref(),
        form.csrf.as_deref(),
    )
    .await;
    match skipped {
        Ok((partition, offset)) => see_other(&format!(
            "/partitions/{partition}?done=dead_letter&offset={offset}"
        )),
        Err(refused) => refused.page(&state, &request).await,
    }
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
) -> HttpResponse {
    if let Some(refusal) = bearer_required(&state, &request) {
        return refusal;
    }
    let (partition, offset) = path.into_inner();
    // Authorised before the body is looked at.
    if let Err(denied) = state.auth.authorize(&request, None) {
        return Refused::Denied(denied).json(&state, &request).await;
    }
    let comment = match serde_json::from_slice::<SkipBody>(&body) {
        Ok(body) => body.comment,
        Err(error) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                format!("the body must be JSON like {{\"comment\": \"why\"}}: {error}"),
            );
        }
    };
    match skip(
        &state,
        &request,
        (&partition, &offset),
        comment.as_deref(),
        None,
    )
    .await
    {
        Ok((partition, offset)) => HttpResponse::Ok().json(serde_json::json!({
            "partition": partition,
            "offset": offset,
            "result": "dead-lettering requested: it runs as the partition's next unit of work",
        })),
        Err(refused) => refused.json(&state, &request).await,
    }
}

// ----- replay dead letters ------------------------------------------------------------------

/// Checks, replays one letter and records it.
async fn replay_one(
    state: &AdminState,
    request: &HttpRequest,
    (partition, offset): (&str, &str),
    topic: Option<&str>,
    csrf: Option<&str>,
) -> Result<(LetterId, Replayed), Refused> {
    let principal = state
        .auth
        .authorize(request, csrf)
        .map_err(Refused::Denied)?;
    let id = LetterId {
        topic: topic
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or(&state.topic)
            .to_owned(),
        partition: parse_partition(partition).map_err(Refused::BadRequest)?,
        offset: parse_offset(offset).map_err(Refused::BadRequest)?,
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
        &queries::Action {
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
        Err(error @ ReplayError::NotFound { .. }) => Err(Refused::NotFound(error.to_string())),
        Err(error) => Err(Refused::Unavailable(error.to_string())),
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
    match replayed {
        Ok((id, _)) => see_other(&format!(
            "/dead-letters?partition={}&replayed={}",
            id.partition, id.offset
        )),
        Err(refused) => refused.page(&state, &request).await,
    }
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
) -> HttpResponse {
    if let Some(refusal) = bearer_required(&state, &request) {
        return refusal;
    }
    let (partition, offset) = path.into_inner();
    match replay_one(
        &state,
        &request,
        (&partition, &offset),
        query.topic.as_deref(),
        None,
    )
    .await
    {
        Ok((id, replayed)) => HttpResponse::Ok().json(serde_json::json!({
            "topic": id.topic,
            "partition": id.partition,
            "offset": id.offset,
            "state": replayed.state(),
            "message": replayed.message(),
        })),
        Err(refused) => refused.json(&state, &request).await,
    }
}

/// Checks, replays every matching letter not applied yet (up to [`REPLAY_LIMIT`]) and records
/// it.
async fn replay_all(
    state: &AdminState,
    request: &HttpRequest,
    query: &DeadLetterQuery,
    csrf: Option<&str>,
) -> Result<(DeadLetterFilter, ReplaySummary), Refused> {
    let principal = state
        .auth
        .authorize(request, csrf)
        .map_err(Refused::Denied)?;
    let filter = query.filter().map_err(Refused::BadRequest)?;
    let actor = principal.describe(request);
    let selection = filter.selection();
    let replayed = replay::replay_matching(
        &state.pool,
        &selection,
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
        &queries::Action {
            partition: filter.partition,
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
        Err(error) => Err(Refused::Unavailable(error.to_string())),
    }
}

/// The filter in words, for the audit trail.
fn describe_filter(filter: &DeadLetterFilter) -> String {
    let mut parts = Vec::new();
    if let Some(p) = filter.partition {
        parts.push(format!("partition {p}"));
    }
    if let Some(r) = &filter.reason {
        parts.push(format!("reason {r}"));
    }
    if let Some(s) = filter.state {
        parts.push(format!("state {s}"));
    }
    if let Some(at) = filter.since {
        parts.push(format!("since {}", at.to_rfc3339()));
    }
    if let Some(at) = filter.until {
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
    match replay_all(&state, &request, &form.filter, form.csrf.as_deref()).await {
        Ok((filter, summary)) => {
            let back = dead_letter_link(&filter, Page::Newest);
            let separator = if back.contains('?') { '&' } else { '?' };
            see_other(&format!(
                "{back}{separator}summary={}.{}.{}.{}",
                summary.applied,
                summary.already_applied,
                summary.still_rejected,
                u8::from(summary.more)
            ))
        }
        Err(refused) => refused.page(&state, &request).await,
    }
}

/// Every letter matching `?partition=&reason=&state=&since=&until=`, with the bearer token.
#[post("/api/dead-letters/replay")]
pub(super) async fn replay_all_api(
    state: State,
    request: HttpRequest,
    query: web::Query<DeadLetterQuery>,
) -> HttpResponse {
    if let Some(refusal) = bearer_required(&state, &request) {
        return refusal;
    }
    match replay_all(&state, &request, &query, None).await {
        Ok((_, summary)) => HttpResponse::Ok().json(serde_json::json!({
            "replayed": summary.replayed(),
            "applied": summary.applied,
            "already_applied": summary.already_applied,
            "still_rejected": summary.still_rejected,
            "more": summary.more,
        })),
        Err(refused) => refused.json(&state, &request).await,
    }
}
