//! The admin console's use cases (issue 18): customer search rules, list validation, and the
//! audit entries written with a credit adjustment.

use domain::IdempotencyKey;
use rust_decimal::Decimal;

use super::harness::Harness;
use crate::accounts::Role;
use crate::cursor::CursorError;
use crate::ports::{AuditAction, OrderFilter};
use crate::use_cases::admin_console::{AdjustCredits, AdminListError, PageAfter};

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
    let lost = OrderFilter {
        status: Some("lost".into()),
        ..OrderFilter::default()
    };
    assert!(matches!(
        s.admin_orders(&lost, &first(5)).await,
        Err(AdminListError::Invalid {
            field: "status",
            ..
        })
    ));
    assert!(matches!(
        s.customer_overview("usr_nobody").await,
        Err(AdminListError::UserNotFound)
    ));
    assert!(matches!(
        s.customer_transactions("usr_nobody", &first(5)).await,
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
        user_id: user.id.to_string(),
        amount: Decimal::new(1250, 2),
        reason: "outage".into(),
        expires_at: None,
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
    let overview = s.customer_overview(user.id.as_str()).await.unwrap();
    assert_eq!(overview.status.balance.hundredths(), 1250);
    assert!(overview.totals.is_empty(), "a grant is not a payment");
    let ledger = s
        .customer_transactions(user.id.as_str(), &first(5))
        .await
        .unwrap();
    assert_eq!(
        ledger.items[0].context.note.as_deref(),
        Some(format!("outage ({})", admin.id).as_str())
    );
}
