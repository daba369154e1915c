//! Consume over HTTP: N clients, each in a closed loop of `POST /api/credits/consume` with the
//! service API key, a unique `Idempotency-Key` per request, and the fixed-cost feature `image`
//! (5 credits) for its own user (or all for one user: the hot-account variant; or as members of a
//! team, from its pool: [`crate::team`]).

use std::sync::Arc;

use serde_json::json;

use crate::api::Api;
use crate::load::{self, Spec};
use crate::stats::Summary;

/// Run the closed loop: worker `w` spends for `users[w % users.len()]` (from `account` when
/// given, else their own); keys start with `tag`.
pub async fn run(
    api: &Api,
    api_key: &str,
    users: &[String],
    account: Option<&str>,
    tag: &str,
    spec: Spec,
) -> Summary {
    let bodies: Vec<String> = users
        .iter()
        .map(|user| match account {
            Some(account) => {
                json!({ "userId": user, "accountId": account, "feature": "image" })
            }
            None => json!({ "userId": user, "feature": "image" }),
        })
        .map(|body| body.to_string())
        .collect();
    run_bodies(api, api_key, &bodies, tag, spec).await
}

/// Run the closed loop with worker `w` sending `bodies[w % bodies.len()]`; keys start with
/// `tag`.
pub async fn run_bodies(
    api: &Api,
    api_key: &str,
    bodies: &[String],
    tag: &str,
    spec: Spec,
) -> Summary {
    let bodies = Arc::new(bodies.to_vec());
    let (api, api_key, tag) = (
        api.clone(),
        Arc::new(api_key.to_owned()),
        Arc::new(tag.to_owned()),
    );
    load::closed_loop(spec, move |worker, sequence| {
        let (api, api_key, bodies, tag) =
            (api.clone(), api_key.clone(), bodies.clone(), tag.clone());
        async move {
            let body = &bodies[worker % bodies.len()];
            let key = format!("{tag}-{worker}-{sequence}");
            api.consume(&api_key, body, &key).await
        }
    })
    .await
}
