//! The `pricing_plan` row: the columns the listing queries need, and the rest of the plan as a
//! JSON document (`data`) owned by this adapter, never by the domain.

use std::collections::BTreeMap;

use application::ports::{Listing, StoreError, StoredPlan};
use domain::{Credits, Currency, Locale, Money, Plan, PlanDraft, PlanText, ProviderRefs, RefField};
use sea_orm::{FromQueryResult, Value};
use serde::{Deserialize, Serialize};

use super::corrupt;

/// The columns of [`PlanRow`], in the order of [`plan_values`].
pub(crate) const PLAN_COLUMNS: &str = "id, provider, plan_type, currency, amount_minor, \
    original_amount_minor, hidden, locales, sort_order, data";

/// A `pricing_plan` row.
#[derive(Debug, FromQueryResult)]
pub(crate) struct PlanRow {
    id: String,
    provider: String,
    plan_type: String,
    currency: String,
    amount_minor: i64,
    original_amount_minor: Option<i64>,
    hidden: bool,
    locales: String,
    sort_order: i32,
    data: String,
}

/// The plan fields that are not columns, as stored in `data`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlanData {
    i18n: BTreeMap<String, TextData>,
    months: Option<i64>,
    credits_hundredths: Option<i64>,
    development_amount_minor: Option<i64>,
    #[serde(default)]
    provider_refs: RefsData,
    #[serde(default)]
    recommended: bool,
    /// Feature keys mapped to `true` or a limit; absent in rows written before entitlements.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    entitlements: BTreeMap<String, serde_json::Value>,
    /// The offer the plan belongs to (issue 19); absent for a plan of its own and in rows
    /// written before groups, so no column or migration is needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group: Option<String>,
    /// A credits pack's bonus credits and their expiry in days; absent for plans without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bonus_credits_hundredths: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bonus_expires_in_days: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct TextData {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    duration: String,
    #[serde(default)]
    features: Vec<String>,
}

/// The provider references, keyed by their catalog field names ([`RefField::field`]); every
/// provider that takes one is written, `null` when the plan has none.
#[derive(Debug, Default, Serialize, Deserialize)]
struct RefsData(BTreeMap<String, Option<String>>);

impl RefsData {
    fn of(refs: &ProviderRefs) -> Self {
        Self(
            RefField::all()
                .map(|r| (r.field.to_owned(), refs.get(r.provider).map(str::to_owned)))
                .collect(),
        )
    }

    fn into_domain(mut self) -> ProviderRefs {
        let mut refs = ProviderRefs::default();
        for r in RefField::all() {
            refs.set(r, self.0.remove(r.field).flatten());
        }
        refs
    }
}

impl PlanRow {
    /// The stored plan, validated by [`Plan::from_draft`] as a catalog plan is.
    pub(crate) fn into_domain(self) -> Result<StoredPlan, StoreError> {
        let bad = |what: String| corrupt("pricing_plan", &self.id, what);
        let data: PlanData =
            serde_json::from_str(&self.data).map_err(|e| bad(format!("data: {e}")))?;
        let currency: Currency = self.currency.parse().map_err(|e| bad(format!("{e}")))?;
        let major = |minor: i64| Money::from_minor(minor, currency).map(|m| m.to_decimal());
        let credits = data
            .credits_hundredths
            .map(|h| Credits::from_hundredths(h).map(Credits::to_decimal))
            .transpose()
            .map_err(|e| bad(format!("credits: {e}")))?;
        let bonus_credits = data
            .bonus_credits_hundredths
            .map(|h| Credits::from_hundredths(h).map(Credits::to_decimal))
            .transpose()
            .map_err(|e| bad(format!("bonus credits: {e}")))?;
        let draft = PlanDraft {
            bonus_credits,
            bonus_expires_in_days: data.bonus_expires_in_days,
            id: self.id.clone(),
            provider: Some(self.provider.clone()),
            amount: Some(major(self.amount_minor).map_err(|e| bad(format!("amount: {e}")))?),
            original_amount: self
                .original_amount_minor
                .map(major)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
            development_amount: data
                .development_amount_minor
                .map(major)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
            currency: Some(self.currency.clone()),
            recommended: data.recommended,
            hidden: self.hidden,
            months: data.months,
            duration_type: Some(self.plan_type.clone()),
            credits,
            provider_refs: data.provider_refs.into_domain(),
            i18n: data
                .i18n
                .into_iter()
                .map(|(tag, t)| (tag, t.into()))
                .collect(),
            entitlements: super::entitlements::drafts_of(&data.entitlements),
            group: data.group,
        };
        let plan = Plan::from_draft(&draft).map_err(|e| bad(e.to_string()))?;
        let locales = parse_locales(&self.locales)
            .ok_or_else(|| bad(format!("locales {:?}", self.locales)))?;
        Ok(StoredPlan {
            plan,
            listing: Listing {
                sort_order: self.sort_order,
                locales,
            },
        })
    }
}

impl From<TextData> for PlanText {
    fn from(t: TextData) -> Self {
        PlanText {
            name: t.name,
            description: t.description,
            duration: t.duration,
            features: t.features,
        }
    }
}

/// Locales as stored: tags separated by commas; empty means every locale.
fn parse_locales(stored: &str) -> Option<Vec<Locale>> {
    if stored.is_empty() {
        return Some(Vec::new());
    }
    stored.split(',').map(Locale::parse).collect()
}

/// The values of [`PLAN_COLUMNS`] for `stored`.
pub(crate) fn plan_values(stored: &StoredPlan) -> Result<Vec<Value>, StoreError> {
    let plan = &stored.plan;
    let refs = plan.provider_refs();
    let data = PlanData {
        i18n: plan
            .texts()
            .iter()
            .map(|(locale, t)| {
                let text = TextData {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    duration: t.duration.clone(),
                    features: t.features.clone(),
                };
                (locale.as_str().to_owned(), text)
            })
            .collect(),
        months: plan.duration().map(domain::Duration::months_value),
        credits_hundredths: plan.credits().map(Credits::hundredths),
        development_amount_minor: plan.development_price().map(|m| m.amount_minor()),
        provider_refs: RefsData::of(refs),
        recommended: plan.prominence() == domain::plan::Prominence::Recommended,
        entitlements: super::entitlements::to_object(plan.entitlements()),
        group: plan.group().map(|g| g.as_str().to_owned()),
        bonus_credits_hundredths: plan.bonus().map(|b| b.credits.hundredths()),
        bonus_expires_in_days: plan.bonus().and_then(|b| b.expires_in_days).map(i64::from),
    };
    let data = serde_json::to_string(&data).map_err(|e| StoreError::Unexpected(e.into()))?;
    let locales: Vec<&str> = stored.listing.locales.iter().map(Locale::as_str).collect();
    Ok(vec![
        plan.id().as_str().into(),
        plan.provider().as_str().into(),
        plan.plan_type().as_str().into(),
        plan.price().currency().code().into(),
        plan.price().amount_minor().into(),
        plan.original_price().map(|m| m.amount_minor()).into(),
        (plan.visibility() == domain::Visibility::Hidden).into(),
        locales.join(",").into(),
        stored.listing.sort_order.into(),
        data.into(),
    ])
}
