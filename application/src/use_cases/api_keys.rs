//! Service API keys: created by admins, shown once, stored hashed, scoped, revocable. An
//! administrator's create and revoke are written with their audit entry
//! (`admin_console::audited`).

use std::collections::BTreeSet;

use domain::AccountId;

use super::InfraError;
use super::sessions::API_KEY_PREFIX;
use super::spend_limits::{LimitsError, ShownLimit};
use crate::accounts::{AccountError, ApiKey, Scope, User};
use crate::ports::{Clock, IdGenerator, SecretHasher, Store, StoreError};
use crate::service::Service;

/// A new key and its secret, which is never shown again.
#[derive(Debug, Clone)]
pub struct CreatedApiKey {
    /// The stored record.
    pub key: ApiKey,
    /// The secret to give the caller.
    pub secret: String,
}

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiKeyError {
    /// Bad name or scope.
    #[error("{0}")]
    Invalid(String),
    /// No such key.
    #[error("api key not found")]
    NotFound,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for ApiKeyError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ApiKeyError::NotFound,
            other => ApiKeyError::Infra(other.into()),
        }
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// A key and its secret, checked and not yet stored: bound to `account` when one is named,
    /// which must exist, and then without app-wide scopes.
    pub(crate) async fn new_api_key(
        &self,
        admin: &User,
        name: &str,
        scopes: &[String],
        account: Option<&str>,
    ) -> Result<CreatedApiKey, ApiKeyError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(ApiKeyError::Invalid(
                "name must be 1 to 100 characters".into(),
            ));
        }
        let mut parsed = scopes
            .iter()
            .map(|s| Scope::parse(s))
            .collect::<Result<Vec<_>, AccountError>>()
            .map_err(|e| ApiKeyError::Invalid(e.to_string()))?;
        parsed.sort();
        parsed.dedup();
        if parsed.is_empty() {
            return Err(ApiKeyError::Invalid(
                "at least one scope is required".into(),
            ));
        }
        let account = match account {
            Some(raw) => Some(self.key_account(raw, &parsed).await?),
            None => None,
        };
        let secret = format!("{API_KEY_PREFIX}{}", self.ids.new_secret());
        let key = ApiKey {
            id: self.ids.new_id("key"),
            owner: admin.id.clone(),
            name: name.to_owned(),
            prefix: secret.chars().take(API_KEY_PREFIX.len() + 6).collect(),
            scopes: parsed,
            account,
            created_at: self.clock.now(),
            revoked_at: None,
        };
        Ok(CreatedApiKey { key, secret })
    }

    /// The account a new key is bound to: one that exists, for a key without app-wide scopes.
    async fn key_account(&self, raw: &str, scopes: &[Scope]) -> Result<AccountId, ApiKeyError> {
        if let Some(wide) = scopes.iter().find(|s| s.is_app_wide()) {
            return Err(ApiKeyError::Invalid(format!(
                "a key bound to an account cannot carry {}, which reaches the whole app",
                wide.code()
            )));
        }
        let unknown = || ApiKeyError::Invalid("accountId names no account".into());
        let id = AccountId::new(raw).map_err(|_| unknown())?;
        match self.store.account(&id).await? {
            Some(_) => Ok(id),
            None => Err(unknown()),
        }
    }

    /// Every key, newest first.
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all)]
    pub async fn list_api_keys(&self) -> Result<Vec<ApiKey>, ApiKeyError> {
        Ok(self.store.list_api_keys().await?)
    }

    /// Every key, newest first, each with the spend limits on it and their usage now (a
    /// revoked key's limits spend nothing more and are not read).
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all)]
    pub async fn api_keys_with_limits(&self) -> Result<Vec<KeyWithLimits>, ApiKeyError> {
        let keys = self.store.list_api_keys().await?;
        let accounts: BTreeSet<&AccountId> = keys
            .iter()
            .filter(|k| k.revoked_at.is_none())
            .filter_map(|k| k.account.as_ref())
            .collect();
        let mut on_keys: Vec<ShownLimit> = Vec::new();
        for account in accounts {
            let shown = self.spend_limits(account).await.map_err(|e| match e {
                LimitsError::Infra(infra) => ApiKeyError::Infra(infra),
                other => ApiKeyError::Infra(InfraError::Unexpected(other.into())),
            })?;
            on_keys.extend(
                shown
                    .into_iter()
                    .filter(|l| l.record.scope.api_key.is_some()),
            );
        }
        Ok(keys
            .into_iter()
            .map(|key| {
                let limits = on_keys
                    .iter()
                    .filter(|l| l.record.scope.api_key.as_deref() == Some(key.id.as_str()))
                    .cloned()
                    .collect();
                KeyWithLimits { key, limits }
            })
            .collect())
    }
}

/// A key with the spend limits on it.
#[derive(Debug, Clone)]
pub struct KeyWithLimits {
    /// The key.
    pub key: ApiKey,
    /// Its limits, oldest first, with their usage now.
    pub limits: Vec<ShownLimit>,
}
