//! `/admin/pricing`: access, the plan form, hide, delete, reorder, import, and the mode note.

use application::use_cases::plans::PricingMode;
use poem::http::StatusCode;

use super::harness::App;

const NEW_PLAN: [(&str, &str); 11] = [
    ("id", "team-monthly"),
    ("duration.type", "recurring"),
    ("provider", "card_gateway"),
    ("currency", "EUR"),
    ("amount", "49"),
    ("originalAmount", "59"),
    ("duration.months", "1"),
    ("cardGatewayPriceId", "price_team"),
    ("locales", ""),
    ("i18n.en.name", "Team Monthly"),
    ("i18n.en.features", "**5** seats\nShared credits"),
];

#[tokio::test]
async fn only_administrators_reach_the_admin_page() {
    let app = App::new(PricingMode::Dynamic);
    let user = app.signed_in("user@example.com", false).await;
    let page = user.get("/admin/pricing").await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert!(page.body.contains("This page is for administrators."));
    let post = user
        .submit("/dashboard", "/admin/pricing/import", &[])
        .await;
    assert_eq!(post.status, StatusCode::FORBIDDEN);
    assert!(
        !user
            .get("/pricing")
            .await
            .body
            .contains("href=\"/admin/pricing\"")
    );
    let admin = app.signed_in("admin@example.com", true).await;
    let page = admin.get("/admin/pricing").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("PRICING_MODE = <code>dynamic</code>"));
    assert!(
        page.body.contains("href=\"/admin/pricing\""),
        "admins see the nav entry"
    );
}

#[tokio::test]
async fn an_invalid_plan_shows_each_error_next_to_its_field() {
    let app = App::new(PricingMode::Dynamic);
    let admin = app.signed_in("admin@example.com", true).await;
    let form = [
        ("id", "bad plan"),
        ("duration.type", "recurring"),
        ("provider", "wallet_qr"),
        ("currency", "CNY"),
        ("amount", "abc"),
        ("originalAmount", "1"),
        ("duration.months", "999999"),
        ("locales", "not a locale!"),
        ("i18n.en.name", ""),
    ];
    let page = admin
        .submit("/admin/pricing/new", "/admin/pricing", &form)
        .await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    for field in [
        "id",
        "amount",
        "duration.months",
        "duration.type",
        "i18n.en.name",
        "locales",
    ] {
        assert!(
            page.body.contains(&format!("data-field=\"{field}\"")),
            "no error at {field}"
        );
    }
    assert!(page.body.contains("Enter a number, such as 9.99."));
    assert!(
        page.body.contains("value=\"bad plan\""),
        "the form keeps what was typed"
    );
    let chinese = admin
        .submit("/admin/pricing/new?lang=zh-CN", "/admin/pricing", &form)
        .await;
    assert!(chinese.body.contains("请输入数字"));
}

#[tokio::test]
async fn a_created_plan_appears_on_pricing_and_can_be_edited() {
    let app = App::new(PricingMode::Dynamic);
    let admin = app.signed_in("admin@example.com", true).await;
    let created = admin
        .submit("/admin/pricing/new", "/admin/pricing", &NEW_PLAN)
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    assert_eq!(created.location(), "/admin/pricing?notice=created");
    let pricing = admin.get("/pricing").await;
    assert!(pricing.body.contains("Team Monthly"));
    assert!(pricing.body.contains("€59.00</del>"));
    assert!(pricing.body.contains("<strong>5</strong> seats"));
    let again = admin
        .submit("/admin/pricing/new", "/admin/pricing", &NEW_PLAN)
        .await;
    assert!(again.body.contains("A plan with this id already exists."));
    let edit = admin.get("/admin/pricing/plans/team-monthly/edit").await;
    assert!(edit.body.contains("value=\"Team Monthly\""));
    let mut edited: Vec<(&str, &str)> = NEW_PLAN.to_vec();
    edited.retain(|(k, _)| *k != "i18n.en.name");
    edited.push(("i18n.en.name", "Team Plus"));
    edited.push(("i18n.zh-CN.name", "团队版"));
    let saved = admin
        .submit(
            "/admin/pricing/plans/team-monthly/edit",
            "/admin/pricing/plans/team-monthly",
            &edited,
        )
        .await;
    assert_eq!(
        saved.location(),
        "/admin/pricing?notice=updated",
        "{}",
        saved.body
    );
    assert!(
        admin
            .get("/pricing?lang=zh-CN")
            .await
            .body
            .contains("团队版")
    );
}

