//! Which host events a change tells, decided from the state before and after it.
//!
//! These are the rules of the outbox (CORRECTNESS.md invariant 13): the use cases call them
//! with the entities a write replaces and writes, and hand the events to the store with the
//! write; the store calls the ledger's ones ([`credits_changed`], [`balance_alerts`],
//! [`consumed`], [`reservation_step`]) with the transactions it has just written. The events are
//! typed values: the JSON the host receives is rendered by the
//! [`HostEventEncoder`](crate::ports::HostEventEncoder) the wiring gives the store.

use domain::entitlements::Entitlements;
use domain::{
    AccountId, BalanceAlert, Credits, EventOutcome, MemberRole, Money, Order, OrderStatus,
    PlanType, ProviderId, RenewalIntent, Subscription, SubscriptionAccess, SubscriptionStatus,
    Timestamp, TransactionKind, UserId,
};
use sha2::{Digest, Sha256};

use super::HostEventKind;
use crate::ports::{
    CreditTransaction, InboxEntry, Member, MemberChanged, MemberCommand, MismatchNotice,
    PaymentEventCommand, Reservation,
};

/// One event to tell the host: its type, the fact it tells, whose, what, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEvent {
    /// Its type.
    pub kind: HostEventKind,
    /// What makes this fact unique among facts of its type: its id derives from it, so the
    /// same fact told twice is written once.
    pub fact: String,
    /// Whose change it tells, when it concerns a user.
    pub user: Option<UserId>,
    /// What it carries.
    pub data: HostEventData,
    /// When the change happened (fixed by what caused it, not by when it is written).
    pub occurred_at: Timestamp,
}

/// What an event carries: the entities it tells of, as they are after the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEventData {
    /// An order (`order.paid`, `order.failed`, `order.cancelled`, `order.expired`).
    Order(Order),
    /// A refund of an order: `amount` this time, `refunded_total` in all.
    OrderRefunded {
        /// The order after the refund.
        order: Order,
        /// Refunded by this change.
        amount: Money,
        /// Refunded in all.
        refunded_total: Money,
    },
    /// A subscription and the access it gives.
    Subscription {
        /// The subscription after the change.
        subscription: Subscription,
        /// How long it gives access (the service's past-due grace included).
        access: SubscriptionAccess,
    },
    /// A written credit transaction.
    Transaction(CreditTransaction),
    /// A balance crossing: the balance after the spend that crossed, the threshold crossed
    /// (none for `credits.depleted`), and that spend.
    Balance {
        /// The balance after the spend.
        balance: Credits,
        /// The low-balance threshold crossed.
        threshold: Option<Credits>,
        /// The spend.
        transaction: CreditTransaction,
    },
    /// A balance crossing one of the account's thresholds, either way: the threshold, the
    /// balance after the posting, and the posting.
    Threshold {
        /// The threshold and the level it sat at.
        threshold: ThresholdTold,
        /// The balance after the posting.
        balance: Credits,
        /// The posting that crossed: a spend, a hold, a grant, a release, a clawback...
        transaction: CreditTransaction,
    },
    /// A reservation's step and the ledger transaction it wrote, if any.
    Reservation {
        /// The reservation after the step.
        reservation: Reservation,
        /// What the step wrote (a settle of exactly the held amount writes nothing).
        transaction: Option<CreditTransaction>,
    },
    /// A verified provider event that did not match what was sold.
    Mismatch(MismatchTold),
    /// An account's effective entitlements, before and after.
    Entitlements {
        /// Whose: a user's personal account, or a team's.
        account: AccountId,
        /// What they hold now.
        entitlements: Entitlements,
        /// What they held before.
        previous: Entitlements,
    },
    /// A team's member as they are after the change (as they were, for a removal), their role
    /// before it, and who made it.
    Member {
        /// The member.
        member: Member,
        /// Their role before (`None` for an addition).
        previous_role: Option<MemberRole>,
        /// Who made the change (the member themself when they leave).
        by: UserId,
    },
    /// A spend limit reached or passed, and the spend that took it there.
    LimitReached {
        /// The limit, and where it stands after the spend.
        limit: LimitTold,
        /// The spend: a consumption, a hold, or a settle's overrun.
        transaction: CreditTransaction,
    },
    /// A reached spend limit with room again after its window reset.
    LimitReset {
        /// The limit, and where it stands now.
        limit: LimitTold,
        /// The account it limits.
        account: AccountId,
    },
    /// A user a team had no seat for, or a change of the team's plans that left it fewer seats
    /// than members.
    SeatsExceeded {
        /// The team.
        account: AccountId,
        /// The seats it holds.
        seats: u64,
        /// Its members when the addition was refused, or when the seats went down.
        members: u64,
        /// Who asked for the addition (the user themself when their host token named the team's
        /// organisation); `None` when no addition was asked for: the team's seats went down
        /// below its members (a downgrade, a refund, a plan ending), and nobody was removed.
        by: Option<UserId>,
    },
    /// A promo code's redemption.
    PromoRedeemed {
        /// The code redeemed.
        code: domain::PromoCode,
        /// The redemption.
        redemption: crate::ports::RedemptionRecord,
        /// What its credits are.
        category: domain::GrantCategory,
        /// When they expire.
        expires_at: Option<Timestamp>,
    },
    /// A top-up, as it stands after the change.
    TopUp(crate::ports::TopUpRecord),
    /// An account's automatic top-up turned off by Tally.
    TopUpDisabled {
        /// The account.
        account: AccountId,
        /// Why.
        reason: domain::DisabledReason,
    },
}

