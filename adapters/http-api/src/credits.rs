//! Credits reads (spec 4.2): balance, transaction history and the complete status.
//!
//! Signed-in users read their own; a service API key with scope `credits:read` names the user
//! with `?userId=`.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::accounts::Scope;
use application::ports::{CreditTransaction, Reservation};
use application::use_cases::report_status::{OneTimeAccess, StatusReport};
use domain::entitlements::Entitlements;
use domain::{AccessEnd, Credits, Timestamp};
use poem::Request;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::{PageInfo, SubscriptionView, page_request, signed_credits, timestamp};
use crate::entitlements::{EntitlementValueJson, entitlements_json};
use crate::i18n::{Language, text_language, transaction_description};
use crate::problem::{Problem, api_response};
use crate::token_usage::PricingView;

/// A credit balance.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct BalanceView {
    /// Available credits (held credits already deducted), decimal string with two places.
    pub balance: String,
    /// The same, in hundredths of a credit.
    pub balance_hundredths: i64,
}

impl From<Credits> for BalanceView {
    fn from(c: Credits) -> Self {
        Self {
            balance: c.to_string(),
            balance_hundredths: c.hundredths(),
        }
    }
}

/// One credit transaction.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct TransactionView {
    /// Id (increasing).
    pub id: i64,
    /// The stable type code: `purchase_grant`, `subscription_grant`, `consumption`,
    /// `reservation_hold`, `reservation_settle`, `reservation_release`, `refund_clawback`,
    /// `admin_adjustment` or `expiry`.
    #[oai(rename = "type")]
    pub kind: String,
    /// The type, described in the requested language (`en` or `zh-CN`).
    pub description: String,
    /// Signed amount, decimal string with two places (`-1.50`, `100.00`).
    pub amount: String,
    /// Signed amount in hundredths.
    pub amount_hundredths: i64,
    /// The balance after it, decimal string.
    pub balance_after: String,
    /// The balance after it, in hundredths.
    pub balance_after_hundredths: i64,
    /// The order that bought or refunded the credits.
    #[oai(skip_serializing_if_is_none)]
    pub order_id: Option<String>,
    /// The reservation held, settled or released.
    #[oai(skip_serializing_if_is_none)]
    pub reservation_id: Option<String>,
    /// The subscription whose period granted them.
    #[oai(skip_serializing_if_is_none)]
    pub subscription_id: Option<String>,
    /// The feature used.
    #[oai(skip_serializing_if_is_none)]
    pub feature: Option<String>,
    /// The AI model used.
    #[oai(skip_serializing_if_is_none)]
    pub model: Option<String>,
    /// Tokens used.
    #[oai(skip_serializing_if_is_none)]
    pub tokens: Option<u64>,
    /// The team member who spent (team accounts only).
    #[oai(skip_serializing_if_is_none)]
    pub member_id: Option<String>,
    /// What a grant's credits are: `paid`, `promotional`, `bonus` or `compensation` (grants
    /// only).
    #[oai(skip_serializing_if_is_none)]
    pub category: Option<String>,
    /// How it was priced.
    #[oai(flatten)]
    pub pricing: PricingView,
    /// When.
    pub created_at: String,
}

impl TransactionView {
    pub(crate) fn new(t: &CreditTransaction, language: Language) -> Self {
        Self {
            id: t.id,
            kind: t.kind.code().to_owned(),
            description: transaction_description(t.kind, language).to_owned(),
            amount: signed_credits(t.amount),
            amount_hundredths: t.amount.hundredths(),
            balance_after: t.balance_after.to_string(),
            balance_after_hundredths: t.balance_after.hundredths(),
            order_id: t.context.order_id.as_ref().map(ToString::to_string),
            reservation_id: t.context.reservation_id.as_ref().map(ToString::to_string),
            subscription_id: t.context.subscription_id.as_ref().map(ToString::to_string),
            feature: t.context.feature.clone(),
            model: t.context.model.clone(),
            tokens: t.context.tokens,
            member_id: t.member_id.as_ref().map(ToString::to_string),
            category: t.context.grant_category.map(|c| c.code().to_owned()),
            pricing: PricingView::from(&t.context),
            created_at: timestamp(t.created_at),
        }
    }
}

/// A page of credit transactions, newest first.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct TransactionPage {
    /// The transactions on this page.
    pub items: Vec<TransactionView>,
    /// Where this page sits.
    #[oai(flatten)]
    pub page: PageInfo,
}

/// A pending reservation, as the status shows it.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PendingReservationView {
    /// The reservation id.
    pub id: String,
    /// Credits held, decimal string.
    pub held: String,
    /// Credits held, in hundredths.
    pub held_hundredths: i64,
    /// When the hold lapses by itself.
    pub expires_at: String,
}

impl From<&Reservation> for PendingReservationView {
    fn from(r: &Reservation) -> Self {
        Self {
            id: r.id.to_string(),
            held: r.held.to_string(),
            held_hundredths: r.held.hundredths(),
            expires_at: timestamp(r.expires_at),
        }
    }
}

