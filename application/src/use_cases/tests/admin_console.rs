//! The admin console's use cases (issue 18): customer search rules, list validation, and the
//! audit entries written with a credit adjustment.

use domain::IdempotencyKey;
use rust_decimal::Decimal;

use super::harness::Harness;
use crate::accounts::Role;
use crate::cursor::CursorError;
use crate::ports::AuditAction;
use crate::use_cases::admin_console::{
    AdjustCredits, AdjustCreditsError, AdminListError, PageAfter, order_status,
};

fn first(limit: i64) -> PageAfter {
    PageAfter {
        cursor: None,
        limit: Some(limit),
    }
}

#[tokio::test]
async fn customers_are_searched_by_email_and_by_exact_or_prefix_id() {
    let h = Harness::new();
    let ada = h.user("Ada@example.com").await;
    h.user("adam@example.com").await;
    h.user("bob@example.com").await;
    let s = &h.service;
    let found = s.find_customers(Some("  ADA "), &first(10)).await.unwrap();
    assert_eq!(found.items.len(), 2, "trimmed and case-insensitive");
    let by_id = s
        .find_customers(Some(ada.id.as_str()), &first(10))
        .await
        .unwrap();
    assert_eq!(by_id.items[0].id, ada.id);
    let page = s.find_customers(None, &first(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    let cursor = page.next_cursor.clone().expect("a second page");
    let next = PageAfter {
        cursor: Some(cursor),
        limit: Some(2),
    };
    let rest = s.find_customers(None, &next).await.unwrap();
    assert_eq!((rest.items.len(), rest.next_cursor), (1, None));
    assert!(matches!(
        s.find_customers(Some(&"a".repeat(255)), &first(1)).await,
        Err(AdminListError::Invalid { field: "query", .. })
    ));
    let forged = PageAfter {
        cursor: Some("c1zz".into()),
        limit: None,
    };
    assert!(matches!(
        s.find_customers(None, &forged).await,
        Err(AdminListError::Page(CursorError::Invalid))
    ));
}

#[tokio::test]
async fn unknown_statuses_and_users_are_refused_not_empty() {
    let h = Harness::new();
    let s = &h.service;
    assert!(matches!(
        order_status("lost"),
        Err(AdminListError::Invalid {
            field: "status",
            ..
        })
    ));
    assert!(matches!(
        s.customer_overview(&domain::UserId::new("usr_nobody").unwrap())
            .await,
        Err(AdminListError::UserNotFound)
    ));
    assert!(matches!(
        s.customer_transactions(&domain::UserId::new("usr_nobody").unwrap(), &first(5))
            .await,
        Err(AdminListError::UserNotFound)
    ));
}

#[tokio::test]
async fn an_adjustment_is_audited_once_with_its_admin_and_balances() {
    let h = Harness::new();
    let user = h.user("ada@example.com").await;
    let mut admin = h.user("boss@example.com").await;
    admin.role = Role::Admin;
    let grant = AdjustCredits {
        admin: admin.clone(),
        account_id: domain::AccountId::personal(&user.id),
        amount: Decimal::new(1250, 2),
        reason: "outage".into(),
        expires_at: None,
        category: None,
        priority: None,
        idempotency_key: IdempotencyKey::new("grant-1").unwrap(),
    };
    let s = &h.service;
    s.adjust_credits(&grant).await.unwrap();
    s.adjust_credits(&grant).await.unwrap();
    let log = s.audit_log(&first(10)).await.unwrap();
    assert_eq!(log.items.len(), 1, "a replay is not audited again");
    let entry = &log.items[0];
    assert_eq!(entry.action, AuditAction::CreditsGranted);
    assert_eq!(
        (&entry.admin_id, entry.object_id.as_str()),
        (&admin.id, user.id.as_str())
    );
    assert!(
        entry
            .before
            .as_deref()
            .unwrap()
            .contains("balanceHundredths=0")
    );
    assert!(
        entry
            .after
            .as_deref()
            .unwrap()
            .contains("balanceHundredths=1250")
    );
    let overview = s.customer_overview(&user.id).await.unwrap();
    assert_eq!(overview.status.balance.hundredths(), 1250);
    assert!(overview.totals.is_empty(), "a grant is not a payment");
    let ledger = s.customer_transactions(&user.id, &first(5)).await.unwrap();
    assert_eq!(
        ledger.items[0].context.note.as_deref(),
        Some(format!("outage ({})", admin.id).as_str())
    );
}

/// A user of `h` with the administrator's role.
async fn administrator(h: &Harness, email: &str) -> crate::accounts::User {
    let mut admin = h.user(email).await;
    admin.role = Role::Admin;
    admin
}

#[tokio::test]
async fn an_adjustment_key_used_again_for_another_user_or_request_is_a_conflict() {
    let h = Harness::new();
    let ada = h.user("ada-key@example.com").await;
    let bob = h.user("bob-key@example.com").await;
    let admin = administrator(&h, "boss-key@example.com").await;
    let adjust = |user: &crate::accounts::User, hundredths: i64| AdjustCredits {
        admin: admin.clone(),
        account_id: domain::AccountId::personal(&user.id),
        amount: Decimal::new(hundredths, 2),
        reason: "goodwill".into(),
        expires_at: None,
        category: None,
        priority: None,
        idempotency_key: IdempotencyKey::new("same-key").unwrap(),
    };
    let s = &h.service;
    s.adjust_credits(&adjust(&ada, 500)).await.unwrap();
    let replay = s.adjust_credits(&adjust(&ada, 500)).await.unwrap();
    assert!(replay.transaction.is_none(), "the same request replays");
    for other in [adjust(&bob, 500), adjust(&bob, -100), adjust(&ada, 700)] {
        assert!(
            matches!(
                s.adjust_credits(&other).await,
                Err(AdjustCreditsError::IdempotencyConflict)
            ),
            "{other:?}"
        );
    }
    for (user, hundredths) in [(&bob, 0), (&ada, 500)] {
        let overview = s.customer_overview(&user.id).await.unwrap();
        assert_eq!(overview.status.balance.hundredths(), hundredths);
    }
}

#[tokio::test]
async fn a_grant_past_the_largest_balance_is_refused_naming_the_amount_and_the_limit() {
    let h = Harness::new();
    let ada = h.user("ada-big@example.com").await;
    let admin = administrator(&h, "boss-big@example.com").await;
    let grant = |key: &str, amount: Decimal| AdjustCredits {
        admin: admin.clone(),
        account_id: domain::AccountId::personal(&ada.id),
        amount,
        reason: "big".into(),
        expires_at: None,
        category: None,
        priority: None,
        idempotency_key: IdempotencyKey::new(key).unwrap(),
    };
    let s = &h.service;
    let near_max = Decimal::from(999_999_999_000_i64);
    s.adjust_credits(&grant("big-1", near_max)).await.unwrap();
    match s.adjust_credits(&grant("big-2", near_max)).await {
        Err(AdjustCreditsError::Invalid { field, message }) => {
            assert_eq!(field, "amount");
            assert!(message.contains("1000000000000.00"), "{message}");
        }
        other => panic!("not refused: {other:?}"),
    }
    match s
        .adjust_credits(&grant("big-3", Decimal::from(2_000_000_000_000_i64)))
        .await
    {
        Err(AdjustCreditsError::Invalid { field, message }) => {
            assert_eq!(field, "amount");
            assert!(message.contains("1000000000000.00"), "{message}");
        }
        other => panic!("not refused: {other:?}"),
    }
    let replay = s.adjust_credits(&grant("big-1", near_max)).await.unwrap();
    assert!(replay.transaction.is_none(), "a replay is still a replay");
    assert_eq!(replay.balance.to_decimal(), near_max, "nothing was added");
}

#[tokio::test]
async fn the_in_memory_store_gives_sign_up_credits_once_with_each_new_user() {
    use domain::{Credits, Timestamp, TransactionKind, UserId};

    use crate::accounts::Email;
    use crate::pagination::PageRequest;
    use crate::ports::{CreditLedger, NewHostUser, NewUser, SignupGrant, UserRepository};
    use crate::sign_up::SignupIdentity;
    use crate::testing::InMemoryStore;

    const DAY_MS: i64 = 86_400_000;
    let grant = SignupGrant {
        amount: Credits::from_hundredths(2_500).unwrap(),
        expires_after_days: Some(30),
        daily_cap: std::num::NonZeroU32::new(100).unwrap(),
    };
    let store = InMemoryStore::new().with_signup_grant(Some(grant));
    let at = Timestamp::from_unix_millis(super::harness::START_MS);
    let new_user = |id: &str, email: &str| NewUser {
        id: UserId::new(id).unwrap(),
        email: Email::parse(email).unwrap(),
        password_hash: None,
        role: Role::User,
        created_at: at,
        signup_identity: Some(SignupIdentity::of_email(&Email::parse(email).unwrap())),
    };
    let ada = store
        .create_user(&new_user("usr_ada", "ada@example.com"))
        .await
        .unwrap();
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&ada.id))
            .await
            .unwrap(),
        grant.amount
    );
    let page = PageRequest::new(None, Some(10)).unwrap();
    let ledger = store
        .transactions(&domain::AccountId::personal(&ada.id), page)
        .await
        .unwrap();
    assert_eq!(ledger.items.len(), 1);
    let entry = &ledger.items[0];
    assert_eq!(entry.kind, TransactionKind::AdminAdjustment);
    assert_eq!(entry.context.note.as_deref(), Some("sign-up credits"));
    assert!(
        store
            .create_user(&new_user("usr_ada", "ada2@example.com"))
            .await
            .is_err(),
        "a refused user gets nothing"
    );
    assert_eq!(store.all_transactions().len(), 1);

    let host = NewHostUser {
        issuer: "https://host.example".into(),
        subject: "42".into(),
        created_at: at,
        signup_identity: Some(SignupIdentity::of_host_subject(
            "https://host.example",
            "42",
        )),
        contact: Default::default(),
    };
    let first_visit = store.find_or_create_host_user(&host).await.unwrap();
    let again = store.find_or_create_host_user(&host).await.unwrap();
    assert_eq!(first_visit.id, again.id);
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&again.id))
            .await
            .unwrap(),
        grant.amount
    );
    assert_eq!(store.all_transactions().len(), 2, "given once per user");

    // The lot expires with the grant's days, like any other lot.
    let expired_at = Timestamp::from_unix_millis(at.unix_millis() + 30 * DAY_MS + 1);
    assert_eq!(store.expire_grants(expired_at, 10).await.unwrap(), 2);
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&ada.id))
            .await
            .unwrap(),
        Credits::ZERO
    );

    let plain = InMemoryStore::new();
    let bob = plain
        .create_user(&new_user("usr_bob", "bob@example.com"))
        .await
        .unwrap();
    assert_eq!(
        plain
            .balance(&domain::AccountId::personal(&bob.id))
            .await
            .unwrap(),
        Credits::ZERO
    );
    assert!(plain.all_transactions().is_empty());
}

