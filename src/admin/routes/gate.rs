//! With `--admin-read-auth`, every read needs a session or the bearer token: a page sends the
//! browser to the sign-in form (and back afterwards), the API and the fragments answer 401.
//! Actions (POST) are authorised by their handlers. The sign-in form, the stylesheet and the
//! script stay open, and so do `/metrics` and the health endpoints.

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

/// The middleware: lets a read through only when signed in (if the instance asks for that).
pub async fn read_gate<B: MessageBody>(
    request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    let state = request.app_data::<State>().cloned();
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    let gated = match &state {
        Some(state) => state.read_auth && read && !exempt(request.path()),
        None => false,
    };
    let refusal = match (&state, gated) {
        (Some(state), true) => state
            .auth
            .authorize_read(request.request())
            .err()
            .map(|denied| refuse(state, request.request(), &denied)),
        _ => None,
    };
    match refusal {
        Some(response) => Ok(request.into_response(response).map_into_right_body()),
        None => next
            .call(request)
            .await
            .map(ServiceResponse::map_into_left_body),
    }
}

fn refuse(state: &AdminState, request: &HttpRequest, denied: &Denied) -> HttpResponse {
    let path = request.path();
    if path.starts_with("/api/") || path.starts_with("/fragments/") {
        return denied_response(
            state,
            request,
            denied,
            true,
            "; sign in or send Authorization: Bearer <token>",
        );
    }
    if *denied == Denied::NotSignedIn {
        let here = request
            .uri()
            .path_and_query()
            .map_or(path, |pq| pq.as_str());
        return see_other(&login_url(here));
    }
    denied_response(state, request, denied, false, "")
}
