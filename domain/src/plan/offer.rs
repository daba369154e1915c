//! Offers (issue 19): plans grouped by what a buyer chooses, not by how they pay.
//!
//! A plan may name a [`PlanGroup`]; every listed plan of one group is one offer ("Pro"), whose
//! plans differ only by billing interval, currency and provider. The pricing page shows one card
//! per offer and interval, a price in the reader's currency, and the offer's providers as payment
//! methods. A plan without a group is an offer of its own.
//!
//! Everything here is pure: the reader's preferred currencies and the plans come in, the choice
//! comes out; the saving between two intervals is computed in integer minor units.

mod cards;

use std::fmt;

use super::{Duration, Plan, PlanType};
use crate::ids::PlanId;
use crate::money::Currency;
use crate::plan::Locale;

pub use cards::{CurrencyChoice, Held, Holdings, OfferCard};

/// The longest group slug.
pub const MAX_GROUP_CHARS: usize = 40;

/// The offer a plan belongs to: a short slug (`pro`, `team-2025`): a lower-case letter or digit,
/// then lower-case letters, digits, `-` or `_`, at most [`MAX_GROUP_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlanGroup(String);

/// Why a group slug is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "must be 1 to {MAX_GROUP_CHARS} characters: a lower-case letter or digit, then lower-case \
     letters, digits, '-' or '_'"
)]
pub struct PlanGroupError;

impl PlanGroup {
    /// Parse a group slug.
    ///
    /// # Errors
    /// [`PlanGroupError`] when `slug` is empty, too long or has another character.
    pub fn new(slug: &str) -> Result<Self, PlanGroupError> {
        let starts_well = slug
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let ok = starts_well
            && slug.len() <= MAX_GROUP_CHARS
            && slug
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if ok {
            Ok(PlanGroup(slug.to_owned()))
        } else {
            Err(PlanGroupError)
        }
    }

    /// The slug.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PlanGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How often a plan is paid for, derived from its type and `duration.months`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PlanInterval {
    /// A subscription billed every month.
    Month,
    /// A subscription billed every three months.
    Quarter,
    /// A subscription billed every six months.
    HalfYear,
    /// A subscription billed every year.
    Year,
    /// A subscription billed every this many months (2, 4, 5, 7 to 11).
    Months(u32),
    /// Paid once, access for life.
    Lifetime,
    /// Paid once: a fixed-term one-time plan or a credit pack.
    OneTime,
}

impl PlanInterval {
    /// The interval of a plan of `plan_type` lasting `duration`.
    #[must_use]
    pub fn of(plan_type: PlanType, duration: Option<Duration>) -> Self {
        match (plan_type, duration) {
            (PlanType::Recurring, Some(Duration::Months(m))) => match m.get() {
                1 => PlanInterval::Month,
                3 => PlanInterval::Quarter,
                6 => PlanInterval::HalfYear,
                12 => PlanInterval::Year,
                n => PlanInterval::Months(n),
            },
            (PlanType::OneTime, Some(Duration::Lifetime)) => PlanInterval::Lifetime,
            _ => PlanInterval::OneTime,
        }
    }

    /// The stable code (`month`, `quarter`, `half_year`, `year`, `months`, `lifetime`,
    /// `one_time`), as `/api/plans` and `?period=` spell it; `months` leaves the count to
    /// `duration.months`.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            PlanInterval::Month => "month",
            PlanInterval::Quarter => "quarter",
            PlanInterval::HalfYear => "half_year",
            PlanInterval::Year => "year",
            PlanInterval::Months(_) => "months",
            PlanInterval::Lifetime => "lifetime",
            PlanInterval::OneTime => "one_time",
        }
    }

    /// The interval as a page or a query names it: its code, or `months-<n>` for
    /// [`PlanInterval::Months`], so that every interval has a slug of its own.
    #[must_use]
    pub fn slug(self) -> String {
        match self {
            PlanInterval::Months(n) => format!("months-{n}"),
            other => other.code().to_owned(),
        }
    }

    /// The interval a [`PlanInterval::slug`] names (`months-3` is the quarter); `None` for
    /// anything else.
    #[must_use]
    pub fn from_slug(slug: &str) -> Option<Self> {
        if let Some(count) = slug.strip_prefix("months-") {
            let months: u32 = count.parse().ok()?;
            return match months {
                1 => Some(PlanInterval::Month),
                3 => Some(PlanInterval::Quarter),
                6 => Some(PlanInterval::HalfYear),
                12 => Some(PlanInterval::Year),
                2..=11 => Some(PlanInterval::Months(months)),
                _ => None,
            };
        }
        [
            PlanInterval::Month,
            PlanInterval::Quarter,
            PlanInterval::HalfYear,
            PlanInterval::Year,
            PlanInterval::Lifetime,
            PlanInterval::OneTime,
        ]
        .into_iter()
        .find(|i| i.code() == slug)
    }

    /// The billing period in months, for subscriptions.
    #[must_use]
    pub const fn billing_months(self) -> Option<u32> {
        match self {
            PlanInterval::Month => Some(1),
            PlanInterval::Quarter => Some(3),
            PlanInterval::HalfYear => Some(6),
            PlanInterval::Year => Some(12),
            PlanInterval::Months(n) => Some(n),
            PlanInterval::Lifetime | PlanInterval::OneTime => None,
        }
    }
}

