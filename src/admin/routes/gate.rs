//! Who may read. With `--admin-read-auth`, every read needs a session or the bearer token: a
//! page sends the browser to the sign-in form (and back afterwards), the API and the fragments
//! answer 401. Without it, readers who did not sign in are limited to
//! `--admin-anonymous-reads-per-sec` page loads (429 beyond), so that nobody can load pages
//! until record processing starves. Actions (POST) are authorised by their handlers. The
//! sign-in form, the stylesheet and the script stay open, and so do `/metrics` and the health
//! endpoints.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;

use super::*;
use crate::admin::redirect::login_url;

/// Paths anybody may read.
pub(super) fn exempt(path: &str) -> bool {
    matches!(path, "/login" | "/healthz" | "/readyz" | "/metrics") || path.starts_with("/static/")
}

/// The middleware: lets a read through when signed in, or when the instance lets anonymous
/// readers in and this one is within the limit.
pub async fn read_gate<B: MessageBody>(
    request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    let refusal = request
        .app_data::<State>()
        .filter(|_| read && !exempt(request.path()))
        .and_then(|state| {
            let denied = admit(state, request.request()).err()?;
            Some((refuse(state, request.request(), &denied), denied))
        });
    match refusal {
        Some((response, denied)) => {
            tarpit(&denied).await;
            Ok(request.into_response(response).map_into_right_body())
        }
        None => next
            .call(request)
            .await
            .map(ServiceResponse::map_into_left_body),
    }
}

fn admit(state: &AdminState, request: &HttpRequest) -> Result<(), Denied> {
    match state.auth.reader(request)? {
        Some(_) => Ok(()),
        None if state.read_auth => Err(Denied::NotSignedIn),
        None => state.auth.admit_anonymous(request),
    }
}

fn refuse(state: &AdminState, request: &HttpRequest, denied: &Denied) -> HttpResponse {
    if let Denied::TooManyReads { retry_after_secs } = denied {
        // Plain text: under a flood, refusing must cost less than the page would have.
        return HttpResponse::TooManyRequests()
            .content_type(ContentType::plaintext())
            .insert_header((header::RETRY_AFTER, *retry_after_secs))
            .body(format!("{denied}\n"));
    }
    let path = request.path();
    if path.starts_with("/api/") || path.starts_with("/fragments/") {
        let hint = match denied {
            Denied::NotSignedIn => " (or send Authorization: Bearer <token>)",
            _ => "",
        };
        let denied = denied.clone();
        return AdminError::Denied { denied, hint }.error_response();
    }
    if *denied == Denied::NotSignedIn {
        let here = request
            .uri()
            .path_and_query()
            .map_or(path, |pq| pq.as_str());
        return see_other(&login_url(here));
    }
    error_page(state, request, &denied.clone().into())
}
