//! Plans (spec 2.2 and 2.3): what Tally sells, validated as a whole.
//!
//! A [`PlanDraft`] is a plan as written in a catalog or an admin form: loose strings and
//! decimals. [`Plan::from_draft`] checks every rule of spec 2.2 and section 8 at once and reports
//! every violation, each naming the plan id and the field as the spec spells it.

mod offer;

use std::collections::BTreeMap;
use std::fmt;

use rust_decimal::Decimal;

use crate::credits::Credits;
use crate::entitlements::{EntitlementDraft, Entitlements};
use crate::ids::PlanId;
use crate::money::{Currency, Money};
use crate::provider::{CapabilityError, ProviderId, RefField, RefKind, RefNeed};
use crate::time::Timestamp;

pub use offer::{
    CurrencyChoice, Held, Holdings, MAX_GROUP_CHARS, Offer, OfferCard, OfferChoice, OfferKey,
    PlanGroup, PlanGroupError, PlanInterval, currency_for_locale, group_offers, saving_percent,
};

/// `duration.months` value that the spec uses for lifetime access.
pub const LIFETIME_MONTHS: i64 = 999_999;
/// The longest finite duration or billing period, in months (100 years).
pub const MAX_FINITE_MONTHS: i64 = 1_200;
/// The longest billing period of a subscription, in months.
pub const MAX_BILLING_MONTHS: i64 = 12;
/// Limits on plan texts, so that a catalog cannot bloat pages or the database.
pub const MAX_NAME_CHARS: usize = 100;
/// The longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;
/// The most feature bullets per locale.
pub const MAX_FEATURES: usize = 30;
/// The longest feature bullet, or duration label.
pub const MAX_FEATURE_CHARS: usize = 300;
/// The longest provider product, price or plan id.
pub const MAX_PROVIDER_REF_CHARS: usize = 128;

/// The three plan types, as `duration.type` spells them (spec 2.2 rule 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PlanType {
    /// `one_time`: a single payment for access for a duration, usually lifetime.
    OneTime,
    /// `recurring`: a subscription billed every period.
    Recurring,
    /// `credits`: a pack of credits consumed by usage.
    Credits,
}

impl PlanType {
    /// Every plan type.
    pub const ALL: [PlanType; 3] = [PlanType::OneTime, PlanType::Recurring, PlanType::Credits];

    /// The `duration.type` spelling.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            PlanType::OneTime => "one_time",
            PlanType::Recurring => "recurring",
            PlanType::Credits => "credits",
        }
    }

    /// Parse the `duration.type` spelling.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        PlanType::ALL.into_iter().find(|t| t.as_str() == value)
    }
}

impl fmt::Display for PlanType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A positive number of months that is not lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Months(u32);

impl Months {
    /// The number of months.
    #[must_use]
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// How long a plan's access (or its credits) lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Duration {
    /// `duration.months` = 999999.
    Lifetime,
    /// A finite number of months: the billing period of a subscription, the access period of a
    /// one-time plan, or how long a credits pack's credits stay valid.
    Months(Months),
}

impl Duration {
    /// The duration a stored `duration.months` value stands for: 999999 is lifetime, 1 to
    /// [`MAX_FINITE_MONTHS`] a number of months; anything else is `None`.
    #[must_use]
    pub fn from_months_value(months: i64) -> Option<Self> {
        if months == LIFETIME_MONTHS {
            return Some(Duration::Lifetime);
        }
        u32::try_from(months)
            .ok()
            .filter(|m| (1..=MAX_FINITE_MONTHS).contains(&i64::from(*m)))
            .map(|m| Duration::Months(Months(m)))
    }

    /// The `duration.months` value.
    #[must_use]
    pub const fn months_value(self) -> i64 {
        match self {
            Duration::Lifetime => LIFETIME_MONTHS,
            Duration::Months(m) => m.0 as i64,
        }
    }
}

