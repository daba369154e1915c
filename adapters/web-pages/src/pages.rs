//! The pages, one module per family, and what several of them share: plan names for orders,
//! status and type labels, and small page parts.

pub(crate) mod admin;
pub(crate) mod auth;
pub(crate) mod dashboard;
pub(crate) mod dashboard_account;
pub(crate) mod dashboard_limits;
pub(crate) mod dashboard_promo;
pub(crate) mod dashboard_spend;
pub(crate) mod dashboard_switch;
pub(crate) mod dashboard_team_forms;
pub(crate) mod dashboard_teams;
pub(crate) mod dashboard_top_up;
pub(crate) mod home;
pub(crate) mod invitation;
pub(crate) mod payment;
pub(crate) mod portal;
pub(crate) mod pricing;

use std::collections::BTreeMap;

use application::accounts::User;
use domain::{PlanId, PlanType, ProviderId};
use maud::{Markup, html};

use crate::state::{PageError, PageState, Visitor, sign_in_then};

/// The catalog key of a plan type's label.
pub(crate) fn plan_type_key(plan_type: PlanType) -> &'static str {
    match plan_type {
        PlanType::OneTime => "plan_type.one_time",
        PlanType::Recurring => "plan_type.recurring",
        PlanType::Credits => "plan_type.credits",
    }
}

/// The catalog key of a provider's payment-method label.
pub(crate) fn provider_key(provider: ProviderId) -> &'static str {
    match provider {
        ProviderId::WalletQr => "provider.wallet_qr",
        ProviderId::WalletWeb => "provider.wallet_web",
        ProviderId::CardGateway => "provider.card_gateway",
        ProviderId::WalletGlobal => "provider.wallet_global",
        ProviderId::MorA => "provider.mor_a",
        ProviderId::MorB => "provider.mor_b",
        ProviderId::MorC => "provider.mor_c",
    }
}

/// An order status as a reader's label, from its stable code (`order_status.paid`, …).
pub(crate) fn order_status_label(visitor: &Visitor, code: &str) -> String {
    visitor.t(&format!("order_status.{code}")).to_owned()
}

/// The badge colour of an order or subscription status code.
pub(crate) fn status_tone(code: &str) -> &'static str {
    match code {
        "paid" | "active" | "trialing" => "badge-success",
        "pending" | "past_due" | "partially_refunded" => "badge-warning",
        "failed" => "badge-danger",
        _ => "badge-neutral",
    }
}

/// Plan display names in the reader's language, from the static catalog and the dynamic
/// table (the live mode wins), for orders whose plan may since have changed mode or vanished.
pub(crate) struct PlanNames(BTreeMap<PlanId, String>);

impl PlanNames {
    /// Load the names for `visitor`'s language.
    ///
    /// # Errors
    /// The dynamic table cannot be read.
    pub(crate) async fn load(state: &PageState, visitor: &Visitor) -> Result<Self, PageError> {
        let names = state.ports.plans.plan_names(&visitor.lang.locale()).await?;
        Ok(PlanNames(names))
    }

    /// The name of plan `id`, or the id itself when no plan has it any more.
    pub(crate) fn name(&self, id: &PlanId) -> String {
        self.0
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.as_str().to_owned())
    }
}

/// The signed-in user, or a redirect to sign in that comes back here.
///
/// # Errors
/// [`PageError::SignInRequired`] for a visitor.
pub(crate) fn require_user(visitor: &Visitor) -> Result<User, PageError> {
    visitor
        .user
        .clone()
        .ok_or_else(|| PageError::SignInRequired(sign_in_then(&visitor.here())))
}

/// An id read from a path, a query or a form, parsed once, here; `None` when malformed. A
/// caller answers `None` exactly as it answers an id the use case does not know.
pub(crate) fn parse_id<T>(
    raw: &str,
    parse: impl FnOnce(String) -> Result<T, domain::IdError>,
) -> Option<T> {
    parse(raw.to_owned()).ok()
}

/// A centred message with actions, for outcomes that are not errors of ours.
pub(crate) fn message_panel(title: &str, text: &str, actions: Markup) -> Markup {
    html! {
        section.narrow.message-panel {
            h1 { (title) }
            p.lead { (text) }
            div.actions { (actions) }
        }
    }
}

/// Previous / next links for page `page` of `total_pages`, keeping the other query values.
pub(crate) fn pagination(
    visitor: &Visitor,
    base: &str,
    param: &str,
    page: u32,
    total_pages: u64,
) -> Markup {
    let link = |to: u32| {
        format!(
            "{base}{}{param}={to}",
            if base.contains('?') { "&" } else { "?" }
        )
    };
    let previous = html! { "← " (visitor.t("common.previous")) };
    let next = html! { (visitor.t("common.next")) " →" };
    let status = visitor.tf(
        "common.page_of",
        &[
            ("page", &page.to_string()),
            ("total", &total_pages.to_string()),
        ],
    );
    html! {
        @if total_pages > 1 {
            nav.pagination aria-label=(visitor.t("common.pagination")) {
                @if page > 1 {
                    a.btn.btn-secondary.btn-sm href=(link(page - 1)) rel="prev" { (previous) }
                } @else {
                    span.btn.btn-secondary.btn-sm.is-disabled aria-disabled="true" { (previous) }
                }
                span.page-status { (status) }
                @if u64::from(page) < total_pages {
                    a.btn.btn-secondary.btn-sm href=(link(page + 1)) rel="next" { (next) }
                } @else {
                    span.btn.btn-secondary.btn-sm.is-disabled aria-disabled="true" { (next) }
                }
            }
        }
    }
}
