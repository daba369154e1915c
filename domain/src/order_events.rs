//! What a verified provider event does to an order, decided from the order as stored and the
//! event alone (issue 14): a payment, a failure, a refund. Each function returns a typed
//! decision — the order's next state, the credits to grant or take back, or why nothing changes —
//! and the webhook use case only turns it into one store command.

use crate::credits::Credits;
use crate::money::Money;
use crate::order::{Order, OrderStatus, Transition};
use crate::plan::{Duration, PlanType};
use crate::refund::{KeptRefund, RefundStep, refund_step};
use crate::time::Timestamp;

/// Credits a paid order grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderGrant {
    /// How many.
    pub credits: Credits,
    /// When they expire (credit packs with a validity, in calendar months from the payment).
    pub expires_at: Option<Timestamp>,
    /// The pack's bonus credits, granted apart as `bonus`, and when they expire.
    pub bonus: Option<(Credits, Option<Timestamp>)>,
}

/// What refunds take back of a credits order: the refunded share of its credits, and of its
/// bonus credits when it had any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Takeback {
    /// Of the pack's credits.
    pub credits: Credits,
    /// Of its bonus credits.
    pub bonus: Option<Credits>,
}

/// The share of `order`'s credits and bonus credits that the refunds in `kept` take back, the
/// refunded total moving from `applied`; `None` when it moves nothing or the order grants
/// nothing.
fn takeback(order: &Order, applied: Money, kept: &[KeptRefund]) -> Option<(RefundStep, Takeback)> {
    let price = order.plan().price;
    let step = refund_step(price, credits_granted(order), applied, kept)?;
    let bonus = order.plan().bonus.map(|b| {
        refund_step(price, Some(b.credits), applied, kept).map_or(Credits::ZERO, |s| s.clawback)
    });
    let back = Takeback {
        credits: step.clawback,
        bonus,
    };
    Some((step, back))
}

/// What a verified payment of an order comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentDecision {
    /// It does not pay the order's price in its currency: recorded on the order, nothing else.
    Mismatch(String),
    /// The order is paid already (and grants nothing more): a repeat.
    AlreadyPaid,
    /// Money for an order that failed, expired or was cancelled: recorded on the order for an
    /// administrator, nothing else.
    Late(String),
    /// Paid: the order's next state (when it moves), the grant (credits orders; once per order,
    /// which the ledger enforces), and what refunds kept before the payment take back.
    Paid {
        /// The order after the payment and the kept refunds, when its status moves.
        order: Option<Order>,
        /// Credits to grant.
        grant: Option<OrderGrant>,
        /// Credits to take back at once for refunds that arrived before the payment.
        clawback: Option<Takeback>,
    },
}

/// The credits a credits order grants (other plan types grant access, not credits).
fn credits_granted(order: &Order) -> Option<Credits> {
    let plan = order.plan();
    match plan.plan_type {
        // `duration.credits` counts the bonus in; the bonus is granted apart, as `bonus`.
        PlanType::Credits => plan.credits.map(|total| match plan.bonus {
            Some(bonus) => total.checked_sub(bonus.credits).unwrap_or(Credits::ZERO),
            None => total,
        }),
        _ => None,
    }
}

/// When credits granted at `from` by a plan of `duration` expire.
fn credits_expiry(duration: Option<Duration>, from: Timestamp) -> Option<Timestamp> {
    match duration {
        Some(Duration::Months(m)) => Some(from.plus_calendar_months(m.get())),
        Some(Duration::Lifetime) | None => None,
    }
}

