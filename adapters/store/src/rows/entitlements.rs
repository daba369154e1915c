//! Entitlements as stored: a JSON object of feature keys mapped to `true` or a non-negative
//! integer (`{"export":true,"seats":5}`), in `orders.plan_entitlements` and in a dynamic plan's
//! `data`. Read back through the domain's validating constructors.

use std::collections::BTreeMap;

use domain::entitlements::{EntitlementDraft, Entitlements};
use serde_json::Value;

/// The JSON object of `entitlements`.
pub(crate) fn to_object(entitlements: &Entitlements) -> BTreeMap<String, Value> {
    entitlements
        .to_drafts()
        .into_iter()
        .map(|(key, draft)| {
            let value = match draft {
                EntitlementDraft::Flag(flag) => Value::Bool(flag),
                EntitlementDraft::Integer(n) => Value::from(n),
                EntitlementDraft::Unsupported(kind) => Value::String(kind),
            };
            (key, value)
        })
        .collect()
}

/// The drafts a stored JSON object stands for (validated by the caller).
pub(crate) fn drafts_of(object: &BTreeMap<String, Value>) -> BTreeMap<String, EntitlementDraft> {
    object
        .iter()
        .map(|(key, value)| {
            let draft = match value {
                Value::Bool(flag) => EntitlementDraft::Flag(*flag),
                Value::Number(n) => n.as_i64().map_or_else(
                    || EntitlementDraft::Unsupported(format!("the number {n}")),
                    EntitlementDraft::Integer,
                ),
                other => EntitlementDraft::Unsupported(format!("{other}")),
            };
            (key.clone(), draft)
        })
        .collect()
}

/// `orders.plan_entitlements` for `entitlements` (`None` stays NULL).
pub(crate) fn column_value(entitlements: Option<&Entitlements>) -> Option<String> {
    entitlements.map(|e| Value::Object(to_object(e).into_iter().collect()).to_string())
}

/// Read `orders.plan_entitlements`.
///
/// # Errors
/// A description of what is wrong, for a corrupt-row error.
pub(crate) fn from_column(stored: Option<&str>) -> Result<Option<Entitlements>, String> {
    let Some(text) = stored else {
        return Ok(None);
    };
    let object: BTreeMap<String, Value> =
        serde_json::from_str(text).map_err(|e| format!("plan_entitlements: {e}"))?;
    Entitlements::from_drafts(&drafts_of(&object))
        .map(Some)
        .map_err(|errors| {
            let first = errors.first().map(|(key, message)| {
                format!(
                    "{}: {message}",
                    key.as_deref().unwrap_or("plan_entitlements")
                )
            });
            format!("plan_entitlements {}", first.unwrap_or_default())
        })
}
