//! HOUSE-STYLE.md rule 19, enforced: no non-test function of the workspace is longer than
//! [`MAX_LINES`] lines, from its `fn` to its closing brace.
//!
//! It follows each crate's module tree from the roots of its library, binary and example targets (read
//! from `cargo metadata`, so a new crate is covered the day it joins the workspace), skipping
//! `#[cfg(test)]` modules and `#[test]` functions, and parses every file with `syn`. The `tests`
//! crate, all test code, is left out; so are bodies of `macro_rules!`, which `syn` does not parse.
//! There are no exceptions: a function over the limit is split.

use std::path::{Path, PathBuf};

use syn::visit::{self, Visit};
use syn::{ImplItemFn, ItemFn, ItemMod, TraitItemFn};

use crate::source_tree::{module_tree, target_roots, test_only};

/// The longest a function may be, in lines.
const MAX_LINES: usize = 70;

/// A function over the limit: where it is and how long it is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LongFunction {
    file: String,
    line: usize,
    name: String,
    lines: usize,
}

/// Walks one file: measures its non-test functions.
struct FileVisitor<'a> {
    file: &'a Path,
    long: Vec<LongFunction>,
}

impl FileVisitor<'_> {
    fn measure(&mut self, name: &syn::Ident, first: usize, last: usize) {
        let lines = last.saturating_sub(first) + 1;
        if lines > MAX_LINES {
            self.long.push(LongFunction {
                file: self.file.display().to_string(),
                line: first,
                name: name.to_string(),
                lines,
            });
        }
    }
}

impl<'ast> Visit<'ast> for FileVisitor<'_> {
    fn visit_item_mod(&mut self, module: &'ast ItemMod) {
        if !test_only(&module.attrs) {
            visit::visit_item_mod(self, module);
        }
    }

    fn visit_item_fn(&mut self, function: &'ast ItemFn) {
        if test_only(&function.attrs) {
            return;
        }
        let first = function.sig.fn_token.span.start().line;
        let last = function.block.brace_token.span.close().end().line;
        self.measure(&function.sig.ident, first, last);
        visit::visit_item_fn(self, function);
    }

    fn visit_impl_item_fn(&mut self, function: &'ast ImplItemFn) {
        if test_only(&function.attrs) {
            return;
        }
        let first = function.sig.fn_token.span.start().line;
        let last = function.block.brace_token.span.close().end().line;
        self.measure(&function.sig.ident, first, last);
        visit::visit_impl_item_fn(self, function);
    }

    fn visit_trait_item_fn(&mut self, function: &'ast TraitItemFn) {
        if let Some(block) = &function.default {
            let first = function.sig.fn_token.span.start().line;
            let last = block.brace_token.span.close().end().line;
            self.measure(&function.sig.ident, first, last);
        }
        visit::visit_trait_item_fn(self, function);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if !test_only(&item.attrs) {
            visit::visit_item_impl(self, item);
        }
    }
}

/// Every function over the limit in the module tree rooted at `root`.
fn long_functions_from(root: &Path) -> Vec<LongFunction> {
    let mut long = Vec::new();
    for source in module_tree(root) {
        let mut visitor = FileVisitor {
            file: &source.path,
            long: Vec::new(),
        };
        visitor.visit_file(&source.syntax);
        long.append(&mut visitor.long);
    }
    long
}

/// The roots of every library, binary and example target of the workspace, but the `tests`
/// crate's.
fn roots() -> Vec<PathBuf> {
    target_roots()
        .into_iter()
        .filter(|(package, _)| package != "tests")
        .map(|(_, root)| root)
        .collect()
}

#[test]
fn no_non_test_function_is_longer_than_seventy_lines() {
    let roots = roots();
    assert!(
        roots.iter().any(|r| r.ends_with("domain/src/lib.rs")),
        "the workspace was read: {roots:?}"
    );
    let long: Vec<LongFunction> = roots.iter().flat_map(|r| long_functions_from(r)).collect();
    assert_eq!(long, Vec::<LongFunction>::new());
}

#[test]
fn the_length_check_flags_a_long_function_and_skips_test_code() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let body = "    let _ = 1;\n".repeat(MAX_LINES);
    let root = dir.path().join("lib.rs");
    let source = format!(
        "mod inner;\nfn short() {{}}\n#[test]\nfn long_test() {{\n{body}}}\n\
         #[cfg(test)]\nmod tests {{\n    fn long_helper() {{\n{body}    }}\n}}\n"
    );
    std::fs::write(&root, source).expect("written");
    std::fs::write(
        dir.path().join("inner.rs"),
        format!("struct S;\nimpl S {{\n    fn long_method() {{\n{body}    }}\n}}\n"),
    )
    .expect("written");
    let long = long_functions_from(&root);
    assert_eq!(long.len(), 1, "{long:?}");
    assert!(long[0].file.ends_with("inner.rs"), "{long:?}");
    assert_eq!((long[0].line, long[0].name.as_str()), (3, "long_method"));
    assert_eq!(long[0].lines, MAX_LINES + 2);
}
