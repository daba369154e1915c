//! Hostile input for every provider's webhook verifier and parser (issue 7, reliability):
//! arbitrary bytes and headers never panic and are never accepted; a webhook signed exactly as
//! the provider signs it (by the sandbox's simulator) is accepted, and the same webhook tampered
//! with in any single place is refused, or, where the changed bytes are outside what the
//! provider signs, still means exactly what the original meant; a genuine webhook presented long
//! after it was signed is refused as stale by every provider whose protocol carries a signed
//! timestamp.
//!
//! The gateways are built as `tally serve` builds them on the sandbox (sandbox credentials), but
//! their API base is unroutable: a verifier that asks its provider (PayPal's
//! verify-webhook-signature, Dodo's refund lookup) gets a refused connection, and refusing the
//! webhook then is the correct answer. Case counts are bounded so that the file runs in seconds;
//! `PROPTEST_CASES` raises them.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::{Clock, PaymentGateway, VerifiedWebhook, WebhookError, WebhookRequest};
use application::testing::FixedClock;
use domain::{Currency, ProviderId};
use gateways::GatewayContext;
use gateways::shared::ProviderHttp;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sandbox::{Hub, SimEvent, SimKind, SimPayment, SimStatus, Simulator};

/// Nothing listens here: a refused connection at once.
const UNROUTABLE: &str = "http://127.0.0.1:9";
/// 2025-11-21T00:00:00Z: when the simulated provider signs, and when the gateway verifies.
const NOW_MS: i64 = 1_763_683_200_000;
/// A day later: beyond every provider's timestamp tolerance.
const A_DAY_MS: i64 = 86_400_000;
/// Cases per property and provider unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 96;
/// The longest arbitrary body generated.
const MAX_BODY_BYTES: usize = 4096;

/// One provider under test: its gateway, its simulator, and the header names it signs with.
struct Provider {
    id: ProviderId,
    gateway: Arc<dyn PaymentGateway>,
    simulator: Arc<dyn Simulator>,
}

macro_rules! gateway {
    ($module:ident, $gateway:ident, $settings:ident, $clock:expr) => {{
        let settings: gateways::$module::$settings =
            serde_json::from_value(sandbox::$module::gateway_settings(UNROUTABLE))
                .expect("the sandbox's settings table fits the gateway");
        let context = GatewayContext {
            http: ProviderHttp::new(&settings.http()).expect("http client"),
            clock: $clock,
            sandbox: true,
        };
        Arc::new(gateways::$module::$gateway::new(&settings, context).expect("sandbox settings"))
            as Arc<dyn PaymentGateway>
    }};
}

/// Every provider, with gateways whose clock reads `now_ms`.
fn providers(now_ms: i64) -> Vec<Provider> {
    let clock: Arc<dyn Clock> = Arc::new(FixedClock::at(now_ms));
    let provider = |id, gateway, simulator: Arc<dyn Simulator>| Provider {
        id,
        gateway,
        simulator,
    };
    vec![
        provider(
            ProviderId::WalletQr,
            gateway!(wallet_qr, WalletQrGateway, WalletQrSettings, clock.clone()),
            Arc::new(sandbox::wallet_qr::WalletQrSimulator),
        ),
        provider(
            ProviderId::WalletWeb,
            gateway!(
                wallet_web,
                WalletWebGateway,
                WalletWebSettings,
                clock.clone()
            ),
            Arc::new(sandbox::wallet_web::WalletWebSimulator),
        ),
        provider(
            ProviderId::CardGateway,
            gateway!(
                card_gateway,
                CardGatewayGateway,
                CardGatewaySettings,
                clock.clone()
            ),
            Arc::new(sandbox::card_gateway::CardGatewaySimulator),
        ),
        provider(
            ProviderId::WalletGlobal,
            gateway!(
                wallet_global,
                WalletGlobalGateway,
                WalletGlobalSettings,
                clock.clone()
            ),
            Arc::new(sandbox::wallet_global::WalletGlobalSimulator),
        ),
        provider(
            ProviderId::MorA,
            gateway!(mor_a, MorAGateway, MorASettings, clock.clone()),
            Arc::new(sandbox::mor_a::MorASimulator),
        ),
        provider(
            ProviderId::MorB,
            gateway!(mor_b, MorBGateway, MorBSettings, clock.clone()),
            Arc::new(sandbox::mor_b::MorBSimulator),
        ),
        provider(
            ProviderId::MorC,
            gateway!(mor_c, MorCGateway, MorCSettings, clock),
            Arc::new(sandbox::mor_c::MorCSimulator),
        ),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    Config {
        cases,
        // Failures print their minimal input; nothing is written into the source tree.
        failure_persistence: None,
        ..Config::default()
    }
}

/// A paid one-time payment of `amount_minor` for order `ord_fuzz_1`, as the simulator keeps it.
fn paid_payment(provider: ProviderId) -> SimPayment {
    let (amount_minor, currency) = match provider {
        ProviderId::WalletQr | ProviderId::WalletWeb => (6_800, Currency::Cny),
        ProviderId::MorC => (1_500, Currency::Jpy),
        ProviderId::CardGateway
        | ProviderId::WalletGlobal
        | ProviderId::MorA
        | ProviderId::MorB => (499, Currency::Usd),
    };
    SimPayment {
        id: format!("pay_fuzz_{}", provider.as_str()),
        provider,
        order_id: "ord_fuzz_1".to_owned(),
        amount_minor,
        currency,
        kind: SimKind::OneTime,
        status: SimStatus::Paid,
        success_url: "http://127.0.0.1:9/payment-success?orderId=ord_fuzz_1".to_owned(),
        cancel_url: "http://127.0.0.1:9/payment-cancel?orderId=ord_fuzz_1".to_owned(),
        notify_url: format!(
            "http://127.0.0.1:9/api/payment/webhook/{}",
            provider.as_str()
        ),
        refunded_minor: 0,
        subscription_id: None,
        created_at_ms: NOW_MS - 60_000,
        extra: BTreeMap::new(),
    }
}

/// The success webhook `provider` sends for a paid payment, signed at `NOW_MS` by the sandbox.
fn genuine_webhook(provider: &Provider) -> WebhookRequest {
    let hub = Hub::new("http://127.0.0.1:9", Arc::new(FixedClock::at(NOW_MS)));
    let event = SimEvent::Paid(paid_payment(provider.id));
    let mut webhooks = provider.simulator.webhooks(&hub, &event);
    assert!(
        !webhooks.is_empty(),
        "{}: the simulator sends a webhook for a paid payment",
        provider.id
    );
    let webhook = webhooks.remove(0);
    let mut headers: BTreeMap<String, String> = webhook
        .headers
        .into_iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), value))
        .collect();
    headers.insert("content-type".to_owned(), webhook.content_type);
    WebhookRequest {
        headers,
        body: webhook.body,
    }
}

