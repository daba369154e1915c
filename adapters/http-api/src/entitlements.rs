//! `GET /api/entitlements`: what a user may use in the host app now, and which purchase grants
//! each key; plus the wire forms of entitlements other endpoints share (`/api/plans`,
//! `/api/credits/status`, the admin plans).
//!
//! A signed-in user reads their own; a service API key with scope `entitlements:read` names the
//! user with `?userId=`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use application::accounts::Scope;
use domain::entitlements::{
    EffectiveEntitlements, EntitlementDraft, EntitlementGrant, EntitlementValue, Entitlements,
    GrantSource,
};
use domain::{AccountId, UserId};
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::{ParseFromJSON, ParseResult, ToJSON, Type};
use poem_openapi::{Object, OpenApi};
use serde_json::Value;

use crate::AppState;
use crate::auth::Credential;
use crate::dto::timestamp;
use crate::problem::{Problem, api_response};

/// An entitlement value on the wire: `true` or a non-negative integer (a limit).
///
/// The schema says so (`oneOf` boolean / integer); a request may carry any JSON value here, so
/// that the plan rules, not the JSON parser, refuse a wrong one with a field error naming its key.
#[derive(Debug, Clone, PartialEq)]
pub struct EntitlementValueJson(pub Value);

impl Type for EntitlementValueJson {
    const IS_REQUIRED: bool = true;
    type RawValueType = Value;
    type RawElementValueType = Value;

    fn name() -> Cow<'static, str> {
        "EntitlementValue".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        let flag = MetaSchema {
            enum_items: vec![Value::Bool(true)],
            ..MetaSchema::new("boolean")
        };
        let limit = MetaSchema {
            minimum: Some(0.0),
            ..MetaSchema::new_with_format("integer", "int64")
        };
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            description: Some("`true` (the feature is on) or a non-negative integer (a limit)"),
            one_of: vec![
                MetaSchemaRef::Inline(Box::new(flag)),
                MetaSchemaRef::Inline(Box::new(limit)),
            ],
            ..MetaSchema::ANY
        }))
    }

    fn as_raw_value(&self) -> Option<&Value> {
        Some(&self.0)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Value> + 'a> {
        Box::new(self.as_raw_value().into_iter())
    }
}

impl ParseFromJSON for EntitlementValueJson {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        Ok(Self(value.unwrap_or_default()))
    }
}

impl ToJSON for EntitlementValueJson {
    fn to_json(&self) -> Option<Value> {
        Some(self.0.clone())
    }
}

/// An entitlement value on the wire.
pub(crate) fn value_json(value: EntitlementValue) -> EntitlementValueJson {
    EntitlementValueJson(match value {
        EntitlementValue::Enabled => Value::Bool(true),
        EntitlementValue::Limit(n) => Value::from(n),
    })
}

/// Entitlements on the wire: `{ "seats": 5, "export": true }`.
pub(crate) fn entitlements_json(
    entitlements: &Entitlements,
) -> BTreeMap<String, EntitlementValueJson> {
    entitlements
        .iter()
        .map(|(key, value)| (key.as_str().to_owned(), value_json(value)))
        .collect()
}

/// Entitlements as a request wrote them, for the plan rules to validate: booleans and integers
/// as such, anything else named so that the error says what was sent.
pub(crate) fn drafts_of(
    body: &BTreeMap<String, EntitlementValueJson>,
) -> BTreeMap<String, EntitlementDraft> {
    body.iter()
        .map(|(key, EntitlementValueJson(value))| {
            let draft = match value {
                Value::Bool(flag) => EntitlementDraft::Flag(*flag),
                Value::Number(n) => n.as_i64().map_or_else(
                    || EntitlementDraft::Unsupported(format!("the number {n}")),
                    EntitlementDraft::Integer,
                ),
                Value::String(_) => EntitlementDraft::Unsupported("a string".into()),
                Value::Null => EntitlementDraft::Unsupported("null".into()),
                Value::Array(_) => EntitlementDraft::Unsupported("an array".into()),
                Value::Object(_) => EntitlementDraft::Unsupported("an object".into()),
            };
            (key.clone(), draft)
        })
        .collect()
}