/// Whether a plan is offered to everyone (spec 2.2 `hidden`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Visibility {
    /// Shown on `/pricing` and for sale to anyone.
    Listed,
    /// Not listed, and for sale only to a buyer who holds it or whom an operator allowed
    /// ([`Visibility::offered_to`]).
    Hidden,
}

/// Where a buyer stands with one plan, for [`Visibility::offered_to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Standing {
    /// Neither holds it nor was allowed it.
    Newcomer,
    /// Holds it now (a live subscription to it, or running access it sells).
    Holder,
    /// An operator allowed this buyer the plan.
    Allowed,
}

/// A hidden plan asked for by a buyer it is not offered to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plan {0} is not available")]
pub struct PlanNotAvailable(pub PlanId);

impl Visibility {
    /// Whether a plan of this visibility is for sale (a purchase or a switch target) to a buyer
    /// of `standing`: a listed plan to anyone, a hidden one only to its holders and to buyers an
    /// operator allowed.
    #[must_use]
    pub const fn offered_to(self, standing: Standing) -> bool {
        match (self, standing) {
            (Self::Listed, _) | (Self::Hidden, Standing::Holder | Standing::Allowed) => true,
            (Self::Hidden, Standing::Newcomer) => false,
        }
    }
}

/// Whether the pricing page highlights a plan (spec 2.2 `recommended`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prominence {
    /// Highlighted as recommended.
    Recommended,
    /// Shown like the others.
    Regular,
}

/// Which price applies: the spec lets development use a different (tiny) price (2.2 rule 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppEnvironment {
    /// Local development and testing: a plan's `developmentAmount` applies when set.
    Development,
    /// Real customers: `amount` always applies.
    Production,
}

/// A locale tag such as `en` or `zh-CN`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Locale(String);

impl Locale {
    /// English, the locale every plan must have.
    #[must_use]
    pub fn english() -> Self {
        Locale("en".to_owned())
    }

    /// Parse a BCP 47-shaped tag: ASCII letters, digits and `-`, 2 to 35 characters, starting
    /// with a letter.
    #[must_use]
    pub fn parse(tag: &str) -> Option<Self> {
        let ok = (2..=35).contains(&tag.len())
            && tag.starts_with(|c: char| c.is_ascii_alphabetic())
            && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        ok.then(|| Locale(tag.to_owned()))
    }

    /// The tag.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The primary language subtag, lower-cased (`zh` for `zh-CN`).
    #[must_use]
    pub fn language(&self) -> String {
        self.0
            .split('-')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase()
    }
}

impl fmt::Display for Locale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A plan's texts in one locale (spec 2.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PlanText {
    /// Display name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Display label of the period, such as "month" or "lifetime".
    pub duration: String,
    /// Feature bullets.
    pub features: Vec<String>,
}

/// One provider-side id a plan carries, typed by what it names ([`RefKind`]). The text is as
/// written; [`Plan::from_draft`] checks it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProviderRef {
    kind: RefKind,
    id: String,
}

impl ProviderRef {
    /// What the id names.
    #[must_use]
    pub const fn kind(&self) -> RefKind {
        self.kind
    }

    /// The id as the provider spells it.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The provider-side ids a plan may carry (spec 2.2, plus `morCProductId` and
/// `walletGlobalPlanId`, which the spec leaves unnamed), at most one per provider that takes
/// one ([`ProviderId::reference`] says which provider takes which kind, under which name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ProviderRefs(BTreeMap<ProviderId, ProviderRef>);

impl ProviderRefs {
    /// The id carried for `provider`, if any.
    #[must_use]
    pub fn get(&self, provider: ProviderId) -> Option<&str> {
        self.0.get(&provider).map(ProviderRef::id)
    }

    /// The reference carried for `provider`, with its kind.
    #[must_use]
    pub fn reference(&self, provider: ProviderId) -> Option<&ProviderRef> {
        self.0.get(&provider)
    }

