//! Return URLs and return tokens, and customer-portal links: what is refused before anything
//! is written, how long tokens and links live, and that a link opens once.

use std::sync::Arc;

use domain::{OrderStatus, Origin, ReturnField, ReturnOrigins, ReturnUrl, ReturnUrls};

use super::harness::*;
use crate::accounts::{ApiKey, Role, Scope};
use crate::authorization::Denied;
use crate::ports::{MessageSigner, OrderRepository};
use crate::service::HostApp;
use crate::use_cases::initiate_payment::{InitiatePayment, InitiatePaymentError};
use crate::use_cases::portal::{
    CreatePortalSession, OpenPortalError, PORTAL_LINK_LIFETIME_MS, PORTAL_SESSION_LIFETIME_MS,
    PortalError,
};
use crate::use_cases::return_from_checkout::{
    CheckoutReturn, RETURN_TOKEN_GRACE_MS, ReturnError, ReturnPage,
};
use crate::use_cases::sessions::Principal;

/// Signs by spelling the message out with a key: enough to tell messages and keys apart.
struct SpellingSigner(&'static str);

impl MessageSigner for SpellingSigner {
    fn sign(&self, message: &str) -> String {
        format!("{}-{}", self.0, message.len()) + &message.replace(':', "_")
    }

    fn verify(&self, message: &str, tag: &str) -> bool {
        self.sign(message) == tag
    }
}

fn harness() -> Harness {
    let Harness { service, gateways } = Harness::new();
    let host_app = HostApp {
        return_origins: ReturnOrigins::new(
            vec![Origin::parse("https://app.example.com").unwrap()],
            false,
        ),
        signer: Some(Arc::new(SpellingSigner("k1"))),
    };
    Harness {
        service: service.with_host_app(host_app),
        gateways,
    }
}

fn returns(success: &str, cancel: Option<&str>) -> ReturnUrls {
    ReturnUrls {
        success: Some(ReturnUrl::parse(success).unwrap()),
        cancel: cancel.map(|c| ReturnUrl::parse(c).unwrap()),
    }
}

fn buy(user: &crate::accounts::User, returns: ReturnUrls) -> InitiatePayment {
    InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new("credits-100").unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns,
    }
}

fn token_of(url: &str) -> String {
    url.split("&rt=").nth(1).unwrap().to_owned()
}

#[tokio::test]
async fn a_return_url_outside_the_allowed_origins_is_refused_naming_it_before_anything_is_written()
{
    let h = harness();
    let user = h.user("a@example.com").await;
    let refused = h
        .service
        .initiate_payment(buy(
            &user,
            returns("https://app.example.com/ok", Some("https://evil.test/")),
        ))
        .await
        .unwrap_err();
    let InitiatePaymentError::ReturnUrlNotAllowed(refused) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(refused.field, ReturnField::CancelUrl);
    assert!(
        h.fake(domain::ProviderId::CardGateway)
            .checkouts()
            .is_empty()
    );
    let page = crate::pagination::PageRequest::new(None, None).unwrap();
    let orders = h
        .service
        .list_orders(&domain::AccountId::personal(&user.id), page)
        .await
        .unwrap();
    assert!(orders.items.is_empty());
}

#[tokio::test]
async fn the_gateway_is_given_tallys_pages_with_a_token_that_returns_to_the_host_until_it_expires()
{
    let h = harness();
    let user = h.user("a@example.com").await;
    let started = h
        .service
        .initiate_payment(buy(
            &user,
            returns("https://app.example.com/done?x=1", None),
        ))
        .await
        .unwrap();
    let order = started.order.order;
    assert_eq!(
        order.returns().success.as_ref().unwrap().as_str(),
        "https://app.example.com/done?x=1"
    );
    let asked = &h.fake(domain::ProviderId::CardGateway).checkouts()[0];
    assert!(
        asked
            .success_url
            .starts_with("http://tally.test/payment-success?orderId=")
    );
    let back = |token: String, page| CheckoutReturn {
        order_id: order.id().clone(),
        token,
        page,
    };
    let success = token_of(&asked.success_url);
    let returned = h
        .service
        .return_from_checkout(back(success.clone(), ReturnPage::Success))
        .await
        .unwrap();
    assert_eq!(
        returned.host_url.as_deref(),
        Some(
            format!(
                "https://app.example.com/done?x=1&orderId={}&outcome=pending",
                order.id()
            )
            .as_str()
        )
    );
    // The success page's token is not the cancel page's.
    let wrong_page = h
        .service
        .return_from_checkout(back(success.clone(), ReturnPage::Cancel))
        .await;
    assert!(matches!(wrong_page, Err(ReturnError::InvalidToken)));
    // A cancel without its own URL goes to the success URL, the outcome telling.
    let cancel = token_of(&asked.cancel_url);
    let left = h
        .service
        .return_from_checkout(back(cancel, ReturnPage::Cancel))
        .await
        .unwrap();
    assert_eq!(*left.record.order.status(), OrderStatus::Cancelled);
    assert!(left.host_url.unwrap().ends_with("&outcome=cancelled"));
    // Past the order's expiry and the grace, the token is refused.
    let life = order.expires_at().unix_millis() - START_MS;
    h.service.clock().advance_ms(life + RETURN_TOKEN_GRACE_MS);
    let expired = h
        .service
        .return_from_checkout(back(success, ReturnPage::Success))
        .await;
    assert!(matches!(expired, Err(ReturnError::InvalidToken)));
}

