//! Spend limits on an account: counted in the spend's own transaction, holds included, each
//! window across its reset, exact under concurrency, on both databases, group commit off and on.

use application::accounts::{ApiKey, Scope, TokenHash};
use application::host_events;
use application::ports::{
    AddLimitError, ApiKeyRepository, ConsumeCommand, CreditLedger, GrantCommand, GrantSource,
    IdempotencyRecord, MemberCommand, NewSpendLimit, NewTeam, ReservationStatus, ReserveCommand,
    SpendError, SpendLimitStore, TeamStore, UsageContext, Writes,
};
use domain::{
    AccountId, Enforcement, LimitOwner, LimitScope, MAX_LIMITS_PER_ACCOUNT, MemberChange,
    MemberRole, ReservationId, SpendLimit, SpendLimitId, SpendWindow, Timestamp, UserId,
};

use store::SeaOrmStore;

use crate::support::{TestStore, c, concurrency_tests, contract_tests, t, user};

/// 2026-11-29T15:30:00Z (a Sunday).
const NOW: i64 = 1_795_966_200_000;
const HOUR: i64 = 3_600_000;

async fn funded(store: &TestStore, id: &str, whole: i64) -> AccountId {
    let u = user(store, id).await;
    let account = AccountId::personal(&u);
    let grant = GrantCommand {
        account_id: account.clone(),
        amount: c(whole * 100),
        source: GrantSource::Admin(format!("fund-{id}")),
        expires_at: None,
        now: t(NOW - 30 * 24 * HOUR),
    };
    store.grant(&grant).await.expect("fund");
    account
}

async fn limit(
    store: &TestStore,
    account: &AccountId,
    (id, feature): (&str, Option<&str>),
    (whole, window): (i64, SpendWindow),
    at: i64,
) -> SpendLimitId {
    let new = NewSpendLimit {
        id: SpendLimitId::new(id).unwrap(),
        account_id: account.clone(),
        scope: LimitScope {
            feature: feature.map(str::to_owned),
            ..LimitScope::default()
        },
        limit: SpendLimit {
            credits: c(whole * 100),
            window,
            enforcement: Enforcement::Hard,
        },
        created_by: None,
        now: t(at),
    };
    store.add_spend_limit(&new).await.expect("add limit").id
}

fn usage(feature: &str) -> UsageContext {
    UsageContext {
        feature: Some(feature.into()),
        ..UsageContext::default()
    }
}

fn spend(account: &AccountId, (whole, feature): (i64, &str), key: &str, at: i64) -> ConsumeCommand {
    ConsumeCommand {
        account_id: account.clone(),
        member_id: None,
        amount: c(whole * 100),
        idempotency: IdempotencyRecord {
            key: domain::IdempotencyKey::new(key).unwrap(),
            request_hash: format!("{key}:{whole}"),
        },
        context: usage(feature),
        now: t(at),
        low_balance_below: None,
        spend_order: domain::SpendOrder::default(),
    }
}

fn hold(account: &AccountId, whole: i64, id: &str, at: i64) -> ReserveCommand {
    ReserveCommand {
        reservation_id: ReservationId::new(id).unwrap(),
        account_id: account.clone(),
        member_id: None,
        amount: c(whole * 100),
        idempotency: IdempotencyRecord {
            key: domain::IdempotencyKey::new(id).unwrap(),
            request_hash: format!("{id}:{whole}"),
        },
        context: usage("chat"),
        now: t(at),
        expires_at: t(at + HOUR),
        low_balance_below: None,
    }
}

/// What `id` counted in its window at `at`.
async fn used(store: &TestStore, account: &AccountId, id: &SpendLimitId, at: i64) -> i64 {
    let limits = store.spend_limits(account, t(at)).await.unwrap();
    let l = limits.iter().find(|l| &l.id == id).expect("the limit");
    l.limit.standing(&l.buckets, t(at)).used.hundredths()
}

/// The refusal of a spend by an account limit: (its id, what is left, when it resets).
fn refused(result: Result<impl std::fmt::Debug, SpendError>) -> (SpendLimitId, i64, Timestamp) {
    match result {
        Err(SpendError::LimitReached(r)) => match r.owner {
            LimitOwner::Account { id, .. } => (id, r.left.hundredths(), r.resets_at),
            LimitOwner::Member => panic!("a member's limit: {r:?}"),
        },
        other => panic!("not refused by a limit: {other:?}"),
    }
}

