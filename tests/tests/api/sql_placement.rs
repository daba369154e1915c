//! Every SQL statement of the workspace is in the store (`adapters/store`) or the schema
//! (`migrations`): no other crate's non-test sources hold a string literal that begins a SQL
//! statement, in code or inside a macro call (`format!`, `concat!`, `sqlx::query!` …). Test
//! code (the `tests` crate, `#[cfg(test)]` modules) may poke at the database directly.
//!
//! A statement is recognised by its opening words, in capitals as the workspace writes SQL:
//! `SELECT …`, `INSERT INTO`, `UPDATE t SET`, `DELETE FROM`, `CREATE`/`DROP`/`ALTER` of a table,
//! index, database or the like, `WITH RECURSIVE`/`WITH t AS`, `PRAGMA`, `ANALYZE`, `VACUUM`,
//! `TRUNCATE`, `SHOW x`, and transaction control. Doc comments are not read, and prose
//! ("Select a plan", "UPDATE your card") does not match.

use std::path::Path;

use syn::buffer::{Cursor, TokenBuffer};
use syn::visit::{self, Visit};
use syn::{ItemImpl, ItemMod, LitStr};

use crate::source_tree::{module_tree, target_roots, test_only};

/// The crates SQL belongs in, and the crate of test code.
const SQL_HOMES: &[&str] = &["store", "migrations", "tests"];

/// Whether `text` begins a SQL statement.
fn begins_sql(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().take(3).collect();
    let word = |i: usize| words.get(i).copied().unwrap_or("");
    let identifier = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '"')
    };
    match word(0) {
        // Something must follow, if only the space before a `concat!`'s next piece.
        "SELECT" | "PRAGMA" | "ANALYZE" | "VACUUM" | "TRUNCATE" => {
            text.trim_start().len() > word(0).len()
        }
        "INSERT" => word(1) == "INTO",
        "DELETE" => word(1) == "FROM",
        "UPDATE" => identifier(word(1)) && word(2) == "SET",
        "CREATE" | "DROP" | "ALTER" => matches!(
            word(1),
            "TABLE"
                | "INDEX"
                | "UNIQUE"
                | "DATABASE"
                | "VIEW"
                | "TRIGGER"
                | "SEQUENCE"
                | "SCHEMA"
                | "EXTENSION"
                | "FUNCTION"
                | "TYPE"
        ),
        "WITH" => word(1) == "RECURSIVE" || word(2) == "AS" || word(2).starts_with("AS("),
        "SHOW" => identifier(word(1)),
        "BEGIN" | "COMMIT" | "ROLLBACK" => {
            words.len() == 1 || matches!(word(1), "IMMEDIATE" | "TRANSACTION" | "TO" | "WORK")
        }
        "SAVEPOINT" | "RELEASE" => identifier(word(1)),
        _ => false,
    }
}

/// Collects the SQL string literals of one file's non-test code.
struct SqlVisitor<'a> {
    file: &'a Path,
    literals: usize,
    found: Vec<String>,
}

impl SqlVisitor<'_> {
    fn check(&mut self, literal: &LitStr) {
        self.literals += 1;
        let text = literal.value();
        if begins_sql(&text) {
            let line = literal.span().start().line;
            let start: String = text.trim().chars().take(40).collect();
            self.found
                .push(format!("{}:{line} {start}", self.file.display()));
        }
    }

    /// The string literals in a macro call's tokens, at any depth, but in attributes (doc
    /// comments): `#`, maybe `!`, then a group.
    fn scan_tokens(&mut self, mut cursor: Cursor<'_>) {
        while !cursor.eof() {
            if let Some((punct, next)) = cursor.punct()
                && punct.as_char() == '#'
            {
                let after_bang = next
                    .punct()
                    .filter(|(p, _)| p.as_char() == '!')
                    .map_or(next, |(_, rest)| rest);
                cursor = after_bang.any_group().map_or(next, |(_, _, _, rest)| rest);
            } else if let Some((literal, next)) = cursor.literal() {
                if let syn::Lit::Str(text) = syn::Lit::new(literal) {
                    self.check(&text);
                }
                cursor = next;
            } else if let Some((inside, _, _, next)) = cursor.any_group() {
                self.scan_tokens(inside);
                cursor = next;
            } else if let Some((_, next)) = cursor.token_tree() {
                cursor = next;
            } else {
                break;
            }
        }
    }
}

