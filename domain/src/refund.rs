//! Refunds and lost disputes of one payment, whatever form the provider reports them in.
//!
//! Providers tell refunds three ways: a running total for the payment (Stripe, Alipay, Dodo,
//! Creem), one refund's own amount with its id (WeChat Pay, PayPal sales), or a dispute the
//! merchant lost (a full refund). Every report is kept against the payment it names — even
//! when that payment has not arrived yet — and the payment's refunded total is computed from
//! all of them, so that the result is the same in any order and however often each report is
//! delivered:
//!
//! - the largest running total reported,
//! - or the sum of the individual refunds (each id once),
//! - whichever is larger; the whole price after a lost dispute; never more than the price.

use std::fmt;

use crate::credits::Credits;
use crate::ledger::refund_share;
use crate::money::Money;

/// The form a refund report takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundForm {
    /// The provider's running total refunded for the payment.
    Total,
    /// One refund's own amount (refunds with different ids add up).
    One,
    /// A dispute the merchant lost: the whole payment.
    DisputeLost,
}

impl RefundForm {
    /// The stable code used in storage.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            RefundForm::Total => "total",
            RefundForm::One => "one",
            RefundForm::DisputeLost => "dispute_lost",
        }
    }

    /// The form for a stored code.
    #[must_use]
    pub fn from_code(code: &str) -> Option<Self> {
        [RefundForm::Total, RefundForm::One, RefundForm::DisputeLost]
            .into_iter()
            .find(|f| f.code() == code)
    }
}

/// One refund report as kept against a payment: its form and amount (for a lost dispute, the
/// payment's price when it was recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptRefund {
    /// How the provider reported it.
    pub form: RefundForm,
    /// The amount the report states.
    pub amount: Money,
}

/// Why a refund report cannot be of a payment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefundMismatch {
    /// Another currency than the payment's.
    #[error("refund in {refund}, payment in {paid}")]
    Currency {
        /// The refund's currency code.
        refund: &'static str,
        /// The payment's currency code.
        paid: &'static str,
    },
    /// Zero, or more than the payment.
    #[error("refund of {refund} against a payment of {paid}")]
    OutOfRange {
        /// The refund.
        refund: Money,
        /// The payment.
        paid: Money,
    },
}

/// Check that a report of `amount` can be of a payment of `paid`: same currency, more than
/// zero, at most the payment.
///
/// # Errors
/// [`RefundMismatch`].
pub fn check_refund(paid: Money, amount: Money) -> Result<(), RefundMismatch> {
    if amount.currency() != paid.currency() {
        return Err(RefundMismatch::Currency {
            refund: amount.currency().code(),
            paid: paid.currency().code(),
        });
    }
    if amount.is_zero() || amount.amount_minor() > paid.amount_minor() {
        return Err(RefundMismatch::OutOfRange {
            refund: amount,
            paid,
        });
    }
    Ok(())
}

/// The total refunded on a payment of `paid`, from every report kept against it (each already
/// checked with [`check_refund`]; one of another currency is left out).
#[must_use]
pub fn refunded_total(paid: Money, kept: &[KeptRefund]) -> Money {
    let price = paid.amount_minor();
    let mut largest_total = 0_i64;
    let mut sum_of_ones = 0_i64;
    for refund in kept
        .iter()
        .filter(|r| r.amount.currency() == paid.currency())
    {
        let amount = refund.amount.amount_minor().max(0);
        match refund.form {
            RefundForm::DisputeLost => return paid,
            RefundForm::Total => largest_total = largest_total.max(amount),
            RefundForm::One => sum_of_ones = sum_of_ones.saturating_add(amount),
        }
    }
    let total = largest_total.max(sum_of_ones).min(price);
    let refunded = Money::from_minor(total, paid.currency()).unwrap_or(paid);
    assert!(
        refunded.amount_minor() <= price,
        "a payment's refunded total never exceeds the payment"
    );
    refunded
}

/// What new refunds of one payment take back, given what was applied before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefundStep {
    /// The payment's refunded total before.
    pub before: Money,
    /// Its refunded total now.
    pub after: Money,
    /// Whether the whole payment is now refunded.
    pub full: bool,
    /// The credits to take back now: the share of the grant the step refunds.
    pub clawback: Credits,
}