/// Whether the provider's verification asks the provider (and so fails on the unroutable base).
fn verifies_online(provider: ProviderId) -> bool {
    provider == ProviderId::WalletGlobal
}

fn verify(
    runtime: &tokio::runtime::Runtime,
    provider: &Provider,
    request: &WebhookRequest,
) -> Result<VerifiedWebhook, WebhookError> {
    runtime.block_on(provider.gateway.verify_webhook(request))
}

/// Header values an attacker would try: free text, numbers that look like timestamps, and
/// strings shaped like each provider's signature headers.
fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,120}",
        "[0-9]{1,13}",
        "t=[0-9]{10},v1=[0-9a-f]{64}",
        "v1,[A-Za-z0-9+/]{43}=",
        "[A-Za-z0-9+/]{0,344}={0,2}",
        "[0-9A-F]{40}",
        Just(String::new()),
    ]
}

/// Arbitrary bodies: raw bytes, and text shaped like each provider's payloads.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..MAX_BODY_BYTES),
        "\\{\"id\":\"[a-z_0-9]{0,20}\",\"type\":\"[a-z._]{0,40}\",\"data\":\\{.{0,200}\\}\\}"
            .prop_map(String::into_bytes),
        "([a-z_]{1,12}=[A-Za-z0-9%+._-]{0,24}&){0,12}sign=[A-Za-z0-9+/]{0,64}"
            .prop_map(String::into_bytes),
        Just(b"{}".to_vec()),
        Just(b"null".to_vec()),
    ]
}

/// Arbitrary headers, mostly under the provider's own header names.
fn headers(names: Vec<String>) -> impl Strategy<Value = BTreeMap<String, String>> {
    let name = prop_oneof![
        3 => proptest::sample::select(names),
        1 => "[a-z-]{1,24}",
    ];
    proptest::collection::btree_map(name, header_value(), 0..8)
}

#[test]
fn arbitrary_bytes_and_headers_never_panic_and_are_never_accepted_by_any_provider() {
    let runtime = runtime();
    for provider in providers(NOW_MS) {
        let mut names: Vec<String> = genuine_webhook(&provider).headers.into_keys().collect();
        names.push("content-type".to_owned());
        let mut runner = TestRunner::new(config());
        let result = runner.run(&(body(), headers(names)), |(body, headers)| {
            let request = WebhookRequest { headers, body };
            let outcome = verify(&runtime, &provider, &request);
            prop_assert!(
                outcome.is_err(),
                "{}: arbitrary input was accepted: {outcome:?}",
                provider.id
            );
            Ok(())
        });
        if let Err(failure) = result {
            panic!("{}: {failure}", provider.id);
        }
    }
}

#[test]
fn every_provider_accepts_its_genuine_signed_success_webhook() {
    let runtime = runtime();
    for provider in providers(NOW_MS) {
        let outcome = verify(&runtime, &provider, &genuine_webhook(&provider));
        if verifies_online(provider.id) {
            // PayPal verifies by asking PayPal, which is unreachable here.
            assert!(outcome.is_err(), "{}: {outcome:?}", provider.id);
            continue;
        }
        let verified = outcome.unwrap_or_else(|e| panic!("{}: {e}", provider.id));
        assert!(
            !verified.events.is_empty(),
            "{}: a success webhook means something: {verified:?}",
            provider.id
        );
    }
}

