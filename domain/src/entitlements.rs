//! Entitlements: what a plan unlocks in the host app, and what a user holds now.
//!
//! A plan declares feature keys mapped to `true` (the feature is on) or a non-negative integer
//! (a limit, such as seats or projects). A user's effective entitlements are the union over
//! every purchase that grants access now — live subscriptions (past-due ones within their
//! grace), one-time passes whose months still run, lifetime purchases:
//!
//! - a key absent from every purchase is absent;
//! - `true` wins over absent;
//! - a number wins over `true` (it is the more specific statement: "on, up to this many"), and
//!   among numbers the largest wins.
//!
//! For each key the purchase giving the winning value is named; when several give it, the one
//! whose access lasts longest (lifetime or renewing first, then the latest end), then the first
//! listed, is named. Entitlements come from what was sold: an order keeps its plan's
//! entitlements in its [`PlanSnapshot`](crate::PlanSnapshot), so editing or deleting a plan
//! later changes nothing a paying user holds.

use std::collections::BTreeMap;
use std::fmt;

use crate::ids::{OrderId, PlanId, SubscriptionId};
use crate::order::{AccessEnd, Order};
use crate::subscription::{Subscription, SubscriptionAccess};
use crate::time::Timestamp;

/// The longest entitlement key, in bytes.
pub const MAX_ENTITLEMENT_KEY_BYTES: usize = 64;
/// The most entitlements one plan may declare.
pub const MAX_ENTITLEMENTS: usize = 100;
/// The largest limit (so that it fits a signed 64-bit integer in every store and wire format).
pub const MAX_ENTITLEMENT_LIMIT: u64 = i64::MAX as u64;

/// A feature key: `^[a-z][a-z0-9_.:-]{0,63}$` (`seats`, `ai.models:gpt-4o`, `export_pdf`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntitlementKey(String);

/// Why a text is not an entitlement key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "must be 1 to {MAX_ENTITLEMENT_KEY_BYTES} characters: a lower-case letter, then lower-case \
     letters, digits, '_', '.', ':' or '-'"
)]
pub struct EntitlementKeyError;

impl EntitlementKey {
    /// Parse a key.
    ///
    /// # Errors
    /// [`EntitlementKeyError`] when `key` is not of the form above.
    pub fn new(key: &str) -> Result<Self, EntitlementKeyError> {
        let mut chars = key.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
        let rest_ok = chars.all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | ':' | '-')
        });
        if first_ok && rest_ok && key.len() <= MAX_ENTITLEMENT_KEY_BYTES {
            Ok(Self(key.to_owned()))
        } else {
            Err(EntitlementKeyError)
        }
    }

    /// The key.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EntitlementKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a plan grants for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntitlementValue {
    /// `true`: the feature is on.
    Enabled,
    /// A non-negative limit (at most [`MAX_ENTITLEMENT_LIMIT`]).
    Limit(u64),
}

impl EntitlementValue {
    /// Whether `self` wins over `other` in the union: a number beats `true`, a larger number
    /// beats a smaller one.
    #[must_use]
    pub const fn beats(self, other: EntitlementValue) -> bool {
        match (self, other) {
            (EntitlementValue::Limit(a), EntitlementValue::Limit(b)) => a > b,
            (EntitlementValue::Limit(_), EntitlementValue::Enabled) => true,
            (EntitlementValue::Enabled, _) => false,
        }
    }
}

impl fmt::Display for EntitlementValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntitlementValue::Enabled => f.write_str("true"),
            EntitlementValue::Limit(n) => write!(f, "{n}"),
        }
    }
}

/// An entitlement value as written in a catalog file or an admin request, before validation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntitlementDraft {
    /// A boolean (`true` is valid; `false` is refused: leave the key out instead).
    Flag(bool),
    /// An integer (valid when not negative).
    Integer(i64),
    /// Anything else, named for the error message (`a string`, `a fractional number`, …).
    Unsupported(String),
}

/// Why an entitlement value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntitlementValueError {
    /// `false`.
    #[error("must be true or a non-negative integer (leave the key out to withhold it)")]
    False,
    /// A negative integer.
    #[error("must be true or a non-negative integer, not {0}")]
    Negative(i64),
    /// Not a boolean or an integer.
    #[error("must be true or a non-negative integer, not {0}")]
    Unsupported(String),
}