/// A daily limit refuses the spend that would pass it, naming what is left and the next
/// midnight, and counts again from zero the next day; an idempotent retry replays.
pub async fn a_daily_limit_refuses_past_it_and_resets_at_midnight(store: &TestStore) {
    let ada = funded(store, "ada", 100).await;
    let day = limit(store, &ada, ("lim_day", None), (10, SpendWindow::Day), NOW).await;
    store
        .consume(&spend(&ada, (6, "chat"), "k1", NOW))
        .await
        .unwrap();
    let (id, left, resets) = refused(store.consume(&spend(&ada, (5, "chat"), "k2", NOW)).await);
    assert_eq!((id, left), (day.clone(), 400));
    assert_eq!(resets, t(1_795_996_800_000), "2026-11-30T00:00:00Z");
    // The refusal wrote nothing; a retry of the first spend replays, within the limit.
    assert_eq!(store.balance(&ada).await.unwrap(), c(9_400));
    store
        .consume(&spend(&ada, (6, "chat"), "k1", NOW))
        .await
        .unwrap();
    store
        .consume(&spend(&ada, (4, "chat"), "k3", NOW))
        .await
        .unwrap();
    assert_eq!(used(store, &ada, &day, NOW).await, 1_000);
    refused(store.consume(&spend(&ada, (1, "chat"), "k4", NOW)).await);
    // Tomorrow counts from zero.
    let tomorrow = 1_795_996_800_000;
    store
        .consume(&spend(&ada, (10, "chat"), "k5", tomorrow))
        .await
        .unwrap();
    assert_eq!(used(store, &ada, &day, tomorrow).await, 1_000);
}

/// Each window kind across its reset: an hour at the top of the next hour, a week on Monday
/// 00:00 UTC, a month on the 1st, a rolling window when its oldest hour leaves it.
pub async fn each_window_resets_when_it_says(store: &TestStore) {
    let cases = [
        ("hour", SpendWindow::Hour, 1_795_968_000_000),
        ("week", SpendWindow::Week, 1_795_996_800_000),
        ("month", SpendWindow::Month, 1_796_083_200_000),
        (
            "roll",
            SpendWindow::Rolling { hours: 5 },
            NOW - 1_800_000 + 5 * HOUR,
        ),
    ];
    for (name, window, reset) in cases {
        let account = funded(store, name, 100).await;
        let lim = limit(
            store,
            &account,
            (&format!("lim_{name}"), None),
            (5, window),
            NOW,
        )
        .await;
        let key = |k: &str| format!("{name}-{k}");
        store
            .consume(&spend(&account, (5, "chat"), &key("a"), NOW))
            .await
            .unwrap();
        let (_, left, resets) = refused(
            store
                .consume(&spend(&account, (1, "chat"), &key("b"), NOW))
                .await,
        );
        assert_eq!((left, resets), (0, t(reset)), "{name}");
        let (_, _, _) = refused(
            store
                .consume(&spend(&account, (1, "chat"), &key("c"), reset - 1))
                .await,
        );
        store
            .consume(&spend(&account, (5, "chat"), &key("d"), reset))
            .await
            .unwrap_or_else(|e| panic!("{name} after its reset: {e:?}"));
        assert_eq!(used(store, &account, &lim, reset).await, 500, "{name}");
    }
}

/// A hold counts while held: a release gives it all back, a settle for less the unused part,
/// and an overrun is taken only within what the limit leaves.
pub async fn holds_count_while_held_and_give_back_when_resolved(store: &TestStore) {
    let ada = funded(store, "ada", 100).await;
    let day = limit(store, &ada, ("lim_day", None), (10, SpendWindow::Day), NOW).await;
    store.reserve(&hold(&ada, 8, "r1", NOW)).await.unwrap();
    refused(store.consume(&spend(&ada, (3, "chat"), "k1", NOW)).await);
    let r1 = ReservationId::new("r1").unwrap();
    store.release((&ada, None), &r1, t(NOW)).await.unwrap();
    assert_eq!(used(store, &ada, &day, NOW).await, 0);
    store.reserve(&hold(&ada, 6, "r2", NOW)).await.unwrap();
    let r2 = ReservationId::new("r2").unwrap();
    store
        .settle((&ada, None), &r2, c(200), t(NOW))
        .await
        .unwrap();
    assert_eq!(used(store, &ada, &day, NOW).await, 200);
    // A hold of 5 settled for 12: the overrun takes what the limit leaves (3), no more.
    store.reserve(&hold(&ada, 5, "r3", NOW)).await.unwrap();
    let r3 = ReservationId::new("r3").unwrap();
    let (settled, _) = store
        .settle((&ada, None), &r3, c(1_200), t(NOW))
        .await
        .unwrap();
    let ReservationStatus::Settled { charged, .. } = settled.status else {
        panic!("{settled:?}")
    };
    assert_eq!(charged, c(800));
    assert_eq!(used(store, &ada, &day, NOW).await, 1_000);
    assert_eq!(store.balance(&ada).await.unwrap(), c(10_000 - 1_000));
}