impl<'ast> Visit<'ast> for SqlVisitor<'_> {
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {
        // Doc comments and attribute arguments are not statements.
    }

    fn visit_item_mod(&mut self, module: &'ast ItemMod) {
        if !test_only(&module.attrs) {
            visit::visit_item_mod(self, module);
        }
    }

    fn visit_item_fn(&mut self, function: &'ast syn::ItemFn) {
        if !test_only(&function.attrs) {
            visit::visit_item_fn(self, function);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast ItemImpl) {
        if !test_only(&item.attrs) {
            visit::visit_item_impl(self, item);
        }
    }

    fn visit_lit_str(&mut self, literal: &'ast LitStr) {
        self.check(literal);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let buffer = TokenBuffer::new2(mac.tokens.clone());
        self.scan_tokens(buffer.begin());
    }
}

/// The SQL literals in the module tree rooted at `root`, and how many literals were read.
fn sql_from(root: &Path) -> (Vec<String>, usize) {
    let (mut found, mut literals) = (Vec::new(), 0);
    for source in module_tree(root) {
        let mut visitor = SqlVisitor {
            file: &source.path,
            literals: 0,
            found: Vec::new(),
        };
        visitor.visit_file(&source.syntax);
        found.append(&mut visitor.found);
        literals += visitor.literals;
    }
    (found, literals)
}

#[test]
fn no_sql_outside_the_store_and_the_migrations() {
    let roots: Vec<_> = target_roots()
        .into_iter()
        .filter(|(package, _)| !SQL_HOMES.contains(&package.as_str()))
        .collect();
    assert!(
        roots.iter().any(|(package, _)| package == "bench"),
        "the workspace was read: {roots:?}"
    );
    let (mut found, mut literals) = (Vec::new(), 0);
    for (_, root) in &roots {
        let (mut sql, read) = sql_from(root);
        found.append(&mut sql);
        literals += read;
    }
    assert!(
        literals > 1_000,
        "only {literals} string literals were read"
    );
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn the_sql_check_finds_the_store_s_statements() {
    let root = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../adapters/store/src/lib.rs"
    ));
    let (found, _) = sql_from(root);
    assert!(found.len() > 50, "{found:?}");
}

#[test]
fn statements_are_told_from_prose() {
    for sql in [
        "SELECT COUNT(*) FROM users",
        "  INSERT INTO users (id) VALUES ($1)",
        "UPDATE credit_balances SET balance_hundredths = $1",
        "DELETE FROM sessions WHERE id = $1",
        "CREATE TABLE t (id BIGINT)",
        "CREATE UNIQUE INDEX i ON t (id)",
        "DROP DATABASE IF EXISTS \"x\"",
        "WITH RECURSIVE s(i) AS (SELECT 1)",
        "WITH recent AS (SELECT 1) SELECT * FROM recent",
        "ANALYZE credit_transactions",
        "SHOW server_version",
        "BEGIN IMMEDIATE",
        "COMMIT",
        "SELECT ",
    ] {
        assert!(begins_sql(sql), "{sql}");
    }
    for prose in [
        "Select a plan",
        "SELECT",
        "UPDATE your card",
        "Update the plan set",
        "insert into the cart",
        "With this plan",
        "DELETE",
        "CREATE an account",
        "SHOW ALL",
        "BEGIN NOW",
        "",
    ] {
        assert!(!begins_sql(prose), "{prose}");
    }
}

#[test]
fn the_sql_check_reads_macro_calls_and_skips_docs_and_test_code() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let root = dir.path().join("lib.rs");
    let source = "//! SELECT id FROM users, in a doc comment\n\
        /// UPDATE t SET x = 1, in a doc comment\n\
        fn run() { let _ = format!(\"{}\", concat!(\"DELETE FROM t\", \" WHERE id = 1\")); }\n\
        m! { /// SELECT * FROM docs, a doc comment in a macro call\n struct S; }\n\
        const NOTE: &str = \"Select a plan\";\n\
        #[cfg(test)]\nmod tests {\n    const SQL: &str = \"SELECT 1 FROM t\";\n}\n\
        #[test]\nfn poke() { let _ = \"INSERT INTO t VALUES (1)\"; }\n";
    std::fs::write(&root, source).expect("written");
    let (found, _) = sql_from(&root);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with("lib.rs:3 DELETE FROM t"), "{found:?}");
}
