//! `POST /api/payment/webhook/{provider}`.

use domain::{Currency, ProviderId};

use crate::helpers::{Answer, bearer, paid, spawn_app};

#[tokio::test]
async fn a_paid_credits_order_grants_credits_once_even_when_delivered_twice() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let order = app
        .initiate(&token, "credits-100", "card_gateway", None)
        .await;
    let order_id = order.body["orderId"].as_str().unwrap().to_owned();
    for _ in 0..2 {
        let answer = app
            .deliver(
                ProviderId::CardGateway,
                "evt-1",
                vec![paid(&order_id, 999, Currency::Usd)],
            )
            .await;
        answer.expect(200, None);
        assert_eq!(answer.body, "ok");
        assert_eq!(answer.header("content-type"), Some("text/plain"));
    }
    let balance = Answer::of(
        app.client
            .get("/api/credits/balance")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    balance.expect(200, None);
    assert_eq!(balance.body["balance"], "100.00");
    assert_eq!(balance.body["balanceHundredths"], 10_000);
}

#[tokio::test]
async fn the_webhook_passes_lower_cased_headers_and_answers_a_refusal_with_the_providers_ack() {
    let app = spawn_app();
    // Header names are matched lower-cased: a wrong signature under a mixed-case name is read.
    let answer = Answer::of(
        app.client
            .post("/api/payment/webhook/card_gateway")
            .header("X-Fake-Signature", "forged")
            .content_type("application/json")
            .body("{}")
            .send()
            .await,
    )
    .await;
    answer.expect(400, None);
    assert_eq!(answer.body, "signature does not verify");
    assert_eq!(answer.header("content-type"), Some("text/plain"));
    // Any content type, or none, reaches verification.
    let unsigned = Answer::of(
        app.client
            .post("/api/payment/webhook/mor_b")
            .body("a=b")
            .send()
            .await,
    )
    .await;
    unsigned.expect(400, None);
    assert_eq!(unsigned.body, "signature missing or malformed");
}

#[tokio::test]
async fn an_unknown_provider_is_a_404_problem() {
    let app = spawn_app();
    Answer::of(
        app.client
            .post("/api/payment/webhook/stripe")
            .content_type("application/json")
            .body("{}")
            .send()
            .await,
    )
    .await
    .expect(404, Some("unknown_provider"));
}

#[tokio::test]
async fn a_webhook_body_over_256_kib_is_refused_with_413() {
    let app = spawn_app();
    Answer::of(
        app.client
            .post("/api/payment/webhook/card_gateway")
            .content_type("application/json")
            .body(vec![b'x'; 256 * 1024 + 1])
            .send()
            .await,
    )
    .await
    .expect(413, Some("payload_too_large"));
    // Bodies between the JSON limit and the webhook limit are accepted here.
    Answer::of(
        app.client
            .post("/api/payment/webhook/card_gateway")
            .header("x-fake-signature", "unknown")
            .content_type("application/json")
            .body(vec![b' '; 100 * 1024])
            .send()
            .await,
    )
    .await
    .expect(400, None);
}
