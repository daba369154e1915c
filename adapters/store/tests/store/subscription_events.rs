//! Issue 14's property: random event sequences for one subscription through the real webhook
//! use case on this store (SQLite and PostgreSQL). Activation, renewals (some tampered: a cheap
//! price, another currency, a period before the subscription began), refunds (running totals
//! and individual refunds, some out of range or in another currency), lost disputes, and
//! redeliveries under the same or a new event id, in any order after the activation. Afterwards:
//!
//! - the periods granted are exactly those a sequential reading of the events pays for (a valid
//!   renewal for a period after the last one granted); tampered payments grant nothing;
//! - each granted period granted the sold 50 credits once, and its clawback is the refunded share
//!   of what its valid refund reports add up to, whatever the order they came in;
//! - the subscription's period is the last one granted (nothing older moved it back);
//! - the balance is the sum of the ledger.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};

use application::ports::{
    Gateways, OrderLocator, PaymentEvent, PaymentGateway, RefundReport, RefundedCharge,
    SubscriptionRepository, VerifiedWebhook, WebhookRequest,
};
use application::service::Service;
use application::testing::fixtures::config;
use application::testing::{
    FAKE_SIGNATURE_HEADER, FakeGateway, FixedClock, PlainHasher, SequentialIds,
};
use application::use_cases::initiate_payment::InitiatePayment;
use domain::ledger::refund_share;
use domain::{
    BillingPeriod, Credits, Currency, KeptRefund, Money, ProviderId, RefundForm, Timestamp,
    refunded_total,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use store::SeaOrmStore;

use crate::support::{TestStore, assert_ledger_consistent};

const START_MS: i64 = 1_800_000_000_000;
const PRICE: i64 = 999;
const PERIOD_CREDITS: i64 = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tamper {
    None,
    Cheap,
    OtherCurrency,
    BeforeTheStart,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Renew {
        period: u8,
        tamper: Tamper,
    },
    /// A running total for the charge of `period`.
    Total {
        period: u8,
        minor: i64,
        euros: bool,
    },
    /// One refund of the charge of `period`, by id.
    One {
        period: u8,
        id: u8,
        minor: i64,
    },
    Dispute {
        period: u8,
        id: u8,
    },
    /// Deliver step `index` (modulo the steps before it) again, under the same or a new id.
    Again {
        index: usize,
        same_id: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let tamper = prop_oneof![
        6 => Just(Tamper::None),
        1 => Just(Tamper::Cheap),
        1 => Just(Tamper::OtherCurrency),
        1 => Just(Tamper::BeforeTheStart),
    ];
    prop_oneof![
        4 => (1_u8..=4, tamper).prop_map(|(period, tamper)| Step::Renew { period, tamper }),
        2 => (0_u8..=4, 1_i64..=1_100, proptest::bool::weighted(0.1))
            .prop_map(|(period, minor, euros)| Step::Total { period, minor, euros }),
        2 => (0_u8..=4, 0_u8..3, 1_i64..=700)
            .prop_map(|(period, id, minor)| Step::One { period, id, minor }),
        1 => (0_u8..=4, 0_u8..2).prop_map(|(period, id)| Step::Dispute { period, id }),
        2 => (0_usize..64, any::<bool>())
            .prop_map(|(index, same_id)| Step::Again { index, same_id }),
    ]
}

type TestService = Service<SeaOrmStore, FixedClock, SequentialIds, PlainHasher>;

struct Run<'a> {
    service: &'a TestService,
    fake: &'a FakeGateway,
    case: u32,
}

fn at_days(days: i64) -> Timestamp {
    Timestamp::from_unix_millis(START_MS).plus_days(days)
}

fn period_of(k: u8) -> BillingPeriod {
    let k = i64::from(k);
    BillingPeriod::new(at_days(30 * k), at_days(30 * k + 30)).unwrap()
}

fn usd(minor: i64) -> Money {
    Money::from_minor(minor, Currency::Usd).unwrap()
}

impl Run<'_> {
    fn sub(&self) -> String {
        format!("sub_{}", self.case)
    }

    fn charge(&self, k: u8) -> String {
        format!("in_{}_{k}", self.case)
    }

    fn event(&self, step: &Step) -> PaymentEvent {
        let refunded = |k: u8, refund: RefundReport| PaymentEvent::Refunded {
            charge: RefundedCharge::SubscriptionCharge {
                provider_subscription_id: Some(self.sub()),
                charge_ref: self.charge(k),
            },
            refund,
            occurred_at: at_days(1),
        };
        match *step {
            Step::Renew { period, tamper } => PaymentEvent::SubscriptionRenewed {
                provider_subscription_id: self.sub(),
                period: match tamper {
                    Tamper::BeforeTheStart => {
                        BillingPeriod::new(at_days(-90), at_days(-60)).unwrap()
                    }
                    _ => period_of(period),
                },
                amount: match tamper {
                    Tamper::Cheap => usd(1),
                    Tamper::OtherCurrency => Money::from_minor(PRICE, Currency::Eur).unwrap(),
                    _ => usd(PRICE),
                },
                charge_ref: Some(self.charge(period)),
                occurred_at: period_of(period).start(),
            },
            Step::Total {
                period,
                minor,
                euros,
            } => {
                let currency = if euros { Currency::Eur } else { Currency::Usd };
                let total = Money::from_minor(minor, currency).unwrap();
                refunded(period, RefundReport::Total(total))
            }
            Step::One { period, id, minor } => refunded(
                period,
                RefundReport::One {
                    refund_id: format!("re_{}_{period}_{id}", self.case),
                    amount: usd(minor),
                },
            ),
            Step::Dispute { period, id } => refunded(
                period,
                RefundReport::DisputeLost {
                    dispute_id: format!("dp_{}_{period}_{id}", self.case),
                },
            ),
            Step::Again { .. } => unreachable!("resolved before"),
        }
    }

    async fn deliver(&self, event_id: &str, event: PaymentEvent) -> String {
        let signature = format!("sig-{}-{event_id}", self.case);
        self.fake.prepare_webhook(
            &signature,
            VerifiedWebhook {
                event_id: format!("evt_{}_{event_id}", self.case),
                event_type: "test.event".into(),
                events: vec![event],
                foreign: None,
            },
        );
        let mut headers = BTreeMap::new();
        headers.insert(FAKE_SIGNATURE_HEADER.to_owned(), signature);
        let request = WebhookRequest {
            headers,
            body: b"{}".to_vec(),
        };
        let handled = self
            .service
            .handle_webhook(Some(domain::ProviderId::CardGateway), request)
            .await;
        handled
            .expect("handled")
            .outcomes()
            .iter()
            .map(|o| o.code())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// What a sequential reading of the steps must come to: the periods granted, and the valid
/// refund reports of each period's charge (by their key).
#[derive(Debug, Default)]
struct Model {
    granted: BTreeSet<u8>,
    last: u8,
    reports: BTreeMap<u8, BTreeMap<String, KeptRefund>>,
}

impl Model {
    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Renew { period, tamper } => {
                if tamper == Tamper::None && period > self.last {
                    self.granted.insert(period);
                    self.last = period;
                }
            }
            Step::Total {
                period,
                minor,
                euros,
            } => {
                if !euros && minor <= PRICE {
                    let refund = KeptRefund {
                        form: RefundForm::Total,
                        amount: usd(minor),
                    };
                    self.report(period, format!("total:{minor}"), refund);
                }
            }
            Step::One { period, id, minor } => {
                let refund = KeptRefund {
                    form: RefundForm::One,
                    amount: usd(minor),
                };
                // A refund id names one refund: its first report is the one kept.
                self.reports
                    .entry(period)
                    .or_default()
                    .entry(format!("one:{id}"))
                    .or_insert(refund);
            }
            Step::Dispute { period, id } => {
                let refund = KeptRefund {
                    form: RefundForm::DisputeLost,
                    amount: usd(PRICE),
                };
                self.report(period, format!("dispute:{id}"), refund);
            }
            Step::Again { .. } => {}
        }
    }

    fn report(&mut self, period: u8, key: String, refund: KeptRefund) {
        self.reports
            .entry(period)
            .or_default()
            .entry(key)
            .or_insert(refund);
    }

    fn clawed_back(&self, period: u8) -> i64 {
        let kept: Vec<KeptRefund> = self
            .reports
            .get(&period)
            .map(|r| r.values().copied().collect())
            .unwrap_or_default();
        let total = refunded_total(usd(PRICE), &kept);
        if total.is_zero() {
            return 0;
        }
        let credits = Credits::from_hundredths(PERIOD_CREDITS).unwrap();
        refund_share(credits, total.amount_minor(), PRICE).hundredths()
    }
}

