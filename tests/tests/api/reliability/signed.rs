//! Webhooks exactly as each provider signs them, built in the test with the sandbox's own
//! simulators: the payment the app's sandbox keeps for an order, turned into a provider event,
//! signed with the sandbox credentials at a chosen time, and posted like the provider posts it.
//! Forging (a signature the provider never made) and tampering (a different amount, correctly
//! signed) start from the same genuine webhook.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use application::ports::Clock;
use bootstrap::seams::SystemClock;
use domain::{Currency, ProviderId, Timestamp};
use sandbox::{
    Hub, SimCharge, SimEvent, SimKind, SimPayment, SimStatus, SimSubscription,
    SimSubscriptionStatus, SimWebhook, Simulator,
};
use serde_json::Value;

use super::api::{Api, Reply};

/// For each provider, a plan it sells: credits where it has a credits pack, else one-time.
pub const PLANS: [(&str, &str); 7] = [
    ("wallet_qr", "credits_cn_qr_1000"),
    ("wallet_web", "credits_cn_web_5500"),
    ("card_gateway", "credits_card_500"),
    ("wallet_global", "credits_wallet_global_2000"),
    ("mor_a", "lifetime_mor_a"),
    ("mor_b", "credits_mor_b_10000"),
    ("mor_c", "credits_mor_c_jpy"),
];

/// The headers (or, for Alipay, the body field) that carry each provider's signature.
const SIGNATURE_HEADERS: [&str; 6] = [
    "wechatpay-signature",
    "stripe-signature",
    "paypal-transmission-sig",
    "creem-signature",
    "webhook-signature",
    "x-waffo-signature",
];

/// The system clock moved by `offset_ms` (negative: the past).
struct ShiftedClock(i64);

impl Clock for ShiftedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_millis(SystemClock.now().unix_millis() + self.0)
    }
}

/// The sandbox's simulator of `provider`.
pub fn simulator(provider: ProviderId) -> Arc<dyn Simulator> {
    match provider {
        ProviderId::WalletQr => Arc::new(sandbox::wallet_qr::WalletQrSimulator),
        ProviderId::WalletWeb => Arc::new(sandbox::wallet_web::WalletWebSimulator),
        ProviderId::CardGateway => Arc::new(sandbox::card_gateway::CardGatewaySimulator),
        ProviderId::WalletGlobal => Arc::new(sandbox::wallet_global::WalletGlobalSimulator),
        ProviderId::MorA => Arc::new(sandbox::mor_a::MorASimulator),
        ProviderId::MorB => Arc::new(sandbox::mor_b::MorBSimulator),
        ProviderId::MorC => Arc::new(sandbox::mor_c::MorCSimulator),
    }
}

/// A payment as `/sandbox/api/payments` shows it, back into the simulator's type.
pub fn sim_payment(json: &Value) -> SimPayment {
    let text = |key: &str| json[key].as_str().unwrap_or_default().to_owned();
    let kind = match json["kind"]["type"].as_str() {
        Some("subscription") => SimKind::Subscription {
            interval_months: json["kind"]["intervalMonths"]
                .as_u64()
                .or(json["kind"]["interval_months"].as_u64())
                .and_then(|m| u32::try_from(m).ok())
                .unwrap_or(1),
            plan_ref: json["kind"]["planRef"].as_str().map(str::to_owned),
        },
        _ => SimKind::OneTime,
    };
    let extra: BTreeMap<String, String> = json["extra"]
        .as_object()
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    SimPayment {
        id: text("id"),
        provider: ProviderId::from_str(&text("provider")).expect("provider"),
        order_id: text("orderId"),
        amount_minor: json["amountMinor"].as_i64().expect("amountMinor"),
        currency: Currency::from_str(&text("currency")).expect("currency"),
        kind,
        status: SimStatus::Paid,
        success_url: text("successUrl"),
        cancel_url: text("cancelUrl"),
        notify_url: text("notifyUrl"),
        refunded_minor: json["refundedMinor"].as_i64().unwrap_or(0),
        subscription_id: json["subscriptionId"].as_str().map(str::to_owned),
        created_at_ms: json["createdAtMs"].as_i64().unwrap_or(0),
        extra,
    }
}

