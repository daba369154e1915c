//! The dashboard's "Teams" tab: the user's teams with their balance, members, limits, seats and
//! open invitations, read as their owner and as a plain member; and the console's team
//! accounts, read by an administrator only.

use application::use_cases::plans::PricingMode;
use application::use_cases::teams::MemberRequest;
use domain::{Credits, LimitWindow, MemberLimit, MemberRole, UserId};

use poem::http::StatusCode;

use super::harness::App;

async fn user_id(app: &App, email: &str) -> UserId {
    user(app, email).await.id
}

async fn user(app: &App, email: &str) -> application::accounts::User {
    let email = application::accounts::Email::parse(email).unwrap();
    use application::ports::UserRepository;
    let (user, _) = app
        .service
        .store()
        .find_user_by_email(&email)
        .await
        .unwrap()
        .unwrap();
    user
}

#[tokio::test]
async fn the_teams_tab_shows_each_team_its_members_limits_and_invitations() {
    let app = App::new(PricingMode::Static);
    let ada = app.signed_in("ada@example.com", false).await;
    let bob = app.signed_in("bob@example.com", false).await;
    let (ada_id, bob_id) = (
        user_id(&app, "ada@example.com").await,
        user_id(&app, "bob@example.com").await,
    );
    // Nothing yet: a word on what a team is.
    let empty = ada.get("/dashboard?tab=teams").await;
    assert!(
        empty.body.contains("data-testid=\"no-teams\""),
        "{}",
        empty.body
    );
    assert!(
        empty
            .body
            .contains("aria-current=\"page\" data-testid=\"tab-teams\"")
            || empty
                .body
                .contains("data-testid=\"tab-teams\" aria-current=\"page\"")
    );

    let team = app
        .service
        .create_team(&ada_id, "Acme <research>")
        .await
        .unwrap();
    let limit = MemberLimit {
        credits: Credits::from_whole(10).unwrap(),
        window: LimitWindow::Day,
    };
    let add = MemberRequest::Add {
        role: MemberRole::Member,
        limit: Some(limit),
    };
    let id = &team.account.id;
    app.service
        .change_team_member(&ada_id, id, &bob_id, add)
        .await
        .unwrap();
    app.service
        .invite_member(&ada_id, id, "cy@example.com", (MemberRole::Admin, None))
        .await
        .unwrap();

    let page = ada.get("/dashboard?tab=teams").await;
    let body = &page.body;
    assert_eq!(body.matches("data-testid=\"team\"").count(), 1, "{body}");
    assert!(body.contains("Acme &lt;research&gt;"), "escaped: {body}");
    assert!(body.contains("bob@example.com"));
    assert!(body.contains("0.00 of 10.00 credits this day"), "{body}");
    assert!(body.contains("2 members"), "{body}");
    assert!(body.contains("data-testid=\"team-invitations\""));
    assert!(body.contains("cy@example.com"));
    assert!(!body.contains("tinv_"), "never the token");
    // A plain member sees the team and its members, not its invitations.
    let as_member = bob.get("/dashboard?tab=teams").await;
    assert!(as_member.body.contains("data-testid=\"team\""));
    assert!(
        !as_member.body.contains("cy@example.com"),
        "{}",
        as_member.body
    );
}

/// The id of the one team `user` created, from the Teams tab's forms.
fn team_id_in(body: &str) -> String {
    let marker = "name=\"accountId\" value=\"";
    let start = body.find(marker).expect("a team form") + marker.len();
    let end = start + body[start..].find('"').unwrap();
    body[start..end].to_owned()
}