/// A payment of `paid` at `at` for `order`, with the refund reports `kept` against it before it
/// arrived.
#[must_use]
pub fn decide_payment(
    order: &Order,
    paid: Money,
    at: Timestamp,
    kept: &[KeptRefund],
) -> PaymentDecision {
    let price = order.plan().price;
    if paid != price {
        return PaymentDecision::Mismatch(format!("paid {paid}, order price {price}"));
    }
    let granted = credits_granted(order);
    let mut next = order.clone();
    match next.mark_paid(at) {
        Ok(Transition::Applied) => {}
        // A credits order's repeat still goes through: the grant is once per order anyway.
        Ok(Transition::AlreadyDone) if granted.is_some() => {}
        Ok(Transition::AlreadyDone) => return PaymentDecision::AlreadyPaid,
        Err(_) => {
            return PaymentDecision::Late(format!(
                "payment received for a {} order",
                order.status()
            ));
        }
    }
    let grant = granted.map(|credits| OrderGrant {
        credits,
        expires_at: credits_expiry(order.plan().duration, at),
        bonus: order.plan().bonus.map(|b| (b.credits, b.expires_at(at))),
    });
    let mut clawback = None;
    if let Some((step, back)) = takeback(order, Money::zero(price.currency()), kept)
        && next.refund(step.after) == Ok(Transition::Applied)
    {
        clawback = granted.map(|_| back);
    }
    let moved = next.status() != order.status();
    if let (Some(grant), Some(back)) = (grant, clawback) {
        assert!(
            back.credits <= grant.credits
                && back.bonus.unwrap_or(Credits::ZERO)
                    <= grant.bonus.map_or(Credits::ZERO, |(b, _)| b),
            "a payment never takes back more than it grants"
        );
    }
    PaymentDecision::Paid {
        order: moved.then_some(next),
        grant,
        clawback,
    }
}

/// What a verified payment failure does to an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureDecision {
    /// The pending order failed.
    Failed(Order),
    /// The order is no longer pending (a late failure never undoes a payment): why it is ignored.
    Ignored(String),
}

/// A failure of `order`'s payment.
#[must_use]
pub fn decide_failure(order: &Order, reason: &str) -> FailureDecision {
    let mut next = order.clone();
    match next.mark_failed(reason.to_owned()) {
        Ok(Transition::Applied) => FailureDecision::Failed(next),
        _ => FailureDecision::Ignored(format!("order is {}", order.status())),
    }
}

/// What a new refund report (already checked against the payment and not kept before) does to a
/// one-time or credits order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderRefundDecision {
    /// The order is still pending: keep the report; it is applied with the payment.
    KeepUntilPaid,
    /// The order was never paid (failed, cancelled, expired): keep the report for an admin.
    Unpaid(String),
    /// The reports add up to nothing new (a lower running total, a repeat in another form).
    Nothing,
    /// The order moves along the refund path and the refunded share of its credits comes back.
    Refund {
        /// The order after the refund.
        order: Order,
        /// Credits to take back (credits orders).
        clawback: Option<Takeback>,
    },
}

