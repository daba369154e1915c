//! The dynamic plans table.

use std::collections::BTreeMap;

use application::cursor::Keyset;
use application::ports::{
    AdminConsoleStore, AuditAction, ImportReport, Listing, NewAudit, PlanRepository, StoreError,
    StoredPlan, Writes,
};
use domain::{Locale, Plan, PlanDraft, PlanId, PlanText, ProviderId, ProviderRefs};

use crate::support::{TestStore, contract_tests, t};

fn texts() -> BTreeMap<String, PlanText> {
    let en = PlanText {
        name: "Pro".into(),
        description: "Everything, \"quoted\" and ünïcode".into(),
        duration: "month".into(),
        features: vec!["Fast".into(), "Friendly".into()],
    };
    let zh = PlanText {
        name: "专业版".into(),
        features: vec!["快速".into()],
        ..PlanText::default()
    };
    [("en".to_owned(), en), ("zh-CN".to_owned(), zh)].into()
}

/// A plan with every optional field set.
fn rich_plan(id: &str) -> Plan {
    let draft = PlanDraft {
        bonus_credits: None,
        bonus_expires_in_days: None,
        id: id.into(),
        provider: Some("mor_a".into()),
        amount: Some("9.99".parse().unwrap()),
        original_amount: Some("19.99".parse().unwrap()),
        development_amount: Some("0.01".parse().unwrap()),
        currency: Some("USD".into()),
        recommended: true,
        hidden: false,
        months: Some(12),
        duration_type: Some("credits".into()),
        credits: Some("100.5".parse().unwrap()),
        provider_refs: ProviderRefs::default()
            .with(ProviderId::CardGateway, "price_1")
            .with(ProviderId::WalletGlobal, "P-1")
            .with(ProviderId::MorA, "prod_a")
            .with(ProviderId::MorC, "PROD_c"),
        i18n: texts(),
        entitlements: BTreeMap::new(),
        group: Some("pro".into()),
    };
    Plan::from_draft(&draft).unwrap()
}