    /// Set (`Some`) or clear (`None`) the id of `field`'s provider.
    pub fn set(&mut self, field: RefField, id: Option<String>) {
        match id {
            Some(id) => {
                self.0.insert(
                    field.provider,
                    ProviderRef {
                        kind: field.kind,
                        id,
                    },
                );
            }
            None => {
                self.0.remove(&field.provider);
            }
        }
    }

    /// These references with `provider`'s id set to `id`, for building plans in code.
    ///
    /// # Panics
    /// `provider` takes no reference ([`ProviderId::reference`] is `None`).
    #[must_use]
    pub fn with(mut self, provider: ProviderId, id: impl Into<String>) -> Self {
        let field = provider
            .reference()
            .unwrap_or_else(|| panic!("{provider} takes no catalog reference"));
        self.set(field, Some(id.into()));
        self
    }

    /// Every reference's field and id, in the spec's order of providers.
    pub fn fields(&self) -> impl Iterator<Item = (RefField, &str)> {
        RefField::all().filter_map(|f| self.get(f.provider).map(|id| (f, id)))
    }
}

/// A plan as written in a catalog file or an admin form, before validation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanDraft {
    /// `id`.
    pub id: String,
    /// `provider`.
    pub provider: Option<String>,
    /// `amount`, in major units.
    pub amount: Option<Decimal>,
    /// `originalAmount`, in major units.
    pub original_amount: Option<Decimal>,
    /// `developmentAmount`: the price used when the service runs in development (spec 2.2 rule 4).
    pub development_amount: Option<Decimal>,
    /// `currency`.
    pub currency: Option<String>,
    /// `recommended`.
    pub recommended: bool,
    /// `hidden`.
    pub hidden: bool,
    /// `duration.months`.
    pub months: Option<i64>,
    /// `duration.type`.
    pub duration_type: Option<String>,
    /// `duration.credits`.
    pub credits: Option<Decimal>,
    /// `duration.bonusCredits`: credits given with each purchase of a credits plan on top of
    /// its credits, as `bonus`.
    pub bonus_credits: Option<Decimal>,
    /// `duration.bonusExpiresInDays`: days after the payment when the bonus credits expire;
    /// `None`: they do not.
    pub bonus_expires_in_days: Option<i64>,
    /// Provider-side ids.
    pub provider_refs: ProviderRefs,
    /// `i18n`, keyed by locale tag.
    pub i18n: BTreeMap<String, PlanText>,
    /// `entitlements`: feature keys mapped to `true` or a non-negative limit (one-time and
    /// recurring plans only).
    pub entitlements: BTreeMap<String, EntitlementDraft>,
    /// `group`: the offer the plan belongs to (a [`PlanGroup`] slug); `None` for a plan of its
    /// own.
    pub group: Option<String>,
}

/// What is wrong with one field of a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanProblem {
    /// A required field is absent or empty.
    #[error("is required")]
    Missing,
    /// The value is not of the field's form.
    #[error("is invalid: {0}")]
    Invalid(String),
    /// The value must be above zero.
    #[error("must be greater than zero")]
    NotPositive,
    /// `originalAmount` is below `amount`.
    #[error("must be at least amount")]
    BelowAmount,
    /// `developmentAmount` is above `amount`.
    #[error("must not exceed amount")]
    AboveAmount,
    /// A month count that is neither finite in range nor the lifetime marker.
    #[error("must be {min} to {max}, or 999999 for lifetime")]
    MonthsOutOfRange {
        /// Smallest allowed.
        min: i64,
        /// Largest finite value allowed.
        max: i64,
    },
    /// A subscription cannot be lifetime.
    #[error("a recurring plan cannot be lifetime (999999); use one_time for lifetime access")]
    LifetimeSubscription,
    /// The field is not allowed for this plan type.
    #[error("is not allowed for {0} plans")]
    NotAllowedFor(PlanType),
    /// The provider cannot sell this plan.
    #[error("{0}")]
    Capability(CapabilityError),
    /// A text is longer than allowed.
    #[error("is longer than {0} characters")]
    TooLong(usize),
}

