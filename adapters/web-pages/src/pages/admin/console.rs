//! What every console page shares: the section navigation across `/admin/*`, and notices.

use application::use_cases::admin_console::{AdminListError, PageAfter};
use maud::{Markup, html};

use crate::state::{PageError, Visitor, with_query};

/// A console section: its path and catalog key.
pub(crate) const SECTIONS: [(&str, &str); 10] = [
    ("/admin", "console.nav_overview"),
    ("/admin/customers", "console.nav_customers"),
    ("/admin/accounts", "console.nav_accounts"),
    ("/admin/orders", "console.nav_orders"),
    ("/admin/webhooks", "console.nav_webhooks"),
    ("/admin/api-keys", "console.nav_api_keys"),
    ("/admin/webhook-endpoints", "console.nav_endpoints"),
    ("/admin/promo-codes", "console.nav_promo"),
    ("/admin/audit", "console.nav_audit"),
    ("/admin/pricing", "console.nav_pricing"),
];

/// The console's section links, `current` marked as the page.
pub(crate) fn sections(v: &Visitor, current: &str) -> Markup {
    html! {
        nav.tabs-wrap.console-nav aria-label=(v.t("console.nav_label")) {
            div.tabs-links {
                @for (href, key) in SECTIONS {
                    a.tab href=(href) aria-current=[(href == current).then_some("page")] {
                        (v.t(key))
                    }
                }
            }
        }
    }
}

/// A success notice for `?notice=<code>` when the code is one of `known` (catalog
/// `console.notice_<code>`).
pub(crate) fn notice(v: &Visitor, known: &[&str]) -> Markup {
    match v.query("notice") {
        Some(code) if known.contains(&code) => {
            let key = format!("console.notice_{code}");
            html! { div.alert.alert-success role="status" data-testid="notice" { (v.t(&key)) } }
        }
        _ => html! {},
    }
}

/// A list's error as the page shows it: a refused cursor or filter is a bad request.
pub(crate) fn list_error(e: AdminListError) -> PageError {
    match e {
        AdminListError::Page(_) | AdminListError::Invalid { .. } => PageError::BadRequest,
        AdminListError::UserNotFound | AdminListError::AccountNotFound => PageError::NotFound,
        AdminListError::Infra(infra) => infra.into(),
    }
}

/// Which page of a list the query asks for (`?cursor=`), 25 rows at a time.
pub(crate) fn page_after(v: &Visitor) -> PageAfter {
    PageAfter {
        cursor: v.query("cursor").map(str::to_owned),
        limit: Some(25),
    }
}

/// A link to the next page (`next` is the list's next cursor), keeping the filters; the first
/// page's link when this is a later one.
pub(crate) fn pager(
    v: &Visitor,
    path: &str,
    filters: &[(&str, Option<&str>)],
    next: Option<&str>,
) -> Markup {
    let kept: Vec<(String, String)> = filters
        .iter()
        .filter_map(|(k, value)| {
            value
                .filter(|s| !s.is_empty())
                .map(|s| ((*k).to_owned(), s.to_owned()))
        })
        .collect();
    let first = with_query(path, kept.iter());
    let next = next.map(|cursor| {
        let mut pairs = kept.clone();
        pairs.push(("cursor".to_owned(), cursor.to_owned()));
        with_query(path, pairs.iter())
    });
    html! {
        nav.pager aria-label=(v.t("console.pager")) {
            @if v.query("cursor").is_some() {
                a.btn.btn-ghost.btn-sm href=(first) { "← " (v.t("console.first_page")) }
            }
            @if let Some(next) = next {
                a.btn.btn-secondary.btn-sm href=(next) rel="next" data-testid="next-page" {
                    (v.t("console.next_page")) " →"
                }
            }
        }
    }
}

/// A filter's `<select>`: "all" and each of `options` (value, label), `current` selected.
pub(crate) fn select(
    v: &Visitor,
    name: &str,
    label: &str,
    options: &[(String, String)],
    current: Option<&str>,
) -> Markup {
    let id = format!("filter-{name}");
    html! {
        div.field {
            label for=(id) { (v.t(label)) }
            select #(id) name=(name) {
                option value="" { (v.t("console.all")) }
                @for (value, text) in options {
                    option value=(value) selected[current == Some(value.as_str())] { (text) }
                }
            }
        }
    }
}
