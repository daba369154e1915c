//! Administration (a signed-in user with the admin role): dynamic plans under
//! `/api/admin/plans` and service API keys under `/api/admin/api-keys`.
//!
//! A plan that breaks rules is a 422 `validation_failed` listing every field to correct.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::accounts::ApiKey;
use application::ports::{InboxFilter, StoredPlan};
use application::use_cases::admin_console::{AdjustCredits, AdjustCreditsError};
use application::use_cases::api_keys::ApiKeyError;
use application::use_cases::manage_plans::{ManagePlansError, PlanInput};
use application::use_cases::refund_order::{RefundOrder, RefundOrderError};
use domain::{
    AccountId, ApiKeyId, EventOutcome, OrderId, PlanDraft, PlanId, PlanText, ProviderId,
    ProviderRefs, RefField, UserId,
};
use poem::Request;
use poem_openapi::param::{Header, Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};
use rust_decimal::Decimal;

use crate::AppState;
use crate::admin_console::{
    AdjustCreditsBody, AdjustCreditsResponse, AdjustedCreditsView, WebhookEventsResponse,
    adjust_problem, parse_expiry,
};
use crate::admin_refund::{RefundBody, RefundResponse, refund_problem};
use crate::auth::Credential;
use crate::dto::{parse_id, parse_idempotency_key, timestamp};
use crate::problem::{Code, FieldErrorView, Problem, api_response};

/// A plan's duration, as an admin writes it.
#[derive(Debug, Clone, Default, Object)]
#[oai(rename_all = "camelCase")]
pub struct DurationBody {
    /// Months (1 to 12 for subscriptions, up to 1200 otherwise); 999999 means lifetime.
    #[oai(skip_serializing_if_is_none)]
    pub months: Option<i64>,
    /// `one_time`, `recurring` or `credits`.
    #[oai(
        rename = "type",
        validator(max_length = 32),
        skip_serializing_if_is_none
    )]
    pub duration_type: Option<String>,
    /// Credits granted, bonus included (credits plans; optional for subscriptions).
    #[oai(skip_serializing_if_is_none)]
    pub credits: Option<Decimal>,
    /// Of `credits`, how many are a bonus (credits plans): granted apart as `bonus`, with their
    /// own expiry, and shown as "500 + 50 bonus". Less than `credits`.
    #[oai(skip_serializing_if_is_none)]
    pub bonus_credits: Option<Decimal>,
    /// Days after the payment when the bonus credits expire (1 to 3650); absent: never.
    #[oai(skip_serializing_if_is_none)]
    pub bonus_expires_in_days: Option<i64>,
}

/// A plan's texts in one locale.
#[derive(Debug, Clone, Default, Object)]
#[oai(rename_all = "camelCase")]
pub struct PlanTextBody {
    /// Display name.
    #[oai(default, validator(max_length = 200))]
    pub name: String,
    /// Description.
    #[oai(default, validator(max_length = 2000))]
    pub description: String,
    /// Label of the period.
    #[oai(default, validator(max_length = 300))]
    pub duration: String,
    /// Feature bullets.
    #[oai(default, validator(max_items = 50))]
    pub features: Vec<String>,
}

