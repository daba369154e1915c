//! Subscriptions (issue 19): switch the caller's subscription to another plan, and resume one
//! scheduled to end. The spec has no subscription paths; these sit beside `/api/payment/…` under
//! `/api/subscriptions/{id}/…`, named by the subscription id that `GET /api/credits/status` and
//! the payment endpoints show. A switch is made now through the provider's plan-change API, or
//! at the period's end (`"when": "period_end"`: cancelled then, and the plan started with a new
//! checkout), which `DELETE …/scheduled-plan` withdraws. `GET /api/subscriptions` lists them and
//! `POST …/cancel` ends one (at the period's end, or now where the provider can).
//!
//! Each endpoint acts for the user whose credential it is, or, for an API key with
//! `billing:write` (`billing:read` for the list), for the user `?userId=` names: the host
//! application's backend acting for its signed-in user (`AppState::acting_for`).

use std::sync::Arc;

use application::accounts::{Scope, User};
use application::authorization::Owned;
use application::use_cases::cancel_subscription::{CancelSubscriptionError, SubscriptionCancelled};
use application::use_cases::change_plan::{
    ChangePlanError, PlanChangeOutcome, PlanSwitchScheduled,
};
use domain::{CancelRefusal, CancelWhen, PlanChangeRefusal, PlanId, Subscription, SubscriptionId};
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Enum, Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::{PageInfo, SubscriptionView, page_request, parse_id};
use crate::optional_json::OptionalJson;
use crate::problem::{Code, Problem, api_response};

/// `POST /api/subscriptions/{id}/change-plan`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ChangePlanBody {
    /// The recurring plan to switch to (sold through the subscription's provider, in its
    /// currency and billing interval).
    #[oai(validator(min_length = 1, max_length = 64))]
    pub plan_id: String,
    /// `now` (the default): through the provider's plan-change API; `period_end`: the
    /// subscription is cancelled at its period's end and keeps the plan as `scheduledPlanId`,
    /// which the subscriber starts with a new checkout when it ends (any provider; the only way
    /// where the provider has no plan-change API). The interval may differ at the period's end.
    pub when: Option<SwitchWhen>,
}

/// When a switch takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "snake_case")]
pub enum SwitchWhen {
    /// Now, through the provider's plan-change API.
    Now,
    /// When the current period ends, with a new checkout.
    PeriodEnd,
}

/// `POST /api/subscriptions/{id}/cancel` (the body is optional).
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CancelSubscriptionBody {
    /// `period_end` (the default): the subscription ends when its paid period does, nothing
    /// renews; `now`: the provider ends it at once (Stripe, Creem, Dodo Payments, PayPal; other
    /// providers answer 422 `cancel_now_not_supported`).
    #[oai(default)]
    pub when: CancelSubscriptionWhen,
}

/// When a cancel takes effect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Enum)]
#[oai(rename_all = "snake_case")]
pub enum CancelSubscriptionWhen {
    /// When the current period ends.
    #[default]
    PeriodEnd,
    /// Now, through the provider's immediate cancel.
    Now,
}

/// A page of subscriptions, newest first.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct SubscriptionPage {
    /// The subscriptions on this page.
    pub items: Vec<SubscriptionView>,
    /// Where this page sits.
    #[oai(flatten)]
    pub page: PageInfo,
}

/// What a switch did.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PlanChangeView {
    /// The subscription as it is now: on the new plan once the provider confirmed the switch,
    /// otherwise with `pendingPlanId` set.
    pub subscription: SubscriptionView,
    /// The plan asked for.
    pub plan_id: String,
    /// `upgrade` (charged the prorated difference now where the provider prorates, and the
    /// new plan's extra credits granted once confirmed; PayPal prorates nothing, so there the
    /// new price and credits start with the next renewal) or `downgrade` (the lower price and
    /// credits from the next renewal).
    pub change: String,
    /// Whether the provider has confirmed it (`planId` of the subscription is the new plan).
    pub confirmed: bool,
    /// Where the subscriber approves the switch at the provider, when it needs that (PayPal's
    /// revise: a `paypal.com` page). Send the subscriber there; the switch is confirmed when
    /// the provider's event arrives after the approval, and changes nothing until then.
    #[oai(skip_serializing_if_is_none)]
    pub approval_url: Option<String>,
    /// `now` or `period_end`, as asked.
    pub when: SwitchWhen,
    /// When the new plan starts, for a switch at the period's end: the current period's end
    /// (the subscriber then confirms its payment in a new checkout).
    #[oai(skip_serializing_if_is_none)]
    pub starts_at: Option<String>,
}

