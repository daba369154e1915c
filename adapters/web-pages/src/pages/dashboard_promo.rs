//! Redeeming a promo code on the dashboard's credits tab: a form on the user's own account
//! (`POST /dashboard/promo-codes/redeem`, the use case of `POST /api/promo-codes/redeem`), back
//! to the tab with a notice of what came of it. Each rendering of the form carries a new
//! request key, so a double submission redeems once and a code allowed several times per user
//! can be redeemed again from a fresh page.

use std::sync::Arc;

use application::use_cases::promo_codes::RedeemError;
use domain::PromoRefusal;
use maud::{Markup, html};
use poem::Request;
use serde::Deserialize;

use super::require_user;
use crate::layout::csrf_field;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect, with_query};

/// What the form posts.
#[derive(Debug, Deserialize)]
pub(crate) struct RedeemForm {
    #[serde(default)]
    code: String,
    #[serde(default)]
    key: String,
}

/// `POST /dashboard/promo-codes/redeem`: back to the credits tab with a notice.
pub(crate) async fn redeem(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let form: RedeemForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    // Redeemed into the user's own account: not from a portal session opened for a team.
    v.within_portal(&domain::AccountId::personal(&user.id))?;
    let key = Some(form.key.trim().to_owned()).filter(|k| !k.is_empty());
    let answer = state
        .ports
        .credits
        .redeem_promo_code(&user, &form.code, key)
        .await;
    let mut pairs = vec![("tab".to_owned(), "credits".to_owned())];
    let notice = match answer {
        Ok(redeemed) => {
            pairs.push((
                "credits".to_owned(),
                redeemed.redemption.credits.to_string(),
            ));
            "promo_redeemed"
        }
        Err(RedeemError::Refused(refusal)) => match refusal {
            PromoRefusal::Invalid => "promo_invalid",
            PromoRefusal::Exhausted => "promo_exhausted",
            PromoRefusal::AlreadyRedeemed => "promo_already",
            PromoRefusal::NewUsersOnly | PromoRefusal::PlanRequired => "promo_not_eligible",
        },
        Err(RedeemError::BadKey) => return Err(PageError::BadRequest),
        Err(RedeemError::TooManyAttempts(_)) => "promo_too_many",
        Err(RedeemError::Infra(infra)) => return Err(infra.into()),
    };
    pairs.push(("notice".to_owned(), notice.to_owned()));
    Ok(redirect(&with_query("/dashboard", pairs.iter())))
}

/// The notice of the form's answer, if the page was reached with one.
fn notice(v: &Visitor) -> Markup {
    let (tone, key) = match v.query("notice") {
        Some("promo_redeemed") => {
            let credits = v.query("credits").unwrap_or_default();
            let text = v.tf("promo.notice_redeemed", &[("credits", credits)]);
            return html! {
                div.alert.alert-success role="status" data-testid="notice" { (text) }
            };
        }
        Some("promo_invalid") => ("alert-danger", "promo.notice_invalid"),
        Some("promo_exhausted") => ("alert-warning", "promo.notice_exhausted"),
        Some("promo_already") => ("alert-warning", "promo.notice_already"),
        Some("promo_not_eligible") => ("alert-warning", "promo.notice_not_eligible"),
        Some("promo_too_many") => ("alert-warning", "promo.notice_too_many"),
        _ => return html! {},
    };
    html! { div.alert.(tone) role="status" data-testid="notice" { (v.t(key)) } }
}

/// The credits tab's part on the user's own account: the notice of the form's answer and the
/// form, whose request key is `key`.
pub(crate) fn section(v: &Visitor, key: &str) -> Markup {
    html! {
        (notice(v))
        section.card.section-card data-testid="promo-code" {
            h2 { (v.t("promo.title")) }
            form.inline-form.promo-form method="post" action="/dashboard/promo-codes/redeem"
                data-busy {
                (csrf_field(v))
                input type="hidden" name="key" value=(key);
                div.field {
                    label for="promo-code" { (v.t("promo.code")) }
                    input #promo-code type="text" name="code" required minlength="3"
                        maxlength="40" autocomplete="off" autocapitalize="characters"
                        spellcheck="false" data-testid="promo-code-input";
                }
                button.btn.btn-primary type="submit" data-testid="redeem-promo" {
                    (v.t("promo.redeem"))
                }
            }
        }
    }
}
