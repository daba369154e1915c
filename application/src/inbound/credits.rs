//! [`CreditsService`]: balances, spending, a user's status and entitlements.

use domain::entitlements::EffectiveEntitlements;
use domain::{AccountId, Credits, ReservationId, SpendLimitId, ThresholdId, UserId};

use crate::accounts::User;
use crate::pagination::{Page, PageRequest};
use crate::ports::{CreditTransaction, Replay, Reservation};
#[cfg(doc)]
use crate::service::Service;
use crate::use_cases::InfraError;
use crate::use_cases::credits::{ConsumeCredits, CreditsError, UsageRequest};
use crate::use_cases::promo_codes::{RedeemError, Redeemed};
use crate::use_cases::report_status::StatusReport;
use crate::use_cases::spend_chart::SpendChart;
use crate::use_cases::spend_limits::{LimitDraft, LimitsError, ShownLimit};
use crate::use_cases::thresholds::{ShownThreshold, ThresholdDraft, ThresholdsError};

inbound_port! {
    /// Balances, spending, a user's status and entitlements.
    #[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
    #[async_trait::async_trait]
    pub trait CreditsService {
        /// An account's balance (see [`Service::balance`]).
        async fn balance(&self, account: &AccountId) -> Result<Credits, InfraError>;

        /// A page of an account's credit transactions, newest first (see
        /// [`Service::transaction_history`]).
        async fn transaction_history(
            &self,
            account: &AccountId,
            page: PageRequest,
        ) -> Result<Page<CreditTransaction>, InfraError>;

        /// Spend credits once per idempotency key (see [`Service::consume_credits`]).
        async fn consume_credits(
            &self,
            request: ConsumeCredits,
        ) -> Result<(CreditTransaction, Replay), CreditsError>;

        /// Hold credits for a later settle or release (see [`Service::reserve_credits`]).
        async fn reserve_credits(
            &self,
            request: ConsumeCredits,
        ) -> Result<(Reservation, Replay), CreditsError>;

        /// Spend a reservation's actual usage and free the rest (see
        /// [`Service::settle_reservation`]).
        async fn settle_reservation(
            &self,
            user_id: &UserId,
            account: Option<AccountId>,
            reservation_id: &ReservationId,
            actual: &UsageRequest,
        ) -> Result<(Reservation, Replay), CreditsError>;

        /// An account's spend limits with their usage (see [`Service::spend_limits`]).
        async fn spend_limits(&self, account: &AccountId) -> Result<Vec<ShownLimit>, LimitsError>;

        /// Add a spend limit to an account (see [`Service::add_spend_limit`]).
        async fn add_spend_limit(
            &self,
            user: &UserId,
            account: &AccountId,
            draft: LimitDraft,
        ) -> Result<ShownLimit, LimitsError>;

        /// Remove a spend limit of an account (see [`Service::remove_spend_limit`]).
        async fn remove_spend_limit(
            &self,
            user: &UserId,
            account: &AccountId,
            id: &SpendLimitId,
        ) -> Result<(), LimitsError>;

        /// What an account spent per day over the last 30 days, by feature and by model (see
        /// [`Service::spend_chart`]).
        async fn spend_chart(&self, account: &AccountId) -> Result<SpendChart, InfraError>;

        /// An account's balance thresholds (see [`Service::balance_thresholds`]).
        async fn balance_thresholds(
            &self,
            account: &AccountId,
        ) -> Result<Vec<ShownThreshold>, ThresholdsError>;

        /// Add a balance threshold to an account (see [`Service::add_balance_threshold`]).
        async fn add_balance_threshold(
            &self,
            user: &UserId,
            account: &AccountId,
            draft: ThresholdDraft,
        ) -> Result<ShownThreshold, ThresholdsError>;

        /// Remove a balance threshold of an account (see
        /// [`Service::remove_balance_threshold`]).
        async fn remove_balance_threshold(
            &self,
            user: &UserId,
            account: &AccountId,
            id: &ThresholdId,
        ) -> Result<(), ThresholdsError>;

        /// Redeem a promo code into the user's personal account (see
        /// [`Service::redeem_promo_code`]).
        async fn redeem_promo_code(
            &self,
            user: &User,
            code: &str,
            request_key: Option<String>,
        ) -> Result<Redeemed, RedeemError>;

        /// A new request key for a promo code form (see [`Service::new_redemption_key`]).
        fn new_redemption_key(&self) -> String;

        /// Free a reservation whole (see [`Service::release_reservation`]).
        async fn release_reservation(
            &self,
            user_id: &UserId,
            account: Option<AccountId>,
            reservation_id: &ReservationId,
        ) -> Result<(Reservation, Replay), CreditsError>;

        /// What `user` holds now (see [`Service::report_status`]).
        async fn report_status(&self, user: &User) -> Result<StatusReport, InfraError>;

        /// What an account holds now (see [`Service::report_account_status`]).
        async fn report_account_status(&self, account: &AccountId)
            -> Result<StatusReport, InfraError>;

        /// The effective entitlements of the purchases in `status` (see
        /// [`Service::entitlements_of`]).
        async fn entitlements_of(
            &self,
            status: &StatusReport,
        ) -> Result<EffectiveEntitlements, InfraError>;
    }
}