#[tokio::test]
async fn a_plan_can_be_hidden_from_pricing_and_deleted() {
    let app = App::new(PricingMode::Dynamic);
    let admin = app.signed_in("admin@example.com", true).await;
    let created = admin
        .submit("/admin/pricing/new", "/admin/pricing", &NEW_PLAN)
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER);
    let hidden = admin
        .submit(
            "/admin/pricing",
            "/admin/pricing/plans/team-monthly/hide",
            &[],
        )
        .await;
    assert_eq!(hidden.location(), "/admin/pricing?notice=hidden");
    assert!(
        !admin
            .get("/pricing?lang=en")
            .await
            .body
            .contains("Team Monthly")
    );
    let deleted = admin
        .submit(
            "/admin/pricing",
            "/admin/pricing/plans/team-monthly/delete",
            &[],
        )
        .await;
    assert_eq!(deleted.location(), "/admin/pricing?notice=deleted");
    assert!(
        !admin
            .get("/admin/pricing")
            .await
            .body
            .contains("team-monthly")
    );
}

#[tokio::test]
async fn reordering_moves_a_plan_before_its_neighbour_on_pricing() {
    let app = App::new(PricingMode::Dynamic);
    let admin = app.signed_in("admin@example.com", true).await;
    let imported = admin
        .submit("/admin/pricing", "/admin/pricing/import", &[])
        .await;
    assert_eq!(
        imported.location(),
        "/admin/pricing?notice=imported&created=5&updated=0"
    );
    let position = |body: &str, id: &str| body.find(&format!("data-plan-id=\"{id}\"")).unwrap();
    let before = admin.get("/pricing?tab=credits").await.body;
    assert!(position(&before, "credits-100") < position(&before, "qr-credits"));
    let moved = admin
        .submit("/admin/pricing", "/admin/pricing/plans/qr-credits/up", &[])
        .await;
    assert_eq!(moved.location(), "/admin/pricing?notice=moved");
    let after = admin.get("/pricing?tab=credits").await.body;
    assert!(position(&after, "qr-credits") < position(&after, "credits-100"));
    let admin_page = admin.get("/admin/pricing").await.body;
    assert!(position(&admin_page, "qr-credits") < position(&admin_page, "credits-100"));
    let unknown = admin
        .submit("/admin/pricing", "/admin/pricing/plans/nope/up", &[])
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn in_static_mode_the_page_works_and_says_pricing_shows_the_static_catalog() {
    let app = App::new(PricingMode::Static);
    let admin = app.signed_in("admin@example.com", true).await;
    let page = admin.get("/admin/pricing").await;
    assert!(page.body.contains("PRICING_MODE = <code>static</code>"));
    assert!(page.body.contains("/pricing shows the static catalog"));
    let created = admin
        .submit("/admin/pricing/new", "/admin/pricing", &NEW_PLAN)
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER);
    assert!(
        admin
            .get("/admin/pricing")
            .await
            .body
            .contains("Team Monthly")
    );
    assert!(
        !admin.get("/pricing").await.body.contains("Team Monthly"),
        "static mode is untouched"
    );
}

#[tokio::test]
async fn entitlements_typed_in_the_plan_form_are_kept_and_bad_lines_are_refused() {
    let app = App::new(PricingMode::Dynamic);
    let admin = app.signed_in("admin@example.com", true).await;
    let mut bad: Vec<(&str, &str)> = NEW_PLAN.to_vec();
    bad.push(("entitlements", "seats = 5\nExport = true\nno equals sign"));
    let refused = admin
        .submit("/admin/pricing/new", "/admin/pricing", &bad)
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.body.contains("data-field=\"entitlements\""));
    assert!(refused.body.contains("Write each line as key = true"));
    assert!(
        refused.body.contains("no equals sign"),
        "the form keeps what was typed"
    );

    let mut good: Vec<(&str, &str)> = NEW_PLAN.to_vec();
    good.push(("entitlements", " seats = 5 \n\nexport=true"));
    let created = admin
        .submit("/admin/pricing/new", "/admin/pricing", &good)
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    let edit = admin.get("/admin/pricing/plans/team-monthly/edit").await;
    assert!(
        edit.body.contains("export = true\nseats = 5"),
        "{}",
        edit.body
    );
}
