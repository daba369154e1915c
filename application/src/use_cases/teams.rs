//! Teams: accounts whose credits several users spend, each within the limit an owner or admin
//! set for them.
//!
//! Every user acts in their personal account unless they name a team they belong to. A team's
//! members are listed and changed only by its members (changed as `domain::decide_member_change`
//! allows, decided in the store's transaction); a user who names an account they do not belong
//! to is told it does not exist, so that account ids cannot be probed.

use domain::{
    AccountId, AccountKind, Credits, LimitWindow, MemberChange, MemberChangeRefusal, MemberLimit,
    MemberRole, UserId,
};

use super::InfraError;
use crate::host_events;
use crate::ports::{
    Account, Clock, HostIdentity, HostOrgSync, HostOrganisationClaim, IdGenerator, Member,
    MemberChangeError, MemberCommand, Membership, NewTeam, SecretHasher, Store, StoreError,
};
use crate::service::Service;

/// The longest team name, in characters.
pub const MAX_TEAM_NAME: usize = 100;

/// Why a team request was refused.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    /// A field is out of form.
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// No such account, or the user is not a member of it.
    #[error("account not found")]
    AccountNotFound,
    /// The user to add does not exist.
    #[error("user not found")]
    UserNotFound,
    /// No such open invitation.
    #[error("invitation not found")]
    InvitationNotFound,
    /// The rules refused the change.
    #[error("refused: {0:?}")]
    Refused(MemberChangeRefusal),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for TeamError {
    fn from(e: StoreError) -> Self {
        TeamError::Infra(e.into())
    }
}

impl From<MemberChangeError> for TeamError {
    fn from(e: MemberChangeError) -> Self {
        match e {
            MemberChangeError::Refused(refusal) => TeamError::Refused(refusal),
            MemberChangeError::AccountNotFound => TeamError::AccountNotFound,
            MemberChangeError::UserNotFound => TeamError::UserNotFound,
            MemberChangeError::Store(e) => e.into(),
        }
    }
}

/// An account a user acts in, and their role in it (`owner` of their personal account).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountEntry {
    /// The account.
    pub account: Account,
    /// The user's role.
    pub role: MemberRole,
    /// Its balance.
    pub balance: Credits,
}

/// A member change as a caller asks it: a role and a limit to set, or a removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberRequest {
    /// Add `user` with `role` and, optionally, a limit.
    Add {
        /// The role.
        role: MemberRole,
        /// The limit.
        limit: Option<MemberLimit>,
    },
    /// Change the role and/or the limit (`Some(None)` clears it).
    Update {
        /// The new role.
        role: Option<MemberRole>,
        /// The new limit.
        limit: Option<Option<MemberLimit>>,
    },
    /// Remove the member (themselves: leave).
    Remove,
}

/// A limit as a caller gives it: whole or fractional credits and a window code.
///
/// # Errors
/// [`TeamError::Invalid`] for a non-positive or too large amount or an unknown window.
pub fn parse_limit(credits: Credits, window: &str) -> Result<MemberLimit, TeamError> {
    if credits.is_zero() {
        return Err(TeamError::Invalid {
            field: "limit.credits",
            message: "must be more than zero".into(),
        });
    }
    let window = LimitWindow::parse(window).ok_or_else(|| TeamError::Invalid {
        field: "limit.window",
        message: "must be day, week or month".into(),
    })?;
    Ok(MemberLimit { credits, window })
}

/// A limit as a form or a JSON body writes it: `credits` a decimal text (at most two fraction
/// digits) and a window code.
///
/// # Errors
/// [`TeamError::Invalid`] on `limit.credits` for text that is not such a positive amount, else
/// as [`parse_limit`].
pub fn parse_limit_text(credits: &str, window: &str) -> Result<MemberLimit, TeamError> {
    let credits = credits
        .trim()
        .parse::<rust_decimal::Decimal>()
        .ok()
        .and_then(|d| Credits::from_decimal(d).ok())
        .ok_or_else(|| TeamError::Invalid {
            field: "limit.credits",
            message: "must be a positive number of credits with at most two decimal places".into(),
        })?;
    parse_limit(credits, window)
}

/// The team that mirrors the host organisation `organisation` of the host `issuer`:
/// [`domain::HOST_ORG_TEAM_PREFIX`] and 26 hex digits (104 bits) of
/// SHA-256(`org` || 0x00 || issuer || 0x00 || organisation), so instances racing on an
/// organisation's first request compute the same id, and no team created here (`team_` and a
/// random id without `org_`) meets one.
#[must_use]
pub fn host_team_id(issuer: &str, organisation: &str) -> AccountId {
    let hex = crate::ports::derived_id_digits(&["org", issuer, organisation]);
    AccountId::new(format!("{}{hex}", domain::HOST_ORG_TEAM_PREFIX))
        .expect("the prefix and hex digits are a valid account id")
}

/// The longest host organisation id accepted, in bytes (a longer one names no organisation).
pub const MAX_HOST_ORG_BYTES: usize = 512;