/// One rule a plan breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plan {plan_id:?}: {field} {problem}")]
pub struct PlanError {
    /// The plan's id as written.
    pub plan_id: String,
    /// The field, spelled as in the spec and the catalog (`duration.months`, `morAProductId`).
    pub field: String,
    /// What is wrong.
    pub problem: PlanProblem,
}

/// Every rule a plan breaks (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanErrors(pub Vec<PlanError>);

impl fmt::Display for PlanErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for PlanErrors {}

/// A validated plan: every rule of spec 2.2 and section 8 holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    id: PlanId,
    provider: ProviderId,
    plan_type: PlanType,
    price: Money,
    original_price: Option<Money>,
    development_price: Option<Money>,
    duration: Option<Duration>,
    credits: Option<Credits>,
    bonus: Option<PackBonus>,
    prominence: Prominence,
    visibility: Visibility,
    provider_refs: ProviderRefs,
    texts: BTreeMap<Locale, PlanText>,
    entitlements: Entitlements,
    group: Option<PlanGroup>,
}

/// The longest a pack's bonus credits may last, in days (ten years).
pub const MAX_BONUS_EXPIRY_DAYS: i64 = 3650;

/// Credits a pack gives on top of what it sells ("500 + 50 bonus"), granted as `bonus` with
/// each purchase, with their own expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackBonus {
    /// How many (positive).
    pub credits: Credits,
    /// Days after the payment when they expire; `None`: they do not.
    pub expires_in_days: Option<u32>,
}

impl PackBonus {
    /// When bonus credits of a purchase paid `at` expire.
    #[must_use]
    pub fn expires_at(&self, paid_at: Timestamp) -> Option<Timestamp> {
        self.expires_in_days
            .map(|days| paid_at.plus_days(i64::from(days)))
    }
}

/// Collects errors for one plan.
struct Checker<'a> {
    plan_id: &'a str,
    errors: Vec<PlanError>,
}

impl Checker<'_> {
    fn fail(&mut self, field: impl Into<String>, problem: PlanProblem) {
        self.errors.push(PlanError {
            plan_id: self.plan_id.to_owned(),
            field: field.into(),
            problem,
        });
    }

    fn required<'v, T>(&mut self, field: &str, value: &'v Option<T>) -> Option<&'v T> {
        if value.is_none() {
            self.fail(field, PlanProblem::Missing);
        }
        value.as_ref()
    }

    fn money(
        &mut self,
        field: &str,
        amount: Option<&Decimal>,
        currency: Option<Currency>,
    ) -> Option<Money> {
        let (amount, currency) = (amount?, currency?);
        match Money::from_decimal(*amount, currency) {
            Ok(m) if m.is_zero() => {
                self.fail(field, PlanProblem::NotPositive);
                None
            }
            Ok(m) => Some(m),
            Err(e) => {
                self.fail(field, PlanProblem::Invalid(e.to_string()));
                None
            }
        }
    }
}

