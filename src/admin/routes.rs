//! Routes: `/healthz`, `/readyz`, `/metrics` and the JSON API.

use actix_web::{HttpResponse, Responder, get, web};

use super::AdminState;
use crate::actors::messages::GetStatus;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(healthz)
        .service(readyz)
        .service(metrics)
        .service(api_status);
}

/// The process is alive and serving HTTP.
#[get("/healthz")]
async fn healthz() -> impl Responder {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

/// The database answers and the consumer joined its group.
#[get("/readyz")]
async fn readyz(state: web::Data<AdminState>) -> impl Responder {
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
async fn metrics(state: web::Data<AdminState>) -> impl Responder {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render())
}

#[get("/api/status")]
async fn api_status(state: web::Data<AdminState>) -> impl Responder {
    match state.supervisor.send(GetStatus).await {
        Ok(status) => HttpResponse::Ok().json(status),
        Err(_) => {
            HttpResponse::ServiceUnavailable().json(serde_json::json!({"error": "shutting down"}))
        }
    }
}
