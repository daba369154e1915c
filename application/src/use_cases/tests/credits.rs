//! Consumption, reservations, balance and status.

use domain::{IdempotencyKey, ProviderId, Timestamp, TransactionKind};

use super::harness::*;
use crate::accounts::User;
use crate::ports::Writes;
use crate::ports::{GrantCommand, GrantSource, Replay, ReservationStatus};
use crate::use_cases::credits::{ConsumeCredits, CreditsError, UsageRequest};

async fn funded(h: &Harness, whole: i64) -> User {
    let user = h.user("a@example.com").await;
    let grant = GrantCommand {
        account_id: domain::AccountId::personal(&user.id),
        amount: credits(whole),
        source: GrantSource::Admin("seed".into()),
        expires_at: None,
        now: Timestamp::from_unix_millis(START_MS),
    };
    h.service.store().grant(&grant).await.unwrap();
    user
}

fn chat(user: &User, model: &str, tokens: i64, key: &str) -> ConsumeCredits {
    ConsumeCredits {
        user_id: user.id.clone(),
        account_id: None,
        usage: UsageRequest {
            feature: None,
            model: Some(model.into()),
            tokens: Some(tokens),
            breakdown: None,
        },
        idempotency_key: IdempotencyKey::new(key).unwrap(),
        api_key_id: None,
    }
}

#[tokio::test]
async fn per_token_consumption_charges_tokens_times_rate_times_multiplier() {
    let h = Harness::new();
    let user = funded(&h, 10).await;
    // 1500 tokens at 1 credit per 1000 tokens, model multiplier 2: 3.00 credits.
    let (tx, replay) = h
        .service
        .consume_credits(chat(&user, "big", 1500, "k1"))
        .await
        .unwrap();
    assert_eq!(
        (
            tx.amount.hundredths(),
            tx.balance_after.hundredths(),
            replay
        ),
        (-300, 700, Replay::Fresh)
    );
    assert_eq!(tx.context.model.as_deref(), Some("big"));
    let (again, replay) = h
        .service
        .consume_credits(chat(&user, "big", 1500, "k1"))
        .await
        .unwrap();
    assert_eq!((again.id, replay), (tx.id, Replay::Replayed));
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap()
            .hundredths(),
        700
    );
    let conflict = h
        .service
        .consume_credits(chat(&user, "big", 10, "k1"))
        .await
        .unwrap_err();
    assert!(matches!(conflict, CreditsError::IdempotencyConflict));
}

#[tokio::test]
async fn insufficient_credits_reports_the_balance_and_writes_nothing() {
    let h = Harness::new();
    let user = funded(&h, 1).await;
    let image = ConsumeCredits {
        user_id: user.id.clone(),
        account_id: None,
        usage: UsageRequest {
            feature: Some("image".into()),
            model: None,
            tokens: None,
            breakdown: None,
        },
        idempotency_key: IdempotencyKey::new("img").unwrap(),
        api_key_id: None,
    };
    let err = h.service.consume_credits(image).await.unwrap_err();
    let CreditsError::Insufficient {
        requested,
        available,
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!((requested.hundredths(), available.hundredths()), (500, 100));
    assert_eq!(h.service.store().all_transactions().len(), 1);
}

#[tokio::test]
async fn unknown_models_features_users_and_absurd_tokens_are_refused() {
    let h = Harness::new();
    let user = funded(&h, 10).await;
    assert!(matches!(
        h.service
            .consume_credits(chat(&user, "mystery", 10, "a"))
            .await,
        Err(CreditsError::InvalidUsage(_))
    ));
    assert!(matches!(
        h.service.consume_credits(chat(&user, "big", -1, "b")).await,
        Err(CreditsError::InvalidUsage(_))
    ));
    assert!(matches!(
        h.service
            .consume_credits(chat(&user, "big", 1_000_000_000, "c"))
            .await,
        Err(CreditsError::InvalidUsage(_))
    ));
    let mut ghost = chat(&user, "big", 10, "d");
    ghost.user_id = domain::UserId::new("usr_ghost").unwrap();
    assert!(matches!(
        h.service.consume_credits(ghost.clone()).await,
        Err(CreditsError::UserNotFound)
    ));
    assert!(matches!(
        h.service.reserve_credits(ghost).await,
        Err(CreditsError::UserNotFound)
    ));
}

#[tokio::test]
async fn a_reservation_holds_then_settles_the_actual_cost_and_returns_the_rest() {
    let h = Harness::new();
    let user = funded(&h, 10).await;
    let (reservation, _) = h
        .service
        .reserve_credits(chat(&user, "big", 2000, "r1"))
        .await
        .unwrap();
    assert_eq!(reservation.held.hundredths(), 400);
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap()
            .hundredths(),
        600
    );
    let status = h.service.report_status(&user).await.unwrap();
    assert_eq!(status.pending_reservations.len(), 1);
    let actual = UsageRequest {
        feature: None,
        model: Some("big".into()),
        tokens: Some(500),
        breakdown: None,
    };
    let (settled, _) = h
        .service
        .settle_reservation(&user.id, None, &reservation.id, &actual)
        .await
        .unwrap();
    assert!(matches!(settled.status, ReservationStatus::Settled { .. }));
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap()
            .hundredths(),
        900
    );
    let (_, replay) = h
        .service
        .settle_reservation(&user.id, None, &reservation.id, &actual)
        .await
        .unwrap();
    assert_eq!(replay, Replay::Replayed);
    let err = h
        .service
        .release_reservation(&user.id, None, &reservation.id)
        .await
        .unwrap_err();
    assert!(matches!(err, CreditsError::AlreadyResolved("settled")));
}

#[tokio::test]
async fn released_and_expired_reservations_return_everything() {
    let h = Harness::new();
    let user = funded(&h, 10).await;
    let (r1, _) = h
        .service
        .reserve_credits(chat(&user, "big", 1000, "r1"))
        .await
        .unwrap();
    h.service
        .release_reservation(&user.id, None, &r1.id)
        .await
        .unwrap();
    let (_r2, _) = h
        .service
        .reserve_credits(chat(&user, "big", 1000, "r2"))
        .await
        .unwrap();
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap()
            .hundredths(),
        800
    );
    h.service.clock().advance_ms(600_001);
    let settings = crate::use_cases::reconcile::ReconcileSettings {
        pending_after_ms: 1,
        batch: 10,
        lease_ms: 1,
    };
    let report = h.service.reconcile(settings).await.unwrap();
    assert_eq!(report.reservations_released, 1);
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap()
            .hundredths(),
        1000
    );
    let kinds: Vec<TransactionKind> = h
        .service
        .store()
        .all_transactions()
        .iter()
        .map(|t| t.kind)
        .collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == TransactionKind::ReservationRelease)
            .count(),
        2
    );
    let _ = ProviderId::CardGateway;
}
