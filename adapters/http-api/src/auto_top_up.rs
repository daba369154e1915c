//! Automatic top-up: `GET /api/auto-top-up` (the rule, the saved payment methods and the
//! latest top-ups), `PUT /api/auto-top-up` (set the rule, turn it on or off),
//! `DELETE /api/auto-top-up/payment-methods/{methodId}` (remove a saved method), and
//! `GET /api/admin/accounts/{accountId}/auto-top-up` for administrators.
//!
//! A method is saved by buying a credits pack with `saveForAutoTopUp: true` on
//! `POST /api/payment/initiate` (the buyer's consent, kept with the order). The account's owners
//! and admins, or a personal account's user, read and change it (an API key with
//! `billing:write` for the user `?userId=` names).

use std::sync::Arc;

use application::accounts::Scope;
use application::ports::{SavedMethodRecord, TopUpRecord};
use application::use_cases::auto_top_up::{AutoTopUpError, AutoTopUpOverview, SetAutoTopUp};
use domain::{AccountId, Credits, PlanId};
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::{parse_id, timestamp};
use crate::problem::{Code, Problem, api_response};

/// `PUT /api/auto-top-up`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct SetAutoTopUpBody {
    /// Whether it is on. Turning it on again forgets why Tally turned it off (declines, a
    /// refunded top-up, the method removed), its declines and its cool-off.
    pub enabled: bool,
    /// Below this balance a spend asks for a top-up (credits, decimal string, above zero).
    #[oai(validator(min_length = 1, max_length = 32))]
    pub threshold: String,
    /// The credits pack to buy: listed, sold through a provider that charges saved methods.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub plan_id: String,
    /// The most top-ups per calendar month (UTC), 1 to 1,000 (default 5).
    #[oai(validator(minimum(value = "1"), maximum(value = "1000")))]
    pub max_per_month: Option<u32>,
    /// The most money per calendar month, in the pack's currency's minor units (cents), if
    /// capped.
    #[oai(validator(minimum(value = "1"), maximum(value = "100000000000")))]
    pub max_amount_minor: Option<i64>,
    /// The saved method to charge (`GET /api/auto-top-up`'s `paymentMethods`); omitted: the
    /// newest saved at the pack's provider, or none yet (the next purchase that saves one).
    #[oai(validator(min_length = 1, max_length = 80))]
    pub payment_method_id: Option<String>,
}

/// A saved payment method.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PaymentMethodView {
    /// Its id.
    pub id: String,
    /// The provider that keeps it.
    pub provider: String,
    /// A card's brand (`visa`).
    #[oai(skip_serializing_if_is_none)]
    pub brand: Option<String>,
    /// A card's last four digits.
    #[oai(skip_serializing_if_is_none)]
    pub last4: Option<String>,
    /// A wallet's account.
    #[oai(skip_serializing_if_is_none)]
    pub wallet_account: Option<String>,
    /// The order on which the buyer consented.
    pub order_id: String,
    /// Who consented.
    pub consented_by: String,
    /// When.
    pub consented_at: String,
}

impl From<&SavedMethodRecord> for PaymentMethodView {
    fn from(m: &SavedMethodRecord) -> Self {
        Self {
            id: m.id.clone(),
            provider: m.provider.as_str().to_owned(),
            brand: m.method.brand.clone(),
            last4: m.method.last4.clone(),
            wallet_account: m.method.wallet_account.clone(),
            order_id: m.order_id.to_string(),
            consented_by: m.consented_by.to_string(),
            consented_at: timestamp(m.consented_at),
        }
    }
}

