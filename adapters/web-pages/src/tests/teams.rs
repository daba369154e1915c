//! The dashboard's "Teams" tab: the user's teams with their balance, members, limits, seats and
//! open invitations, read as their owner and as a plain member.

use application::use_cases::plans::PricingMode;
use application::use_cases::teams::MemberRequest;
use domain::{Credits, LimitWindow, MemberLimit, MemberRole, UserId};

use super::harness::App;

async fn user_id(app: &App, email: &str) -> UserId {
    let email = application::accounts::Email::parse(email).unwrap();
    use application::ports::UserRepository;
    let (user, _) = app
        .service
        .store()
        .find_user_by_email(&email)
        .await
        .unwrap()
        .unwrap();
    user.id
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