impl fmt::Display for PlanInterval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// What identifies an offer: its group, or the id of the one plan without a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OfferKey {
    /// Plans sharing a group.
    Group(PlanGroup),
    /// A plan of its own.
    Single(PlanId),
}

impl OfferKey {
    /// The key of `plan`'s offer.
    #[must_use]
    pub fn of(plan: &Plan) -> Self {
        match plan.group() {
            Some(group) => OfferKey::Group(group.clone()),
            None => OfferKey::Single(plan.id().clone()),
        }
    }

    /// A slug for page anchors: `group-<slug>` or `plan-<id>`.
    #[must_use]
    pub fn anchor(&self) -> String {
        match self {
            OfferKey::Group(g) => format!("group-{g}"),
            OfferKey::Single(id) => format!("plan-{id}"),
        }
    }
}

/// One offer: its plans in listing order (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer<'p> {
    key: OfferKey,
    plans: Vec<&'p Plan>,
}

/// The plans of one offer that share an interval and a currency: the payment methods of one
/// card, in listing order (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferChoice<'p> {
    /// The interval shown.
    pub interval: PlanInterval,
    /// The currency shown.
    pub currency: Currency,
    /// One plan per payment method.
    pub methods: Vec<&'p Plan>,
}

impl<'p> Offer<'p> {
    /// The offer's key.
    #[must_use]
    pub fn key(&self) -> &OfferKey {
        &self.key
    }

    /// Its plans, in listing order.
    #[must_use]
    pub fn plans(&self) -> &[&'p Plan] {
        &self.plans
    }

    /// The intervals the offer is sold in, shortest first.
    #[must_use]
    pub fn intervals(&self) -> Vec<PlanInterval> {
        let mut intervals: Vec<PlanInterval> = self.plans.iter().map(|p| p.interval()).collect();
        intervals.sort_unstable();
        intervals.dedup();
        intervals
    }

    /// The currencies the offer is priced in at `interval`, the default (its first plan's) first.
    #[must_use]
    pub fn currencies(&self, interval: PlanInterval) -> Vec<Currency> {
        let mut currencies: Vec<Currency> = Vec::new();
        for plan in self.plans.iter().filter(|p| p.interval() == interval) {
            let currency = plan.price().currency();
            if !currencies.contains(&currency) {
                currencies.push(currency);
            }
        }
        currencies
    }

