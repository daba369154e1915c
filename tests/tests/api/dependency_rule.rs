//! The layer rule (HOUSE-STYLE.md rule 2), enforced for every crate of the workspace:
//! - `domain` and `application` never depend, directly or through another crate, on an adapter
//!   technology (asked of `cargo tree`: each crate's normal dependency closure with its own
//!   feature resolution, which is exactly what compiling that crate alone links);
//! - among workspace crates (read from `cargo metadata`, so a new crate is covered the day it
//!   joins the workspace): `domain` depends on none, `application` only on `domain`, an adapter
//!   (a crate under `adapters/`) only on `domain`, `application` and the `signing` primitives,
//!   never on another adapter; `signing` and `migrations` on none; `bootstrap` (the wiring),
//!   `tests` and `bench` on any. A crate in no role fails the test until it is given one.
//!
//! Only direct normal and build dependencies are checked among workspace crates; the closure
//! follows, since no crate an adapter may use depends on an adapter. Dev-dependencies are free:
//! a sandbox test may drive the real gateways.

use std::collections::BTreeMap;
use std::process::Command;

use cargo_metadata::DependencyKind;

use crate::source_tree::workspace_metadata;

/// Crates that mean I/O, async runtimes, wire formats or a web/database framework.
const FORBIDDEN: &[&str] = &[
    "tokio",
    "serde",
    "serde_json",
    "sea-orm",
    "sea-query",
    "sqlx",
    "sqlx-core",
    "poem",
    "poem-openapi",
    "reqwest",
    "hyper",
    "async-std",
    "mio",
];

/// Adapter and wiring crates of this workspace.
const ADAPTERS: &[&str] = &[
    "store",
    "gateways",
    "sandbox",
    "http-api",
    "web-pages",
    "notifier",
    "bootstrap",
    "migrations",
];

fn dependency_names(package: &str) -> Vec<String> {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
            "-f",
            "{p}",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse_tree(&String::from_utf8_lossy(&output.stdout))
}

/// Package names from `cargo tree --prefix none -f {p}` lines such as `serde v1.0.229`.
fn parse_tree(tree: &str) -> Vec<String> {
    let mut names: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

fn violations<'a>(names: &'a [String], banned: &[&str]) -> Vec<&'a str> {
    names
        .iter()
        .map(String::as_str)
        .filter(|n| banned.contains(n))
        .collect()
}

#[test]
fn domain_depends_on_no_adapter_technology() {
    let names = dependency_names("domain");
    assert!(
        names.iter().any(|n| n == "rust_decimal"),
        "the tree was read: {names:?}"
    );
    assert_eq!(violations(&names, FORBIDDEN), Vec::<&str>::new());
    assert_eq!(violations(&names, ADAPTERS), Vec::<&str>::new());
}

#[test]
fn application_depends_on_no_adapter_technology_nor_adapter_crate() {
    let names = dependency_names("application");
    assert!(
        names.iter().any(|n| n == "domain"),
        "the tree was read: {names:?}"
    );
    assert_eq!(violations(&names, FORBIDDEN), Vec::<&str>::new());
    assert_eq!(violations(&names, ADAPTERS), Vec::<&str>::new());
}

#[test]
fn the_check_flags_a_forbidden_dependency_when_one_appears() {
    let tree =
        "domain v0.0.0 (/work/main/domain)\ntokio v1.54.0\nserde v1.0.229\nrust_decimal v1.43.0\n";
    let names = parse_tree(tree);
    assert_eq!(violations(&names, FORBIDDEN), vec!["serde", "tokio"]);
}

/// What a workspace crate is, and so which workspace crates it may depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// `domain`: pure rules.
    Domain,
    /// `application`: use cases over ports.
    Application,
    /// A crate of primitives or schema (`signing`, `migrations`): depends on no workspace crate.
    Leaf,
    /// A crate under `adapters/`.
    Adapter,
    /// `bootstrap`, `tests`, `bench`: wiring and tools, which may use anything.
    Wiring,
}

/// The role of a workspace crate, from its name and folder; `None` for a crate nobody placed.
fn role(name: &str, folder: &str) -> Option<Role> {
    match name {
        "domain" => Some(Role::Domain),
        "application" => Some(Role::Application),
        "signing" | "migrations" => Some(Role::Leaf),
        "bootstrap" | "tests" | "bench" => Some(Role::Wiring),
        _ if folder.starts_with("adapters/") => Some(Role::Adapter),
        _ => None,
    }
}

