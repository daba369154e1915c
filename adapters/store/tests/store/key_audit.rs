//! The key audit (PostgreSQL): every statement the store sends on the hot paths names the
//! account key of each distributed table it touches.
//!
//! `docs/scaling.md` plans Tally past one PostgreSQL on Citus, with the account key (`account_id`
//! on the credit tables, still `user_id` on the purchase tables) as the distribution column. A statement that touches a distributed table without
//! filtering by that column is sent by Citus to every shard; one that binds it to one value goes
//! to one shard. This file holds the plan's list of distributed tables ([`DISTRIBUTED`]; the doc
//! refers to it rather than repeating it) and checks the store against it: it records every
//! statement the store sends (`SeaOrmStore::connect_observed`, feature `testing`) while the real
//! use cases run a consume, a reserve then settle, a reserve then release, a paid webhook's grant
//! and a refund's clawback, and fails on any statement that touches a distributed table
//! without filtering by the key (`account_id = $n`, `… IN (…)`, `= ANY(…)`, or a join on it),
//! naming the statement and the table.
//!
//! With group commit off every statement must bind the key to the acting user alone (one shard
//! per operation). With group commit on, a run of consumptions of several users is written as one
//! batch (`ledger/consume_many.rs`) whose statements span users: they must still filter by the
//! key, and they are the only statements allowed to span several; [`BATCH_SPANS_USERS`] names
//! them, and the test fails if that list goes stale in either direction.
//!
//! The known exceptions ([`NOT_KEYED`]) are the statements `docs/scaling.md` lists as
//! multi-shard with their plan; each must still be sent (a stale entry fails too).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use application::accounts::{Role, User};
use application::ports::{
    Gateways, OrderLocator, PaymentEvent, PaymentGateway, RefundReport, RefundedCharge,
    VerifiedWebhook, WebhookRequest,
};
use application::service::Service;
use application::testing::fixtures::config;
use application::testing::{
    FAKE_SIGNATURE_HEADER, FakeGateway, FixedClock, PlainHasher, SequentialIds,
};
use application::use_cases::credits::{ConsumeCredits, UsageRequest};
use application::use_cases::initiate_payment::InitiatePayment;
use domain::{Currency, IdempotencyKey, Money, OrderId, ProviderId, Timestamp, UserId};
use store::{GroupCommit, SeaOrmStore, SentStatement, StatementObserver, StoreSettings};

use crate::support::{self, TestStore};

/// The tables Citus distributes by the account key, and that key's column in each (the plan of
/// `docs/scaling.md`, "Which table goes where"). Every other table is a reference table or stays
/// on the coordinator.
pub const DISTRIBUTED: &[(&str, &str)] = &[
    ("credit_balances", "account_id"),
    ("credit_transactions", "account_id"),
    ("credit_grants", "account_id"),
    ("credit_reservations", "account_id"),
    ("account_members", "account_id"),
    ("orders", "user_id"),
    ("subscriptions", "user_id"),
    ("subscription_charges", "user_id"),
    ("idempotency_records", "user_id"),
    ("entitlements_told", "account_id"),
    ("plan_allowances", "user_id"),
];

/// Hot statements that touch a distributed table without its key, as `docs/scaling.md` lists
/// them: (a fragment of the statement, the table). Each is a multi-shard statement on Citus
/// until the change the doc names for it is made.
pub const NOT_KEYED: &[(&str, &str)] = &[
    // A webhook loads the order it names by id: it does not know the account yet.
    ("FROM orders WHERE id = $1", "orders"),
    // The order's compare-and-set, by id and version.
    ("UPDATE orders SET status = $3", "orders"),
    // A grant's "already granted?" check, by its source (UNIQUE (source_kind, source_key)).
    (
        "FROM credit_grants WHERE source_kind = $1 AND source_key = $2",
        "credit_grants",
    ),
];

