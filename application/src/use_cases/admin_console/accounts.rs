//! The console's team accounts: every team newest first with its balance and member count, and
//! one team with its members, their limits and the seats it holds.
//!
//! An operator reads any team without being a member of it, which the teams use cases never
//! allow a user; a personal account is the customer's page, so it is no team here.

use domain::{AccountId, AccountKind, Credits};

use super::lists::{AdminListError, CursorPage, PageAfter};
use crate::cursor::Keyset;
use crate::ports::{Account, Clock, IdGenerator, Member, SecretHasher, Store, TeamAccountSummary};
use crate::service::Service;

/// Everything an operator sees of one team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamOverview {
    /// The account (a team's).
    pub account: Account,
    /// Its balance.
    pub balance: Credits,
    /// Its present members, oldest first, each with their limit and what counted against it
    /// when it was last written.
    pub members: Vec<Member>,
    /// The seats it holds now ([`domain::seat_cap`] of its entitlements); `None`: no cap.
    pub seats: Option<u64>,
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Every team account, newest first, with its balance and present members counted.
    ///
    /// # Errors
    /// A bad cursor or limit; infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn admin_team_accounts(
        &self,
        page: &PageAfter,
    ) -> Result<CursorPage<TeamAccountSummary>, AdminListError> {
        let keyset = Keyset::parse(page.cursor.as_deref(), page.limit)?;
        Ok(self.store.team_accounts(&keyset).await?.into())
    }

    /// One team account: its balance, members and seats, the seats worked out as every seat
    /// check works them out (`seats_of`).
    ///
    /// # Errors
    /// [`AdminListError::AccountNotFound`] for an id that names no team (a personal account's
    /// included); infrastructure.
    #[tracing::instrument(skip_all, fields(account_id = %account_id))]
    pub async fn admin_team_account(
        &self,
        account_id: &AccountId,
    ) -> Result<TeamOverview, AdminListError> {
        let account = self
            .store
            .account(account_id)
            .await?
            .filter(|a| a.kind == AccountKind::Team)
            .ok_or(AdminListError::AccountNotFound)?;
        let balance = self.store.balance(account_id).await?;
        let members = self.store.members(account_id).await?;
        let seats = self.seats_of(account_id).await?;
        Ok(TeamOverview {
            account,
            balance,
            members,
            seats,
        })
    }
}
