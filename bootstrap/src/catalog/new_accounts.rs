//! `credits.toml`'s `[newAccounts]`: what every account opened from now on starts with.
//!
//! ```toml
//! [newAccounts]
//! monthlyCeiling = 500   # optional: a hard limit of this many credits per calendar month
//! ```
//!
//! The ceiling is a spend limit like any other (`docs/spend-controls.md`), added in the
//! transaction that opens the account: a user's personal account, a team made through the API
//! or a host organisation's team. The account's owners may change or remove it. Accounts opened
//! before it was set are left as they are.

use domain::Credits;

use super::ConfigError;
use super::signup::positive_credits;
use super::toml_source::{self, SourceFile};

/// The table's name in `credits.toml`.
pub(super) const TABLE: &str = "newAccounts";

/// The monthly ceiling `credits.toml` gives new accounts, if it gives one.
pub(super) fn load_ceiling(file: &SourceFile<'_>) -> Result<Option<Credits>, Vec<ConfigError>> {
    let document = file.parse().map_err(|e| vec![e])?;
    let Some(value) = document.get(TABLE) else {
        return Ok(None);
    };
    let line = Some(file.line_of(value.span().start));
    let fail = |key: &str, problem: String| {
        vec![file.error(line, None, Some(&format!("{TABLE}.{key}")), problem)]
    };
    let table = toml_source::table(value.get_ref())
        .map_err(|p| vec![file.error(line, None, Some(TABLE), p)])?;
    let mut ceiling = None;
    for (key, value) in table {
        match key.get_ref().as_ref() {
            "monthlyCeiling" => {
                ceiling =
                    Some(positive_credits(value.get_ref()).map_err(|p| fail("monthlyCeiling", p))?);
            }
            other => {
                return Err(fail(
                    other,
                    "is not a known key (expected monthlyCeiling)".to_owned(),
                ));
            }
        }
    }
    Ok(ceiling)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Option<Credits>, Vec<ConfigError>> {
        load_ceiling(&SourceFile::new("credits.toml", text))
    }

    #[test]
    fn a_ceiling_is_a_positive_number_of_credits_or_absent() {
        assert_eq!(load("").unwrap(), None);
        assert_eq!(load("[newAccounts]\n").unwrap(), None);
        assert_eq!(
            load("[newAccounts]\nmonthlyCeiling = 500\n").unwrap(),
            Some(Credits::from_hundredths(50_000).unwrap())
        );
        for bad in ["0", "-1", "1.001", "\"lots\""] {
            let text = format!("[newAccounts]\nmonthlyCeiling = {bad}\n");
            let errors = load(&text).unwrap_err();
            assert!(
                errors[0].to_string().contains("newAccounts.monthlyCeiling"),
                "{bad}: {errors:?}"
            );
        }
        let errors = load("[newAccounts]\nweeklyCeiling = 5\n").unwrap_err();
        assert!(
            errors[0].to_string().contains("not a known key"),
            "{errors:?}"
        );
    }
}