#[tokio::test]
async fn an_administrators_cancel_is_audited_with_its_write_once_and_again_after_a_resume() {
    use domain::{ProviderId, RenewalIntent, Timestamp};

    use super::harness::{START_MS, by_id, period, usd};
    use crate::ports::PaymentEvent;
    use crate::use_cases::initiate_payment::InitiatePayment;

    let h = Harness::new();
    let s = &h.service;
    let user = h.user("ada@example.com").await;
    let admin = h.user("boss@example.com").await;
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new("pro-monthly").unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    let order = s.initiate_payment(request).await.unwrap();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(order.order.order.id()),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS),
    };
    h.deliver(ProviderId::CardGateway, "act", vec![activated])
        .await
        .unwrap();
    let id = s.report_status(&user).await.unwrap().subscription.unwrap();
    let id = id.id().to_string();
    let log = || async { s.audit_log(&first(10)).await.unwrap().items };

    s.clock().advance_ms(1_000);
    let ending = s
        .cancel_subscription_for_customer(&admin, &super::harness::sub_id(&id))
        .await;
    assert_eq!(ending.unwrap().renewal(), RenewalIntent::EndsAtPeriodEnd);
    s.cancel_subscription_for_customer(&admin, &super::harness::sub_id(&id))
        .await
        .unwrap();
    let entries = log().await;
    assert_eq!(entries.len(), 1, "already scheduled: no second entry");
    assert_eq!(entries[0].action, AuditAction::SubscriptionCanceled);
    assert_eq!(entries[0].object_id, id);
    assert!(
        entries[0]
            .after
            .as_deref()
            .unwrap()
            .contains("cancelAtPeriodEnd=true")
    );

    // Resumed by the subscriber, then cancelled again: a write (and an entry) of its own.
    s.clock().advance_ms(1_000);
    s.resume_subscription(&user, &super::harness::sub_id(&id))
        .await
        .unwrap();
    s.clock().advance_ms(1_000);
    let again = s
        .cancel_subscription_for_customer(&admin, &super::harness::sub_id(&id))
        .await;
    assert_eq!(again.unwrap().renewal(), RenewalIntent::EndsAtPeriodEnd);
    assert_eq!(log().await.len(), 2);
    assert_eq!(
        h.fake(ProviderId::CardGateway).cancelled_subscriptions(),
        ["sub_1", "sub_1", "sub_1"]
    );
}

