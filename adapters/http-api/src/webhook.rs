//! The provider webhook, `POST /api/payment/webhook/{provider}`: the raw body and the headers
//! (names lower-cased) go to `Service::handle_webhook`, and its acknowledgement goes back
//! exactly as the provider expects it (status, content type, body).

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::{AckVerdict, WebhookAck, WebhookRequest};
use application::use_cases::handle_webhook::HandleWebhookError;
use domain::ProviderId;
use poem::http::StatusCode;
use poem::{FromRequest, IntoResponse, Request, RequestBody, Response};
use poem_openapi::payload::{Binary, Payload};
use poem_openapi::registry::{MetaMediaType, MetaRequest, MetaSchema, MetaSchemaRef};
use poem_openapi::{ApiExtractor, ApiExtractorType, ApiResponse, ExtractParamOptions, OpenApi};

use crate::AppState;
use crate::problem::{Code, Problem, ProblemBody};

/// The webhook route's path before the provider id. The route attribute below must spell it as
/// a literal (`poem-openapi` takes no constant there); a test checks the two agree.
pub const WEBHOOK_PATH_PREFIX: &str = "/api/payment/webhook/";

/// Where providers post their webhooks under `base_url`, as the prefix a provider id
/// completes: what the wiring hands the service as its webhook callback address.
#[must_use]
pub fn webhook_url_prefix(base_url: &str) -> String {
    format!("{base_url}{WEBHOOK_PATH_PREFIX}")
}

/// The most headers passed on, and the longest value kept (a limit on work and memory).
const MAX_HEADERS: usize = 100;
const MAX_HEADER_VALUE_BYTES: usize = 8 * 1024;

/// The acknowledgement body, in the content type the provider expects.
pub struct AckBody {
    content_type: &'static str,
    body: String,
}

impl Payload for AckBody {
    // The acknowledgement's content type is the provider's: plain text (Alipay's `success`),
    // JSON (WeChat Pay's failure body, Stripe-style `{"received":true}`), or empty.
    const CONTENT_TYPE: &'static str = "*/*";

    fn check_content_type(_content_type: &str) -> bool {
        true
    }

    fn schema_ref() -> MetaSchemaRef {
        // Any body: plain text, a provider's JSON, or nothing.
        MetaSchemaRef::Inline(Box::new(MetaSchema::ANY))
    }
}

impl IntoResponse for AckBody {
    fn into_response(self) -> Response {
        Response::builder()
            .content_type(self.content_type)
            .body(self.body)
    }
}

/// The raw webhook body, in whatever content type the provider sends, or none (a `Binary`
/// payload would refuse a request without `Content-Type` before verification).
pub struct RawBody(Vec<u8>);

impl<'a> ApiExtractor<'a> for RawBody {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];

    type ParamType = ();
    type ParamRawType = ();

    fn request_meta() -> Option<MetaRequest> {
        Some(MetaRequest {
            description: Some("The raw body, exactly as the provider signed it."),
            content: vec![MetaMediaType {
                content_type: "*/*",
                schema: <Binary<Vec<u8>> as Payload>::schema_ref(),
            }],
            required: true,
        })
    }

    async fn from_request(
        request: &'a Request,
        body: &mut RequestBody,
        _options: ExtractParamOptions<()>,
    ) -> poem::Result<Self> {
        Ok(Self(
            <Vec<u8> as FromRequest>::from_request(request, body).await?,
        ))
    }
}

/// `POST /api/payment/webhook/{provider}`.
#[derive(ApiResponse)]
pub enum WebhookResponse {
    /// Accepted: the provider's expected acknowledgement (its status, content type and body;
    /// plain text, JSON or XML by provider).
    #[oai(status_range = "2XX")]
    Accepted(StatusCode, AckBody),
    /// Refused (signature missing or wrong, stale, unreadable): the provider's expected
    /// refusal; nothing changed.
    #[oai(status_range = "4XX")]
    Refused(StatusCode, AckBody),
    /// `unknown_provider`: not a provider id, or the provider is not configured.
    #[oai(status = 404, content_type = "application/problem+json")]
    UnknownProvider(poem_openapi::payload::Json<ProblemBody>),
    /// `payload_too_large`: webhook bodies are limited to 256 KiB.
    #[oai(status = 413, content_type = "application/problem+json")]
    PayloadTooLarge(poem_openapi::payload::Json<ProblemBody>),
    /// `internal_error`: an unexpected failure; the provider retries.
    #[oai(status = 500, content_type = "application/problem+json")]
    InternalError(poem_openapi::payload::Json<ProblemBody>),
    /// `service_unavailable`: the database is down or busy, or the provider could not be asked
    /// what the event needs (a capture); nothing changed and the provider retries.
    #[oai(status = 503, content_type = "application/problem+json")]
    ServiceUnavailable(poem_openapi::payload::Json<ProblemBody>),
}