#[tokio::test]
async fn a_team_is_created_filled_and_left_through_the_tab_s_forms() {
    let app = App::new(PricingMode::Static);
    let ada = app.signed_in("ada@example.com", false).await;
    let bob = app.signed_in("bob@example.com", false).await;
    let tab = "/dashboard?tab=teams";
    let created = ada
        .submit(tab, "/dashboard/teams/create", &[("name", "Acme")])
        .await;
    assert_eq!(
        created.location(),
        "/dashboard?tab=teams&notice=team_created"
    );
    let page = ada.get(created.location()).await;
    assert!(page.body.contains("The team was created."), "{}", page.body);
    let team = team_id_in(&page.body);

    // An invitation's link is shown once, on the answer to the form.
    let bad = ada
        .submit(
            tab,
            "/dashboard/teams/invite",
            &[("accountId", &team), ("email", "nope")],
        )
        .await;
    assert_eq!(
        bad.location(),
        "/dashboard?tab=teams&notice=team_invalid_email"
    );
    let invited = ada
        .submit(
            tab,
            "/dashboard/teams/invite",
            &[
                ("accountId", &team),
                ("email", "bob@example.com"),
                ("role", "member"),
                ("limitCredits", "12.5"),
                ("limitWindow", "week"),
            ],
        )
        .await;
    assert_eq!(invited.status, StatusCode::CREATED, "{}", invited.body);
    let marker = "/invitations/accept?token=";
    let start = invited.body.find(marker).expect("the link") + marker.len();
    let token: String = invited.body[start..]
        .chars()
        .take_while(|c| *c != '"')
        .collect();
    assert!(token.starts_with("tinv_"), "{token}");
    assert!(!ada.get(tab).await.body.contains(&token), "shown once");

    // Someone else's address is refused; the invitee joins with one button.
    let accept = format!("{marker}{token}");
    let carol = app.signed_in("carol@example.com", false).await;
    let other = carol
        .submit(&accept, "/invitations/accept", &[("token", &token)])
        .await;
    assert_eq!(other.status, StatusCode::FORBIDDEN);
    let form = bob.get(&accept).await;
    assert!(form.body.contains("data-testid=\"accept-invitation\""));
    let joined = bob
        .submit(&accept, "/invitations/accept", &[("token", &token)])
        .await;
    assert_eq!(joined.location(), "/dashboard?tab=teams&notice=team_joined");
    let again = bob
        .submit(&accept, "/invitations/accept", &[("token", &token)])
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "single use");
    let seen = bob.get(tab).await.body;
    assert!(seen.contains("0.00 of 12.50 credits this week"), "{seen}");
    assert!(
        !seen.contains("data-testid=\"member-edit\""),
        "a member edits nobody"
    );

    // The owner changes the member's limit, then cannot leave as the last owner.
    let bob_id = user_id(&app, "bob@example.com").await;
    let saved = ada
        .submit(
            tab,
            "/dashboard/teams/member",
            &[
                ("accountId", &team),
                ("memberId", bob_id.as_str()),
                ("role", "admin"),
                ("limitCredits", "3"),
                ("limitWindow", "day"),
            ],
        )
        .await;
    assert_eq!(saved.location(), "/dashboard?tab=teams&notice=member_saved");
    let seen = ada.get(tab).await.body;
    assert!(seen.contains("0.00 of 3.00 credits this day"), "{seen}");
    let bad_limit = ada
        .submit(
            tab,
            "/dashboard/teams/member",
            &[
                ("accountId", &team),
                ("memberId", bob_id.as_str()),
                ("limitCredits", "-1"),
                ("limitWindow", "day"),
            ],
        )
        .await;
    assert_eq!(
        bad_limit.location(),
        "/dashboard?tab=teams&notice=team_invalid_limit"
    );
    let last = ada
        .submit(tab, "/dashboard/teams/leave", &[("accountId", &team)])
        .await;
    assert_eq!(
        last.location(),
        "/dashboard?tab=teams&notice=team_last_owner"
    );
    // An admin may not make an owner.
    let ada_id = user_id(&app, "ada@example.com").await;
    let demote = bob
        .submit(
            tab,
            "/dashboard/teams/member",
            &[
                ("accountId", &team),
                ("memberId", ada_id.as_str()),
                ("role", "member"),
            ],
        )
        .await;
    assert_eq!(
        demote.location(),
        "/dashboard?tab=teams&notice=team_not_allowed"
    );

    // An admin edits their own role alone (their own limit is an owner's to set): the form
    // asks only for what changed.
    let own_role = bob
        .submit(
            tab,
            "/dashboard/teams/member",
            &[
                ("accountId", &team),
                ("memberId", bob_id.as_str()),
                ("role", "member"),
                ("roleWas", "admin"),
                ("limitCredits", "3.00"),
                ("limitWindow", "day"),
                ("limitWas", "300|day"),
            ],
        )
        .await;
    assert_eq!(
        own_role.location(),
        "/dashboard?tab=teams&notice=member_saved"
    );

    // Revoking an open invitation; removing a member; a stranger's team is not found.
    let cy = app
        .service
        .invite_member(
            &ada_id,
            &domain::AccountId::new(team.clone()).unwrap(),
            "cy@example.com",
            (MemberRole::Member, None),
        )
        .await
        .unwrap();
    let revoked = ada
        .submit(
            tab,
            "/dashboard/teams/revoke",
            &[("accountId", &team), ("invitationId", &cy.invitation.id)],
        )
        .await;
    assert_eq!(
        revoked.location(),
        "/dashboard?tab=teams&notice=invitation_revoked"
    );
    let stranger = carol
        .submit(tab, "/dashboard/teams/leave", &[("accountId", &team)])
        .await;
    assert_eq!(stranger.status, StatusCode::NOT_FOUND);
    let removed = ada
        .submit(
            tab,
            "/dashboard/teams/remove",
            &[("accountId", &team), ("memberId", bob_id.as_str())],
        )
        .await;
    assert_eq!(
        removed.location(),
        "/dashboard?tab=teams&notice=member_removed"
    );
    assert!(bob.get(tab).await.body.contains("data-testid=\"no-teams\""));
}

