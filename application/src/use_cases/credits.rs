//! Credits: balance, transaction history, consumption (fixed or per token) and the two-phase
//! reserve / settle / release.

use domain::pricing::TokenUsage;
use domain::{
    AccountId, ConsumptionError, Credits, FeatureName, IdempotencyKey, ModelName, ReservationId,
    TokenCount, Usage, UserId,
};

use super::{InfraError, noted};
use crate::pagination::{Page, PageRequest};
use crate::ports::Writes;
use crate::ports::{
    Clock, ConsumeCommand, CreditTransaction, IdGenerator, IdempotencyRecord, Replay, Reservation,
    ReservationError, ReserveCommand, SecretHasher, SpendError, Store, StoreError, UsageContext,
};
use crate::service::Service;

/// What a consumption or reservation is for, as the caller describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRequest {
    /// A fixed-cost feature (`chat`, `image`, …); absent for a per-token chat.
    pub feature: Option<String>,
    /// The AI model.
    pub model: Option<String>,
    /// Tokens used (consume, settle) or estimated (reserve).
    pub tokens: Option<i64>,
    /// Tokens by kind, in the order of [`domain::pricing::TokenKind::ALL`] (input, output,
    /// cache read, cache write, reasoning), for a call to `model`; `tokens`, if given too, must
    /// be their total.
    pub breakdown: Option<[i64; 5]>,
}

/// Spend credits for one use.
#[derive(Debug, Clone)]
pub struct ConsumeCredits {
    /// Who spends.
    pub user_id: UserId,
    /// The account charged: a team's the user belongs to, or (`None`, or the user's own id)
    /// their personal account.
    pub account_id: Option<AccountId>,
    /// What was used.
    pub usage: UsageRequest,
    /// The caller's idempotency key (required): the same key replays the first answer.
    pub idempotency_key: IdempotencyKey,
    /// The API key the spend is made with: recorded with it, and the limits on that key count
    /// it (`None`: not made with a key).
    pub api_key_id: Option<String>,
}

