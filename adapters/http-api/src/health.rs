//! Liveness (`/healthz`), readiness (`/readyz`, asks a [`Readiness`] probe that `bootstrap`
//! implements over the database) and the Prometheus scrape (`/metrics`).

use std::sync::Arc;

use poem_openapi::payload::PlainText;
use poem_openapi::{ApiResponse, OpenApi};

use crate::AppState;
use crate::metrics;

/// Whether the service can serve requests now (the database is reachable).
#[async_trait::async_trait]
pub trait Readiness: Send + Sync {
    /// `true` when ready. Implementations MUST answer within a bounded time.
    async fn ready(&self) -> bool;
}

/// `GET /healthz`.
#[derive(ApiResponse)]
enum HealthResponse {
    /// The process is up.
    #[oai(status = 200)]
    Ok(PlainText<&'static str>),
}

/// `GET /readyz`.
#[derive(ApiResponse)]
enum ReadyResponse {
    /// The database is reachable.
    #[oai(status = 200)]
    Ready(PlainText<&'static str>),
    /// The database is not reachable.
    #[oai(status = 503)]
    NotReady(PlainText<&'static str>),
}

/// `GET /metrics`.
#[derive(ApiResponse)]
enum MetricsResponse {
    /// Prometheus text exposition format.
    #[oai(status = 200, content_type = "text/plain; version=0.0.4")]
    Ok(PlainText<String>),
}

/// The operations endpoints.
pub(crate) struct HealthApi {
    state: Arc<AppState>,
}

impl HealthApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        metrics::install();
        Self { state }
    }
}

/// Tags of the operations endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Liveness, readiness and metrics.
    Operations,
}

#[OpenApi(tag = "Tag::Operations")]
impl HealthApi {
    /// Liveness: the process is up.
    #[oai(path = "/healthz", method = "get")]
    async fn healthz(&self) -> HealthResponse {
        HealthResponse::Ok(PlainText("ok"))
    }

    /// Readiness: the database is reachable.
    #[oai(path = "/readyz", method = "get")]
    async fn readyz(&self) -> ReadyResponse {
        if self.state.readiness.ready().await {
            ReadyResponse::Ready(PlainText("ready"))
        } else {
            ReadyResponse::NotReady(PlainText("not ready"))
        }
    }

    /// Prometheus metrics.
    #[oai(path = "/metrics", method = "get")]
    async fn metrics(&self) -> MetricsResponse {
        MetricsResponse::Ok(PlainText(metrics::render()))
    }
}