    /// What one card shows: the `wanted` interval when the offer is sold in it, else its
    /// shortest; the first of `preferred` currencies it is priced in there, else its default.
    #[must_use]
    pub fn choose(&self, wanted: Option<PlanInterval>, preferred: &[Currency]) -> OfferChoice<'p> {
        let intervals = self.intervals();
        let interval = wanted
            .filter(|w| intervals.contains(w))
            .or_else(|| intervals.first().copied())
            .expect("an offer always has a plan");
        let currencies = self.currencies(interval);
        let currency = preferred
            .iter()
            .find(|c| currencies.contains(c))
            .or_else(|| currencies.first())
            .copied()
            .expect("an interval of the offer always has a plan");
        OfferChoice {
            interval,
            currency,
            methods: self.plans_at(interval, currency),
        }
    }

    /// The plans of the offer at `interval` and in `currency`, in listing order.
    #[must_use]
    pub fn plans_at(&self, interval: PlanInterval, currency: Currency) -> Vec<&'p Plan> {
        self.plans
            .iter()
            .filter(|p| p.interval() == interval && p.price().currency() == currency)
            .copied()
            .collect()
    }

    /// The saving of paying `longer` instead of `shorter` for the same time, in whole percent
    /// (rounded down), with the first plan of each in `currency`; `None` when either is not
    /// sold in it or there is no saving.
    #[must_use]
    pub fn saving_percent(
        &self,
        shorter: PlanInterval,
        longer: PlanInterval,
        currency: Currency,
    ) -> Option<u32> {
        let short = self.plans_at(shorter, currency).into_iter().next()?;
        let long = self.plans_at(longer, currency).into_iter().next()?;
        saving_percent(short, long)
    }
}

/// The saving of buying `longer` instead of `shorter` over the same time, in whole percent,
/// rounded down: `1 − (long price × short months) / (short price × long months)`. `None` when
/// they are not subscriptions in one currency, or `longer` does not cost less per month.
#[must_use]
pub fn saving_percent(shorter: &Plan, longer: &Plan) -> Option<u32> {
    let short_months = i128::from(shorter.interval().billing_months()?);
    let long_months = i128::from(longer.interval().billing_months()?);
    if shorter.price().currency() != longer.price().currency() {
        return None;
    }
    // Both prices for the same stretch of time: short_months × long_months months.
    let at_short_rate = i128::from(shorter.price().amount_minor()) * long_months;
    let at_long_rate = i128::from(longer.price().amount_minor()) * short_months;
    if at_short_rate <= 0 || at_long_rate >= at_short_rate {
        return None;
    }
    let percent = (at_short_rate - at_long_rate) * 100 / at_short_rate;
    u32::try_from(percent).ok().filter(|p| *p > 0)
}

/// `plans` grouped into offers, in the order of each offer's first plan.
#[must_use]
pub fn group_offers<'p>(plans: impl IntoIterator<Item = &'p Plan>) -> Vec<Offer<'p>> {
    let mut offers: Vec<Offer<'p>> = Vec::new();
    for plan in plans {
        let key = OfferKey::of(plan);
        match offers.iter_mut().find(|o| o.key == key) {
            Some(offer) => offer.plans.push(plan),
            None => offers.push(Offer {
                key,
                plans: vec![plan],
            }),
        }
    }
    offers
}

/// The currency a reader of `locale` most likely pays in, when the locale says: `zh` → CNY,
/// `ja` → JPY, `ko` → KRW, a region with its own currency (`en-GB` → GBP, `zh-HK` → HKD, …),
/// the euro area's languages → EUR, other English → USD.
#[must_use]
pub fn currency_for_locale(locale: &Locale) -> Option<Currency> {
    let region = locale
        .as_str()
        .split('-')
        .skip(1)
        .find(|s| s.len() == 2)
        .map(str::to_ascii_uppercase);
    let by_region = match region.as_deref() {
        Some("GB") => Some(Currency::Gbp),
        Some("HK") => Some(Currency::Hkd),
        Some("SG") => Some(Currency::Sgd),
        Some("AU") => Some(Currency::Aud),
        Some("CA") => Some(Currency::Cad),
        Some("US") => Some(Currency::Usd),
        Some("CN") => Some(Currency::Cny),
        Some("JP") => Some(Currency::Jpy),
        Some("KR") => Some(Currency::Krw),
        Some("DE" | "FR" | "ES" | "IT" | "NL" | "AT" | "BE" | "FI" | "IE" | "PT" | "GR") => {
            Some(Currency::Eur)
        }
        _ => None,
    };
    by_region.or_else(|| match locale.language().as_str() {
        "zh" => Some(Currency::Cny),
        "ja" => Some(Currency::Jpy),
        "ko" => Some(Currency::Krw),
        "de" | "fr" | "es" | "it" | "nl" | "fi" | "pt" | "el" => Some(Currency::Eur),
        "en" => Some(Currency::Usd),
        _ => None,
    })
}

#[cfg(test)]
mod tests;
