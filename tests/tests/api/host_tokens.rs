//! Host-application tokens through HTTP: a token is a host identity of its own, never a password
//! account, and an admin only by the operator's claim mapping.

use application::accounts::Role;
use application::ports::UserRepository;
use bootstrap::host_tokens::{AdminClaim, ContactClaims, HostJwtKey, HostJwtSettings};
use jsonwebtoken::{EncodingKey, Header, encode};
use secrecy::SecretString;
use serde_json::{Value, json};
use tests::spawn_app_with;

const SECRET: &str = "a-host-secret-of-at-least-32-bytes!!";

/// 2100-01-01: far enough ahead not to need the clock.
const EXP: i64 = 4_102_444_800;

fn host_token(claims: &Value) -> String {
    encode(
        &Header::default(),
        claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("token")
}

#[tokio::test]
async fn a_host_token_for_an_admins_id_is_another_user_and_admin_only_by_the_mapped_claim() {
    let mut settings = None;
    let app = spawn_app_with(|s| {
        s.host_jwt = Some(HostJwtSettings {
            key: HostJwtKey::Secret(SecretString::from(SECRET)),
            issuer: None,
            audience: None,
            admin_claim: Some(AdminClaim::parse("app_metadata.role=admin").expect("mapping")),
            contact_claims: ContactClaims::default(),
            org_claims: None,
        });
        settings = Some(s.clone());
    })
    .await;
    let store = bootstrap::app::connect_store(&settings.expect("settings"))
        .await
        .expect("store");
    let admin = bootstrap::app::create_user(
        &store,
        "root@example.com",
        "correct horse battery".into(),
        Role::Admin,
    )
    .await
    .expect("admin");

    // A token whose subject is the admin's id is a host user of its own, and not an admin.
    let token = host_token(&json!({"sub": admin.id.as_str(), "exp": EXP}));
    let (status, me) = app.get(&token, "/api/auth/me").await;
    assert_eq!(status, 200, "{me}");
    let id = me["id"].as_str().expect("id");
    assert!(id.starts_with("hst_"), "{me}");
    assert_ne!(id, admin.id.as_str());
    assert_eq!(me["role"], "user");
    let (status, body) = app.get(&token, "/api/admin/plans").await;
    assert_eq!(status, 403, "{body}");

    // The mapped claim makes the same identity an admin for that request only.
    let claimed = host_token(&json!({
        "sub": admin.id.as_str(), "exp": EXP, "app_metadata": {"role": "admin"}
    }));
    let (status, me) = app.get(&claimed, "/api/auth/me").await;
    assert_eq!(
        (status, me["id"].as_str(), me["role"].as_str()),
        (200, Some(id), Some("admin"))
    );
    let (status, body) = app.get(&claimed, "/api/admin/plans").await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = app.get(&token, "/api/admin/plans").await;
    assert_eq!(status, 403, "the role is not stored");

    // The password account is untouched.
    let stored = store
        .find_user(&admin.id)
        .await
        .expect("read")
        .expect("admin");
    assert_eq!(stored, admin);
}

/// Sends `method path` with `token` and an optional JSON body.
async fn send(
    app: &tests::TestApp,
    token: &str,
    (method, path): (&str, &str),
    body: &Value,
) -> (u16, Value) {
    let url = app.url(path);
    let request = match method {
        "PATCH" => app.client.patch(url),
        "DELETE" => app.client.delete(url),
        _ => app.client.post(url),
    };
    let response = request
        .json(body)
        .bearer_auth(token)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_host_organisation_is_a_team_whose_members_follow_the_tokens() {
    let (app, admin) = tests::spawn_app_with_admin(|s| {
        s.host_jwt = Some(HostJwtSettings {
            key: HostJwtKey::Secret(SecretString::from(SECRET)),
            issuer: None,
            audience: None,
            admin_claim: None,
            contact_claims: ContactClaims::default(),
            org_claims: bootstrap::host_tokens::org_claims(
                Some("org_id".into()),
                None,
                Some("org_slug".into()),
                None,
            )
            .expect("org claims"),
        });
    })
    .await;
    let token = |sub: &str, org: Option<&str>| {
        let mut claims = json!({"sub": sub, "exp": EXP, "email": format!("{sub}@example.com")});
        if let Some(role) = org {
            claims["org_id"] = json!("org_acme");
            claims["org_role"] = json!(role);
            claims["org_slug"] = json!("acme");
        }
        host_token(&claims)
    };
    let accounts = |token: String| {
        let app = &app;
        async move {
            let (status, list) = app.get(&token, "/api/accounts").await;
            assert_eq!(status, 200, "{list}");
            list["items"].as_array().expect("items").clone()
        }
    };
    // First sight: the organisation is a team, its token's user an admin of it.
    let ada = accounts(token("ada", Some("org:admin"))).await;
    assert_eq!(ada.len(), 2, "{ada:?}");
    let team = ada[1]["id"].as_str().expect("id").to_owned();
    assert!(team.starts_with("team_org_"), "{team}");
    assert_eq!(ada[1]["hostOrganisation"], "org_acme");
    assert_eq!(ada[1]["name"], "acme");
    assert_eq!(ada[1]["role"], "admin");
    let ada_id = ada[0]["id"].as_str().expect("id").to_owned();
    let bob = accounts(token("bob", Some("org:member"))).await;
    assert_eq!(
        (bob[1]["id"].as_str(), bob[1]["role"].as_str()),
        (Some(&*team), Some("member"))
    );
    let bob_id = bob[0]["id"].as_str().expect("id").to_owned();

    // The pool is funded; the app's backend spends from it for Bob.
    let grant = json!({"amount": "100", "reason": "org pool"});
    let path = format!("/api/admin/accounts/{team}/credits");
    let (status, funded) = app.post(&admin, &path, &grant, Some("fund-1")).await;
    assert_eq!(status, 200, "{funded}");
    let backend = app.api_key(&admin, &["credits:consume"]).await;
    let spend = |key: &str| {
        let body = json!({"userId": bob_id, "accountId": team, "feature": "image"});
        let key = key.to_owned();
        let (app, backend) = (&app, &backend);
        async move {
            app.post(backend, "/api/credits/consume", &body, Some(&key))
                .await
        }
    };
    let (status, spent) = spend("s1").await;
    assert_eq!(status, 201, "{spent}");
    assert_eq!(spent["balanceAfterHundredths"], 9_500);

    // Members and roles change in the host; a limit is set here.
    let ada_token = token("ada", Some("org:admin"));
    let members = format!("/api/accounts/{team}/members");
    let bob_member = format!("{members}/{bob_id}");
    let (status, refused) = send(&app, &ada_token, ("DELETE", &bob_member), &json!({})).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (409, Some("host_managed")),
        "{refused}"
    );
    let (status, refused) = send(
        &app,
        &ada_token,
        ("POST", &members),
        &json!({"memberId": ada_id}),
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (409, Some("host_managed")),
        "{refused}"
    );
    let limit = json!({"limit": {"credits": "20", "window": "day"}});
    let (status, limited) = send(&app, &ada_token, ("PATCH", &bob_member), &limit).await;
    assert_eq!(status, 200, "{limited}");

    // Removed from the organisation: Bob's next token names none, and from that request on he
    // neither reads nor spends the team's credits.
    let balance = format!("/api/credits/balance?accountId={team}");
    let (status, gone) = app.get(&token("bob", None), &balance).await;
    assert_eq!(
        (status, gone["code"].as_str()),
        (404, Some("account_not_found")),
        "{gone}"
    );
    let (status, refused) = spend("s2").await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("not_a_member")),
        "{refused}"
    );
    // Back in it: his limit and what he spent today are as he left them.
    let (status, back) = app.get(&token("bob", Some("org:member")), &balance).await;
    assert_eq!(
        (status, back["balanceHundredths"].as_i64()),
        (200, Some(9_500)),
        "{back}"
    );
    let (status, listed) = app.get(&ada_token, &members).await;
    assert_eq!(status, 200, "{listed}");
    let bob_row = listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|m| m["memberId"] == bob_id.as_str())
        .expect("bob listed")
        .clone();
    assert_eq!(bob_row["limit"]["usedHundredths"], 500, "{bob_row}");

    // The app's backend says Bob left the organisation (on its own membership event): with its
    // key and no userId, he is away at once, before any token of his reaches Tally.
    let host = app.api_key(&admin, &["billing:write"]).await;
    let (status, _) = send(&app, &host, ("DELETE", &bob_member), &json!({})).await;
    assert_eq!(status, 204);
    let (status, refused) = spend("s3").await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("not_a_member")),
        "{refused}"
    );
    let (status, again) = send(&app, &host, ("DELETE", &bob_member), &json!({})).await;
    assert_eq!(
        (status, again["code"].as_str()),
        (404, Some("member_not_found")),
        "{again}"
    );
    let (status, _) = send(&app, &backend, ("DELETE", &bob_member), &json!({})).await;
    assert_eq!(status, 403, "a key without billing:write");
    // A team of Tally's own is not the host's to change this way.
    let (_, own) = app.user("tess@example.com").await;
    let (_, own_team) = app
        .post(&own, "/api/accounts", &json!({"name": "Own"}), None)
        .await;
    let own_member = format!(
        "/api/accounts/{}/members/{bob_id}",
        own_team["id"].as_str().expect("id")
    );
    let (status, _) = send(&app, &host, ("DELETE", &own_member), &json!({})).await;
    assert_eq!(status, 400, "an API key names the acting user");

    // Joining and role changes are told, with the team's id; comings and goings are not.
    let (status, events) = app
        .get(
            &admin,
            "/api/events?type=account.member_added,account.member_role_changed",
        )
        .await;
    assert_eq!(status, 200, "{events}");
    let told: Vec<(String, String)> = events["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["data"]["accountId"] == team.as_str())
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_owned(),
                e["data"]["userId"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        told,
        [
            ("account.member_added".to_owned(), ada_id.clone()),
            ("account.member_added".to_owned(), bob_id.clone()),
        ]
    );
    // (Tess's own team was told its owner's join, under its own id.)
}

