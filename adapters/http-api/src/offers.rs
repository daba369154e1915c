//! `GET /api/offers`: the plans on offer grouped as `/pricing` groups them, for a host app that
//! builds its own pricing page. One entry per offer (plan `group`) and billing interval, chosen
//! by `domain::plan::CurrencyChoice` exactly as the page chooses its cards; each entry's payment
//! options are its plans, one per provider; prices are the ones charged in this environment
//! beside the configured production price. With a user's credential (or an API key naming a
//! user) each entry also says what that user holds of it.

use std::collections::BTreeMap;

use application::accounts::{Scope, User};
use application::use_cases::sessions::{AccountsError, Principal};
use domain::plan::{
    CurrencyChoice, Held, Holdings, OfferCard, PlanInterval, Prominence, group_offers,
};
use domain::{AppEnvironment, Credits, Currency, Locale, Money, Plan};
use poem_openapi::Object;
use poem_openapi::payload::Json;

use crate::AppState;
use crate::auth::{OptionalCredential, denied, unauthorized};
use crate::dto::major_units;
use crate::entitlements::{EntitlementValueJson, entitlements_json};
use crate::plans::PlanTextView;
use crate::problem::{Problem, api_response};

/// The scope an API key needs to read what a user it names holds.
const READ_SCOPE: Scope = Scope::BillingRead;

/// An amount of money.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PriceView {
    /// Major units, a decimal string (`"9.99"`).
    pub amount: String,
    /// Minor units (`999`).
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: String,
}

impl From<Money> for PriceView {
    fn from(money: Money) -> Self {
        Self {
            amount: major_units(money),
            amount_minor: money.amount_minor(),
            currency: money.currency().code().to_owned(),
        }
    }
}

/// One way to pay an offer: a plan and its provider.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct OfferOptionView {
    /// The plan id (`planId` when buying).
    pub plan_id: String,
    /// The provider id (`provider` when buying).
    pub provider: String,
    /// The price charged in this environment (in development a plan's `developmentAmount`,
    /// when it has one).
    pub price: PriceView,
    /// The configured price, charged in production.
    pub production_price: PriceView,
    /// The struck-through original price.
    #[oai(skip_serializing_if_is_none)]
    pub original_price: Option<PriceView>,
}

impl OfferOptionView {
    fn new(plan: &Plan, environment: AppEnvironment) -> Self {
        Self {
            plan_id: plan.id().to_string(),
            provider: plan.provider().as_str().to_owned(),
            price: plan.price_in(environment).into(),
            production_price: plan.price().into(),
            original_price: plan.original_price().map(PriceView::from),
        }
    }
}

/// One pricing card: an offer at one billing interval and currency.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct OfferView {
    /// The offer: `group-<group>`, or `plan-<id>` for a plan that is an offer of its own.
    pub key: String,
    /// The plans' `group`, when they have one.
    #[oai(skip_serializing_if_is_none)]
    pub group: Option<String>,
    /// `one_time`, `recurring` or `credits`.
    #[oai(rename = "type")]
    pub plan_type: String,
    /// The billing interval: `month`, `quarter`, `half_year`, `year`, `months-<n>`,
    /// `lifetime` or `one_time` (what `?interval=` takes).
    pub interval: String,
    /// The currency the card is shown in.
    pub currency: String,
    /// The first option's texts, in the requested locale.
    pub text: PlanTextView,
    /// The first option's price charged in this environment.
    pub price: PriceView,
    /// The first option's configured (production) price.
    pub production_price: PriceView,
    /// The first option's struck-through original price.
    #[oai(skip_serializing_if_is_none)]
    pub original_price: Option<PriceView>,
    /// What paying at this interval saves over paying monthly, in whole percent.
    #[oai(skip_serializing_if_is_none)]
    pub saving_percent: Option<u32>,
    /// Whether one of the options is highlighted.
    pub recommended: bool,
    /// Credits granted (per period for a subscription), a decimal string.
    #[oai(skip_serializing_if_is_none)]
    pub credits: Option<String>,
    /// Credits granted, in hundredths.
    #[oai(skip_serializing_if_is_none)]
    pub credits_hundredths: Option<i64>,
    /// What the first option unlocks in the host app.
    pub entitlements: BTreeMap<String, EntitlementValueJson>,
    /// With a user: `current` (a live subscription of theirs is on this card), `owned` (a
    /// one-time purchase whose access still runs) or `none`; absent without one.
    #[oai(skip_serializing_if_is_none)]
    pub held: Option<String>,
    /// The ways to pay, one plan per provider, in listing order.
    pub options: Vec<OfferOptionView>,
}

/// The offers, grouped as `/pricing` groups them.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct OfferList {
    /// `development` or `production`: in development `price` is a plan's development price.
    pub environment: String,
    /// The billing intervals sold (in the asked currency), shortest first: a toggle's choices.
    pub intervals: Vec<String>,
    /// The user whose holdings `held` tells, when there is one.
    #[oai(skip_serializing_if_is_none)]
    pub user_id: Option<String>,
    /// One entry per offer and interval, in listing order, shortest interval first.
    pub offers: Vec<OfferView>,
}

