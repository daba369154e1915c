//! Every TOML snippet in the docs can be pasted at the end of the shipped `config/tally.toml`:
//! a snippet that opens a table the shipped file already has (`[http]`, `[events]` …) would make
//! the file invalid ("duplicate key"), so the docs must name the existing table and the line to
//! change instead.

use std::fs;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// The Markdown files the project publishes: `README.md`, `docs/**`, the client's docs.
fn markdown_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "node_modules" || name == "target" || name == ".next" {
            continue;
        }
        if path.is_dir() {
            markdown_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
}

/// The ```toml fenced blocks of `text`, each with the line it starts on.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, line) in text.lines().enumerate() {
        let fence = line.trim_start();
        match &mut current {
            None if fence.starts_with("```toml") => current = Some((index + 1, String::new())),
            Some(_) if fence.starts_with("```") => blocks.extend(current.take()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

#[test]
fn every_toml_snippet_in_the_docs_can_be_appended_to_the_shipped_tally_toml() {
    let root = repository();
    let shipped = fs::read_to_string(root.join("config/tally.toml")).expect("config/tally.toml");
    shipped
        .parse::<toml::Table>()
        .expect("the shipped tally.toml is valid TOML");
    let mut files = vec![root.join("README.md")];
    markdown_files(&root.join("docs"), &mut files);
    markdown_files(&root.join("clients/typescript"), &mut files);
    let mut checked = 0;
    let mut collisions = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).expect("readable Markdown");
        for (line, block) in toml_blocks(&text) {
            checked += 1;
            if let Err(e) = format!("{shipped}\n{block}").parse::<toml::Table>() {
                collisions.push(format!(
                    "{}:{line}: {}",
                    file.strip_prefix(&root).unwrap_or(file).display(),
                    e.message()
                ));
            }
        }
    }
    assert!(checked > 0, "no TOML snippet found: is the scan broken?");
    assert!(
        collisions.is_empty(),
        "snippets that collide with the shipped tally.toml:\n{}",
        collisions.join("\n")
    );
}