/// A dynamic plan as admins read and write it: the spec's fields (2.2, 2.3) plus the listing
/// extras (`sortOrder`, `locales`).
#[derive(Debug, Clone, Default, Object)]
#[oai(rename_all = "camelCase")]
pub struct AdminPlan {
    /// Unique id: lower-case letters, digits, `-`, `_`.
    #[oai(validator(max_length = 64))]
    pub id: String,
    /// Provider id.
    #[oai(validator(max_length = 32), skip_serializing_if_is_none)]
    pub provider: Option<String>,
    /// Price in major units (a number or a decimal string).
    #[oai(skip_serializing_if_is_none)]
    pub amount: Option<Decimal>,
    /// Struck-through original price.
    #[oai(skip_serializing_if_is_none)]
    pub original_amount: Option<Decimal>,
    /// Price charged when `APP_ENV` is development (at most `amount`).
    #[oai(skip_serializing_if_is_none)]
    pub development_amount: Option<Decimal>,
    /// ISO 4217 code.
    #[oai(validator(max_length = 8), skip_serializing_if_is_none)]
    pub currency: Option<String>,
    /// Highlight on `/pricing`.
    #[oai(default)]
    pub recommended: bool,
    /// Leave out of `/pricing` (still purchasable by id).
    #[oai(default)]
    pub hidden: bool,
    /// The offer the plan belongs to (`pro`): a lower-case letter or digit, then lower-case
    /// letters, digits, `-` or `_`, at most 40 characters; plans sharing it are one pricing
    /// card. Absent: the plan is a card of its own.
    #[oai(validator(max_length = 40), skip_serializing_if_is_none)]
    pub group: Option<String>,
    /// Duration and credits.
    #[oai(skip_serializing_if_is_none)]
    pub duration: Option<DurationBody>,
    /// `card_gateway` price id (subscriptions).
    #[oai(validator(max_length = 128), skip_serializing_if_is_none)]
    pub card_gateway_price_id: Option<String>,
    /// `wallet_global` plan id (subscriptions).
    #[oai(validator(max_length = 128), skip_serializing_if_is_none)]
    pub wallet_global_plan_id: Option<String>,
    /// `mor_a` product id.
    #[oai(validator(max_length = 128), skip_serializing_if_is_none)]
    pub mor_a_product_id: Option<String>,
    /// `mor_b` product id.
    #[oai(validator(max_length = 128), skip_serializing_if_is_none)]
    pub mor_b_product_id: Option<String>,
    /// `mor_c` product id.
    #[oai(validator(max_length = 128), skip_serializing_if_is_none)]
    pub mor_c_product_id: Option<String>,
    /// Texts by locale; `en` is required.
    #[oai(default, validator(max_properties = 40))]
    pub i18n: BTreeMap<String, PlanTextBody>,
    /// Position on `/pricing`, ascending.
    #[oai(default)]
    pub sort_order: i32,
    /// Locales the plan is shown in; empty means all.
    #[oai(default, validator(max_items = 40))]
    pub locales: Vec<String>,
    /// What the plan unlocks in the host app: feature keys (`^[a-z][a-z0-9_.:-]{0,63}$`) mapped
    /// to `true` or a non-negative integer limit; one-time and recurring plans only.
    #[oai(default, validator(max_properties = 100))]
    pub entitlements: BTreeMap<String, crate::entitlements::EntitlementValueJson>,
}

impl AdminPlan {
    /// The body's field for `provider`'s catalog reference, named as
    /// [`domain::ProviderId::reference`] names it; `None` for a provider that takes none.
    fn ref_slot(&mut self, provider: ProviderId) -> Option<&mut Option<String>> {
        match provider {
            ProviderId::WalletQr | ProviderId::WalletWeb => None,
            ProviderId::CardGateway => Some(&mut self.card_gateway_price_id),
            ProviderId::WalletGlobal => Some(&mut self.wallet_global_plan_id),
            ProviderId::MorA => Some(&mut self.mor_a_product_id),
            ProviderId::MorB => Some(&mut self.mor_b_product_id),
            ProviderId::MorC => Some(&mut self.mor_c_product_id),
        }
    }

    /// The catalog references in the body, taken out of it.
    fn take_provider_refs(&mut self) -> ProviderRefs {
        let mut refs = ProviderRefs::default();
        for field in RefField::all() {
            let id = self.ref_slot(field.provider).and_then(Option::take);
            refs.set(field, id);
        }
        refs
    }

    /// The application's input (its rules are checked by the use case).
    fn into_input(mut self) -> PlanInput {
        let provider_refs = self.take_provider_refs();
        let duration = self.duration.clone().unwrap_or_default();
        PlanInput {
            draft: PlanDraft {
                bonus_credits: duration.bonus_credits,
                bonus_expires_in_days: duration.bonus_expires_in_days,
                id: self.id.clone(),
                provider: self.provider.clone(),
                amount: self.amount,
                original_amount: self.original_amount,
                development_amount: self.development_amount,
                currency: self.currency.clone(),
                recommended: self.recommended,
                hidden: self.hidden,
                group: self.group.clone(),
                months: duration.months,
                duration_type: duration.duration_type,
                credits: duration.credits,
                provider_refs,
                i18n: self
                    .i18n
                    .iter()
                    .map(|(locale, t)| {
                        let text = PlanText {
                            name: t.name.clone(),
                            description: t.description.clone(),
                            duration: t.duration.clone(),
                            features: t.features.clone(),
                        };
                        (locale.clone(), text)
                    })
                    .collect(),
                entitlements: crate::entitlements::drafts_of(&self.entitlements),
            },
            sort_order: self.sort_order,
            locales: self.locales.clone(),
        }
    }
}

