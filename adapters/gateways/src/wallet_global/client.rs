//! PayPal's REST API over [`ProviderHttp`]: the OAuth 2.0 client-credentials token, cached
//! until shortly before it expires, and one method per endpoint Tally calls. Every call has the
//! client's explicit timeouts and bounded bodies; nothing here logs a header, token or body.

use std::sync::{Arc, Mutex, PoisonError};

use application::ports::{Clock, GatewayError};
use domain::Timestamp;
use reqwest::RequestBuilder;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::revise::{PlanDetails, ReviseAnswer, ReviseSubscription};
use super::transformers::{
    CANCEL_REASON, CancelSubscription, Capture, CaptureRefund, Order, RefundCapture, Sale,
    SaleRefund, Subscription, TokenResponse, VerificationResponse, checked, parse, path_segment,
};

/// A PayPal resource id as a URL path segment (`transformers::path_segment`: ids come from
/// verified webhooks, and are still never allowed to change the path).
fn path_id(id: &str) -> Result<&str, GatewayError> {
    path_segment(id).ok_or_else(|| GatewayError::Rejected("not a PayPal resource id".into()))
}
use crate::shared::http::{HttpReply, ProviderHttp};
use crate::shared::wire::printable;

/// OAuth's error object: `{"error": "invalid_client", "error_description": "…"}`.
#[derive(Deserialize)]
struct OAuthError {
    error: String,
    #[serde(default)]
    error_description: String,
}

impl OAuthError {
    /// `: {error}: {description}` from a refusal's body, or nothing when it is not one.
    fn describe(body: &[u8]) -> String {
        serde_json::from_slice::<Self>(body).map_or_else(
            |_| String::new(),
            |e| {
                format!(
                    ": {}: {}",
                    printable(&e.error, 64),
                    printable(&e.error_description, 200)
                )
            },
        )
    }
}

/// Refresh a token this long before PayPal says it expires.
const TOKEN_MARGIN_MS: i64 = 60_000;
/// Never trust a token for longer than this, whatever `expires_in` says.
const MAX_TOKEN_LIFETIME_S: u64 = 24 * 3600;

/// The PayPal REST API with a cached access token.
pub(super) struct Api {
    http: ProviderHttp,
    clock: Arc<dyn Clock>,
    client_id: String,
    client_secret: SecretString,
    token: Mutex<Option<CachedToken>>,
}

struct CachedToken {
    value: SecretString,
    refresh_at: Timestamp,
}

impl Api {
    pub(super) fn new(
        http: ProviderHttp,
        clock: Arc<dyn Clock>,
        client_id: String,
        client_secret: SecretString,
    ) -> Self {
        Self {
            http,
            clock,
            client_id,
            client_secret,
            token: Mutex::new(None),
        }
    }

    /// `POST /v2/checkout/orders`, idempotent per `request_id`.
    pub(super) async fn create_order(
        &self,
        body: &impl Serialize,
        request_id: &str,
    ) -> Result<Order, GatewayError> {
        let url = self.http.url("/v2/checkout/orders");
        let reply = self
            .send(|r| {
                r.post(&url)
                    .json(body)
                    .header("PayPal-Request-Id", request_id)
            })
            .await?;
        parse(&checked(reply)?, "order")
    }

    /// `POST /v2/checkout/orders` of a vaulted account's charge, idempotent per `request_id`;
    /// the raw answer, because its refusals are declines.
    pub(super) async fn charge_vault(
        &self,
        body: &impl Serialize,
        request_id: &str,
    ) -> Result<HttpReply, GatewayError> {
        let url = self.http.url("/v2/checkout/orders");
        self.send(|r| {
            r.post(&url)
                .json(body)
                .header("PayPal-Request-Id", request_id)
        })
        .await
    }

    /// `GET /v2/checkout/orders/{id}`.
    pub(super) async fn get_order(&self, id: &str) -> Result<Order, GatewayError> {
        let url = self.http.url(&format!("/v2/checkout/orders/{id}"));
        parse(&checked(self.send(|r| r.get(&url)).await?)?, "order")
    }

    /// `POST /v2/checkout/orders/{id}/capture`, idempotent per `request_id`; the raw answer,
    /// because some refusals mean success.
    pub(super) async fn capture_order(
        &self,
        id: &str,
        request_id: &str,
    ) -> Result<HttpReply, GatewayError> {
        let url = self.http.url(&format!("/v2/checkout/orders/{id}/capture"));
        self.send(|r| {
            r.post(&url)
                .header("PayPal-Request-Id", request_id)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body("{}")
        })
        .await
    }