/// One change an attacker makes to a genuine request.
#[derive(Debug, Clone)]
enum Tamper {
    /// XOR one body byte (index taken modulo the length) with a non-zero mask.
    FlipBodyByte(usize, u8),
    /// Insert a byte into the body.
    InsertBodyByte(usize, u8),
    /// Remove one body byte.
    RemoveBodyByte(usize),
    /// Keep only a prefix of the body.
    TruncateBody(usize),
    /// Append bytes to the body.
    AppendToBody(Vec<u8>),
    /// XOR one byte of one header value (header and index modulo their counts).
    FlipHeaderByte(usize, usize, u8),
    /// Remove one header.
    DropHeader(usize),
}

fn tamper() -> impl Strategy<Value = Tamper> {
    prop_oneof![
        4 => (any::<usize>(), 1..=u8::MAX).prop_map(|(i, m)| Tamper::FlipBodyByte(i, m)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Tamper::InsertBodyByte(i, b)),
        1 => any::<usize>().prop_map(Tamper::RemoveBodyByte),
        1 => any::<usize>().prop_map(Tamper::TruncateBody),
        1 => proptest::collection::vec(any::<u8>(), 1..16).prop_map(Tamper::AppendToBody),
        3 => (any::<usize>(), any::<usize>(), 1..=u8::MAX)
            .prop_map(|(h, i, m)| Tamper::FlipHeaderByte(h, i, m)),
        1 => any::<usize>().prop_map(Tamper::DropHeader),
    ]
}

/// `request` with `tamper` applied; `None` when the change is impossible (an empty body).
fn tampered(request: &WebhookRequest, tamper: &Tamper) -> Option<WebhookRequest> {
    let mut out = request.clone();
    let len = out.body.len();
    match tamper {
        Tamper::FlipBodyByte(i, mask) => *out.body.get_mut(i.checked_rem(len)?)? ^= mask,
        Tamper::InsertBodyByte(i, byte) => out.body.insert(i % (len + 1), *byte),
        Tamper::RemoveBodyByte(i) => {
            out.body.remove(i.checked_rem(len)?);
        }
        Tamper::TruncateBody(i) => out.body.truncate(i.checked_rem(len)?),
        Tamper::AppendToBody(bytes) => out.body.extend_from_slice(bytes),
        Tamper::FlipHeaderByte(h, i, mask) => {
            let name = out
                .headers
                .keys()
                .nth(h.checked_rem(out.headers.len())?)?
                .clone();
            let mut value = out.headers.get(&name)?.clone().into_bytes();
            let index = i.checked_rem(value.len())?;
            *value.get_mut(index)? ^= mask;
            // Header values are text on the wire; a change that is not text cannot be sent.
            out.headers.insert(name, String::from_utf8(value).ok()?);
        }
        Tamper::DropHeader(h) => {
            let name = out
                .headers
                .keys()
                .nth(h.checked_rem(out.headers.len())?)?
                .clone();
            out.headers.remove(&name);
        }
    }
    Some(out)
}

#[test]
fn a_genuine_webhook_tampered_with_anywhere_is_refused_or_means_exactly_the_same() {
    let runtime = runtime();
    for provider in providers(NOW_MS) {
        let genuine = genuine_webhook(&provider);
        let original = verify(&runtime, &provider, &genuine).ok();
        let mut runner = TestRunner::new(config());
        let result = runner.run(&tamper(), |tamper| {
            let Some(request) = tampered(&genuine, &tamper) else {
                return Ok(());
            };
            let outcome = verify(&runtime, &provider, &request);
            if let Ok(verified) = &outcome {
                prop_assert_eq!(
                    Some(verified),
                    original.as_ref(),
                    "{}: {:?} was accepted with another meaning",
                    provider.id,
                    tamper
                );
            }
            Ok(())
        });
        if let Err(failure) = result {
            panic!("{}: {failure}", provider.id);
        }
    }
}

#[test]
fn a_genuine_webhook_a_day_old_is_refused_by_every_provider_that_signs_a_timestamp() {
    let runtime = runtime();
    // Creem's `creem-signature` (mor_a) signs the body only (its Standard Webhooks headers, when
    // sent, sign a time), and Alipay (wallet_web) has no signed delivery time: for those a replay
    // is caught by the event id, which the service deduplicates.
    let timestamped = [
        ProviderId::WalletQr,
        ProviderId::CardGateway,
        ProviderId::WalletGlobal,
        ProviderId::MorB,
        ProviderId::MorC,
    ];
    for (late, on_time) in providers(NOW_MS + A_DAY_MS)
        .into_iter()
        .zip(providers(NOW_MS))
    {
        let genuine = genuine_webhook(&on_time);
        let outcome = verify(&runtime, &late, &genuine);
        if timestamped.contains(&late.id) {
            assert!(
                matches!(outcome, Err(WebhookError::Stale))
                    || (verifies_online(late.id) && outcome.is_err()),
                "{}: a day-old webhook: {outcome:?}",
                late.id
            );
        }
    }
}