impl From<&StoredPlan> for AdminPlan {
    fn from(stored: &StoredPlan) -> Self {
        let d = stored.plan.to_draft();
        let mut plan = Self {
            id: d.id,
            provider: d.provider,
            amount: d.amount,
            original_amount: d.original_amount,
            development_amount: d.development_amount,
            currency: d.currency,
            recommended: d.recommended,
            hidden: d.hidden,
            group: d.group,
            duration: Some(DurationBody {
                months: d.months,
                duration_type: d.duration_type,
                credits: d.credits,
                bonus_credits: d.bonus_credits,
                bonus_expires_in_days: d.bonus_expires_in_days,
            }),
            i18n: d
                .i18n
                .into_iter()
                .map(|(locale, t)| {
                    let text = PlanTextBody {
                        name: t.name,
                        description: t.description,
                        duration: t.duration,
                        features: t.features,
                    };
                    (locale, text)
                })
                .collect(),
            sort_order: stored.listing.sort_order,
            locales: stored
                .listing
                .locales
                .iter()
                .map(ToString::to_string)
                .collect(),
            entitlements: crate::entitlements::entitlements_json(stored.plan.entitlements()),
            ..Self::default()
        };
        for (field, id) in d.provider_refs.fields() {
            if let Some(slot) = plan.ref_slot(field.provider) {
                *slot = Some(id.to_owned());
            }
        }
        plan
    }
}

/// The dynamic plans table.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AdminPlanList {
    /// The live `PRICING_MODE` (`static` or `dynamic`): in static mode `/pricing` shows the
    /// configuration file's plans, not these.
    pub pricing_mode: String,
    /// Every dynamic plan, hidden ones included, in listing order.
    pub plans: Vec<AdminPlan>,
}

/// `POST /api/admin/plans/reorder`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ReorderBody {
    /// Plan ids in their new order; plans not listed follow them.
    #[oai(validator(max_items = 500))]
    pub ids: Vec<String>,
}

/// What an import did.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ImportView {
    /// Plans that were new.
    pub created: u32,
    /// Plans that replaced a stored plan of the same id (listing kept).
    pub updated: u32,
}

/// `POST /api/admin/api-keys`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CreateApiKeyBody {
    /// A label.
    #[oai(validator(max_length = 100))]
    pub name: String,
    /// `credits:consume`, `credits:read`, `events:read`, `entitlements:read`, `billing:read`
    /// (a named user's orders and subscriptions), `billing:write` (buy, cancel, resume and
    /// switch for a named user; also every `billing:read` read).
    #[oai(validator(max_items = 10))]
    pub scopes: Vec<String>,
    /// Bind the key to this account (a user's personal account, whose id is the user's, or a
    /// team's): it then reads and charges that account alone, for its members alone, and makes
    /// no app-wide call (so it cannot carry `events:read`). Omitted: the key acts for any user.
    #[oai(validator(max_length = 64))]
    pub account_id: Option<String>,
}

/// A service API key (never the key itself).
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ApiKeyView {
    /// Id.
    pub id: String,
    /// Label.
    pub name: String,
    /// The key's first characters, to recognise it.
    pub prefix: String,
    /// What it may do.
    pub scopes: Vec<String>,
    /// The account it is bound to (absent: it acts for any user).
    #[oai(skip_serializing_if_is_none)]
    pub account_id: Option<String>,
    /// When made.
    pub created_at: String,
    /// When revoked.
    #[oai(skip_serializing_if_is_none)]
    pub revoked_at: Option<String>,
    /// The spend limits on the key (a key bound to an account), with their usage now: in the
    /// list of keys, not in a new key's answer (`POST /api/admin/accounts/{accountId}/limits`
    /// with `apiKeyId` adds one).
    #[oai(skip_serializing_if_is_none)]
    pub limits: Option<Vec<crate::limits::SpendLimitView>>,
}

