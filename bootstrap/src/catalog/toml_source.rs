//! Reading TOML exactly, with positions for error messages.
//!
//! `toml`'s serde path turns `amount = 9.99` into an `f64`, which cannot hold 9.99. Instead the
//! document is parsed into [`DeValue`]s, which keep every number's source text, and decimals are
//! read from that text with [`Decimal::from_str_exact`]: `9.99`, `0.1`, `19.90` and `0.01` are
//! the decimals written, digit for digit, or an error, never a rounded value. Quoted amounts
//! (`amount = "9.99"`) go through the same parser.
//!
//! Each value keeps its byte span, which [`SourceFile::line_of`] turns into a line number.

use std::borrow::Cow;

use domain::entitlements::EntitlementDraft;
use rust_decimal::Decimal;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::ConfigError;

/// A parsed TOML value with its byte span.
pub(super) type Value<'i> = Spanned<DeValue<'i>>;
/// A table key with its byte span.
pub(super) type Key<'i> = Spanned<Cow<'i, str>>;

/// The most digits a configured decimal may have (`Decimal` holds 28).
const MAX_DECIMAL_DIGITS: usize = 28;

/// One configuration file's name and text.
pub(super) struct SourceFile<'a> {
    name: &'a str,
    text: &'a str,
    /// The byte offset at which each line starts, for [`SourceFile::line_of`].
    line_starts: Vec<usize>,
}

impl<'a> SourceFile<'a> {
    pub(super) fn new(name: &'a str, text: &'a str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self {
            name,
            text,
            line_starts,
        }
    }

    /// The 1-based line of a byte offset.
    pub(super) fn line_of(&self, offset: usize) -> usize {
        // Lines before `offset`'s, plus its own: a binary search, as every value asks.
        self.line_starts.partition_point(|start| *start <= offset)
    }

    /// An error in this file.
    pub(super) fn error(
        &self,
        line: Option<usize>,
        plan_id: Option<&str>,
        field: Option<&str>,
        problem: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.name.to_owned(),
            line,
            plan_id: plan_id.map(str::to_owned),
            field: field.map(str::to_owned),
            problem: problem.into(),
        }
    }

    /// Parse the whole file.
    ///
    /// A syntax error names the line and, when the text around it makes them clear, the plan
    /// (from the nearest `[plans.<id>...]` header above) and the key on that line.
    pub(super) fn parse(&self) -> Result<DeTable<'a>, ConfigError> {
        match DeTable::parse(self.text) {
            Ok(table) => Ok(table.into_inner()),
            Err(e) => {
                let offset = e.span().map_or(0, |s| s.start);
                let (plan_id, field) = self.context_of(offset);
                Err(self.error(
                    Some(self.line_of(offset)),
                    plan_id.as_deref(),
                    field.as_deref(),
                    format!("is not valid TOML: {}", e.message().trim_end_matches('.')),
                ))
            }
        }
    }

    /// Best-effort plan id and key at `offset`, for syntax errors that have no parsed value.
    fn context_of(&self, offset: usize) -> (Option<String>, Option<String>) {
        let end = offset.min(self.text.len());
        let before = self.text.get(..end).unwrap_or_default();
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[line_start..].lines().next().unwrap_or_default();
        let header = before[..line_start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['));
        let path: Vec<String> = header.map(header_path).unwrap_or_default();
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim().trim_matches('"').to_owned())
            .filter(|k| !k.is_empty() && !k.starts_with('['));
        match path.as_slice() {
            [plans, id, rest @ ..] if plans == "plans" => {
                let field = key.map(|k| rest.iter().cloned().chain([k]).collect::<Vec<_>>());
                (Some(id.clone()), field.map(|f| f.join(".")))
            }
            [] => (None, key),
            _ => (None, key.map(|k| format!("{}.{k}", path.join(".")))),
        }
    }
}

/// The dotted path of a `[a.b."c"]` or `[[a.b]]` header.
fn header_path(header: &str) -> Vec<String> {
    header
        .trim_start_matches('[')
        .split(']')
        .next()
        .unwrap_or_default()
        .split('.')
        .map(|s| s.trim().trim_matches('"').to_owned())
        .collect()
}

