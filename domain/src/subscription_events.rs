//! What a verified provider event does to a subscription, decided from the order and the
//! subscription as stored and the event alone (issue 14): an activation, a renewal, a lifecycle
//! change. Each function returns a typed decision — the subscription's next state, the order's,
//! the paid period's charge with its credits and the clawback of refunds that arrived before it,
//! or a typed reason why nothing changes — and the webhook use case only loads what a decision
//! needs and turns it into one store command. [`crate::order_events`] does the same for orders.

use crate::credits::Credits;
use crate::ids::{PlanId, SubscriptionId};
use crate::money::Money;
use crate::order::{Order, OrderStatus, Transition};
use crate::outcome::EventOutcome;
use crate::refund::{KeptRefund, refund_step};
use crate::subscription::{
    BillingPeriod, RenewalRefusal, SoldTerms, SoldTermsMismatch, Subscription, SubscriptionEvent,
    SubscriptionStatus, check_activation,
};
use crate::time::Timestamp;

/// A paid period as its charge is recorded: what it paid, the credits it grants, and what the
/// refunds reported before it arrived take back at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodCharge {
    /// The period paid.
    pub period: BillingPeriod,
    /// What the provider charged for it.
    pub amount: Money,
    /// Credits the period grants (the sold terms', never a plan's as edited since).
    pub credits: Option<Credits>,
    /// Credits to take back at once for refunds of this charge kept before it arrived.
    pub clawback: Option<Credits>,
    /// The refunded total of the charge after those refunds.
    pub refunded: Money,
    /// When the provider charged it.
    pub paid_at: Timestamp,
}

impl PeriodCharge {
    /// A period paying `amount` under `terms`, with the refund reports `kept` against its
    /// charge before it arrived.
    #[must_use]
    pub fn paid(
        period: BillingPeriod,
        amount: Money,
        paid_at: Timestamp,
        terms: SoldTerms,
        kept: &[KeptRefund],
    ) -> Self {
        let credits = terms.credits_per_period();
        let zero = Money::zero(amount.currency());
        let step = refund_step(amount, credits, zero, kept);
        let refunded = step.map_or(zero, |s| s.after);
        assert!(
            refunded.amount_minor() <= amount.amount_minor().max(0),
            "a charge's refunds never exceed it"
        );
        Self {
            period,
            amount,
            credits,
            clawback: step.map(|s| s.clawback),
            refunded,
            paid_at,
        }
    }

    /// A period already granted whose charge is only being named: nothing granted or taken.
    #[must_use]
    fn named(period: BillingPeriod, amount: Money, paid_at: Timestamp, terms: SoldTerms) -> Self {
        Self {
            period,
            amount,
            credits: terms.credits_per_period(),
            clawback: None,
            refunded: Money::zero(amount.currency()),
            paid_at,
        }
    }
}

/// What an activation event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivationFacts<'a> {
    /// The provider's id of the subscription.
    pub provider_subscription_id: &'a str,
    /// The first period.
    pub period: BillingPeriod,
    /// What the first period paid, when the provider says.
    pub amount: Option<Money>,
    /// Whether the event names the provider's charge of the first period.
    pub names_charge: bool,
    /// When it happened at the provider.
    pub occurred_at: Timestamp,
}

/// The subscription an activation works on, as stored.
#[derive(Debug, Clone)]
pub enum ActivationTarget<'a> {
    /// The provider subscription is stored already (the same payment told twice, or the
    /// provider's second event for it).
    Existing(&'a Subscription),
    /// Not seen before: it would start under `new_id`; `started_by_order` is the subscription
    /// the order already started, if any.
    New {
        /// The id a new subscription takes.
        new_id: SubscriptionId,
        /// The subscription this order started before, if any.
        started_by_order: Option<&'a Subscription>,
    },
}