impl HostEventData {
    /// The account an event is about, when it names one: the ledger's and members' own, the
    /// account an order or subscription belongs to (the buyer's personal account or a team),
    /// the account whose entitlements changed; for a mismatch none, which is the user's
    /// personal account.
    #[must_use]
    pub fn account(&self) -> Option<&AccountId> {
        match self {
            HostEventData::Order(order) | HostEventData::OrderRefunded { order, .. } => {
                Some(order.account_id())
            }
            HostEventData::Subscription { subscription, .. } => Some(subscription.account_id()),
            HostEventData::Transaction(t)
            | HostEventData::Balance { transaction: t, .. }
            | HostEventData::LimitReached { transaction: t, .. } => Some(&t.account_id),
            HostEventData::Reservation { reservation, .. } => Some(&reservation.account_id),
            HostEventData::Member { member, .. } => Some(&member.account_id),
            HostEventData::SeatsExceeded { account, .. }
            | HostEventData::Entitlements { account, .. }
            | HostEventData::TopUpDisabled { account, .. } => Some(account),
            HostEventData::TopUp(top_up) => Some(&top_up.account_id),
            _ => None,
        }
    }

    /// The member of a team's account who acted, when one did.
    #[must_use]
    pub fn member(&self) -> Option<&UserId> {
        match self {
            HostEventData::Transaction(t)
            | HostEventData::Balance { transaction: t, .. }
            | HostEventData::LimitReached { transaction: t, .. } => t.member_id.as_ref(),
            HostEventData::Reservation { reservation, .. } => reservation.member_id.as_ref(),
            HostEventData::Member { member, .. } => Some(&member.user_id),
            _ => None,
        }
    }
}

/// What `credits.threshold_crossed` and `credits.recovered` tell of the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThresholdTold {
    /// The threshold's id.
    pub id: domain::ThresholdId,
    /// How it was set.
    pub level: domain::ThresholdLevel,
    /// The balance it sat at when crossed.
    pub at: Credits,
}

/// The `credits.threshold_crossed` and `credits.recovered` of a written posting: one per
/// threshold of `thresholds` (with the level each sits at, given what its percentage is of)
/// that the posting crossed ([`domain::threshold::crossing`]).
#[must_use]
pub fn threshold_crossings(
    thresholds: &[(domain::ThresholdId, domain::ThresholdLevel)],
    bases: &crate::ports::LevelBases,
    posting: &CreditTransaction,
) -> Vec<HostEvent> {
    let after = posting.balance_after;
    let before = after.hundredths() - posting.amount.hundredths();
    let Ok(before) = Credits::from_hundredths(before) else {
        return Vec::new();
    };
    thresholds
        .iter()
        .filter_map(|(id, level)| {
            let at = bases.level_of(level)?;
            let kind = match domain::threshold::crossing(before, after, at)? {
                domain::Crossing::Down => HostEventKind::CreditsThresholdCrossed,
                domain::Crossing::Up => HostEventKind::CreditsRecovered,
            };
            Some(HostEvent {
                kind,
                fact: format!("{}:{id}:{}", posting.id, kind.code()),
                user: posting.account_id.acting_user(posting.member_id.as_ref()),
                data: HostEventData::Threshold {
                    threshold: ThresholdTold {
                        id: id.clone(),
                        level: level.clone(),
                        at,
                    },
                    balance: after,
                    transaction: posting.clone(),
                },
                occurred_at: posting.created_at,
            })
        })
        .collect()
}