/// A refund of `order`, where `all` is every report kept against it, the new one included.
#[must_use]
pub fn decide_order_refund(order: &Order, all: &[KeptRefund]) -> OrderRefundDecision {
    let price = order.plan().price;
    let applied = match (order.status(), order.refunded()) {
        (OrderStatus::Pending, _) => return OrderRefundDecision::KeepUntilPaid,
        (_, Some(refunded)) => refunded,
        (status, None) => {
            return OrderRefundDecision::Unpaid(format!("refund of a {status} order"));
        }
    };
    let granted = credits_granted(order);
    let mut next = order.clone();
    match takeback(order, applied, all) {
        Some((step, back)) if next.refund(step.after) == Ok(Transition::Applied) => {
            assert!(
                next.refunded()
                    .is_some_and(|r| r.amount_minor() > applied.amount_minor()
                        && r.amount_minor() <= price.amount_minor()),
                "a refund moves the refunded total up, never past the order's price"
            );
            OrderRefundDecision::Refund {
                order: next,
                clawback: granted.map(|_| back),
            }
        }
        _ => OrderRefundDecision::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{OrderId, PlanId, UserId};
    use crate::money::Currency;
    use crate::order::PlanSnapshot;
    use crate::provider::ProviderId;
    use crate::refund::RefundForm;

    fn usd(minor: i64) -> Money {
        Money::from_minor(minor, Currency::Usd).unwrap()
    }

    fn pack() -> Order {
        pack_with(None)
    }

    fn pack_with(bonus: Option<crate::plan::PackBonus>) -> Order {
        let plan = PlanSnapshot {
            bonus,
            plan_id: PlanId::new("pack").unwrap(),
            plan_type: PlanType::Credits,
            price: usd(1000),
            credits: Some(Credits::from_whole(100).unwrap()),
            duration: None,
            entitlements: None,
        };
        Order::place(
            OrderId::new("ord_1").unwrap(),
            UserId::new("usr_1").unwrap(),
            ProviderId::CardGateway,
            plan,
            Timestamp::from_unix_millis(0),
            60_000,
        )
    }

    fn total(minor: i64) -> KeptRefund {
        KeptRefund {
            form: RefundForm::Total,
            amount: usd(minor),
        }
    }

    #[test]
    fn a_payment_of_another_amount_is_a_mismatch_and_a_right_one_grants() {
        let order = pack();
        let at = Timestamp::from_unix_millis(5);
        assert!(matches!(
            decide_payment(&order, usd(1), at, &[]),
            PaymentDecision::Mismatch(_)
        ));
        let PaymentDecision::Paid {
            order: Some(paid),
            grant: Some(grant),
            clawback: None,
        } = decide_payment(&order, usd(1000), at, &[])
        else {
            panic!("not paid")
        };
        assert!(matches!(paid.status(), OrderStatus::Paid { .. }));
        assert_eq!(grant.credits, Credits::from_whole(100).unwrap());
    }

    #[test]
    fn refunds_kept_before_the_payment_are_taken_back_with_it() {
        let decision = decide_payment(
            &pack(),
            usd(1000),
            Timestamp::from_unix_millis(5),
            &[total(500)],
        );
        let PaymentDecision::Paid {
            order: Some(order),
            clawback: Some(clawback),
            ..
        } = decision
        else {
            panic!("not paid")
        };
        assert!(matches!(
            order.status(),
            OrderStatus::PartiallyRefunded { .. }
        ));
        assert_eq!(clawback.credits, Credits::from_whole(50).unwrap());
        assert_eq!(
            clawback.bonus, None,
            "a pack without a bonus takes none back"
        );
    }

    #[test]
    fn late_money_failures_and_refunds_follow_the_order_s_state() {
        let mut cancelled = pack();
        cancelled.cancel().unwrap();
        let at = Timestamp::from_unix_millis(5);
        assert!(matches!(
            decide_payment(&cancelled, usd(1000), at, &[]),
            PaymentDecision::Late(_)
        ));
        assert!(matches!(
            decide_failure(&cancelled, "x"),
            FailureDecision::Ignored(_)
        ));
        assert!(matches!(
            decide_failure(&pack(), "x"),
            FailureDecision::Failed(_)
        ));
        assert_eq!(
            decide_order_refund(&pack(), &[total(100)]),
            OrderRefundDecision::KeepUntilPaid
        );
        assert!(matches!(
            decide_order_refund(&cancelled, &[total(100)]),
            OrderRefundDecision::Unpaid(_)
        ));
        let mut paid = pack();
        paid.mark_paid(at).unwrap();
        let OrderRefundDecision::Refund { order, clawback } =
            decide_order_refund(&paid, &[total(1000)])
        else {
            panic!("not refunded")
        };
        assert!(matches!(order.status(), OrderStatus::Refunded { .. }));
        assert_eq!(
            clawback.map(|b| b.credits),
            Some(Credits::from_whole(100).unwrap())
        );
        assert_eq!(
            decide_order_refund(&order, &[total(1000), total(400)]),
            OrderRefundDecision::Nothing
        );
    }

    #[test]
    fn a_packs_bonus_is_granted_with_its_own_expiry_and_taken_back_in_the_refunded_share() {
        let bonus = crate::plan::PackBonus {
            credits: Credits::from_whole(20).unwrap(),
            expires_in_days: Some(30),
        };
        let order = pack_with(Some(bonus));
        let at = Timestamp::from_unix_millis(1_000);
        let PaymentDecision::Paid {
            order: Some(paid),
            grant: Some(grant),
            clawback: None,
        } = decide_payment(&order, usd(1000), at, &[])
        else {
            panic!("not paid")
        };
        let expiry = Timestamp::from_unix_millis(1_000 + 30 * 86_400_000);
        assert_eq!(grant.bonus, Some((bonus.credits, Some(expiry))));
        let OrderRefundDecision::Refund {
            clawback: Some(back),
            ..
        } = decide_order_refund(&paid, &[total(250)])
        else {
            panic!("not refunded")
        };
        // The pack's 100 credits count the 20 of bonus in: 80 paid, 20 bonus.
        assert_eq!(grant.credits, Credits::from_whole(80).unwrap());
        assert_eq!(back.credits, Credits::from_whole(20).unwrap());
        assert_eq!(back.bonus, Some(Credits::from_whole(5).unwrap()));
    }
}
