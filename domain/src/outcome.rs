//! What a verified provider event came to: the names the webhook inbox and `/metrics` show.

use std::fmt;

/// What one verified provider event came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventOutcome {
    /// It changed what it names.
    Applied,
    /// The same delivery (provider and event id) was handled before.
    Duplicate,
    /// An event type or state Tally does not act on.
    Ignored,
    /// Older than what the subscription already knows, or a period that overlaps one paid.
    Stale,
    /// It does not match what was sold (amount, currency, plan type, period, merchant).
    Mismatch,
    /// Money for an order that had already failed, expired or been cancelled: kept for an admin.
    LatePayment,
    /// No order of this provider matches.
    UnknownOrder,
    /// No subscription of this provider matches.
    UnknownSubscription,
    /// What it says is already so (a second event for the same fact).
    DuplicateState,
    /// A refund of an order that was never paid.
    RefundRefused,
    /// A refund of a payment that has not arrived yet: kept, and applied with the payment.
    RefundKept,
    /// Validly signed, but for another merchant, app, store or mode: acknowledged, not applied.
    ForeignMerchant,
}

impl EventOutcome {
    /// Every outcome.
    pub const ALL: [EventOutcome; 12] = [
        EventOutcome::Applied,
        EventOutcome::Duplicate,
        EventOutcome::Ignored,
        EventOutcome::Stale,
        EventOutcome::Mismatch,
        EventOutcome::LatePayment,
        EventOutcome::UnknownOrder,
        EventOutcome::UnknownSubscription,
        EventOutcome::DuplicateState,
        EventOutcome::RefundRefused,
        EventOutcome::RefundKept,
        EventOutcome::ForeignMerchant,
    ];

    /// The outcome a stable name names, if any.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.code() == code)
    }

    /// The stable name.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            EventOutcome::Applied => "applied",
            EventOutcome::Duplicate => "duplicate",
            EventOutcome::Ignored => "ignored",
            EventOutcome::Stale => "stale",
            EventOutcome::Mismatch => "mismatch",
            EventOutcome::LatePayment => "late_payment",
            EventOutcome::UnknownOrder => "unknown_order",
            EventOutcome::UnknownSubscription => "unknown_subscription",
            EventOutcome::DuplicateState => "duplicate_state",
            EventOutcome::RefundRefused => "refund_refused",
            EventOutcome::RefundKept => "refund_kept",
            EventOutcome::ForeignMerchant => "foreign_merchant",
        }
    }
}

impl fmt::Display for EventOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}