/// What `limit.reached` tells of the limit: which, and where it stands after the spend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitTold {
    /// The limit's id.
    pub id: domain::SpendLimitId,
    /// What it counts of the account's spends.
    pub scope: domain::LimitScope,
    /// The limit.
    pub limit: domain::SpendLimit,
    /// What its window counts after the spend.
    pub used: Credits,
    /// When headroom next comes back.
    pub resets_at: Timestamp,
    /// When the limit was made.
    pub created_at: Timestamp,
}

/// `limit.reset` of `limit` on `account`, which was reached and has room again at `at` (its
/// window reset at `reset`: the fact told once per reset).
#[must_use]
pub fn limit_reset(
    limit: LimitTold,
    account: &AccountId,
    reset: Timestamp,
    at: Timestamp,
) -> HostEvent {
    HostEvent {
        kind: HostEventKind::LimitReset,
        fact: format!("{}:{}:limit.reset", limit.id, reset.unix_millis()),
        user: account.acting_user(None),
        data: HostEventData::LimitReset {
            limit,
            account: account.clone(),
        },
        occurred_at: at,
    }
}

/// `limit.reached` of a spend that took `limit` to its credits or past them.
#[must_use]
pub fn limit_reached(limit: LimitTold, spend: &CreditTransaction) -> HostEvent {
    HostEvent {
        kind: HostEventKind::LimitReached,
        fact: format!("{}:{}:limit.reached", spend.id, limit.id),
        user: spend.account_id.acting_user(spend.member_id.as_ref()),
        data: HostEventData::LimitReached {
            limit,
            transaction: spend.clone(),
        },
        occurred_at: spend.created_at,
    }
}

/// What `payment.mismatch` tells the operator: the provider event, never its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MismatchTold {
    /// The provider.
    pub provider: ProviderId,
    /// The provider's event id.
    pub event_id: String,
    /// The provider's event type.
    pub event_type: String,
    /// What did not match.
    pub detail: Option<String>,
    /// The order it was about, when known.
    pub order: Option<Order>,
}

impl HostEvent {
    /// The event's id: `evt_`, 12 hex digits of its time in milliseconds and 20 of a SHA-256
    /// of its type and fact.
    ///
    /// The time comes first so that ids grow with time: each new id lands at the right-hand end
    /// of the `event_id` index instead of on a random page of it. The same fact told at the same
    /// moment (a transaction run again, a change applied twice) gets the same id, which the
    /// store's unique index turns into a no-op.
    #[must_use]
    pub fn event_id(&self) -> String {
        use std::fmt::Write as _;
        let code = self.kind.code();
        let digest = Sha256::digest(format!("{code}\n{}", self.fact).as_bytes());
        // 48 bits of milliseconds reach the year 10889; a time before 1970 counts as 0.
        let millis = u64::try_from(self.occurred_at.unix_millis()).unwrap_or(0) & 0xffff_ffff_ffff;
        let mut id = format!("evt_{millis:012x}");
        for b in &digest[..10] {
            let _ = write!(id, "{b:02x}");
        }
        id
    }
}