impl Plan {
    /// Validate a draft against every rule of spec 2.2 and section 8.
    ///
    /// # Errors
    /// Every rule the draft breaks, each naming the plan id and the field.
    pub fn from_draft(draft: &PlanDraft) -> Result<Plan, PlanErrors> {
        let mut c = Checker {
            plan_id: &draft.id,
            errors: Vec::new(),
        };
        let id = PlanId::new(draft.id.clone())
            .map_err(|e| c.fail("id", PlanProblem::Invalid(e.to_string())))
            .ok();
        let (provider, currency, plan_type) = check_kind(&mut c, draft);
        let amount = c.required("amount", &draft.amount);
        let price = c.money("amount", amount, currency);
        let original_price = c.money("originalAmount", draft.original_amount.as_ref(), currency);
        let development_price = c.money(
            "developmentAmount",
            draft.development_amount.as_ref(),
            currency,
        );
        check_price_relations(&mut c, price, original_price, development_price);
        let duration = plan_type.and_then(|t| check_duration(&mut c, t, draft.months));
        let credits = plan_type.and_then(|t| check_credits(&mut c, t, draft.credits));
        let bonus = plan_type.and_then(|t| check_bonus(&mut c, (t, credits), draft));
        if let (Some(p), Some(t)) = (provider, plan_type) {
            check_capability(&mut c, p, t, currency);
            check_provider_refs(&mut c, p, t, &draft.provider_refs);
        }
        let texts = check_texts(&mut c, &draft.i18n);
        let entitlements = check_entitlements(&mut c, plan_type, &draft.entitlements);
        let group = draft.group.as_deref().and_then(|slug| {
            PlanGroup::new(slug)
                .map_err(|e| c.fail("group", PlanProblem::Invalid(e.to_string())))
                .ok()
        });
        if !c.errors.is_empty() {
            return Err(PlanErrors(c.errors));
        }
        // Every `None` below was reported above, so no error list means every value is present.
        let (Some(id), Some(provider), Some(plan_type), Some(price)) =
            (id, provider, plan_type, price)
        else {
            unreachable!("a missing required field is always reported as an error")
        };
        Ok(Plan {
            id,
            provider,
            plan_type,
            price,
            original_price,
            development_price,
            duration,
            credits,
            bonus,
            prominence: if draft.recommended {
                Prominence::Recommended
            } else {
                Prominence::Regular
            },
            visibility: if draft.hidden {
                Visibility::Hidden
            } else {
                Visibility::Listed
            },
            provider_refs: draft.provider_refs.clone(),
            texts,
            entitlements,
            group,
        })
    }

    /// The plan's draft form, for storing and editing; `Plan::from_draft(&p.to_draft())` is `p`.
    #[must_use]
    pub fn to_draft(&self) -> PlanDraft {
        PlanDraft {
            id: self.id.as_str().to_owned(),
            provider: Some(self.provider.as_str().to_owned()),
            amount: Some(self.price.to_decimal()),
            original_amount: self.original_price.map(|m| m.to_decimal()),
            development_amount: self.development_price.map(|m| m.to_decimal()),
            currency: Some(self.price.currency().code().to_owned()),
            recommended: self.prominence == Prominence::Recommended,
            hidden: self.visibility == Visibility::Hidden,
            months: self.duration.map(Duration::months_value),
            duration_type: Some(self.plan_type.as_str().to_owned()),
            credits: self.credits.map(Credits::to_decimal),
            bonus_credits: self.bonus.map(|b| b.credits.to_decimal()),
            bonus_expires_in_days: self.bonus.and_then(|b| b.expires_in_days).map(i64::from),
            provider_refs: self.provider_refs.clone(),
            i18n: self
                .texts
                .iter()
                .map(|(l, t)| (l.as_str().to_owned(), t.clone()))
                .collect(),
            entitlements: self.entitlements.to_drafts(),
            group: self.group.as_ref().map(|g| g.as_str().to_owned()),
        }
    }

