//! [`AdminService`]: the administrators' console — plans, API keys, customers, team accounts,
//! orders, refunds, the webhook inbox, the audit log and the overview's figures.
//!
//! Every change takes the acting administrator and writes an audit entry with it; the caller has
//! checked that the principal is an administrator (`authorization::administrator`).

use domain::{AccountId, ApiKeyId, PlanId, SpendLimitId, Subscription, SubscriptionId, UserId};

use crate::accounts::{ApiKey, User};
use crate::ports::{
    AuditEntry, CreditTransaction, ImportReport, InboxFilter, OrderFilter, OrderRecord,
    PlanAllowance, RecordedEvent, RedemptionRecord, StoredPlan, StoredPromoCode,
    TeamAccountSummary,
};
#[cfg(doc)]
use crate::service::Service;
use crate::use_cases::InfraError;
use crate::use_cases::admin_console::{
    AdjustCredits, AdjustCreditsError, AdjustedCredits, AdminCancelError, AdminListError,
    CursorPage, CustomerOverview, PageAfter, PlanAllowanceError, PromoAdminError, PromoDraft,
    ReplayError, Replayed, TeamOverview,
};
use crate::use_cases::admin_reports::AdminOverview;
use crate::use_cases::api_keys::{ApiKeyError, CreatedApiKey, KeyWithLimits};
use crate::use_cases::manage_plans::{ManagePlansError, PlanInput};
use crate::use_cases::refund_order::{RefundAccepted, RefundOrder, RefundOrderError};
use crate::use_cases::spend_limits::{LimitDraft, LimitsError, ShownLimit};

