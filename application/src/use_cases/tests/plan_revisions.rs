//! PayPal's revise (issue 19) against the in-memory store: the request carries the deployment's
//! return pages, and PayPal's "the subscription is on plan P-…" event moves the subscription only
//! when that PayPal plan is the asked plan's, billing its price; it grants nothing at once.

use std::collections::BTreeMap;

use domain::{EventOutcome, Plan, PlanDraft, PlanText, ProviderId, ProviderRefs, Timestamp};

use super::harness::*;
use crate::accounts::User;
use crate::ports::*;
use crate::use_cases::initiate_payment::InitiatePayment;

/// `pp-basic` (9.99 a month, 50 credits, `P-BASIC`) and `pp-plus` (19.99, 200, `P-PLUS`).
fn paypal_plan(id: &str, amount: &str, credits: &str, paypal_id: &str) -> Plan {
    Plan::from_draft(&PlanDraft {
        id: id.into(),
        provider: Some("wallet_global".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some("USD".into()),
        months: Some(1),
        duration_type: Some("recurring".into()),
        credits: Some(credits.parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::WalletGlobal, paypal_id),
        i18n: BTreeMap::from([(
            "en".to_owned(),
            PlanText {
                name: id.to_owned(),
                ..PlanText::default()
            },
        )]),
        ..PlanDraft::default()
    })
    .unwrap()
}

fn paypal_config() -> crate::service::ServiceConfig {
    let mut config = config();
    config
        .catalog
        .push(paypal_plan("pp-basic", "9.99", "50", "P-BASIC"));
    config
        .catalog
        .push(paypal_plan("pp-plus", "19.99", "200", "P-PLUS"));
    config.callbacks = config.callbacks.with_plan_change_returns(
        "http://tally.test/dashboard?notice=plan_change_pending".into(),
        "http://tally.test/dashboard?notice=plan_change_declined".into(),
    );
    config
}

fn at(days: i64) -> Timestamp {
    Timestamp::from_unix_millis(START_MS).plus_days(days)
}

async fn deliver(h: &Harness, event_id: &str, event: PaymentEvent) -> Vec<EventOutcome> {
    let handled = h.deliver(ProviderId::WalletGlobal, event_id, vec![event]);
    handled.await.unwrap().outcomes().to_vec()
}

/// A user subscribed to `pp-basic` (`I-1`, 50 credits granted) who asked to switch to
/// `pp-plus`: the user and our subscription's id.
async fn asked_to_switch(h: &Harness) -> (User, String) {
    let user = h.user("pp@example.com").await;
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new("pp-basic").unwrap(),
        provider: ProviderId::WalletGlobal,
        idempotency_key: None,
        returns: Default::default(),
    };
    let order = h.service.initiate_payment(request).await.unwrap();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(order.order.order.id()),
        provider_subscription_id: "I-1".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: at(0),
    };
    assert_eq!(deliver(h, "act", activated).await, [EventOutcome::Applied]);
    let id = held(h, &user).await.id().to_string();
    h.service
        .change_plan(&user, &sub_id(&id), &plan_id("pp-plus"))
        .await
        .unwrap();
    (user, id)
}

async fn held(h: &Harness, user: &User) -> domain::Subscription {
    h.service
        .report_status(user)
        .await
        .unwrap()
        .subscription
        .unwrap()
}

fn revised(paypal_plan: &str, minor: i64, days: i64) -> PaymentEvent {
    PaymentEvent::SubscriptionPlanRevised {
        provider_subscription_id: "I-1".into(),
        provider_plan_id: paypal_plan.into(),
        price: usd(minor),
        interval_months: Some(1),
        occurred_at: at(days),
    }
}

#[tokio::test]
async fn the_revise_request_carries_the_deployments_return_pages() {
    let h = Harness::with(paypal_config(), |_| None);
    asked_to_switch(&h).await;
    let asked = h.fake(ProviderId::WalletGlobal).plan_changes();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].provider_subscription_id, "I-1");
    assert_eq!(
        asked[0].return_url.as_deref(),
        Some("http://tally.test/dashboard?notice=plan_change_pending")
    );
    assert_eq!(
        asked[0].cancel_url.as_deref(),
        Some("http://tally.test/dashboard?notice=plan_change_declined")
    );
}

#[tokio::test]
async fn an_approved_revision_to_the_asked_paypal_plan_moves_the_plan_and_grants_nothing_yet() {
    let h = Harness::with(paypal_config(), |_| None);
    let (user, _) = asked_to_switch(&h).await;
    let before = h
        .service
        .balance(&domain::AccountId::personal(&user.id))
        .await
        .unwrap();

    assert_eq!(
        deliver(&h, "upd", revised("P-PLUS", 1999, 3)).await,
        [EventOutcome::Applied]
    );
    let now = held(&h, &user).await;
    assert_eq!(now.plan_id().as_str(), "pp-plus");
    assert_eq!(now.pending_change(), None);
    assert_eq!(now.sold_terms().unwrap().price(), usd(1999));
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap(),
        before
    );

    // The same update again, under another id: the plan it already bills.
    assert_eq!(
        deliver(&h, "upd-again", revised("P-PLUS", 1999, 4)).await,
        [EventOutcome::DuplicateState]
    );
    // The next cycle bills the new price and grants the new plan's credits.
    let renewal = PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "I-1".into(),
        period: period(30, 60),
        amount: usd(1999),
        charge_ref: Some("SALE-2".into()),
        occurred_at: at(30),
    };
    assert_eq!(
        deliver(&h, "sale-2", renewal).await,
        [EventOutcome::Applied]
    );
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap()
            .hundredths(),
        before.hundredths() + 20_000
    );
}

#[tokio::test]
async fn a_revision_to_another_paypal_plan_or_price_is_a_mismatch_that_changes_nothing() {
    let h = Harness::with(paypal_config(), |_| None);
    let (user, _) = asked_to_switch(&h).await;
    assert_eq!(
        deliver(&h, "other", revised("P-SOMEONE-ELSE", 1999, 3)).await,
        [EventOutcome::Mismatch]
    );
    assert_eq!(
        deliver(&h, "cheaper", revised("P-PLUS", 1499, 3)).await,
        [EventOutcome::Mismatch]
    );
    // PayPal still on the subscription's own plan (not approved yet): nothing to do.
    assert_eq!(
        deliver(&h, "same", revised("P-BASIC", 999, 3)).await,
        [EventOutcome::DuplicateState]
    );
    let now = held(&h, &user).await;
    assert_eq!(now.plan_id().as_str(), "pp-basic");
    assert_eq!(
        now.pending_change().map(|c| c.plan_id().as_str()),
        Some("pp-plus")
    );
}
