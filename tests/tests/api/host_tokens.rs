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