impl fmt::Display for RefundStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refunded {} → {}", self.before, self.after)
    }
}

/// The step from `applied` (the refunded total already acted on) to what `kept` adds up to, for
/// a payment of `paid` that granted `granted` credits (if any). `None` when nothing new is
/// refunded. The clawback is the difference of the two totals' shares, so that refunds of one
/// payment never take back more, nor less, than the refunded share of its grant in sum.
#[must_use]
pub fn refund_step(
    paid: Money,
    granted: Option<Credits>,
    applied: Money,
    kept: &[KeptRefund],
) -> Option<RefundStep> {
    let after = refunded_total(paid, kept);
    if after.currency() != applied.currency() && !applied.is_zero() {
        return None;
    }
    if after.amount_minor() <= applied.amount_minor() {
        return None;
    }
    let clawback = granted.map_or(Credits::ZERO, |credits| {
        let price = paid.amount_minor();
        let now = refund_share(credits, after.amount_minor(), price);
        let then = if applied.is_zero() {
            Credits::ZERO
        } else {
            refund_share(credits, applied.amount_minor(), price)
        };
        now.checked_sub(then).unwrap_or(Credits::ZERO)
    });
    assert!(
        after.amount_minor() > applied.amount_minor()
            && after.amount_minor() <= paid.amount_minor(),
        "a refund step moves the refunded total up, never past the payment"
    );
    assert!(
        granted.is_none_or(|g| clawback <= g),
        "a refund step never takes back more than the payment granted"
    );
    Some(RefundStep {
        before: applied,
        after,
        full: after.amount_minor() >= paid.amount_minor(),
        clawback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::Currency;

    fn cny(minor: i64) -> Money {
        Money::from_minor(minor, Currency::Cny).unwrap()
    }

    fn one(minor: i64) -> KeptRefund {
        KeptRefund {
            form: RefundForm::One,
            amount: cny(minor),
        }
    }

    fn total(minor: i64) -> KeptRefund {
        KeptRefund {
            form: RefundForm::Total,
            amount: cny(minor),
        }
    }

    #[test]
    fn individual_refunds_add_up_and_running_totals_take_the_largest() {
        assert_eq!(
            refunded_total(cny(6800), &[one(3400), one(3400)]),
            cny(6800)
        );
        assert_eq!(
            refunded_total(cny(6800), &[total(5000), total(3000)]),
            cny(5000)
        );
        assert_eq!(refunded_total(cny(6800), &[one(9000)]), cny(6800));
        let dispute = KeptRefund {
            form: RefundForm::DisputeLost,
            amount: cny(1),
        };
        assert_eq!(refunded_total(cny(6800), &[one(100), dispute]), cny(6800));
    }

    #[test]
    fn two_half_refunds_take_back_the_whole_grant_in_two_steps() {
        let granted = Some(Credits::from_whole(1000).unwrap());
        let first = refund_step(cny(6800), granted, cny(0), &[one(3400)]).unwrap();
        assert_eq!(first.clawback, Credits::from_whole(500).unwrap());
        assert!(!first.full);
        let second = refund_step(cny(6800), granted, first.after, &[one(3400), one(3400)]).unwrap();
        assert_eq!(second.clawback, Credits::from_whole(500).unwrap());
        assert!(second.full);
        assert_eq!(
            refund_step(cny(6800), granted, cny(6800), &[one(3400), one(3400)]),
            None
        );
    }

    #[test]
    fn a_refund_must_be_of_the_payment_s_currency_and_within_it() {
        assert!(check_refund(cny(100), cny(100)).is_ok());
        assert!(matches!(
            check_refund(cny(100), cny(101)),
            Err(RefundMismatch::OutOfRange { .. })
        ));
        assert!(matches!(
            check_refund(cny(100), cny(0)),
            Err(RefundMismatch::OutOfRange { .. })
        ));
        let usd = Money::from_minor(100, Currency::Usd).unwrap();
        assert!(matches!(
            check_refund(cny(100), usd),
            Err(RefundMismatch::Currency { .. })
        ));
    }
}