impl From<WebhookAck> for WebhookResponse {
    fn from(ack: WebhookAck) -> Self {
        let body = AckBody {
            content_type: ack.content_type,
            body: ack.body,
        };
        match ack.verdict {
            AckVerdict::Accepted => WebhookResponse::Accepted(StatusCode::OK, body),
            AckVerdict::Refused => WebhookResponse::Refused(StatusCode::BAD_REQUEST, body),
            AckVerdict::Unauthenticated => WebhookResponse::Refused(StatusCode::UNAUTHORIZED, body),
        }
    }
}

impl From<Problem> for WebhookResponse {
    fn from(problem: Problem) -> Self {
        match problem.status() {
            StatusCode::NOT_FOUND => WebhookResponse::UnknownProvider(problem.into_json()),
            StatusCode::PAYLOAD_TOO_LARGE => WebhookResponse::PayloadTooLarge(problem.into_json()),
            StatusCode::SERVICE_UNAVAILABLE => {
                WebhookResponse::ServiceUnavailable(problem.into_json())
            }
            _ => WebhookResponse::InternalError(problem.into_json()),
        }
    }
}

/// The webhook endpoint.
pub(crate) struct WebhookApi {
    state: Arc<AppState>,
}

impl WebhookApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the webhook endpoint.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Called by payment providers.
    Webhook,
}

#[OpenApi(tag = "Tag::Webhook")]
impl WebhookApi {
    /// A provider's payment notification. Verified exactly as the provider signs it; a
    /// delivery seen before changes nothing.
    #[oai(path = "/api/payment/webhook/:provider", method = "post")]
    async fn webhook(
        &self,
        /// The provider id (`wallet_qr`, `wallet_web`, `card_gateway`, `wallet_global`,
        /// `mor_a`, `mor_b`, `mor_c`).
        provider: poem_openapi::param::Path<String>,
        request: &Request,
        body: RawBody,
    ) -> WebhookResponse {
        // Parsed once, here; only known ids go to the log, so a scan of odd paths cannot fill
        // it with them.
        let known = provider.0.parse::<ProviderId>().ok();
        let label = known.map_or("unknown", ProviderId::as_str);
        let call = WebhookRequest {
            headers: lower_cased_headers(request),
            body: body.0,
        };
        match self.state.ports.payments.handle_webhook(known, call).await {
            Ok(handled) => handled.ack.into(),
            Err(HandleWebhookError::Rejected { reason, ack }) => {
                tracing::warn!(provider = label, %reason, "webhook refused");
                ack.into()
            }
            Err(HandleWebhookError::UnknownProvider) => Problem::with_status(
                Code::UnknownProvider,
                StatusCode::NOT_FOUND,
                "no such payment provider",
            )
            .into(),
            Err(HandleWebhookError::ProviderUnavailable(why)) => {
                tracing::warn!(provider = label, %why, "webhook deferred: the provider could not be reached");
                Problem::with_status(
                    Code::ServiceUnavailable,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the payment provider could not be reached; send the event again later",
                )
                .into()
            }
            Err(HandleWebhookError::Infra(infra)) => Problem::from(infra).into(),
        }
    }
}

/// Headers with lower-cased names; repeated headers are joined with `, `.
fn lower_cased_headers(request: &Request) -> BTreeMap<String, String> {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in request.headers().iter().take(MAX_HEADERS) {
        let Ok(value) = value.to_str() else { continue };
        if value.len() > MAX_HEADER_VALUE_BYTES {
            continue;
        }
        headers
            .entry(name.as_str().to_ascii_lowercase())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(value);
            })
            .or_insert_with(|| value.to_owned());
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::WEBHOOK_PATH_PREFIX;

    #[test]
    fn the_webhook_route_is_the_prefix_then_the_provider() {
        // `docs/openapi.json` is the document this API renders (a drift test keeps it so).
        let document = include_str!("../../../docs/openapi.json");
        assert!(document.contains(&format!("\"{WEBHOOK_PATH_PREFIX}{{provider}}\"")));
    }
}
