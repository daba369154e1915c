//! Automatic top-up: when a spend takes an account's balance below its threshold, buy a pack
//! with the payment method the owner saved for it, off-session.
//!
//! The rule lives on the account ([`TopUpRule`]); its state ([`TopUpState`]) counts this
//! calendar month's charges, the declines in a row and the cool-off after the last one. Three
//! decisions, each pure and each taken where its facts are exact:
//! - [`decide_request`], in the spend's own transaction under the balance row's lock: whether
//!   the spend asks for a top-up (the database then keeps at most one in flight per account);
//! - [`decide_charge`], in the transaction that starts the charge, under the rule's row: whether
//!   the charge may go out now (the rule still on, a method saved, no cool-off, the monthly
//!   caps, the customer's ceiling);
//! - [`decide_decline`], when the provider declines: the cool-off, or the rule turned off after
//!   too many declines in a row.
//!
//! Credits never come from these decisions: only the provider's verified payment event of the
//! top-up's order grants them, through the same checks as any payment.

use crate::{
    Credits, Enforcement, LimitScope, LimitWindow, Money, PlanId, SpendLimit, SpendWindow,
    Timestamp,
};

/// The most top-ups one month allows when the rule says none (the operator's cap still applies).
pub const MAX_TOP_UPS_PER_MONTH: u32 = 1000;

/// An account's automatic top-up rule, as its owner set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopUpRule {
    /// Whether it is on.
    pub enabled: bool,
    /// Below this balance a spend asks for a top-up.
    pub threshold: Credits,
    /// The credits pack to buy.
    pub plan: PlanId,
    /// The most top-ups per calendar month (UTC).
    pub max_per_month: u32,
    /// The most money per calendar month, in the pack's currency, when set.
    pub max_amount_per_month: Option<i64>,
}

/// Why a rule was turned off by Tally rather than by its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisabledReason {
    /// Too many declines in a row.
    Declines,
    /// A top-up was refunded or lost in a dispute.
    Refunded,
    /// The saved payment method was removed.
    MethodRemoved,
}

impl DisabledReason {
    /// The stable code stored and shown.
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            DisabledReason::Declines => "declines",
            DisabledReason::Refunded => "refunded",
            DisabledReason::MethodRemoved => "method_removed",
        }
    }

    /// The reason a code names.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        [Self::Declines, Self::Refunded, Self::MethodRemoved]
            .into_iter()
            .find(|r| r.code() == code)
    }
}

/// What a rule has done lately, as stored with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopUpState {
    /// The start of the month the counts below are of.
    pub month_start: Timestamp,
    /// Charges started that month (a declined one is given back).
    pub month_count: u32,
    /// Money charged that month, in the pack's currency.
    pub month_amount: i64,
    /// Declines in a row since the last success.
    pub declines: u32,
    /// No charge before this moment.
    pub cool_off_until: Option<Timestamp>,
    /// Whether a saved method is attached.
    pub has_method: bool,
}

impl TopUpState {
    /// The counts as of `now`: zero once a new month has begun.
    #[must_use]
    pub fn as_of(self, now: Timestamp) -> Self {
        let start = LimitWindow::Month.start_of(now);
        if self.month_start == start {
            self
        } else {
            Self {
                month_start: start,
                month_count: 0,
                month_amount: 0,
                ..self
            }
        }
    }
}

/// The operator's rails, from configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopUpRails {
    /// How long after a decline (or a charge that needs the buyer) no charge goes out, in ms.
    pub cool_off_ms: i64,
    /// Declines in a row that turn the rule off.
    pub max_declines: u32,
    /// The most top-ups per account and calendar month, whatever the rule says.
    pub max_per_month: u32,
}

impl Default for TopUpRails {
    fn default() -> Self {
        Self {
            cool_off_ms: 24 * 3_600_000,
            max_declines: 3,
            max_per_month: 10,
        }
    }
}

/// Why no top-up happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoTopUp {
    /// The rule is off.
    Off,
    /// No payment method is saved for it.
    NoMethod,
    /// The balance is at or above the threshold.
    AboveThreshold,
    /// A decline's (or an authentication's) cool-off is running.
    CoolingOff,
    /// The rule's own monthly cap (top-ups or money) is reached.
    MonthlyCap,
    /// The operator's monthly cap per account is reached.
    OperatorCap,
    /// The top-up would take this month's top-ups past the customer's monthly ceiling.
    Ceiling,
}

impl NoTopUp {
    /// The stable code told in events and problems.
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            NoTopUp::Off => "disabled",
            NoTopUp::NoMethod => "no_payment_method",
            NoTopUp::AboveThreshold => "above_threshold",
            NoTopUp::CoolingOff => "cooling_off",
            NoTopUp::MonthlyCap => "monthly_cap",
            NoTopUp::OperatorCap => "operator_cap",
            NoTopUp::Ceiling => "ceiling",
        }
    }
}

/// The checks every decision shares: on, a method, no cool-off, room under both monthly caps
/// for one more charge of `price`.
fn may_charge(
    rule: &TopUpRule,
    state: TopUpState,
    rails: TopUpRails,
    price: Option<Money>,
    now: Timestamp,
) -> Result<(), NoTopUp> {
    if !rule.enabled {
        return Err(NoTopUp::Off);
    }
    if !state.has_method {
        return Err(NoTopUp::NoMethod);
    }
    if state.cool_off_until.is_some_and(|until| now < until) {
        return Err(NoTopUp::CoolingOff);
    }
    let state = state.as_of(now);
    if state.month_count >= rails.max_per_month {
        return Err(NoTopUp::OperatorCap);
    }
    if state.month_count >= rule.max_per_month {
        return Err(NoTopUp::MonthlyCap);
    }
    if let (Some(cap), Some(price)) = (rule.max_amount_per_month, price) {
        let after = state.month_amount.checked_add(price.amount_minor());
        if after.is_none_or(|after| after > cap) {
            return Err(NoTopUp::MonthlyCap);
        }
    }
    Ok(())
}