/// One top-up.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct TopUpView {
    /// Its id.
    pub id: String,
    /// The account.
    pub account_id: String,
    /// The pack.
    pub plan_id: String,
    /// `requested`, `charging`, `succeeded`, `failed` or `authentication_required`.
    pub status: String,
    /// The balance the spend that asked for it left (decimal string).
    pub balance: String,
    /// Its order, once charged.
    #[oai(skip_serializing_if_is_none)]
    pub order_id: Option<String>,
    /// What it charges, in minor units, once charged.
    #[oai(skip_serializing_if_is_none)]
    pub amount_minor: Option<i64>,
    /// The currency.
    #[oai(skip_serializing_if_is_none)]
    pub currency: Option<String>,
    /// The credits it buys (decimal string), once charged.
    #[oai(skip_serializing_if_is_none)]
    pub credits: Option<String>,
    /// Why it failed (`monthly_cap`, `operator_cap`, `ceiling`, `cooling_off`, `disabled`,
    /// `no_payment_method`, or the provider's decline), or `authentication_required`.
    #[oai(skip_serializing_if_is_none)]
    pub reason: Option<String>,
    /// Where the buyer finishes a charge that needs them (the provider's checkout).
    #[oai(skip_serializing_if_is_none)]
    pub action_url: Option<String>,
    /// When a spend asked for it.
    pub created_at: String,
    /// When it last moved.
    pub updated_at: String,
}

impl From<&TopUpRecord> for TopUpView {
    fn from(t: &TopUpRecord) -> Self {
        Self {
            id: t.id.clone(),
            account_id: t.account_id.to_string(),
            plan_id: t.plan_id.to_string(),
            status: t.status.code().to_owned(),
            balance: t.balance.to_string(),
            order_id: t.order_id.as_ref().map(ToString::to_string),
            amount_minor: t.amount.map(|a| a.amount_minor()),
            currency: t.amount.map(|a| a.currency().code().to_owned()),
            credits: t.credits.map(|c| c.to_string()),
            reason: t.reason.clone(),
            action_url: t.action_url.clone(),
            created_at: timestamp(t.created_at),
            updated_at: timestamp(t.updated_at),
        }
    }
}

/// An account's rule and where it stands.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AutoTopUpRuleView {
    /// Whether it is on.
    pub enabled: bool,
    /// Below this balance a spend asks for a top-up (decimal string).
    pub threshold: String,
    /// The pack.
    pub plan_id: String,
    /// The most top-ups per calendar month.
    pub max_per_month: u32,
    /// The most money per calendar month (minor units), if capped.
    #[oai(skip_serializing_if_is_none)]
    pub max_amount_minor: Option<i64>,
    /// The saved method it charges.
    #[oai(skip_serializing_if_is_none)]
    pub payment_method: Option<PaymentMethodView>,
    /// Why Tally turned it off (`declines`, `refunded`, `method_removed`) until its owner
    /// turns it on again.
    #[oai(skip_serializing_if_is_none)]
    pub disabled_reason: Option<String>,
    /// Declines in a row.
    pub declines: u32,
    /// No charge before this moment (a decline's or an authentication's cool-off, or a
    /// monthly cap reached).
    #[oai(skip_serializing_if_is_none)]
    pub cool_off_until: Option<String>,
    /// Charges started this calendar month.
    pub month_count: u32,
    /// Money charged this calendar month (minor units).
    pub month_amount_minor: i64,
    /// When it was last changed.
    pub updated_at: String,
}

/// The operator's rails.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct TopUpRailsView {
    /// Hours without a charge after a decline or a charge that needs the buyer.
    pub cool_off_hours: i64,
    /// Declines in a row that turn the rule off.
    pub max_declines: u32,
    /// The most top-ups per account and calendar month, whatever the rule says.
    pub max_per_month: u32,
}

/// An account's automatic top-up.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AutoTopUpView {
    /// The account.
    pub account_id: String,
    /// Its rule, if it has one.
    #[oai(skip_serializing_if_is_none)]
    pub rule: Option<AutoTopUpRuleView>,
    /// Its saved methods that may be charged, newest first.
    pub payment_methods: Vec<PaymentMethodView>,
    /// Its latest top-ups, newest first.
    pub history: Vec<TopUpView>,
    /// The operator's rails.
    pub rails: TopUpRailsView,
}

