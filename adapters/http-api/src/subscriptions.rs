//! Subscriptions (issue 19): switch the caller's subscription to another plan, and resume one
//! scheduled to end. The spec has no subscription paths; these sit beside `/api/payment/…` under
//! `/api/subscriptions/{id}/…`, named by the subscription id that `GET /api/credits/status` and
//! the payment endpoints show.

use std::sync::Arc;

use application::ports::{Clock, IdGenerator, SecretHasher, Store};
use application::use_cases::change_plan::{ChangePlanError, PlanChangeOutcome};
use domain::{PlanChangeRefusal, Subscription};
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::SubscriptionView;
use crate::problem::{Code, Problem, api_response};

/// `POST /api/subscriptions/{id}/change-plan`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ChangePlanBody {
    /// The recurring plan to switch to (sold through the subscription's provider, in its
    /// currency and billing interval).
    #[oai(validator(min_length = 1, max_length = 64))]
    pub plan_id: String,
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
    /// new plan's extra credits granted once confirmed) or `downgrade` (the lower price and
    /// credits from the next renewal).
    pub change: String,
    /// Whether the provider has confirmed it (`planId` of the subscription is the new plan).
    pub confirmed: bool,
    /// Where the subscriber approves the switch at the provider, when it needs that.
    #[oai(skip_serializing_if_is_none)]
    pub approval_url: Option<String>,
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
        /// `different_interval`, `not_switchable` (the provider has no plan change: cancel at
        /// period end and buy the other plan then).
        409 Conflict,
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

/// The subscription endpoints.
pub(crate) struct SubscriptionsApi<S, C, I, H> {
    state: Arc<AppState<S, C, I, H>>,
}

impl<S, C, I, H> SubscriptionsApi<S, C, I, H> {
    pub(crate) fn new(state: Arc<AppState<S, C, I, H>>) -> Self {
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
impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> SubscriptionsApi<S, C, I, H> {
    /// Switch the caller's subscription to another recurring plan through the provider's own
    /// plan-change API. The subscription's plan, price and credits follow the provider's event.
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
            self.state
                .service
                .change_plan(&user, &id.0, &body.0.plan_id)
                .await
                .map_err(problem)
        };
        match result.await {
            Ok(outcome) => ChangePlanResponse::Ok(Json(self.change_view(&outcome))),
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
            self.state
                .service
                .resume_subscription(&user, &id.0)
                .await
                .map_err(problem)
        };
        match result.await {
            Ok(subscription) => ResumeResponse::Ok(Json(self.view(&subscription))),
            Err(problem) => problem.into(),
        }
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> SubscriptionsApi<S, C, I, H> {
    fn view(&self, s: &Subscription) -> SubscriptionView {
        let grace = self.state.service.config().past_due_grace_ms;
        SubscriptionView::new(s, s.access(grace))
    }

    fn change_view(&self, outcome: &PlanChangeOutcome) -> PlanChangeView {
        PlanChangeView {
            subscription: self.view(&outcome.subscription),
            plan_id: outcome.change.plan_id().to_string(),
            change: outcome.change.direction().code().to_owned(),
            confirmed: outcome.subscription.plan_id() == outcome.change.plan_id(),
            approval_url: outcome.approval_url.clone(),
        }
    }
}

fn problem(e: ChangePlanError) -> Problem {
    let detail = e.to_string();
    match e {
        ChangePlanError::NotFound => Problem::new(Code::SubscriptionNotFound, detail),
        ChangePlanError::NotOwner => Problem::new(Code::NotOwner, detail),
        ChangePlanError::PlanNotFound(_) => Problem::new(Code::PlanNotFound, detail),
        ChangePlanError::Refused(refusal) => Problem::new(refusal_code(&refusal), detail),
        ChangePlanError::NotSwitchable(_) => Problem::new(Code::NotSwitchable, detail),
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
