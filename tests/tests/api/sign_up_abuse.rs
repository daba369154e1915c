//! One abuse policy for account creation: the sign-up page and the JSON API share the
//! service's limits per client address, so a burst of page sign-ups from one address is
//! refused with a readable 429 page and the API then refuses that address too.

use serde_json::json;
use tests::{TestApp, spawn_app};

/// A visitor's anti-forgery cookie (no session yet).
const COOKIES: &str = "tally_csrf=sign-up-abuse-test-secret";

/// The value of the hidden field `name` in the form posting to `action`.
fn form_field(html: &str, action: &str, name: &str) -> Option<String> {
    let form = &html[html.find(&format!("action=\"{action}\""))?..];
    let form = &form[..form.find("</form>")?];
    let at = form.find(&format!("name=\"{name}\" value=\""))?;
    let value = &form[at + name.len() + 15..];
    Some(value[..value.find('"')?].to_owned())
}

/// The sign-up form's anti-forgery token for [`COOKIES`].
async fn csrf(app: &TestApp) -> String {
    let page = app
        .client
        .get(app.url("/signup"))
        .header("cookie", COOKIES)
        .send()
        .await
        .expect("sign-up form")
        .text()
        .await
        .expect("html");
    form_field(&page, "/signup", "csrf").expect("csrf field")
}

#[tokio::test]
async fn twenty_five_page_sign_ups_from_one_address_are_limited_like_the_api() {
    let app = spawn_app().await;
    let csrf = csrf(&app).await;
    let mut created = 0;
    let mut refused = Vec::new();
    for i in 0..25 {
        let response = app
            .client
            .post(app.url("/signup"))
            .header("cookie", COOKIES)
            .form(&[
                ("email", format!("farm{i}@example.com")),
                ("password", "correct horse battery".to_owned()),
                ("csrf", csrf.clone()),
            ])
            .send()
            .await
            .expect("sign up");
        match response.status().as_u16() {
            303 => created += 1,
            429 => refused.push(response),
            other => panic!("a sign-up is made (303) or refused (429), not {other}"),
        }
    }
    assert_eq!(
        created, 5,
        "the default policy allows a burst of 5 per address"
    );
    let last = refused.pop().expect("20 refused");
    let retry_after: u64 = last.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1, "{retry_after}");
    assert!(
        last.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let page = last.text().await.expect("html");
    assert!(page.contains("Too many accounts"), "{page}");
    // The JSON API counts the same client against the same limit.
    let api = app
        .client
        .post(app.url("/api/auth/register"))
        .json(&json!({"email": "api@example.org", "password": "correct horse battery"}))
        .send()
        .await
        .expect("register");
    assert_eq!(api.status(), 429);
    assert!(api.headers().contains_key("retry-after"));
    let problem: serde_json::Value = api.json().await.expect("problem");
    assert_eq!(problem["code"], "rate_limited");
}
