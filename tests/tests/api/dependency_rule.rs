//! The layer rule (HOUSE-STYLE.md rule 2), enforced: `domain` and `application` never depend,
//! directly or through another crate, on an adapter technology, and `application` depends on no
//! adapter crate of this workspace.
//!
//! It asks `cargo tree` for each crate's normal (non-dev) dependency closure with the crate's
//! own feature resolution, which is exactly what compiling that crate alone links.

use std::process::Command;

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