    /// `GET /v2/payments/captures/{id}`.
    pub(super) async fn get_capture(&self, id: &str) -> Result<Capture, GatewayError> {
        let id = path_id(id)?;
        let url = self.http.url(&format!("/v2/payments/captures/{id}"));
        parse(&checked(self.send(|r| r.get(&url)).await?)?, "capture")
    }

    /// `POST /v2/payments/captures/{id}/refund`, idempotent per `request_id` (our refund id).
    pub(super) async fn refund_capture(
        &self,
        id: &str,
        body: &RefundCapture,
        request_id: &str,
    ) -> Result<CaptureRefund, GatewayError> {
        let id = path_id(id)?;
        let url = self.http.url(&format!("/v2/payments/captures/{id}/refund"));
        let reply = self
            .send(|r| {
                r.post(&url)
                    .json(body)
                    .header("PayPal-Request-Id", request_id)
            })
            .await?;
        parse(&checked(reply)?, "refund answer")
    }

    /// `GET /v1/payments/sale/{id}`: a subscription's sale (v1 payments, which PayPal keeps for
    /// the sales of subscriptions).
    pub(super) async fn get_sale(&self, id: &str) -> Result<Sale, GatewayError> {
        let id = path_id(id)?;
        let url = self.http.url(&format!("/v1/payments/sale/{id}"));
        parse(&checked(self.send(|r| r.get(&url)).await?)?, "sale")
    }

    /// `GET /v1/payments/refund/{id}`: a refund (or reversal) of a sale.
    pub(super) async fn get_sale_refund(&self, id: &str) -> Result<SaleRefund, GatewayError> {
        let id = path_id(id)?;
        let url = self.http.url(&format!("/v1/payments/refund/{id}"));
        parse(&checked(self.send(|r| r.get(&url)).await?)?, "sale refund")
    }

    /// `POST /v1/billing/subscriptions`, idempotent per `request_id`.
    pub(super) async fn create_subscription(
        &self,
        body: &impl Serialize,
        request_id: &str,
    ) -> Result<Subscription, GatewayError> {
        let url = self.http.url("/v1/billing/subscriptions");
        let reply = self
            .send(|r| {
                r.post(&url)
                    .json(body)
                    .header("PayPal-Request-Id", request_id)
            })
            .await?;
        parse(&checked(reply)?, "subscription")
    }

    /// `GET /v1/billing/subscriptions/{id}`.
    pub(super) async fn get_subscription(&self, id: &str) -> Result<Subscription, GatewayError> {
        let url = self.http.url(&format!("/v1/billing/subscriptions/{id}"));
        parse(&checked(self.send(|r| r.get(&url)).await?)?, "subscription")
    }

    /// `GET /v1/billing/subscriptions/{id}?fields=plan`: the subscription with its plan's
    /// details (overrides applied).
    pub(super) async fn get_subscription_with_plan(
        &self,
        id: &str,
    ) -> Result<Subscription, GatewayError> {
        let id = path_id(id)?;
        let url = self
            .http
            .url(&format!("/v1/billing/subscriptions/{id}?fields=plan"));
        parse(&checked(self.send(|r| r.get(&url)).await?)?, "subscription")
    }

    /// `GET /v1/billing/plans/{id}`.
    pub(super) async fn get_plan(&self, id: &str) -> Result<PlanDetails, GatewayError> {
        let id = path_id(id)?;
        let url = self.http.url(&format!("/v1/billing/plans/{id}"));
        parse(&checked(self.send(|r| r.get(&url)).await?)?, "plan")
    }

    /// `POST /v1/billing/subscriptions/{id}/revise`, idempotent per `request_id`.
    pub(super) async fn revise_subscription(
        &self,
        id: &str,
        body: &ReviseSubscription<'_>,
        request_id: &str,
    ) -> Result<ReviseAnswer, GatewayError> {
        let id = path_id(id)?;
        let url = self
            .http
            .url(&format!("/v1/billing/subscriptions/{id}/revise"));
        let reply = self
            .send(|r| {
                r.post(&url)
                    .json(body)
                    .header("PayPal-Request-Id", request_id)
            })
            .await?;
        parse(&checked(reply)?, "revise answer")
    }