fn team_name(name: &str) -> Result<String, TeamError> {
    let name = name.trim();
    let invalid = |message: &str| TeamError::Invalid {
        field: "name",
        message: message.into(),
    };
    if name.is_empty() {
        return Err(invalid("must not be empty"));
    }
    if name.chars().count() > MAX_TEAM_NAME {
        return Err(invalid("is longer than 100 characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(invalid("must not contain control characters"));
    }
    Ok(name.to_owned())
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Create a team named `name` with `user` as its owner.
    ///
    /// # Errors
    /// [`TeamError::Invalid`] for a bad name; infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %user))]
    pub async fn create_team(&self, user: &UserId, name: &str) -> Result<Membership, TeamError> {
        let name = team_name(name)?;
        let id = AccountId::new(self.ids.new_id("team"))
            .map_err(|e| InfraError::Unexpected(e.into()))?;
        if !id.is_team() {
            return Err(InfraError::Unexpected(anyhow::anyhow!(
                "the id generator made {id}, not a team's id"
            ))
            .into());
        }
        let team = NewTeam {
            id,
            name,
            owner: user.clone(),
            now: self.clock.now(),
        };
        let account = self.store.create_team(&team).await?;
        Ok(Membership {
            account,
            role: MemberRole::Owner,
        })
    }

    /// The accounts `user` acts in: their personal account first, then their teams, each with
    /// its balance.
    ///
    /// # Errors
    /// Infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %user))]
    pub async fn my_accounts(&self, user: &UserId) -> Result<Vec<AccountEntry>, TeamError> {
        let personal = AccountId::personal(user);
        let own = self
            .store
            .account(&personal)
            .await?
            .unwrap_or_else(|| Account {
                id: personal.clone(),
                kind: AccountKind::Personal,
                name: None,
                host_organisation: None,
                created_at: domain::Timestamp::from_unix_millis(0),
            });
        let mut entries = vec![AccountEntry {
            balance: self.store.balance(&personal).await?,
            account: own,
            role: MemberRole::Owner,
        }];
        for membership in self.store.memberships(user).await? {
            entries.push(AccountEntry {
                balance: self.store.balance(&membership.account.id).await?,
                account: membership.account,
                role: membership.role,
            });
        }
        Ok(entries)
    }

    /// The account `user` acts in when they name `account`: their personal account (`None` or
    /// their own id), or a team they belong to, with their role in it.
    ///
    /// # Errors
    /// [`TeamError::AccountNotFound`] for an account they do not belong to; infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %user))]
    pub async fn account_of(
        &self,
        user: &UserId,
        account: Option<AccountId>,
    ) -> Result<(AccountId, MemberRole), TeamError> {
        let account = account.unwrap_or_else(|| AccountId::personal(user));
        let role = (self.role_in(user, &account).await?).ok_or(TeamError::AccountNotFound)?;
        Ok((account, role))
    }

    /// `user`'s role in `account`, read now: `Owner` of their own personal account, their role
    /// in a team they belong to, `None` for any other account.
    ///
    /// # Errors
    /// The store cannot be read.
    pub(crate) async fn role_in(
        &self,
        user: &UserId,
        account: &AccountId,
    ) -> Result<Option<MemberRole>, crate::ports::StoreError> {
        if account.is_personal_of(user) {
            return Ok(Some(MemberRole::Owner));
        }
        Ok(self.store.member(account, user).await?.map(|m| m.role))
    }

    /// Whether `user` manages the billing of `account`: their own personal account, or a team in
    /// which their role does ([`MemberRole::manages_billing`]), read now.
    ///
    /// # Errors
    /// The store cannot be read.
    pub(crate) async fn manages_billing_of(
        &self,
        user: &UserId,
        account: &AccountId,
    ) -> Result<bool, crate::ports::StoreError> {
        let role = self.role_in(user, account).await?;
        Ok(role.is_some_and(MemberRole::manages_billing))
    }

    /// The seats `account` holds now: the `seats` entitlement of what it bought
    /// ([`domain::seat_cap`]); `None` when it holds none.
    pub(crate) async fn seats_of(&self, account: &AccountId) -> Result<Option<u64>, InfraError> {
        let status = self.report_account_status(account).await?;
        let held = self.entitlements_of(&status).await?;
        Ok(domain::seat_cap(&held.entitlements))
    }

    /// Keep `user`'s memberships of host organisations' teams in step with the token that
    /// named them `identity` (see [`domain::plan_host_org`]): one read when they already are,
    /// else one transaction. A user for whom no seat is free in the claimed team does not join
    /// it (they act in their personal account); the refusal is logged.
    ///
    /// # Errors
    /// Infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %user))]
    pub async fn keep_host_org_in_step(
        &self,
        user: &UserId,
        identity: &HostIdentity,
    ) -> Result<(), InfraError> {
        let (claim, organisation) = match &identity.organisation {
            HostOrganisationClaim::NotMapped => return Ok(()),
            HostOrganisationClaim::NoOrganisation => (None, None),
            HostOrganisationClaim::Organisation(org) => {
                let acceptable = !org.id.is_empty()
                    && org.id.len() <= MAX_HOST_ORG_BYTES
                    && !org.id.chars().any(char::is_control);
                if acceptable {
                    let account = host_team_id(&identity.issuer, &org.id);
                    let name = org
                        .name
                        .as_deref()
                        .and_then(|n| team_name(n).ok())
                        .or_else(|| team_name(&org.id).ok())
                        .unwrap_or_else(|| org.id.chars().take(MAX_TEAM_NAME).collect());
                    let claim = domain::HostOrgClaim {
                        account,
                        role: org.role,
                    };
                    (Some(claim), Some((org.id.clone(), name)))
                } else {
                    // An id that cannot be kept says nothing: memberships stay as they are.
                    tracing::warn!("a host token's organisation id is not acceptable");
                    return Ok(());
                }
            }
        };
        let held = self.store.host_memberships(user).await?;
        let steps = domain::plan_host_org(&held, claim.as_ref());
        if steps.is_empty() {
            return Ok(());
        }
        // The store plans again on what its transaction reads, where a concurrent request may
        // have left the user away: the seats are known whenever there is a team to come to.
        let seats = match &claim {
            Some(claim) => self.seats_of(&claim.account).await?,
            None => None,
        };
        let sync = HostOrgSync {
            user: user.clone(),
            claim,
            organisation,
            seats,
            now: self.clock.now(),
        };
        if let Err(refusal) = (self.store)
            .sync_host_org(&sync, host_events::member_changed)
            .await?
        {
            tracing::warn!(
                ?refusal,
                "a host organisation's team has no seat for its member"
            );
        }
        Ok(())
    }

    /// The host says `member` left its organisation that the team `account` mirrors (its
    /// backend, with an API key, on the host's own membership event): they are away from the
    /// team from now on, as if their token named another organisation, until a token names it
    /// again.
    ///
    /// # Errors
    /// [`TeamError::AccountNotFound`] for a team that mirrors no host organisation;
    /// [`TeamError::Refused`] (`NotAMember`) when they are not present in it; infrastructure.
    #[tracing::instrument(skip_all, fields(account_id = %account, member = %member))]
    pub async fn host_member_left(
        &self,
        account: &AccountId,
        member: &UserId,
    ) -> Result<(), TeamError> {
        if !account.is_host_org() {
            return Err(TeamError::AccountNotFound);
        }
        if self
            .store
            .step_away(account, member, self.clock.now())
            .await?
        {
            Ok(())
        } else {
            Err(TeamError::Refused(MemberChangeRefusal::NotAMember))
        }
    }

    /// A team's members, for one of them.
    ///
    /// # Errors
    /// [`TeamError::AccountNotFound`] unless `user` is a member; infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %user, account_id = %account))]
    pub async fn team_members(
        &self,
        user: &UserId,
        account: &AccountId,
    ) -> Result<Vec<Member>, TeamError> {
        if self.store.member(account, user).await?.is_none() {
            return Err(TeamError::AccountNotFound);
        }
        Ok(self.store.members(account).await?)
    }

    /// Change `target`'s membership of the team `account` as `actor` asks.
    ///
    /// # Errors
    /// [`TeamError::AccountNotFound`] unless `actor` is a member; [`TeamError::Refused`] by
    /// the rules; [`TeamError::UserNotFound`] for an unknown user to add; infrastructure.
    #[tracing::instrument(skip_all, fields(actor = %actor, account_id = %account, target = %target))]
    pub async fn change_team_member(
        &self,
        actor: &UserId,
        account: &AccountId,
        target: &UserId,
        request: MemberRequest,
    ) -> Result<Option<Member>, TeamError> {
        if !account.is_team() || self.store.member(account, actor).await?.is_none() {
            return Err(TeamError::AccountNotFound);
        }
        let changes: Vec<MemberChange> = match request {
            MemberRequest::Add { role, limit } => std::iter::once(MemberChange::Add(role))
                .chain(limit.map(|l| MemberChange::SetLimit(Some(l))))
                .collect(),
            MemberRequest::Update { role, limit } => role
                .map(MemberChange::SetRole)
                .into_iter()
                .chain(limit.map(MemberChange::SetLimit))
                .collect(),
            MemberRequest::Remove => vec![MemberChange::Remove],
        };
        if changes.is_empty() {
            return Ok(self.store.member(account, target).await?);
        }
        let seats = if changes.iter().any(|c| matches!(c, MemberChange::Add(_))) {
            self.seats_of(account).await?
        } else {
            None
        };
        let command = MemberCommand {
            account: account.clone(),
            actor: actor.clone(),
            target: target.clone(),
            changes,
            seats,
            now: self.clock.now(),
        };
        let changed = (self.store)
            .change_member(&command, host_events::member_changed)
            .await?;
        // The member as they are now, with their address (the change reads their row alone).
        match changed.after {
            Some(_) => Ok(self.store.member(account, target).await?),
            None => Ok(None),
        }
    }
}