/// A one-time purchase whose access still runs.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct OneTimeAccessView {
    /// The paid order.
    pub order_id: String,
    /// The plan bought.
    pub plan_id: String,
    /// When access ends; absent for lifetime access.
    #[oai(skip_serializing_if_is_none)]
    pub ends_at: Option<String>,
}

impl From<&OneTimeAccess> for OneTimeAccessView {
    fn from(a: &OneTimeAccess) -> Self {
        Self {
            order_id: a.order_id.to_string(),
            plan_id: a.plan_id.to_string(),
            ends_at: match a.ends {
                AccessEnd::Lifetime => None,
                AccessEnd::At(end) => Some(timestamp(end)),
            },
        }
    }
}

/// Credits plus everything the user holds: what decides what the user may use.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct StatusView {
    /// Available credits, decimal string.
    pub balance: String,
    /// Available credits, in hundredths.
    pub balance_hundredths: i64,
    /// The available credits by what they are: paid for, or given (promotional, bonus,
    /// compensation). Together they are `balance`, unless credits were ever spent beyond what
    /// the grants held (then less).
    pub balance_by_category: BalanceByCategoryView,
    /// The first of `subscriptions` (else the newest one not expired): kept for clients that
    /// read one subscription.
    #[oai(skip_serializing_if_is_none)]
    pub subscription: Option<SubscriptionView>,
    /// Every subscription the user holds: live (trialing, active, past due, scheduled to
    /// cancel) or canceled with paid time left.
    pub subscriptions: Vec<SubscriptionView>,
    /// Whether a paid one-time lifetime purchase grants access.
    pub lifetime_access: bool,
    /// The order of that purchase.
    #[oai(skip_serializing_if_is_none)]
    pub lifetime_order_id: Option<String>,
    /// Every one-time purchase whose access still runs (lifetime or until a date).
    pub one_time_access: Vec<OneTimeAccessView>,
    /// Whether the user has access now (a subscription or a one-time purchase grants it).
    pub has_access: bool,
    /// Credits held by pending reservations.
    pub pending_reservations: Vec<PendingReservationView>,
    /// What the user may use in the host app now: feature keys mapped to `true` or a limit, as
    /// `GET /api/entitlements` answers them (which purchase grants each key is there).
    pub entitlements: BTreeMap<String, EntitlementValueJson>,
}

/// Available credits by what they are, each as a decimal string and in hundredths.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct BalanceByCategoryView {
    /// Bought: credits packs, subscription periods, an upgrade's extra credits.
    pub paid: String,
    /// `paid` in hundredths.
    pub paid_hundredths: i64,
    /// Given to win or keep a customer: sign-up grants, promotions.
    pub promotional: String,
    /// `promotional` in hundredths.
    pub promotional_hundredths: i64,
    /// Given with a purchase.
    pub bonus: String,
    /// `bonus` in hundredths.
    pub bonus_hundredths: i64,
    /// Given to make up for something: refunds in credits, goodwill.
    pub compensation: String,
    /// `compensation` in hundredths.
    pub compensation_hundredths: i64,
}

impl BalanceByCategoryView {
    fn new(by: &BTreeMap<domain::GrantCategory, domain::Credits>) -> Self {
        let of = |c| by.get(&c).copied().unwrap_or(domain::Credits::ZERO);
        let (paid, promotional, bonus, compensation) = (
            of(domain::GrantCategory::Paid),
            of(domain::GrantCategory::Promotional),
            of(domain::GrantCategory::Bonus),
            of(domain::GrantCategory::Compensation),
        );
        Self {
            paid: paid.to_string(),
            paid_hundredths: paid.hundredths(),
            promotional: promotional.to_string(),
            promotional_hundredths: promotional.hundredths(),
            bonus: bonus.to_string(),
            bonus_hundredths: bonus.hundredths(),
            compensation: compensation.to_string(),
            compensation_hundredths: compensation.hundredths(),
        }
    }
}

impl StatusView {
    pub(crate) fn new(report: &StatusReport, now: Timestamp, entitlements: &Entitlements) -> Self {
        Self {
            balance: report.balance.to_string(),
            balance_hundredths: report.balance.hundredths(),
            balance_by_category: BalanceByCategoryView::new(&report.by_category),
            subscription: report
                .subscription
                .as_ref()
                .map(|s| SubscriptionView::new(s, report.access_of(s))),
            subscriptions: report
                .subscriptions
                .iter()
                .map(|held| SubscriptionView::new(&held.subscription, held.access))
                .collect(),
            lifetime_access: report.lifetime_order.is_some(),
            lifetime_order_id: report
                .lifetime_order
                .as_ref()
                .map(|o| o.order.id().to_string()),
            one_time_access: report
                .one_time_access
                .iter()
                .map(OneTimeAccessView::from)
                .collect(),
            has_access: report.has_access(now),
            pending_reservations: report
                .pending_reservations
                .iter()
                .map(PendingReservationView::from)
                .collect(),
            entitlements: entitlements_json(entitlements),
        }
    }
}