inbound_port! {
    /// The administrators' console.
    #[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
    #[async_trait::async_trait]
    pub trait AdminService {
        /// Every dynamic plan, hidden ones included, in listing order (see
        /// [`Service::admin_plans`]).
        async fn admin_plans(&self) -> Result<Vec<StoredPlan>, InfraError>;

        /// Create a dynamic plan (see [`Service::create_plan`]).
        async fn create_plan(
            &self,
            admin: &User,
            input: &PlanInput,
        ) -> Result<StoredPlan, ManagePlansError>;

        /// Replace a dynamic plan (see [`Service::update_plan`]).
        async fn update_plan(
            &self,
            admin: &User,
            id: &str,
            input: &PlanInput,
        ) -> Result<StoredPlan, ManagePlansError>;

        /// Hide or show a dynamic plan (see [`Service::set_plan_hidden`]).
        async fn set_plan_hidden(
            &self,
            admin: &User,
            id: &PlanId,
            hidden: bool,
        ) -> Result<StoredPlan, ManagePlansError>;

        /// Delete a dynamic plan (see [`Service::delete_plan`]).
        async fn delete_plan(&self, admin: &User, id: &PlanId) -> Result<(), ManagePlansError>;

        /// Set the dynamic plans' listing order (see [`Service::reorder_plans`]).
        async fn reorder_plans(&self, admin: &User, ids: &[PlanId]) -> Result<(), ManagePlansError>;

        /// Copy the static catalogue into the dynamic table (see
        /// [`Service::import_static_plans`]).
        async fn import_static_plans(&self, admin: &User) -> Result<ImportReport, ManagePlansError>;

        /// Create an API key; its secret is in the answer only (see
        /// [`Service::create_api_key`]).
        async fn create_api_key<'a>(
            &self,
            admin: &User,
            name: &str,
            scopes: &[String],
            account: Option<&'a str>,
        ) -> Result<CreatedApiKey, ApiKeyError>;

        /// Every API key, newest first (see [`Service::list_api_keys`]).
        async fn list_api_keys(&self) -> Result<Vec<ApiKey>, ApiKeyError>;

        /// Every API key with the spend limits on it (see [`Service::api_keys_with_limits`]).
        async fn api_keys_with_limits(&self) -> Result<Vec<KeyWithLimits>, ApiKeyError>;

        /// Revoke an API key (see [`Service::revoke_api_key`]).
        async fn revoke_api_key(&self, admin: &User, id: &ApiKeyId) -> Result<(), ApiKeyError>;

        /// Grant or take credits by hand (see [`Service::adjust_credits`]).
        async fn adjust_credits(
            &self,
            request: &AdjustCredits,
        ) -> Result<AdjustedCredits, AdjustCreditsError>;

        /// Refund a paid order through its provider (see [`Service::refund_order`]).
        async fn refund_order(
            &self,
            admin: &User,
            request: &RefundOrder,
        ) -> Result<RefundAccepted, RefundOrderError>;

        /// Recorded provider events, newest first (see [`Service::webhook_inbox`]).
        async fn webhook_inbox(
            &self,
            filter: &InboxFilter,
            page: &PageAfter,
        ) -> Result<CursorPage<RecordedEvent>, AdminListError>;

        /// Apply a recorded event again (see [`Service::replay_webhook_event`]).
        async fn replay_webhook_event(&self, admin: &User, id: i64)
            -> Result<Replayed, ReplayError>;

        /// Customers by e-mail prefix or id, newest first (see [`Service::find_customers`]).
        async fn find_customers<'a>(
            &self,
            query: Option<&'a str>,
            page: &PageAfter,
        ) -> Result<CursorPage<User>, AdminListError>;

        /// One customer's account, holdings and payments (see [`Service::customer_overview`]).
        async fn customer_overview(&self, user_id: &UserId)
        -> Result<CustomerOverview, AdminListError>;

        /// One customer's credit transactions, newest first (see
        /// [`Service::customer_transactions`]).
        async fn customer_transactions(
            &self,
            user_id: &UserId,
            page: &PageAfter,
        ) -> Result<CursorPage<CreditTransaction>, AdminListError>;

        /// Orders by status, provider and user, newest first (see [`Service::admin_orders`]).
        async fn admin_orders(
            &self,
            filter: &OrderFilter,
            page: &PageAfter,
        ) -> Result<CursorPage<OrderRecord>, AdminListError>;

        /// Every team account, newest first (see [`Service::admin_team_accounts`]).
        async fn admin_team_accounts(
            &self,
            page: &PageAfter,
        ) -> Result<CursorPage<TeamAccountSummary>, AdminListError>;

        /// One team account with its members and seats (see
        /// [`Service::admin_team_account`]).
        async fn admin_team_account(
            &self,
            account_id: &AccountId,
        ) -> Result<TeamOverview, AdminListError>;

        /// The administrators' actions, newest first (see [`Service::audit_log`]).
        async fn audit_log(&self, page: &PageAfter)
            -> Result<CursorPage<AuditEntry>, AdminListError>;

        /// Cancel a customer's subscription at its period end (see
        /// [`Service::cancel_subscription_for_customer`]).
        async fn cancel_subscription_for_customer(
            &self,
            admin: &User,
            subscription_id: &SubscriptionId,
        ) -> Result<Subscription, AdminCancelError>;

        /// Cancel a customer's subscription now (see
        /// [`Service::cancel_subscription_now_for_customer`]).
        async fn cancel_subscription_now_for_customer(
            &self,
            admin: &User,
            subscription_id: &SubscriptionId,
        ) -> Result<Subscription, AdminCancelError>;

        /// The overview's figures (see [`Service::admin_overview`]).
        async fn admin_overview(&self) -> Result<AdminOverview, InfraError>;

        /// The hidden plans allowed to a user (see [`Service::plan_allowances`]).
        async fn plan_allowances(
            &self,
            user: &UserId,
        ) -> Result<Vec<PlanAllowance>, PlanAllowanceError>;

        /// Allow a user a hidden plan (see [`Service::allow_plan`]).
        async fn allow_plan(
            &self,
            admin: &User,
            user: &UserId,
            plan: &PlanId,
        ) -> Result<PlanAllowance, PlanAllowanceError>;

        /// Withdraw a user's allowance of a plan (see [`Service::remove_plan_allowance`]).
        async fn remove_plan_allowance(
            &self,
            admin: &User,
            user: &UserId,
            plan: &PlanId,
        ) -> Result<(), PlanAllowanceError>;

        /// Any account's spend limits with their usage (see [`Service::customer_limits`]).
        async fn customer_limits(
            &self,
            account: &AccountId,
        ) -> Result<Vec<ShownLimit>, LimitsError>;

        /// Add a spend limit to any account (see [`Service::add_customer_limit`]).
        async fn add_customer_limit(
            &self,
            admin: &User,
            account: &AccountId,
            draft: LimitDraft,
        ) -> Result<ShownLimit, LimitsError>;

        /// Remove a spend limit of any account (see [`Service::remove_customer_limit`]).
        async fn remove_customer_limit(
            &self,
            admin: &User,
            account: &AccountId,
            id: &SpendLimitId,
        ) -> Result<(), LimitsError>;

        /// Every promo code, newest first (see [`Service::promo_codes`]).
        async fn promo_codes(&self) -> Result<Vec<StoredPromoCode>, InfraError>;

        /// Create a promo code (see [`Service::create_promo_code`]).
        async fn create_promo_code(
            &self,
            admin: &User,
            draft: &PromoDraft,
        ) -> Result<StoredPromoCode, PromoAdminError>;

        /// Switch a promo code off or on again (see [`Service::set_promo_code_active`]).
        async fn set_promo_code_active(
            &self,
            admin: &User,
            id: &str,
            active: bool,
        ) -> Result<StoredPromoCode, PromoAdminError>;

        /// A promo code and its latest redemptions (see [`Service::promo_code_detail`]).
        async fn promo_code_detail(
            &self,
            id: &str,
        ) -> Result<(StoredPromoCode, Vec<RedemptionRecord>), PromoAdminError>;

        /// A new idempotency key for an administrator's action a form confirms (see
        /// [`Service::new_action_key`]).
        fn new_action_key(&self) -> String;
    }
}