impl EntitlementDraft {
    /// The value this draft stands for.
    ///
    /// # Errors
    /// [`EntitlementValueError`] for `false`, a negative number or another type.
    pub fn validate(&self) -> Result<EntitlementValue, EntitlementValueError> {
        match self {
            EntitlementDraft::Flag(true) => Ok(EntitlementValue::Enabled),
            EntitlementDraft::Flag(false) => Err(EntitlementValueError::False),
            EntitlementDraft::Integer(n) => u64::try_from(*n)
                .map(EntitlementValue::Limit)
                .map_err(|_| EntitlementValueError::Negative(*n)),
            EntitlementDraft::Unsupported(kind) => {
                Err(EntitlementValueError::Unsupported(kind.clone()))
            }
        }
    }
}

impl From<EntitlementValue> for EntitlementDraft {
    fn from(value: EntitlementValue) -> Self {
        match value {
            EntitlementValue::Enabled => EntitlementDraft::Flag(true),
            // A limit is at most `MAX_ENTITLEMENT_LIMIT`, which is `i64::MAX`.
            EntitlementValue::Limit(n) => {
                EntitlementDraft::Integer(i64::try_from(n).unwrap_or(i64::MAX))
            }
        }
    }
}

/// A set of entitlements: each key at most once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Entitlements(BTreeMap<EntitlementKey, EntitlementValue>);

impl Entitlements {
    /// No entitlements.
    #[must_use]
    pub fn none() -> Self {
        Self::default()
    }

    /// A set from validated pairs (a key repeated keeps its last value). Limits above
    /// [`MAX_ENTITLEMENT_LIMIT`] are brought down to it.
    #[must_use]
    pub fn from_pairs(pairs: impl IntoIterator<Item = (EntitlementKey, EntitlementValue)>) -> Self {
        Self(
            pairs
                .into_iter()
                .map(|(k, v)| match v {
                    EntitlementValue::Limit(n) => {
                        (k, EntitlementValue::Limit(n.min(MAX_ENTITLEMENT_LIMIT)))
                    }
                    EntitlementValue::Enabled => (k, v),
                })
                .collect(),
        )
    }

    /// Validate drafts as one plan declares them: every key and value, and at most
    /// [`MAX_ENTITLEMENTS`]. Each error names the key as written.
    ///
    /// # Errors
    /// Every key or value refused, as `(key as written, what is wrong)`; `(None, …)` for too
    /// many keys.
    pub fn from_drafts(
        drafts: &BTreeMap<String, EntitlementDraft>,
    ) -> Result<Self, Vec<(Option<String>, String)>> {
        let mut errors = Vec::new();
        if drafts.len() > MAX_ENTITLEMENTS {
            errors.push((None, format!("at most {MAX_ENTITLEMENTS} entitlements")));
        }
        let mut pairs = Vec::with_capacity(drafts.len());
        for (raw, draft) in drafts {
            let key = EntitlementKey::new(raw)
                .map_err(|e| errors.push((Some(raw.clone()), e.to_string())));
            let value = draft
                .validate()
                .map_err(|e| errors.push((Some(raw.clone()), e.to_string())));
            if let (Ok(key), Ok(value)) = (key, value) {
                pairs.push((key, value));
            }
        }
        if errors.is_empty() {
            Ok(Self::from_pairs(pairs))
        } else {
            Err(errors)
        }
    }

    /// The value for `key`, if granted.
    #[must_use]
    pub fn get(&self, key: &EntitlementKey) -> Option<EntitlementValue> {
        self.0.get(key).copied()
    }

    /// Every key and value, keys in order.
    pub fn iter(&self) -> impl Iterator<Item = (&EntitlementKey, EntitlementValue)> {
        self.0.iter().map(|(k, v)| (k, *v))
    }

    /// How many keys.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The drafts that validate back to this set (`from_drafts(&e.to_drafts())` is `e`).
    #[must_use]
    pub fn to_drafts(&self) -> BTreeMap<String, EntitlementDraft> {
        self.iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.into()))
            .collect()
    }
}

/// The purchase that grants an entitlement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GrantSource {
    /// A subscription that grants access now.
    Subscription(SubscriptionId),
    /// A paid one-time order whose access still runs.
    Order(OrderId),
}

/// How long a holding grants access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeldUntil {
    /// No known end: a lifetime purchase, or a subscription as long as it renews.
    Open,
    /// Until this instant (exclusive).
    At(Timestamp),
}