/// The purchase that gives one key its value.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct EntitlementGrantView {
    /// The feature key.
    pub key: String,
    /// Its value: `true` or a non-negative integer (the largest any purchase grants).
    pub value: EntitlementValueJson,
    /// The plan the purchase was made on.
    pub plan_id: String,
    /// The one-time order granting it (passes and lifetime purchases).
    #[oai(skip_serializing_if_is_none)]
    pub order_id: Option<String>,
    /// The subscription granting it.
    #[oai(skip_serializing_if_is_none)]
    pub subscription_id: Option<String>,
    /// When that purchase's access ends (RFC 3339), if it is known to end: absent for lifetime
    /// purchases and subscriptions that renew.
    #[oai(skip_serializing_if_is_none)]
    pub until: Option<String>,
}

impl From<&EntitlementGrant> for EntitlementGrantView {
    fn from(grant: &EntitlementGrant) -> Self {
        let (order_id, subscription_id) = match &grant.source {
            GrantSource::Order(id) => (Some(id.to_string()), None),
            GrantSource::Subscription(id) => (None, Some(id.to_string())),
        };
        Self {
            key: grant.key.to_string(),
            value: value_json(grant.value),
            plan_id: grant.plan_id.to_string(),
            order_id,
            subscription_id,
            until: grant.until.ends_at().map(timestamp),
        }
    }
}

/// A user's effective entitlements.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct EntitlementsView {
    /// The user.
    pub user_id: String,
    /// The account whose purchases these are: the user's personal account (their own id), or
    /// the team named by `accountId`.
    pub account_id: String,
    /// Every feature key the user holds now, mapped to `true` or a limit: the union over live
    /// subscriptions (past due within the grace), one-time passes still running and lifetime
    /// purchases; a number wins over `true`, the largest number wins.
    pub entitlements: BTreeMap<String, EntitlementValueJson>,
    /// For each key, in key order, the purchase giving its value.
    pub grants: Vec<EntitlementGrantView>,
}

impl EntitlementsView {
    fn new(user_id: &UserId, account: &AccountId, effective: &EffectiveEntitlements) -> Self {
        Self {
            user_id: user_id.to_string(),
            account_id: account.to_string(),
            entitlements: entitlements_json(&effective.entitlements),
            grants: effective
                .grants
                .iter()
                .map(EntitlementGrantView::from)
                .collect(),
        }
    }
}

api_response! {
    /// `GET /api/entitlements`.
    pub enum EntitlementsResponse {
        /// The user's entitlements.
        200 Ok(Json<EntitlementsView>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: another user's entitlements, or an API key without `entitlements:read`.
        /// Also `forbidden`: an account other than the one the API key is bound to, or a user outside it.
        403 Forbidden,
        /// `user_not_found`: the `userId` an API key named does not exist;
        /// `account_not_found`: the user is not a member of the `accountId` named.
        404 NotFound,
    }
}

/// The entitlements endpoint.
pub(crate) struct EntitlementsApi {
    state: Arc<AppState>,
}

impl EntitlementsApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the entitlements endpoint.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// What a user may use in the host app.
    Entitlements,
}

#[OpenApi(tag = "Tag::Entitlements")]
impl EntitlementsApi {
    /// The user's effective entitlements now, and which purchase grants each key: those of the
    /// account they act in (their personal account, or a team they belong to by `accountId`).
    #[oai(path = "/api/entitlements", method = "get")]
    async fn entitlements(
        &self,
        credential: Credential,
        /// The user (API keys with `entitlements:read` only; users read their own).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to: its purchases' entitlements (omitted: the
        /// user's personal account's).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> EntitlementsResponse {
        let result = async {
            let (acting, account) = self
                .state
                .acting_in(
                    &credential,
                    Scope::EntitlementsRead,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            let user = acting.user;
            let credits = &self.state.ports.credits;
            let status = credits.report_account_status(&account).await?;
            let effective = credits.entitlements_of(&status).await?;
            Ok::<_, Problem>(EntitlementsView::new(&user.id, &account, &effective))
        };
        match result.await {
            Ok(view) => EntitlementsResponse::Ok(Json(view)),
            Err(problem) => problem.into(),
        }
    }
}