/// A subscription as the sandbox's subscription actions answer it, back into the simulator's type.
pub fn sim_subscription(json: &Value) -> SimSubscription {
    let text = |key: &str| json[key].as_str().unwrap_or_default().to_owned();
    let int = |key: &str| json[key].as_i64().unwrap_or_default();
    let charges = json["charges"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|c| SimCharge {
                    id: c["id"].as_str().unwrap_or_default().to_owned(),
                    period_start_ms: c["periodStartMs"].as_i64().unwrap_or_default(),
                    period_end_ms: c["periodEndMs"].as_i64().unwrap_or_default(),
                    amount_minor: c["amountMinor"].as_i64().unwrap_or_default(),
                    refunded_minor: c["refundedMinor"].as_i64().unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    SimSubscription {
        id: text("id"),
        provider: ProviderId::from_str(&text("provider")).expect("provider"),
        payment_id: text("paymentId"),
        order_id: text("orderId"),
        period_start_ms: int("periodStartMs"),
        period_end_ms: int("periodEndMs"),
        anchor_ms: int("anchorMs"),
        interval_months: u32::try_from(int("intervalMonths")).unwrap_or(1),
        status: SimSubscriptionStatus::Active,
        amount_minor: int("amountMinor"),
        currency: Currency::from_str(&text("currency")).expect("currency"),
        notify_url: text("notifyUrl"),
        renewals: u32::try_from(int("renewals")).unwrap_or(0),
        charges,
    }
}

/// The webhooks the provider sends for `event`, signed `offset_ms` from now, as the sandbox at
/// `base` would sign them.
pub fn sign(base: &str, offset_ms: i64, event: &SimEvent) -> Vec<SimWebhook> {
    let provider = match event {
        SimEvent::Paid(p) | SimEvent::Declined(p) | SimEvent::Approved(p) => p.provider,
        SimEvent::Renewed(s, _) | SimEvent::SubscriptionStarted(_, s) => s.provider,
        other => panic!("not a payment or subscription event: {other:?}"),
    };
    let hub = Hub::new(base, Arc::new(ShiftedClock(offset_ms)));
    simulator(provider).webhooks(&hub, event)
}

/// A Stripe event signed again, as the sandbox at `base` signs, after a test changed it.
pub fn resign_stripe(base: &str, event: &Value) -> SimWebhook {
    let hub = Hub::new(base, Arc::new(ShiftedClock(0)));
    sandbox::card_gateway::sign_event(&hub, event)
}

/// The provider's success webhook for our order's sandbox payment, with `amount_minor`.
pub async fn paid_webhook(
    api: &Api,
    order_id: &str,
    change: impl FnOnce(&mut SimPayment),
) -> SimWebhook {
    let mut payment = sim_payment(&api.sandbox_payment(order_id).await);
    change(&mut payment);
    let mut webhooks = sign(&api.base, 0, &SimEvent::Paid(payment));
    assert!(!webhooks.is_empty(), "a success webhook for {order_id}");
    webhooks.remove(0)
}

/// Post `webhook` to our endpoint for `provider`, as the provider does.
pub async fn deliver(api: &Api, provider: &str, webhook: &SimWebhook) -> Reply {
    let mut request = api
        .client
        .post(api.url(&format!("/api/payment/webhook/{provider}")))
        .header("content-type", webhook.content_type.clone())
        .body(webhook.body.clone());
    for (name, value) in &webhook.headers {
        request = request.header(name, value);
    }
    api.send(request).await
}

/// The same webhook with a signature the provider never made: one character in the middle of
/// the signature changed (in the provider's signature header, or in Alipay's `sign` field).
pub fn forge(webhook: &SimWebhook) -> SimWebhook {
    let mut forged = webhook.clone();
    let header = forged
        .headers
        .iter_mut()
        .find(|(name, _)| SIGNATURE_HEADERS.contains(&name.to_ascii_lowercase().as_str()));
    if let Some((_, value)) = header {
        *value = change_middle_char(value);
        return forged;
    }
    let body = String::from_utf8(forged.body.clone()).expect("a form body");
    assert!(
        body.contains("sign="),
        "no signature found to forge: {body}"
    );
    let fields: Vec<String> = body
        .split('&')
        .map(|field| match field.strip_prefix("sign=") {
            Some(signature) => format!("sign={}", change_middle_char(signature)),
            None => field.to_owned(),
        })
        .collect();
    forged.body = fields.join("&").into_bytes();
    forged
}

/// The same webhook without any signature: no headers, and no `sign` field in a form body.
pub fn unsign(webhook: &SimWebhook) -> SimWebhook {
    let mut unsigned = webhook.clone();
    unsigned.headers.clear();
    if let Ok(body) = String::from_utf8(webhook.body.clone())
        && body.contains("sign=")
    {
        let fields: Vec<&str> = body
            .split('&')
            .filter(|field| !field.starts_with("sign=") && !field.starts_with("sign_type="))
            .collect();
        unsigned.body = fields.join("&").into_bytes();
    }
    unsigned
}

/// `value` with its first letter or digit from the middle on replaced by another of the same
/// kind and case, so that hex stays hex and base64 stays base64 but the bytes differ.
fn change_middle_char(value: &str) -> String {
    let mut chars: Vec<char> = value.chars().collect();
    let position = (chars.len() / 2..chars.len())
        .find(|&i| chars[i].is_ascii_alphanumeric())
        .expect("a signature character");
    chars[position] = match chars[position] {
        '0' => '1',
        c if c.is_ascii_digit() => '0',
        'a' => 'b',
        c if c.is_ascii_lowercase() => 'a',
        'A' => 'B',
        _ => 'A',
    };
    chars.into_iter().collect()
}
