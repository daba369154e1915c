//! A plan change's invoice (issue 19) against the in-memory store: an upgrade's proration is a
//! charge whose refunds take back the upgrade's extra credits in proportion, once; a change of
//! billing interval is applied by the invoice of its new period, which grants the new plan's
//! credits once for that period and takes back the old period's unused credits.

use std::collections::BTreeMap;

use domain::{
    BillingPeriod, EventOutcome, NewPeriodLine, Plan, PlanDraft, PlanText, ProviderId,
    ProviderRefs, Timestamp,
};

use super::harness::*;
use crate::accounts::User;
use crate::ports::*;
use crate::use_cases::initiate_payment::InitiatePayment;

const DAY_MS: i64 = 86_400_000;

fn at(days: i64) -> Timestamp {
    Timestamp::from_unix_millis(START_MS + days * DAY_MS)
}

fn recurring(id: &str, amount: &str, months: u32, credits: &str) -> Plan {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: id.to_owned(),
            ..PlanText::default()
        },
    );
    Plan::from_draft(&PlanDraft {
        id: id.into(),
        provider: Some("card_gateway".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some("USD".into()),
        months: Some(months.into()),
        duration_type: Some("recurring".into()),
        credits: Some(credits.parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::CardGateway, format!("price_{id}")),
        i18n,
        ..PlanDraft::default()
    })
    .unwrap()
}

/// `pro-monthly` (9.99, 50 credits a month), `pro-plus` (19.99, 200 a month), `pro-yearly`
/// (99.90, 600 a year).
fn config_with_plans() -> crate::service::ServiceConfig {
    let mut config = config();
    config
        .catalog
        .push(recurring("pro-plus", "19.99", 1, "200"));
    config
        .catalog
        .push(recurring("pro-yearly", "99.90", 12, "600"));
    config
}

async fn balance(h: &Harness, user: &User) -> i64 {
    h.service
        .balance(&domain::AccountId::personal(&user.id))
        .await
        .unwrap()
        .hundredths()
}

async fn deliver(h: &Harness, event_id: &str, event: PaymentEvent) -> Vec<EventOutcome> {
    let handled = h.deliver(ProviderId::CardGateway, event_id, vec![event]);
    handled.await.unwrap().outcomes().to_vec()
}

/// A user with an active `pro-monthly` subscription `sub_1`, days 0..30, 50 credits granted.
async fn subscribed(h: &Harness) -> (User, String) {
    let user = h.user("a@example.com").await;
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new("pro-monthly").unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    let order = h.service.initiate_payment(request).await.unwrap();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(order.order.order.id()),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: at(0),
    };
    assert_eq!(deliver(h, "act", activated).await, [EventOutcome::Applied]);
    let status = h.service.report_status(&user).await.unwrap();
    let id = status.subscription.unwrap().id().to_string();
    (user, id)
}

fn refund_of(charge_ref: &str, total_minor: i64, days: i64) -> PaymentEvent {
    PaymentEvent::Refunded {
        charge: RefundedCharge::SubscriptionCharge {
            provider_subscription_id: Some("sub_1".into()),
            charge_ref: charge_ref.into(),
        },
        refund: RefundReport::Total(usd(total_minor)),
        occurred_at: at(days),
    }
}

#[tokio::test]
async fn refunding_an_upgrades_proration_takes_back_its_credits_in_proportion_once() {
    let h = Harness::with(config_with_plans(), |_| None);
    let (user, id) = subscribed(&h).await;
    let outcome = h
        .service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await
        .unwrap();
    let asked = outcome.change.requested_at();
    let asked_of_stripe = h.fake(ProviderId::CardGateway).plan_changes();
    assert_eq!(asked_of_stripe[0].requested_at, asked);
    let switched = PaymentEvent::SubscriptionPlanChanged {
        provider_subscription_id: "sub_1".into(),
        price: usd(1999),
        interval_months: Some(1),
        occurred_at: at(1),
    };
    assert_eq!(deliver(&h, "upd", switched).await, [EventOutcome::Applied]);
    // 200 a period now, 50 granted already: 150 more.
    assert_eq!(balance(&h, &user).await, 5_000 + 15_000);

    let proration = PaymentEvent::SubscriptionChangeInvoiced {
        provider_subscription_id: "sub_1".into(),
        paid: usd(1000),
        new_period: None,
        change_requested_at: Some(asked),
        charge_ref: Some("in_proration".into()),
        occurred_at: at(1),
    };
    assert_eq!(
        deliver(&h, "inv", proration.clone()).await,
        [EventOutcome::Applied]
    );
    assert_eq!(
        deliver(&h, "inv", proration).await,
        [EventOutcome::Duplicate]
    );

    // Half the proration refunded: half the upgrade's 150 credits back; the period's 50 stay.
    assert_eq!(
        deliver(&h, "re1", refund_of("in_proration", 500, 2)).await,
        [EventOutcome::Applied]
    );
    assert_eq!(balance(&h, &user).await, 5_000 + 7_500);
    assert_eq!(
        deliver(&h, "re1-again", refund_of("in_proration", 500, 2)).await,
        [EventOutcome::DuplicateState]
    );
    // The rest: the rest of the 150.
    assert_eq!(
        deliver(&h, "re2", refund_of("in_proration", 1000, 3)).await,
        [EventOutcome::Applied]
    );
    assert_eq!(balance(&h, &user).await, 5_000);
    // More than was paid: a mismatch, nothing taken.
    assert_eq!(
        deliver(&h, "re3", refund_of("in_proration", 1001, 3)).await,
        [EventOutcome::Mismatch]
    );
    assert_eq!(balance(&h, &user).await, 5_000);
}