/// Whether a crate in role `from` may depend on workspace crate `to` (in role `to_role`).
fn allowed(from: Role, to: &str, to_role: Role) -> bool {
    match from {
        Role::Domain | Role::Leaf => false,
        Role::Application => to == "domain",
        Role::Adapter => matches!(to_role, Role::Domain | Role::Application) || to == "signing",
        Role::Wiring => true,
    }
}

/// Each workspace crate: its folder relative to the workspace root, and its direct normal and
/// build dependencies on other workspace crates.
fn workspace_crates() -> BTreeMap<String, (String, Vec<String>)> {
    let metadata = workspace_metadata();
    let root = metadata.workspace_root.clone();
    let packages = metadata.workspace_packages();
    let names: Vec<String> = packages.iter().map(|p| p.name.to_string()).collect();
    packages
        .iter()
        .map(|package| {
            let folder = package
                .manifest_path
                .parent()
                .and_then(|dir| dir.strip_prefix(&root).ok())
                .map(|dir| dir.as_str().to_owned())
                .unwrap_or_default();
            let internal = package
                .dependencies
                .iter()
                .filter(|d| d.kind != DependencyKind::Development)
                .map(|d| d.name.clone())
                .filter(|d| names.contains(d))
                .collect();
            (package.name.to_string(), (folder, internal))
        })
        .collect()
}

/// Every dependency among workspace crates that breaks the rule, and every crate in no role.
fn layer_violations(crates: &BTreeMap<String, (String, Vec<String>)>) -> Vec<String> {
    let mut found = Vec::new();
    for (name, (folder, internal)) in crates {
        let Some(from) = role(name, folder) else {
            found.push(format!("{name} ({folder}) has no role: place it in `role`"));
            continue;
        };
        for dependency in internal {
            let to_folder = crates.get(dependency).map_or("", |(f, _)| f.as_str());
            let allowed =
                role(dependency, to_folder).is_some_and(|to| allowed(from, dependency, to));
            if !allowed {
                found.push(format!("{name} ({from:?}) depends on {dependency}"));
            }
        }
    }
    found
}

#[test]
fn every_workspace_crate_depends_only_on_the_layers_its_role_allows() {
    let crates = workspace_crates();
    for expected in [
        "domain",
        "application",
        "signing",
        "store",
        "sandbox",
        "bootstrap",
    ] {
        assert!(
            crates.contains_key(expected),
            "the workspace was read: {crates:?}"
        );
    }
    assert_eq!(layer_violations(&crates), Vec::<String>::new());
}

#[test]
fn the_layer_check_flags_an_adapter_on_an_adapter_and_a_crate_in_no_role() {
    let entry = |folder: &str, deps: &[&str]| {
        (
            folder.to_owned(),
            deps.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>(),
        )
    };
    let crates = BTreeMap::from([
        ("domain".to_owned(), entry("domain", &[])),
        ("application".to_owned(), entry("application", &["domain"])),
        ("signing".to_owned(), entry("adapters/signing", &[])),
        (
            "store".to_owned(),
            entry("adapters/store", &["application"]),
        ),
        (
            "sandbox".to_owned(),
            entry("adapters/sandbox", &["signing", "domain"]),
        ),
        (
            "http-api".to_owned(),
            entry("adapters/http-api", &["application", "store"]),
        ),
        ("stray".to_owned(), entry("crates/stray", &[])),
        (
            "bootstrap".to_owned(),
            entry("bootstrap", &["store", "http-api", "sandbox"]),
        ),
    ]);
    assert_eq!(
        layer_violations(&crates),
        vec![
            "http-api (Adapter) depends on store".to_owned(),
            "stray (crates/stray) has no role: place it in `role`".to_owned(),
        ]
    );
}

#[test]
fn signing_depends_on_no_runtime_nor_wire_format() {
    let names = dependency_names("signing");
    assert!(
        names.iter().any(|n| n == "hmac"),
        "the tree was read: {names:?}"
    );
    assert_eq!(violations(&names, FORBIDDEN), Vec::<&str>::new());
    assert_eq!(violations(&names, ADAPTERS), Vec::<&str>::new());
}