/// The event an order's change tells, if any: paid, failed, cancelled, expired, or refunded
/// (by how much). `cause` names what changed it uniquely (the provider event, or the order
/// itself for a change that happens once).
#[must_use]
pub fn order_changed(
    before: &Order,
    after: &Order,
    cause: &str,
    at: Timestamp,
) -> Option<HostEvent> {
    let (old, new) = (before.status(), after.status());
    let id = after.id().as_str();
    let event = |kind, fact: String, data| HostEvent {
        kind,
        fact,
        user: Some(after.user_id().clone()),
        data,
        occurred_at: at,
    };
    let kind = match (old, new) {
        (OrderStatus::Paid { .. }, OrderStatus::Paid { .. }) => None,
        (_, OrderStatus::Paid { .. }) => Some(HostEventKind::OrderPaid),
        (OrderStatus::Failed { .. }, OrderStatus::Failed { .. }) => None,
        (_, OrderStatus::Failed { .. }) => Some(HostEventKind::OrderFailed),
        // An unpaid order that stops waiting for its payment (only a pending order can).
        (OrderStatus::Cancelled, OrderStatus::Cancelled) => None,
        (_, OrderStatus::Cancelled) => Some(HostEventKind::OrderCancelled),
        (OrderStatus::Expired, OrderStatus::Expired) => None,
        (_, OrderStatus::Expired) => Some(HostEventKind::OrderExpired),
        _ => None,
    };
    if let Some(kind) = kind {
        return Some(event(
            kind,
            id.to_owned(),
            HostEventData::Order(after.clone()),
        ));
    }
    let (Some(was), Some(now)) = (before.refunded(), after.refunded()) else {
        return None;
    };
    let amount = Money::from_minor(
        now.amount_minor().checked_sub(was.amount_minor())?,
        now.currency(),
    )
    .ok()?;
    if amount.amount_minor() <= 0 {
        return None;
    }
    let data = HostEventData::OrderRefunded {
        order: after.clone(),
        amount,
        refunded_total: now,
    };
    let fact = format!("{id}|{}|{cause}", now.amount_minor());
    Some(event(HostEventKind::OrderRefunded, fact, data))
}

/// The events a subscription's change tells: `before` is `None` for a new subscription.
/// `past_due_grace_ms` is how long a past-due subscription keeps access (what the events' access
/// says).
#[must_use]
pub fn subscription_changed(
    before: Option<&Subscription>,
    after: &Subscription,
    cause: &str,
    at: Timestamp,
    past_due_grace_ms: i64,
) -> Vec<HostEvent> {
    use SubscriptionStatus::{Active, Canceled, Expired, PastDue};
    let ended = |s: &Subscription| matches!(s.status(), Canceled | Expired);
    let ends_at_period_end = |s: &Subscription| s.renewal() == RenewalIntent::EndsAtPeriodEnd;
    let mut kinds = Vec::new();
    match before {
        None if after.is_live() => kinds.push(HostEventKind::SubscriptionActivated),
        None => {}
        Some(old) => {
            if after.status() == Active
                && after.current_period().start() > old.current_period().start()
            {
                kinds.push(HostEventKind::SubscriptionRenewed);
            }
            if after.status() == PastDue && old.status() != PastDue {
                kinds.push(HostEventKind::SubscriptionPastDue);
            }
            if after.is_live() && ends_at_period_end(after) && !ends_at_period_end(old) {
                kinds.push(HostEventKind::SubscriptionCancelScheduled);
            }
            if after.is_live()
                && old.is_live()
                && ends_at_period_end(old)
                && !ends_at_period_end(after)
            {
                kinds.push(HostEventKind::SubscriptionResumed);
            }
            if after.is_live() && after.plan_id() != old.plan_id() {
                kinds.push(HostEventKind::SubscriptionPlanChanged);
            }
            if ended(after) && !ended(old) {
                kinds.push(HostEventKind::SubscriptionEnded);
            }
        }
    }
    kinds
        .into_iter()
        .map(|kind| HostEvent {
            kind,
            fact: format!("{}|{cause}", after.id()),
            user: Some(after.user_id().clone()),
            data: HostEventData::Subscription {
                subscription: after.clone(),
                access: after.access(past_due_grace_ms),
            },
            occurred_at: at,
        })
        .collect()
}

/// The event a written credit transaction tells: granted, clawed back or expired (consumption
/// and reservations tell nothing here).
#[must_use]
pub fn credits_changed(t: &CreditTransaction) -> Option<HostEvent> {
    use TransactionKind as K;
    let kind = match t.kind {
        K::PurchaseGrant | K::SubscriptionGrant => HostEventKind::CreditsGranted,
        K::AdminAdjustment if !t.amount.is_decrease() => HostEventKind::CreditsGranted,
        K::AdminAdjustment | K::RefundClawback => HostEventKind::CreditsClawedBack,
        K::Expiry => HostEventKind::CreditsExpired,
        K::Consumption | K::ReservationHold | K::ReservationSettle | K::ReservationRelease => {
            return None;
        }
    };
    Some(transaction_event(kind, t))
}

