//! Subscriptions (issue 19): switch the caller's subscription to another plan, and resume one
//! scheduled to end. The spec has no subscription paths; these sit beside `/api/payment/…` under
//! `/api/subscriptions/{id}/…`, named by the subscription id that `GET /api/credits/status` and
//! the payment endpoints show. A switch is made now through the provider's plan-change API, or
//! at the period's end (`"when": "period_end"`: cancelled then, and the plan started with a new
//! checkout), which `DELETE …/scheduled-plan` withdraws.

use std::sync::Arc;

use application::use_cases::change_plan::{
    ChangePlanError, PlanChangeOutcome, PlanSwitchScheduled,
};
use domain::{PlanChangeRefusal, PlanId, Subscription, SubscriptionId};
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{Enum, Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::{SubscriptionView, parse_id};
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
        /// body does not match the schema.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key cannot switch; `not_owner`: another user's subscription.
        403 Forbidden,
        /// `subscription_not_found`, `plan_not_found`.
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
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key cannot resume; `not_owner`: another user's subscription.
        403 Forbidden,
        /// `subscription_not_found`.
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
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key cannot withdraw; `not_owner`: another user's subscription.
        403 Forbidden,
        /// `subscription_not_found`.
        404 NotFound,
        /// `not_scheduled_to_end`: no switch is scheduled.
        409 Conflict,
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
    /// Switch plans and resume subscriptions.
    Subscriptions,
}

#[OpenApi(tag = "Tag::Subscriptions")]
impl SubscriptionsApi {
    /// Switch the caller's subscription to another recurring plan: now, through the provider's
    /// own plan-change API (the subscription's plan, price and credits follow the provider's
    /// event), or at the period's end (`"when": "period_end"`). One switch at a time.
    #[oai(path = "/api/subscriptions/:id/change-plan", method = "post")]
    async fn change_plan(
        &self,
        credential: Credential,
        /// The subscription id.
        id: Path<String>,
        body: Json<ChangePlanBody>,
    ) -> ChangePlanResponse {
        let result = async {
            let user = self.state.user(&credential).await?;
            let payments = &self.state.ports.payments;
            let id = subscription_id(&id.0)?;
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

    /// Withdraw the scheduled cancellation of the caller's subscription, where the provider
    /// allows it: it renews again.
    #[oai(path = "/api/subscriptions/:id/resume", method = "post")]
    async fn resume(
        &self,
        credential: Credential,
        /// The subscription id.
        id: Path<String>,
    ) -> ResumeResponse {
        let result = async {
            let user = self.state.user(&credential).await?;
            let id = subscription_id(&id.0)?;
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

    /// Withdraw the caller's switch at the period's end: the scheduled plan is forgotten, and
    /// the subscription still ends with its period (resume it to keep it).
    #[oai(path = "/api/subscriptions/:id/scheduled-plan", method = "delete")]
    async fn withdraw_switch(
        &self,
        credential: Credential,
        /// The subscription id.
        id: Path<String>,
    ) -> WithdrawSwitchResponse {
        let result = async {
            let user = self.state.user(&credential).await?;
            let id = subscription_id(&id.0)?;
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
