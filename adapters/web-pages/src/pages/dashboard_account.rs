//! The dashboard's account switcher: `?account=team_…` shows a team the user belongs to in place
//! of their own account (its subscriptions and purchases, its orders, its shared balance and
//! ledger, with who spent each credit), and every link and form of the page keeps it. A member
//! whose role does not include billing sees the team's holdings but no cancel, switch or buy
//! buttons (the use cases refuse them too). A customer-portal session has no switcher: it shows
//! the one account it was opened for (the user's own, or a team's billing they manage).

use std::collections::BTreeMap;

use application::accounts::User;
use application::authorization::{Acting as Reaching, Owned, OwnerError};
use application::use_cases::teams::AccountEntry;
use domain::{AccountId, AccountKind, UserId};
use maud::{Markup, html};

use super::dashboard_teams::team_name;
use crate::layout::csrf_field;
use crate::state::{PageError, PageState, Visitor, with_query};

/// The account the dashboard shows, and the teams it could show instead.
pub(crate) struct Acting {
    teams: Vec<AccountEntry>,
    chosen: Option<AccountEntry>,
    /// The chosen team's members' addresses, for its ledger.
    members: BTreeMap<UserId, String>,
}

impl Acting {
    /// The user's teams and `?account=` among them.
    ///
    /// # Errors
    /// [`PageError::NotFound`] for an `?account=` naming no team of the user's (or any, in a
    /// portal session); the store's errors.
    pub(crate) async fn load(
        state: &PageState,
        v: &Visitor,
        user: &User,
    ) -> Result<Self, PageError> {
        let (teams, chosen) = teams_and_chosen(state, v, user, |_| true).await?;
        let mut members = BTreeMap::new();
        if let Some(team) = &chosen {
            let listed = (state.ports.accounts)
                .team_members(&user.id, &team.account.id)
                .await
                .map_err(super::dashboard_teams::page_error)?;
            for m in listed {
                let name = m.email.unwrap_or_else(|| m.user_id.to_string());
                members.insert(m.user_id, name);
            }
        }
        Ok(Self {
            teams,
            chosen,
            members,
        })
    }

    /// The team shown, if not the user's own account.
    pub(crate) fn team(&self) -> Option<&AccountEntry> {
        self.chosen.as_ref()
    }

    /// The account shown.
    pub(crate) fn account_id(&self, user: &User) -> AccountId {
        self.chosen
            .as_ref()
            .map_or_else(|| AccountId::personal(&user.id), |t| t.account.id.clone())
    }

    /// Whether the user manages the shown account's billing (always their own).
    pub(crate) fn manages_billing(&self) -> bool {
        self.chosen
            .as_ref()
            .is_none_or(|t| t.role.manages_billing())
    }

    /// `path` (with its own query, if any) showing the same account.
    pub(crate) fn href(&self, path: &str) -> String {
        match &self.chosen {
            None => path.to_owned(),
            Some(team) => {
                let sep = if path.contains('?') { '&' } else { '?' };
                let pairs = [("account".to_owned(), team.account.id.to_string())];
                let query = with_query("", pairs.iter());
                format!("{path}{sep}{}", query.trim_start_matches('?'))
            }
        }
    }

    /// Who spent, as the ledger of a team names them.
    pub(crate) fn member_name(&self, id: &UserId) -> String {
        self.members
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }
}

/// The user's teams that `keep` keeps, and the one `?account=` names among them. A
/// customer-portal session offers none: it shows the team it was opened for (while the user is
/// still one of its members that `keep` keeps), or the user's own account.
///
/// # Errors
/// [`PageError::NotFound`] for an `?account=` naming no such team (any other than a portal
/// session's); the store's errors.
pub(crate) async fn teams_and_chosen(
    state: &PageState,
    v: &Visitor,
    user: &User,
    keep: impl Fn(&AccountEntry) -> bool,
) -> Result<(Vec<AccountEntry>, Option<AccountEntry>), PageError> {
    let portal = v.portal_return.is_some();
    if portal && v.portal_team().is_none() {
        return match v.query("account") {
            Some(_) => Err(PageError::NotFound),
            None => Ok((Vec::new(), None)),
        };
    }
    let teams: Vec<AccountEntry> = (state.ports.accounts)
        .my_accounts(&user.id)
        .await
        .map_err(super::dashboard_teams::page_error)?
        .into_iter()
        .filter(|e| e.account.kind == AccountKind::Team && keep(e))
        .collect();
    let named = v
        .query("account")
        .or(v.portal_team().map(AccountId::as_str));
    let chosen = match named {
        Some(raw) => {
            let id = AccountId::new(raw).map_err(|_| PageError::NotFound)?;
            v.within_portal(&id)?;
            Some((teams.iter().find(|e| e.account.id == id).cloned()).ok_or(PageError::NotFound)?)
        }
        None => None,
    };
    Ok((if portal { Vec::new() } else { teams }, chosen))
}