/// What a verified activation comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActivationDecision {
    /// It does not match the order (not a recurring order, another amount or currency):
    /// recorded on the order, nothing else.
    Mismatch(SoldTermsMismatch),
    /// The order no longer waits for payment (failed, expired, cancelled, refunded): recorded
    /// on the order as a late payment.
    Late(String),
    /// The order already started another subscription: recorded, nothing else.
    OrderTaken(String),
    /// Already active for this period: nothing is granted again. `charge` names the first
    /// period's charge when this event carries the charge id and the first did not (PayPal:
    /// `BILLING.SUBSCRIPTION.ACTIVATED`, then the first sale), so that refunds of it are found.
    AlreadyActive {
        /// The first period's charge to record under its id.
        charge: Option<PeriodCharge>,
    },
    /// Older than what the subscription has applied, or not allowed from where it is.
    Stale(String),
    /// Activate: the subscription (new or moved along), the order's next state when it moves,
    /// and the first period's charge.
    Activate {
        /// The subscription after the event.
        subscription: Subscription,
        /// Whether it is new (created) or stored already (updated).
        created: bool,
        /// The order after the payment, when its status moves.
        order: Option<Order>,
        /// The first period's charge.
        charge: PeriodCharge,
    },
}

impl ActivationDecision {
    /// The inbox outcome this decision records.
    #[must_use]
    pub const fn outcome(&self) -> EventOutcome {
        match self {
            Self::Mismatch(_) | Self::OrderTaken(_) => EventOutcome::Mismatch,
            Self::Late(_) => EventOutcome::LatePayment,
            Self::AlreadyActive { .. } => EventOutcome::DuplicateState,
            Self::Stale(_) => EventOutcome::Stale,
            Self::Activate { .. } => EventOutcome::Applied,
        }
    }
}

/// An activation of `order`'s subscription: it must match a pending (or already paid) recurring
/// order of the provider at its price; the subscription keeps what was sold; `kept` are the
/// refund reports against the first period's charge that arrived before it.
#[must_use]
pub fn decide_activation(
    order: &Order,
    target: ActivationTarget<'_>,
    facts: &ActivationFacts<'_>,
    kept: &[KeptRefund],
) -> ActivationDecision {
    let terms = match check_activation(order.plan(), facts.amount) {
        Ok(terms) => terms,
        Err(mismatch) => return ActivationDecision::Mismatch(mismatch),
    };
    let (subscription, created) = match target {
        ActivationTarget::Existing(current) => match activate_existing(current, facts) {
            Ok(next) => (next, false),
            Err(decision) => return *decision,
        },
        ActivationTarget::New {
            new_id,
            started_by_order,
        } => {
            if let Some(refusal) = refuse_new(order, started_by_order) {
                return refusal;
            }
            let started = Subscription::start(
                new_id,
                order.user_id().clone(),
                order.plan().plan_id.clone(),
                order.provider(),
                facts.provider_subscription_id.to_owned(),
                facts.period,
                terms,
                facts.occurred_at,
            )
            .belonging_to(order.account_id().clone());
            (started, true)
        }
    };
    let mut paid = order.clone();
    let order = (paid.mark_paid(facts.occurred_at) == Ok(Transition::Applied)).then_some(paid);
    // Credits come from what the subscription was sold at (one stored before terms were kept
    // takes them from this order, which has just been checked).
    let sold = subscription.sold_terms().unwrap_or(terms);
    let amount = facts.amount.unwrap_or(sold.price());
    ActivationDecision::Activate {
        charge: PeriodCharge::paid(facts.period, amount, facts.occurred_at, sold, kept),
        subscription,
        created,
        order,
    }
}

/// A stored subscription moved along by its activation, or why it is not.
fn activate_existing(
    current: &Subscription,
    facts: &ActivationFacts<'_>,
) -> Result<Subscription, Box<ActivationDecision>> {
    let mut next = current.clone();
    match next.apply(
        SubscriptionEvent::Activated(facts.period),
        facts.occurred_at,
    ) {
        Ok(Transition::Applied) => Ok(next),
        // Already active for this period: granting again could only duplicate.
        Ok(Transition::AlreadyDone) => {
            let charge = match current.sold_terms() {
                Some(terms) if facts.names_charge => Some(PeriodCharge::named(
                    facts.period,
                    facts.amount.unwrap_or(terms.price()),
                    facts.occurred_at,
                    terms,
                )),
                _ => None,
            };
            Err(Box::new(ActivationDecision::AlreadyActive { charge }))
        }
        Err(e) => Err(Box::new(ActivationDecision::Stale(e.to_string()))),
    }
}