/// Whether a spend that left the balance at `after` asks for a top-up: the rule on, a method
/// saved, no cool-off, room under the rule's own monthly caps. The database keeps at most one
/// in flight per account: a spend while one is in flight asks again and is refused there.
///
/// # Errors
/// [`NoTopUp`].
pub fn decide_request(
    rule: &TopUpRule,
    state: TopUpState,
    after: Credits,
    now: Timestamp,
) -> Result<(), NoTopUp> {
    if after >= rule.threshold {
        return Err(NoTopUp::AboveThreshold);
    }
    // The operator's cap is the charge's to check: a charge it refuses cools the rule off
    // until the month ends, so no spend asks again before then.
    let unbounded = TopUpRails {
        max_per_month: u32::MAX,
        ..TopUpRails::default()
    };
    may_charge(rule, state, unbounded, None, now)
}

/// The start of the calendar month (UTC) after the one `now` is in: when a monthly cap opens
/// again.
#[must_use]
pub fn next_month(now: Timestamp) -> Timestamp {
    LimitWindow::Month.end_of(LimitWindow::Month.start_of(now))
}

/// The customer's monthly ceiling as it bears on top-ups: the smallest hard monthly limit on
/// the whole account, and the credits automatic top-ups granted this month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CeilingFacts {
    /// The ceiling.
    pub ceiling: Credits,
    /// Credits of this month's top-ups so far (charges started, not declined).
    pub topped_up: Credits,
}

/// The customer's monthly ceiling among an account's limits: the smallest hard limit of a
/// calendar month that counts every spend of the account (no feature, model, key or member).
#[must_use]
pub fn monthly_ceiling<'a>(
    limits: impl IntoIterator<Item = (&'a LimitScope, &'a SpendLimit)>,
) -> Option<Credits> {
    limits
        .into_iter()
        .filter(|(scope, limit)| {
            **scope == LimitScope::default()
                && limit.window == SpendWindow::Month
                && limit.enforcement == Enforcement::Hard
        })
        .map(|(_, limit)| limit.credits)
        .min()
}

/// Whether the charge of a pack of `credits` for `price` may go out now.
///
/// # Errors
/// [`NoTopUp`].
pub fn decide_charge(
    rule: &TopUpRule,
    state: TopUpState,
    rails: TopUpRails,
    price: Money,
    credits: Credits,
    ceiling: Option<CeilingFacts>,
    now: Timestamp,
) -> Result<(), NoTopUp> {
    may_charge(rule, state, rails, Some(price), now)?;
    if let Some(facts) = ceiling {
        let after = facts.topped_up.checked_add(credits).ok();
        if after.is_none_or(|after| after > facts.ceiling) {
            return Err(NoTopUp::Ceiling);
        }
    }
    Ok(())
}

/// What a decline does to the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDecline {
    /// No charge before `until`.
    CoolOff {
        /// The end of the cool-off.
        until: Timestamp,
        /// Declines in a row now.
        declines: u32,
    },
    /// The rule is turned off (the owner turns it on again).
    Disable {
        /// Declines in a row now.
        declines: u32,
    },
}

/// The rule's fate after a decline, the `declines`-th in a row before it.
#[must_use]
pub fn decide_decline(declines: u32, rails: TopUpRails, now: Timestamp) -> AfterDecline {
    let declines = declines.saturating_add(1);
    if declines >= rails.max_declines.max(1) {
        AfterDecline::Disable { declines }
    } else {
        AfterDecline::CoolOff {
            until: Timestamp::from_unix_millis(now.unix_millis().saturating_add(rails.cool_off_ms)),
            declines,
        }
    }
}

/// Where a top-up stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopUpStatus {
    /// Asked for by a spend; no charge yet.
    Requested,
    /// Its charge went to the provider; credits come with the provider's payment event.
    Charging,
    /// Paid and granted.
    Succeeded,
    /// Declined, or refused before charging (a cap, the rule off).
    Failed,
    /// The provider needs the buyer to authenticate; they got a link to finish it.
    AuthenticationRequired,
}

impl TopUpStatus {
    /// Every status.
    pub const ALL: [TopUpStatus; 5] = [
        TopUpStatus::Requested,
        TopUpStatus::Charging,
        TopUpStatus::Succeeded,
        TopUpStatus::Failed,
        TopUpStatus::AuthenticationRequired,
    ];

    /// The stable code stored and shown.
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            TopUpStatus::Requested => "requested",
            TopUpStatus::Charging => "charging",
            TopUpStatus::Succeeded => "succeeded",
            TopUpStatus::Failed => "failed",
            TopUpStatus::AuthenticationRequired => "authentication_required",
        }
    }

    /// The status a code names.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }

    /// Whether it is in flight (at most one per account).
    #[must_use]
    pub fn in_flight(self) -> bool {
        matches!(self, TopUpStatus::Requested | TopUpStatus::Charging)
    }

    /// Whether the payment event of its order may still settle it: a charge in flight, or one
    /// the buyer was sent to finish.
    #[must_use]
    pub fn awaits_payment(self) -> bool {
        matches!(
            self,
            TopUpStatus::Charging | TopUpStatus::AuthenticationRequired
        )
    }
}

#[cfg(test)]
mod tests;
