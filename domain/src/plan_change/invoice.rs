//! The provider's invoice for a plan change (Stripe's `invoice.paid` with
//! `billing_reason=subscription_update`), issue 19.
//!
//! Two kinds, told apart by whether the invoice bills a whole new period at the new price:
//!
//! - **An interval change** (monthly ↔ yearly). The provider starts a new billing period at the
//!   change (Stripe resets `billing_cycle_anchor` and invoices at once): the invoice's line at
//!   the new price covers the new period. That invoice decides the change: only a line at
//!   exactly the asked plan's price, currency and interval, for a period starting within the
//!   paid one, moves the subscription to the new plan, terms **and period**, grants the new
//!   plan's credits once for that period (the period's own lot, as a renewal would), records the
//!   invoice as that period's charge, and takes back the unused share of the old period's
//!   credits (the provider credits the unused share of its price the same way).
//! - **A proration** of a change within the interval (an upgrade invoiced now): the invoice is
//!   recorded as a charge against the change, so that its refunds take back the upgrade's extra
//!   credits in proportion.

use crate::credits::Credits;
use crate::money::Money;
use crate::outcome::EventOutcome;
use crate::refund::{KeptRefund, refund_step};
use crate::subscription::{BillingPeriod, SoldTerms, Subscription};
use crate::subscription_events::PeriodCharge;
use crate::time::Timestamp;

use super::{PeriodGrants, PeriodLotSource, PlanChange, upgrade_credits};

/// The invoice's line at the new price when the change started a new billing period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewPeriodLine {
    /// The period the line bills.
    pub period: BillingPeriod,
    /// The line's price for that period (before any proration credit).
    pub price: Money,
    /// The line's billing interval in months, when the invoice says.
    pub interval_months: Option<u32>,
}

/// What a plan change's invoice says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeInvoiceFacts {
    /// What the invoice charged (the new period less the credit for unused time, or the
    /// proration's difference).
    pub paid: Money,
    /// The line billing a whole new period, when the change started one.
    pub new_period: Option<NewPeriodLine>,
    /// When the change the invoice bills was asked (Tally's own mark on the provider's
    /// subscription), when the invoice carries it.
    pub change_requested_at: Option<Timestamp>,
    /// When it was paid.
    pub occurred_at: Timestamp,
}

/// What a verified plan change's invoice comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeInvoiceDecision {
    /// An interval change paid: the subscription on its new plan, terms and period; the new
    /// period's charge (and credits, the kept refunds of it included); the unused share of the
    /// old period's credits to take back.
    StartsPeriod {
        /// The subscription after the change.
        subscription: Subscription,
        /// The change confirmed.
        change: PlanChange,
        /// The new period's charge.
        charge: PeriodCharge,
        /// The old period (`granted`'s) and, of each of its lots, how much to take back.
        unused: Vec<(PeriodLotSource, Credits)>,
    },
    /// A proration of the change asked at `requested_at`, for `period`, to record as a charge
    /// against that change's credits. `credits` is what the change grants when it is still
    /// pending (its lot is granted with its confirmation); `None` when it was confirmed already
    /// (its lot says what it granted).
    Proration {
        /// When the change was asked (the key of its credits).
        requested_at: Timestamp,
        /// From the request to the end of the paid period.
        period: BillingPeriod,
        /// The credits the pending change will grant, when it is still pending.
        pending_credits: Option<Option<Credits>>,
    },
    /// The subscription already bills this period at this price (a repeat).
    AlreadyDone,
    /// It bills another price, currency, interval or period than the change asked for, or no
    /// change was asked.
    Mismatch(String),
    /// The subscription ended.
    Stale(String),
    /// Nothing to record against: a proration of a change Tally did not ask (made at the
    /// provider), or of nothing.
    Ignored(String),
}

impl ChangeInvoiceDecision {
    /// The inbox outcome this decision records.
    #[must_use]
    pub const fn outcome(&self) -> EventOutcome {
        match self {
            Self::StartsPeriod { .. } | Self::Proration { .. } => EventOutcome::Applied,
            Self::AlreadyDone => EventOutcome::DuplicateState,
            Self::Mismatch(_) => EventOutcome::Mismatch,
            Self::Stale(_) => EventOutcome::Stale,
            Self::Ignored(_) => EventOutcome::Ignored,
        }
    }
}