    /// `id`.
    #[must_use]
    pub fn id(&self) -> &PlanId {
        &self.id
    }
    /// `provider`.
    #[must_use]
    pub fn provider(&self) -> ProviderId {
        self.provider
    }
    /// `duration.type`.
    #[must_use]
    pub fn plan_type(&self) -> PlanType {
        self.plan_type
    }
    /// `amount`: the production price.
    #[must_use]
    pub fn price(&self) -> Money {
        self.price
    }
    /// The price charged in `env`: `developmentAmount` in development when set (spec 2.2 rule 4).
    #[must_use]
    pub fn price_in(&self, env: AppEnvironment) -> Money {
        match (env, self.development_price) {
            (AppEnvironment::Development, Some(dev)) => dev,
            _ => self.price,
        }
    }
    /// `originalAmount`: the struck-through price.
    #[must_use]
    pub fn original_price(&self) -> Option<Money> {
        self.original_price
    }
    /// `developmentAmount`.
    #[must_use]
    pub fn development_price(&self) -> Option<Money> {
        self.development_price
    }
    /// `duration.months` as a duration; `None` only for a credits plan whose credits never expire.
    #[must_use]
    pub fn duration(&self) -> Option<Duration> {
        self.duration
    }
    /// `duration.credits`: credits granted per purchase (credits plans) or per paid period
    /// (recurring plans that carry them).
    #[must_use]
    pub fn credits(&self) -> Option<Credits> {
        self.credits
    }
    /// `duration.bonusCredits` and `duration.bonusExpiresInDays` (credits plans only).
    #[must_use]
    pub fn bonus(&self) -> Option<PackBonus> {
        self.bonus
    }
    /// `recommended`.
    #[must_use]
    pub fn prominence(&self) -> Prominence {
        self.prominence
    }
    /// `hidden`.
    #[must_use]
    pub fn visibility(&self) -> Visibility {
        self.visibility
    }
    /// Provider-side ids.
    #[must_use]
    pub fn provider_refs(&self) -> &ProviderRefs {
        &self.provider_refs
    }
    /// `entitlements`: what the plan unlocks in the host app (empty for credits plans).
    #[must_use]
    pub fn entitlements(&self) -> &Entitlements {
        &self.entitlements
    }
    /// `group`: the offer the plan belongs to, if any.
    #[must_use]
    pub fn group(&self) -> Option<&PlanGroup> {
        self.group.as_ref()
    }
    /// How often the plan is paid for, derived from its type and duration.
    #[must_use]
    pub fn interval(&self) -> PlanInterval {
        PlanInterval::of(self.plan_type, self.duration)
    }
    /// Texts by locale; always has `en`.
    #[must_use]
    pub fn texts(&self) -> &BTreeMap<Locale, PlanText> {
        &self.texts
    }
    /// The texts for `locale`, falling back to the same language, then to `en`.
    #[must_use]
    pub fn text_for(&self, locale: &Locale) -> &PlanText {
        self.texts
            .get(locale)
            .or_else(|| {
                self.texts
                    .iter()
                    .find(|(l, _)| l.language() == locale.language())
                    .map(|(_, t)| t)
            })
            .or_else(|| self.texts.get(&Locale::english()))
            .expect("a validated plan always has an en text")
    }
}

/// `provider`, `currency` and `duration.type`, each parsed or reported.
fn check_kind(
    c: &mut Checker<'_>,
    draft: &PlanDraft,
) -> (Option<ProviderId>, Option<Currency>, Option<PlanType>) {
    let provider = c.required("provider", &draft.provider).and_then(|p| {
        p.parse::<ProviderId>()
            .map_err(|e| c.fail("provider", PlanProblem::Invalid(e.to_string())))
            .ok()
    });
    let currency = c.required("currency", &draft.currency).and_then(|code| {
        code.parse::<Currency>()
            .map_err(|e| c.fail("currency", PlanProblem::Invalid(e.to_string())))
            .ok()
    });
    let plan_type = c
        .required("duration.type", &draft.duration_type)
        .and_then(|t| {
            PlanType::parse(t)
                .ok_or_else(|| {
                    c.fail(
                        "duration.type",
                        PlanProblem::Invalid(format!(
                            "{t:?} is not one_time, recurring or credits"
                        )),
                    )
                })
                .ok()
        });
    (provider, currency, plan_type)
}

/// Whether `provider` can sell a plan of `plan_type` in `currency`.
fn check_capability(
    c: &mut Checker<'_>,
    provider: ProviderId,
    plan_type: PlanType,
    currency: Option<Currency>,
) {
    if let Some(currency) = currency
        && let Err(e) = provider.supports(plan_type, currency)
    {
        let field = match e {
            CapabilityError::PlanTypeNotSupported { .. } => "duration.type",
            CapabilityError::CurrencyNotSupported { .. } => "currency",
        };
        c.fail(field, PlanProblem::Capability(e));
    }
}