/// A limit of one feature counts that feature's spends alone; the account's counts them all.
pub async fn a_feature_limit_counts_its_feature_alone(store: &TestStore) {
    let ada = funded(store, "ada", 100).await;
    let images = limit(
        store,
        &ada,
        ("lim_img", Some("image")),
        (3, SpendWindow::Day),
        NOW,
    )
    .await;
    let all = limit(store, &ada, ("lim_all", None), (20, SpendWindow::Day), NOW).await;
    store
        .consume(&spend(&ada, (3, "image"), "k1", NOW))
        .await
        .unwrap();
    let (id, _, _) = refused(store.consume(&spend(&ada, (1, "image"), "k2", NOW)).await);
    assert_eq!(id, images);
    store
        .consume(&spend(&ada, (10, "chat"), "k3", NOW))
        .await
        .unwrap();
    assert_eq!(used(store, &ada, &images, NOW).await, 300);
    assert_eq!(used(store, &ada, &all, NOW).await, 1_300);
    let (id, left, _) = refused(store.consume(&spend(&ada, (8, "chat"), "k4", NOW)).await);
    assert_eq!((id, left), (all, 700));
}

/// A limit made mid-window starts from what the window already spent (pending holds included,
/// given back when released); a removed limit counts nothing; an account carries at most
/// [`MAX_LIMITS_PER_ACCOUNT`].
pub async fn a_new_limit_counts_its_window_so_far_and_a_removed_one_nothing(store: &TestStore) {
    let ada = funded(store, "ada", 100).await;
    store
        .consume(&spend(&ada, (4, "chat"), "k1", NOW - 2 * HOUR))
        .await
        .unwrap();
    store
        .reserve(&hold(&ada, 3, "r1", NOW - HOUR))
        .await
        .unwrap();
    let day = limit(store, &ada, ("lim_day", None), (10, SpendWindow::Day), NOW).await;
    assert_eq!(used(store, &ada, &day, NOW).await, 700);
    let r1 = ReservationId::new("r1").unwrap();
    store.release((&ada, None), &r1, t(NOW)).await.unwrap();
    assert_eq!(used(store, &ada, &day, NOW).await, 400);
    refused(store.consume(&spend(&ada, (7, "chat"), "k2", NOW)).await);
    assert!(store.remove_spend_limit(&ada, &day).await.unwrap());
    assert!(!store.remove_spend_limit(&ada, &day).await.unwrap());
    store
        .consume(&spend(&ada, (7, "chat"), "k2", NOW))
        .await
        .unwrap();
    for i in 0..MAX_LIMITS_PER_ACCOUNT {
        let id = format!("lim_{i}");
        limit(store, &ada, (&id, None), (1_000, SpendWindow::Month), NOW).await;
    }
    let one_more = NewSpendLimit {
        id: SpendLimitId::new("lim_more").unwrap(),
        account_id: ada.clone(),
        scope: LimitScope::default(),
        limit: SpendLimit {
            credits: c(100),
            window: SpendWindow::Hour,
            enforcement: Enforcement::Hard,
        },
        created_by: None,
        now: t(NOW),
    };
    assert!(matches!(
        store.add_spend_limit(&one_more).await,
        Err(AddLimitError::TooMany(_))
    ));
}

