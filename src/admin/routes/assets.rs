//! The stylesheet and the overview's refresh script, compiled in: files of their own, so that
//! the Content-Security-Policy allows no inline script or style.

use super::*;

const STYLESHEET: &str = include_str!("../../../templates/static/admin.css");
const OVERVIEW_SCRIPT: &str = include_str!("../../../templates/static/overview.js");
/// They hold nothing private and change only with the binary.
const CACHE: &str = "public, max-age=3600";

#[get("/static/admin.css")]
pub(super) async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, CACHE))
        .body(STYLESHEET)
}

#[get("/static/overview.js")]
pub(super) async fn overview_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, CACHE))
        .body(OVERVIEW_SCRIPT)
}