/// The events of a member change: `account.member_added`, `account.member_removed` or
/// `account.member_role_changed` (a change of limit alone tells nothing).
#[must_use]
pub fn member_changed(command: &MemberCommand, changed: &MemberChanged) -> Vec<HostEvent> {
    let (kind, member, previous_role) = match (&changed.before, &changed.after) {
        (None, Some(after)) => (HostEventKind::AccountMemberAdded, after, None),
        (Some(before), None) => (
            HostEventKind::AccountMemberRemoved,
            before,
            Some(before.role),
        ),
        (Some(before), Some(after)) if before.role != after.role => (
            HostEventKind::AccountMemberRoleChanged,
            after,
            Some(before.role),
        ),
        _ => return Vec::new(),
    };
    vec![HostEvent {
        kind,
        fact: format!(
            "{}:{}:{}",
            member.account_id,
            member.user_id,
            command.now.unix_millis()
        ),
        user: Some(member.user_id.clone()),
        data: HostEventData::Member {
            member: member.clone(),
            previous_role,
            by: command.actor.clone(),
        },
        occurred_at: command.now,
    }]
}

/// `account.seats_exceeded`: `user` was not added to `account` (by `by`) because its `members`
/// fill its `seats`. The store tells it once while the team's seats and members stay as they are
/// (`accounts.seats_told`, cleared by every change of its members).
#[must_use]
pub fn seats_exceeded(
    (account, user, by): (&AccountId, &UserId, &UserId),
    seats: u64,
    members: u64,
    now: Timestamp,
) -> HostEvent {
    HostEvent {
        kind: HostEventKind::AccountSeatsExceeded,
        fact: format!("{account}:{user}:{seats}:{members}:{}", now.unix_millis()),
        user: Some(user.clone()),
        data: HostEventData::SeatsExceeded {
            account: account.clone(),
            seats,
            members,
            by: Some(by.clone()),
        },
        occurred_at: now,
    }
}

/// `account.seats_exceeded` of a change of `account`'s entitlements, at `now`, that left it
/// `seats` seats for its `members` ([`domain::seats_reduced_below`]): told in the change's own
/// write, once per change of its entitlements.
#[must_use]
pub fn seats_reduced(account: &AccountId, seats: u64, members: u64, now: Timestamp) -> HostEvent {
    HostEvent {
        kind: HostEventKind::AccountSeatsExceeded,
        fact: format!("{account}:reduced:{seats}:{members}:{}", now.unix_millis()),
        user: None,
        data: HostEventData::SeatsExceeded {
            account: account.clone(),
            seats,
            members,
            by: None,
        },
        occurred_at: now,
    }
}

/// `promo_code.redeemed` of `redemption` of `code`, granting credits of `category` that
/// expire at `expires_at`: told once per redemption.
#[must_use]
pub fn promo_redeemed(
    code: &domain::PromoCode,
    redemption: &crate::ports::RedemptionRecord,
    (category, expires_at): (domain::GrantCategory, Option<Timestamp>),
) -> HostEvent {
    HostEvent {
        kind: HostEventKind::PromoCodeRedeemed,
        fact: redemption.id.clone(),
        user: Some(redemption.user_id.clone()),
        data: HostEventData::PromoRedeemed {
            code: code.clone(),
            redemption: redemption.clone(),
            category,
            expires_at,
        },
        occurred_at: redemption.redeemed_at,
    }
}

/// The `auto_top_up.*` event of `top_up` as it stands after a change (`requested`, `succeeded`,
/// `failed` or `authentication_required`, by its status): told once per top-up and status.
#[must_use]
pub fn top_up_moved(top_up: &crate::ports::TopUpRecord) -> Option<HostEvent> {
    use domain::TopUpStatus;
    let kind = match top_up.status {
        TopUpStatus::Requested => HostEventKind::AutoTopUpRequested,
        TopUpStatus::Succeeded => HostEventKind::AutoTopUpSucceeded,
        TopUpStatus::Failed => HostEventKind::AutoTopUpFailed,
        TopUpStatus::AuthenticationRequired => HostEventKind::AutoTopUpAuthenticationRequired,
        TopUpStatus::Charging => return None,
    };
    Some(HostEvent {
        kind,
        fact: top_up.id.clone(),
        user: top_up.account_id.acting_user(None),
        data: HostEventData::TopUp(top_up.clone()),
        occurred_at: top_up.updated_at,
    })
}