/// The grouped batch's statements (`ledger/consume_many.rs`), by a fragment each: they filter by
/// the key but span the users of the batch, so on Citus they are multi-shard statements.
pub const BATCH_SPANS_USERS: &[&str] = &[
    // The read of the batch's balances and lots (`balances_with_lots`).
    "WHERE b.account_id = ANY(ARRAY(SELECT json_array_elements_text($1::json)))",
    // The one writing statement: ledger rows, decrements, draw-downs (`write_postgres`).
    "ins AS (INSERT INTO credit_transactions",
];

const START_MS: i64 = 1_800_000_000_000;

/// Every statement the store ran while recording was on.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Option<Vec<SentStatement>>>>);

impl Recorder {
    fn observer(&self) -> StatementObserver {
        let sink = Arc::clone(&self.0);
        Arc::new(move |sent: &SentStatement| {
            if let Some(seen) = sink.lock().unwrap().as_mut() {
                seen.push(sent.clone());
            }
        })
    }

    fn start(&self) {
        *self.0.lock().unwrap() = Some(Vec::new());
    }

    fn stop(&self) -> Vec<SentStatement> {
        self.0.lock().unwrap().take().unwrap_or_default()
    }
}

/// A service on a PostgreSQL store whose statements `recorder` sees.
struct World {
    service: Service<SeaOrmStore, FixedClock, SequentialIds, PlainHasher>,
    fake: Arc<FakeGateway>,
    recorder: Recorder,
    store: TestStore,
    observed: SeaOrmStore,
}

impl World {
    async fn new(group_commit: GroupCommit) -> Option<Self> {
        let store = support::postgres_with(4, GroupCommit::off()).await?;
        let recorder = Recorder::default();
        let settings = StoreSettings {
            group_commit,
            ..store.settings.clone()
        };
        let observed =
            SeaOrmStore::connect_observed(&settings, support::events(), recorder.observer())
                .await
                .expect("connect");
        let fake = Arc::new(FakeGateway::new(ProviderId::CardGateway));
        let gateways = Gateways::new().with(fake.clone() as Arc<dyn PaymentGateway>);
        let service = Service::new(
            observed.clone(),
            FixedClock::at(START_MS),
            SequentialIds::default(),
            PlainHasher,
            gateways,
            config(),
        );
        Some(Self {
            service,
            fake,
            recorder,
            store,
            observed,
        })
    }

    async fn user(&self, email: &str) -> User {
        let client = application::testing::client_of(email);
        let registered = self
            .service
            .register(email, "password123".into(), Role::User, &client);
        registered.await.unwrap().user
    }

    async fn order(&self, user: &User) -> OrderId {
        let request = InitiatePayment {
            save_method: false,
            user: user.clone(),
            account: None,
            plan_id: domain::PlanId::new("credits-100").unwrap(),
            provider: "card_gateway".parse().unwrap(),
            idempotency_key: None,
            returns: Default::default(),
        };
        let started = self.service.initiate_payment(request).await.unwrap();
        started.order.order.id().clone()
    }

    async fn deliver(&self, event_id: &str, event: PaymentEvent) -> String {
        let signature = format!("sig-{event_id}");
        let verified = VerifiedWebhook {
            event_id: event_id.into(),
            event_type: "test.event".into(),
            events: vec![event],
            foreign: None,
        };
        self.fake.prepare_webhook(&signature, verified);
        let headers = [(FAKE_SIGNATURE_HEADER.to_owned(), signature)].into();
        let request = WebhookRequest {
            headers,
            body: b"{}".to_vec(),
        };
        let handled = self
            .service
            .handle_webhook(Some(ProviderId::CardGateway), request)
            .await
            .expect("handled");
        let codes: Vec<&str> = handled.outcomes().iter().map(|o| o.code()).collect();
        codes.join(",")
    }

    async fn close(self) {
        self.observed.close().await.expect("close");
        self.store.cleanup().await;
    }
}

