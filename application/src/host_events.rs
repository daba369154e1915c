//! The vocabulary of events told to the host application: what happened to an order,
//! a subscription or a balance, written by the store in the same transaction as the change
//! (CORRECTNESS.md invariant 13), read back through the catch-up feed and delivered to webhook
//! endpoints.
//!
//! This module names the types and decides which events a change tells
//! ([`payment_event_told`] and the functions beside it); the JSON shape is the encoder's
//! (`ports::HostEventEncoder`, implemented by the HTTP adapter with the API's own views).
//! `docs/events.md` lists each type's `data` and when it fires.

mod told;

pub use told::{
    HostEvent, HostEventData, LimitTold, MismatchTold, ThresholdTold, balance_alerts, consumed,
    credits_changed, entitlements_changed, limit_reached, limit_reset, member_changed, mismatch,
    mismatch_of, order_changed, payment_event_told, promo_redeemed, recorded_event_told,
    reservation_step, seats_exceeded, seats_reduced, subscription_changed, threshold_crossings,
    top_up_disabled, top_up_moved,
};

/// A type of event the host application can be told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostEventKind {
    /// An order's payment was confirmed.
    OrderPaid,
    /// An order's payment failed (the provider reported it, or the checkout could not start).
    OrderFailed,
    /// Part or all of an order's payment was refunded (or a dispute was lost).
    OrderRefunded,
    /// An unpaid order was cancelled (by its buyer, or by the provider before payment).
    OrderCancelled,
    /// An unpaid order expired (its checkout ran out without a payment).
    OrderExpired,
    /// A subscription started (its first payment, or its trial converted).
    SubscriptionActivated,
    /// A subscription's renewal was paid for a new period.
    SubscriptionRenewed,
    /// A subscription's renewal payment failed.
    SubscriptionPastDue,
    /// A subscription will end at the end of its paid period instead of renewing.
    SubscriptionCancelScheduled,
    /// A scheduled cancellation was withdrawn: the subscription renews again.
    SubscriptionResumed,
    /// The provider confirmed a switch to another plan: the subscription bills the new plan's
    /// price and grants its credits from now on (issue 19).
    SubscriptionPlanChanged,
    /// A subscription ended (cancelled or expired).
    SubscriptionEnded,
    /// Credits were granted (a purchase, a paid period, an administrator's grant).
    CreditsGranted,
    /// Credits were taken back (a refund's clawback, an administrator's debit).
    CreditsClawedBack,
    /// What was left of an expiring grant was written off.
    CreditsExpired,
    /// Credits were spent at once (a consumption, not a reservation). Opt-in: only written while an
    /// enabled endpoint names it.
    CreditsConsumed,
    /// Credits were held for a reservation. Opt-in, like [`HostEventKind::CreditsConsumed`].
    CreditsReserved,
    /// A reservation was settled (the actual cost spent, the rest returned). Opt-in.
    CreditsSettled,
    /// A reservation was released (cancelled or lapsed) and its hold returned. Opt-in.
    CreditsReleased,
    /// A spend took the balance below the configured `credits.lowBalanceThreshold` (once per
    /// crossing).
    CreditsLowBalance,
    /// A spend took the balance to zero (once per crossing).
    CreditsDepleted,
    /// A posting took an account's balance below one of its thresholds (once per crossing).
    CreditsThresholdCrossed,
    /// A posting took an account's balance from below one of its thresholds back to it or
    /// above (once per crossing).
    CreditsRecovered,
    /// A verified provider event did not match what was sold (for the operator).
    PaymentMismatch,
    /// A user's effective entitlements changed (a purchase, a subscription starting or ending,
    /// a refund, one-time access running out); carries the new map and the previous one.
    EntitlementsChanged,
    /// A user joined a team's account (added, or created it).
    AccountMemberAdded,
    /// A member left a team's account or was removed.
    AccountMemberRemoved,
    /// A member's role changed.
    AccountMemberRoleChanged,
    /// A spend brought an account's spend limit to its credits or past them (a hard limit's
    /// window is now used up; a soft limit's is passed): once per crossing.
    LimitReached,
    /// A limit that `limit.reached` told of has room again: its window reset (found by the
    /// reconciler shortly after the reset).
    LimitReset,
    /// A user was not added to a team because its members fill its seats (its owners are told
    /// once per state: further refusals at the same seats and member count tell nothing).
    AccountSeatsExceeded,
    /// A user redeemed a promo code (its credits are told as `credits.granted` too).
    PromoCodeRedeemed,
    /// A spend took an account's balance below its automatic top-up threshold: a top-up is
    /// asked for (at most one in flight per account).
    AutoTopUpRequested,
    /// A top-up's payment was confirmed by the provider (its credits are told as
    /// `credits.granted` too).
    AutoTopUpSucceeded,
    /// A top-up failed: declined, or refused before charging (a cap, the ceiling, the rule off).
    AutoTopUpFailed,
    /// Tally turned an account's automatic top-up off (declines in a row, a refunded or
    /// disputed top-up, the saved method removed) until its owner turns it on again.
    AutoTopUpDisabled,
    /// A top-up's charge needs the buyer to authenticate: they finish it at `actionUrl`.
    AutoTopUpAuthenticationRequired,
}

