//! Automatic top-up: removing a saved method.

use domain::{AccountId, OrderId, ProviderId, Timestamp};

use super::harness::*;
use crate::accounts::User;
use crate::ports::{ChangeSet, ChangeStore, SavedMethod, SavedMethodRecord, TopUpWrite};
use crate::use_cases::auto_top_up::AutoTopUpError;

fn method() -> SavedMethod {
    SavedMethod {
        customer_ref: "cus_1".into(),
        method_ref: "pm_1".into(),
        brand: Some("visa".into()),
        last4: Some("4242".into()),
        wallet_account: None,
    }
}

/// A user whose personal account has one saved method at Stripe, `m1`.
async fn with_saved_method(h: &Harness) -> (User, AccountId) {
    let user = h.user("owner@example.com").await;
    let account = AccountId::personal(&user.id);
    let now = Timestamp::from_unix_millis(START_MS);
    let mut set = ChangeSet::at(now);
    set.top_up = Some(TopUpWrite::MethodSaved(SavedMethodRecord {
        id: "m1".into(),
        account_id: account.clone(),
        provider: ProviderId::CardGateway,
        method: method(),
        order_id: OrderId::new("ord_1").unwrap(),
        consented_by: user.id.clone(),
        consented_at: now,
        created_at: now,
        removed_at: None,
    }));
    h.service.store().apply(set).await.unwrap();
    (user, account)
}

#[tokio::test]
async fn removing_a_method_asks_its_provider_to_forget_it_once() {
    let h = Harness::new();
    let (user, account) = with_saved_method(&h).await;
    let overview = h
        .service
        .remove_payment_method(&user.id, &account, "m1")
        .await
        .unwrap();
    assert!(overview.methods.iter().all(|m| m.removed_at.is_some()));
    assert_eq!(h.fake(ProviderId::CardGateway).forgotten(), vec![method()]);

    // Removed already: not found, and the provider is not asked again.
    let again = h
        .service
        .remove_payment_method(&user.id, &account, "m1")
        .await;
    assert!(matches!(again, Err(AutoTopUpError::MethodNotFound)));
    let unknown = h
        .service
        .remove_payment_method(&user.id, &account, "m2")
        .await;
    assert!(matches!(unknown, Err(AutoTopUpError::MethodNotFound)));
    assert_eq!(h.fake(ProviderId::CardGateway).forgotten().len(), 1);
}

#[tokio::test]
async fn a_provider_that_cannot_forget_does_not_fail_the_removal() {
    let h = Harness::new();
    let (user, account) = with_saved_method(&h).await;
    h.fake(ProviderId::CardGateway).forget_unreachable(true);
    let overview = h
        .service
        .remove_payment_method(&user.id, &account, "m1")
        .await
        .unwrap();
    assert!(overview.methods.iter().all(|m| m.removed_at.is_some()));
    assert_eq!(h.fake(ProviderId::CardGateway).forgotten().len(), 1);
}
