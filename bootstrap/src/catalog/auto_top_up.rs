//! `credits.toml`'s `[autoTopUp]`: the operator's rails around automatic top-up.
//!
//! ```toml
//! [autoTopUp]
//! coolOffHours = 24            # no charge for this long after a decline (1 to 720)
//! maxDeclines = 3              # declines in a row that turn an account's rule off (1 to 20)
//! maxPerAccountPerMonth = 10   # top-ups per account and calendar month, whatever the rule says (1 to 1000)
//! ```
//!
//! Every key is optional; without the table the defaults above apply.

use domain::TopUpRails;

use super::ConfigError;
use super::toml_source::{self, SourceFile};

/// The table's name in `credits.toml`.
pub(super) const TABLE: &str = "autoTopUp";

/// An integer key within `range`.
fn bounded(
    value: &toml::de::DeValue<'_>,
    range: std::ops::RangeInclusive<i64>,
) -> Result<i64, String> {
    let n = toml_source::integer(value)?;
    if range.contains(&n) {
        Ok(n)
    } else {
        Err(format!("must be from {} to {}", range.start(), range.end()))
    }
}

/// The rails `credits.toml` sets (the defaults for what it leaves out).
pub(super) fn load_rails(file: &SourceFile<'_>) -> Result<TopUpRails, Vec<ConfigError>> {
    let document = file.parse().map_err(|e| vec![e])?;
    let mut rails = TopUpRails::default();
    let Some(value) = document.get(TABLE) else {
        return Ok(rails);
    };
    let line = Some(file.line_of(value.span().start));
    let fail = |key: &str, problem: String| {
        vec![file.error(line, None, Some(&format!("{TABLE}.{key}")), problem)]
    };
    let table = toml_source::table(value.get_ref())
        .map_err(|p| vec![file.error(line, None, Some(TABLE), p)])?;
    for (key, value) in table {
        let key = key.get_ref().as_ref();
        let value = value.get_ref();
        match key {
            "coolOffHours" => {
                rails.cool_off_ms = bounded(value, 1..=720).map_err(|p| fail(key, p))? * 3_600_000;
            }
            "maxDeclines" => {
                let n = bounded(value, 1..=20).map_err(|p| fail(key, p))?;
                rails.max_declines = u32::try_from(n).unwrap_or(1);
            }
            "maxPerAccountPerMonth" => {
                let n = bounded(value, 1..=1000).map_err(|p| fail(key, p))?;
                rails.max_per_month = u32::try_from(n).unwrap_or(1);
            }
            other => {
                return Err(fail(
                    other,
                    "is not a known key (expected coolOffHours, maxDeclines, maxPerAccountPerMonth)"
                        .to_owned(),
                ));
            }
        }
    }
    Ok(rails)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<TopUpRails, Vec<ConfigError>> {
        load_rails(&SourceFile::new("credits.toml", text))
    }

    #[test]
    fn the_rails_default_and_are_bounded() {
        assert_eq!(load("").unwrap(), TopUpRails::default());
        let set =
            load("[autoTopUp]\ncoolOffHours = 2\nmaxDeclines = 5\nmaxPerAccountPerMonth = 4\n")
                .unwrap();
        assert_eq!(set.cool_off_ms, 2 * 3_600_000);
        assert_eq!((set.max_declines, set.max_per_month), (5, 4));
        for bad in [
            "coolOffHours = 0",
            "maxDeclines = 21",
            "maxPerAccountPerMonth = \"x\"",
        ] {
            let errors = load(&format!("[autoTopUp]\n{bad}\n")).unwrap_err();
            assert!(
                errors[0].to_string().contains("autoTopUp."),
                "{bad}: {errors:?}"
            );
        }
        let errors = load("[autoTopUp]\nmaxCharges = 5\n").unwrap_err();
        assert!(
            errors[0].to_string().contains("not a known key"),
            "{errors:?}"
        );
    }
}
