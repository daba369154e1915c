//! Which payment paid a subscription period, for the providers whose subscription events name
//! no payment (Dodo Payments, Waffo Pancake): the gateway reads the subscription's payments and
//! picks the one made in the period's time window. Each provider decides which of its payments
//! count (succeeded, of this subscription, not zero) and reads their times.

use domain::{BillingPeriod, Timestamp};

/// How long before its period starts the charge of a subscription period may be made: the
/// first charge precedes the first period's start by the seconds the checkout takes (or the
/// period starts when the first payment succeeds), a renewal is charged on the billing date.
pub const CHARGE_LEAD_MS: i64 = 86_400_000;

/// The id of the payment that paid `period`, among `payments` (when each was made, its id):
/// one made from [`CHARGE_LEAD_MS`] before the period's start until its end; the earliest for
/// the first period (`first`), else the latest (a retried charge after a failed one). `None`
/// when there is none (a free trial).
#[must_use]
pub fn charge_of_period<'a>(
    period: BillingPeriod,
    first: bool,
    payments: impl Iterator<Item = (Timestamp, &'a str)>,
) -> Option<String> {
    let from = period.start().unix_millis().saturating_sub(CHARGE_LEAD_MS);
    let until = period.end().unix_millis();
    let mut candidates: Vec<(i64, &str)> = payments
        .map(|(at, id)| (at.unix_millis(), id))
        .filter(|(at, _)| from <= *at && *at < until)
        .collect();
    candidates.sort_unstable();
    let chosen = if first {
        candidates.first()
    } else {
        candidates.last()
    };
    chosen.map(|(_, id)| (*id).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: i64 = 86_400_000;

    fn at(day: i64) -> Timestamp {
        Timestamp::from_unix_millis(day * DAY_MS)
    }

    #[test]
    fn the_first_period_takes_the_earliest_and_a_renewal_the_latest_payment_in_its_window() {
        let period = BillingPeriod::new(at(10), at(40)).unwrap();
        let payments = [
            (at(8), "too-early"),
            (at(9), "a"),
            (at(20), "b"),
            (at(40), "too-late"),
        ];
        assert_eq!(
            charge_of_period(period, true, payments.into_iter()).as_deref(),
            Some("a")
        );
        assert_eq!(
            charge_of_period(period, false, payments.into_iter()).as_deref(),
            Some("b")
        );
        assert_eq!(charge_of_period(period, true, std::iter::empty()), None);
    }
}