impl From<&ApiKey> for ApiKeyView {
    fn from(k: &ApiKey) -> Self {
        Self {
            id: k.id.clone(),
            name: k.name.clone(),
            prefix: k.prefix.clone(),
            scopes: k.scopes.iter().map(|s| s.code().to_owned()).collect(),
            account_id: k.account.as_ref().map(ToString::to_string),
            created_at: timestamp(k.created_at),
            revoked_at: k.revoked_at.map(timestamp),
            limits: None,
        }
    }
}

/// A new key with its secret, shown this once.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CreatedApiKeyView {
    /// The key's record.
    #[oai(flatten)]
    pub key: ApiKeyView,
    /// The key (`tly_…`): store it now, it is never shown again.
    pub secret: String,
}

/// The admin API keys.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ApiKeyList {
    /// Every key, newest first, revoked ones included.
    pub keys: Vec<ApiKeyView>,
}

api_response! {
    /// `GET /api/admin/plans`.
    pub enum ListPlansResponse {
        /// The dynamic plans.
        200 Ok(Json<AdminPlanList>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
    }
}

api_response! {
    /// `POST /api/admin/plans`.
    pub enum CreatePlanResponse {
        /// Created.
        201 Created(Json<AdminPlan>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `plan_exists`: a plan with this id exists.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: the plan breaks rules; `errors` lists every field.
        422 Unprocessable,
    }
}

api_response! {
    /// `PUT /api/admin/plans/{id}`, `POST …/hide`, `POST …/unhide`.
    pub enum UpdatePlanResponse {
        /// The plan as stored now.
        200 Ok(Json<AdminPlan>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `plan_not_found`.
        404 NotFound,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: the plan breaks rules; `errors` lists every field.
        422 Unprocessable,
    }
}

api_response! {
    /// `DELETE /api/admin/plans/{id}` and `POST /api/admin/plans/reorder`.
    pub enum PlanChangeResponse {
        /// Done.
        204 Done,
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `plan_not_found` (reorder: an unknown id; nothing changed).
        404 NotFound,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
    }
}

api_response! {
    /// `POST /api/admin/plans/import`.
    pub enum ImportResponse {
        /// The static catalog was copied into the dynamic table.
        200 Ok(Json<ImportView>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
    }
}

api_response! {
    /// `POST /api/admin/api-keys`.
    pub enum CreateApiKeyResponse {
        /// Created; `secret` is shown this once.
        201 Created(Json<CreatedApiKeyView>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: an empty name, no or unknown scopes, an `accountId` naming no
        /// account, or `events:read` on a key bound to an account.
        422 Unprocessable,
    }
}

api_response! {
    /// `GET /api/admin/api-keys`.
    pub enum ListApiKeysResponse {
        /// Every key.
        200 Ok(Json<ApiKeyList>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
    }
}

api_response! {
    /// `DELETE /api/admin/api-keys/{id}`.
    pub enum RevokeApiKeyResponse {
        /// Revoked (it stops working at once).
        204 Revoked,
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `api_key_not_found`.
        404 NotFound,
    }
}

/// The administration endpoints.
pub(crate) struct AdminApi {
    state: Arc<AppState>,
}

impl AdminApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the administration endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Dynamic plans and service API keys (administrators only).
    Admin,
}

#[OpenApi(tag = "Tag::Admin")]
impl AdminApi {
    /// The webhook inbox: every recorded provider event, newest first, with its outcome.
    #[oai(path = "/api/admin/webhook-events", method = "get")]
    async fn webhook_events(
        &self,
        credential: Credential,
        /// Only this provider's events.
        provider: Query<Option<String>>,
        /// Only this outcome (`mismatch`, `foreign_merchant`, `unknown_order`, …).
        outcome: Query<Option<String>>,
        /// The `nextCursor` of the previous page.
        cursor: Query<Option<String>>,
        /// Page size, 1 to 100 (default 20).
        limit: Query<Option<String>>,
    ) -> WebhookEventsResponse {
        let result = async {
            self.state.admin(&credential).await?;
            let page = crate::admin_customers_api::page_after(cursor.0, limit.0)?;
            let provider = provider
                .0
                .map(|p| {
                    p.parse::<ProviderId>()
                        .map_err(|e| Problem::new(Code::UnknownProvider, e.to_string()))
                })
                .transpose()?;
            // Every recorded event has one of the known outcomes, so a name that is none of
            // them lists nothing, once the cursor and limit are checked as for any filter.
            let (outcome, unknown) = match outcome.0 {
                Some(code) => match EventOutcome::parse(&code) {
                    Some(known) => (Some(known), false),
                    None => (None, true),
                },
                None => (None, false),
            };
            let filter = InboxFilter { provider, outcome };
            let mut page = self
                .state
                .ports
                .admin
                .webhook_inbox(&filter, &page)
                .await
                .map_err(crate::admin_customers::list_problem)?;
            if unknown {
                page.items.clear();
                page.next_cursor = None;
            }
            Ok::<_, Problem>(page)
        };
        match result.await {
            Ok(page) => WebhookEventsResponse::Ok(Json((&page).into())),
            Err(problem) => problem.into(),
        }
    }

    /// Grant credits (optionally expiring) or debit them (never below zero), once per key.
    #[oai(path = "/api/admin/users/:id/credits", method = "post")]
    async fn adjust_credits(
        &self,
        credential: Credential,
        id: Path<String>,
        #[oai(name = "Idempotency-Key")] idempotency_key: Header<Option<String>>,
        body: Json<AdjustCreditsBody>,
        request: &Request,
    ) -> AdjustCreditsResponse {
        // A malformed id names nobody, as the use case answers an unknown user.
        let account = parse_id(&id.0, UserId::new, || {
            adjust_problem(AdjustCreditsError::UserNotFound)
        })
        .map(|user| AccountId::personal(&user));
        let key = (idempotency_key.0, request);
        self.adjust(&credential, account, key, body.0).await
    }

    /// Grant credits to a team's account, or debit them, once per key: how a team's pool is
    /// funded by hand (`team_…` ids; a user's own id adjusts their personal account).
    #[oai(path = "/api/admin/accounts/:id/credits", method = "post")]
    async fn adjust_account_credits(
        &self,
        credential: Credential,
        id: Path<String>,
        #[oai(name = "Idempotency-Key")] idempotency_key: Header<Option<String>>,
        body: Json<AdjustCreditsBody>,
        request: &Request,
    ) -> AdjustCreditsResponse {
        let account = parse_id(&id.0, AccountId::new, || {
            adjust_problem(AdjustCreditsError::AccountNotFound)
        });
        let key = (idempotency_key.0, request);
        self.adjust(&credential, account, key, body.0).await
    }

    /// Refund a paid order, fully or in part, through its provider's refund API.
    #[oai(path = "/api/admin/orders/:orderId/refund", method = "post")]
    async fn refund_order(
        &self,
        credential: Credential,
        #[oai(name = "orderId")] order_id: Path<String>,
        body: Json<RefundBody>,
    ) -> RefundResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let order_id = parse_id(&order_id.0, OrderId::new, || {
                refund_problem(RefundOrderError::NotFound)
            })?;
            let request = RefundOrder {
                order_id,
                amount: body.0.amount,
                reason: body.0.reason,
            };
            self.state
                .ports
                .admin
                .refund_order(&admin, &request)
                .await
                .map_err(refund_problem)
        };
        match result.await {
            Ok(accepted) => RefundResponse::Accepted(Json((&accepted).into())),
            Err(problem) => problem.into(),
        }
    }

    /// Every dynamic plan, hidden ones included.
    #[oai(path = "/api/admin/plans", method = "get")]
    async fn list_plans(&self, credential: Credential) -> ListPlansResponse {
        let result = async {
            self.state.admin(&credential).await?;
            let plans = self.state.ports.admin.admin_plans().await?;
            Ok::<_, Problem>(AdminPlanList {
                pricing_mode: self.state.ports.plans.pricing_mode().as_str().to_owned(),
                plans: plans.iter().map(AdminPlan::from).collect(),
            })
        };
        match result.await {
            Ok(list) => ListPlansResponse::Ok(Json(list)),
            Err(problem) => problem.into(),
        }
    }

    /// Add a dynamic plan.
    #[oai(path = "/api/admin/plans", method = "post")]
    async fn create_plan(
        &self,
        credential: Credential,
        body: Json<AdminPlan>,
    ) -> CreatePlanResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            self.state
                .ports
                .admin
                .create_plan(&admin, &body.0.into_input())
                .await
                .map_err(plan_problem)
        };
        match result.await {
            Ok(plan) => CreatePlanResponse::Created(Json((&plan).into())),
            Err(problem) => problem.into(),
        }
    }

    /// Replace a dynamic plan (its id cannot change).
    #[oai(path = "/api/admin/plans/:id", method = "put")]
    async fn update_plan(
        &self,
        credential: Credential,
        /// The plan id.
        id: Path<String>,
        body: Json<AdminPlan>,
    ) -> UpdatePlanResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            self.state
                .ports
                .admin
                .update_plan(&admin, &id.0, &body.0.into_input())
                .await
                .map_err(plan_problem)
        };
        Self::updated(result.await)
    }

    /// Hide a dynamic plan from `/pricing` (it stays purchasable by id).
    #[oai(path = "/api/admin/plans/:id/hide", method = "post")]
    async fn hide_plan(&self, credential: Credential, id: Path<String>) -> UpdatePlanResponse {
        Self::updated(self.set_hidden(&credential, &id.0, true).await)
    }

    /// List a hidden dynamic plan on `/pricing` again.
    #[oai(path = "/api/admin/plans/:id/unhide", method = "post")]
    async fn unhide_plan(&self, credential: Credential, id: Path<String>) -> UpdatePlanResponse {
        Self::updated(self.set_hidden(&credential, &id.0, false).await)
    }

    /// Delete a dynamic plan (orders keep their own snapshot of it).
    #[oai(path = "/api/admin/plans/:id", method = "delete")]
    async fn delete_plan(&self, credential: Credential, id: Path<String>) -> PlanChangeResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let id = dynamic_plan_id(&id.0)?;
            self.state
                .ports
                .admin
                .delete_plan(&admin, &id)
                .await
                .map_err(plan_problem)
        };
        match result.await {
            Ok(()) => PlanChangeResponse::Done,
            Err(problem) => problem.into(),
        }
    }

    /// Put dynamic plans in this order.
    #[oai(path = "/api/admin/plans/reorder", method = "post")]
    async fn reorder_plans(
        &self,
        credential: Credential,
        body: Json<ReorderBody>,
    ) -> PlanChangeResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let ids = body
                .0
                .ids
                .iter()
                .map(|id| dynamic_plan_id(id))
                .collect::<Result<Vec<_>, _>>()?;
            self.state
                .ports
                .admin
                .reorder_plans(&admin, &ids)
                .await
                .map_err(plan_problem)
        };
        match result.await {
            Ok(()) => PlanChangeResponse::Done,
            Err(problem) => problem.into(),
        }
    }

    /// Copy the static catalog into the dynamic table (same ids are replaced, listings kept).
    #[oai(path = "/api/admin/plans/import", method = "post")]
    async fn import_plans(&self, credential: Credential) -> ImportResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            self.state
                .ports
                .admin
                .import_static_plans(&admin)
                .await
                .map_err(plan_problem)
        };
        match result.await {
            Ok(report) => ImportResponse::Ok(Json(ImportView {
                created: report.created,
                updated: report.updated,
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Create a service API key; its secret is in this response only.
    #[oai(path = "/api/admin/api-keys", method = "post")]
    async fn create_api_key(
        &self,
        credential: Credential,
        body: Json<CreateApiKeyBody>,
    ) -> CreateApiKeyResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            self.state
                .ports
                .admin
                .create_api_key(
                    &admin,
                    &body.0.name,
                    &body.0.scopes,
                    body.0.account_id.as_deref(),
                )
                .await
                .map_err(api_key_problem)
        };
        match result.await {
            Ok(created) => CreateApiKeyResponse::Created(Json(CreatedApiKeyView {
                key: ApiKeyView::from(&created.key),
                secret: created.secret,
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Every service API key, newest first, each with the spend limits on it.
    #[oai(path = "/api/admin/api-keys", method = "get")]
    async fn list_api_keys(&self, credential: Credential) -> ListApiKeysResponse {
        let result = async {
            self.state.admin(&credential).await?;
            self.state
                .ports
                .admin
                .api_keys_with_limits()
                .await
                .map_err(api_key_problem)
        };
        match result.await {
            Ok(keys) => ListApiKeysResponse::Ok(Json(ApiKeyList {
                keys: keys
                    .iter()
                    .map(|listed| ApiKeyView {
                        limits: Some(listed.limits.iter().map(Into::into).collect()),
                        ..ApiKeyView::from(&listed.key)
                    })
                    .collect(),
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Revoke a service API key.
    #[oai(path = "/api/admin/api-keys/:id", method = "delete")]
    async fn revoke_api_key(
        &self,
        credential: Credential,
        /// The key id.
        id: Path<String>,
    ) -> RevokeApiKeyResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let id = parse_id(&id.0, ApiKeyId::new, || {
                api_key_problem(ApiKeyError::NotFound)
            })?;
            self.state
                .ports
                .admin
                .revoke_api_key(&admin, &id)
                .await
                .map_err(api_key_problem)
        };
        match result.await {
            Ok(()) => RevokeApiKeyResponse::Revoked,
            Err(problem) => problem.into(),
        }
    }
}

impl AdminApi {
    async fn set_hidden(
        &self,
        credential: &Credential,
        id: &str,
        hidden: bool,
    ) -> Result<StoredPlan, Problem> {
        let admin = self.state.admin(credential).await?;
        let id = dynamic_plan_id(id)?;
        self.state
            .ports
            .admin
            .set_plan_hidden(&admin, &id, hidden)
            .await
            .map_err(plan_problem)
    }

    fn updated(result: Result<StoredPlan, Problem>) -> UpdatePlanResponse {
        match result {
            Ok(plan) => UpdatePlanResponse::Ok(Json((&plan).into())),
            Err(problem) => problem.into(),
        }
    }
}

/// The dynamic plan a path or body names: a malformed id is not one of them.
fn dynamic_plan_id(raw: &str) -> Result<PlanId, Problem> {
    parse_id(raw, PlanId::new, || {
        plan_problem(ManagePlansError::NotFound)
    })
}

fn plan_problem(e: ManagePlansError) -> Problem {
    match e {
        ManagePlansError::Invalid(errors) => {
            Problem::invalid_fields(errors.iter().map(FieldErrorView::from).collect())
        }
        ManagePlansError::NotFound => Problem::new(Code::PlanNotFound, "no such dynamic plan"),
        ManagePlansError::Exists => Problem::new(Code::PlanExists, e.to_string()),
        ManagePlansError::Infra(infra) => infra.into(),
    }
}

fn api_key_problem(e: ApiKeyError) -> Problem {
    match e {
        ApiKeyError::Invalid(message) => Problem::new(Code::ValidationFailed, message),
        ApiKeyError::NotFound => Problem::new(Code::ApiKeyNotFound, "no such API key"),
        ApiKeyError::Infra(infra) => infra.into(),
    }
}

impl AdminApi {
    /// An administrator's adjustment of `account` (an unknown one answers `user_not_found`).
    async fn adjust(
        &self,
        credential: &Credential,
        account: Result<AccountId, Problem>,
        (idempotency_key, request): (Option<String>, &Request),
        body: AdjustCreditsBody,
    ) -> AdjustCreditsResponse {
        let result = async {
            let admin = self.state.admin(credential).await?;
            let key = parse_idempotency_key(idempotency_key, request)?
                .ok_or_else(|| Problem::bad_input("Idempotency-Key is required"))?;
            let expires_at = parse_expiry(body.expires_at.as_deref())?;
            let adjust = AdjustCredits {
                admin,
                account_id: account?,
                amount: body.amount,
                reason: body.reason,
                expires_at,
                category: body.category.map(Into::into),
                priority: body.priority.and_then(|p| u16::try_from(p).ok()),
                idempotency_key: key,
            };
            self.state
                .ports
                .admin
                .adjust_credits(&adjust)
                .await
                .map_err(adjust_problem)
        };
        match result.await {
            Ok(done) => AdjustCreditsResponse::Ok(Json(AdjustedCreditsView::new(&done))),
            Err(problem) => problem.into(),
        }
    }
}