fn check_price_relations(
    c: &mut Checker<'_>,
    price: Option<Money>,
    original: Option<Money>,
    development: Option<Money>,
) {
    let Some(price) = price else { return };
    if original.is_some_and(|o| o.amount_minor() < price.amount_minor()) {
        c.fail("originalAmount", PlanProblem::BelowAmount);
    }
    if development.is_some_and(|d| d.amount_minor() > price.amount_minor()) {
        c.fail("developmentAmount", PlanProblem::AboveAmount);
    }
}

fn check_duration(
    c: &mut Checker<'_>,
    plan_type: PlanType,
    months: Option<i64>,
) -> Option<Duration> {
    let field = "duration.months";
    let Some(months) = months else {
        if plan_type != PlanType::Credits {
            c.fail(field, PlanProblem::Missing);
        }
        return None;
    };
    if months == LIFETIME_MONTHS {
        if plan_type == PlanType::Recurring {
            c.fail(field, PlanProblem::LifetimeSubscription);
            return None;
        }
        return Some(Duration::Lifetime);
    }
    let max = if plan_type == PlanType::Recurring {
        MAX_BILLING_MONTHS
    } else {
        MAX_FINITE_MONTHS
    };
    match u32::try_from(months) {
        Ok(m) if (1..=max).contains(&months) => Some(Duration::Months(Months(m))),
        _ => {
            c.fail(field, PlanProblem::MonthsOutOfRange { min: 1, max });
            None
        }
    }
}

fn check_credits(
    c: &mut Checker<'_>,
    plan_type: PlanType,
    credits: Option<Decimal>,
) -> Option<Credits> {
    let field = "duration.credits";
    match (plan_type, credits) {
        (PlanType::Credits, None) => {
            c.fail(field, PlanProblem::Missing);
            None
        }
        (PlanType::OneTime, Some(_)) => {
            c.fail(field, PlanProblem::NotAllowedFor(PlanType::OneTime));
            None
        }
        (_, None) => None,
        (_, Some(value)) => match Credits::from_decimal(value) {
            Ok(credits) if credits.is_zero() => {
                c.fail(field, PlanProblem::NotPositive);
                None
            }
            Ok(credits) => Some(credits),
            Err(e) => {
                c.fail(field, PlanProblem::Invalid(e.to_string()));
                None
            }
        },
    }
}

/// A credits plan's bonus: positive credits with at most two places, less than the plan's
/// `credits` (which count the bonus in, so that what is paid for is the rest), and an expiry
/// of 1 to [`MAX_BONUS_EXPIRY_DAYS`] days, only with bonus credits; no other plan type has one.
fn check_bonus(
    c: &mut Checker<'_>,
    (plan_type, total): (PlanType, Option<Credits>),
    draft: &PlanDraft,
) -> Option<PackBonus> {
    let (field, days_field) = ("duration.bonusCredits", "duration.bonusExpiresInDays");
    let (credits, days) = (draft.bonus_credits, draft.bonus_expires_in_days);
    if plan_type != PlanType::Credits {
        for (name, given) in [(field, credits.is_some()), (days_field, days.is_some())] {
            if given {
                c.fail(name, PlanProblem::NotAllowedFor(plan_type));
            }
        }
        return None;
    }
    let expires_in_days = match days {
        None => None,
        Some(_) if credits.is_none() => {
            c.fail(
                days_field,
                PlanProblem::Invalid("needs bonusCredits".into()),
            );
            return None;
        }
        Some(d) if (1..=MAX_BONUS_EXPIRY_DAYS).contains(&d) => u32::try_from(d).ok(),
        Some(_) => {
            let range = format!("must be 1 to {MAX_BONUS_EXPIRY_DAYS}");
            c.fail(days_field, PlanProblem::Invalid(range));
            return None;
        }
    };
    match Credits::from_decimal(credits?) {
        Ok(credits) if credits.is_zero() => {
            c.fail(field, PlanProblem::NotPositive);
            None
        }
        Ok(credits) if total.is_some_and(|t| credits >= t) => {
            let problem = "must be less than duration.credits, which counts the bonus in";
            c.fail(field, PlanProblem::Invalid(problem.into()));
            None
        }
        Ok(credits) => Some(PackBonus {
            credits,
            expires_in_days,
        }),
        Err(e) => {
            c.fail(field, PlanProblem::Invalid(e.to_string()));
            None
        }
    }
}

