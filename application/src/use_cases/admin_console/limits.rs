//! An operator's view of a customer's spend limits: the same limits the account's owners set
//! (`GET /api/limits`), read and changed for any account, each change audited
//! (`limit.added`, `limit.removed`) in its own transaction.

use std::collections::BTreeMap;

use domain::{AccountId, SpendLimitId};

use super::audited::{Entry, text};
use crate::accounts::User;
use crate::ports::{
    AdminWrite, AuditAction, AuditFacts, Clock, IdGenerator, NewSpendLimit, SecretHasher, Store,
    StoreError,
};
use crate::service::Service;
use crate::use_cases::InfraError;
use crate::use_cases::spend_limits::{LimitDraft, LimitsError, ShownLimit, parse_draft};

/// What the audit log keeps of a limit.
fn limit_facts(new: &NewSpendLimit) -> AuditFacts {
    let limit = &new.limit;
    let mut facts = BTreeMap::from([
        ("credits".to_owned(), text(limit.credits)),
        ("window".to_owned(), text(limit.window.code())),
        ("enforcement".to_owned(), text(limit.enforcement.code())),
    ]);
    if let Some(hours) = limit.window.rolling_hours() {
        facts.insert("rollingHours".to_owned(), text(hours));
    }
    let scope = &new.scope;
    if let Some(feature) = &scope.feature {
        facts.insert("feature".to_owned(), text(feature));
    }
    if let Some(model) = &scope.model {
        facts.insert("model".to_owned(), text(model));
    }
    if let Some(key) = &scope.api_key {
        facts.insert("apiKeyId".to_owned(), text(key));
    }
    if let Some(member) = &scope.member {
        facts.insert("memberId".to_owned(), text(member));
    }
    facts
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The spend limits of any account, with their usage now.
    ///
    /// # Errors
    /// [`LimitsError::AccountNotFound`], infrastructure.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn customer_limits(
        &self,
        account: &AccountId,
    ) -> Result<Vec<ShownLimit>, LimitsError> {
        self.known_account(account).await?;
        self.spend_limits(account).await
    }

    /// `admin` adds a limit to any account, audited (`limit.added`); it counts from what its
    /// window already spent, as an owner's does.
    ///
    /// # Errors
    /// [`LimitsError::Invalid`], [`LimitsError::AccountNotFound`], [`LimitsError::TooMany`],
    /// [`LimitsError::NoSuchKey`], [`LimitsError::NoSuchMember`], infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, account_id = %account))]
    pub async fn add_customer_limit(
        &self,
        admin: &User,
        account: &AccountId,
        draft: LimitDraft,
    ) -> Result<ShownLimit, LimitsError> {
        let (scope, limit) = parse_draft(&draft)?;
        self.known_account(account).await?;
        let id = SpendLimitId::new(self.ids.new_id("lim"))
            .map_err(|e| InfraError::Unexpected(e.into()))?;
        let new = NewSpendLimit {
            id,
            account_id: account.clone(),
            scope,
            limit,
            created_by: Some(admin.id.clone()),
            now: self.clock.now(),
        };
        let entry = Entry {
            admin,
            action: AuditAction::LimitAdded,
            object_kind: "account",
            object_id: account.to_string(),
            before: None,
            after: Some(limit_facts(&new)),
        };
        match self
            .write_audited(AdminWrite::AddSpendLimit(&new), entry)
            .await
        {
            Ok(()) => {}
            Err(StoreError::Conflict(_)) => {
                return Err(LimitsError::TooMany(domain::MAX_LIMITS_PER_ACCOUNT));
            }
            // The store looks for the key first, then the member: a draft naming both whose
            // key is bound is refused for its member.
            Err(StoreError::NotFound) if new.scope.api_key.is_some() => {
                return Err(LimitsError::NoSuchKey);
            }
            Err(StoreError::NotFound) => return Err(LimitsError::NoSuchMember),
            Err(e) => return Err(e.into()),
        }
        self.spend_limits(account)
            .await?
            .into_iter()
            .find(|shown| shown.record.id == new.id)
            .ok_or_else(|| InfraError::Unexpected(anyhow::anyhow!("the limit just added")).into())
    }

    /// `admin` removes a limit of any account, audited (`limit.removed`).
    ///
    /// # Errors
    /// [`LimitsError::AccountNotFound`], [`LimitsError::NotFound`], infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, account_id = %account, limit_id = %id))]
    pub async fn remove_customer_limit(
        &self,
        admin: &User,
        account: &AccountId,
        id: &SpendLimitId,
    ) -> Result<(), LimitsError> {
        self.known_account(account).await?;
        let entry = Entry {
            admin,
            action: AuditAction::LimitRemoved,
            object_kind: "account",
            object_id: account.to_string(),
            before: Some(BTreeMap::from([("limitId".to_owned(), text(id))])),
            after: None,
        };
        match (self.write_audited(AdminWrite::RemoveSpendLimit(account, id), entry)).await {
            Ok(()) => Ok(()),
            Err(StoreError::NotFound) => Err(LimitsError::NotFound),
            Err(e) => Err(e.into()),
        }
    }

    async fn known_account(&self, account: &AccountId) -> Result<(), LimitsError> {
        self.store
            .account(account)
            .await?
            .map(drop)
            .ok_or(LimitsError::AccountNotFound)
    }
}