#[tokio::test]
async fn a_token_of_another_order_or_another_key_is_refused() {
    let h = harness();
    let user = h.user("a@example.com").await;
    let first = h
        .service
        .initiate_payment(buy(&user, returns("https://app.example.com/d", None)))
        .await
        .unwrap();
    let second = h
        .service
        .initiate_payment(buy(&user, returns("https://app.example.com/d", None)))
        .await
        .unwrap();
    let token = token_of(&h.fake(domain::ProviderId::CardGateway).checkouts()[0].success_url);
    let other = CheckoutReturn {
        order_id: second.order.order.id().clone(),
        token: token.clone(),
        page: ReturnPage::Success,
    };
    assert!(matches!(
        h.service.return_from_checkout(other).await,
        Err(ReturnError::InvalidToken)
    ));
    let (expiry, _) = token.split_once('.').unwrap();
    let forged = CheckoutReturn {
        order_id: first.order.order.id().clone(),
        token: format!("{expiry}.k2-forged"),
        page: ReturnPage::Success,
    };
    assert!(matches!(
        h.service.return_from_checkout(forged).await,
        Err(ReturnError::InvalidToken)
    ));
    assert!(
        h.service
            .store()
            .find_order(first.order.order.id())
            .await
            .unwrap()
            .is_some()
    );
}

fn key(scopes: &[Scope]) -> Principal {
    Principal::Service(ApiKey {
        id: "key_1".into(),
        owner: domain::UserId::new("usr_admin").unwrap(),
        name: "backend".into(),
        prefix: "tly_abcd".into(),
        scopes: scopes.to_vec(),
        account: None,
        created_at: domain::Timestamp::from_unix_millis(0),
        revoked_at: None,
    })
}

fn portal_request(user: &str, url: &str) -> CreatePortalSession {
    CreatePortalSession {
        user_id: user.to_owned(),
        account_id: None,
        return_url: url.to_owned(),
        locale: Some("zh-CN".into()),
    }
}

#[tokio::test]
async fn portal_links_need_the_scope_an_allowed_url_and_an_existing_user() {
    let h = harness();
    let user = h.user("a@example.com").await;
    let id = user.id.as_str();
    let ok_url = "https://app.example.com/account";
    let without = h
        .service
        .create_portal_session(key(&[Scope::CreditsRead]), portal_request(id, ok_url))
        .await;
    assert!(matches!(
        without,
        Err(PortalError::Denied(Denied::MissingScope(
            Scope::BillingWrite
        )))
    ));
    let as_user = h
        .service
        .create_portal_session(Principal::User(user.clone()), portal_request(id, ok_url))
        .await;
    assert!(matches!(as_user, Err(PortalError::Denied(_))));
    let evil = h
        .service
        .create_portal_session(
            key(&[Scope::BillingWrite]),
            portal_request(id, "https://evil.test/"),
        )
        .await;
    assert!(
        matches!(evil, Err(PortalError::ReturnUrlNotAllowed(r)) if r.field == ReturnField::ReturnUrl)
    );
    let nobody = h
        .service
        .create_portal_session(
            key(&[Scope::BillingWrite]),
            portal_request("usr_nobody", ok_url),
        )
        .await;
    assert!(matches!(
        nobody,
        Err(PortalError::Denied(Denied::UserNotFound))
    ));
}

#[tokio::test]
async fn a_portal_link_opens_once_within_five_minutes_into_a_thirty_minute_billing_session() {
    let h = harness();
    let user = h.user("a@example.com").await;
    h.service.promote_to_admin("a@example.com").await.unwrap();
    let url = "https://app.example.com/account";
    let link = h
        .service
        .create_portal_session(
            key(&[Scope::BillingWrite]),
            portal_request(user.id.as_str(), url),
        )
        .await
        .unwrap();
    assert_eq!(
        link.expires_at.unix_millis(),
        START_MS + PORTAL_LINK_LIFETIME_MS
    );
    let opened = h.service.open_portal(&link.token).await.unwrap();
    assert!(matches!(
        h.service.open_portal(&link.token).await,
        Err(OpenPortalError::Gone)
    ));
    let Principal::Portal(portal) = h.service.authenticate(&opened.token).await.unwrap() else {
        panic!("a portal session")
    };
    assert_eq!(portal.user.id, user.id);
    assert_eq!(portal.user.role, Role::User, "a portal never administers");
    assert_eq!(portal.return_url.as_str(), url);
    assert_eq!(portal.locale.as_deref(), Some("zh-CN"));
    h.service.clock().advance_ms(PORTAL_SESSION_LIFETIME_MS);
    assert!(
        h.service.authenticate(&opened.token).await.is_err(),
        "the session ended"
    );

    let late = h
        .service
        .create_portal_session(
            key(&[Scope::BillingWrite]),
            portal_request(user.id.as_str(), url),
        )
        .await
        .unwrap();
    h.service.clock().advance_ms(PORTAL_LINK_LIFETIME_MS);
    assert!(matches!(
        h.service.open_portal(&late.token).await,
        Err(OpenPortalError::Gone)
    ));
}