/// Why a provider subscription not seen before may not start from `order`: the order no longer
/// waits for payment, or it already started another subscription (a paid order stays allowed,
/// since the reconciler may mark an order paid before its activation arrives).
fn refuse_new(
    order: &Order,
    started_by_order: Option<&Subscription>,
) -> Option<ActivationDecision> {
    if !matches!(
        order.status(),
        OrderStatus::Pending | OrderStatus::Paid { .. }
    ) {
        return Some(ActivationDecision::Late(format!(
            "subscription activation for a {} order",
            order.status()
        )));
    }
    started_by_order.map(|started| {
        ActivationDecision::OrderTaken(format!(
            "order already started subscription {}",
            started
                .provider_subscription_id()
                .chars()
                .take(128)
                .collect::<String>()
        ))
    })
}

/// What a renewal event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenewalFacts {
    /// The period paid.
    pub period: BillingPeriod,
    /// What the provider charged.
    pub amount: Money,
    /// When it happened at the provider.
    pub occurred_at: Timestamp,
}

/// What the webhook use case knows of another recurring plan of ours at a renewal's price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriceChange {
    /// Not looked up yet: a decision that needs it says [`RenewalDecision::LookUpPlanPricedAt`].
    NotLookedUp,
    /// No plan of ours (or more than one) sells at that price at this provider.
    NoPlan,
    /// The one recurring plan of ours at this provider selling at that price, and its terms.
    To(PlanId, SoldTerms),
}

/// What a verified renewal comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenewalDecision {
    /// It pays another amount than sold (and no plan of ours sells at it), it is for the period
    /// already paid, or it overlaps a period already granted.
    Refused(RenewalRefusal),
    /// It does not pay what was sold: decide again once the use case has looked for a plan of
    /// ours at this price (a provider-side price change).
    LookUpPlanPricedAt(Money),
    /// The subscription predates sold terms and none could be recovered.
    NoTerms,
    /// The subscription has applied this renewal already.
    AlreadyDone,
    /// Older than what the subscription has applied, or not allowed from where it is.
    Stale(String),
    /// Renew: the subscription after the event, the price change it records (if the provider
    /// moved it to another plan of ours), and the period's charge.
    Renew {
        /// The subscription after the event.
        subscription: Subscription,
        /// The price change, to record in the inbox.
        moved: Option<String>,
        /// The period's charge.
        charge: PeriodCharge,
    },
}

impl RenewalDecision {
    /// The inbox outcome this decision records (`None` while a plan must be looked up).
    #[must_use]
    pub const fn outcome(&self) -> Option<EventOutcome> {
        Some(match self {
            Self::Refused(RenewalRefusal::Mismatch(_)) | Self::NoTerms => EventOutcome::Mismatch,
            Self::Refused(RenewalRefusal::AlreadyPaid) | Self::AlreadyDone => {
                EventOutcome::DuplicateState
            }
            Self::Refused(RenewalRefusal::Overlaps { .. }) | Self::Stale(_) => EventOutcome::Stale,
            Self::Renew { .. } => EventOutcome::Applied,
            Self::LookUpPlanPricedAt(_) => return None,
        })
    }
}

