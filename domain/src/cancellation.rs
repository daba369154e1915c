//! A subscriber's cancel: at the end of the paid period (the default), or now where the
//! provider can end a subscription at once. Decided here from the subscription as stored; the
//! provider is asked only for a decision that needs it.

use crate::plan_change::switch_support;
use crate::provider::ProviderId;
use crate::subscription::{RenewalIntent, Subscription};

/// When a subscriber's cancel takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelWhen {
    /// When the current period ends: access runs until then, nothing renews.
    PeriodEnd,
    /// Now, through the provider's immediate cancel.
    Now,
}

/// What a cancel needs done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelStep {
    /// Ask the provider to end the subscription at its period's end, then record it.
    AskAtPeriodEnd,
    /// It already ends at its period's end: nothing to ask (a retry answers the same).
    AlreadyEndsAtPeriodEnd,
    /// Ask the provider to end it now; it ends here when the provider's event says so.
    AskNow,
}

/// Why a cancel was refused; nothing was asked of the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CancelRefusal {
    /// The subscription is over (canceled, expired) or not started.
    #[error("subscription is {0} and cannot be cancelled")]
    NotLive(&'static str),
    /// The provider cannot end a subscription at once: cancel at the period's end.
    #[error("{0} cannot end a subscription at once: cancel at the period's end")]
    NowNotSupported(ProviderId),
}

/// What cancelling `current` `when` asked needs.
///
/// # Errors
/// [`CancelRefusal`].
pub fn decide_cancel(
    current: &Subscription,
    when: CancelWhen,
) -> Result<CancelStep, CancelRefusal> {
    if !current.is_live() {
        return Err(CancelRefusal::NotLive(current.status().code()));
    }
    match when {
        CancelWhen::Now if switch_support(current.provider()).cancel_now => Ok(CancelStep::AskNow),
        CancelWhen::Now => Err(CancelRefusal::NowNotSupported(current.provider())),
        CancelWhen::PeriodEnd if current.renewal() == RenewalIntent::EndsAtPeriodEnd => {
            Ok(CancelStep::AlreadyEndsAtPeriodEnd)
        }
        CancelWhen::PeriodEnd => Ok(CancelStep::AskAtPeriodEnd),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{PlanId, SubscriptionId, UserId};
    use crate::subscription::{
        BillingPeriod, SubscriptionEvent, SubscriptionParts, SubscriptionStatus,
    };
    use crate::time::Timestamp;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(ms)
    }

    fn live(provider: ProviderId) -> Subscription {
        Subscription::restore(SubscriptionParts {
            id: SubscriptionId::new("s1").unwrap(),
            user_id: UserId::new("u1").unwrap(),
            account: None,
            plan_id: PlanId::new("basic").unwrap(),
            provider,
            provider_subscription_id: "sub_1".into(),
            status: SubscriptionStatus::Active,
            current_period: BillingPeriod::new(t(0), t(1000)).unwrap(),
            renewal: RenewalIntent::Renews,
            last_event_at: t(10),
            sold_terms: None,
        })
    }

    #[test]
    fn a_live_subscription_is_cancelled_at_its_period_end_by_default() {
        let s = live(ProviderId::MorC);
        assert_eq!(
            decide_cancel(&s, CancelWhen::PeriodEnd),
            Ok(CancelStep::AskAtPeriodEnd)
        );
    }

    #[test]
    fn cancelling_again_at_period_end_asks_the_provider_nothing() {
        let mut s = live(ProviderId::CardGateway);
        s.apply(SubscriptionEvent::CancelScheduled, t(20)).unwrap();
        assert_eq!(
            decide_cancel(&s, CancelWhen::PeriodEnd),
            Ok(CancelStep::AlreadyEndsAtPeriodEnd)
        );
        // Ending it now is still possible where the provider can.
        assert_eq!(decide_cancel(&s, CancelWhen::Now), Ok(CancelStep::AskNow));
    }

    #[test]
    fn now_only_where_the_provider_can_end_a_subscription_at_once() {
        for provider in [
            ProviderId::CardGateway,
            ProviderId::MorA,
            ProviderId::MorB,
            ProviderId::WalletGlobal,
        ] {
            assert_eq!(
                decide_cancel(&live(provider), CancelWhen::Now),
                Ok(CancelStep::AskNow),
                "{provider}"
            );
        }
        assert_eq!(
            decide_cancel(&live(ProviderId::MorC), CancelWhen::Now),
            Err(CancelRefusal::NowNotSupported(ProviderId::MorC))
        );
    }

    #[test]
    fn an_ended_subscription_is_not_cancelled_again() {
        let mut s = live(ProviderId::CardGateway);
        s.apply(SubscriptionEvent::Canceled, t(20)).unwrap();
        for when in [CancelWhen::PeriodEnd, CancelWhen::Now] {
            assert!(matches!(
                decide_cancel(&s, when),
                Err(CancelRefusal::NotLive(_))
            ));
        }
    }
}