impl From<&AutoTopUpOverview> for AutoTopUpView {
    fn from(o: &AutoTopUpOverview) -> Self {
        let rule = o.record.as_ref().map(|r| {
            let state = r.state.as_of(o.now);
            AutoTopUpRuleView {
                enabled: r.rule.enabled,
                threshold: r.rule.threshold.to_string(),
                plan_id: r.rule.plan.to_string(),
                max_per_month: r.rule.max_per_month,
                max_amount_minor: r.rule.max_amount_per_month,
                payment_method: r.method.as_ref().map(PaymentMethodView::from),
                disabled_reason: r.disabled_reason.map(|d| d.code().to_owned()),
                declines: state.declines,
                cool_off_until: state.cool_off_until.map(timestamp),
                month_count: state.month_count,
                month_amount_minor: state.month_amount,
                updated_at: timestamp(r.updated_at),
            }
        });
        Self {
            account_id: o.account.to_string(),
            rule,
            payment_methods: o.methods.iter().map(PaymentMethodView::from).collect(),
            history: o.history.iter().map(TopUpView::from).collect(),
            rails: TopUpRailsView {
                cool_off_hours: o.rails.cool_off_ms / 3_600_000,
                max_declines: o.rails.max_declines,
                max_per_month: o.rails.max_per_month,
            },
        }
    }
}

api_response! {
    /// `GET /api/auto-top-up`, `PUT /api/auto-top-up` and
    /// `DELETE /api/auto-top-up/payment-methods/{methodId}`.
    pub enum AutoTopUpResponse {
        /// The account's automatic top-up.
        200 Ok(Json<AutoTopUpView>),
    }
    problems {
        /// `validation_failed`: the body is malformed, or an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `not_billing_manager`: not an owner or admin of the account; `forbidden`: an API key
        /// without `billing:write`, or an account other than the one the API key is bound to.
        403 Forbidden,
        /// `payment_method_not_found`; `user_not_found`; `account_not_found`.
        404 NotFound,
        /// `auto_top_up_conflict`: the rule changed meanwhile (read it again).
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: a threshold that is not above zero or has more than two
        /// decimal places, or caps out of bounds; `auto_top_up_plan_not_allowed`: the plan is
        /// no listed credits pack, or its provider does not charge saved methods.
        422 Unprocessable,
    }
}

/// The automatic top-up endpoints.
pub(crate) struct AutoTopUpApi {
    state: Arc<AppState>,
}

impl AutoTopUpApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the automatic top-up endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Automatic top-up: saved payment methods and the rule that buys a pack off-session.
    AutoTopUp,
}