/// Decide a plan change's invoice for `current`; `kept` are the refund reports kept against
/// the invoice before it arrived, `granted` what the current period was granted so far.
#[must_use]
pub fn decide_change_invoice(
    current: &Subscription,
    facts: &ChangeInvoiceFacts,
    kept: &[KeptRefund],
    granted: &PeriodGrants,
) -> ChangeInvoiceDecision {
    if !current.is_live() {
        return ChangeInvoiceDecision::Stale(format!(
            "subscription is {}",
            current.status().code()
        ));
    }
    let Some(sold) = current.sold_terms() else {
        return ChangeInvoiceDecision::Mismatch("subscription has no sold terms".into());
    };
    if facts.paid.currency() != sold.price().currency() {
        return ChangeInvoiceDecision::Mismatch(format!(
            "the invoice charged {}, the subscription bills in {}",
            facts.paid,
            sold.price().currency().code()
        ));
    }
    match facts.new_period {
        Some(line) => new_period(current, sold, facts, &line, (kept, granted)),
        None => proration(current, sold, facts, granted),
    }
}

/// An invoice billing a whole new period: an interval change, checked against the one asked.
fn new_period(
    current: &Subscription,
    sold: SoldTerms,
    facts: &ChangeInvoiceFacts,
    line: &NewPeriodLine,
    (kept, granted): (&[KeptRefund], &PeriodGrants),
) -> ChangeInvoiceDecision {
    let bills = |terms: &SoldTerms| {
        terms.price() == line.price
            && line
                .interval_months
                .is_none_or(|m| m == terms.interval().get())
    };
    let change = match current.pending_change() {
        Some(change) if change.terms().interval() != sold.interval() => change,
        _ if bills(&sold) && current.current_period() == line.period => {
            return ChangeInvoiceDecision::AlreadyDone;
        }
        _ => {
            return ChangeInvoiceDecision::Mismatch(format!(
                "the invoice starts a period at {} but no change of billing interval was asked",
                line.price
            ));
        }
    };
    let terms = change.terms();
    let paid_period = current.current_period();
    let why = if bills(&terms) {
        interval_mismatch(terms, facts.paid, line.period, paid_period)
    } else {
        Some(format!(
            "the invoice bills {} every {} month(s); plan {} sells {} every {} month(s)",
            line.price,
            line.interval_months
                .map_or_else(|| "?".into(), |m| m.to_string()),
            change.plan_id(),
            terms.price(),
            terms.interval().get()
        ))
    };
    if let Some(why) = why {
        return ChangeInvoiceDecision::Mismatch(why);
    }
    let mut next = current.clone();
    let Some(change) = next.confirm_interval_change(line.period, facts.occurred_at) else {
        return ChangeInvoiceDecision::AlreadyDone;
    };
    debug_assert!(granted.period() == paid_period);
    let unused = granted.unused_after(line.period.start());
    // When the old period's unused credits are taken back, refunds kept against this invoice
    // are left to the reconciler's next pass, which applies kept refunds a charge has not
    // applied yet: one event's clawbacks never meet on a lot.
    let kept = if unused.is_empty() { kept } else { &[][..] };
    let charge = PeriodCharge::paid(line.period, facts.paid, facts.occurred_at, terms, kept);
    ChangeInvoiceDecision::StartsPeriod {
        subscription: next,
        change,
        charge,
        unused,
    }
}

/// Why an invoice at the asked plan's price cannot start its new period: it charged more than
/// the price (or less than nothing), or the period does not start after the paid period's start
/// (a period and its credits are one per start) and before its end.
fn interval_mismatch(
    terms: SoldTerms,
    paid: Money,
    period: BillingPeriod,
    paid_period: BillingPeriod,
) -> Option<String> {
    if paid.amount_minor() < 0 || paid.amount_minor() > terms.price().amount_minor() {
        return Some(format!(
            "the invoice charged {paid} for a period sold at {}",
            terms.price()
        ));
    }
    if period.start() <= paid_period.start() || period.start() >= paid_period.end() {
        return Some("the new period does not start within the paid one".to_owned());
    }
    None
}