/// A renewal of `current`: it must pay what was sold (or move to the one plan of ours the
/// provider now bills, `price_change`) for the period after the one already paid, within
/// `tolerance_ms` of provider clock drift; its credits are the sold terms'. `kept` are the refund
/// reports against its charge that arrived before it.
#[must_use]
pub fn decide_renewal(
    current: &Subscription,
    facts: &RenewalFacts,
    tolerance_ms: i64,
    price_change: &PriceChange,
    kept: &[KeptRefund],
) -> RenewalDecision {
    let mut next = current.clone();
    let mut moved = None;
    match current.check_renewal(facts.amount, facts.period, tolerance_ms) {
        Ok(()) => {}
        Err(RenewalRefusal::Mismatch(mismatch)) if current.sold_terms().is_some() => {
            let (plan, terms) = match price_change {
                PriceChange::NotLookedUp => {
                    return RenewalDecision::LookUpPlanPricedAt(facts.amount);
                }
                PriceChange::NoPlan => {
                    return RenewalDecision::Refused(RenewalRefusal::Mismatch(mismatch));
                }
                PriceChange::To(plan, terms) => (plan, *terms),
            };
            next.move_to_terms(plan.clone(), terms);
            if let Err(refusal) = next.check_renewal(facts.amount, facts.period, tolerance_ms) {
                return RenewalDecision::Refused(refusal);
            }
            moved = Some(format!(
                "price changed at the provider: plan {} ({mismatch}) → {} at {}",
                current.plan_id(),
                next.plan_id(),
                facts.amount
            ));
        }
        Err(refusal) => return RenewalDecision::Refused(refusal),
    }
    let Some(terms) = next.sold_terms() else {
        return RenewalDecision::NoTerms;
    };
    match next.apply(SubscriptionEvent::Renewed(facts.period), facts.occurred_at) {
        Ok(Transition::Applied) => {}
        Ok(Transition::AlreadyDone) => return RenewalDecision::AlreadyDone,
        Err(e) => return RenewalDecision::Stale(e.to_string()),
    }
    assert!(
        next.current_period() == facts.period && next.status() == SubscriptionStatus::Active,
        "a renewal pays exactly its period and leaves the subscription active"
    );
    RenewalDecision::Renew {
        charge: PeriodCharge::paid(facts.period, facts.amount, facts.occurred_at, terms, kept),
        subscription: next,
        moved,
    }
}

/// What a lifecycle event without a payment (past due, cancellation scheduled or withdrawn,
/// cancelled, expired) comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleDecision {
    /// The subscription after the event.
    Update(Subscription),
    /// It is there already.
    AlreadyDone,
    /// Older than what the subscription has applied, or not allowed from where it is.
    Stale(String),
}

impl LifecycleDecision {
    /// The inbox outcome this decision records.
    #[must_use]
    pub const fn outcome(&self) -> EventOutcome {
        match self {
            Self::Update(_) => EventOutcome::Applied,
            Self::AlreadyDone => EventOutcome::DuplicateState,
            Self::Stale(_) => EventOutcome::Stale,
        }
    }
}