api_response! {
    /// `POST /api/subscriptions/{id}/change-plan`.
    pub enum ChangePlanResponse {
        /// The provider accepted the switch (see `confirmed`).
        200 Ok(Json<PlanChangeView>),
    }
    problems {
        /// `bad_request`: no JSON body, or not `application/json`; `validation_failed`: the
        /// body does not match the schema, or an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:write`, or a user naming another user;
        /// `not_owner`: another user's subscription.
        /// Also `forbidden`: an account out of the caller's reach (not the one its API key is bound to; for a
        /// customer-portal session, not its user's own).
        403 Forbidden,
        /// `subscription_not_found`, `plan_not_found`; `user_not_found`: the `userId` an API
        /// key named does not exist.
        404 NotFound,
        /// `subscription_not_live`, `same_plan`, `different_plan_type`, `different_currency`,
        /// `different_interval`, `not_switchable` (the provider has no plan change: switch at
        /// the period's end), `change_in_progress` (another switch of the subscription is in
        /// progress or scheduled; nothing was asked of the provider).
        409 Conflict,
        /// `plan_not_available`: the plan is hidden and not offered to this subscriber.
        422 Unprocessable,
        /// `provider_error`: the provider could not be told; nothing changed, retry.
        502 BadGateway,
    }
}

api_response! {
    /// `POST /api/subscriptions/{id}/resume`.
    pub enum ResumeResponse {
        /// The subscription renews again.
        200 Ok(Json<SubscriptionView>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:write`, or a user naming another user;
        /// `not_owner`: another user's subscription.
        /// Also `forbidden`: an account out of the caller's reach (not the one its API key is bound to; for a
        /// customer-portal session, not its user's own).
        403 Forbidden,
        /// `subscription_not_found`; `user_not_found`: the `userId` an API key named does not
        /// exist.
        404 NotFound,
        /// `subscription_not_live`, `not_scheduled_to_end`, `not_switchable` (the provider
        /// cannot undo a cancellation).
        409 Conflict,
        /// `provider_error`: the provider could not be told; nothing changed, retry.
        502 BadGateway,
    }
}

api_response! {
    /// `DELETE /api/subscriptions/{id}/scheduled-plan`.
    pub enum WithdrawSwitchResponse {
        /// The scheduled plan is forgotten; the subscription still ends with its period.
        200 Ok(Json<SubscriptionView>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:write`, or a user naming another user;
        /// `not_owner`: another user's subscription.
        /// Also `forbidden`: an account out of the caller's reach (not the one its API key is bound to; for a
        /// customer-portal session, not its user's own).
        403 Forbidden,
        /// `subscription_not_found`; `user_not_found`: the `userId` an API key named does not
        /// exist.
        404 NotFound,
        /// `not_scheduled_to_end`: no switch is scheduled.
        409 Conflict,
    }
}

api_response! {
    /// `GET /api/subscriptions`.
    pub enum ListSubscriptionsResponse {
        /// A page of the user's subscriptions, newest first.
        200 Ok(Json<SubscriptionPage>),
    }
    problems {
        /// `invalid_pagination`: page or limit out of range; `validation_failed`: an API key
        /// named no `userId`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:read` (or `billing:write`), or a user
        /// naming another user.
        /// Also `forbidden`: an account out of the caller's reach (not the one its API key is bound to; for a
        /// customer-portal session, not its user's own).
        403 Forbidden,
        /// `user_not_found`: the `userId` an API key named does not exist;
        /// `account_not_found`: the user is not a member of the `accountId` named.
        404 NotFound,
    }
}

api_response! {
    /// `POST /api/subscriptions/{id}/cancel`.
    pub enum CancelSubscriptionResponse {
        /// `period_end`: the subscription ends when its period does (`cancelAtPeriodEnd`
        /// true; asking again answers the same). `now`: the provider ended it, and its ended
        /// event has arrived (`status` `canceled`).
        200 Ok(Json<SubscriptionView>),
        /// `now`: the provider accepted ending it, and the subscription ends here when the
        /// provider's ended event arrives; the subscription as it stands now.
        202 Accepted(Json<SubscriptionView>),
    }
    problems {
        /// `validation_failed`: the body is not `{"when": "period_end" | "now"}`, or an API
        /// key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:write`, or a user naming another user;
        /// `not_owner`: another user's subscription.
        /// Also `forbidden`: an account out of the caller's reach (not the one its API key is bound to; for a
        /// customer-portal session, not its user's own).
        403 Forbidden,
        /// `subscription_not_found`; `user_not_found`: the `userId` an API key named does not
        /// exist.
        404 NotFound,
        /// `subscription_not_live`: it is over already (canceled or expired).
        409 Conflict,
        /// `cancel_now_not_supported`: `now`, and the provider cannot end a subscription at
        /// once (cancel at the period's end instead).
        422 Unprocessable,
        /// `provider_error`: the provider could not be told; nothing changed, retry.
        502 BadGateway,
    }
}

/// The subscription endpoints.
pub(crate) struct SubscriptionsApi {
    state: Arc<AppState>,
}

impl SubscriptionsApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the subscription endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// List, cancel, resume and switch subscriptions.
    Subscriptions,
}