async fn run_case(
    store: &TestStore,
    service: &TestService,
    fake: &FakeGateway,
    case: u32,
    steps: &[Step],
) {
    let run = Run {
        service,
        fake,
        case,
    };
    let user = service
        .register(
            &format!("p{case}@example.com"),
            "password123".into(),
            application::accounts::Role::User,
            &application::testing::client_of(&format!("p{case}@example.com")),
        )
        .await
        .unwrap()
        .user;
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new("pro-monthly").unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    let order = service
        .initiate_payment(request)
        .await
        .unwrap()
        .order
        .order
        .id()
        .clone();
    let activation = PaymentEvent::SubscriptionActivated {
        order: OrderLocator {
            order_id: Some(order),
            provider_reference: None,
        },
        provider_subscription_id: run.sub(),
        period: period_of(0),
        amount: Some(usd(PRICE)),
        charge_ref: Some(run.charge(0)),
        occurred_at: at_days(0),
    };
    assert_eq!(run.deliver("act", activation).await, "applied");
    let mut model = Model {
        granted: BTreeSet::from([0]),
        ..Model::default()
    };
    let mut sent: Vec<(String, Step)> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let (event_id, step) = match step {
            Step::Again { index, same_id } if !sent.is_empty() => {
                let (id, earlier) = sent[index % sent.len()].clone();
                if *same_id {
                    (id, earlier)
                } else {
                    (format!("{id}-again-{i}"), earlier)
                }
            }
            Step::Again { .. } => continue,
            other => (format!("s{i}"), other.clone()),
        };
        let first_time = !sent.iter().any(|(id, _)| *id == event_id);
        let outcome = run.deliver(&event_id, run.event(&step)).await;
        if first_time {
            model.apply(&step);
            sent.push((event_id, step));
        } else {
            assert_eq!(outcome, "duplicate", "same id again: {steps:?}");
        }
    }
    let lots: Vec<(i64, i64, i64)> = store
        .raw_rows(&format!(
            "SELECT source_key, amount_hundredths, clawed_back_hundredths + shortfall_hundredths \
             AS taken FROM credit_grants WHERE account_id = '{}' AND source_kind = 'subscription_period' \
             ORDER BY source_key",
            user.id
        ))
        .await
        .into_iter()
        .map(|(key, amount, taken)| {
            let start: i64 = key.rsplit(':').next().unwrap().parse().unwrap();
            (start, amount, taken)
        })
        .collect();
    let granted: BTreeSet<u8> = lots
        .iter()
        .map(|(start, _, _)| {
            let k = (0..=4).find(|k| period_of(*k).start().unix_millis() == *start);
            k.expect("a granted period is one of the sold periods")
        })
        .collect();
    assert_eq!(granted, model.granted, "periods granted; steps {steps:?}");
    for (start, amount, taken) in &lots {
        let k = (0..=4)
            .find(|k| period_of(*k).start().unix_millis() == *start)
            .unwrap();
        assert_eq!(*amount, PERIOD_CREDITS, "period {k}; steps {steps:?}");
        assert_eq!(
            *taken,
            model.clawed_back(k),
            "clawback of period {k}; steps {steps:?}"
        );
    }
    let subscription = service
        .store()
        .find_subscription_by_provider_id(ProviderId::CardGateway, &run.sub())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        subscription.current_period(),
        period_of(model.last),
        "steps {steps:?}"
    );
    assert_ledger_consistent(store, &user.id).await;
}

