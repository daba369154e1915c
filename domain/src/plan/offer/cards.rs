//! Which cards a pricing page shows: the offers at one billing interval, in the reader's
//! currency, and what the reader already holds of each.
//!
//! `/pricing` and `GET /api/offers` both choose their cards here, so a host app's own pricing
//! page shows exactly what Tally's does.

use std::collections::BTreeSet;

use super::{Offer, OfferChoice, PlanInterval, currency_for_locale};
use crate::ids::PlanId;
use crate::money::Currency;
use crate::plan::Locale;

/// The reader's currencies: the one asked for (then only offers priced in it show), and the
/// currencies to show an offer in, in preference order (the asked one, then the locale's).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CurrencyChoice {
    asked: Option<Currency>,
    preferred: Vec<Currency>,
}

/// One card: an offer at one interval and currency, with its payment methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferCard<'o, 'p> {
    /// The offer.
    pub offer: &'o Offer<'p>,
    /// The interval, currency and methods shown.
    pub choice: OfferChoice<'p>,
}

impl CurrencyChoice {
    /// `asked` (a `?currency=`), then the currency of a reader of `locale`.
    #[must_use]
    pub fn new(asked: Option<Currency>, locale: &Locale) -> Self {
        Self {
            asked,
            preferred: asked
                .into_iter()
                .chain(currency_for_locale(locale))
                .collect(),
        }
    }

    /// The currency asked for, if any.
    #[must_use]
    pub fn asked(&self) -> Option<Currency> {
        self.asked
    }

    /// The currencies an offer is shown in, first match first.
    #[must_use]
    pub fn preferred(&self) -> &[Currency] {
        &self.preferred
    }

    /// The cards of `offers` at `wanted` (every offer at its own shortest interval when
    /// `None`): only offers sold at `wanted`, and with an asked currency only offers priced in
    /// it (at that interval); each in the first preferred currency it has there.
    #[must_use]
    pub fn cards<'o, 'p>(
        &self,
        offers: &'o [Offer<'p>],
        wanted: Option<PlanInterval>,
    ) -> Vec<OfferCard<'o, 'p>> {
        offers
            .iter()
            .map(|offer| OfferCard {
                offer,
                choice: offer.choose(wanted, &self.preferred),
            })
            .filter(|card| {
                wanted.is_none_or(|w| card.choice.interval == w)
                    && self.asked.is_none_or(|c| card.choice.currency == c)
            })
            .collect()
    }

    /// One card per offer and interval it is sold in (only `wanted` when given), in the order
    /// of the offers, shortest interval first: [`CurrencyChoice::cards`] at each interval.
    #[must_use]
    pub fn cards_per_interval<'o, 'p>(
        &self,
        offers: &'o [Offer<'p>],
        wanted: Option<PlanInterval>,
    ) -> Vec<OfferCard<'o, 'p>> {
        let intervals = match wanted {
            Some(interval) => vec![interval],
            None => self.sold_intervals(offers),
        };
        offers
            .iter()
            .flat_map(|offer| {
                intervals.iter().flat_map(move |interval| {
                    self.cards(std::slice::from_ref(offer), Some(*interval))
                })
            })
            .collect()
    }

    /// The intervals `offers` are sold in (in the asked currency when there is one), shortest
    /// first.
    #[must_use]
    pub fn sold_intervals(&self, offers: &[Offer<'_>]) -> Vec<PlanInterval> {
        let mut intervals: Vec<PlanInterval> = offers
            .iter()
            .flat_map(Offer::plans)
            .filter(|p| self.asked.is_none_or(|c| p.price().currency() == c))
            .map(|p| p.interval())
            .collect();
        intervals.sort_unstable();
        intervals.dedup();
        intervals
    }

    /// The interval a pricing page starts on: `asked` when the offers are sold in it, else
    /// monthly, else the shortest sold.
    #[must_use]
    pub fn default_interval(
        &self,
        offers: &[Offer<'_>],
        asked: Option<PlanInterval>,
    ) -> Option<PlanInterval> {
        let intervals = self.sold_intervals(offers);
        asked
            .filter(|i| intervals.contains(i))
            .or_else(|| {
                intervals
                    .contains(&PlanInterval::Month)
                    .then_some(PlanInterval::Month)
            })
            .or_else(|| intervals.first().copied())
    }
}

/// What a reader already holds: the plans of live subscriptions and of one-time purchases whose
/// access still runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Holdings {
    current: BTreeSet<PlanId>,
    owned: BTreeSet<PlanId>,
}

/// What the reader holds of one card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// One of the card's plans is a live subscription of the reader's ("Current plan").
    Current,
    /// One of the card's plans is a one-time purchase whose access still runs ("Owned").
    Owned,
    /// Neither.
    Nothing,
}

impl Holdings {
    /// The plans of live subscriptions (`current`) and of running one-time purchases (`owned`).
    #[must_use]
    pub fn new(
        current: impl IntoIterator<Item = PlanId>,
        owned: impl IntoIterator<Item = PlanId>,
    ) -> Self {
        Self {
            current: current.into_iter().collect(),
            owned: owned.into_iter().collect(),
        }
    }

    /// What the reader holds of `card`'s offer at the card's interval, in any currency or
    /// method: a lifetime plan bought by card is owned on the card that shows it in yuan too.
    #[must_use]
    pub fn of(&self, card: &OfferCard<'_, '_>) -> Held {
        let at_interval = || {
            card.offer
                .plans()
                .iter()
                .filter(|p| p.interval() == card.choice.interval)
        };
        if at_interval().any(|p| self.current.contains(p.id())) {
            Held::Current
        } else if at_interval().any(|p| self.owned.contains(p.id())) {
            Held::Owned
        } else {
            Held::Nothing
        }
    }
}