/// A proration of a change within the interval.
fn proration(
    current: &Subscription,
    sold: SoldTerms,
    facts: &ChangeInvoiceFacts,
    granted: &PeriodGrants,
) -> ChangeInvoiceDecision {
    let Some(requested_at) = facts.change_requested_at else {
        return ChangeInvoiceDecision::Ignored(
            "a proration of no plan change Tally asked for".into(),
        );
    };
    if facts.paid.amount_minor() <= 0 {
        return ChangeInvoiceDecision::Ignored("nothing was charged".into());
    }
    let paid_period = current.current_period();
    // A charge is one per subscription and start: a proration's starts after the paid period's
    // own start, even for a change asked at that very millisecond.
    let start = requested_at.max(paid_period.start().plus_millis(1));
    let Some(period) = BillingPeriod::new(start, paid_period.end()) else {
        return ChangeInvoiceDecision::Ignored(
            "the change was asked after the paid period ended".into(),
        );
    };
    let pending = current
        .pending_change()
        .filter(|c| c.requested_at() == requested_at);
    let pending_credits =
        pending.map(|change| upgrade_credits(Some(sold), change, granted).map(|u| u.amount));
    if let Some(change) = pending
        && change.terms().interval() != sold.interval()
    {
        return ChangeInvoiceDecision::Mismatch(
            "an interval change's invoice bills no new period".into(),
        );
    }
    ChangeInvoiceDecision::Proration {
        requested_at,
        period,
        pending_credits,
    }
}