/// A lifecycle `event` of `current` that happened at `at`.
#[must_use]
pub fn decide_lifecycle(
    current: &Subscription,
    event: SubscriptionEvent,
    at: Timestamp,
) -> LifecycleDecision {
    let mut next = current.clone();
    match next.apply(event, at) {
        Ok(Transition::Applied) => LifecycleDecision::Update(next),
        Ok(Transition::AlreadyDone) => LifecycleDecision::AlreadyDone,
        Err(e) => LifecycleDecision::Stale(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{OrderId, UserId};
    use crate::money::Currency;
    use crate::order::PlanSnapshot;
    use crate::plan::{Duration, Months, PlanType};
    use crate::provider::ProviderId;
    use crate::refund::RefundForm;

    const DAY: i64 = 86_400_000;

    fn month() -> Months {
        let Some(Duration::Months(m)) = Duration::from_months_value(1) else {
            panic!("one month")
        };
        m
    }

    fn usd(minor: i64) -> Money {
        Money::from_minor(minor, Currency::Usd).unwrap()
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(ms)
    }

    fn period(start_day: i64) -> BillingPeriod {
        BillingPeriod::new(at(start_day * DAY), at((start_day + 30) * DAY)).unwrap()
    }

    fn order(plan_type: PlanType) -> Order {
        let plan = PlanSnapshot {
            bonus: None,
            plan_id: PlanId::new("pro_monthly").unwrap(),
            plan_type,
            price: usd(999),
            credits: Some(Credits::from_whole(1000).unwrap()),
            duration: Duration::from_months_value(1),
            entitlements: None,
        };
        Order::place(
            OrderId::new("ord_1").unwrap(),
            UserId::new("usr_1").unwrap(),
            ProviderId::CardGateway,
            plan,
            at(0),
            DAY,
        )
    }

    fn facts(amount: Option<Money>) -> ActivationFacts<'static> {
        ActivationFacts {
            provider_subscription_id: "sub_p",
            period: period(1),
            amount,
            names_charge: false,
            occurred_at: at(DAY),
        }
    }

    fn new_target() -> ActivationTarget<'static> {
        ActivationTarget::New {
            new_id: SubscriptionId::new("sub_1").unwrap(),
            started_by_order: None,
        }
    }

    fn activated() -> Subscription {
        let ActivationDecision::Activate { subscription, .. } = decide_activation(
            &order(PlanType::Recurring),
            new_target(),
            &facts(Some(usd(999))),
            &[],
        ) else {
            panic!("activates")
        };
        subscription
    }

    fn renewal(start_day: i64, amount: Money) -> RenewalFacts {
        RenewalFacts {
            period: period(start_day),
            amount,
            occurred_at: at(start_day * DAY),
        }
    }

    #[test]
    fn an_activation_naming_a_credits_order_or_paying_another_amount_is_a_mismatch() {
        for (plan_type, amount) in [
            (PlanType::Credits, Some(usd(999))),
            (PlanType::OneTime, None),
            (PlanType::Recurring, Some(usd(1))),
            (
                PlanType::Recurring,
                Some(Money::from_minor(999, Currency::Eur).unwrap()),
            ),
        ] {
            let decision = decide_activation(&order(plan_type), new_target(), &facts(amount), &[]);
            assert!(
                matches!(decision, ActivationDecision::Mismatch(_)),
                "{plan_type:?} {amount:?}: {decision:?}"
            );
            assert_eq!(decision.outcome(), EventOutcome::Mismatch);
        }
    }

    #[test]
    fn a_subscription_belongs_to_the_account_its_order_bought_for() {
        assert!(
            activated()
                .account_id()
                .is_personal_of(&UserId::new("usr_1").unwrap())
        );
        let team = crate::AccountId::new("team_1").unwrap();
        let bought = order(PlanType::Recurring).for_account(team.clone());
        let ActivationDecision::Activate { subscription, .. } =
            decide_activation(&bought, new_target(), &facts(Some(usd(999))), &[])
        else {
            panic!("activates")
        };
        assert_eq!(subscription.account_id(), &team);
        assert_eq!(subscription.user_id().as_str(), "usr_1");
    }

    #[test]
    fn a_matching_activation_starts_the_subscription_pays_the_order_and_grants_the_period() {
        let decision = decide_activation(
            &order(PlanType::Recurring),
            new_target(),
            &facts(Some(usd(999))),
            &[],
        );
        let ActivationDecision::Activate {
            subscription,
            created,
            order,
            charge,
        } = decision
        else {
            panic!("activates: {decision:?}")
        };
        assert!(created);
        assert_eq!(subscription.sold_terms().unwrap().price(), usd(999));
        assert!(matches!(order.unwrap().status(), OrderStatus::Paid { .. }));
        assert_eq!(charge.credits, Some(Credits::from_whole(1000).unwrap()));
        assert_eq!(charge.clawback, None);
        assert_eq!(charge.refunded, usd(0));
    }

    #[test]
    fn a_refund_kept_before_the_activation_takes_its_share_back_with_it() {
        let kept = [KeptRefund {
            form: RefundForm::Total,
            amount: usd(999),
        }];
        let decision = decide_activation(
            &order(PlanType::Recurring),
            new_target(),
            &facts(Some(usd(999))),
            &kept,
        );
        let ActivationDecision::Activate { charge, .. } = decision else {
            panic!("activates: {decision:?}")
        };
        assert_eq!(charge.clawback, Some(Credits::from_whole(1000).unwrap()));
        assert_eq!(charge.refunded, usd(999));
    }

    #[test]
    fn a_second_activation_of_the_same_period_grants_nothing_and_may_name_the_charge() {
        let current = activated();
        let decision = decide_activation(
            &order(PlanType::Recurring),
            ActivationTarget::Existing(&current),
            &facts(Some(usd(999))),
            &[],
        );
        assert_eq!(decision, ActivationDecision::AlreadyActive { charge: None });
        let naming = ActivationFacts {
            names_charge: true,
            ..facts(None)
        };
        let decision = decide_activation(
            &order(PlanType::Recurring),
            ActivationTarget::Existing(&current),
            &naming,
            &[],
        );
        let ActivationDecision::AlreadyActive {
            charge: Some(charge),
        } = decision
        else {
            panic!("names the charge: {decision:?}")
        };
        assert_eq!((charge.amount, charge.clawback), (usd(999), None));
    }

    #[test]
    fn a_new_subscription_is_refused_for_a_dead_order_or_one_that_started_another() {
        let mut failed = order(PlanType::Recurring);
        failed.mark_failed(String::from("declined")).unwrap();
        let decision = decide_activation(&failed, new_target(), &facts(Some(usd(999))), &[]);
        assert_eq!(decision.outcome(), EventOutcome::LatePayment);
        let other = activated();
        let target = ActivationTarget::New {
            new_id: SubscriptionId::new("sub_2").unwrap(),
            started_by_order: Some(&other),
        };
        let decision = decide_activation(
            &order(PlanType::Recurring),
            target,
            &facts(Some(usd(999))),
            &[],
        );
        assert!(matches!(decision, ActivationDecision::OrderTaken(_)));
        assert_eq!(decision.outcome(), EventOutcome::Mismatch);
    }

    #[test]
    fn a_renewal_must_pay_what_was_sold_for_the_next_period() {
        let current = activated();
        let cases = [
            (renewal(31, usd(1)), EventOutcome::Mismatch),
            (
                renewal(31, Money::from_minor(999, Currency::Eur).unwrap()),
                EventOutcome::Mismatch,
            ),
            (renewal(1, usd(999)), EventOutcome::DuplicateState),
            (renewal(-90, usd(999)), EventOutcome::Stale),
            (renewal(15, usd(999)), EventOutcome::Stale),
        ];
        for (facts, outcome) in cases {
            let decision = decide_renewal(&current, &facts, 3_600_000, &PriceChange::NoPlan, &[]);
            assert_eq!(decision.outcome(), Some(outcome), "{facts:?}: {decision:?}");
        }
        let decision = decide_renewal(
            &current,
            &renewal(31, usd(999)),
            3_600_000,
            &PriceChange::NotLookedUp,
            &[],
        );
        let RenewalDecision::Renew {
            subscription,
            moved,
            charge,
        } = decision
        else {
            panic!("renews: {decision:?}")
        };
        assert_eq!(subscription.current_period(), period(31));
        assert_eq!(moved, None);
        assert_eq!(charge.credits, Some(Credits::from_whole(1000).unwrap()));
    }

    #[test]
    fn a_renewal_at_another_price_asks_for_the_plan_and_moves_to_it_when_there_is_one() {
        let current = activated();
        let facts = renewal(31, usd(1999));
        let first = decide_renewal(&current, &facts, 0, &PriceChange::NotLookedUp, &[]);
        assert_eq!(first, RenewalDecision::LookUpPlanPricedAt(usd(1999)));
        assert_eq!(first.outcome(), None);
        let terms = SoldTerms::new(usd(1999), month(), Some(Credits::from_whole(3000).unwrap()));
        let change = PriceChange::To(PlanId::new("max_monthly").unwrap(), terms);
        let RenewalDecision::Renew {
            subscription,
            moved,
            charge,
        } = decide_renewal(&current, &facts, 0, &change, &[])
        else {
            panic!("renews on the new plan")
        };
        assert_eq!(subscription.plan_id().as_str(), "max_monthly");
        assert!(moved.is_some());
        assert_eq!(charge.credits, Some(Credits::from_whole(3000).unwrap()));
    }

    #[test]
    fn lifecycle_events_move_forward_once_and_never_back() {
        let current = activated();
        let decision = decide_lifecycle(&current, SubscriptionEvent::PastDue, at(2 * DAY));
        let LifecycleDecision::Update(past_due) = decision else {
            panic!("moves: {decision:?}")
        };
        assert_eq!(
            decide_lifecycle(&past_due, SubscriptionEvent::PastDue, at(2 * DAY)).outcome(),
            EventOutcome::DuplicateState
        );
        assert_eq!(
            decide_lifecycle(&past_due, SubscriptionEvent::Canceled, at(0)).outcome(),
            EventOutcome::Stale
        );
    }
}