/// A customer-portal session acts on the one account it was opened for alone (the
/// application's [`application::authorization::Reach::Portal`]): a subscription or an order of
/// any other account is not found to it. Any other session is let through to the use case, which
/// checks the user's role in the object's account.
///
/// # Errors
/// [`PageError::NotFound`] for a portal session and an object of another account; the
/// store's errors.
pub(crate) async fn portal_may_act_on(
    state: &PageState,
    v: &Visitor,
    user: &User,
    owned: Owned<'_>,
) -> Result<(), PageError> {
    let Some(account) = &v.portal_account else {
        return Ok(());
    };
    let acting = Reaching::portal(user.clone(), account.clone());
    match state.ports.accounts.within_reach(&acting, owned).await {
        Ok(()) => Ok(()),
        Err(OwnerError::Denied(_)) => Err(PageError::NotFound),
        Err(OwnerError::Infra(e)) => Err(e.into()),
    }
}

/// The CSRF field, and the account shown, of a form on the dashboard: its answer comes back to
/// the same account (the use case checks the user's role in it again).
pub(crate) fn form_fields(v: &Visitor) -> Markup {
    html! {
        (csrf_field(v))
        @if let Some(account) = v.query("account").or(v.portal_team().map(AccountId::as_str)) {
            input type="hidden" name="accountId" value=(account);
        }
    }
}

/// The dashboard showing `account` (a form's `accountId`; empty: the user's own) with `notice`.
pub(crate) fn back(account: &str, notice: &str) -> String {
    let mut pairs = Vec::new();
    if !account.is_empty() {
        pairs.push(("account".to_owned(), account.to_owned()));
    }
    pairs.push(("notice".to_owned(), notice.to_owned()));
    with_query("/dashboard", pairs.iter())
}

/// "Account: Yours · Team A · …", when the user belongs to a team.
pub(crate) fn switcher(v: &Visitor, acting: &Acting, tab: Option<&str>) -> Markup {
    if acting.teams.is_empty() {
        return html! {};
    }
    let link = |account: Option<&AccountId>| {
        let mut pairs = Vec::new();
        if let Some(tab) = tab {
            pairs.push(("tab".to_owned(), tab.to_owned()));
        }
        if let Some(account) = account {
            pairs.push(("account".to_owned(), account.to_string()));
        }
        with_query("/dashboard", pairs.iter())
    };
    let chosen = acting.team().map(|t| &t.account.id);
    html! {
        nav.currency-picker.account-switcher aria-label=(v.t("dashboard.account_label"))
            data-testid="account-switcher" {
            span.currency-label { (v.t("dashboard.account_label")) }
            (account_option(&link(None), v.t("dashboard.account_own"), chosen.is_none(), "personal"))
            @for team in &acting.teams {
                @let id = &team.account.id;
                (account_option(&link(Some(id)), team_name(&team.account), chosen == Some(id), id.as_str()))
            }
        }
    }
}

/// One account of a picker (the dashboard's switcher, `/pricing`'s "Buying for"): a link to the
/// page showing it, marked when it is the one shown; `id` is the account's id, or `personal`.
pub(crate) fn account_option(href: &str, label: &str, selected: bool, id: &str) -> Markup {
    html! {
        @if selected {
            a.currency-option.is-selected href=(href) aria-current="true" data-account=(id) { (label) }
        } @else {
            a.currency-option href=(href) data-account=(id) { (label) }
        }
    }
}