/// What a value is, for type errors.
fn kind(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// A string value.
pub(super) fn string(value: &DeValue<'_>) -> Result<String, String> {
    match value {
        DeValue::String(s) => Ok(s.to_string()),
        other => Err(format!("must be a string, found {}", kind(other))),
    }
}

/// A boolean value.
pub(super) fn boolean(value: &DeValue<'_>) -> Result<bool, String> {
    match value {
        DeValue::Boolean(b) => Ok(*b),
        other => Err(format!("must be true or false, found {}", kind(other))),
    }
}

/// A whole number.
pub(super) fn integer(value: &DeValue<'_>) -> Result<i64, String> {
    match value {
        DeValue::Integer(i) => {
            i64::from_str_radix(i.as_str(), i.radix()).map_err(|_| "is too large".to_owned())
        }
        other => Err(format!("must be a whole number, found {}", kind(other))),
    }
}

/// An entitlement value: a boolean or a whole number (the plan rules then refuse `false` and
/// negative numbers).
pub(super) fn entitlement(value: &DeValue<'_>) -> Result<EntitlementDraft, String> {
    match value {
        DeValue::Boolean(b) => Ok(EntitlementDraft::Flag(*b)),
        DeValue::Integer(_) => integer(value).map(EntitlementDraft::Integer),
        other => Err(format!(
            "must be true or a non-negative whole number, found {}",
            kind(other)
        )),
    }
}

/// An array of strings.
pub(super) fn strings(value: &DeValue<'_>) -> Result<Vec<String>, String> {
    let DeValue::Array(items) = value else {
        return Err(format!(
            "must be an array of strings, found {}",
            kind(value)
        ));
    };
    items
        .iter()
        .map(|item| match item.get_ref() {
            DeValue::String(s) => Ok(s.to_string()),
            other => Err(format!("must contain only strings, found {}", kind(other))),
        })
        .collect()
}

/// A table.
pub(super) fn table<'v, 'i>(value: &'v DeValue<'i>) -> Result<&'v DeTable<'i>, String> {
    match value {
        DeValue::Table(t) => Ok(t),
        other => Err(format!("must be a table, found {}", kind(other))),
    }
}

/// An exact decimal, from a TOML integer, float or string, read from its source text.
pub(super) fn decimal(value: &DeValue<'_>) -> Result<Decimal, String> {
    let text = match value {
        DeValue::Float(f) => f.as_str(),
        DeValue::Integer(i) if i.radix() == 10 => i.as_str(),
        DeValue::String(s) => s.as_ref(),
        DeValue::Integer(_) => {
            return Err("must be a decimal number, not hexadecimal, octal or binary".into());
        }
        other => {
            return Err(format!(
                "must be a decimal number such as 9.99, found {}",
                kind(other)
            ));
        }
    };
    parse_exact_decimal(text)
        .ok_or_else(|| format!("must be a plain decimal number such as 9.99, found {text:?}"))
}

/// Parse `[+-]digits[.digits]` exactly; exponents, `inf`, `nan`, spaces and more than
/// [`MAX_DECIMAL_DIGITS`] digits are refused rather than rounded.
pub(super) fn parse_exact_decimal(text: &str) -> Option<Decimal> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() => (whole, fraction),
        Some(_) => return None,
        None => (unsigned, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let well_formed = !whole.is_empty()
        && all_digits(whole)
        && all_digits(fraction)
        && whole.len() + fraction.len() <= MAX_DECIMAL_DIGITS;
    if !well_formed {
        return None;
    }
    Decimal::from_str_exact(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        s.parse().expect("a valid decimal literal in a test")
    }

    fn parse_value(toml_text: &str) -> Result<Decimal, String> {
        let doc = DeTable::parse(toml_text).expect("valid toml in a test");
        let value = doc.get_ref().get("amount").expect("an amount key");
        decimal(value.get_ref())
    }

    #[test]
    fn float_literals_are_the_decimals_written_digit_for_digit() {
        for (literal, expected) in [
            ("0.1", "0.1"),
            ("9.99", "9.99"),
            ("19.90", "19.90"),
            ("0.01", "0.01"),
            ("1_000.50", "1000.50"),
            ("+2.5", "2.5"),
            ("-1.5", "-1.5"),
            ("0.30000000000000004", "0.30000000000000004"),
            ("1.0000000000000001", "1.0000000000000001"),
        ] {
            let parsed = parse_value(&format!("amount = {literal}")).expect(literal);
            assert_eq!(parsed, dec(expected), "{literal}");
            assert_eq!(parsed.to_string(), expected.replace('+', ""), "{literal}");
        }
    }

    #[test]
    fn integers_and_quoted_amounts_are_exact_too() {
        assert_eq!(parse_value("amount = 10"), Ok(dec("10")));
        assert_eq!(parse_value("amount = \"9.99\""), Ok(dec("9.99")));
        assert_eq!(
            parse_value("amount = \"0.1\"").map(|d| d.to_string()),
            Ok("0.1".into())
        );
    }

    #[test]
    fn exponents_infinities_and_text_are_refused_not_rounded() {
        for literal in [
            "1e3",
            "9.99e0",
            "inf",
            "nan",
            "\"abc\"",
            "\" 9.99\"",
            "\"9.\"",
            "\".5\"",
            "\"1.2.3\"",
            "0x10",
            "true",
            "\"12345678901234567890.123456789\"",
        ] {
            assert!(
                parse_value(&format!("amount = {literal}")).is_err(),
                "{literal}"
            );
        }
    }

    #[test]
    fn syntax_errors_name_the_plan_and_the_key_on_their_line() {
        let text = "[plans.pro]\nprovider = \"mor_a\"\namount = 9.9.9\n";
        let file = SourceFile::new("payment.toml", text);
        let error = file.parse().expect_err("a syntax error");
        assert_eq!(error.line, Some(3));
        assert_eq!(error.plan_id.as_deref(), Some("pro"));
        assert_eq!(error.field.as_deref(), Some("amount"));
    }
}
