//! What the use cases count through the `Metrics` port, whoever started them: the reconciler's
//! payments and expiries, cancellations, webhooks of every ending, spends once per request, and
//! every posting the database's guard did not write as the ledger's rules decided.

use std::sync::{Arc, Mutex};

use domain::{
    Credits, DecidedPosting, EventOutcome, IdempotencyKey, OrderId, OrderStatus, ProviderId,
    Timestamp, TransactionKind,
};

use super::harness::*;
use crate::accounts::User;
use crate::ports::Writes;
use crate::ports::{
    GrantCommand, GrantSource, Metrics, PaymentStatus, ReservationError, SpendError, StoreError,
    WebhookRequest, WebhookResult,
};
use crate::use_cases::credits::{ConsumeCredits, UsageRequest};
use crate::use_cases::initiate_payment::InitiatePayment;
use crate::use_cases::noted;
use crate::use_cases::reconcile::ReconcileSettings;

/// Every call, in order, as text.
#[derive(Default)]
struct Recording(Mutex<Vec<String>>);

impl Recording {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl Metrics for Recording {
    fn order_moved(&self, status: &OrderStatus) {
        self.push(format!("order {}", status.code()));
    }
    fn webhook(&self, provider: Option<ProviderId>, result: WebhookResult) {
        let provider = provider.map_or("unknown", ProviderId::as_str);
        self.push(format!("webhook {provider} {}", result.code()));
    }
    fn webhook_replayed(&self, provider: ProviderId, result: WebhookResult) {
        self.push(format!("replay {} {}", provider.as_str(), result.code()));
    }
    fn credits_consumed(&self, amount: Credits) {
        self.push(format!("consumed {}", amount.hundredths()));
    }
    fn credits_reserved(&self, amount: Credits) {
        self.push(format!("reserved {}", amount.hundredths()));
    }
    fn credits_granted(&self, amount: Credits) {
        self.push(format!("granted {}", amount.hundredths()));
    }
    fn credits_clawed_back(&self, amount: Credits) {
        self.push(format!("clawed back {}", amount.hundredths()));
    }
    fn spend_disagreement(&self, kind: TransactionKind) {
        self.push(format!("disagreement {kind}"));
    }
}

fn counted() -> (Harness, Arc<Recording>) {
    let mut h = Harness::new();
    let recording = Arc::new(Recording::default());
    h.service = h.service.with_metrics(recording.clone());
    (h, recording)
}

async fn order(h: &Harness, user: &User, plan: &str) -> OrderId {
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new(plan).unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    let started = h.service.initiate_payment(request).await.unwrap();
    started.order.order.id().clone()
}

#[tokio::test]
async fn the_reconcilers_payments_and_expiries_and_a_cancellation_are_counted() {
    let (h, recording) = counted();
    let user = h.user("a@example.com").await;
    let lost = order(&h, &user, "credits-100").await;
    let _abandoned = order(&h, &user, "lifetime").await;
    let cancelled = order(&h, &user, "lifetime").await;
    assert_eq!(recording.take(), ["order pending"; 3]);
    h.service.cancel_payment(&user, &cancelled).await.unwrap();
    assert_eq!(recording.take(), ["order cancelled"]);
    h.fake(ProviderId::CardGateway).set_status(
        &lost,
        PaymentStatus::Succeeded {
            amount: usd(1000),
            paid_at: Timestamp::from_unix_millis(START_MS + 1),
        },
    );
    let settings = ReconcileSettings {
        pending_after_ms: 60_000,
        batch: 10,
        lease_ms: 30_000,
    };
    h.service.clock().advance_ms(120_000);
    h.service.reconcile(settings).await.unwrap();
    assert_eq!(recording.take(), ["order paid", "granted 10000"]);
    h.service.clock().advance_ms(4_000_000);
    h.service.reconcile(settings).await.unwrap();
    assert_eq!(recording.take(), ["order expired"]);
}

#[tokio::test]
async fn every_webhook_ending_is_counted_under_its_provider() {
    let (h, recording) = counted();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    recording.take();
    h.deliver(ProviderId::CardGateway, "e1", vec![paid(&id, usd(1))])
        .await
        .unwrap();
    assert_eq!(recording.take(), ["webhook card_gateway mismatch"]);
    h.deliver(ProviderId::CardGateway, "e2", vec![paid(&id, usd(1000))])
        .await
        .unwrap();
    assert_eq!(
        recording.take(),
        [
            "order paid",
            "granted 10000",
            "webhook card_gateway applied"
        ]
    );
    h.deliver(ProviderId::CardGateway, "e2", vec![paid(&id, usd(1000))])
        .await
        .unwrap();
    assert_eq!(recording.take(), ["webhook card_gateway duplicate"]);
    let unsigned = WebhookRequest {
        headers: Default::default(),
        body: b"{}".to_vec(),
    };
    let refused = h
        .service
        .handle_webhook(Some(domain::ProviderId::CardGateway), unsigned.clone());
    assert!(refused.await.is_err());
    assert!(
        h.service
            .handle_webhook("nope".parse().ok(), unsigned)
            .await
            .is_err()
    );
    assert_eq!(
        recording.take(),
        [
            "webhook card_gateway rejected",
            "webhook unknown unknown_provider"
        ]
    );
    assert_eq!(
        WebhookResult::Event(EventOutcome::LatePayment).code(),
        "late_payment"
    );
}

#[tokio::test]
async fn a_spend_is_counted_once_however_often_it_is_sent() {
    let (h, recording) = counted();
    let user = h.user("a@example.com").await;
    let grant = GrantCommand {
        account_id: domain::AccountId::personal(&user.id),
        amount: Credits::from_whole(10).unwrap(),
        source: GrantSource::Admin("seed".into()),
        expires_at: None,
        now: Timestamp::from_unix_millis(START_MS),
    };
    h.service.store().grant(&grant).await.unwrap();
    let spend = || ConsumeCredits {
        user_id: user.id.clone(),
        account_id: None,
        usage: UsageRequest {
            feature: None,
            model: Some("big".into()),
            tokens: Some(1500),
            breakdown: None,
        },
        idempotency_key: IdempotencyKey::new("k1").unwrap(),
        api_key_id: None,
    };
    h.service.consume_credits(spend()).await.unwrap();
    h.service.consume_credits(spend()).await.unwrap();
    assert_eq!(recording.take(), ["consumed 300"]);
}

/// A disagreement between the spend rule and the database's guard, on `user`'s balance.
fn disagreement(kind: TransactionKind) -> StoreError {
    let c = |h| Credits::from_hundredths(h).unwrap();
    let decided = DecidedPosting::spend(kind, c(300), c(500), c(200));
    StoreError::SpendDisagreement {
        account: domain::AccountId::new("u1").unwrap(),
        disagreement: decided.check(None).unwrap_err(),
    }
}

#[test]
fn a_disagreement_is_counted_by_kind_and_passed_on_and_nothing_else_is() {
    let recording = Recording::default();
    let spent: Result<(), SpendError> = Err(disagreement(TransactionKind::Consumption).into());
    let spent = noted(&recording, spent);
    assert!(
        matches!(
            spent,
            Err(SpendError::Store(StoreError::SpendDisagreement { .. }))
        ),
        "passed on as it came: {spent:?}"
    );
    let settled: Result<(), ReservationError> =
        Err(disagreement(TransactionKind::ReservationSettle).into());
    assert!(noted(&recording, settled).is_err());
    let clawed: Result<(), StoreError> = Err(disagreement(TransactionKind::RefundClawback));
    assert!(noted(&recording, clawed).is_err());
    assert_eq!(
        recording.take(),
        [
            "disagreement consumption",
            "disagreement reservation_settle",
            "disagreement refund_clawback"
        ]
    );
    // A refusal, another failure or a success counts nothing.
    let refused: Result<(), SpendError> = Err(SpendError::Insufficient {
        requested: credits(5),
        available: credits(1),
    });
    assert!(noted(&recording, refused).is_err());
    assert!(noted(&recording, Err::<(), _>(StoreError::NotFound)).is_err());
    assert!(noted(&recording, Ok::<_, StoreError>(())).is_ok());
    assert!(recording.take().is_empty());
}
