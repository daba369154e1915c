//! What an operator needs beyond plans (issue 18, first part): the webhook inbox as the service
//! recorded it — every outcome, mismatches and foreign-merchant events included, which
//! CORRECTNESS.md promises are visible to administrators — and credit adjustments (a grant with
//! an optional expiry, or a debit that never goes below zero), idempotent per key, written to the
//! audit log in its own transaction. `lists` holds the console's cursor-paginated reads,
//! `accounts` the team accounts' and `actions` the audited cancel and refund.

mod accounts;
mod actions;
mod audited;
mod endpoints;
mod limits;
mod lists;
mod promo_codes;
mod replay;

pub use accounts::TeamOverview;
pub use actions::AdminCancelError;
pub use audited::PlanAllowanceError;
pub use lists::{
    AdminListError, CursorPage, CustomerOverview, MAX_QUERY_CHARS, PageAfter, order_status,
};
pub use promo_codes::{PromoAdminError, PromoDraft, parse_promo_draft};
pub use replay::{ReplayError, Replayed};

use domain::credits::MAX_CREDITS_HUNDREDTHS;
use domain::{AccountId, CreditDelta, Credits, CreditsError, IdempotencyKey, Timestamp};
use rust_decimal::Decimal;

use super::{InfraError, noted};
use crate::accounts::User;
use crate::pagination::{Page, PageRequest};
use crate::ports::Writes;
use crate::ports::{
    AdjustCommand, Clock, CreditTransaction, IdGenerator, InboxFilter, LedgerEffect, RecordedEvent,
    SecretHasher, SpendError, Store,
};
use crate::service::Service;

/// An administrator's credit adjustment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdjustCredits {
    /// Who adjusts (kept in the ledger entry's note).
    pub admin: User,
    /// Whose credits: a user's personal account (its id is the user's) or a team's.
    pub account_id: AccountId,
    /// Credits to add (positive) or take (negative), two decimal places at most.
    pub amount: Decimal,
    /// Why, shown in the user's history.
    pub reason: String,
    /// When granted credits expire (a grant only).
    pub expires_at: Option<Timestamp>,
    /// What granted credits are (a grant only; `None`: compensation).
    pub category: Option<domain::GrantCategory>,
    /// Their priority in spend order, 0 to 1000 (a grant only; `None`: 0).
    pub priority: Option<u16>,
    /// Makes the adjustment happen once.
    pub idempotency_key: IdempotencyKey,
}

/// Why an adjustment was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdjustCreditsError {
    /// No such user.
    #[error("user not found")]
    UserNotFound,
    /// No such team account.
    #[error("account not found")]
    AccountNotFound,
    /// The amount, reason or expiry is not acceptable; names the field.
    #[error("{field}: {message}")]
    Invalid {
        /// `amount`, `reason` or `expiresAt`.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A debit larger than the balance.
    #[error("insufficient credits: requested {requested}, available {available}")]
    Insufficient {
        /// The debit.
        requested: Credits,
        /// The balance.
        available: Credits,
    },
    /// The key was used for another adjustment.
    #[error("idempotency key reused with a different adjustment")]
    IdempotencyConflict,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// What an adjustment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdjustedCredits {
    /// The ledger entry, or `None` when the key was used before for the same adjustment.
    pub transaction: Option<CreditTransaction>,
    /// The balance now.
    pub balance: Credits,
}

/// What an adjustment's granted credits are and their priority: a category or a priority on
/// a debit is refused, a priority above [`domain::ledger::MAX_GRANT_PRIORITY`] too.
fn grant_terms(
    request: &AdjustCredits,
    amount: domain::CreditDelta,
) -> Result<(domain::GrantCategory, domain::GrantPriority), AdjustCreditsError> {
    if amount.is_decrease() && request.category.is_some() {
        return Err(invalid("category", "only a grant has a category"));
    }
    if amount.is_decrease() && request.priority.is_some() {
        return Err(invalid("priority", "only a grant has a priority"));
    }
    let priority = match request.priority {
        None => domain::GrantPriority::default(),
        Some(p) => {
            domain::GrantPriority::new(p).ok_or_else(|| invalid("priority", "must be 0 to 1000"))?
        }
    };
    let category = request
        .category
        .unwrap_or(domain::GrantCategory::Compensation);
    Ok((category, priority))
}

fn invalid(field: &'static str, message: impl Into<String>) -> AdjustCreditsError {
    AdjustCreditsError::Invalid {
        field,
        message: message.into(),
    }
}

/// The largest balance the ledger holds, as the limit a refusal names.
fn largest_balance() -> Credits {
    Credits::from_hundredths(MAX_CREDITS_HUNDREDTHS).unwrap_or(Credits::ZERO)
}