impl HeldUntil {
    /// The end, if there is one.
    #[must_use]
    pub const fn ends_at(self) -> Option<Timestamp> {
        match self {
            HeldUntil::Open => None,
            HeldUntil::At(end) => Some(end),
        }
    }

    /// Whether `self` lasts strictly longer than `other`.
    const fn outlasts(self, other: HeldUntil) -> bool {
        match (self, other) {
            (HeldUntil::Open, HeldUntil::At(_)) => true,
            (HeldUntil::At(a), HeldUntil::At(b)) => a.unix_millis() > b.unix_millis(),
            (_, HeldUntil::Open) => false,
        }
    }
}

/// One purchase a user holds now, and the entitlements it was sold with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The subscription or order.
    pub source: GrantSource,
    /// The plan it was bought on.
    pub plan_id: PlanId,
    /// How long it grants access.
    pub until: HeldUntil,
    /// What it grants.
    pub entitlements: Entitlements,
}

impl Holding {
    /// What a subscription grants at `now`, by the status endpoint's access rule
    /// ([`Subscription::access`]: a past-due subscription keeps access for the grace after its
    /// period ends); `None` when it grants no access now.
    #[must_use]
    pub fn of_subscription(
        subscription: &Subscription,
        entitlements: Entitlements,
        past_due_grace_ms: i64,
        now: Timestamp,
    ) -> Option<Self> {
        let access = subscription.access(past_due_grace_ms);
        if !access.is_open_at(now) {
            return None;
        }
        let until = match access {
            SubscriptionAccess::Until(end) => HeldUntil::At(end),
            SubscriptionAccess::WhileItRenews | SubscriptionAccess::Ended => HeldUntil::Open,
        };
        Some(Self {
            source: GrantSource::Subscription(subscription.id().clone()),
            plan_id: subscription.plan_id().clone(),
            until,
            entitlements,
        })
    }

    /// What a one-time order grants at `now` ([`Order::one_time_access`]: paid, and lifetime or
    /// within its months); `None` when it grants no access now (credits packs never do).
    #[must_use]
    pub fn of_order(order: &Order, entitlements: Entitlements, now: Timestamp) -> Option<Self> {
        let end = order.one_time_access().filter(|end| end.is_open_at(now))?;
        Some(Self {
            source: GrantSource::Order(order.id().clone()),
            plan_id: order.plan().plan_id.clone(),
            until: match end {
                AccessEnd::Lifetime => HeldUntil::Open,
                AccessEnd::At(end) => HeldUntil::At(end),
            },
            entitlements,
        })
    }
}

/// One key a user holds, and the purchase that gives its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntitlementGrant {
    /// The key.
    pub key: EntitlementKey,
    /// The winning value.
    pub value: EntitlementValue,
    /// The purchase giving it.
    pub source: GrantSource,
    /// That purchase's plan.
    pub plan_id: PlanId,
    /// How long that purchase grants access.
    pub until: HeldUntil,
}

/// A user's effective entitlements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EffectiveEntitlements {
    /// Every key held, with its winning value.
    pub entitlements: Entitlements,
    /// For each key (in key order), the purchase that gives the winning value.
    pub grants: Vec<EntitlementGrant>,
}

/// The union of what `holdings` grant (see the module documentation for the rules).
#[must_use]
pub fn effective_entitlements(holdings: &[Holding]) -> EffectiveEntitlements {
    let mut winners: BTreeMap<&EntitlementKey, (EntitlementValue, &Holding)> = BTreeMap::new();
    for holding in holdings {
        for (key, value) in holding.entitlements.iter() {
            let replace = match winners.get(key) {
                None => true,
                Some((best, best_holding)) => {
                    value.beats(*best)
                        || (value == *best && holding.until.outlasts(best_holding.until))
                }
            };
            if replace {
                winners.insert(key, (value, holding));
            }
        }
    }
    let grants: Vec<EntitlementGrant> = winners
        .into_iter()
        .map(|(key, (value, holding))| EntitlementGrant {
            key: key.clone(),
            value,
            source: holding.source.clone(),
            plan_id: holding.plan_id.clone(),
            until: holding.until,
        })
        .collect();
    EffectiveEntitlements {
        entitlements: Entitlements::from_pairs(grants.iter().map(|g| (g.key.clone(), g.value))),
        grants,
    }
}

#[cfg(test)]
mod tests;