fn check_provider_refs(
    c: &mut Checker<'_>,
    provider: ProviderId,
    plan_type: PlanType,
    refs: &ProviderRefs,
) {
    for (field, v) in refs.fields() {
        if v.trim().is_empty()
            || v.chars().count() > MAX_PROVIDER_REF_CHARS
            || v.chars().any(char::is_control)
        {
            c.fail(
                field.field,
                PlanProblem::Invalid(format!(
                    "must be 1 to {MAX_PROVIDER_REF_CHARS} printable characters"
                )),
            );
        }
    }
    let Some(field) = provider.reference() else {
        return;
    };
    let needed = match field.need {
        RefNeed::EveryPlan => true,
        RefNeed::Subscriptions => plan_type == PlanType::Recurring,
    };
    if needed && refs.get(provider).is_none() {
        c.fail(field.field, PlanProblem::Missing);
    }
}

/// `entitlements`: valid keys and values, at most [`crate::entitlements::MAX_ENTITLEMENTS`];
/// a credits plan grants credits only, so it may not declare any (an unknown type was reported
/// already).
fn check_entitlements(
    c: &mut Checker<'_>,
    plan_type: Option<PlanType>,
    drafts: &BTreeMap<String, EntitlementDraft>,
) -> Entitlements {
    if drafts.is_empty() {
        return Entitlements::none();
    }
    if plan_type == Some(PlanType::Credits) {
        c.fail(
            "entitlements",
            PlanProblem::NotAllowedFor(PlanType::Credits),
        );
        return Entitlements::none();
    }
    match Entitlements::from_drafts(drafts) {
        Ok(entitlements) => entitlements,
        Err(errors) => {
            for (key, message) in errors {
                let field = key.map_or_else(
                    || "entitlements".to_owned(),
                    |k| format!("entitlements.{k}"),
                );
                c.fail(field, PlanProblem::Invalid(message));
            }
            Entitlements::none()
        }
    }
}

fn check_texts(
    c: &mut Checker<'_>,
    i18n: &BTreeMap<String, PlanText>,
) -> BTreeMap<Locale, PlanText> {
    let mut texts = BTreeMap::new();
    for (tag, text) in i18n {
        let Some(locale) = Locale::parse(tag) else {
            c.fail(
                format!("i18n.{tag}"),
                PlanProblem::Invalid("not a locale tag such as en or zh-CN".into()),
            );
            continue;
        };
        let limits = [
            ("name", text.name.chars().count(), MAX_NAME_CHARS),
            (
                "description",
                text.description.chars().count(),
                MAX_DESCRIPTION_CHARS,
            ),
            ("duration", text.duration.chars().count(), MAX_FEATURE_CHARS),
        ];
        for (field, len, max) in limits {
            if len > max {
                c.fail(format!("i18n.{tag}.{field}"), PlanProblem::TooLong(max));
            }
        }
        if text.features.len() > MAX_FEATURES {
            c.fail(
                format!("i18n.{tag}.features"),
                PlanProblem::Invalid(format!("at most {MAX_FEATURES} features")),
            );
        }
        if text
            .features
            .iter()
            .any(|f| f.chars().count() > MAX_FEATURE_CHARS)
        {
            c.fail(
                format!("i18n.{tag}.features"),
                PlanProblem::TooLong(MAX_FEATURE_CHARS),
            );
        }
        texts.insert(locale, text.clone());
    }
    match texts.get(&Locale::english()) {
        None => c.fail("i18n.en", PlanProblem::Missing),
        Some(en) if en.name.trim().is_empty() => c.fail("i18n.en.name", PlanProblem::Missing),
        Some(_) => {}
    }
    texts
}

#[cfg(test)]
mod tests;