pub async fn random_event_sequences_grant_each_paid_period_once_and_claw_back_its_refunds(
    store: &TestStore,
) {
    static CASES: AtomicU32 = AtomicU32::new(0);
    let fake = std::sync::Arc::new(FakeGateway::new(ProviderId::CardGateway));
    let gateways = Gateways::new().with(fake.clone() as std::sync::Arc<dyn PaymentGateway>);
    let service = Service::new(
        (**store).clone(),
        FixedClock::at(START_MS),
        SequentialIds::default(),
        PlainHasher,
        gateways,
        config(),
    );
    let cases = std::env::var("TALLY_PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config::with_cases(cases));
    let strategy = proptest::collection::vec(step(), 1..24);
    for _ in 0..cases {
        let steps = strategy.new_tree(&mut runner).unwrap().current();
        let case = CASES.fetch_add(1, Ordering::Relaxed);
        run_case(store, &service, &fake, case, &steps).await;
    }
}

mod sqlite {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn random_event_sequences_grant_each_paid_period_once_and_claw_back_its_refunds() {
        let store = crate::support::sqlite().await;
        super::random_event_sequences_grant_each_paid_period_once_and_claw_back_its_refunds(&store)
            .await;
        store.cleanup().await;
    }
}

mod postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn random_event_sequences_grant_each_paid_period_once_and_claw_back_its_refunds() {
        let Some(store) = crate::support::postgres_with(4, store::GroupCommit::off()).await else {
            return;
        };
        super::random_event_sequences_grant_each_paid_period_once_and_claw_back_its_refunds(&store)
            .await;
        store.cleanup().await;
    }
}
