//! Promo codes: a user redeems one for credits in their personal account; administrators
//! create codes and switch them off (`admin_console::promo_codes`).
//!
//! A redemption is decided from what was read ([`domain::decide_redemption`]) and written as
//! one [`ChangeSet`]: the redemption row under the user's next ordinal, the code's count moved
//! up only while it is below its limit, the grant of the credits (`credits.granted`, with the
//! code's category) and `promo_code.redeemed`. Two concurrent redemptions of one user conflict
//! on the ordinal, and the loser decides again from the new facts; the code's count cannot
//! pass its limit on any number of instances. A request with the same key as an earlier one
//! of the same user and code answers with that redemption and grants nothing.

use domain::{AccountId, PromoCode, PromoRefusal, RedemptionFacts};

use super::InfraError;
use crate::accounts::User;
use crate::host_events;
use crate::ports::{
    ApplyError, ChangeSet, Clock, GrantCommand, GrantSource, IdGenerator, LedgerOp, NewRedemption,
    RedemptionRecord, Refusal, SecretHasher, Store, StoreError, StoredPromoCode,
};
use crate::service::Service;

/// The request key of a redemption made without one: a user's repeated request for the same
/// code then answers with their first redemption.
pub const DEFAULT_REQUEST_KEY: &str = "default";

/// How often a redemption that lost a race is decided again before giving up as busy.
const ATTEMPTS: usize = 4;

/// A redemption, made now or found from an earlier request with the same key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redeemed {
    /// The code.
    pub code: StoredPromoCode,
    /// The redemption.
    pub redemption: RedemptionRecord,
    /// Whether an earlier request made it (nothing was granted now).
    pub replayed: bool,
}