/// The charge of a proration: what it paid for `period`, the credits the change granted for it
/// (`credits`), and what refunds `kept` before it arrived take back at once.
#[must_use]
pub fn proration_charge(
    period: BillingPeriod,
    paid: Money,
    paid_at: Timestamp,
    credits: Option<Credits>,
    kept: &[KeptRefund],
) -> PeriodCharge {
    let zero = Money::zero(paid.currency());
    let step = refund_step(paid, credits, zero, kept);
    PeriodCharge {
        period,
        amount: paid,
        credits,
        clawback: step.map(|s| s.clawback),
        refunded: step.map_or(zero, |s| s.after),
        paid_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{PlanId, SubscriptionId, UserId};
    use crate::money::Currency;
    use crate::order::PlanSnapshot;
    use crate::plan::{Duration, PlanType};
    use crate::plan_change::{ChangeDirection, plan_change};
    use crate::provider::ProviderId;
    use crate::refund::RefundForm;
    use crate::subscription::{RenewalIntent, SubscriptionParts, SubscriptionStatus};

    const DAY_MS: i64 = 86_400_000;

    /// What `s`'s current period was granted: its own lot, with its plan's credits.
    fn granted(s: &Subscription) -> PeriodGrants {
        let own = s.sold_terms().and_then(|t| t.credits_per_period());
        PeriodGrants::of(s.current_period(), own, &[])
    }

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(ms)
    }

    fn usd(minor: i64) -> Money {
        Money::from_minor(minor, Currency::Usd).unwrap()
    }

    fn credits(whole: i64) -> Credits {
        Credits::from_whole(whole).unwrap()
    }

    fn snapshot(id: &str, price: i64, months: i64, whole: i64) -> PlanSnapshot {
        PlanSnapshot {
            bonus: None,
            plan_id: PlanId::new(id).unwrap(),
            plan_type: PlanType::Recurring,
            price: usd(price),
            credits: Some(credits(whole)),
            duration: Duration::from_months_value(months),
            entitlements: None,
        }
    }

    /// A monthly subscription (9.99, 1,000 credits) paid for days 0..30, with `to` asked on
    /// day 10.
    fn asked(to: &PlanSnapshot) -> Subscription {
        let monthly = snapshot("pro_monthly", 999, 1, 1000);
        let s = Subscription::restore(SubscriptionParts {
            id: SubscriptionId::new("s1").unwrap(),
            user_id: UserId::new("u1").unwrap(),
            account: None,
            plan_id: monthly.plan_id.clone(),
            provider: ProviderId::CardGateway,
            provider_subscription_id: "sub_1".into(),
            status: SubscriptionStatus::Active,
            current_period: BillingPeriod::new(t(0), t(30 * DAY_MS)).unwrap(),
            renewal: RenewalIntent::Renews,
            last_event_at: t(1),
            sold_terms: Some(SoldTerms::of_order(&monthly).unwrap()),
        });
        let change = plan_change(&s, to, t(10 * DAY_MS)).unwrap();
        let mut s = s;
        s.ask_plan_change(change);
        s
    }

    fn year_from_day_10() -> BillingPeriod {
        BillingPeriod::new(t(10 * DAY_MS), t(375 * DAY_MS)).unwrap()
    }

    fn yearly_invoice(line_price: i64, paid: i64) -> ChangeInvoiceFacts {
        ChangeInvoiceFacts {
            paid: usd(paid),
            new_period: Some(NewPeriodLine {
                period: year_from_day_10(),
                price: usd(line_price),
                interval_months: Some(12),
            }),
            change_requested_at: Some(t(10 * DAY_MS)),
            occurred_at: t(10 * DAY_MS + 5),
        }
    }

    #[test]
    fn an_interval_change_is_applied_by_the_invoice_of_its_new_period() {
        let yearly = snapshot("pro_yearly", 9990, 12, 12_000);
        let s = asked(&yearly);
        // 99.90 for the year less two thirds of 9.99 for the unused month.
        let decision = decide_change_invoice(&s, &yearly_invoice(9990, 9324), &[], &granted(&s));
        let ChangeInvoiceDecision::StartsPeriod {
            subscription,
            change,
            charge,
            unused,
        } = decision
        else {
            panic!("{decision:?}")
        };
        assert_eq!(subscription.plan_id().as_str(), "pro_yearly");
        assert_eq!(subscription.current_period(), year_from_day_10());
        assert_eq!(subscription.sold_terms().unwrap().interval().get(), 12);
        assert!(subscription.pending_change().is_none());
        assert_eq!(change.plan_id().as_str(), "pro_yearly");
        assert_eq!(charge.period, year_from_day_10());
        assert_eq!(charge.amount, usd(9324));
        assert_eq!(charge.credits, Some(credits(12_000)));
        assert_eq!(charge.clawback, None);
        // Two thirds of the month's 1,000 credits were not used up by time: taken back.
        let [(old, taken)] = unused[..] else {
            panic!("{unused:?}")
        };
        assert_eq!(old, PeriodLotSource::Period);
        assert_eq!(taken.hundredths(), 66_666);
        // Applied once: the same invoice again is already done.
        assert_eq!(
            decide_change_invoice(
                &subscription,
                &yearly_invoice(9990, 9324),
                &[],
                &granted(&subscription)
            ),
            ChangeInvoiceDecision::AlreadyDone
        );
    }

    #[test]
    fn an_interval_invoice_that_bills_anything_else_is_a_mismatch() {
        let yearly = snapshot("pro_yearly", 9990, 12, 12_000);
        let s = asked(&yearly);
        let mismatch = |facts: &ChangeInvoiceFacts| {
            matches!(
                decide_change_invoice(&s, facts, &[], &granted(&s)),
                ChangeInvoiceDecision::Mismatch(_)
            )
        };
        assert!(mismatch(&yearly_invoice(9000, 9000)), "another price");
        assert!(mismatch(&yearly_invoice(9990, 9991)), "more than the price");
        let mut monthly_line = yearly_invoice(9990, 9324);
        if let Some(line) = monthly_line.new_period.as_mut() {
            line.interval_months = Some(1);
        }
        assert!(mismatch(&monthly_line), "another interval");
        let mut late = yearly_invoice(9990, 9324);
        if let Some(line) = late.new_period.as_mut() {
            line.period = BillingPeriod::new(t(40 * DAY_MS), t(405 * DAY_MS)).unwrap();
        }
        assert!(mismatch(&late), "a period after the paid one");
        let mut euros = yearly_invoice(9990, 9324);
        euros.paid = Money::from_minor(9324, Currency::Eur).unwrap();
        assert!(mismatch(&euros), "another currency");
        // No change of interval asked: a new period at some price is a mismatch.
        let pro = snapshot("pro_plus", 1999, 1, 2000);
        assert!(matches!(
            decide_change_invoice(
                &asked(&pro),
                &yearly_invoice(9990, 9324),
                &[],
                &granted(&asked(&pro))
            ),
            ChangeInvoiceDecision::Mismatch(_)
        ));
    }

    #[test]
    fn a_kept_refund_of_the_new_periods_invoice_is_taken_back_with_it() {
        let yearly = snapshot("pro_yearly", 9990, 12, 12_000);
        let kept = [KeptRefund {
            form: RefundForm::Total,
            amount: usd(4662),
        }];
        let decision = decide_change_invoice(
            &asked(&yearly),
            &yearly_invoice(9990, 9324),
            &kept,
            &granted(&asked(&yearly)),
        );
        let ChangeInvoiceDecision::StartsPeriod { charge, unused, .. } = decision else {
            panic!("{decision:?}")
        };
        // The old period's unused credits take this event's one take-back: the kept refund is
        // left to the reconciler (the charge has applied none of it yet).
        assert!(!unused.is_empty());
        assert_eq!(charge.refunded, usd(0));
        assert_eq!(charge.clawback, None);
        // From a plan without credits, nothing is unused: the kept refund is applied at once.
        let mut free = asked(&yearly);
        free.move_to_terms(
            PlanId::new("pro_monthly").unwrap(),
            SoldTerms::new(usd(999), free.sold_terms().unwrap().interval(), None),
        );
        let decision =
            decide_change_invoice(&free, &yearly_invoice(9990, 9324), &kept, &granted(&free));
        let ChangeInvoiceDecision::StartsPeriod { charge, unused, .. } = decision else {
            panic!("{decision:?}")
        };
        assert_eq!(unused, []);
        assert_eq!(charge.refunded, usd(4662));
        assert_eq!(charge.clawback, Some(credits(6000)));
    }

    #[test]
    fn the_plan_changed_event_of_an_interval_change_waits_for_its_invoice() {
        let yearly = snapshot("pro_yearly", 9990, 12, 12_000);
        let s = asked(&yearly);
        let facts = super::super::PlanChangedFacts {
            price: usd(9990),
            interval_months: Some(12),
            occurred_at: t(10 * DAY_MS + 1),
        };
        assert!(matches!(
            super::super::decide_plan_changed(&s, &facts, &granted(&s)),
            super::super::PlanChangedDecision::AwaitsInvoice(_)
        ));
    }

    #[test]
    fn a_proration_is_recorded_against_the_change_it_pays() {
        let pro_plus = snapshot("pro_plus", 1999, 1, 2500);
        let s = asked(&pro_plus);
        assert_eq!(
            s.pending_change().unwrap().direction(),
            ChangeDirection::Upgrade
        );
        let facts = ChangeInvoiceFacts {
            paid: usd(666),
            new_period: None,
            change_requested_at: Some(t(10 * DAY_MS)),
            occurred_at: t(10 * DAY_MS + 5),
        };
        let period = BillingPeriod::new(t(10 * DAY_MS), t(30 * DAY_MS)).unwrap();
        // Still pending: the credits the change will grant are known from it.
        assert_eq!(
            decide_change_invoice(&s, &facts, &[], &granted(&s)),
            ChangeInvoiceDecision::Proration {
                requested_at: t(10 * DAY_MS),
                period,
                pending_credits: Some(Some(credits(1500))),
            }
        );
        // Confirmed already: the change's lot says what it granted.
        let mut confirmed = s.clone();
        confirmed.confirm_plan_change(t(10 * DAY_MS + 1));
        assert_eq!(
            decide_change_invoice(&confirmed, &facts, &[], &granted(&confirmed)),
            ChangeInvoiceDecision::Proration {
                requested_at: t(10 * DAY_MS),
                period,
                pending_credits: None,
            }
        );
        // No mark of a change asked by Tally, or nothing charged: nothing to record.
        let unmarked = ChangeInvoiceFacts {
            change_requested_at: None,
            ..facts
        };
        assert!(matches!(
            decide_change_invoice(&confirmed, &unmarked, &[], &granted(&confirmed)),
            ChangeInvoiceDecision::Ignored(_)
        ));
        let free = ChangeInvoiceFacts {
            paid: usd(0),
            ..facts
        };
        assert!(matches!(
            decide_change_invoice(&confirmed, &free, &[], &granted(&confirmed)),
            ChangeInvoiceDecision::Ignored(_)
        ));
    }

    #[test]
    fn a_partial_refund_of_a_proration_takes_back_its_share_never_more() {
        let period = BillingPeriod::new(t(0), t(10)).unwrap();
        let kept = [KeptRefund {
            form: RefundForm::Total,
            amount: usd(333),
        }];
        let charge = proration_charge(period, usd(666), t(1), Some(credits(1500)), &kept);
        assert_eq!(charge.clawback, Some(credits(750)));
        assert_eq!(charge.refunded, usd(333));
        let step = refund_step(
            usd(666),
            Some(credits(1500)),
            usd(333),
            &[KeptRefund {
                form: RefundForm::Total,
                amount: usd(666),
            }],
        )
        .unwrap();
        assert_eq!(step.clawback, credits(750));
        assert!(step.full);
    }
}
