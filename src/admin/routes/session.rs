//! Signing in with the admin token and out again.

use super::*;

#[derive(Deserialize)]
pub(super) struct NextQuery {
    next: Option<String>,
}

#[get("/login")]
pub(super) async fn login_form(
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
pub(super) struct LoginForm {
    token: String,
    next: Option<String>,
}

#[post("/login")]
pub(super) async fn login(
    state: State,
    request: HttpRequest,
    form: web::Form<LoginForm>,
) -> HttpResponse {
    let next = safe_next(form.next.as_deref());
    match state.auth.sign_in(&request, &form.token) {
        Ok(cookie) => HttpResponse::SeeOther()
            .insert_header((header::LOCATION, next))
            .cookie(cookie)
            .finish(),
        // Auth logged and counted the refusal.
        Err(denied) => {
            tarpit(&denied).await;
            let error = AdminError::from(denied);
            let mut response = html(
                error.status_code(),
                &LoginPage {
                    layout: layout(&state, &request, "Sign in"),
                    message: error.to_string(),
                    next,
                },
            );
            error.add_headers(&mut response);
            response
        }
    }
}

#[post("/logout")]
pub(super) async fn logout(
    state: State,
    request: HttpRequest,
    form: web::Form<CsrfForm>,
) -> HttpResponse {
    if let Err(error) = authorize(&state, &request, form.csrf.as_deref()).await {
        return error_page(&state, &request, &error);
    }
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/"))
        .cookie(state.auth.sign_out(&request))
        .finish()
}