impl HostEventKind {
    /// Every type, in the order the documentation lists them.
    pub const ALL: [HostEventKind; 37] = [
        HostEventKind::OrderPaid,
        HostEventKind::OrderFailed,
        HostEventKind::OrderRefunded,
        HostEventKind::OrderCancelled,
        HostEventKind::OrderExpired,
        HostEventKind::SubscriptionActivated,
        HostEventKind::SubscriptionRenewed,
        HostEventKind::SubscriptionPastDue,
        HostEventKind::SubscriptionCancelScheduled,
        HostEventKind::SubscriptionResumed,
        HostEventKind::SubscriptionPlanChanged,
        HostEventKind::SubscriptionEnded,
        HostEventKind::CreditsGranted,
        HostEventKind::CreditsClawedBack,
        HostEventKind::CreditsExpired,
        HostEventKind::CreditsLowBalance,
        HostEventKind::CreditsDepleted,
        HostEventKind::CreditsThresholdCrossed,
        HostEventKind::CreditsRecovered,
        HostEventKind::LimitReached,
        HostEventKind::LimitReset,
        HostEventKind::CreditsConsumed,
        HostEventKind::CreditsReserved,
        HostEventKind::CreditsSettled,
        HostEventKind::CreditsReleased,
        HostEventKind::PaymentMismatch,
        HostEventKind::EntitlementsChanged,
        HostEventKind::AccountMemberAdded,
        HostEventKind::AccountMemberRemoved,
        HostEventKind::AccountMemberRoleChanged,
        HostEventKind::AccountSeatsExceeded,
        HostEventKind::PromoCodeRedeemed,
        HostEventKind::AutoTopUpRequested,
        HostEventKind::AutoTopUpSucceeded,
        HostEventKind::AutoTopUpFailed,
        HostEventKind::AutoTopUpDisabled,
        HostEventKind::AutoTopUpAuthenticationRequired,
    ];

    /// The high-volume consumption types: written only while an enabled endpoint names one of
    /// them in its `eventTypes`, and never sent to an endpoint that does not name them.
    pub const OPT_IN: [HostEventKind; 4] = [
        HostEventKind::CreditsConsumed,
        HostEventKind::CreditsReserved,
        HostEventKind::CreditsSettled,
        HostEventKind::CreditsReleased,
    ];

    /// Whether this type is opt-in (see [`HostEventKind::OPT_IN`]).
    #[must_use]
    pub const fn is_opt_in(self) -> bool {
        matches!(
            self,
            HostEventKind::CreditsConsumed
                | HostEventKind::CreditsReserved
                | HostEventKind::CreditsSettled
                | HostEventKind::CreditsReleased
        )
    }

    /// The stable type code, as the envelope's `type` and the feed's `type` filter spell it.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            HostEventKind::OrderPaid => "order.paid",
            HostEventKind::OrderFailed => "order.failed",
            HostEventKind::OrderRefunded => "order.refunded",
            HostEventKind::OrderCancelled => "order.cancelled",
            HostEventKind::OrderExpired => "order.expired",
            HostEventKind::SubscriptionActivated => "subscription.activated",
            HostEventKind::SubscriptionRenewed => "subscription.renewed",
            HostEventKind::SubscriptionPastDue => "subscription.past_due",
            HostEventKind::SubscriptionCancelScheduled => "subscription.cancel_scheduled",
            HostEventKind::SubscriptionResumed => "subscription.resumed",
            HostEventKind::SubscriptionPlanChanged => "subscription.plan_changed",
            HostEventKind::SubscriptionEnded => "subscription.ended",
            HostEventKind::CreditsGranted => "credits.granted",
            HostEventKind::CreditsClawedBack => "credits.clawed_back",
            HostEventKind::CreditsExpired => "credits.expired",
            HostEventKind::CreditsLowBalance => "credits.low_balance",
            HostEventKind::CreditsDepleted => "credits.depleted",
            HostEventKind::CreditsThresholdCrossed => "credits.threshold_crossed",
            HostEventKind::CreditsRecovered => "credits.recovered",
            HostEventKind::LimitReached => "limit.reached",
            HostEventKind::LimitReset => "limit.reset",
            HostEventKind::CreditsConsumed => "credits.consumed",
            HostEventKind::CreditsReserved => "credits.reserved",
            HostEventKind::CreditsSettled => "credits.settled",
            HostEventKind::CreditsReleased => "credits.released",
            HostEventKind::PaymentMismatch => "payment.mismatch",
            HostEventKind::EntitlementsChanged => "entitlements.changed",
            HostEventKind::AccountMemberAdded => "account.member_added",
            HostEventKind::AccountMemberRemoved => "account.member_removed",
            HostEventKind::AccountMemberRoleChanged => "account.member_role_changed",
            HostEventKind::AccountSeatsExceeded => "account.seats_exceeded",
            HostEventKind::PromoCodeRedeemed => "promo_code.redeemed",
            HostEventKind::AutoTopUpRequested => "auto_top_up.requested",
            HostEventKind::AutoTopUpSucceeded => "auto_top_up.succeeded",
            HostEventKind::AutoTopUpFailed => "auto_top_up.failed",
            HostEventKind::AutoTopUpDisabled => "auto_top_up.disabled",
            HostEventKind::AutoTopUpAuthenticationRequired => "auto_top_up.authentication_required",
        }
    }

    /// The type a code names, if Tally knows it.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.code() == code)
    }
}

impl std::fmt::Display for HostEventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_parses_back_to_its_kind_and_codes_are_distinct() {
        let mut codes = std::collections::BTreeSet::new();
        for kind in HostEventKind::ALL {
            assert_eq!(HostEventKind::parse(kind.code()), Some(kind));
            assert!(codes.insert(kind.code()), "{kind} twice");
        }
        assert_eq!(HostEventKind::parse("order.shipped"), None);
        let opt_in: Vec<_> = HostEventKind::ALL
            .into_iter()
            .filter(|k| k.is_opt_in())
            .collect();
        assert_eq!(opt_in, HostEventKind::OPT_IN);
        assert!(opt_in.iter().all(|k| k.code().starts_with("credits.")));
        assert_eq!(HostEventKind::parse("ORDER.PAID"), None);
    }
}