/// `auto_top_up.disabled` of `account`'s rule, turned off for `reason` at `now`.
#[must_use]
pub fn top_up_disabled(
    account: &AccountId,
    reason: domain::DisabledReason,
    now: Timestamp,
) -> HostEvent {
    HostEvent {
        kind: HostEventKind::AutoTopUpDisabled,
        fact: format!("{account}:{}:{}", reason.code(), now.unix_millis()),
        user: account.acting_user(None),
        data: HostEventData::TopUpDisabled {
            account: account.clone(),
            reason,
        },
        occurred_at: now,
    }
}

/// `credits.consumed` of a written consumption (an opt-in type: the store writes it only while
/// an endpoint wants it).
#[must_use]
pub fn consumed(t: &CreditTransaction) -> HostEvent {
    transaction_event(HostEventKind::CreditsConsumed, t)
}

fn transaction_event(kind: HostEventKind, t: &CreditTransaction) -> HostEvent {
    HostEvent {
        kind,
        fact: t.id.to_string(),
        user: t.account_id.acting_user(t.member_id.as_ref()),
        data: HostEventData::Transaction(t.clone()),
        occurred_at: t.created_at,
    }
}

/// The events of the balance crossings of a written spend (`domain::balance_alerts`):
/// `credits.low_balance` and `credits.depleted`, each carrying the spend that crossed.
#[must_use]
pub fn balance_alerts(spend: &CreditTransaction, low_below: Option<Credits>) -> Vec<HostEvent> {
    let after = spend.balance_after;
    let Ok(before) = after.checked_add(spend.amount.magnitude()) else {
        return Vec::new();
    };
    domain::balance_alerts(before, after, low_below)
        .into_iter()
        .map(|alert| {
            let (kind, threshold) = match alert {
                BalanceAlert::LowBalance { threshold } => {
                    (HostEventKind::CreditsLowBalance, Some(threshold))
                }
                BalanceAlert::Depleted => (HostEventKind::CreditsDepleted, None),
            };
            HostEvent {
                kind,
                fact: format!("{}:{}", spend.id, kind.code()),
                user: spend.account_id.acting_user(spend.member_id.as_ref()),
                data: HostEventData::Balance {
                    balance: after,
                    threshold,
                    transaction: spend.clone(),
                },
                occurred_at: spend.created_at,
            }
        })
        .collect()
}

/// The event of a reservation's step (`credits.reserved`, `credits.settled`, or
/// `credits.released` for a release or a lapse; opt-in types), with the reservation as it is
/// after the step and the ledger transaction the step wrote.
#[must_use]
pub fn reservation_step(
    kind: HostEventKind,
    reservation: &Reservation,
    transaction: Option<&CreditTransaction>,
    at: Timestamp,
) -> HostEvent {
    HostEvent {
        kind,
        fact: reservation.id.as_str().to_owned(),
        user: reservation
            .account_id
            .acting_user(reservation.member_id.as_ref()),
        data: HostEventData::Reservation {
            reservation: reservation.clone(),
            transaction: transaction.cloned(),
        },
        occurred_at: at,
    }
}

/// The `payment.mismatch` of a provider event recorded with outcome `mismatch`, about `user`
/// (or the order's buyer).
#[must_use]
pub fn mismatch(told: MismatchTold, user: Option<UserId>, at: Timestamp) -> HostEvent {
    let user = user.or_else(|| told.order.as_ref().map(|o| o.user_id().clone()));
    HostEvent {
        kind: HostEventKind::PaymentMismatch,
        fact: format!("{}|{}", told.provider.as_str(), told.event_id),
        user,
        data: HostEventData::Mismatch(told),
        occurred_at: at,
    }
}