#[OpenApi(tag = "Tag::Subscriptions")]
impl SubscriptionsApi {
    /// The user's subscriptions, newest first: each with its status, period, whether it ends
    /// with the period, and any switch pending or scheduled.
    #[oai(path = "/api/subscriptions", method = "get")]
    async fn list(
        &self,
        credential: Credential,
        /// Page number, from 1 (default 1).
        page: Query<Option<String>>,
        /// Page size, 1 to 100 (default 20).
        limit: Query<Option<String>>,
        /// The user whose subscriptions to list (API keys with `billing:read` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to: its subscriptions (omitted: the user's personal
        /// account's).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> ListSubscriptionsResponse {
        let result = async {
            let (_, account) = self
                .state
                .acting_in(
                    &credential,
                    Scope::BillingRead,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            let request = page_request(page.0.as_deref(), limit.0.as_deref())?;
            let payments = &self.state.ports.payments;
            Ok::<_, Problem>(payments.list_subscriptions(&account, request).await?)
        };
        match result.await {
            Ok(page) => ListSubscriptionsResponse::Ok(Json(SubscriptionPage {
                items: page.items.iter().map(|s| self.view(s)).collect(),
                page: PageInfo::from(&page),
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Cancel the user's subscription: at the end of its paid period (the default; access runs
    /// until then and nothing renews), or now (`{"when": "now"}`) where the provider can end a
    /// subscription at once. Resume undoes a cancel at the period's end where the provider
    /// allows.
    #[oai(path = "/api/subscriptions/:id/cancel", method = "post")]
    async fn cancel(
        &self,
        credential: Credential,
        /// The subscription id.
        id: Path<String>,
        /// The user whose subscription it is (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        body: OptionalJson<CancelSubscriptionBody>,
    ) -> CancelSubscriptionResponse {
        let result = async {
            let (user, id) = (self.acting_user(&credential, user_id.0.as_deref(), &id.0)).await?;
            let when = match body.0 {
                Ok(body) => body.map_or(CancelWhen::PeriodEnd, |b| match b.when {
                    CancelSubscriptionWhen::PeriodEnd => CancelWhen::PeriodEnd,
                    CancelSubscriptionWhen::Now => CancelWhen::Now,
                }),
                Err(_) => {
                    return Err(Problem::bad_input(
                        "the body must be {\"when\": \"period_end\"} or {\"when\": \"now\"}",
                    ));
                }
            };
            let payments = &self.state.ports.payments;
            (payments.cancel_subscription_for(&user, &id, when).await).map_err(cancel_problem)
        };
        match result.await {
            Ok(SubscriptionCancelled::AtPeriodEnd(s)) => {
                CancelSubscriptionResponse::Ok(Json(self.view(&s)))
            }
            Ok(SubscriptionCancelled::Now(s)) if s.is_live() => {
                CancelSubscriptionResponse::Accepted(Json(self.view(&s)))
            }
            Ok(SubscriptionCancelled::Now(s)) => {
                CancelSubscriptionResponse::Ok(Json(self.view(&s)))
            }
            Err(problem) => problem.into(),
        }
    }

    /// Switch the user's subscription to another recurring plan: now, through the provider's
    /// own plan-change API (the subscription's plan, price and credits follow the provider's
    /// event), or at the period's end (`"when": "period_end"`). One switch at a time.
    #[oai(path = "/api/subscriptions/:id/change-plan", method = "post")]
    async fn change_plan(
        &self,
        credential: Credential,
        /// The subscription id.
        id: Path<String>,
        /// The user whose subscription it is (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        body: Json<ChangePlanBody>,
    ) -> ChangePlanResponse {
        let result = async {
            let (user, id) = (self.acting_user(&credential, user_id.0.as_deref(), &id.0)).await?;
            let payments = &self.state.ports.payments;
            let raw_plan = &body.0.plan_id;
            let plan = &parse_id(raw_plan, PlanId::new, || {
                problem(ChangePlanError::PlanNotFound(
                    raw_plan.chars().take(PlanId::MAX_LEN).collect(),
                ))
            })?;
            match body.0.when.unwrap_or(SwitchWhen::Now) {
                SwitchWhen::Now => payments
                    .change_plan(&user, &id, plan)
                    .await
                    .map(|outcome| self.change_view(&outcome)),
                SwitchWhen::PeriodEnd => payments
                    .schedule_plan_switch(&user, &id, plan)
                    .await
                    .map(|scheduled| self.scheduled_view(&scheduled)),
            }
            .map_err(problem)
        };
        match result.await {
            Ok(view) => ChangePlanResponse::Ok(Json(view)),
            Err(problem) => problem.into(),
        }
    }

    /// Withdraw the scheduled cancellation of the user's subscription, where the provider
    /// allows it: it renews again.
    #[oai(path = "/api/subscriptions/:id/resume", method = "post")]
    async fn resume(
        &self,
        credential: Credential,
        /// The subscription id.
        id: Path<String>,
        /// The user whose subscription it is (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> ResumeResponse {
        let result = async {
            let (user, id) = (self.acting_user(&credential, user_id.0.as_deref(), &id.0)).await?;
            self.state
                .ports
                .payments
                .resume_subscription(&user, &id)
                .await
                .map_err(problem)
        };
        match result.await {
            Ok(subscription) => ResumeResponse::Ok(Json(self.view(&subscription))),
            Err(problem) => problem.into(),
        }
    }

    /// Withdraw the user's switch at the period's end: the scheduled plan is forgotten, and
    /// the subscription still ends with its period (resume it to keep it).
    #[oai(path = "/api/subscriptions/:id/scheduled-plan", method = "delete")]
    async fn withdraw_switch(
        &self,
        credential: Credential,
        /// The subscription id.
        id: Path<String>,
        /// The user whose subscription it is (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> WithdrawSwitchResponse {
        let result = async {
            let (user, id) = (self.acting_user(&credential, user_id.0.as_deref(), &id.0)).await?;
            self.state
                .ports
                .payments
                .cancel_scheduled_switch(&user, &id)
                .await
                .map_err(problem)
        };
        match result.await {
            Ok(subscription) => WithdrawSwitchResponse::Ok(Json(self.view(&subscription))),
            Err(problem) => problem.into(),
        }
    }
}

impl SubscriptionsApi {
    /// The user a write on subscription `raw` is for (the caller, or the user an API key with
    /// `billing:write` names), the subscription's account being within the caller's reach,
    /// and the subscription's id.
    async fn acting_user(
        &self,
        credential: &Credential,
        user_id: Option<&str>,
        raw: &str,
    ) -> Result<(User, SubscriptionId), Problem> {
        let acting = self
            .state
            .acting_for(credential, Scope::BillingWrite, user_id)
            .await?;
        let id = subscription_id(raw)?;
        (self
            .state
            .within_reach(&acting, Owned::Subscription(&id))
            .await)
            .map_err(crate::auth::owner_problem)?;
        Ok((acting.user, id))
    }

    fn view(&self, s: &Subscription) -> SubscriptionView {
        SubscriptionView::new(s, self.state.ports.payments.subscription_access(s))
    }

    fn change_view(&self, outcome: &PlanChangeOutcome) -> PlanChangeView {
        PlanChangeView {
            subscription: self.view(&outcome.subscription),
            plan_id: outcome.change.plan_id().to_string(),
            change: outcome.kind.code().to_owned(),
            confirmed: outcome.subscription.plan_id() == outcome.change.plan_id(),
            approval_url: outcome.approval_url.clone(),
            when: SwitchWhen::Now,
            starts_at: None,
        }
    }

    fn scheduled_view(&self, scheduled: &PlanSwitchScheduled) -> PlanChangeView {
        let subscription = &scheduled.subscription;
        PlanChangeView {
            subscription: self.view(subscription),
            plan_id: scheduled.plan_id.to_string(),
            change: scheduled.kind.code().to_owned(),
            confirmed: false,
            approval_url: None,
            when: SwitchWhen::PeriodEnd,
            starts_at: Some(crate::dto::timestamp(subscription.current_period().end())),
        }
    }
}

/// The subscription a path names: a malformed id is one the caller does not have.
fn subscription_id(raw: &str) -> Result<SubscriptionId, Problem> {
    parse_id(raw, SubscriptionId::new, || {
        problem(ChangePlanError::NotFound)
    })
}

fn problem(e: ChangePlanError) -> Problem {
    let detail = e.to_string();
    match e {
        ChangePlanError::NotFound => Problem::new(Code::SubscriptionNotFound, detail),
        ChangePlanError::NotOwner => Problem::new(Code::NotOwner, detail),
        ChangePlanError::PlanNotFound(_) => Problem::new(Code::PlanNotFound, detail),
        ChangePlanError::NotAvailable(_) => Problem::new(Code::PlanNotAvailable, detail),
        ChangePlanError::Refused(refusal) => Problem::new(refusal_code(&refusal), detail),
        ChangePlanError::NotSwitchable(_) => Problem::new(Code::NotSwitchable, detail),
        ChangePlanError::InProgress(_) => Problem::new(Code::ChangeInProgress, detail),
        ChangePlanError::Gateway(reason) => Problem::provider_error(
            "the payment provider could not be told; nothing changed, retry later",
            &reason,
        ),
        ChangePlanError::Infra(infra) => infra.into(),
    }
}

fn cancel_problem(e: CancelSubscriptionError) -> Problem {
    let detail = e.to_string();
    match e {
        CancelSubscriptionError::NotFound => Problem::new(Code::SubscriptionNotFound, detail),
        CancelSubscriptionError::NotOwner => Problem::new(Code::NotOwner, detail),
        CancelSubscriptionError::Refused(CancelRefusal::NotLive(_)) => {
            Problem::new(Code::SubscriptionNotLive, detail)
        }
        CancelSubscriptionError::Refused(CancelRefusal::NowNotSupported(_)) => {
            Problem::new(Code::CancelNowNotSupported, detail)
        }
        CancelSubscriptionError::Gateway(reason) => Problem::provider_error(
            "the payment provider could not be told; nothing changed, retry later",
            &reason,
        ),
        CancelSubscriptionError::Infra(infra) => infra.into(),
    }
}

const fn refusal_code(refusal: &PlanChangeRefusal) -> Code {
    match refusal {
        PlanChangeRefusal::NotLive(_) => Code::SubscriptionNotLive,
        PlanChangeRefusal::SamePlan => Code::SamePlan,
        PlanChangeRefusal::NotRecurring(_) => Code::DifferentPlanType,
        PlanChangeRefusal::OtherCurrency { .. } => Code::DifferentCurrency,
        PlanChangeRefusal::OtherInterval { .. } => Code::DifferentInterval,
        PlanChangeRefusal::NoTerms => Code::NotSwitchable,
        PlanChangeRefusal::NotScheduledToEnd => Code::NotScheduledToEnd,
    }
}
