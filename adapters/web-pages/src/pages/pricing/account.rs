//! Which account a purchase on `/pricing` is for: the buyer's own, or (`?account=team_…`) a
//! team whose billing they manage (an owner or admin). The choice is offered only to someone
//! managing a team's billing; the cards then show what that team already holds, and every Buy
//! form carries the team's id, which the purchase checks again (`accountId` on initiate).

use application::use_cases::teams::AccountEntry;
use maud::{Markup, html};

use super::Choices;
use crate::pages::dashboard_account::{account_option, teams_and_chosen};
use crate::pages::dashboard_teams::team_name;
use crate::state::{PageError, PageState, Visitor};

/// The teams the reader may buy for, and the one chosen.
pub(crate) struct BuyingFor {
    teams: Vec<AccountEntry>,
    chosen: Option<AccountEntry>,
}

impl BuyingFor {
    /// The teams of the signed-in reader whose billing they manage, and `?account=` among them.
    ///
    /// # Errors
    /// [`PageError::NotFound`] for an `?account=` that is not such a team; the store's errors.
    pub(crate) async fn load(state: &PageState, v: &Visitor) -> Result<Self, PageError> {
        let Some(user) = &v.user else {
            return match v.query("account") {
                Some(_) => Err(PageError::NotFound),
                None => Ok(Self::nobody()),
            };
        };
        // A customer-portal session buys for the one account it was opened for.
        let manages = |e: &AccountEntry| e.role.manages_billing();
        let (teams, chosen) = teams_and_chosen(state, v, user, manages).await?;
        Ok(Self { teams, chosen })
    }

    fn nobody() -> Self {
        Self {
            teams: Vec::new(),
            chosen: None,
        }
    }

    /// The team chosen, if any.
    pub(crate) fn chosen(&self) -> Option<&AccountEntry> {
        self.chosen.as_ref()
    }
}

/// The account a Buy form posts for: the page's `?account=` (or a portal session's team), which
/// [`BuyingFor::load`] let through only for a team the reader manages (the purchase checks it
/// again).
pub(crate) fn form_account(v: &Visitor) -> Option<&str> {
    v.query("account")
        .or(v.portal_team().map(domain::AccountId::as_str))
}

/// "Buying for: Yourself · Team A · …", when the reader manages a team's billing.
pub(crate) fn picker(v: &Visitor, choices: &Choices, buying: &BuyingFor) -> Markup {
    if buying.teams.is_empty() {
        return html! {};
    }
    let link = |account: Option<&str>| choices.account_link(account);
    let chosen = buying.chosen().map(|e| e.account.id.as_str());
    html! {
        nav.currency-picker.account-picker aria-label=(v.t("pricing.buying_for"))
            data-testid="buying-for" {
            span.currency-label { (v.t("pricing.buying_for")) }
            (account_option(&link(None), v.t("pricing.for_yourself"), chosen.is_none(), "personal"))
            @for team in &buying.teams {
                @let id = team.account.id.as_str();
                (account_option(&link(Some(id)), team_name(&team.account), chosen == Some(id), id))
            }
        }
        @if let Some(team) = buying.chosen() {
            p.muted.center data-testid="buying-for-team" {
                (v.tf("pricing.buying_for_team", &[("team", team_name(&team.account))]))
            }
        }
    }
}