#[tokio::test]
async fn an_owner_buys_for_their_team_from_the_pricing_page() {
    let app = App::new(PricingMode::Static);
    let ada = app.signed_in("ada@example.com", false).await;
    let bob = app.signed_in("bob@example.com", false).await;
    let (ada_id, bob_id) = (
        user_id(&app, "ada@example.com").await,
        user_id(&app, "bob@example.com").await,
    );
    // Nobody who manages no team's billing is offered a choice.
    assert!(
        !ada.get("/pricing")
            .await
            .body
            .contains("data-testid=\"buying-for\"")
    );
    let team = app.service.create_team(&ada_id, "Acme").await.unwrap();
    let id = team.account.id.to_string();
    let member = MemberRequest::Add {
        role: MemberRole::Member,
        limit: None,
    };
    app.service
        .change_team_member(&ada_id, &team.account.id, &bob_id, member)
        .await
        .unwrap();

    let page = ada.get("/pricing").await;
    assert!(
        page.body.contains("data-testid=\"buying-for\""),
        "{}",
        page.body
    );
    let for_team = format!("/pricing?tab=credits&account={id}");
    let page = ada.get(&for_team).await;
    assert!(page.body.contains("data-testid=\"buying-for-team\""));
    assert!(
        page.body
            .contains(&format!("name=\"accountId\" value=\"{id}\""))
    );
    let bought = ada
        .submit(
            &for_team,
            "/pricing/buy",
            &[
                ("planId", "credits-100"),
                ("provider", "card_gateway"),
                ("accountId", &id),
            ],
        )
        .await;
    assert_eq!(bought.status, StatusCode::SEE_OTHER, "{}", bought.body);
    let orders = app
        .service
        .list_orders(
            &team.account.id,
            application::pagination::PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(orders.items.len(), 1, "the order is the team's");
    let order = orders.items[0].order.id().to_string();
    app.deliver(
        domain::ProviderId::CardGateway,
        "team-paid",
        vec![application::ports::PaymentEvent::PaymentSucceeded {
            order: application::ports::OrderLocator {
                order_id: Some(domain::OrderId::new(order).unwrap()),
                provider_reference: None,
            },
            amount: domain::Money::from_minor(1_000, domain::Currency::Usd).unwrap(),
            occurred_at: domain::Timestamp::from_unix_millis(super::harness::START_MS + 1_000),
        }],
    )
    .await;
    app.service
        .consume_credits(application::use_cases::credits::ConsumeCredits {
            user_id: bob_id.clone(),
            account_id: Some(team.account.id.clone()),
            usage: application::use_cases::credits::UsageRequest {
                feature: None,
                model: Some("gpt-test".into()),
                tokens: Some(5_000),
                breakdown: Some([3_000, 1_500, 500, 0, 0]),
            },
            idempotency_key: domain::IdempotencyKey::new("bob-1").unwrap(),
            api_key_id: None,
        })
        .await
        .unwrap();

    app.signed_in("admin@example.com", true).await;
    let promotion = application::use_cases::admin_console::AdjustCredits {
        admin: user(&app, "admin@example.com").await,
        account_id: team.account.id.clone(),
        amount: rust_decimal::Decimal::from(10),
        reason: "launch".into(),
        expires_at: None,
        category: Some(domain::GrantCategory::Promotional),
        priority: None,
        idempotency_key: domain::IdempotencyKey::new("team-launch").unwrap(),
    };
    app.service.adjust_credits(&promotion).await.unwrap();

    // The dashboard's switcher shows the team: its ledger says who spent.
    let own = ada.get("/dashboard").await.body;
    assert!(own.contains("data-testid=\"account-switcher\""), "{own}");
    let ledger = ada
        .get(&format!("/dashboard?tab=credits&account={id}"))
        .await
        .body;
    assert!(ledger.contains("95.00"), "{ledger}");
    assert!(ledger.contains("By bob@example.com"), "{ledger}");
    assert!(
        ledger.contains(
            "data-testid=\"balance-by-category\">Of which: 95.00 paid · 10.00 promotional<"
        ),
        "{ledger}"
    );
    assert!(
        ledger.contains(
            "data-testid=\"transaction-tokens\">Tokens: 3,000 in · 1,500 out · 500 cache read · \
             0 cache write · 0 reasoning<"
        ),
        "a spend by token kind shows its kinds: {ledger}"
    );
    assert!(
        ledger.contains(&format!("/pricing?tab=credits&amp;account={id}")),
        "{ledger}"
    );
    let seen_by_member = bob
        .get(&format!("/dashboard?tab=credits&account={id}"))
        .await
        .body;
    assert!(seen_by_member.contains("95.00"));
    assert!(
        !seen_by_member.contains("/pricing?tab=credits"),
        "a member buys nothing for it"
    );
    let carol = app.signed_in("carol@example.com", false).await;
    let stranger = carol.get(&format!("/dashboard?account={id}")).await;
    assert_eq!(stranger.status, StatusCode::NOT_FOUND);

    // A plain member is offered no choice, cannot open one, and cannot post one.
    assert!(
        !bob.get("/pricing")
            .await
            .body
            .contains("data-testid=\"buying-for\"")
    );
    assert_eq!(bob.get(&for_team).await.status, StatusCode::NOT_FOUND);
    let refused = bob
        .submit(
            "/pricing",
            "/pricing/buy",
            &[
                ("planId", "credits-100"),
                ("provider", "card_gateway"),
                ("accountId", &id),
            ],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
}

/// A team of Ada's (`Acme <research>`) with Bob as a member with a daily limit, funded with
/// 42 credits by the administrator; its id.
async fn funded_team(app: &App) -> domain::AccountId {
    use application::use_cases::admin_console::AdjustCredits;
    let (ada, bob) = (
        user_id(app, "ada@example.com").await,
        user_id(app, "bob@example.com").await,
    );
    let team = app
        .service
        .create_team(&ada, "Acme <research>")
        .await
        .unwrap();
    let id = team.account.id;
    let add = MemberRequest::Add {
        role: MemberRole::Member,
        limit: Some(MemberLimit {
            credits: Credits::from_whole(10).unwrap(),
            window: LimitWindow::Day,
        }),
    };
    app.service
        .change_team_member(&ada, &id, &bob, add)
        .await
        .unwrap();
    let grant = AdjustCredits {
        admin: user(app, "admin@example.com").await,
        account_id: id.clone(),
        amount: rust_decimal::Decimal::from(42),
        reason: "pilot".into(),
        expires_at: None,
        category: None,
        priority: None,
        idempotency_key: domain::IdempotencyKey::new("team-pilot").unwrap(),
    };
    app.service.adjust_credits(&grant).await.unwrap();
    id
}

#[tokio::test]
async fn the_console_lists_team_accounts_and_shows_one_with_its_members_and_limits() {
    let app = App::new(PricingMode::Static);
    let ada = app.signed_in("ada@example.com", false).await;
    app.signed_in("bob@example.com", false).await;
    let admin = app.signed_in("admin@example.com", true).await;
    let empty = admin.get("/admin/accounts").await;
    assert!(
        empty.body.contains("No team accounts yet."),
        "{}",
        empty.body
    );
    let team = funded_team(&app).await;
    let (ada_id, bob_id) = (
        user_id(&app, "ada@example.com").await,
        user_id(&app, "bob@example.com").await,
    );

    let list = admin.get("/admin/accounts").await;
    assert_eq!(list.status, StatusCode::OK);
    let body = &list.body;
    assert!(body.contains("href=\"/admin/accounts\" aria-current=\"page\""));
    assert!(
        body.contains(&format!("data-account-id=\"{team}\"")),
        "{body}"
    );
    assert!(body.contains(&format!("href=\"/admin/accounts/{team}\"")));
    assert!(body.contains("Acme &lt;research&gt;"), "escaped: {body}");
    assert!(body.contains("42.00"), "the balance: {body}");
    assert!(body.contains("<span>2</span>"), "two members: {body}");
    assert!(
        !body.contains(&format!("data-account-id=\"{ada_id}\"")),
        "no personal account"
    );

    let page = admin.get(&format!("/admin/accounts/{team}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    assert!(
        body.contains("data-testid=\"account-balance\">42.00<"),
        "{body}"
    );
    assert!(body.contains("2 members, no seat cap"), "{body}");
    for id in [&ada_id, &bob_id] {
        assert!(
            body.contains(&format!("href=\"/admin/customers/{id}\"")),
            "{id}: {body}"
        );
    }
    assert!(body.contains(">bob@example.com</a>"));
    assert!(body.contains("0.00 of 10.00 credits this day"), "{body}");
    assert!(body.contains("No limit"), "the owner has none: {body}");
    let chinese = admin
        .get(&format!("/admin/accounts/{team}?lang=zh-CN"))
        .await;
    assert!(
        chinese.body.contains("本天已用 0.00 / 10.00 积分"),
        "{}",
        chinese.body
    );
    assert!(chinese.body.contains("团队账户"));

    // The customer's page links to their teams.
    let customer = admin.get(&format!("/admin/customers/{bob_id}")).await;
    assert!(
        customer
            .body
            .contains(&format!("href=\"/admin/accounts/{team}\"")),
        "{}",
        customer.body
    );

    for missing in [
        "/admin/accounts/team_nobody".to_owned(),
        "/admin/accounts/not%20an%20id".to_owned(),
        format!("/admin/accounts/{ada_id}"),
    ] {
        assert_eq!(
            admin.get(&missing).await.status,
            StatusCode::NOT_FOUND,
            "{missing}"
        );
    }
    // A member of the team is no administrator.
    for path in [
        "/admin/accounts".to_owned(),
        format!("/admin/accounts/{team}"),
    ] {
        assert_eq!(ada.get(&path).await.status, StatusCode::FORBIDDEN, "{path}");
        let visitor = app.browser().get(&path).await;
        assert_eq!(visitor.status, StatusCode::SEE_OTHER, "{path}");
    }
}

/// The credits tab shows the account's spend limits, each with a meter of its window's usage,
/// what it counts and when it resets; without limits, only the form to add one.
#[tokio::test]
async fn the_credits_tab_shows_spend_limits_with_their_usage() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("lima@example.com", false).await;
    let none = browser.get("/dashboard?tab=credits").await.body;
    assert!(!none.contains("data-testid=\"spend-limit\""), "{none}");
    assert!(
        none.contains("data-testid=\"add-limit\""),
        "its user may add one: {none}"
    );
    let lima = user_id(&app, "lima@example.com").await;
    let account = domain::AccountId::personal(&lima);
    for (window, hours, feature) in [("day", None, None), ("rolling", Some(5), Some("image"))] {
        let draft = application::use_cases::spend_limits::LimitDraft {
            feature: feature.map(str::to_owned),
            model: None,
            api_key_id: None,
            member_id: None,
            window: window.into(),
            rolling_hours: hours,
            credits: "12".into(),
            enforcement: None,
        };
        app.service
            .add_spend_limit(&lima, &account, draft)
            .await
            .unwrap();
    }
    let page = browser.get("/dashboard?tab=credits").await.body;
    assert!(page.contains("data-testid=\"spend-limits\""), "{page}");
    assert_eq!(page.matches("data-testid=\"spend-limit\"").count(), 2);
    assert!(
        page.contains("0.00 of 12.00 credits per day (UTC)"),
        "{page}"
    );
    assert!(page.contains("per 5 hours (rolling)"), "{page}");
    assert!(page.contains("Feature image"), "{page}");
    assert!(page.contains("<meter class=\"usage-bar\""), "{page}");
    let chinese = browser.get("/dashboard?tab=credits&lang=zh-CN").await.body;
    assert!(chinese.contains("消费限额"), "{chinese}");
}

/// An account's user adds and removes limits through the credits tab's forms; a bad limit, or
/// one removed already, is a notice.
#[tokio::test]
async fn limits_are_added_and_removed_through_the_credits_tab() {
    let app = App::new(PricingMode::Static);
    let mila = app.signed_in("mila@example.com", false).await;
    let tab = "/dashboard?tab=credits";
    let page = mila.get(tab).await.body;
    assert!(page.contains("data-testid=\"add-limit\""), "{page}");
    let bad = mila
        .submit(
            tab,
            "/dashboard/limits/add",
            &[("credits", "0"), ("window", "day")],
        )
        .await;
    assert_eq!(
        bad.location(),
        "/dashboard?tab=credits&notice=limit_invalid"
    );
    let added = mila
        .submit(
            tab,
            "/dashboard/limits/add",
            &[
                ("credits", "25"),
                ("window", "rolling"),
                ("rollingHours", "5"),
                ("feature", "image"),
                ("enforcement", "soft"),
            ],
        )
        .await;
    assert_eq!(
        added.location(),
        "/dashboard?tab=credits&notice=limit_added"
    );
    let page = mila.get(added.location()).await.body;
    assert!(
        page.contains("0.00 of 25.00 credits per 5 hours (rolling)"),
        "{page}"
    );
    assert!(page.contains("Feature image"), "{page}");
    let mila_id = user_id(&app, "mila@example.com").await;
    let account = domain::AccountId::personal(&mila_id);
    let limits = app.service.spend_limits(&account).await.unwrap();
    assert_eq!(limits.len(), 1);
    assert_eq!(
        limits[0].record.limit.enforcement,
        domain::Enforcement::Soft
    );
    let id = limits[0].record.id.to_string();
    let removed = mila
        .submit(tab, "/dashboard/limits/remove", &[("limitId", &id)])
        .await;
    assert_eq!(
        removed.location(),
        "/dashboard?tab=credits&notice=limit_removed"
    );
    assert!(app.service.spend_limits(&account).await.unwrap().is_empty());
    let again = mila
        .submit(tab, "/dashboard/limits/remove", &[("limitId", &id)])
        .await;
    assert_eq!(again.location(), "/dashboard?tab=credits&notice=limit_gone");
}

/// On a team's credits tab, an owner limits one member: the form offers the team's members by
/// e-mail, and the limit names the member it counts.
#[tokio::test]
async fn an_owner_limits_one_member_through_the_team_s_credits_tab() {
    let app = App::new(PricingMode::Static);
    let ada = app.signed_in("ada@example.com", false).await;
    app.signed_in("bob@example.com", false).await;
    let (ada_id, bob_id) = (
        user_id(&app, "ada@example.com").await,
        user_id(&app, "bob@example.com").await,
    );
    let team = app.service.create_team(&ada_id, "Acme").await.unwrap();
    let member = MemberRequest::Add {
        role: MemberRole::Member,
        limit: None,
    };
    app.service
        .change_team_member(&ada_id, &team.account.id, &bob_id, member)
        .await
        .unwrap();
    let id = team.account.id.to_string();
    let tab = format!("/dashboard?tab=credits&account={id}");
    let page = ada.get(&tab).await.body;
    assert!(page.contains("data-testid=\"limit-member\""), "{page}");
    assert!(
        page.contains(&format!(
            "<option value=\"{bob_id}\">bob@example.com</option>"
        )),
        "{page}"
    );
    let added = ada
        .submit(
            &tab,
            "/dashboard/limits/add",
            &[
                ("accountId", &id),
                ("credits", "30"),
                ("window", "week"),
                ("member", bob_id.as_str()),
            ],
        )
        .await;
    assert!(
        added.location().ends_with("notice=limit_added"),
        "{}",
        added.location()
    );
    let limits = app.service.spend_limits(&team.account.id).await.unwrap();
    assert_eq!(limits.len(), 1);
    assert_eq!(limits[0].record.scope.member.as_ref(), Some(&bob_id));
    let page = ada.get(added.location()).await.body;
    assert!(page.contains("Member bob@example.com"), "{page}");
    // A personal account has no members to offer.
    let own = ada.get("/dashboard?tab=credits").await.body;
    assert!(!own.contains("data-testid=\"limit-member\""), "{own}");
}

/// The credits tab charts the account's spend per day over 30 days, by feature and by model,
/// with the numbers beside each chart; an account that spent nothing shows no chart.
#[tokio::test]
async fn the_credits_tab_charts_the_last_thirty_days_of_spend() {
    use application::use_cases::admin_console::AdjustCredits;
    use application::use_cases::credits::{ConsumeCredits, UsageRequest};
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("nico@example.com", false).await;
    app.signed_in("admin@example.com", true).await;
    let tab = "/dashboard?tab=credits";
    assert!(
        !browser
            .get(tab)
            .await
            .body
            .contains("data-testid=\"spend-chart\"")
    );
    let nico = user_id(&app, "nico@example.com").await;
    let grant = AdjustCredits {
        admin: user(&app, "admin@example.com").await,
        account_id: domain::AccountId::personal(&nico),
        amount: rust_decimal::Decimal::from(100),
        reason: "trial".into(),
        expires_at: None,
        category: None,
        priority: None,
        idempotency_key: domain::IdempotencyKey::new("spend-chart").unwrap(),
    };
    app.service.adjust_credits(&grant).await.unwrap();
    for (key, tokens) in [("s1", 2_000), ("s2", 1_000)] {
        let spend = ConsumeCredits {
            user_id: nico.clone(),
            account_id: None,
            usage: UsageRequest {
                feature: None,
                model: Some("gpt-test".into()),
                tokens: Some(tokens),
                breakdown: None,
            },
            idempotency_key: domain::IdempotencyKey::new(key).unwrap(),
            api_key_id: None,
        };
        app.service.consume_credits(spend).await.unwrap();
    }
    let page = browser.get(tab).await.body;
    assert!(page.contains("data-testid=\"spend-chart\""), "{page}");
    for id in ["spend-by-feature", "spend-by-model"] {
        assert!(
            page.contains(&format!("data-testid=\"{id}\"")),
            "{id}: {page}"
        );
    }
    assert!(page.contains("Per day, by feature"), "{page}");
    assert!(page.contains("Per day, by model"), "{page}");
    // Today's 3 credits on gpt-test, and the chat spend that named no feature.
    assert!(page.contains("gpt-test: 3.00"), "{page}");
    assert!(page.contains("No feature: 3.00"), "{page}");
    let chinese = browser.get(&format!("{tab}&lang=zh-CN")).await.body;
    assert!(chinese.contains("最近 30 天的消费"), "{chinese}");
}

/// A customer-portal link an app's backend made for `user`'s billing in `account`, opened in a
/// fresh browser.
async fn portal_in<'a>(
    app: &'a App,
    user: &UserId,
    account: Option<String>,
) -> super::harness::Browser<'a> {
    use application::accounts::{ApiKey, Scope};
    use application::use_cases::portal::CreatePortalSession;
    use application::use_cases::sessions::Principal;
    let key = ApiKey {
        id: "key_backend".into(),
        owner: user.clone(),
        name: "backend".into(),
        prefix: "tly_back".into(),
        scopes: vec![Scope::BillingWrite],
        account: None,
        created_at: domain::Timestamp::from_unix_millis(0),
        revoked_at: None,
    };
    let request = CreatePortalSession {
        user_id: user.to_string(),
        account_id: account,
        return_url: "http://localhost:3000/account".into(),
        locale: None,
    };
    let link = app
        .service
        .create_portal_session(Principal::Service(key), request)
        .await
        .unwrap();
    let browser = app.browser();
    let opened = browser.get(&format!("/portal/{}", link.token)).await;
    assert_eq!(opened.status, StatusCode::SEE_OTHER, "{}", opened.body);
    browser
}