/// A plain plan: hidden lifetime one-time in CNY.
fn plain_plan(id: &str, amount: &str) -> Plan {
    let draft = PlanDraft {
        id: id.into(),
        provider: Some("wallet_qr".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some("CNY".into()),
        hidden: true,
        months: Some(999_999),
        duration_type: Some("one_time".into()),
        i18n: [(
            "en".to_owned(),
            PlanText {
                name: "Lifetime".into(),
                ..PlanText::default()
            },
        )]
        .into(),
        ..PlanDraft::default()
    };
    Plan::from_draft(&draft).unwrap()
}

fn stored(plan: Plan, sort_order: i32, locales: &[&str]) -> StoredPlan {
    let locales = locales.iter().map(|l| Locale::parse(l).unwrap()).collect();
    StoredPlan {
        plan,
        listing: Listing {
            sort_order,
            locales,
        },
    }
}

fn pid(id: &str) -> PlanId {
    PlanId::new(id).unwrap()
}

async fn ids(store: &TestStore) -> Vec<(String, i32)> {
    let plans = store.list_plans().await.unwrap();
    plans
        .into_iter()
        .map(|p| (p.plan.id().as_str().to_owned(), p.listing.sort_order))
        .collect()
}

async fn plans_round_trip_through_storage_unchanged(store: &TestStore) {
    let rich = stored(rich_plan("pro"), 2, &["en", "zh-CN"]);
    let plain = stored(plain_plan("life", "0.01"), 1, &[]);
    store.create_plan(&rich, t(1)).await.unwrap();
    store.create_plan(&plain, t(1)).await.unwrap();
    assert_eq!(
        store.find_plan(&pid("pro")).await.unwrap(),
        Some(rich.clone())
    );
    assert_eq!(store.find_plan(&pid("nope")).await.unwrap(), None);
    assert_eq!(store.list_plans().await.unwrap(), vec![plain, rich.clone()]);
    assert!(matches!(
        store.create_plan(&rich, t(2)).await,
        Err(StoreError::Conflict(_))
    ));
}

async fn plans_are_updated_and_deleted_and_unknown_ids_are_not_found(store: &TestStore) {
    store
        .create_plan(&stored(plain_plan("life", "1.00"), 0, &[]), t(1))
        .await
        .unwrap();
    let changed = stored(plain_plan("life", "2.50"), 7, &["fr"]);
    store.update_plan(&changed, t(2)).await.unwrap();
    assert_eq!(store.find_plan(&pid("life")).await.unwrap(), Some(changed));
    let ghost = stored(plain_plan("ghost", "1.00"), 0, &[]);
    assert!(matches!(
        store.update_plan(&ghost, t(3)).await,
        Err(StoreError::NotFound)
    ));
    store.delete_plan(&pid("life")).await.unwrap();
    assert_eq!(store.list_plans().await.unwrap(), Vec::new());
    assert!(matches!(
        store.delete_plan(&pid("life")).await,
        Err(StoreError::NotFound)
    ));
}

async fn reorder_lists_the_given_plans_first_and_refuses_unknown_ids(store: &TestStore) {
    for (i, id) in ["a", "b", "c", "d"].into_iter().enumerate() {
        let order = i32::try_from(i).unwrap() * 10;
        store
            .create_plan(&stored(plain_plan(id, "1.00"), order, &[]), t(1))
            .await
            .unwrap();
    }
    store
        .reorder_plans(&[pid("c"), pid("a")], t(2))
        .await
        .unwrap();
    let expected = [("c", 0), ("a", 1), ("b", 2), ("d", 3)].map(|(id, o)| (id.to_owned(), o));
    assert_eq!(ids(store).await, expected);
    let refused = store.reorder_plans(&[pid("d"), pid("ghost")], t(3)).await;
    assert!(matches!(refused, Err(StoreError::NotFound)), "{refused:?}");
    assert_eq!(
        ids(store).await,
        expected,
        "a refused reorder changes nothing"
    );
}

async fn import_creates_and_replaces_plans_keeping_their_listing(store: &TestStore) {
    let admin = crate::support::user(store, "admin").await;
    let entry = |at: i64| NewAudit {
        admin_id: admin.clone(),
        action: AuditAction::PlansImported,
        object_kind: "plan",
        object_id: "catalog".into(),
        before: None,
        after: None,
        at: t(at),
    };
    store
        .create_plan(&stored(plain_plan("life", "1.00"), 5, &["de"]), t(1))
        .await
        .unwrap();
    let report = store
        .import_plans(&[plain_plan("life", "3.00"), rich_plan("pro")], &entry(2))
        .await
        .unwrap();
    assert_eq!(
        report,
        ImportReport {
            created: 1,
            updated: 1
        }
    );
    assert_eq!(
        store.find_plan(&pid("life")).await.unwrap(),
        Some(stored(plain_plan("life", "3.00"), 5, &["de"]))
    );
    assert_eq!(
        store.find_plan(&pid("pro")).await.unwrap(),
        Some(stored(rich_plan("pro"), 6, &[]))
    );
    let again = store
        .import_plans(&[rich_plan("pro")], &entry(3))
        .await
        .unwrap();
    assert_eq!(
        again,
        ImportReport {
            created: 0,
            updated: 1
        }
    );
    let log = store.audit_page(&Keyset::first(10)).await.unwrap();
    let imports = log
        .items
        .iter()
        .filter(|e| e.action == AuditAction::PlansImported)
        .count();
    assert_eq!(imports, 2, "each import is written with its audit entry");
}

contract_tests!(
    plans_round_trip_through_storage_unchanged,
    plans_are_updated_and_deleted_and_unknown_ids_are_not_found,
    reorder_lists_the_given_plans_first_and_refuses_unknown_ids,
    import_creates_and_replaces_plans_keeping_their_listing,
);
