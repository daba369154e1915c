//! The workspace's non-test sources as the architecture tests read them: each target's root
//! (from `cargo metadata`, so a new crate is covered the day it joins the workspace) and the
//! module tree under it, parsed with `syn`, without `#[cfg(test)]` modules.

use std::path::{Path, PathBuf};

use cargo_metadata::{Metadata, MetadataCommand};
use syn::visit::{self, Visit};
use syn::{Attribute, ItemMod};

/// One parsed source file.
pub(crate) struct SourceFile {
    pub(crate) path: PathBuf,
    pub(crate) syntax: syn::File,
}

/// Whether the attributes switch an item off outside tests (`#[cfg(test)]`, `#[test]`,
/// `#[tokio::test]`).
pub(crate) fn test_only(attrs: &[Attribute]) -> bool {
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

/// The workspace's own packages, read offline.
pub(crate) fn workspace_metadata() -> Metadata {
    MetadataCommand::new()
        .manifest_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
        .no_deps()
        .other_options(vec!["--offline".to_owned()])
        .exec()
        .expect("cargo metadata runs")
}

/// The roots of every library, binary, proc-macro and example target of the workspace, each
/// with its package's name.
pub(crate) fn target_roots() -> Vec<(String, PathBuf)> {
    let metadata = workspace_metadata();
    let mut roots: Vec<(String, PathBuf)> = metadata
        .workspace_packages()
        .into_iter()
        .flat_map(|package| {
            package
                .targets
                .iter()
                .filter(|target| {
                    target.is_lib()
                        || target.is_bin()
                        || target.is_proc_macro()
                        || target.is_example()
                })
                .map(|target| {
                    (
                        package.name.to_string(),
                        target.src_path.clone().into_std_path_buf(),
                    )
                })
        })
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

/// Every file of the module tree rooted at `root`, parsed; `#[cfg(test)]` modules are not
/// followed (their items stay in the parsed file: a visitor skips them with [`test_only`]).
pub(crate) fn module_tree(root: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    let mut pending = vec![(root.to_path_buf(), true)];
    while let Some((path, is_root)) = pending.pop() {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} cannot be read: {e}", path.display()));
        let syntax = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        let mut modules = ModuleFinder {
            module_dir: module_dir(&path, is_root),
            inline: Vec::new(),
            children: Vec::new(),
        };
        modules.visit_file(&syntax);
        pending.extend(modules.children.into_iter().map(|child| (child, false)));
        files.push(SourceFile { path, syntax });
    }
    files
}

/// Collects the files of one file's out-of-line, non-test modules.
struct ModuleFinder {
    /// The folder where this file's child modules live.
    module_dir: PathBuf,
    /// Inline modules entered so far (their names extend `module_dir`).
    inline: Vec<String>,
    children: Vec<PathBuf>,
}

impl ModuleFinder {
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

impl<'ast> Visit<'ast> for ModuleFinder {
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