fn spend(user: &UserId, key: &str) -> ConsumeCredits {
    ConsumeCredits {
        user_id: user.clone(),
        account_id: None,
        usage: UsageRequest {
            feature: Some("chat".into()),
            model: None,
            tokens: None,
            breakdown: None,
        },
        idempotency_key: IdempotencyKey::new(key).unwrap(),
        api_key_id: None,
    }
}

fn by_id(order: &OrderId) -> OrderLocator {
    OrderLocator {
        order_id: Some(order.clone()),
        provider_reference: None,
    }
}

fn usd(minor: i64) -> Money {
    Money::from_minor(minor, Currency::Usd).unwrap()
}

/// One hot path's statements, with the account it acted on.
struct Phase {
    name: &'static str,
    account: String,
    sent: Vec<SentStatement>,
}

/// Run the hot paths of one buyer through the service, recording each: a paid webhook's grant,
/// a consume, a reserve then settle, a reserve then release, a refund's clawback.
async fn hot_paths(world: &World) -> Vec<Phase> {
    let buyer = world.user("buyer@example.com").await;
    let user = buyer.id.clone();
    let order = world.order(&buyer).await;
    let mut phases = Vec::new();
    let mut record = |name, sent| {
        phases.push(Phase {
            name,
            account: user.as_str().to_owned(),
            sent,
        });
    };
    let at = Timestamp::from_unix_millis(START_MS);

    world.recorder.start();
    let paid = PaymentEvent::PaymentSucceeded {
        order: by_id(&order),
        amount: usd(1000),
        occurred_at: at,
    };
    assert_eq!(world.deliver("pay-1", paid).await, "applied");
    record("a paid webhook's grant", world.recorder.stop());

    world.recorder.start();
    world
        .service
        .consume_credits(spend(&user, "c1"))
        .await
        .unwrap();
    record("a consume", world.recorder.stop());

    world.recorder.start();
    let (held, _) = world
        .service
        .reserve_credits(spend(&user, "r1"))
        .await
        .unwrap();
    record("a reserve", world.recorder.stop());

    world.recorder.start();
    let usage = spend(&user, "unused").usage;
    let settle = world
        .service
        .settle_reservation(&user, None, &held.id, &usage);
    settle.await.unwrap();
    record("a settle", world.recorder.stop());

    let (held, _) = world
        .service
        .reserve_credits(spend(&user, "r2"))
        .await
        .unwrap();
    world.recorder.start();
    let release = world.service.release_reservation(&user, None, &held.id);
    release.await.unwrap();
    record("a release", world.recorder.stop());

    world.recorder.start();
    let refund = PaymentEvent::Refunded {
        charge: RefundedCharge::Order(by_id(&order)),
        refund: RefundReport::Total(usd(400)),
        occurred_at: at.plus_days(1),
    };
    assert_eq!(world.deliver("refund-1", refund).await, "applied");
    record("a refund's clawback", world.recorder.stop());
    phases.push(team_member_spends(world, &buyer).await);
    phases
}

/// A member's consumption from a team's pool (`buyer` owns the team): the member's row is read
/// and written by the team's key.
async fn team_member_spends(world: &World, owner: &User) -> Phase {
    use application::ports::Writes;
    use application::use_cases::teams::MemberRequest;
    let member = world.user("member@example.com").await;
    let team = world
        .service
        .create_team(&owner.id, "Audit")
        .await
        .unwrap()
        .account
        .id;
    let add = MemberRequest::Add {
        role: domain::MemberRole::Member,
        limit: application::use_cases::teams::parse_limit(support::c(100_000), "day").ok(),
    };
    let added = world
        .service
        .change_team_member(&owner.id, &team, &member.id, add);
    added.await.unwrap();
    let fund = application::ports::GrantCommand {
        account_id: team.clone(),
        amount: support::c(10_000),
        source: application::ports::GrantSource::Admin("audit-team".into()),
        expires_at: None,
        now: Timestamp::from_unix_millis(START_MS),
    };
    world.observed.grant(&fund).await.unwrap();
    world.recorder.start();
    let spend = ConsumeCredits {
        account_id: Some(team.clone()),
        ..spend(&member.id, "team-1")
    };
    world.service.consume_credits(spend).await.unwrap();
    Phase {
        name: "a team member's consume",
        account: team.as_str().to_owned(),
        sent: world.recorder.stop(),
    }
}