/// Many spends and holds of one account at once, on several connections (and through the
/// group-commit writer when it is on): the daily limit is never passed by one hundredth.
pub async fn a_limit_is_never_passed_under_concurrency(store: &TestStore) {
    let ada = funded(store, "ada", 1_000).await;
    let day = limit(store, &ada, ("lim_day", None), (50, SpendWindow::Day), NOW).await;
    let mut tasks = Vec::new();
    for k in 0..48 {
        let store = (**store).clone();
        let ada = ada.clone();
        tasks.push(tokio::spawn(async move {
            if k % 4 == 0 {
                store
                    .reserve(&hold(&ada, 3, &format!("r{k}"), NOW))
                    .await
                    .map(drop)
            } else {
                store
                    .consume(&spend(&ada, (3, "chat"), &format!("k{k}"), NOW))
                    .await
                    .map(drop)
            }
        }));
    }
    let mut passed = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => passed += 1,
            Err(SpendError::LimitReached(_)) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(passed, 16, "50 credits hold 16 spends of 3");
    assert_eq!(used(store, &ada, &day, NOW).await, 4_800);
    assert_eq!(store.balance(&ada).await.unwrap(), c(100_000 - 4_800));
}

/// Concurrent spends of two features against a hard limit on every spend and a soft one on
/// one feature (grouped runs count them in memory, the one-by-one path in the database): the
/// hard limit passes exactly what it holds, the soft one counts exactly its feature's spends,
/// and each limit reached is told exactly once, with the spend that reached it.
pub async fn limits_of_several_scopes_hold_under_concurrency(store: &TestStore) {
    let ada = funded(store, "ada", 1_000).await;
    let all = limit(store, &ada, ("lim_all", None), (60, SpendWindow::Day), NOW).await;
    let soft = NewSpendLimit {
        id: SpendLimitId::new("lim_img").unwrap(),
        account_id: ada.clone(),
        scope: LimitScope {
            feature: Some("image".into()),
            ..LimitScope::default()
        },
        limit: SpendLimit {
            credits: c(1_500),
            window: SpendWindow::Day,
            enforcement: Enforcement::Soft,
        },
        created_by: None,
        now: t(NOW),
    };
    let image = store.add_spend_limit(&soft).await.unwrap().id;
    let mut tasks = Vec::new();
    for k in 0..40 {
        let store = (**store).clone();
        let ada = ada.clone();
        let feature = if k % 2 == 0 { "image" } else { "chat" };
        tasks.push(tokio::spawn(async move {
            let done = store
                .consume(&spend(&ada, (3, feature), &format!("k{k}"), NOW))
                .await;
            (feature, done.map(drop))
        }));
    }
    let mut images = 0;
    let mut passed = 0;
    for task in tasks {
        match task.await.unwrap() {
            (feature, Ok(())) => {
                passed += 1;
                images += i64::from(feature == "image");
            }
            (_, Err(SpendError::LimitReached(reached))) => {
                assert!(
                    matches!(&reached.owner, LimitOwner::Account { id, .. } if *id == all),
                    "{reached:?}"
                );
            }
            (_, Err(other)) => panic!("{other:?}"),
        }
    }
    assert_eq!(passed, 20, "60 credits hold 20 spends of 3");
    assert_eq!(used(store, &ada, &all, NOW).await, 6_000);
    assert_eq!(used(store, &ada, &image, NOW).await, images * 300);
    assert_eq!(store.balance(&ada).await.unwrap(), c(100_000 - 6_000));
    let reached: Vec<String> = crate::host_events::all_events(store)
        .await
        .into_iter()
        .filter(|e| e.kind.code() == "limit.reached")
        .map(|e| {
            let payload: serde_json::Value = serde_json::from_str(&e.payload).unwrap();
            payload["data"]["limit"]["id"].as_str().unwrap().to_owned()
        })
        .collect();
    let mut expected = vec![all.to_string()];
    if images * 3 >= 15 {
        expected.push(image.to_string());
    }
    let mut reached = reached;
    reached.sort();
    expected.sort();
    assert_eq!(reached, expected);
}

