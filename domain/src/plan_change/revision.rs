//! A plan change the subscriber approves at the provider, billed from the next period (PayPal's
//! subscription revise).
//!
//! The provider tells which of *its* plans the subscription is on now; the use case says which of
//! ours that is ([`RevisedTo`]). Only a revision to the plan of the pending change, billing that
//! plan's price in its currency and interval, moves the subscription (as
//! [`decide_plan_changed`] does), and it grants nothing at once: the provider charges nothing for
//! the rest of the period ("the new price is effective starting on the next billing cycle"), so
//! an upgrade's credits come with the next renewal, which bills the new price.

use super::{PeriodGrants, PlanChangedDecision, PlanChangedFacts, decide_plan_changed};
use crate::subscription::Subscription;

/// Which of our plans the provider's plan of a revised subscription is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevisedTo {
    /// The plan the pending change asked for.
    AskedPlan,
    /// The plan the subscription already bills (a revision not approved yet, or an update of
    /// something else).
    CurrentPlan,
    /// Neither: the provider's plan id, as the event names it.
    OtherPlan(String),
}

/// A provider event saying `current` is now on the provider plan `to`, billing `facts.price`
/// from its next period: checked against the change the subscriber asked for.
#[must_use]
pub fn decide_plan_revised(
    current: &Subscription,
    to: &RevisedTo,
    facts: &PlanChangedFacts,
) -> PlanChangedDecision {
    if !current.is_live() {
        return PlanChangedDecision::Stale(format!("subscription is {}", current.status().code()));
    }
    match to {
        RevisedTo::AskedPlan if current.pending_change().is_some() => {
            // Nothing is granted now, so what the period was granted does not matter.
            let granted = PeriodGrants::none(current.current_period());
            match decide_plan_changed(current, facts, &granted) {
                // Nothing is charged before the next period: no credits now.
                PlanChangedDecision::Apply {
                    subscription,
                    change,
                    ..
                } => PlanChangedDecision::Apply {
                    subscription,
                    change,
                    credits: None,
                },
                other => other,
            }
        }
        RevisedTo::AskedPlan | RevisedTo::CurrentPlan => {
            let bills = current.sold_terms().is_some_and(|terms| {
                terms.price() == facts.price
                    && facts
                        .interval_months
                        .is_none_or(|m| m == terms.interval().get())
            });
            if bills {
                PlanChangedDecision::AlreadyDone
            } else {
                PlanChangedDecision::Mismatch(format!(
                    "the provider bills {} under the subscription's plan {}, which sells otherwise",
                    facts.price,
                    current.plan_id()
                ))
            }
        }
        RevisedTo::OtherPlan(provider_plan) => PlanChangedDecision::Mismatch(format!(
            "the provider moved the subscription to its plan {provider_plan}, which no pending \
             change asked for"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credits::Credits;
    use crate::ids::{PlanId, SubscriptionId, UserId};
    use crate::money::{Currency, Money};
    use crate::plan::Duration;
    use crate::plan_change::{ChangeDirection, PlanChange};
    use crate::provider::ProviderId;
    use crate::subscription::{
        BillingPeriod, RenewalIntent, SoldTerms, SubscriptionEvent, SubscriptionParts,
        SubscriptionStatus,
    };
    use crate::time::Timestamp;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(ms)
    }

    fn usd(minor: i64) -> Money {
        Money::from_minor(minor, Currency::Usd).unwrap()
    }

    fn terms(price: i64, whole: i64) -> SoldTerms {
        let Some(Duration::Months(interval)) = Duration::from_months_value(1) else {
            unreachable!()
        };
        SoldTerms::new(
            usd(price),
            interval,
            Some(Credits::from_whole(whole).unwrap()),
        )
    }

    /// A PayPal subscription on `basic` (10.00 a month, 100 credits) asked to go to `pro`
    /// (20.00 a month, 300 credits).
    fn asked() -> Subscription {
        let mut s = Subscription::restore(SubscriptionParts {
            id: SubscriptionId::new("s1").unwrap(),
            user_id: UserId::new("u1").unwrap(),
            account: None,
            plan_id: PlanId::new("basic").unwrap(),
            provider: ProviderId::WalletGlobal,
            provider_subscription_id: "I-1".into(),
            status: SubscriptionStatus::Active,
            current_period: BillingPeriod::new(t(0), t(1000)).unwrap(),
            renewal: RenewalIntent::Renews,
            last_event_at: t(10),
            sold_terms: Some(terms(1000, 100)),
        });
        s.ask_plan_change(PlanChange::new(
            PlanId::new("pro").unwrap(),
            terms(2000, 300),
            ChangeDirection::Upgrade,
            t(20),
        ));
        s
    }

    fn facts(price: i64) -> PlanChangedFacts {
        PlanChangedFacts {
            price: usd(price),
            interval_months: Some(1),
            occurred_at: t(30),
        }
    }

    #[test]
    fn an_approved_revision_to_the_asked_plan_moves_it_and_grants_nothing_before_the_next_period() {
        let decision = decide_plan_revised(&asked(), &RevisedTo::AskedPlan, &facts(2000));
        let PlanChangedDecision::Apply {
            subscription,
            change,
            credits,
        } = decision
        else {
            panic!("expected apply, got {decision:?}");
        };
        assert_eq!(subscription.plan_id().as_str(), "pro");
        assert_eq!(subscription.sold_terms(), Some(terms(2000, 300)));
        assert_eq!(subscription.pending_change(), None);
        assert_eq!(change.direction(), ChangeDirection::Upgrade);
        assert_eq!(credits, None);
    }

    #[test]
    fn the_asked_plan_at_another_price_is_a_mismatch() {
        let decision = decide_plan_revised(&asked(), &RevisedTo::AskedPlan, &facts(2500));
        assert!(
            matches!(decision, PlanChangedDecision::Mismatch(_)),
            "{decision:?}"
        );
    }

    #[test]
    fn another_provider_plan_is_a_mismatch_and_the_current_one_changes_nothing() {
        let other = RevisedTo::OtherPlan("P-OTHER".into());
        let decision = decide_plan_revised(&asked(), &other, &facts(2000));
        let PlanChangedDecision::Mismatch(why) = decision else {
            panic!("expected a mismatch, got {decision:?}");
        };
        assert!(why.contains("P-OTHER"), "{why}");
        assert_eq!(
            decide_plan_revised(&asked(), &RevisedTo::CurrentPlan, &facts(1000)),
            PlanChangedDecision::AlreadyDone
        );
        assert!(matches!(
            decide_plan_revised(&asked(), &RevisedTo::CurrentPlan, &facts(1500)),
            PlanChangedDecision::Mismatch(_)
        ));
    }

    #[test]
    fn an_ended_subscription_is_stale() {
        let mut s = asked();
        s.apply(SubscriptionEvent::Canceled, t(25)).unwrap();
        assert!(matches!(
            decide_plan_revised(&s, &RevisedTo::AskedPlan, &facts(2000)),
            PlanChangedDecision::Stale(_)
        ));
    }
}