/// A portal link for a team's billing shows that team alone, and refuses every form naming
/// another account (the user's own included); a portal link for the user's own billing refuses
/// the team's forms.
#[tokio::test]
async fn a_team_s_portal_session_acts_on_that_team_alone() {
    let host_app = application::service::HostApp {
        return_origins: domain::ReturnOrigins::new(Vec::new(), true),
        signer: None,
    };
    let settings = crate::PageSettings {
        secure_cookies: true,
        sandbox_notice: true,
        trust_forwarded_for: false,
        public_base_url: None,
    };
    let config = super::harness::config(PricingMode::Static);
    let app = App::with_host_app(config, settings, host_app);
    app.signed_in("ada@example.com", false).await;
    let ada_id = user_id(&app, "ada@example.com").await;
    let team = app.service.create_team(&ada_id, "Acme").await.unwrap();
    let id = team.account.id.to_string();

    let portal = portal_in(&app, &ada_id, Some(id.clone())).await;
    let page = portal.get("/dashboard?tab=credits").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains(&format!("href=\"/dashboard?account={id}\"")),
        "the tabs stay on the team: {}",
        page.body
    );
    assert!(
        !page.body.contains("data-testid=\"account-switcher\""),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains(&format!("name=\"accountId\" value=\"{id}\"")),
        "the forms are for the team: {}",
        page.body
    );
    let own = portal
        .submit(
            "/dashboard?tab=credits",
            "/dashboard/limits/add",
            &[("accountId", ""), ("credits", "30"), ("window", "week")],
        )
        .await;
    assert_eq!(own.status, StatusCode::NOT_FOUND, "the user's own account");
    let promo = portal
        .submit(
            "/dashboard?tab=credits",
            "/dashboard/promo-codes/redeem",
            &[("code", "WELCOME"), ("key", "k1")],
        )
        .await;
    assert_eq!(
        promo.status,
        StatusCode::NOT_FOUND,
        "a code goes to the user's own account"
    );
    let added = portal
        .submit(
            "/dashboard?tab=credits",
            "/dashboard/limits/add",
            &[("accountId", &id), ("credits", "30"), ("window", "week")],
        )
        .await;
    assert!(
        added.location().ends_with("notice=limit_added"),
        "{}",
        added.location()
    );

    let personal = portal_in(&app, &ada_id, None).await;
    let dashboard = personal.get(&format!("/dashboard?account={id}")).await;
    assert_eq!(dashboard.status, StatusCode::NOT_FOUND);
    let refused = personal
        .submit(
            "/dashboard?tab=credits",
            "/dashboard/limits/add",
            &[("accountId", &id), ("credits", "30"), ("window", "week")],
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::NOT_FOUND,
        "the team, from a personal portal"
    );
}
