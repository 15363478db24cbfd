//! Why an admin request failed, in one type: its status, the text a client may see, and the
//! headers that go with it. The JSON API returns it as an actix [`ResponseError`]; the pages
//! render the same error as an HTML page (`routes::error_page`). A database failure keeps its
//! cause as [`std::error::Error::source`] for the log and shows the client a generic text
//! (database errors can carry names, values and addresses).

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use tokio_postgres::error::SqlState;

use super::auth::Denied;
use crate::actors::messages::NotOwned;
use crate::error_text::chain;
use crate::inbox::PgInboxError;

/// An admin request that cannot be answered as asked.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The request itself is wrong (a parameter, a form field); the text says how.
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    NotOwned(#[from] NotOwned),
    /// The request conflicts with the state it meets (another instance owns the partition).
    #[error("{0}")]
    Conflict(String),
    /// The service could not do it now (a replay's database is down); the text says what.
    #[error("{0}")]
    Unavailable(String),
    /// Not allowed; `hint` tells an API client how to authenticate.
    #[error("{denied}{hint}")]
    Denied { denied: Denied, hint: &'static str },
    /// A database read or write failed: `message` for the client, the cause for the log.
    #[error("{message}")]
    Database {
        message: &'static str,
        source: PgInboxError,
    },
    #[error("the service is shutting down")]
    ShuttingDown,
}

impl From<Denied> for AdminError {
    fn from(denied: Denied) -> Self {
        AdminError::Denied { denied, hint: "" }
    }
}

impl AdminError {
    /// A failed admin query about `what`, logged with its detail here.
    pub fn database(what: &'static str, source: PgInboxError) -> AdminError {
        tracing::warn!(what, error = %chain(&source), "admin query failed");
        let message = match &source {
            PgInboxError::Db(db) if db.code() == Some(&SqlState::QUERY_CANCELED) => {
                "the database took too long to answer (statement timeout); narrow the filter or \
                 try again"
            }
            PgInboxError::Pool(deadpool_postgres::PoolError::Timeout(_)) => {
                "the admin pages are busy; try again in a moment"
            }
            _ => "the database is unavailable right now; the service log has the details",
        };
        AdminError::Database { message, source }
    }

    /// The refusal, if this is one (for the late answer to requests over a limit).
    pub fn denied(&self) -> Option<&Denied> {
        match self {
            AdminError::Denied { denied, .. } => Some(denied),
            _ => None,
        }
    }

    /// The headers that go with the status on a page or in JSON: `Retry-After` when
    /// throttled.
    pub fn add_headers(&self, response: &mut HttpResponse) {
        if let Some(
            Denied::Throttled { retry_after_secs } | Denied::TooManyReads { retry_after_secs },
        ) = self.denied()
        {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, (*retry_after_secs).into());
        }
    }
}

impl ResponseError for AdminError {
    fn status_code(&self) -> StatusCode {
        match self {
            AdminError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AdminError::NotFound(_) => StatusCode::NOT_FOUND,
            AdminError::NotOwned(_) | AdminError::Conflict(_) => StatusCode::CONFLICT,
            AdminError::Denied { denied, .. } => match denied {
                Denied::ReadOnly | Denied::Csrf => StatusCode::FORBIDDEN,
                Denied::NotSignedIn | Denied::WrongToken => StatusCode::UNAUTHORIZED,
                Denied::Throttled { .. } | Denied::TooManyReads { .. } => {
                    StatusCode::TOO_MANY_REQUESTS
                }
            },
            AdminError::Database { .. } | AdminError::Unavailable(_) | AdminError::ShuttingDown => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }

    /// `{"error": "..."}`, with the bearer challenge when a token is missing or wrong.
    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code())
            .json(serde_json::json!({ "error": self.to_string() }));
        self.add_headers(&mut response);
        if matches!(
            self.denied(),
            Some(Denied::NotSignedIn | Denied::WrongToken)
        ) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"history-consumer admin\""),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_its_status_and_a_json_body_with_its_text() {
        let cases = [
            (AdminError::BadRequest("bad".into()), 400),
            (AdminError::NotFound("gone".into()), 404),
            (AdminError::NotOwned(NotOwned(3)), 409),
            (AdminError::from(Denied::Csrf), 403),
            (AdminError::from(Denied::ReadOnly), 403),
            (AdminError::from(Denied::NotSignedIn), 401),
            (AdminError::from(Denied::WrongToken), 401),
            (
                AdminError::from(Denied::Throttled {
                    retry_after_secs: 7,
                }),
                429,
            ),
            (AdminError::ShuttingDown, 503),
        ];
        for (error, status) in cases {
            let response = error.error_response();
            assert_eq!(response.status().as_u16(), status, "{error}");
            assert_eq!(
                response.headers().get(header::CONTENT_TYPE).unwrap(),
                "application/json"
            );
        }
    }

    #[test]
    fn a_throttled_refusal_says_when_to_come_back_and_a_missing_token_how_to_send_one() {
        let throttled = AdminError::from(Denied::Throttled {
            retry_after_secs: 7,
        })
        .error_response();
        assert_eq!(throttled.headers().get(header::RETRY_AFTER).unwrap(), "7");
        let missing = AdminError::Denied {
            denied: Denied::NotSignedIn,
            hint: "; send Authorization: Bearer <token>",
        };
        assert!(missing.to_string().ends_with("Bearer <token>"));
        let response = missing.error_response();
        assert!(
            response
                .headers()
                .get(header::WWW_AUTHENTICATE)
                .is_some_and(|v| v.to_str().unwrap().starts_with("Bearer"))
        );
    }

    #[test]
    fn a_database_error_shows_a_generic_text_and_keeps_its_cause_as_the_source() {
        let cause = PgInboxError::Pool(deadpool_postgres::PoolError::Closed);
        let error = AdminError::database("dead letters", cause);
        assert_eq!(error.status_code(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(error.to_string().contains("unavailable"));
        assert!(std::error::Error::source(&error).is_some());
    }
}
