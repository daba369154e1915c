use proptest::prelude::*;

use super::*;
use crate::Currency;

fn c(credits: i64) -> Credits {
    Credits::from_hundredths(credits * 100).unwrap()
}

fn usd(minor: i64) -> Money {
    Money::from_minor(minor, Currency::Usd).unwrap()
}

/// 2026-12-01T00:00:00Z.
const DEC_1: i64 = 1_796_083_200_000;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn rule() -> TopUpRule {
    TopUpRule {
        enabled: true,
        threshold: c(100),
        plan: PlanId::new("credits_card_500").unwrap(),
        max_per_month: 5,
        max_amount_per_month: None,
    }
}

fn state() -> TopUpState {
    TopUpState {
        month_start: at(DEC_1),
        month_count: 0,
        month_amount: 0,
        declines: 0,
        cool_off_until: None,
        has_method: true,
    }
}

#[test]
fn a_spend_below_the_threshold_asks_for_a_top_up() {
    let now = at(DEC_1 + 1000);
    assert_eq!(decide_request(&rule(), state(), c(99), now), Ok(()));
    assert_eq!(
        decide_request(&rule(), state(), c(100), now),
        Err(NoTopUp::AboveThreshold),
        "at the threshold is not below it"
    );
    let off = TopUpRule {
        enabled: false,
        ..rule()
    };
    assert_eq!(decide_request(&off, state(), c(0), now), Err(NoTopUp::Off));
    let no_method = TopUpState {
        has_method: false,
        ..state()
    };
    assert_eq!(
        decide_request(&rule(), no_method, c(0), now),
        Err(NoTopUp::NoMethod)
    );
}

#[test]
fn a_cool_off_holds_every_request_until_it_ends() {
    let rails = TopUpRails::default();
    let now = at(DEC_1 + 1000);
    let AfterDecline::CoolOff { until, declines } = decide_decline(0, rails, now) else {
        panic!("the first decline cools off");
    };
    assert_eq!(declines, 1);
    assert_eq!(until, at(DEC_1 + 1000 + 24 * 3_600_000));
    let cooling = TopUpState {
        cool_off_until: Some(until),
        declines,
        ..state()
    };
    let just_before = at(until.unix_millis() - 1);
    assert_eq!(
        decide_request(&rule(), cooling, c(0), just_before),
        Err(NoTopUp::CoolingOff)
    );
    assert_eq!(decide_request(&rule(), cooling, c(0), until), Ok(()));
}

#[test]
fn the_third_decline_in_a_row_turns_the_rule_off() {
    let rails = TopUpRails::default();
    let now = at(DEC_1);
    assert!(matches!(
        decide_decline(1, rails, now),
        AfterDecline::CoolOff { declines: 2, .. }
    ));
    assert_eq!(
        decide_decline(2, rails, now),
        AfterDecline::Disable { declines: 3 }
    );
}

#[test]
fn the_customers_ceiling_counts_this_months_top_ups() {
    let rails = TopUpRails::default();
    let now = at(DEC_1);
    let ceiling = |topped_up| {
        Some(CeilingFacts {
            ceiling: c(1000),
            topped_up: c(topped_up),
        })
    };
    let charge = |facts| decide_charge(&rule(), state(), rails, usd(500), c(500), facts, now);
    assert_eq!(charge(ceiling(500)), Ok(()), "exactly at the ceiling");
    assert_eq!(charge(ceiling(501)), Err(NoTopUp::Ceiling));
    assert_eq!(charge(None), Ok(()));
}

#[test]
fn a_new_month_starts_the_counts_again() {
    let full = TopUpState {
        month_count: 5,
        month_amount: 2500,
        ..state()
    };
    let december = at(DEC_1 + 1000);
    assert_eq!(
        decide_request(&rule(), full, c(0), december),
        Err(NoTopUp::MonthlyCap)
    );
    let january = at(DEC_1 + 31 * 86_400_000);
    assert_eq!(decide_request(&rule(), full, c(0), january), Ok(()));
    assert_eq!(full.as_of(january).month_count, 0);
}

#[test]
fn the_operators_cap_binds_whatever_the_rule_says() {
    let rails = TopUpRails {
        max_per_month: 2,
        ..TopUpRails::default()
    };
    let two = TopUpState {
        month_count: 2,
        ..state()
    };
    assert_eq!(
        decide_charge(&rule(), two, rails, usd(500), c(500), None, at(DEC_1)),
        Err(NoTopUp::OperatorCap)
    );
    assert_eq!(
        decide_request(&rule(), two, c(0), at(DEC_1)),
        Ok(()),
        "a request leaves the operator's cap to the charge"
    );
    assert_eq!(next_month(at(DEC_1 + 5)), at(DEC_1 + 31 * 86_400_000));
}

#[test]
fn codes_read_back() {
    for status in TopUpStatus::ALL {
        assert_eq!(TopUpStatus::parse(status.code()), Some(status));
    }
    for reason in [
        DisabledReason::Declines,
        DisabledReason::Refunded,
        DisabledReason::MethodRemoved,
    ] {
        assert_eq!(DisabledReason::parse(reason.code()), Some(reason));
    }
    assert!(TopUpStatus::Charging.in_flight());
    assert!(!TopUpStatus::AuthenticationRequired.in_flight());
    assert!(TopUpStatus::AuthenticationRequired.awaits_payment());
}

proptest! {
    /// Charges started one after another through `decide_charge` (each counted as the store
    /// counts it) never pass either monthly cap, whatever the prices, caps and timing.
    #[test]
    fn the_monthly_caps_are_never_passed(
        max_per_month in 0u32..8,
        max_amount in proptest::option::of(0i64..5000),
        operator in 0u32..8,
        steps in proptest::collection::vec((1i64..2000, 0i64..20 * 86_400_000, any::<bool>()), 1..60),
    ) {
        let rails = TopUpRails { max_per_month: operator, ..TopUpRails::default() };
        let rule = TopUpRule { max_per_month, max_amount_per_month: max_amount, ..rule() };
        let mut state = state();
        let mut now = DEC_1;
        for (price, gap, declined) in steps {
            now += gap;
            let at_now = at(now);
            if decide_charge(&rule, state, rails, usd(price), c(1), None, at_now).is_ok() {
                let counted = state.as_of(at_now);
                state = TopUpState {
                    month_count: counted.month_count + 1,
                    month_amount: counted.month_amount + price,
                    ..counted
                };
                if declined {
                    // A decline gives its charge back, as the store does.
                    state.month_count -= 1;
                    state.month_amount -= price;
                }
            }
            let counted = state.as_of(at_now);
            prop_assert!(counted.month_count <= max_per_month.min(operator));
            if let Some(cap) = max_amount {
                prop_assert!(counted.month_amount <= cap);
            }
        }
    }
}
