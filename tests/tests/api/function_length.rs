//! HOUSE-STYLE.md rule 19, enforced: no non-test function of the workspace is longer than
//! [`MAX_LINES`] lines, from its `fn` to its closing brace.
//!
//! It follows each crate's module tree from the roots of its library, binary and example targets (read
//! from `cargo metadata`, so a new crate is covered the day it joins the workspace), skipping
//! `#[cfg(test)]` modules and `#[test]` functions, and parses every file with `syn`. The `tests`
//! crate, all test code, is left out; so are bodies of `macro_rules!`, which `syn` does not parse.
//! There are no exceptions: a function over the limit is split.

use std::path::{Path, PathBuf};

use cargo_metadata::MetadataCommand;
use syn::visit::{self, Visit};
use syn::{Attribute, ImplItemFn, ItemFn, ItemMod, TraitItemFn};

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

/// Whether the attributes switch an item off outside tests (`#[cfg(test)]`, `#[test]`,
/// `#[tokio::test]`).
fn test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        if path.is_ident("test") || path.segments.last().is_some_and(|s| s.ident == "test") {
            return true;
        }
        path.is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// Walks one file: measures functions, collects the files of its out-of-line modules.
struct FileVisitor<'a> {
    file: &'a Path,
    /// The folder where this file's child modules live.
    module_dir: PathBuf,
    /// Inline modules entered so far (their names extend `module_dir`).
    inline: Vec<String>,
    long: Vec<LongFunction>,
    children: Vec<PathBuf>,
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

    fn child_file(&self, module: &ItemMod) -> Option<PathBuf> {
        let mut dir = self.module_dir.clone();
        dir.extend(&self.inline);
        if let Some(path) = module.attrs.iter().find_map(path_attribute) {
            return Some(dir.join(path));
        }
        let name = module.ident.to_string();
        [
            dir.join(format!("{name}.rs")),
            dir.join(&name).join("mod.rs"),
        ]
        .into_iter()
        .find(|candidate| candidate.exists())
    }
}

/// The value of a `#[path = "…"]` attribute.
fn path_attribute(attr: &Attribute) -> Option<String> {
    let syn::Meta::NameValue(pair) = &attr.meta else {
        return None;
    };
    if !pair.path.is_ident("path") {
        return None;
    }
    match &pair.value {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) => Some(text.value()),
        _ => None,
    }
}

impl<'ast> Visit<'ast> for FileVisitor<'_> {
    fn visit_item_mod(&mut self, module: &'ast ItemMod) {
        if test_only(&module.attrs) {
            return;
        }
        if module.content.is_none() {
            let child = self.child_file(module);
            self.children.extend(child);
            return;
        }
        self.inline.push(module.ident.to_string());
        visit::visit_item_mod(self, module);
        self.inline.pop();
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

/// The folder where the child modules of `file` live: its own folder for a crate root or a
/// `mod.rs`, else a folder named after the file.
fn module_dir(file: &Path, is_root: bool) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if is_root || stem == "mod" {
        dir
    } else {
        dir.join(stem)
    }
}

/// Every function over the limit in the module tree rooted at `root`.
fn long_functions_from(root: &Path) -> Vec<LongFunction> {
    let mut long = Vec::new();
    let mut pending = vec![(root.to_path_buf(), true)];
    while let Some((file, is_root)) = pending.pop() {
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{} cannot be read: {e}", file.display()));
        let parsed = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        let mut visitor = FileVisitor {
            file: &file,
            module_dir: module_dir(&file, is_root),
            inline: Vec::new(),
            long: Vec::new(),
            children: Vec::new(),
        };
        visitor.visit_file(&parsed);
        long.append(&mut visitor.long);
        pending.extend(visitor.children.into_iter().map(|child| (child, false)));
    }
    long
}

/// The roots of every library, binary and example target of the workspace, but the `tests`
/// crate's.
fn target_roots() -> Vec<PathBuf> {
    let metadata = MetadataCommand::new()
        .manifest_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
        .no_deps()
        .other_options(vec!["--offline".to_owned()])
        .exec()
        .expect("cargo metadata runs");
    let mut roots: Vec<PathBuf> = metadata
        .workspace_packages()
        .into_iter()
        .filter(|package| package.name.as_str() != "tests")
        .flat_map(|package| package.targets.iter())
        .filter(|target| {
            target.is_lib() || target.is_bin() || target.is_proc_macro() || target.is_example()
        })
        .map(|target| target.src_path.clone().into_std_path_buf())
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

#[test]
fn no_non_test_function_is_longer_than_seventy_lines() {
    let roots = target_roots();
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