/// `limit.reached` is told once per crossing: when a spend brings a hard limit's window to its
/// credits, and when one takes a soft limit's past them (which it lets through); not again
/// while it stays there, and again after the window resets.
pub async fn a_limit_reached_is_told_once_per_crossing(store: &TestStore) {
    let ada = funded(store, "ada", 100).await;
    let soft = NewSpendLimit {
        id: SpendLimitId::new("lim_soft").unwrap(),
        account_id: ada.clone(),
        scope: LimitScope::default(),
        limit: SpendLimit {
            credits: c(500),
            window: SpendWindow::Hour,
            enforcement: Enforcement::Soft,
        },
        created_by: None,
        now: t(NOW),
    };
    store.add_spend_limit(&soft).await.unwrap();
    let hard = limit(
        store,
        &ada,
        ("lim_hard", Some("image")),
        (6, SpendWindow::Day),
        NOW,
    )
    .await;
    for (key, spent) in [
        ("k1", (3, "chat")),
        ("k2", (3, "chat")),
        ("k3", (6, "image")),
    ] {
        store.consume(&spend(&ada, spent, key, NOW)).await.unwrap();
    }
    refused(store.consume(&spend(&ada, (1, "image"), "k4", NOW)).await);
    store
        .consume(&spend(&ada, (5, "chat"), "k5", NOW + HOUR))
        .await
        .unwrap();
    let told: Vec<(String, i64, String)> = crate::host_events::all_events(store)
        .await
        .into_iter()
        .filter(|e| e.kind.code() == "limit.reached")
        .map(|e| {
            let payload: serde_json::Value = serde_json::from_str(&e.payload).unwrap();
            let limit = &payload["data"]["limit"];
            (
                limit["id"].as_str().unwrap().to_owned(),
                limit["usedHundredths"].as_i64().unwrap(),
                payload["data"]["transaction"]["type"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        told,
        vec![
            ("lim_soft".to_owned(), 600, "consumption".to_owned()),
            (hard.to_string(), 600, "consumption".to_owned()),
            ("lim_soft".to_owned(), 500, "consumption".to_owned()),
        ]
    );
}

/// An API key bound to `account`, stored.
async fn bound_key(store: &TestStore, account: &AccountId, id: &str) {
    let owner = user(store, &format!("admin-{id}")).await;
    let key = ApiKey {
        id: id.into(),
        owner,
        name: format!("key {id}"),
        prefix: "tly_abcd".into(),
        scopes: vec![Scope::CreditsConsume],
        account: Some(account.clone()),
        created_at: t(NOW - HOUR),
        revoked_at: None,
    };
    let hash = TokenHash(format!("hash-{id}"));
    store.create_api_key(&key, &hash).await.expect("the key");
}

/// `spend`, made with API key `key`.
fn with_key(mut command: ConsumeCommand, key: &str) -> ConsumeCommand {
    command.context.api_key_id = Some(key.into());
    command
}

/// A limit on an API key counts the spends made with that key alone (holds included, and a
/// settle's overrun against the key that held), starts from what the key already spent in its
/// window, refuses naming the key, and is made only on an unrevoked key bound to the account.
pub async fn a_key_limit_counts_its_key_alone(store: &TestStore) {
    let ada = funded(store, "ada", 100).await;
    let bob = funded(store, "bob", 100).await;
    bound_key(store, &ada, "key_a").await;
    bound_key(store, &ada, "key_b").await;
    bound_key(store, &bob, "key_bob").await;
    // Spent with key_a before the limit: the limit starts from it.
    store
        .consume(&with_key(spend(&ada, (3, "chat"), "k1", NOW), "key_a"))
        .await
        .unwrap();
    let new = |id: &str, key: &str| NewSpendLimit {
        id: SpendLimitId::new(id).unwrap(),
        account_id: ada.clone(),
        scope: LimitScope {
            api_key: Some(key.into()),
            ..LimitScope::default()
        },
        limit: SpendLimit {
            credits: c(1_000),
            window: SpendWindow::Day,
            enforcement: Enforcement::Hard,
        },
        created_by: None,
        now: t(NOW),
    };
    // Another account's key, or no key at all, is refused.
    for key in ["key_bob", "key_nobody"] {
        assert!(matches!(
            store.add_spend_limit(&new("lim_x", key)).await,
            Err(AddLimitError::NoSuchKey)
        ));
    }
    let capped = store
        .add_spend_limit(&new("lim_key", "key_a"))
        .await
        .unwrap();
    assert_eq!(capped.scope.api_key.as_deref(), Some("key_a"));
    assert_eq!(used(store, &ada, &capped.id, NOW).await, 300);
    // Spends with key_b and without a key do not count against it.
    store
        .consume(&with_key(spend(&ada, (20, "chat"), "k2", NOW), "key_b"))
        .await
        .unwrap();
    store
        .consume(&spend(&ada, (20, "chat"), "k3", NOW))
        .await
        .unwrap();
    assert_eq!(used(store, &ada, &capped.id, NOW).await, 300);
    // A hold with key_a counts, and its settle's overrun too, up to the limit.
    let mut held = hold(&ada, 4, "r1", NOW);
    held.context.api_key_id = Some("key_a".into());
    store.reserve(&held).await.unwrap();
    assert_eq!(used(store, &ada, &capped.id, NOW).await, 700);
    let r1 = ReservationId::new("r1").unwrap();
    let (settled, _) = store
        .settle((&ada, None), &r1, c(900), t(NOW))
        .await
        .unwrap();
    let ReservationStatus::Settled { charged, .. } = settled.status else {
        panic!("{settled:?}")
    };
    assert_eq!(charged, c(700), "the key's limit left 7 for the settle");
    assert_eq!(used(store, &ada, &capped.id, NOW).await, 1_000);
    let refusal = store
        .consume(&with_key(spend(&ada, (1, "chat"), "k4", NOW), "key_a"))
        .await;
    let Err(SpendError::LimitReached(reached)) = refusal else {
        panic!("not refused: {refusal:?}")
    };
    assert_eq!(
        reached.owner,
        LimitOwner::Account {
            id: capped.id.clone(),
            scope: Box::new(LimitScope {
                api_key: Some("key_a".into()),
                ..LimitScope::default()
            }),
        }
    );
    // key_b still spends.
    store
        .consume(&with_key(spend(&ada, (1, "chat"), "k5", NOW), "key_b"))
        .await
        .unwrap();
    assert_eq!(
        store.balance(&ada).await.unwrap(),
        c(10_000 - 300 - 2_000 - 2_000 - 700 - 100)
    );
}

/// The operator's ceiling for new accounts: every account opened while it is set (a password
/// user's, a host user's, a team made through the API, a host organisation's team) starts with
/// a hard monthly limit of it, in the transaction that opens it, and refuses a spend past it;
/// an account opened without it has none.
async fn new_accounts_open_with_the_operator_s_ceiling(store: &TestStore) {
    use application::accounts::{Email, Role};
    use application::ports::{
        HostOrgSync, NewHostUser, NewTeam, NewUser, TeamStore, UserRepository,
    };
    let ceiled = SeaOrmStore::clone(store).with_new_account_ceiling(Some(c(500)));
    let password = NewUser {
        id: domain::UserId::new("usr_ceiled").unwrap(),
        email: Email::parse("ceiled@example.com").unwrap(),
        password_hash: None,
        role: Role::User,
        created_at: t(NOW),
        signup_identity: None,
    };
    ceiled.create_user(&password).await.unwrap();
    let host = NewHostUser {
        issuer: "https://host.example".into(),
        subject: "ceiled-1".into(),
        created_at: t(NOW),
        signup_identity: None,
        contact: Default::default(),
    };
    let host = ceiled.find_or_create_host_user(&host).await.unwrap();
    let team = NewTeam {
        id: AccountId::new("team_ceiled").unwrap(),
        name: "Ceiled".into(),
        owner: password.id.clone(),
        now: t(NOW),
    };
    ceiled.create_team(&team).await.unwrap();
    let org = application::use_cases::teams::host_team_id("https://host.example", "org_c");
    let sync = HostOrgSync {
        user: host.id.clone(),
        claim: Some(domain::HostOrgClaim {
            account: org.clone(),
            role: domain::MemberRole::Owner,
        }),
        organisation: Some(("org_c".into(), "Org C".into())),
        seats: None,
        now: t(NOW),
    };
    ceiled
        .sync_host_org(&sync, application::host_events::member_changed)
        .await
        .unwrap()
        .unwrap();
    let personal = AccountId::personal(&password.id);
    for account in [&personal, &AccountId::personal(&host.id), &team.id, &org] {
        let limits = store.spend_limits(account, t(NOW)).await.unwrap();
        assert_eq!(limits.len(), 1, "{account}");
        assert_eq!(limits[0].limit.credits, c(500));
        assert_eq!(limits[0].limit.window, SpendWindow::Month);
        assert_eq!(limits[0].limit.enforcement, Enforcement::Hard);
    }
    let grant = GrantCommand {
        account_id: personal.clone(),
        amount: c(1_000),
        source: GrantSource::Admin("ceiled".into()),
        expires_at: None,
        now: t(NOW),
    };
    store.grant(&grant).await.unwrap();
    store
        .consume(&spend(&personal, (4, "chat"), "c1", NOW))
        .await
        .unwrap();
    let (id, left, _) = refused(
        store
            .consume(&spend(&personal, (2, "chat"), "c2", NOW))
            .await,
    );
    assert_eq!(
        (id, left),
        (
            store.spend_limits(&personal, t(NOW)).await.unwrap()[0]
                .id
                .clone(),
            100
        )
    );
    // Opened without the setting: no limit.
    let plain = user(store, "unceiled").await;
    let limits = store
        .spend_limits(&AccountId::personal(&plain), t(NOW))
        .await
        .unwrap();
    assert!(limits.is_empty());
}

/// `limit.reset`: a reached limit is told once its window has reset with room again; a soft
/// rolling limit passed so far that its window is still full at the first reset waits for the
/// next; a limit never reached, or removed, tells nothing.
async fn a_reached_limit_is_told_reset_when_it_has_room_again(store: &TestStore) {
    let account = funded(store, "resets", 100).await;
    let start = NOW - NOW % HOUR;
    let day = limit(
        store,
        &account,
        ("lim_day", Some("image")),
        (10, SpendWindow::Day),
        start,
    )
    .await;
    let _never = limit(
        store,
        &account,
        ("lim_never", Some("chat")),
        (50, SpendWindow::Day),
        start,
    )
    .await;
    let rolling = NewSpendLimit {
        id: SpendLimitId::new("lim_rolling").unwrap(),
        account_id: account.clone(),
        scope: LimitScope {
            feature: Some("tts".into()),
            ..LimitScope::default()
        },
        limit: SpendLimit {
            credits: c(1_000),
            window: SpendWindow::Rolling { hours: 2 },
            enforcement: Enforcement::Soft,
        },
        created_by: None,
        now: t(start),
    };
    let rolling = store.add_spend_limit(&rolling).await.unwrap().id;
    store
        .consume(&spend(&account, (10, "image"), "d1", start))
        .await
        .unwrap();
    store
        .consume(&spend(&account, (4, "tts"), "r1", start))
        .await
        .unwrap();
    store
        .consume(&spend(&account, (12, "tts"), "r2", start + HOUR))
        .await
        .unwrap();
    store
        .consume(&spend(&account, (1, "chat"), "n1", start))
        .await
        .unwrap();
    assert_eq!(
        store.tell_limit_resets(t(start + HOUR), 100).await.unwrap(),
        0
    );
    // Two hours on the rolling window still holds 12 of its 10: it waits for the next hour.
    assert_eq!(
        store
            .tell_limit_resets(t(start + 2 * HOUR), 100)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .tell_limit_resets(t(start + 3 * HOUR), 100)
            .await
            .unwrap(),
        1
    );
    assert_eq!(used(store, &account, &rolling, start + 3 * HOUR).await, 0);
    // The day limit resets at midnight UTC.
    let midnight = start - start % (24 * HOUR) + 24 * HOUR;
    assert_eq!(
        store.tell_limit_resets(t(midnight - 1), 100).await.unwrap(),
        0
    );
    assert_eq!(store.tell_limit_resets(t(midnight), 100).await.unwrap(), 1);
    assert_eq!(
        store
            .tell_limit_resets(t(midnight + HOUR), 100)
            .await
            .unwrap(),
        0
    );
    // Reached again, then removed before its reset: nothing.
    store
        .consume(&spend(&account, (10, "image"), "d2", midnight))
        .await
        .unwrap();
    assert!(store.remove_spend_limit(&account, &day).await.unwrap());
    let next = midnight + 24 * HOUR;
    assert_eq!(store.tell_limit_resets(t(next), 100).await.unwrap(), 0);
}

/// A limit on a model counts the spends naming that model alone; one on a member of a team,
/// that member's spends alone (holds included), and is refused for a user who is no member.
/// Each starts from what its window already spent of its model or member.
pub async fn model_and_member_limits_count_their_own_spends(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let cy = user(store, "cy").await;
    let team = AccountId::new("team_acme").unwrap();
    let new_team = NewTeam {
        id: team.clone(),
        name: "Acme".into(),
        owner: ada.clone(),
        now: t(NOW),
    };
    store.create_team(&new_team).await.unwrap();
    let join = MemberCommand {
        account: team.clone(),
        actor: ada.clone(),
        target: bob.clone(),
        changes: vec![MemberChange::Add(MemberRole::Member)],
        seats: None,
        now: t(NOW),
    };
    store
        .change_member(&join, host_events::member_changed)
        .await
        .unwrap();
    let grant = GrantCommand {
        account_id: team.clone(),
        amount: c(10_000),
        source: GrantSource::Admin("fund-team".into()),
        expires_at: None,
        now: t(NOW - HOUR),
    };
    store.grant(&grant).await.unwrap();
    let by = |member: &UserId, model: &str, whole: i64, key: &str| {
        let mut c = spend(&team, (whole, "chat"), key, NOW);
        c.member_id = Some(member.clone());
        c.context.model = Some(model.into());
        c
    };
    // Spent before the limits: bob 2 on gpt-4o, ada 3 on o3.
    store.consume(&by(&bob, "gpt-4o", 2, "s1")).await.unwrap();
    store.consume(&by(&ada, "o3", 3, "s2")).await.unwrap();
    let new = |id: &str, scope: LimitScope| NewSpendLimit {
        id: SpendLimitId::new(id).unwrap(),
        account_id: team.clone(),
        scope,
        limit: SpendLimit {
            credits: c(500),
            window: SpendWindow::Day,
            enforcement: Enforcement::Hard,
        },
        created_by: None,
        now: t(NOW),
    };
    let on_model = LimitScope {
        model: Some("o3".into()),
        ..LimitScope::default()
    };
    let on_bob = LimitScope {
        member: Some(bob.clone()),
        ..LimitScope::default()
    };
    let on_cy = LimitScope {
        member: Some(cy.clone()),
        ..LimitScope::default()
    };
    assert!(matches!(
        store.add_spend_limit(&new("lim_cy", on_cy)).await,
        Err(AddLimitError::NoSuchMember)
    ));
    let model = store
        .add_spend_limit(&new("lim_o3", on_model.clone()))
        .await
        .unwrap();
    assert_eq!(model.scope, on_model);
    let member = store
        .add_spend_limit(&new("lim_bob", on_bob.clone()))
        .await
        .unwrap();
    assert_eq!(member.scope, on_bob);
    assert_eq!(used(store, &team, &model.id, NOW).await, 300);
    assert_eq!(used(store, &team, &member.id, NOW).await, 200);
    // Bob's o3 spends count against both; ada's gpt-4o against neither.
    store.consume(&by(&bob, "o3", 1, "s3")).await.unwrap();
    store.consume(&by(&ada, "gpt-4o", 20, "s4")).await.unwrap();
    assert_eq!(used(store, &team, &model.id, NOW).await, 400);
    assert_eq!(used(store, &team, &member.id, NOW).await, 300);
    // Bob's hold on gpt-4o counts against his limit alone, and is refused past it.
    let mut held = hold(&team, 2, "r1", NOW);
    held.member_id = Some(bob.clone());
    held.context.model = Some("gpt-4o".into());
    store.reserve(&held).await.unwrap();
    assert_eq!(used(store, &team, &member.id, NOW).await, 500);
    assert_eq!(used(store, &team, &model.id, NOW).await, 400);
    let (id, left, _) = refused(store.consume(&by(&bob, "gpt-4o", 1, "s5")).await);
    assert_eq!((id, left), (member.id.clone(), 0));
    // Ada's o3 spend past the model's limit is refused, naming it.
    let refusal = store.consume(&by(&ada, "o3", 2, "s6")).await;
    let Err(SpendError::LimitReached(reached)) = refusal else {
        panic!("not refused: {refusal:?}")
    };
    assert_eq!(
        reached.owner,
        LimitOwner::Account {
            id: model.id.clone(),
            scope: Box::new(on_model),
        }
    );
    assert_eq!(reached.left, c(100));
    // Released, bob's hold gives his headroom back.
    let r1 = ReservationId::new("r1").unwrap();
    store
        .release((&team, Some(&bob)), &r1, t(NOW))
        .await
        .unwrap();
    assert_eq!(used(store, &team, &member.id, NOW).await, 300);
}

contract_tests!(
    model_and_member_limits_count_their_own_spends,
    a_reached_limit_is_told_reset_when_it_has_room_again,
    new_accounts_open_with_the_operator_s_ceiling,
    a_key_limit_counts_its_key_alone,
    a_limit_reached_is_told_once_per_crossing,
    a_daily_limit_refuses_past_it_and_resets_at_midnight,
    each_window_resets_when_it_says,
    holds_count_while_held_and_give_back_when_resolved,
    a_feature_limit_counts_its_feature_alone,
    a_new_limit_counts_its_window_so_far_and_a_removed_one_nothing,
);

mod concurrency {
    use super::*;

    concurrency_tests!(
        a_limit_is_never_passed_under_concurrency,
        limits_of_several_scopes_hold_under_concurrency,
    );
}