/// Why credits could not be spent, held, settled or released.
#[derive(Debug, thiserror::Error)]
pub enum CreditsError {
    /// No such user.
    #[error("user not found")]
    UserNotFound,
    /// The usage cannot be priced (unknown feature or model, bad token count).
    #[error("{0}")]
    InvalidUsage(String),
    /// The balance does not cover the cost.
    #[error("insufficient credits: requested {requested}, available {available}")]
    Insufficient {
        /// The cost.
        requested: Credits,
        /// The balance.
        available: Credits,
    },
    /// The idempotency key was used with a different request.
    #[error("idempotency key reused with a different request")]
    IdempotencyConflict,
    /// No such reservation of this user.
    #[error("reservation not found")]
    ReservationNotFound,
    /// The user is not a member of the account named.
    #[error("not a member of this account")]
    NotAMember,
    /// A spend limit (the member's or the account's) does not leave room for the spend.
    #[error("a spend limit leaves {} of {} this {}", .0.left, .0.credits, .0.window.code())]
    LimitReached(domain::LimitReached),
    /// The reservation was resolved differently before.
    #[error("reservation is already {0}")]
    AlreadyResolved(&'static str),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for CreditsError {
    fn from(e: StoreError) -> Self {
        CreditsError::Infra(e.into())
    }
}

impl From<SpendError> for CreditsError {
    fn from(e: SpendError) -> Self {
        match e {
            SpendError::Insufficient {
                requested,
                available,
            } => CreditsError::Insufficient {
                requested,
                available,
            },
            SpendError::IdempotencyConflict => CreditsError::IdempotencyConflict,
            SpendError::NotAMember => CreditsError::NotAMember,
            SpendError::LimitReached(reached) => CreditsError::LimitReached(reached),
            SpendError::Store(s) => s.into(),
            // A spend never increases a balance.
            limit @ SpendError::BalanceLimit { .. } => {
                StoreError::Unexpected(anyhow::anyhow!(limit.to_string())).into()
            }
        }
    }
}

impl From<ReservationError> for CreditsError {
    fn from(e: ReservationError) -> Self {
        match e {
            ReservationError::NotFound => CreditsError::ReservationNotFound,
            ReservationError::AlreadyResolved(s) => CreditsError::AlreadyResolved(s),
            ReservationError::Store(s) => s.into(),
        }
    }
}

impl From<ConsumptionError> for CreditsError {
    fn from(e: ConsumptionError) -> Self {
        CreditsError::InvalidUsage(e.to_string())
    }
}

/// Parse a usage description into the domain's [`Usage`] and the context stored with it.
///
/// # Errors
/// Names out of form, a bad token count, or neither a feature nor a model with tokens.
pub fn parse_usage(request: &UsageRequest) -> Result<(Usage, UsageContext), ConsumptionError> {
    let model = request.model.as_deref().map(ModelName::new).transpose()?;
    let breakdown = request.breakdown.map(TokenUsage::new).transpose()?;
    if let Some(by_kind) = breakdown {
        let total = i64::try_from(by_kind.total().get()).unwrap_or(i64::MAX);
        if request.feature.is_some() || model.is_none() {
            return Err(ConsumptionError::InvalidName(
                "tokens by kind are for a call to a model, without a feature".into(),
            ));
        }
        if request.tokens.is_some_and(|t| t != total) {
            return Err(ConsumptionError::InvalidTokens);
        }
    }
    let usage = match (&request.feature, model, request.tokens, breakdown) {
        (Some(feature), model, _, _) => Usage::Feature {
            feature: FeatureName::new(feature.as_str())?,
            model,
        },
        (None, Some(model), _, Some(usage)) => Usage::Tokens { model, usage },
        (None, Some(model), Some(tokens), None) => Usage::Chat {
            model,
            tokens: TokenCount::new(tokens)?,
        },
        (None, _, _, _) => {
            return Err(ConsumptionError::InvalidName(
                "give a feature, or a model with tokens".into(),
            ));
        }
    };
    let context = UsageContext {
        feature: request.feature.clone(),
        model: request.model.clone(),
        tokens: breakdown
            .map(|b| b.total().get())
            .or_else(|| request.tokens.and_then(|t| u64::try_from(t).ok())),
        breakdown,
        ..UsageContext::default()
    };
    Ok((usage, context))
}

/// The account `user` spends from when they name `account`, and the member recorded: their
/// personal account (no member: it is theirs) unless they name another account, whose
/// membership the store checks in the spend's transaction.
#[must_use]
pub fn spender(user: &UserId, account: Option<AccountId>) -> (AccountId, Option<UserId>) {
    match account {
        Some(account) if !account.is_personal_of(user) => (account, Some(user.clone())),
        _ => (AccountId::personal(user), None),
    }
}

fn fingerprint(kind: &str, user: &str, usage: &UsageRequest) -> String {
    format!(
        "{kind}:{user}:{:?}:{:?}:{:?}{}",
        usage.feature,
        usage.model,
        usage.tokens,
        // A request without a breakdown keeps the fingerprint it always had.
        usage
            .breakdown
            .map_or_else(String::new, |b| format!(":{b:?}"))
    )
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// An account's balance.
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn balance(&self, account: &AccountId) -> Result<Credits, InfraError> {
        Ok(self.store.balance(account).await?)
    }

    /// A page of an account's credit transactions, newest first.
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn transaction_history(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<CreditTransaction>, InfraError> {
        Ok(self.store.transactions(account, page).await?)
    }

    async fn existing_user(&self, id: &UserId) -> Result<UserId, CreditsError> {
        self.store
            .find_user(id)
            .await?
            .map(|u| u.id)
            .ok_or(CreditsError::UserNotFound)
    }

    /// Spend credits for one use: its cost by the consumption rules, decremented atomically.
    ///
    /// # Errors
    /// See [`CreditsError`]; insufficient credits write nothing.
    #[tracing::instrument(skip_all, fields(user_id = %request.user_id))]
    pub async fn consume_credits(
        &self,
        request: ConsumeCredits,
    ) -> Result<(CreditTransaction, Replay), CreditsError> {
        // Whether the user exists is asked only when the spend is refused for want of credits:
        // users are never deleted, and one who does not exist has no balance, so the hot path
        // saves a read and an unknown user is still `UserNotFound`.
        let user_id = request.user_id;
        let (usage, context) = parse_usage(&request.usage)?;
        let now = self.clock.now();
        let priced = self.config.consumption.price(&usage, now)?;
        let mut context = context.priced(&priced);
        context.api_key_id = request.api_key_id;
        let amount = priced.cost;
        let (account_id, member_id) = spender(&user_id, request.account_id);
        let command = ConsumeCommand {
            idempotency: IdempotencyRecord {
                key: request.idempotency_key,
                request_hash: fingerprint("consume", user_id.as_str(), &request.usage),
            },
            account_id,
            member_id,
            amount,
            context,
            now,
            low_balance_below: self.low_balance_below,
            spend_order: self.config.consumption.spend_order(),
        };
        let spent = noted(&*self.metrics, self.store.consume(&command).await);
        let spent = self.unless_unknown(&user_id, spent).await?;
        if spent.1 == Replay::Fresh {
            self.metrics.credits_consumed(spent.0.amount.magnitude());
        }
        Ok(spent)
    }

    /// `result`, or `UserNotFound` when it is a refusal for want of credits and the user does not
    /// exist.
    async fn unless_unknown<T>(
        &self,
        user: &UserId,
        result: Result<T, SpendError>,
    ) -> Result<T, CreditsError> {
        match result {
            Err(SpendError::Insufficient { available, .. }) if available.is_zero() => {
                self.existing_user(user).await?;
                Ok(result?)
            }
            // A reservation of an unknown user fails on its row's foreign key before any
            // balance is read: that is `UserNotFound` too, not an internal error.
            Err(SpendError::Store(StoreError::Conflict(_))) => {
                self.existing_user(user).await?;
                Ok(result?)
            }
            other => Ok(other?),
        }
    }

    /// Hold the estimated cost of a use whose real cost is known afterwards.
    ///
    /// # Errors
    /// See [`CreditsError`].
    #[tracing::instrument(skip_all, fields(user_id = %request.user_id))]
    pub async fn reserve_credits(
        &self,
        request: ConsumeCredits,
    ) -> Result<(Reservation, Replay), CreditsError> {
        // As for consume: the user's existence is asked only of a refusal.
        let user_id = request.user_id;
        let (usage, context) = parse_usage(&request.usage)?;
        let now = self.clock.now();
        let priced = self.config.consumption.price(&usage, now)?;
        let mut context = context.priced(&priced);
        context.api_key_id = request.api_key_id;
        let amount = priced.cost;
        let (account_id, member_id) = spender(&user_id, request.account_id);
        let reservation_id = ReservationId::new(self.ids.new_id("res"))
            .map_err(|e| InfraError::Unexpected(e.into()))?;
        let command = ReserveCommand {
            reservation_id,
            idempotency: IdempotencyRecord {
                key: request.idempotency_key,
                request_hash: fingerprint("reserve", user_id.as_str(), &request.usage),
            },
            account_id,
            member_id,
            amount,
            context,
            now,
            expires_at: now.plus_millis(self.config.reservation_lifetime_ms),
            low_balance_below: self.low_balance_below,
        };
        let held = noted(&*self.metrics, self.store.reserve(&command).await);
        let held = self.unless_unknown(&user_id, held).await?;
        if held.1 == Replay::Fresh {
            self.metrics.credits_reserved(held.0.held);
        }
        Ok(held)
    }

    /// Settle a reservation with the actual usage.
    ///
    /// # Errors
    /// See [`CreditsError`].
    #[tracing::instrument(skip_all, fields(user_id = %user_id, reservation_id = %reservation_id))]
    pub async fn settle_reservation(
        &self,
        user_id: &UserId,
        account: Option<AccountId>,
        reservation_id: &ReservationId,
        actual: &UsageRequest,
    ) -> Result<(Reservation, Replay), CreditsError> {
        let user_id = self.existing_user(user_id).await?;
        let (account, member) = spender(&user_id, account);
        let (usage, _) = parse_usage(actual)?;
        let now = self.clock.now();
        let cost = self.config.consumption.price(&usage, now)?.cost;
        let settled = noted(
            &*self.metrics,
            (self.store)
                .settle_in(
                    self.config.consumption.spend_order(),
                    (&account, member.as_ref()),
                    reservation_id,
                    cost,
                    now,
                )
                .await,
        )?;
        if let (Replay::Fresh, crate::ports::ReservationStatus::Settled { charged, .. }) =
            (settled.1, &settled.0.status)
        {
            self.metrics.credits_consumed(*charged);
        }
        Ok(settled)
    }

    /// Release a reservation unused.
    ///
    /// # Errors
    /// See [`CreditsError`].
    #[tracing::instrument(skip_all, fields(user_id = %user_id, reservation_id = %reservation_id))]
    pub async fn release_reservation(
        &self,
        user_id: &UserId,
        account: Option<AccountId>,
        reservation_id: &ReservationId,
    ) -> Result<(Reservation, Replay), CreditsError> {
        let user_id = self.existing_user(user_id).await?;
        let (account, member) = spender(&user_id, account);
        Ok(self
            .store
            .release(
                (&account, member.as_ref()),
                reservation_id,
                self.clock.now(),
            )
            .await?)
    }
}