#[tokio::test]
async fn a_host_user_accepts_an_invitation_to_the_address_their_host_verified() {
    let app = spawn_app_with(|s| {
        s.host_jwt = Some(HostJwtSettings {
            key: HostJwtKey::Secret(SecretString::from(SECRET)),
            issuer: None,
            audience: None,
            admin_claim: None,
            contact_claims: ContactClaims::default(),
            org_claims: None,
        });
    })
    .await;
    let (_, ada) = app.user("ada@example.com").await;
    let (_, team) = app
        .post(&ada, "/api/accounts", &json!({"name": "Acme"}), None)
        .await;
    let team_id = team["id"].as_str().expect("id");
    let invite = json!({"email": "bo@example.com"});
    let path = format!("/api/accounts/{team_id}/invitations");
    let (status, created) = app.post(&ada, &path, &invite, None).await;
    assert_eq!(status, 201, "{created}");
    let accept = json!({"token": created["token"]});
    let bo = |verified: bool| {
        host_token(&json!({"sub": "bo", "exp": EXP, "email": "Bo@example.com",
            "email_verified": verified}))
    };
    // The address claimed but not verified by the host is not enough.
    let (status, refused) = app
        .post(&bo(false), "/api/invitations/accept", &accept, None)
        .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("invitation_email_mismatch")),
        "{refused}"
    );
    let (status, joined) = app
        .post(&bo(true), "/api/invitations/accept", &accept, None)
        .await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["accountId"], team_id);
    assert!(
        joined["memberId"]
            .as_str()
            .is_some_and(|id| id.starts_with("hst_")),
        "{joined}"
    );
}