api_response! {
    /// `GET /api/credits/balance`.
    pub enum BalanceResponse {
        /// The balance.
        200 Ok(Json<BalanceView>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: another user's credits, or an API key without `credits:read`.
        /// Also `forbidden`: an account other than the one the API key is bound to, or a user outside it.
        403 Forbidden,
        /// `user_not_found`: the `userId` an API key named does not exist; `account_not_found`:
        /// the user does not belong to the `accountId` named.
        404 NotFound,
    }
}

api_response! {
    /// `GET /api/credits/transactions`.
    pub enum TransactionsResponse {
        /// A page of transactions, newest first.
        200 Ok(Json<TransactionPage>),
    }
    problems {
        /// `invalid_pagination`: page or limit out of range; `validation_failed`: an API key
        /// named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: another user's credits, or an API key without `credits:read`.
        /// Also `forbidden`: an account other than the one the API key is bound to, or a user outside it.
        403 Forbidden,
        /// `user_not_found`: the `userId` an API key named does not exist; `account_not_found`:
        /// the user does not belong to the `accountId` named.
        404 NotFound,
    }
}

api_response! {
    /// `GET /api/credits/status`.
    pub enum StatusResponse {
        /// The status.
        200 Ok(Json<StatusView>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: another user's credits, or an API key without `credits:read`.
        /// Also `forbidden`: an account other than the one the API key is bound to, or a user outside it.
        403 Forbidden,
        /// `user_not_found`: the `userId` an API key named does not exist;
        /// `account_not_found`: the user is not a member of the `accountId` named.
        404 NotFound,
    }
}

/// The credits read endpoints.
pub(crate) struct CreditsApi {
    state: Arc<AppState>,
}

impl CreditsApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the credits endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Credit balance, history and status.
    Credits,
}

#[OpenApi(tag = "Tag::Credits")]
impl CreditsApi {
    /// The credit balance.
    #[oai(path = "/api/credits/balance", method = "get")]
    async fn balance(
        &self,
        credential: Credential,
        /// The user (API keys with `credits:read` only; users read their own).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> BalanceResponse {
        let result = async {
            let (_, account) = self
                .state
                .acting_in(
                    &credential,
                    Scope::CreditsRead,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            Ok::<_, Problem>(self.state.ports.credits.balance(&account).await?)
        };
        match result.await {
            Ok(balance) => BalanceResponse::Ok(Json(balance.into())),
            Err(problem) => problem.into(),
        }
    }

    /// A page of credit transactions, newest first, described in the requested language.
    #[oai(path = "/api/credits/transactions", method = "get")]
    #[allow(clippy::too_many_arguments)] // reason: one parameter per query parameter of the endpoint
    async fn transactions(
        &self,
        credential: Credential,
        request: &Request,
        /// Page number, from 1 (default 1).
        page: Query<Option<String>>,
        /// Page size, 1 to 100 (default 20).
        limit: Query<Option<String>>,
        /// `en` or `zh-CN` (else `Accept-Language`, else `en`).
        #[oai(validator(max_length = 35))]
        locale: Query<Option<String>>,
        /// The user (API keys with `credits:read` only; users read their own).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> TransactionsResponse {
        let language = text_language(locale.0.as_deref(), request);
        let result = async {
            let (_, account) = self
                .state
                .acting_in(
                    &credential,
                    Scope::CreditsRead,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            let page = page_request(page.0.as_deref(), limit.0.as_deref())?;
            Ok::<_, Problem>(
                self.state
                    .ports
                    .credits
                    .transaction_history(&account, page)
                    .await?,
            )
        };
        match result.await {
            Ok(page) => TransactionsResponse::Ok(Json(TransactionPage {
                items: page
                    .items
                    .iter()
                    .map(|t| TransactionView::new(t, language))
                    .collect(),
                page: PageInfo::from(&page),
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Credits plus subscription: balance, current subscription, lifetime access, whether the
    /// user has access now, pending reservations, and entitlements.
    #[oai(path = "/api/credits/status", method = "get")]
    async fn status(
        &self,
        credential: Credential,
        /// The user (API keys with `credits:read` only; users read their own).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to: its balance, purchases and entitlements
        /// (omitted: the user's personal account's).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> StatusResponse {
        let result = async {
            let (_, account) = self
                .state
                .acting_in(
                    &credential,
                    Scope::CreditsRead,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            let credits = &self.state.ports.credits;
            let report = credits.report_account_status(&account).await?;
            let effective = self.state.ports.credits.entitlements_of(&report).await?;
            Ok::<_, Problem>((report, effective.entitlements))
        };
        match result.await {
            Ok((report, entitlements)) => {
                StatusResponse::Ok(Json(StatusView::new(&report, report.as_of, &entitlements)))
            }
            Err(problem) => problem.into(),
        }
    }
}
