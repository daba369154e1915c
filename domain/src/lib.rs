//! Tally's pure business core.
//!
//! Money, credits, provider capabilities, plans, orders, subscriptions, the credit ledger and the
//! consumption rules. Nothing here performs I/O, is async or knows a wire format: every edge of
//! the system converts its own types into these through their validating constructors.
//!
//! Architecture Invariant: this crate depends on no adapter technology (no tokio, serde, sea-orm,
//! poem or reqwest). `tests/tests/api/dependency_rule.rs` enforces it.
#![deny(missing_docs)]

pub mod account;
pub mod cancellation;
pub mod consumption;
pub mod credits;
pub mod delivery;
pub mod entitlements;
pub mod ids;
pub mod ledger;
pub mod money;
pub mod order;
pub mod order_events;
pub mod outcome;
pub mod plan;
pub mod plan_change;
pub mod pricing;
pub mod promo;
pub mod provider;
pub mod refund;
pub mod return_url;
pub mod scheduled_switch;
pub mod spend_limit;
pub mod subscription;
pub mod subscription_events;
pub mod threshold;
pub mod time;
pub mod top_up;

pub use account::{
    AccountKind, HOST_ORG_TEAM_PREFIX, HostOrgClaim, HostOrgMembership, HostOrgSteps,
    INVITATION_LIFETIME_MS, InvitationFacts, InvitationRefusal, LimitOwner, LimitReached,
    LimitWindow, MemberChange, MemberChangeRefusal, MemberFacts, MemberLimit, MemberRole,
    SEATS_KEY, WindowCount, count_spend, decide_acceptance, decide_member_change, give_back,
    headroom, plan_host_org, seat_cap, seat_free, seats_reduced_below, settle_ceiling,
};
pub use cancellation::{CancelRefusal, CancelStep, CancelWhen, decide_cancel};
pub use consumption::{
    ConsumptionError, ConsumptionMode, ConsumptionRules, FeatureName, ModelName, Multiplier,
    TokenCount, UnknownModelPolicy, Usage,
};
pub use credits::{CreditDelta, Credits, CreditsError, CreditsTotal};
pub use ids::{
    AccountId, ApiKeyId, IdError, IdempotencyKey, OrderId, PlanId, ReservationId, SpendLimitId,
    SubscriptionId, ThresholdId, UserId, WebhookEndpointId,
};
pub use ledger::{
    BalanceAlert, DecidedPosting, GrantCategory, GrantLot, GrantPriority, KeyReuse, LedgerError,
    SpendDecision, SpendDisagreement, SpendOrder, TransactionKind, balance_alerts, decide_spend,
};
pub use money::{Currency, Money, MoneyError};
pub use order::{
    AccessEnd, Order, OrderParts, OrderStatus, OrderStatusKind, OrderTransitionError, PlanSnapshot,
    Transition,
};
pub use order_events::{
    FailureDecision, OrderGrant, OrderRefundDecision, PaymentDecision, Takeback, decide_failure,
    decide_order_refund, decide_payment,
};
pub use outcome::EventOutcome;
pub use plan::{
    AppEnvironment, Duration, Locale, Months, PackBonus, Plan, PlanDraft, PlanError, PlanErrors,
    PlanGroup, PlanInterval, PlanNotAvailable, PlanText, PlanType, ProviderRef, ProviderRefs,
    Standing, Visibility,
};
pub use plan_change::{
    ChangeDirection, PlanChange, PlanChangeRefusal, PlanChangedDecision, PlanChangedFacts,
    SwitchSupport, UpgradeCredits, check_resume, decide_plan_changed, plan_change, switch_support,
};
pub use plan_change::{
    ChangeInvoiceDecision, ChangeInvoiceFacts, NewPeriodLine, changes_interval,
    decide_change_invoice, proration_charge,
};
pub use plan_change::{PeriodGrants, PeriodLot, PeriodLotSource, SwitchKind};
pub use plan_change::{RevisedTo, decide_plan_revised};
pub use promo::{
    PromoCode, PromoCodeError, PromoRefusal, PromoTerms, PromoTermsError, Redemption,
    RedemptionFacts, decide_redemption,
};
pub use provider::{CapabilityError, ProviderId, RefField, RefKind, RefNeed, TestMode};
pub use refund::{
    KeptRefund, RefundForm, RefundMismatch, RefundStep, check_refund, refund_step, refunded_total,
};
pub use return_url::{
    Origin, ReturnField, ReturnOrigins, ReturnUrl, ReturnUrlError, ReturnUrlRefused, ReturnUrls,
};
pub use scheduled_switch::{
    CLAIM_HOLD_MS, ChangeInProgress, ScheduledSwitch, SwitchAtPeriodEnd,
    check_no_change_in_progress, schedule_switch,
};
pub use spend_limit::{
    Bucket, Counted, Enforcement, LimitRefusal, LimitScope, LimitStanding, MAX_LIMITS_PER_ACCOUNT,
    MAX_ROLLING_HOURS, SpendLimit, SpendWindow, SpendWindowError,
};
pub use subscription::{
    BillingPeriod, RenewalIntent, RenewalRefusal, SoldTerms, SoldTermsMismatch, Subscription,
    SubscriptionAccess, SubscriptionError, SubscriptionEvent, SubscriptionParts,
    SubscriptionStatus, SwitchClaim, check_activation,
};
pub use subscription_events::{
    ActivationDecision, ActivationFacts, ActivationTarget, LifecycleDecision, PeriodCharge,
    PriceChange, RenewalDecision, RenewalFacts, decide_activation, decide_lifecycle,
    decide_renewal,
};
pub use threshold::{
    Crossing, MAX_THRESHOLDS_PER_ACCOUNT, ThresholdBases, ThresholdError, ThresholdLevel,
};
pub use time::Timestamp;
pub use top_up::{
    AfterDecline, CeilingFacts, DisabledReason, NoTopUp, TopUpRails, TopUpRule, TopUpState,
    TopUpStatus, decide_charge, decide_decline, decide_request, monthly_ceiling, next_month,
};