api_response! {
    /// `GET /api/offers`.
    pub enum OffersResponse {
        /// The offers.
        200 Ok(Json<OfferList>),
    }
    problems {
        /// `validation_failed`: a malformed query.
        400 BadRequest,
        /// `unauthorized`: a credential that is not valid, or `userId` without one.
        401 Unauthorized,
        /// `forbidden`: another user's holdings, or an API key without the scope.
        /// Also `forbidden`: a user outside the account the API key is bound to.
        403 Forbidden,
        /// `user_not_found`: the `userId` an API key named does not exist.
        404 NotFound,
        /// `validation_failed`: `currency` or `interval` names none (the error names the field).
        422 UnprocessableEntity,
    }
}

/// What `GET /api/offers` was asked.
pub(crate) struct OffersQuery<'a> {
    pub(crate) locale: Option<Locale>,
    pub(crate) currency: Option<&'a str>,
    pub(crate) interval: Option<&'a str>,
    pub(crate) user_id: Option<&'a str>,
}

/// `GET /api/offers`.
pub(crate) async fn offers(
    state: &AppState,
    credential: &OptionalCredential,
    query: OffersQuery<'_>,
) -> Result<OfferList, Problem> {
    let currency = query
        .currency
        .map(|c| {
            c.parse::<Currency>().map_err(|_| {
                Problem::invalid_field("currency", "must be an ISO 4217 code Tally prices in")
            })
        })
        .transpose()?;
    let interval = query
        .interval
        .map(|i| {
            PlanInterval::from_slug(i).ok_or_else(|| {
                Problem::invalid_field(
                    "interval",
                    "must be month, quarter, half_year, year, months-<n>, lifetime or one_time",
                )
            })
        })
        .transpose()?;
    let (user, holdings) = holder(state, credential, query.user_id).await?.unzip();
    let listed = state
        .ports
        .plans
        .public_plans(query.locale.as_ref())
        .await?;
    let environment = state.ports.plans.environment();
    let locale = query.locale.unwrap_or_else(Locale::english);
    let plans: Vec<&Plan> = listed.iter().map(|p| &p.plan).collect();
    let grouped = group_offers(plans.iter().copied());
    let choice = CurrencyChoice::new(currency, &locale);
    let context = CardContext {
        environment,
        locale: &locale,
        holdings: holdings.as_ref(),
    };
    Ok(OfferList {
        environment: match environment {
            AppEnvironment::Development => "development",
            AppEnvironment::Production => "production",
        }
        .to_owned(),
        intervals: choice
            .sold_intervals(&grouped)
            .into_iter()
            .map(PlanInterval::slug)
            .collect(),
        user_id: user.map(|u| u.id.to_string()),
        offers: choice
            .cards_per_interval(&grouped, interval)
            .iter()
            .map(|card| context.view(card))
            .collect(),
    })
}

/// Whose holdings the offers tell, and what they hold: nobody without a credential, or for an API key naming no
/// user; the signed-in user's personal account; for an API key with the scope, the personal
/// account of the user it names, or the account it is bound to.
async fn holder(
    state: &AppState,
    credential: &OptionalCredential,
    user_id: Option<&str>,
) -> Result<Option<(User, Holdings)>, Problem> {
    let Some(token) = credential.token() else {
        return match user_id {
            Some(_) => Err(unauthorized()),
            None => Ok(None),
        };
    };
    let principal = state
        .ports
        .accounts
        .authenticate(token)
        .await
        .map_err(|e| match e {
            AccountsError::Infra(infra) => Problem::from(infra),
            _ => unauthorized(),
        })?;
    if matches!(principal, Principal::Service(_)) && user_id.is_none() {
        return Ok(None);
    }
    let acting = state
        .principal_acting_for(principal, READ_SCOPE, user_id)
        .await?;
    let account = acting.account(None).map_err(denied)?;
    let account = state.account_for(&acting.user.id, account).await?;
    let report = state.ports.credits.report_account_status(&account).await?;
    Ok(Some((acting.user, report.holdings())))
}

/// What every entry needs besides its card.
struct CardContext<'a> {
    environment: AppEnvironment,
    locale: &'a Locale,
    holdings: Option<&'a Holdings>,
}

impl CardContext<'_> {
    fn view(&self, card: &OfferCard<'_, '_>) -> OfferView {
        let choice = &card.choice;
        let lead = choice.methods[0];
        let text = lead.text_for(self.locale);
        OfferView {
            key: card.offer.key().anchor(),
            group: lead.group().map(ToString::to_string),
            plan_type: lead.plan_type().as_str().to_owned(),
            interval: choice.interval.slug(),
            currency: choice.currency.code().to_owned(),
            text: PlanTextView::from(text),
            price: lead.price_in(self.environment).into(),
            production_price: lead.price().into(),
            original_price: lead.original_price().map(PriceView::from),
            saving_percent: card.offer.saving_percent(
                PlanInterval::Month,
                choice.interval,
                choice.currency,
            ),
            recommended: choice
                .methods
                .iter()
                .any(|p| p.prominence() == Prominence::Recommended),
            credits: lead.credits().map(|c| c.to_string()),
            credits_hundredths: lead.credits().map(Credits::hundredths),
            entitlements: entitlements_json(lead.entitlements()),
            held: self.holdings.map(|h| held_code(h.of(card)).to_owned()),
            options: choice
                .methods
                .iter()
                .map(|p| OfferOptionView::new(p, self.environment))
                .collect(),
        }
    }
}

const fn held_code(held: Held) -> &'static str {
    match held {
        Held::Current => "current",
        Held::Owned => "owned",
        Held::Nothing => "none",
    }
}