#[tokio::test]
async fn a_proration_invoiced_before_the_change_is_confirmed_is_kept_against_it() {
    let h = Harness::with(config_with_plans(), |_| None);
    let (user, id) = subscribed(&h).await;
    let asked = h
        .service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await
        .unwrap()
        .change
        .requested_at();
    let proration = PaymentEvent::SubscriptionChangeInvoiced {
        provider_subscription_id: "sub_1".into(),
        paid: usd(1000),
        new_period: None,
        change_requested_at: Some(asked),
        charge_ref: Some("in_early".into()),
        occurred_at: at(1),
    };
    assert_eq!(deliver(&h, "inv", proration).await, [EventOutcome::Applied]);
    let switched = PaymentEvent::SubscriptionPlanChanged {
        provider_subscription_id: "sub_1".into(),
        price: usd(1999),
        interval_months: Some(1),
        occurred_at: at(1),
    };
    assert_eq!(deliver(&h, "upd", switched).await, [EventOutcome::Applied]);
    assert_eq!(balance(&h, &user).await, 20_000);
    assert_eq!(
        deliver(&h, "re", refund_of("in_early", 1000, 2)).await,
        [EventOutcome::Applied]
    );
    assert_eq!(balance(&h, &user).await, 5_000);
}

#[tokio::test]
async fn a_change_to_yearly_is_applied_by_the_invoice_of_its_new_period() {
    let h = Harness::with(config_with_plans(), |_| None);
    let (user, id) = subscribed(&h).await;
    let outcome = h
        .service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-yearly"))
        .await
        .unwrap();
    assert_eq!(outcome.change.terms().interval().get(), 12);
    // Stripe's subscription update names the yearly Price first: it waits for the invoice.
    let switched = PaymentEvent::SubscriptionPlanChanged {
        provider_subscription_id: "sub_1".into(),
        price: usd(9990),
        interval_months: Some(12),
        occurred_at: at(10),
    };
    assert_eq!(deliver(&h, "upd", switched).await, [EventOutcome::Ignored]);
    let status = h.service.report_status(&user).await.unwrap();
    assert_eq!(
        status.subscription.unwrap().plan_id().as_str(),
        "pro-monthly"
    );

    let year = BillingPeriod::new(at(10), at(375)).unwrap();
    let invoice = PaymentEvent::SubscriptionChangeInvoiced {
        provider_subscription_id: "sub_1".into(),
        paid: usd(9324),
        new_period: Some(NewPeriodLine {
            period: year,
            price: usd(9990),
            interval_months: Some(12),
        }),
        change_requested_at: Some(outcome.change.requested_at()),
        charge_ref: Some("in_yearly".into()),
        occurred_at: at(10),
    };
    assert_eq!(
        deliver(&h, "inv", invoice.clone()).await,
        [EventOutcome::Applied]
    );
    let now = h.service.report_status(&user).await.unwrap();
    let now = now.subscription.unwrap();
    assert_eq!(now.plan_id().as_str(), "pro-yearly");
    assert_eq!(now.current_period(), year);
    assert_eq!(now.sold_terms().unwrap().interval().get(), 12);
    // 600 for the year; two thirds of the month's 50 were unused by time and went back.
    assert_eq!(balance(&h, &user).await, 5_000 - 3_333 + 60_000);
    // Once, whichever way it comes again.
    assert_eq!(
        deliver(&h, "inv", invoice.clone()).await,
        [EventOutcome::Duplicate]
    );
    assert_eq!(
        deliver(&h, "inv-again", invoice).await,
        [EventOutcome::DuplicateState]
    );
    assert_eq!(balance(&h, &user).await, 5_000 - 3_333 + 60_000);
    // Refunding half of it takes back half of the year's 600.
    assert_eq!(
        deliver(&h, "re", refund_of("in_yearly", 4662, 11)).await,
        [EventOutcome::Applied]
    );
    assert_eq!(balance(&h, &user).await, 5_000 - 3_333 + 30_000);
}

#[tokio::test]
async fn a_new_period_invoice_billing_another_price_is_a_mismatch_and_changes_nothing() {
    let h = Harness::with(config_with_plans(), |_| None);
    let (user, id) = subscribed(&h).await;
    let outcome = h
        .service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-yearly"))
        .await
        .unwrap();
    let invoice = PaymentEvent::SubscriptionChangeInvoiced {
        provider_subscription_id: "sub_1".into(),
        paid: usd(100),
        new_period: Some(NewPeriodLine {
            period: BillingPeriod::new(at(10), at(375)).unwrap(),
            price: usd(100),
            interval_months: Some(12),
        }),
        change_requested_at: Some(outcome.change.requested_at()),
        charge_ref: Some("in_cheap".into()),
        occurred_at: at(10),
    };
    assert_eq!(deliver(&h, "inv", invoice).await, [EventOutcome::Mismatch]);
    let status = h.service.report_status(&user).await.unwrap();
    let held = status.subscription.unwrap();
    assert_eq!(held.plan_id().as_str(), "pro-monthly");
    assert!(held.pending_change().is_some());
    assert_eq!(balance(&h, &user).await, 5_000);
}
