//! Every public use case runs in a `tracing` span: each `pub fn` of an inherent `impl Service`
//! block anywhere in the `application` crate's non-test module tree (`service.rs`,
//! `authorization.rs`, `use_cases/**`) carries `#[tracing::instrument(…)]`, but for the
//! construction, accessors and settings in [`NOT_USE_CASES`], which do no work worth a span.

use std::path::Path;

use syn::visit::{self, Visit};
use syn::{ImplItem, ItemImpl, ItemMod, Visibility};

use crate::source_tree::{module_tree, test_only};

/// Public methods of `Service` that are not use cases: building the service, handing out its
/// parts, and its settings and fresh values. None of them reads, writes or asks a provider
/// anything.
const NOT_USE_CASES: &[&str] = &[
    // Construction (`service.rs`).
    "new",
    "with_host_app",
    "with_top_up_settings",
    "top_up_settings",
    "saves_methods",
    "with_sign_up_policy",
    "with_low_balance_threshold",
    "with_metrics",
    "with_host_tokens",
    "with_webhooks",
    // Accessors (`service.rs`): a reference to a part, no work.
    "webhooks",
    "store",
    "config",
    "gateways",
    "clock",
    "ids",
    // Settings and fresh values: a setting, the clock, a new id or secret, a computation on a
    // value the caller holds.
    "environment",
    "pricing_mode",
    "delivery_configured",
    "subscription_access",
    "now",
    "new_secret",
    "new_action_key",
    "new_redemption_key",
];

/// What the check found: public methods without a span (`file:line name`), and the names of
/// the allowed ones seen.
#[derive(Debug, Default)]
struct Spans {
    missing: Vec<String>,
    allowed_seen: Vec<String>,
    instrumented: Vec<String>,
}

struct SpanVisitor<'a> {
    file: &'a Path,
    found: &'a mut Spans,
}

/// Whether `item` is an inherent impl of a type named `Service`.
fn inherent_service_impl(item: &ItemImpl) -> bool {
    let syn::Type::Path(path) = &*item.self_ty else {
        return false;
    };
    item.trait_.is_none()
        && path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "Service")
}

/// Whether the attributes hold `#[tracing::instrument…]`.
fn instrumented(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let segments: Vec<String> = attr
            .path()
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        segments == ["tracing", "instrument"]
    })
}

impl<'ast> Visit<'ast> for SpanVisitor<'_> {
    fn visit_item_mod(&mut self, module: &'ast ItemMod) {
        if !test_only(&module.attrs) {
            visit::visit_item_mod(self, module);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast ItemImpl) {
        if test_only(&item.attrs) || !inherent_service_impl(item) {
            return;
        }
        for member in &item.items {
            let ImplItem::Fn(method) = member else {
                continue;
            };
            if !matches!(method.vis, Visibility::Public(_)) || test_only(&method.attrs) {
                continue;
            }
            let name = method.sig.ident.to_string();
            if instrumented(&method.attrs) {
                self.found.instrumented.push(name);
            } else if NOT_USE_CASES.contains(&name.as_str()) {
                self.found.allowed_seen.push(name);
            } else {
                let line = method.sig.fn_token.span.start().line;
                let file = self.file.display();
                self.found.missing.push(format!("{file}:{line} {name}"));
            }
        }
    }
}

fn spans_from(root: &Path) -> Spans {
    let mut found = Spans::default();
    for source in module_tree(root) {
        SpanVisitor {
            file: &source.path,
            found: &mut found,
        }
        .visit_file(&source.syntax);
    }
    found
}

#[test]
fn every_public_use_case_runs_in_a_tracing_span() {
    let root = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../application/src/lib.rs"
    ));
    let mut found = spans_from(root);
    assert!(
        found.instrumented.iter().any(|n| n == "consume_credits"),
        "the application crate was read: {found:?}"
    );
    assert_eq!(found.missing, Vec::<String>::new());
    found.allowed_seen.sort();
    let mut allowed: Vec<String> = NOT_USE_CASES.iter().map(|n| (*n).to_owned()).collect();
    allowed.sort();
    assert_eq!(
        found.allowed_seen, allowed,
        "every allowed name is a public method of Service (remove the ones that are gone)"
    );
}

#[test]
fn the_span_check_flags_a_public_method_without_a_span_and_skips_the_rest() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let root = dir.path().join("lib.rs");
    let source = "mod cases;\n\
        impl<S> Service<S> {\n    pub fn new() -> Self { todo!() }\n}\n\
        impl Ports for Service<S> {\n    fn spend(&self) {}\n}\n\
        #[cfg(test)]\nmod tests {\n    impl Service<S> {\n        pub fn helper(&self) {}\n    }\n}\n";
    std::fs::write(&root, source).expect("written");
    std::fs::write(
        dir.path().join("cases.rs"),
        "impl<S: Store> Service<S> {\n\
         #[tracing::instrument(skip_all)]\n    pub async fn traced(&self) {}\n\
         pub async fn untraced(&self) {}\n\
         async fn private(&self) {}\n\
         pub(crate) async fn internal(&self) {}\n}\n",
    )
    .expect("written");
    let found = spans_from(&root);
    assert_eq!(found.instrumented, vec!["traced"]);
    assert_eq!(found.allowed_seen, vec!["new"]);
    assert_eq!(found.missing.len(), 1, "{found:?}");
    assert!(
        found.missing[0].ends_with("cases.rs:4 untraced"),
        "{found:?}"
    );
}
