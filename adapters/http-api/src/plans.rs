//! The public plan listing, `GET /api/plans` (what `/pricing` shows): plans of the live
//! pricing mode, hidden ones left out, texts in the requested locale with fallback.

use std::collections::BTreeMap;
use std::sync::Arc;

use domain::plan::{PlanText, Prominence};
use domain::{AppEnvironment, Credits, Duration, Locale, Plan};
use poem::Request;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::OptionalCredential;
use crate::dto::major_units;
use crate::entitlements::{EntitlementValueJson, entitlements_json};
use crate::offers::{OffersQuery, OffersResponse};
use crate::problem::{Problem, api_response};

/// A plan's duration (spec 2.2 `duration.*`).
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct DurationView {
    /// Months; 999999 means lifetime; absent for credits plans without one.
    #[oai(skip_serializing_if_is_none)]
    pub months: Option<i64>,
    /// `one_time`, `recurring` or `credits`.
    #[oai(rename = "type")]
    pub duration_type: String,
    /// Credits granted (bonus included), decimal string with two places.
    #[oai(skip_serializing_if_is_none)]
    pub credits: Option<String>,
    /// Credits granted, in hundredths.
    #[oai(skip_serializing_if_is_none)]
    pub credits_hundredths: Option<i64>,
    /// Of `credits`, the pack's bonus ("500 + 50 bonus": credits 550, bonus 50), decimal string;
    /// absent without one.
    #[oai(skip_serializing_if_is_none)]
    pub bonus_credits: Option<String>,
    /// The same, in hundredths.
    #[oai(skip_serializing_if_is_none)]
    pub bonus_credits_hundredths: Option<i64>,
    /// Days after the payment when the bonus credits expire; absent: never (or no bonus).
    #[oai(skip_serializing_if_is_none)]
    pub bonus_expires_in_days: Option<u32>,
}

/// A plan's texts in one locale (spec 2.3).
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PlanTextView {
    /// Display name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Label of the period (month, lifetime, …).
    pub duration: String,
    /// Feature bullets.
    pub features: Vec<String>,
}

impl From<&PlanText> for PlanTextView {
    fn from(text: &PlanText) -> Self {
        Self {
            name: text.name.clone(),
            description: text.description.clone(),
            duration: text.duration.clone(),
            features: text.features.clone(),
        }
    }
}

/// A plan as `/pricing` shows it.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PlanView {
    /// The plan id (`planId` when buying).
    pub id: String,
    /// The provider id to pay through.
    pub provider: String,
    /// The price in major units (decimal string).
    pub amount: String,
    /// The price in minor units.
    pub amount_minor: i64,
    /// The struck-through original price, major units.
    #[oai(skip_serializing_if_is_none)]
    pub original_amount: Option<String>,
    /// The struck-through original price, minor units.
    #[oai(skip_serializing_if_is_none)]
    pub original_amount_minor: Option<i64>,
    /// ISO 4217 code.
    pub currency: String,
    /// Whether the plan is highlighted.
    pub recommended: bool,
    /// The offer the plan belongs to: plans sharing a group are one offer sold in several
    /// intervals, currencies or providers (one pricing card per group and interval); absent for
    /// a plan that is an offer of its own.
    #[oai(skip_serializing_if_is_none)]
    pub group: Option<String>,
    /// How often the plan is paid for, from its type and `duration.months`: `month`,
    /// `quarter`, `half_year`, `year`, `months` (every `duration.months` months), `lifetime`
    /// or `one_time` (a fixed-term one-time plan or a credit pack).
    pub interval: String,
    /// Duration and credits.
    pub duration: DurationView,
    /// Texts in the requested locale (falling back to its language, then `en`).
    pub text: PlanTextView,
    /// What the plan unlocks in the host app: feature keys mapped to `true` or a limit
    /// (empty when it declares none).
    pub entitlements: BTreeMap<String, EntitlementValueJson>,
}