#[OpenApi(tag = "Tag::AutoTopUp")]
impl AutoTopUpApi {
    /// An account's automatic top-up: its rule, saved methods and latest top-ups.
    #[oai(path = "/api/auto-top-up", method = "get")]
    async fn auto_top_up(
        &self,
        credential: Credential,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user manages (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> AutoTopUpResponse {
        let result = async {
            let (acting, account) = self.acting(&credential, &user_id, &account_id).await?;
            (self.state.ports.payments)
                .auto_top_up(&acting, &account)
                .await
                .map_err(top_up_problem)
        };
        answer(result.await)
    }

    /// Set an account's automatic top-up rule, or turn it on or off (its owners and admins).
    #[oai(path = "/api/auto-top-up", method = "put")]
    async fn set_auto_top_up(
        &self,
        credential: Credential,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user manages (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
        body: Json<SetAutoTopUpBody>,
    ) -> AutoTopUpResponse {
        let result = async {
            let (user, account) = self.acting(&credential, &user_id, &account_id).await?;
            let set = set_of(user, account, body.0)?;
            (self.state.ports.payments)
                .set_auto_top_up(set)
                .await
                .map_err(top_up_problem)
        };
        answer(result.await)
    }

    /// Remove a saved payment method: it is never charged again, and a rule that charged it
    /// is turned off.
    #[oai(path = "/api/auto-top-up/payment-methods/:methodId", method = "delete")]
    async fn remove_payment_method(
        &self,
        credential: Credential,
        /// The method's id.
        #[oai(name = "methodId", validator(max_length = 80))]
        method_id: Path<String>,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user manages (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> AutoTopUpResponse {
        let result = async {
            let (user, account) = self.acting(&credential, &user_id, &account_id).await?;
            (self.state.ports.payments)
                .remove_payment_method(&user, &account, &method_id.0)
                .await
                .map_err(top_up_problem)
        };
        answer(result.await)
    }

    /// Any account's automatic top-up (administrators).
    #[oai(path = "/api/admin/accounts/:accountId/auto-top-up", method = "get")]
    async fn admin_auto_top_up(
        &self,
        credential: Credential,
        /// The account: a user's id (their personal account) or a team's.
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Path<String>,
    ) -> AutoTopUpResponse {
        let result = async {
            self.state.admin(&credential).await?;
            let account = parse_id(&account_id.0, AccountId::new, || {
                Problem::new(Code::AccountNotFound, "no such account")
            })?;
            (self.state.ports.payments)
                .top_up_overview(&account)
                .await
                .map_err(Problem::from)
        };
        answer(result.await)
    }
}

impl AutoTopUpApi {
    /// The acting user and the account they name.
    async fn acting(
        &self,
        credential: &Credential,
        user_id: &Query<Option<String>>,
        account_id: &Query<Option<String>>,
    ) -> Result<(domain::UserId, AccountId), Problem> {
        let (acting, account) = (self.state)
            .acting_in(
                credential,
                Scope::BillingWrite,
                user_id.0.as_deref(),
                account_id.0.as_deref(),
            )
            .await?;
        Ok((acting.user.id, account))
    }
}

fn answer(result: Result<AutoTopUpOverview, Problem>) -> AutoTopUpResponse {
    match result {
        Ok(overview) => AutoTopUpResponse::Ok(Json(AutoTopUpView::from(&overview))),
        Err(problem) => problem.into(),
    }
}

/// The use case's request from the body, its numbers parsed here.
fn set_of(
    user: domain::UserId,
    account: AccountId,
    body: SetAutoTopUpBody,
) -> Result<SetAutoTopUp, Problem> {
    let threshold = Credits::parse_positive(&body.threshold).ok_or_else(|| {
        Problem::invalid_field(
            "threshold",
            "must be a number of credits above zero with at most two decimal places",
        )
    })?;
    let plan_id = PlanId::new(body.plan_id)
        .map_err(|e| top_up_problem(AutoTopUpError::PlanNotAllowed(format!("planId: {e}"))))?;
    Ok(SetAutoTopUp {
        user,
        account,
        enabled: body.enabled,
        threshold,
        plan_id,
        max_per_month: body.max_per_month.unwrap_or(5),
        max_amount_per_month: body.max_amount_minor,
        method_id: body.payment_method_id,
    })
}

fn top_up_problem(e: AutoTopUpError) -> Problem {
    match e {
        AutoTopUpError::AccountNotFound => Problem::new(Code::AccountNotFound, e.to_string()),
        AutoTopUpError::NotBillingManager => Problem::new(Code::NotBillingManager, e.to_string()),
        AutoTopUpError::Invalid(message) => Problem::invalid_field("body", message),
        AutoTopUpError::PlanNotAllowed(_) => {
            Problem::new(Code::AutoTopUpPlanNotAllowed, e.to_string())
        }
        AutoTopUpError::MethodNotFound => Problem::new(Code::PaymentMethodNotFound, e.to_string()),
        AutoTopUpError::Conflict => Problem::new(Code::AutoTopUpConflict, e.to_string()),
        AutoTopUpError::Infra(infra) => infra.into(),
    }
}