/// Why a redemption was refused.
#[derive(Debug, thiserror::Error)]
pub enum RedeemError {
    /// The code's terms refuse it.
    #[error("promo code refused: {0:?}")]
    Refused(PromoRefusal),
    /// The request key is empty or longer than 128 characters.
    #[error("idempotencyKey must be 1 to 128 characters")]
    BadKey,
    /// The user tried too many codes lately: retry after this many seconds.
    #[error("too many promo code attempts")]
    TooManyAttempts(u64),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for RedeemError {
    fn from(e: StoreError) -> Self {
        RedeemError::Infra(e.into())
    }
}

/// The write of `new`, a redemption of `code` as `decided`: the redemption, the grant of its
/// credits and `promo_code.redeemed`; and the redemption as it will be stored.
fn redemption_set(
    code: &PromoCode,
    new: NewRedemption,
    decided: &domain::Redemption,
) -> (ChangeSet<'static>, RedemptionRecord) {
    let record = RedemptionRecord {
        id: new.id.clone(),
        code_id: new.code_id.clone(),
        user_id: new.user_id.clone(),
        ordinal: new.ordinal,
        credits: new.credits,
        redeemed_at: new.at,
    };
    let grant = GrantCommand {
        account_id: AccountId::personal(&new.user_id),
        amount: decided.credits,
        source: GrantSource::Promo {
            redemption: new.id.clone(),
            code: code.clone(),
            category: decided.category,
        },
        expires_at: decided.expires_at,
        now: new.at,
    };
    let told = host_events::promo_redeemed(code, &record, (decided.category, decided.expires_at));
    let at = new.at;
    let set = ChangeSet {
        promo: Some(new),
        ledger: vec![LedgerOp::Grant(grant)],
        told: vec![told],
        ..ChangeSet::at(at)
    };
    (set, record)
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// `user` redeems `code` into their personal account, once per `request_key` (default
    /// [`DEFAULT_REQUEST_KEY`]).
    ///
    /// # Errors
    /// [`RedeemError::Refused`] (an unknown or malformed code is
    /// [`PromoRefusal::Invalid`]), [`RedeemError::BadKey`], [`RedeemError::TooManyAttempts`]
    /// (every attempt counts, redeemed or not), infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %user.id))]
    pub async fn redeem_promo_code(
        &self,
        user: &User,
        code: &str,
        request_key: Option<String>,
    ) -> Result<Redeemed, RedeemError> {
        let key = request_key.as_deref().unwrap_or(DEFAULT_REQUEST_KEY);
        if key.is_empty() || key.chars().count() > 128 {
            return Err(RedeemError::BadKey);
        }
        self.promo_attempts
            .check(user.id.as_str(), self.clock.now())
            .map_err(RedeemError::TooManyAttempts)?;
        let invalid = || RedeemError::Refused(PromoRefusal::Invalid);
        let code = PromoCode::parse(code).map_err(|_| invalid())?;
        let stored = self.store.promo_code(&code).await?.ok_or_else(invalid)?;
        for round in 0..ATTEMPTS {
            if let Some(earlier) = self
                .store
                .redemption_by_key(&stored.id, &user.id, key)
                .await?
            {
                return Ok(Redeemed {
                    code: stored,
                    redemption: earlier,
                    replayed: true,
                });
            }
            // A round after a lost race reads the code again: its count moved.
            let current = if round == 0 {
                stored.clone()
            } else {
                (self.store.promo_code_by_id(&stored.id).await?).ok_or_else(invalid)?
            };
            match self.try_redeem(user, &current, key).await {
                Ok(Some(redemption)) => {
                    return Ok(Redeemed {
                        code: current,
                        redemption,
                        replayed: false,
                    });
                }
                Ok(None) => {}
                // A concurrent request with the same key may have redeemed it just before
                // (and so used up the code or the user's share): answer with its redemption.
                Err(RedeemError::Refused(refusal)) => {
                    let earlier = (self.store)
                        .redemption_by_key(&stored.id, &user.id, key)
                        .await?;
                    return match earlier {
                        Some(redemption) => Ok(Redeemed {
                            code: current,
                            redemption,
                            replayed: true,
                        }),
                        None => Err(RedeemError::Refused(refusal)),
                    };
                }
                Err(e) => return Err(e),
            }
        }
        Err(
            InfraError::Unavailable(anyhow::anyhow!("promo code redemption kept losing races"))
                .into(),
        )
    }

    /// One attempt: `None` when a concurrent redemption took the ordinal or the key first.
    async fn try_redeem(
        &self,
        user: &User,
        code: &StoredPromoCode,
        key: &str,
    ) -> Result<Option<RedemptionRecord>, RedeemError> {
        let facts = self.store.redeemer_facts(&code.id, &user.id).await?;
        let holds_plan = match &code.terms.plan {
            Some(plan) => self.holds_plan(user, plan).await?,
            None => false,
        };
        let now = self.clock.now();
        let decided = domain::decide_redemption(
            &code.terms,
            &RedemptionFacts {
                now,
                active: code.active,
                redeemed: code.redeemed,
                by_user: facts.by_user,
                has_paid: facts.has_paid,
                holds_plan,
            },
        )
        .map_err(RedeemError::Refused)?;
        let new = NewRedemption {
            id: self.ids.new_id("red"),
            code_id: code.id.clone(),
            user_id: user.id.clone(),
            ordinal: decided.ordinal,
            request_key: key.to_owned(),
            credits: decided.credits,
            at: now,
        };
        let (set, record) = redemption_set(&code.code, new, &decided);
        match self.store.apply(set).await {
            Ok(_) => Ok(Some(record)),
            Err(ApplyError::Refused(Refusal::PromoExhausted)) => {
                Err(RedeemError::Refused(PromoRefusal::Exhausted))
            }
            Err(ApplyError::Store(StoreError::Conflict(_))) => Ok(None),
            Err(e) => Err(e.into_store_error().into()),
        }
    }

    /// Whether `user` holds `plan` now: a live subscription to it, or one-time access to it
    /// that still runs.
    async fn holds_plan(&self, user: &User, plan: &domain::PlanId) -> Result<bool, InfraError> {
        let report = self.report_status(user).await?;
        let now = report.as_of;
        let subscribed = report
            .subscriptions
            .iter()
            .any(|held| held.subscription.plan_id() == plan && held.access.is_open_at(now));
        let owned = report
            .one_time_access
            .iter()
            .any(|access| &access.plan_id == plan && access.ends.is_open_at(now));
        Ok(subscribed || owned)
    }

    /// A new request key for a redemption form: each rendering of the form redeems once.
    #[must_use]
    pub fn new_redemption_key(&self) -> String {
        self.ids.new_id("rk")
    }

    /// The promo codes, newest first (up to 200).
    ///
    /// # Errors
    /// Infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn promo_codes(&self) -> Result<Vec<StoredPromoCode>, InfraError> {
        Ok(self.store.promo_codes(200).await?)
    }
}