#[tokio::test]
async fn team_accounts_are_listed_newest_first_and_read_with_members_and_seats() {
    use crate::use_cases::teams::MemberRequest;
    use domain::{AccountId, MemberRole};
    let h = Harness::new();
    let ada = h.user("ada-team@example.com").await;
    let bob = h.user("bob-team@example.com").await;
    let admin = administrator(&h, "boss-team@example.com").await;
    let s = &h.service;
    let first_team = s.create_team(&ada.id, "First").await.unwrap().account.id;
    s.clock().advance_ms(1_000);
    let second_team = s.create_team(&bob.id, "Second").await.unwrap().account.id;
    s.clock().advance_ms(1_000);
    let add = MemberRequest::Add {
        role: MemberRole::Member,
        limit: None,
    };
    s.change_team_member(&ada.id, &first_team, &bob.id, add)
        .await
        .unwrap();
    let grant = AdjustCredits {
        admin,
        account_id: first_team.clone(),
        amount: Decimal::new(4200, 2),
        reason: "pilot".into(),
        expires_at: None,
        category: None,
        priority: None,
        idempotency_key: IdempotencyKey::new("team-grant").unwrap(),
    };
    s.adjust_credits(&grant).await.unwrap();

    let page = s.admin_team_accounts(&first(1)).await.unwrap();
    assert_eq!(page.items[0].account.id, second_team, "newest first");
    assert_eq!(page.items[0].members, 1);
    let next = PageAfter {
        cursor: page.next_cursor.clone(),
        limit: Some(1),
    };
    let rest = s.admin_team_accounts(&next).await.unwrap();
    let listed = &rest.items[0];
    assert_eq!(listed.account.id, first_team);
    assert_eq!((listed.members, listed.balance.hundredths()), (2, 4200));
    assert_eq!(rest.next_cursor, None, "personal accounts are never listed");

    let team = s.admin_team_account(&first_team).await.unwrap();
    assert_eq!(team.account.name.as_deref(), Some("First"));
    assert_eq!(team.balance.hundredths(), 4200);
    let members: Vec<_> = team.members.iter().map(|m| (&m.user_id, m.role)).collect();
    assert_eq!(
        members,
        [(&ada.id, MemberRole::Owner), (&bob.id, MemberRole::Member)]
    );
    assert_eq!(team.seats, None, "no seats plan held: no cap");
    for unknown in [
        AccountId::personal(&ada.id),
        AccountId::new("team_nobody").unwrap(),
    ] {
        assert!(
            matches!(
                s.admin_team_account(&unknown).await,
                Err(AdminListError::AccountNotFound)
            ),
            "{unknown}"
        );
    }
    // Bob's teams, oldest membership first: his own, then the one he joined later.
    let overview = s.customer_overview(&bob.id).await.unwrap();
    let teams: Vec<_> = overview
        .teams
        .iter()
        .map(|m| (&m.account.id, m.role))
        .collect();
    assert_eq!(
        teams,
        [
            (&second_team, MemberRole::Owner),
            (&first_team, MemberRole::Member)
        ]
    );
}