/// Where a statement's rows of one distributed table lie, as far as its text and values say.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Routing {
    /// The key is bound to these values (one value: one shard).
    Keys(BTreeSet<String>),
    /// The key is filtered or joined on, by values the audit does not read (a batch's rows).
    Joined,
    /// The key is not named: every shard.
    Unkeyed,
}

/// A distributed table a statement touches, and how.
#[derive(Debug)]
struct Touch {
    table: &'static str,
    routing: Routing,
}

/// Audit every phase: statements not keyed (outside [`NOT_KEYED`]), statements spanning users
/// (outside [`BATCH_SPANS_USERS`] when `batch_allowed`, any when not), and keyed statements bound
/// to another user than the phase's. Returns the problems, and the exceptions and batch
/// statements that were met.
fn audit(phases: &[Phase], batch_allowed: bool) -> (Vec<String>, BTreeSet<usize>, BTreeSet<usize>) {
    let mut problems = Vec::new();
    let mut exceptions_met = BTreeSet::new();
    let mut batch_met = BTreeSet::new();
    for phase in phases {
        assert!(
            !phase.sent.is_empty(),
            "{}: no statement was recorded",
            phase.name
        );
        for sent in &phase.sent {
            for touch in sql::touches(sent) {
                let known = |list: &[(&str, &str)]| {
                    list.iter().position(|(fragment, table)| {
                        *table == touch.table && sent.sql.contains(fragment)
                    })
                };
                let batch = BATCH_SPANS_USERS.iter().position(|f| sent.sql.contains(f));
                let wrong = match &touch.routing {
                    Routing::Unkeyed => match known(NOT_KEYED) {
                        Some(i) => {
                            exceptions_met.insert(i);
                            None
                        }
                        None => Some("does not filter by the account key"),
                    },
                    Routing::Keys(keys)
                        if keys.len() == 1 && keys.contains(phase.account.as_str()) =>
                    {
                        None
                    }
                    Routing::Keys(keys) if keys.len() == 1 => Some("names another account"),
                    Routing::Keys(_) | Routing::Joined => match (batch_allowed, batch) {
                        (true, Some(i)) => {
                            batch_met.insert(i);
                            None
                        }
                        _ => Some("spans accounts"),
                    },
                };
                if let Some(wrong) = wrong {
                    problems.push(format!(
                        "{}: {} {wrong} ({:?}):\n    {}\n    values {:?}",
                        phase.name, touch.table, touch.routing, sent.sql, sent.values
                    ));
                }
            }
        }
    }
    (problems, exceptions_met, batch_met)
}