/// What a refused adjustment tells the administrator.
fn adjust_error(e: SpendError) -> AdjustCreditsError {
    match e {
        SpendError::Insufficient {
            requested,
            available,
        } => AdjustCreditsError::Insufficient {
            requested,
            available,
        },
        SpendError::IdempotencyConflict => AdjustCreditsError::IdempotencyConflict,
        SpendError::BalanceLimit { balance, .. } => invalid(
            "amount",
            format!(
                "the balance ({balance}) plus the amount would exceed the largest balance of {} \
                 credits",
                largest_balance()
            ),
        ),
        SpendError::Store(s) => AdjustCreditsError::Infra(s.into()),
        // An adjustment names no member and no member's limit applies to it.
        e @ (SpendError::NotAMember | SpendError::LimitReached(_)) => AdjustCreditsError::Infra(
            crate::ports::StoreError::Unexpected(anyhow::anyhow!(e.to_string())).into(),
        ),
    }
}

/// The signed amount, or why it is not one.
fn delta(amount: Decimal) -> Result<CreditDelta, AdjustCreditsError> {
    let magnitude = Credits::from_decimal(amount.abs()).map_err(|e| match e {
        CreditsError::TooLarge => invalid(
            "amount",
            format!("must be at most {} credits", largest_balance()),
        ),
        other => invalid("amount", other.to_string()),
    })?;
    if magnitude.is_zero() {
        return Err(invalid("amount", "must not be zero"));
    }
    let hundredths = if amount.is_sign_negative() {
        -magnitude.hundredths()
    } else {
        magnitude.hundredths()
    };
    CreditDelta::from_hundredths(hundredths).map_err(|e| invalid("amount", e.to_string()))
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// A new idempotency key (`adm_…`) for an administrator's action a form confirms.
    pub fn new_action_key(&self) -> String {
        self.ids.new_id("adm")
    }

    /// Recorded provider events matching `filter`, newest first, one numbered page.
    ///
    /// # Errors
    /// Infrastructure.
    #[tracing::instrument(skip_all, fields(provider = ?filter.provider, outcome = ?filter.outcome))]
    pub async fn list_webhook_events(
        &self,
        filter: &InboxFilter,
        page: PageRequest,
    ) -> Result<Page<RecordedEvent>, InfraError> {
        Ok(self.store.list_events(filter, page).await?)
    }

    /// Grant or take a user's credits by hand, once per idempotency key, with the reason
    /// recorded on the ledger entry.
    ///
    /// # Errors
    /// See [`AdjustCreditsError`].
    #[tracing::instrument(
        skip_all,
        fields(
            admin_id = %request.admin.id,
            account_id = %request.account_id,
        )
    )]
    pub async fn adjust_credits(
        &self,
        request: &AdjustCredits,
    ) -> Result<AdjustedCredits, AdjustCreditsError> {
        let account = &request.account_id;
        match account.owner() {
            Some(user) => {
                if self
                    .store
                    .find_user(&user)
                    .await
                    .map_err(InfraError::from)?
                    .is_none()
                {
                    return Err(AdjustCreditsError::UserNotFound);
                }
            }
            None => {
                if self
                    .store
                    .account(account)
                    .await
                    .map_err(InfraError::from)?
                    .is_none()
                {
                    return Err(AdjustCreditsError::AccountNotFound);
                }
            }
        }
        let amount = delta(request.amount)?;
        let reason = request.reason.trim();
        if reason.is_empty() || reason.chars().count() > 200 {
            return Err(invalid("reason", "between 1 and 200 characters"));
        }
        let now = self.clock.now();
        match request.expires_at {
            Some(_) if amount.is_decrease() => {
                return Err(invalid("expiresAt", "only a grant expires"));
            }
            Some(at) if at <= now => return Err(invalid("expiresAt", "must be in the future")),
            _ => {}
        }
        let grant = grant_terms(request, amount)?;
        let command = AdjustCommand {
            account_id: account.clone(),
            amount,
            note: format!("{reason} ({})", request.admin.id),
            reference: request.idempotency_key.as_str().to_owned(),
            expires_at: request.expires_at,
            grant,
            spend_order: self.config.consumption.spend_order(),
            now,
        };
        let adjusted = self.store.adjust(&command, &request.admin.id).await;
        let effect = noted(&*self.metrics, adjusted).map_err(adjust_error)?;
        let transaction = match effect {
            LedgerEffect::Written(tx) => Some(tx),
            LedgerEffect::Nothing => None,
        };
        let balance = self
            .store
            .balance(account)
            .await
            .map_err(InfraError::from)?;
        Ok(AdjustedCredits {
            transaction,
            balance,
        })
    }
}