    /// `POST /v1/billing/subscriptions/{id}/cancel`; the raw answer (204 on success).
    pub(super) async fn cancel_subscription(&self, id: &str) -> Result<HttpReply, GatewayError> {
        let url = self
            .http
            .url(&format!("/v1/billing/subscriptions/{id}/cancel"));
        self.send(|r| {
            r.post(&url).json(&CancelSubscription {
                reason: CANCEL_REASON,
            })
        })
        .await
    }

    /// `DELETE /v3/vault/payment-tokens/{id}` (Payment Method Tokens API v3); the raw answer
    /// (204 on success).
    pub(super) async fn delete_payment_token(&self, id: &str) -> Result<HttpReply, GatewayError> {
        let url = self
            .http
            .url(&format!("/v3/vault/payment-tokens/{}", path_id(id)?));
        self.send(|r| r.delete(&url)).await
    }

    /// `POST /v1/notifications/verify-webhook-signature` with a body built by the caller.
    pub(super) async fn verify_signature(
        &self,
        body: &str,
    ) -> Result<VerificationResponse, GatewayError> {
        let url = self.http.url("/v1/notifications/verify-webhook-signature");
        let reply = self
            .send(|r| {
                r.post(&url)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.to_owned())
            })
            .await?;
        parse(&checked(reply)?, "verification answer")
    }

    /// Send a bearer-authorized request built by `build`; on 401 the cached token is dropped
    /// and the request sent once more with a fresh one (a bounded retry).
    async fn send(
        &self,
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> Result<HttpReply, GatewayError> {
        let prepare = |token: &SecretString| {
            build(self.http.client())
                .bearer_auth(token.expose_secret())
                .header(reqwest::header::ACCEPT, "application/json")
                .header("Prefer", "return=representation")
        };
        let reply = self.http.send(prepare(&self.token().await?)).await?;
        if reply.status != 401 {
            return Ok(reply);
        }
        self.forget_token();
        self.http.send(prepare(&self.token().await?)).await
    }

    /// Ask for a new access token with the client credentials, whatever is cached: the read
    /// that proves PayPal accepts them (the token is kept for the calls that follow).
    pub(super) async fn check_credentials(&self) -> Result<(), GatewayError> {
        let fresh = self.fetch_token().await?;
        *self.lock() = Some(fresh);
        Ok(())
    }

    /// The cached token, or a new one.
    async fn token(&self) -> Result<SecretString, GatewayError> {
        let now = self.clock.now();
        if let Some(cached) = self.lock().as_ref().filter(|t| now < t.refresh_at) {
            return Ok(cached.value.clone());
        }
        let fresh = self.fetch_token().await?;
        let value = fresh.value.clone();
        *self.lock() = Some(fresh);
        Ok(value)
    }

    fn forget_token(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<CachedToken>> {
        self.token.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `POST /v1/oauth2/token` with HTTP Basic client credentials.
    async fn fetch_token(&self) -> Result<CachedToken, GatewayError> {
        let request = self
            .http
            .post("/v1/oauth2/token")
            .basic_auth(&self.client_id, Some(self.client_secret.expose_secret()))
            .header(reqwest::header::ACCEPT, "application/json")
            .form(&[("grant_type", "client_credentials")]);
        let reply = self.http.send(request).await?;
        let reply = match reply.status {
            // The body of a refusal is OAuth's error object (`invalid_client`, "Client
            // Authentication failed"), which names no credential.
            400..=499 => {
                return Err(GatewayError::Rejected(format!(
                    "access token refused: HTTP {}{}",
                    reply.status,
                    OAuthError::describe(&reply.body)
                )));
            }
            _ => checked(reply)?,
        };
        let token: TokenResponse = serde_json::from_slice(&reply.body)
            .map_err(|_| GatewayError::BadResponse("unreadable access token answer".into()))?;
        let lifetime_ms =
            i64::try_from(token.expires_in.min(MAX_TOKEN_LIFETIME_S)).unwrap_or(0) * 1000;
        // A token that lives less than twice the margin is used for half its life.
        let usable_ms = if lifetime_ms > 2 * TOKEN_MARGIN_MS {
            lifetime_ms - TOKEN_MARGIN_MS
        } else {
            lifetime_ms / 2
        };
        Ok(CachedToken {
            value: token.access_token,
            refresh_at: self.clock.now().plus_millis(usable_ms),
        })
    }
}