impl PlanView {
    pub(crate) fn new(plan: &Plan, environment: AppEnvironment, locale: &Locale) -> Self {
        let price = plan.price_in(environment);
        let text = plan.text_for(locale);
        Self {
            id: plan.id().to_string(),
            provider: plan.provider().as_str().to_owned(),
            amount: major_units(price),
            amount_minor: price.amount_minor(),
            original_amount: plan.original_price().map(major_units),
            original_amount_minor: plan.original_price().map(|m| m.amount_minor()),
            currency: price.currency().code().to_owned(),
            recommended: plan.prominence() == Prominence::Recommended,
            group: plan.group().map(ToString::to_string),
            interval: plan.interval().code().to_owned(),
            duration: DurationView {
                months: plan.duration().map(Duration::months_value),
                duration_type: plan.plan_type().as_str().to_owned(),
                credits: plan.credits().map(|c| c.to_string()),
                credits_hundredths: plan.credits().map(Credits::hundredths),
                bonus_credits: plan.bonus().map(|b| b.credits.to_string()),
                bonus_credits_hundredths: plan.bonus().map(|b| b.credits.hundredths()),
                bonus_expires_in_days: plan.bonus().and_then(|b| b.expires_in_days),
            },
            text: PlanTextView::from(text),
            entitlements: entitlements_json(plan.entitlements()),
        }
    }
}

/// The plans on offer, in listing order.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PlanList {
    /// The plans.
    pub plans: Vec<PlanView>,
}

api_response! {
    /// `GET /api/plans`.
    pub enum PlansResponse {
        /// The plans on offer.
        200 Ok(Json<PlanList>),
    }
    problems {
        /// `validation_failed`: a malformed query.
        400 BadRequest,
    }
}

/// The public plan listing.
pub(crate) struct PlansApi {
    state: Arc<AppState>,
}

impl PlansApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the plan listing.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// What Tally sells.
    Plans,
}

#[OpenApi(tag = "Tag::Plans")]
impl PlansApi {
    /// The plans on offer (no sign-in needed), in listing order; plans restricted to other
    /// locales and hidden plans are left out.
    #[oai(path = "/api/plans", method = "get")]
    async fn plans(
        &self,
        request: &Request,
        /// A locale tag such as `en` or `zh-CN` (else `Accept-Language`, else `en`).
        #[oai(validator(max_length = 35))]
        locale: Query<Option<String>>,
    ) -> PlansResponse {
        let requested = crate::i18n::requested_locale(locale.0.as_deref(), request);
        let plans_port = &self.state.ports.plans;
        let listed = plans_port.public_plans(requested.as_ref()).await;
        let environment = plans_port.environment();
        let locale = requested.unwrap_or_else(Locale::english);
        match listed {
            Ok(plans) => PlansResponse::Ok(Json(PlanList {
                plans: plans
                    .iter()
                    .map(|p| PlanView::new(&p.plan, environment, &locale))
                    .collect(),
            })),
            Err(infra) => Problem::from(infra).into(),
        }
    }

    /// The plans on offer grouped as `/pricing` groups them (no sign-in needed): one entry per
    /// offer (plan `group`) and billing interval, its payment options one per provider, prices
    /// as charged in this environment and in production. With a user's credential, or an API
    /// key naming a user, each entry also says what that user holds of it.
    #[oai(path = "/api/offers", method = "get")]
    async fn offers(
        &self,
        request: &Request,
        credential: OptionalCredential,
        /// A locale tag such as `en` or `zh-CN` (else `Accept-Language`, else `en`): the texts'
        /// language and the currency shown where an offer has it.
        #[oai(validator(max_length = 35))]
        locale: Query<Option<String>>,
        /// Only offers priced in this currency (ISO 4217, e.g. `USD`).
        #[oai(validator(max_length = 8))]
        currency: Query<Option<String>>,
        /// Only this billing interval (`month`, `year`, `months-2`, `lifetime`, `one_time` …).
        #[oai(validator(max_length = 16))]
        interval: Query<Option<String>>,
        /// The user whose holdings to tell (API keys only; users see their own).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> OffersResponse {
        let query = OffersQuery {
            locale: crate::i18n::requested_locale(locale.0.as_deref(), request),
            currency: currency.0.as_deref(),
            interval: interval.0.as_deref(),
            user_id: user_id.0.as_deref(),
        };
        match crate::offers::offers(&self.state, &credential, query).await {
            Ok(list) => OffersResponse::Ok(Json(list)),
            Err(problem) => problem.into(),
        }
    }
}