fn report(problems: &[String]) {
    assert!(
        problems.is_empty(),
        "hot statements that Citus would send to more than one shard ({}):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

async fn every_hot_statement_names_the_account_key(group_commit: GroupCommit) {
    let Some(world) = World::new(group_commit).await else {
        return;
    };
    let phases = hot_paths(&world).await;
    let (problems, met, _) = audit(&phases, false);
    report(&problems);
    let stale: Vec<_> = (0..NOT_KEYED.len()).filter(|i| !met.contains(i)).collect();
    assert!(
        stale.is_empty(),
        "NOT_KEYED entries no hot path sends any more (remove them here and in docs/scaling.md): {:?}",
        stale.iter().map(|i| NOT_KEYED[*i]).collect::<Vec<_>>()
    );
    world.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hot_statement_names_the_account_key_one_transaction_each() {
    every_hot_statement_names_the_account_key(GroupCommit::off()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hot_statement_names_the_account_key_with_group_commit() {
    every_hot_statement_names_the_account_key(support::grouped()).await;
}

/// Two buyers' consumptions in one group: written as one batch whose statements filter by the
/// key and span both buyers, and only those listed in [`BATCH_SPANS_USERS`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grouped_batch_spans_accounts_only_in_its_listed_statements() {
    let Some(world) = World::new(support::exact_groups(2)).await else {
        return;
    };
    let mut users = Vec::new();
    for email in ["one@example.com", "two@example.com"] {
        let user = world.user(email).await;
        let command = application::ports::GrantCommand {
            account_id: domain::AccountId::personal(&user.id),
            amount: support::c(10_000),
            source: application::ports::GrantSource::Admin(format!("seed-{email}")),
            expires_at: None,
            now: Timestamp::from_unix_millis(START_MS),
        };
        // Two grants, so that the writer's group of two is made of them.
        users.push((user.id.clone(), command));
    }
    let grants = users.iter().map(|(_, command)| {
        use application::ports::Writes;
        world.observed.grant(command)
    });
    for granted in futures_util::future::join_all(grants).await {
        granted.unwrap();
    }
    let mut phases = Vec::new();
    for round in 0..2 {
        world.recorder.start();
        let spends = users.iter().map(|(user, _)| {
            world
                .service
                .consume_credits(spend(user, &format!("batch-{round}")))
        });
        for spent in futures_util::future::join_all(spends).await {
            spent.unwrap();
        }
        phases.push(Phase {
            name: if round == 0 {
                "a batch of two accounts' consumptions (read, then written)"
            } else {
                "a batch of two accounts' consumptions (from what the writer knows)"
            },
            account: users[0].0.as_str().to_owned(),
            sent: world.recorder.stop(),
        });
    }
    let (problems, _, batch_met) = audit(&phases, true);
    report(&problems);
    let stale: Vec<_> = (0..BATCH_SPANS_USERS.len())
        .filter(|i| !batch_met.contains(i))
        .map(|i| BATCH_SPANS_USERS[i])
        .collect();
    assert!(
        stale.is_empty(),
        "BATCH_SPANS_USERS entries no batch sends any more: {stale:?}"
    );
    world.close().await;
}

/// Reading SQL text just far enough to tell, per distributed table a statement names, whether
/// and how it filters by the key.
mod sql {
    use std::collections::{BTreeSet, HashMap};

    use store::SentStatement;

    use super::{DISTRIBUTED, Routing, Touch};

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Token {
        /// A name, possibly qualified (`b.user_id`), lowercased.
        Word(String),
        /// `$n`.
        Param(usize),
        /// A string or number literal.
        Literal,
        /// Any other character.
        Punct(char),
    }

    fn tokens(sql: &str) -> Vec<Token> {
        let chars: Vec<char> = sql.chars().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c == '\'' {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push(Token::Literal);
            } else if c == '$' {
                let start = i + 1;
                i = start;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
                let n: String = chars[start..i].iter().collect();
                out.push(Token::Param(n.parse().unwrap_or(0)));
            } else if c.is_ascii_digit() {
                while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                out.push(Token::Literal);
            } else if c.is_alphabetic() || c == '_' {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                out.push(Token::Word(word.to_lowercase()));
            } else {
                out.push(Token::Punct(c));
                i += 1;
            }
        }
        out
    }

    fn is_word(token: Option<&Token>, word: &str) -> bool {
        matches!(token, Some(Token::Word(w)) if w == word)
    }

    /// The index just past the parenthesis that closes the one at `open`.
    fn closing(tokens: &[Token], open: usize) -> usize {
        let mut depth = 0;
        for (i, token) in tokens.iter().enumerate().skip(open) {
            match token {
                Token::Punct('(') => depth += 1,
                Token::Punct(')') => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
        }
        tokens.len()
    }

    /// The statement's scopes: each common table expression's body, and the final statement.
    fn scopes(tokens: &[Token]) -> Vec<&[Token]> {
        if !is_word(tokens.first(), "with") {
            return vec![tokens];
        }
        let mut scopes = Vec::new();
        // At the name of a common table expression: name [(columns)] AS [MATERIALIZED] (body)
        let mut i = 1;
        loop {
            i += 1;
            if tokens.get(i) == Some(&Token::Punct('(')) {
                i = closing(tokens, i);
            }
            while i < tokens.len() && tokens[i] != Token::Punct('(') {
                i += 1;
            }
            if i >= tokens.len() {
                break;
            }
            let end = closing(tokens, i);
            scopes.push(&tokens[i + 1..end - 1]);
            i = end;
            if tokens.get(i) != Some(&Token::Punct(',')) {
                break;
            }
            i += 1;
        }
        scopes.push(&tokens[i.min(tokens.len())..]);
        scopes
    }

    const NOT_ALIASES: &[&str] = &[
        "where",
        "set",
        "on",
        "left",
        "right",
        "inner",
        "join",
        "cross",
        "order",
        "group",
        "limit",
        "for",
        "values",
        "select",
        "using",
        "returning",
        "default",
    ];

    /// Every distributed table `scope` names after FROM, JOIN, UPDATE or INTO, with the name its
    /// columns are qualified by.
    fn tables(scope: &[Token]) -> Vec<(&'static str, &'static str, String, usize)> {
        let mut found = Vec::new();
        for (i, token) in scope.iter().enumerate() {
            let Token::Word(keyword) = token else {
                continue;
            };
            if !["from", "join", "update", "into"].contains(&keyword.as_str()) {
                continue;
            }
            let Some(Token::Word(name)) = scope.get(i + 1) else {
                continue;
            };
            let Some((table, key)) = DISTRIBUTED.iter().find(|(t, _)| t == name) else {
                continue;
            };
            let mut next = i + 2;
            if is_word(scope.get(next), "as") {
                next += 1;
            }
            let alias = match scope.get(next) {
                Some(Token::Word(w)) if !NOT_ALIASES.contains(&w.as_str()) => w.clone(),
                _ => (*table).to_owned(),
            };
            found.push((*table, *key, alias, i + 2));
        }
        found
    }

    /// The statement's common table expressions that read a JSON parameter
    /// (`name AS (SELECT * FROM json_to_recordset($n::json) …)`, the batch's rows): name → n.
    fn json_rows(tokens: &[Token]) -> HashMap<String, usize> {
        let mut rows = HashMap::new();
        for (i, token) in tokens.iter().enumerate() {
            let Token::Word(name) = token else { continue };
            let mut at = i + 1;
            if !is_word(tokens.get(at), "as") {
                continue;
            }
            at += 1;
            if is_word(tokens.get(at), "materialized") {
                at += 1;
            }
            let shape = [
                Token::Punct('('),
                Token::Word("select".into()),
                Token::Punct('*'),
                Token::Word("from".into()),
                Token::Word("json_to_recordset".into()),
                Token::Punct('('),
            ];
            if tokens.get(at..at + shape.len()) == Some(&shape[..])
                && let Some(Token::Param(n)) = tokens.get(at + shape.len())
            {
                rows.insert(name.clone(), *n);
            }
        }
        rows
    }

    /// The values of `field` in the JSON rows of parameter `n`.
    fn json_field(sent: &SentStatement, n: usize, field: &str) -> Option<BTreeSet<String>> {
        let json: serde_json::Value = serde_json::from_str(&value(sent, n)?).ok()?;
        json.as_array()?
            .iter()
            .map(|row| row.get(field)?.as_str().map(str::to_owned))
            .collect()
    }

    /// The values of `x.col` when `x` is one of the statement's JSON rows.
    fn column_of(
        sent: &SentStatement,
        rows: &HashMap<String, usize>,
        qualified: &str,
    ) -> Option<BTreeSet<String>> {
        let (cte, column) = qualified.split_once('.')?;
        json_field(sent, *rows.get(cte)?, column)
    }

    fn value(sent: &SentStatement, n: usize) -> Option<String> {
        sent.values.get(n.checked_sub(1)?).cloned().flatten()
    }

    /// The keys a JSON array parameter holds (`json_array_elements_text($n::json)`).
    fn json_keys(sent: &SentStatement, n: usize) -> Option<BTreeSet<String>> {
        let json: serde_json::Value = serde_json::from_str(&value(sent, n)?).ok()?;
        json.as_array()?
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    /// How `scope` filters the key of the table qualified as `alias`.
    fn routing(
        sent: &SentStatement,
        rows: &HashMap<String, usize>,
        (scope, key, alias): (&[Token], &str, &str),
    ) -> Routing {
        let qualified = format!("{alias}.{key}");
        let mut keys = BTreeSet::new();
        let mut joined = false;
        for (i, token) in scope.iter().enumerate() {
            let Token::Word(w) = token else { continue };
            if *w != qualified && *w != key {
                continue;
            }
            let after = &scope[i + 1..];
            let before = i.checked_sub(1).and_then(|b| scope.get(b));
            match (before, after) {
                (_, [Token::Punct('='), Token::Param(n), ..]) => keys.extend(value(sent, *n)),
                (_, [Token::Punct('='), Token::Word(w), ..]) if w == "any" => {
                    let param = after.iter().find_map(|t| match t {
                        Token::Param(n) => Some(*n),
                        _ => None,
                    });
                    match param.and_then(|n| json_keys(sent, n)) {
                        Some(found) => keys.extend(found),
                        None => joined = true,
                    }
                }
                (_, [Token::Punct('='), Token::Word(other), ..]) if other.contains('.') => {
                    match column_of(sent, rows, other) {
                        Some(found) => keys.extend(found),
                        None => joined = true,
                    }
                }
                (Some(Token::Punct('=')), _) => joined = true,
                (_, [Token::Word(w), Token::Punct('('), rest @ ..]) if w == "in" => {
                    let list: Vec<usize> = rest
                        .iter()
                        .take_while(|t| **t != Token::Punct(')'))
                        .filter_map(|t| match t {
                            Token::Param(n) => Some(*n),
                            _ => None,
                        })
                        .collect();
                    // IN (SELECT column FROM rows): the values of that column.
                    let from_rows = match rest {
                        [
                            Token::Word(w),
                            Token::Word(column),
                            Token::Word(f),
                            Token::Word(cte),
                            ..,
                        ] if w == "select" && f == "from" => {
                            column_of(sent, rows, &format!("{cte}.{column}"))
                        }
                        _ => None,
                    };
                    match from_rows {
                        Some(found) => keys.extend(found),
                        None if list.is_empty() => joined = true,
                        None => {}
                    }
                    keys.extend(list.into_iter().filter_map(|n| value(sent, n)));
                }
                _ => {}
            }
        }
        if !keys.is_empty() {
            Routing::Keys(keys)
        } else if joined {
            Routing::Joined
        } else {
            Routing::Unkeyed
        }
    }

    /// How an `INSERT INTO table (columns) …` at `at` (just past the table name) names the key.
    fn inserted(
        sent: &SentStatement,
        rows: &HashMap<String, usize>,
        (scope, at, key): (&[Token], usize, &str),
    ) -> Routing {
        if scope.get(at) != Some(&Token::Punct('(')) {
            return Routing::Unkeyed;
        }
        let end = closing(scope, at);
        let columns: Vec<&Token> = scope[at + 1..end - 1]
            .iter()
            .filter(|t| **t != Token::Punct(','))
            .collect();
        let Some(place) = columns
            .iter()
            .position(|t| **t == Token::Word(key.to_owned()))
        else {
            return Routing::Unkeyed;
        };
        if !is_word(scope.get(end), "values") {
            // INSERT (columns) SELECT columns FROM rows: the key column of those rows.
            let source = scope[end..].windows(2).find_map(|w| match w {
                [Token::Word(f), Token::Word(cte)] if f == "from" => Some(cte.clone()),
                _ => None,
            });
            return match source.and_then(|cte| column_of(sent, rows, &format!("{cte}.{key}"))) {
                Some(keys) => Routing::Keys(keys),
                None => Routing::Joined,
            };
        }
        let row: Vec<&Token> = scope[end + 2..]
            .iter()
            .take_while(|t| **t != Token::Punct(')'))
            .filter(|t| **t != Token::Punct(','))
            .collect();
        match row.get(place) {
            Some(Token::Param(n)) => Routing::Keys(value(sent, *n).into_iter().collect()),
            _ => Routing::Joined,
        }
    }

    /// Every distributed table `sent` touches, and how it filters each by the key.
    pub(super) fn touches(sent: &SentStatement) -> Vec<Touch> {
        let all = tokens(&sent.sql);
        let rows = json_rows(&all);
        let mut touches = Vec::new();
        for scope in scopes(&all) {
            for (table, key, alias, at) in tables(scope) {
                let into = at >= 2 && is_word(scope.get(at - 2), "into");
                let mut routing = if into {
                    inserted(sent, &rows, (scope, at, key))
                } else {
                    routing(sent, &rows, (scope, key, &alias))
                };
                if routing == Routing::Joined {
                    // Joined on the key to a table of the same scope that binds it: the same keys.
                    let bound = tables(scope).into_iter().find_map(|(_, k, a, _)| {
                        match self::routing(sent, &rows, (scope, k, &a)) {
                            Routing::Keys(keys) => Some(keys),
                            _ => None,
                        }
                    });
                    if let Some(keys) = bound {
                        routing = Routing::Keys(keys);
                    }
                }
                touches.push(Touch { table, routing });
            }
        }
        touches
    }

    /// A statement as the store sends it, with `user` for `$1`.
    pub(super) fn sent(sql: &str, user: &str) -> SentStatement {
        SentStatement {
            sql: sql.to_owned(),
            values: vec![Some(user.to_owned()), Some("x".to_owned())],
            failed: false,
        }
    }
}

/// The reader of SQL tells a statement that binds the key from one that joins on it and from one
/// that does not name it, table by table and scope by scope.
#[test]
fn the_audit_reads_how_each_table_is_filtered() {
    let keys = |k: &[&str]| Routing::Keys(k.iter().map(|s| (*s).to_owned()).collect());
    let routes = |statement: &str| -> Vec<(&str, Routing)> {
        sql::touches(&sql::sent(statement, "u1"))
            .into_iter()
            .map(|t| (t.table, t.routing))
            .collect()
    };
    assert_eq!(
        routes(
            "SELECT b.x FROM credit_balances b LEFT JOIN credit_grants g ON g.account_id = b.account_id WHERE b.account_id = $1 FOR UPDATE OF b"
        ),
        [
            ("credit_balances", keys(&["u1"])),
            ("credit_grants", keys(&["u1"]))
        ]
    );
    assert_eq!(
        routes(
            "SELECT COUNT(*) AS n FROM credit_grants WHERE source_kind = $1 AND source_key = $2"
        ),
        [("credit_grants", Routing::Unkeyed)]
    );
    assert_eq!(
        routes("INSERT INTO orders (id, user_id) VALUES ($2, $1)"),
        [("orders", keys(&["u1"]))]
    );
    assert_eq!(
        routes(
            "WITH d AS (SELECT * FROM json_to_recordset($1::json) AS r(uid text)), \
                lk AS MATERIALIZED (SELECT account_id FROM credit_balances WHERE account_id IN (SELECT uid FROM d)) \
                UPDATE credit_grants SET remaining = 0 FROM d WHERE id = d.lot"
        ),
        [
            ("credit_balances", Routing::Joined),
            ("credit_grants", Routing::Unkeyed)
        ]
    );
    assert_eq!(
        routes("UPDATE credit_balances SET n = n + 1 FROM d WHERE account_id = d.uid"),
        [("credit_balances", Routing::Joined)]
    );
    assert!(routes("INSERT INTO events (event_id) VALUES ($1)").is_empty());
}
