//! Accounts, API keys and plan listing.

use domain::{Locale, ProviderId};

use super::harness::*;
use crate::accounts::{Role, Scope};
use crate::ports::AuditAction;
use crate::use_cases::admin_console::PageAfter;
use crate::use_cases::initiate_payment::{InitiatePayment, InitiatePaymentError};
use crate::use_cases::manage_plans::{ManagePlansError, PlanInput};
use crate::use_cases::plans::{Audience, PricingMode, list_plans};
use crate::use_cases::sessions::{AccountsError, Principal};

#[tokio::test]
async fn register_sign_in_authenticate_and_sign_out() {
    let h = Harness::new();
    let signed = h
        .service
        .register(
            "Ada@Example.com",
            "password123".into(),
            Role::User,
            &crate::testing::client_of("Ada@Example.com"),
        )
        .await
        .unwrap();
    assert_eq!(signed.user.email.as_str(), "ada@example.com");
    let taken = h
        .service
        .register(
            "ada@example.com",
            "password123".into(),
            Role::User,
            &crate::testing::client_of("ada@example.com"),
        )
        .await
        .unwrap_err();
    assert!(matches!(taken, AccountsError::EmailTaken));
    let wrong = h
        .service
        .sign_in("ada@example.com", "wrong-password".into())
        .await
        .unwrap_err();
    assert!(matches!(wrong, AccountsError::WrongCredentials));
    let session = h
        .service
        .sign_in("ada@example.com", "password123".into())
        .await
        .unwrap();
    assert!(
        matches!(h.service.authenticate(&session.token).await.unwrap(), Principal::User(u) if u.id == signed.user.id)
    );
    h.service.sign_out(&session.token).await.unwrap();
    assert!(matches!(
        h.service.authenticate(&session.token).await,
        Err(AccountsError::Unauthenticated)
    ));
    h.service.clock().advance_ms(86_400_001);
    assert!(matches!(
        h.service.authenticate(&signed.token).await,
        Err(AccountsError::Unauthenticated)
    ));
}

#[tokio::test]
async fn api_keys_are_shown_once_scoped_and_revocable() {
    let h = Harness::new();
    let admin = h
        .service
        .register(
            "root@example.com",
            "password123".into(),
            Role::Admin,
            &crate::testing::client_of("root@example.com"),
        )
        .await
        .unwrap()
        .user;
    let created = h
        .service
        .create_api_key(&admin, "backend", &["credits:consume".into()], None)
        .await
        .unwrap();
    assert!(created.secret.starts_with("tly_"));
    let principal = h.service.authenticate(&created.secret).await.unwrap();
    assert!(principal.has_scope(Scope::CreditsConsume));
    assert!(!principal.has_scope(Scope::CreditsRead));
    assert!(
        h.service
            .create_api_key(&admin, "x", &["credits:everything".into()], None)
            .await
            .is_err()
    );
    h.service
        .revoke_api_key(
            &admin,
            &domain::ApiKeyId::new(created.key.id.clone()).unwrap(),
        )
        .await
        .unwrap();
    assert!(h.service.authenticate(&created.secret).await.is_err());
}

#[tokio::test]
async fn static_listing_hides_hidden_plans_and_dynamic_listing_follows_sort_order_and_locales() {
    let h = Harness::new();
    let administrator = h.admin().await;
    let catalog = catalog();
    let listed = list_plans(
        PricingMode::Static,
        &catalog,
        h.service.gateways(),
        h.service.store(),
        Audience::Public,
        None,
    )
    .await
    .unwrap();
    assert_eq!(listed.len(), 4);
    let importer = h.admin().await;
    assert_eq!(
        h.service
            .import_static_plans(&importer)
            .await
            .unwrap()
            .created,
        4
    );
    // The import is an administrator's change like any other: audited with its write.
    let log = h.service.audit_log(&PageAfter::default()).await.unwrap();
    let entry = &log.items[0];
    assert_eq!(
        (entry.action, entry.admin_id.clone()),
        (AuditAction::PlansImported, importer.id.clone())
    );
    h.service
        .set_plan_hidden(&administrator, &plan_id("lifetime"), true)
        .await
        .unwrap();
    h.service
        .reorder_plans(
            &administrator,
            &[plan_id("qr-credits"), plan_id("credits-100")],
        )
        .await
        .unwrap();
    let mut restricted = PlanInput {
        draft: plan("zh-only", "wallet_web", "one_time", "1", "CNY", None).to_draft(),
        sort_order: 99,
        locales: vec!["zh-CN".into()],
    };
    h.service
        .create_plan(&administrator, &restricted)
        .await
        .unwrap();
    let en = Locale::parse("en").unwrap();
    let zh = Locale::parse("zh-CN").unwrap();
    let ids = |plans: Vec<crate::ports::StoredPlan>| {
        plans
            .iter()
            .map(|p| p.plan.id().as_str().to_owned())
            .collect::<Vec<_>>()
    };
    let public_en = list_plans(
        PricingMode::Dynamic,
        &catalog,
        h.service.gateways(),
        h.service.store(),
        Audience::Public,
        Some(&en),
    )
    .await
    .unwrap();
    assert_eq!(ids(public_en), ["qr-credits", "credits-100", "pro-monthly"]);
    let public_zh = list_plans(
        PricingMode::Dynamic,
        &catalog,
        h.service.gateways(),
        h.service.store(),
        Audience::Public,
        Some(&zh),
    )
    .await
    .unwrap();
    assert_eq!(ids(public_zh).last().map(String::as_str), Some("zh-only"));
    let admin = list_plans(
        PricingMode::Dynamic,
        &catalog,
        h.service.gateways(),
        h.service.store(),
        Audience::Admin,
        None,
    )
    .await
    .unwrap();
    assert_eq!(admin.len(), 5);
    restricted.draft.amount = Some("-1".parse().unwrap());
    restricted.locales.push("not a locale".into());
    let ManagePlansError::Invalid(errors) = h
        .service
        .update_plan(&administrator, "zh-only", &restricted)
        .await
        .unwrap_err()
    else {
        panic!()
    };
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["amount", "locales"]);
    let _ = ProviderId::ALL;
}

#[tokio::test]
async fn plans_of_a_provider_without_a_gateway_are_neither_listed_nor_sold() {
    let h = Harness::only(config(), &[ProviderId::CardGateway]);
    let catalog = catalog();
    let listing = |audience| {
        list_plans(
            PricingMode::Static,
            &catalog,
            h.service.gateways(),
            h.service.store(),
            audience,
            None,
        )
    };
    let public = listing(Audience::Public).await.unwrap();
    assert!(!public.is_empty());
    assert!(
        public
            .iter()
            .all(|p| p.plan.provider() == ProviderId::CardGateway),
        "only the live provider's plans are listed"
    );
    let admin = listing(Audience::Admin).await.unwrap();
    assert!(
        admin.len() > public.len(),
        "administrators still see every plan"
    );
    let off = catalog
        .iter()
        .find(|p| p.provider() != ProviderId::CardGateway)
        .expect("the test catalog has a plan of another provider");
    let buyer = h.user("buyer@example.com").await;
    let refused = h
        .service
        .initiate_payment(InitiatePayment {
            save_method: false,
            user: buyer,
            account: None,
            plan_id: off.id().clone(),
            provider: off.provider(),
            idempotency_key: None,
            returns: Default::default(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(refused, InitiatePaymentError::ProviderUnavailable(p) if p == off.provider()),
        "{refused:?}"
    );
}