/// `entitlements.changed` of `account` going from `previous` to `entitlements` at `at`: about
/// the user whose personal account it is, or about a team (no user; every member holds them
/// while acting in it).
#[must_use]
pub fn entitlements_changed(
    account: &AccountId,
    previous: &Entitlements,
    entitlements: &Entitlements,
    at: Timestamp,
) -> HostEvent {
    let digest = Sha256::digest(format!("{previous:?}\n{entitlements:?}").as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    HostEvent {
        kind: HostEventKind::EntitlementsChanged,
        fact: format!("{account}|{}|{hex}", at.unix_millis()),
        user: account.owner(),
        data: HostEventData::Entitlements {
            account: account.clone(),
            entitlements: entitlements.clone(),
            previous: previous.clone(),
        },
        occurred_at: at,
    }
}

/// Whether `a` and `b` grant the same access on the same plan (so a change from one to the
/// other changes nothing in its user's entitlements, now or later): same plan, status and
/// renewal intent, and the same period end unless access lasts as long as it renews (a
/// renewal).
fn same_access(a: &Subscription, b: &Subscription) -> bool {
    a.plan_id() == b.plan_id()
        && a.status() == b.status()
        && a.renewal() == b.renewal()
        && (a.access(0) == SubscriptionAccess::WhileItRenews
            || a.current_period().end() == b.current_period().end())
}

/// The user whose entitlements `command` may move: the subscription's when its access moved,
/// or a one-time order's when its status moves (credits packs, renewals and unmoved orders
/// change no access). Entitlements are told for users' personal accounts: a purchase that
/// belongs to a team moves no user's own entitlements.
fn entitlements_account(command: &PaymentEventCommand) -> Option<AccountId> {
    if let Some(change) = &command.subscription {
        let moved = change
            .replaced()
            .is_none_or(|before| !same_access(before, change.written()));
        if moved {
            return Some(change.written().account_id().clone());
        }
    }
    let change = command.order.as_ref()?;
    let moved = change.before.status().kind() != change.after.status().kind();
    let after = &change.after;
    (moved && after.plan().plan_type == PlanType::OneTime).then(|| after.account_id().clone())
}

/// Decide what a payment event's write tells, from its states before and after, into
/// `command.told`: the events of its order and subscription changes, and its `payment.mismatch`
/// when its outcome is one and `mismatch_notice` says to tell it. Returns the account (the
/// buyer's personal account or a team) whose effective entitlements the change may move (the
/// caller works them out with the change). The
/// events of its grant and clawbacks are decided as the store writes them
/// ([`credits_changed`]).
pub fn payment_event_told(
    command: &mut PaymentEventCommand,
    past_due_grace_ms: i64,
    mismatch_notice: MismatchNotice,
) -> Option<AccountId> {
    let inbox = &command.inbox;
    let now = inbox.received_at;
    let cause = format!("{}|{}", inbox.provider.as_str(), inbox.event_id);
    let mut told = Vec::new();
    if let Some(change) = &command.order {
        told.extend(order_changed(&change.before, &change.after, &cause, now));
    }
    if let Some(change) = &command.subscription {
        let (before, after) = (change.replaced(), change.written());
        told.extend(subscription_changed(
            before,
            after,
            &cause,
            now,
            past_due_grace_ms,
        ));
    }
    if inbox.outcome == EventOutcome::Mismatch && mismatch_notice == MismatchNotice::Tell {
        let user = command
            .subscription
            .as_ref()
            .map(|s| s.written().user_id().clone())
            .or_else(|| command.grant.as_ref().and_then(|g| g.account_id.owner()))
            .or_else(|| inbox.user_id.clone());
        let order = command.order.as_ref().map(|o| o.after.clone());
        told.push(mismatch(mismatch_of(inbox, order), user, now));
    }
    command.told = told;
    entitlements_account(command)
}

/// What `payment.mismatch` tells of the provider event `entry` (and its order, when known).
#[must_use]
pub fn mismatch_of(entry: &InboxEntry, order: Option<Order>) -> MismatchTold {
    MismatchTold {
        provider: entry.provider,
        event_id: entry.event_id.clone(),
        event_type: entry.event_type.clone(),
        detail: entry.detail.clone(),
        order,
    }
}

/// The events recording `entry` alone (a change of nothing else) tells: its `payment.mismatch`
/// when its outcome is one and `mismatch_notice` says to tell it.
#[must_use]
pub fn recorded_event_told(entry: &InboxEntry, mismatch_notice: MismatchNotice) -> Vec<HostEvent> {
    if entry.outcome != EventOutcome::Mismatch || mismatch_notice != MismatchNotice::Tell {
        return Vec::new();
    }
    let told = mismatch_of(entry, None);
    vec![mismatch(told, entry.user_id.clone(), entry.received_at)]
}
