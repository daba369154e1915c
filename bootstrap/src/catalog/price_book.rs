//! `credits.toml`'s `[priceBook]`: token prices by kind per model, effective-dated.
//!
//! ```toml
//! [priceBook]
//! creditValue = 0.01                 # what one credit is worth in the cost currency; needed
//!                                    # by entries that derive their prices with `markup`
//!
//! [[priceBook.entries]]
//! model = "gpt-4o"
//! effectiveFrom = "2026-01-01"       # a UTC date or an RFC 3339 instant
//! input = 250                        # credits per million input tokens
//! output = 1000                      # optional per kind: output, cacheRead, cacheWrite,
//! cacheRead = 125                    # reasoning (a kind left out costs as input)
//! cost = { input = 2.5, output = 10, cacheRead = 1.25 }   # optional: the provider's cost
//!                                    # per million tokens, in the cost currency
//!
//! [[priceBook.entries]]
//! model = "claude-sonnet-4"
//! effectiveFrom = "2026-01-01"
//! cost = { input = 3, output = 15, cacheRead = 0.3, cacheWrite = 3.75 }
//! markup = 0.2                       # credit prices = cost × 1.2 / creditValue
//! ```
//!
//! Every key is checked and every problem reported, each naming its entry and key.

use chrono::{DateTime, NaiveDate};
use domain::consumption::ModelName;
use domain::pricing::{
    CreditValue, EntryPrices, MAX_ENTRIES_PER_MODEL, PerKind, PriceBook, PriceEntry, TokenKind,
};
use domain::{ConsumptionError, Timestamp};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use toml::de::DeValue;

use super::ConfigError;
use super::toml_source::{self, SourceFile};

/// The table's name in `credits.toml`.
pub(super) const TABLE: &str = "priceBook";
/// The most entries in the book.
const MAX_ENTRIES: usize = 1_000;
const ENTRY_KEYS: &str = "model, effectiveFrom, input, output, cacheRead, cacheWrite, \
     reasoning, cost, markup";

/// The price book `credits.toml` gives, empty when it gives none.
pub(super) fn load_price_book(file: &SourceFile<'_>) -> Result<PriceBook, Vec<ConfigError>> {
    let document = file.parse().map_err(|e| vec![e])?;
    let Some(value) = document.get(TABLE) else {
        return Ok(PriceBook::default());
    };
    let line = Some(file.line_of(value.span().start));
    let fail = |key: &str, problem: String| file.error(line, None, Some(key), problem);
    let table = toml_source::table(value.get_ref()).map_err(|p| vec![fail(TABLE, p)])?;
    let mut errors = Vec::new();
    let mut credit_value = None;
    let mut raw_entries = None;
    for (key, value) in table {
        match key.get_ref().as_ref() {
            "creditValue" => match millionths(value.get_ref()).and_then(|m| {
                CreditValue::new(m).map_err(|_| "must be above 0 and at most 1000000".to_owned())
            }) {
                Ok(v) => credit_value = Some(v),
                Err(p) => errors.push(fail("priceBook.creditValue", p)),
            },
            "entries" => raw_entries = Some(value),
            other => errors.push(fail(
                &format!("{TABLE}.{other}"),
                "is not a known key (expected creditValue, entries)".to_owned(),
            )),
        }
    }
    let mut entries = Vec::new();
    if let Some(raw) = raw_entries {
        let DeValue::Array(items) = raw.get_ref() else {
            return Err(vec![fail(
                "priceBook.entries",
                "must be an array of tables ([[priceBook.entries]])".to_owned(),
            )]);
        };
        if items.len() > MAX_ENTRIES {
            errors.push(fail(
                "priceBook.entries",
                format!("has more than {MAX_ENTRIES} entries"),
            ));
        }
        for (n, item) in items.iter().enumerate() {
            let key = format!("priceBook.entries[{n}]");
            let item_line = Some(file.line_of(item.span().start));
            match entry(item.get_ref(), credit_value) {
                Ok(e) => entries.push(e),
                Err((at, problem)) => {
                    let at = if at.is_empty() {
                        key.clone()
                    } else {
                        format!("{key}.{at}")
                    };
                    errors.push(file.error(item_line, None, Some(&at), problem));
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    PriceBook::new(entries).map_err(|e| {
        let problem = match e {
            ConsumptionError::TooLarge => {
                format!("has more than {MAX_ENTRIES_PER_MODEL} entries for one model")
            }
            other => other.to_string(),
        };
        vec![fail("priceBook.entries", problem)]
    })
}

/// One `[[priceBook.entries]]` table, or the key at fault (empty: the entry) and why.
fn entry(
    value: &DeValue<'_>,
    credit_value: Option<CreditValue>,
) -> Result<PriceEntry, (String, String)> {
    let table = toml_source::table(value).map_err(|p| (String::new(), p))?;
    let mut model = None;
    let mut from = None;
    let mut credits: [Option<u64>; 5] = [None; 5];
    let mut cost = None;
    let mut markup = None;
    for (key, value) in table {
        let name: &str = key.get_ref().as_ref();
        let at = |p: String| (name.to_owned(), p);
        let v = value.get_ref();
        match name {
            "model" => {
                let text = toml_source::string(v).map_err(at)?;
                model = Some(ModelName::new(text).map_err(|e| at(e.to_string()))?);
            }
            "effectiveFrom" => from = Some(instant(v).map_err(at)?),
            "cost" => {
                cost = Some(per_kind(v, millionths).map_err(|(k, p)| (format!("cost.{k}"), p))?)
            }
            "markup" => markup = Some(basis_points(v).map_err(at)?),
            other => match TokenKind::parse(other) {
                Some(kind) => credits[kind.index()] = Some(hundredths(v).map_err(at)?),
                None => return Err(at(format!("is not a known key (expected {ENTRY_KEYS})"))),
            },
        }
    }
    let model = model.ok_or_else(|| (String::new(), "needs a model".to_owned()))?;
    let from = from.ok_or_else(|| (String::new(), "needs effectiveFrom".to_owned()))?;
    let prices = entry_prices(credits, cost, markup)?;
    PriceEntry::new(model, from, prices, credit_value).map_err(|e| {
        let problem = match e {
            ConsumptionError::NotPositive(what) if what == "creditValue" => {
                "derives its prices with `markup`, which needs priceBook.creditValue".to_owned()
            }
            ConsumptionError::TooLarge => format!(
                "has a price above {} credits or a cost above {} per million tokens, or a \
                 markup above 100 (10,000%)",
                domain::pricing::MAX_PRICE_HUNDREDTHS / 100,
                domain::pricing::MAX_COST_MILLIONTHS / 1_000_000
            ),
            other => other.to_string(),
        };
        (String::new(), problem)
    })
}

/// How an entry's credit prices come about: given per kind (`credits`, `input` required), or
/// derived from `cost` with `markup`; or the key at fault (empty: the entry) and why.
fn entry_prices(
    credits: [Option<u64>; 5],
    cost: Option<PerKind>,
    markup: Option<u64>,
) -> Result<EntryPrices, (String, String)> {
    Ok(match (credits, cost, markup) {
        ([None, None, None, None, None], Some(cost), Some(markup)) => EntryPrices::Marked {
            cost,
            markup_basis_points: markup,
        },
        (_, _, Some(_)) => {
            return Err((
                "markup".to_owned(),
                "derives the credit prices from `cost`: give `cost` and no credit prices"
                    .to_owned(),
            ));
        }
        ([Some(input), output, cache_read, cache_write, reasoning], cost, None) => {
            EntryPrices::Given {
                credits: PerKind::new(input, [output, cache_read, cache_write, reasoning]),
                cost,
            }
        }
        _ => {
            return Err((
                String::new(),
                "needs an `input` price in credits per million tokens, or `cost` with `markup`"
                    .to_owned(),
            ));
        }
    })
}

/// An amount for each kind, `input` required: `{ input = …, output = …, … }`.
fn per_kind(
    value: &DeValue<'_>,
    read: fn(&DeValue<'_>) -> Result<u64, String>,
) -> Result<PerKind, (String, String)> {
    let table = toml_source::table(value).map_err(|p| (String::new(), p))?;
    let mut amounts: [Option<u64>; 5] = [None; 5];
    for (key, value) in table {
        let name: &str = key.get_ref().as_ref();
        let kind = TokenKind::parse(name).ok_or_else(|| {
            (
                name.to_owned(),
                "is not a token kind (expected input, output, cacheRead, cacheWrite, reasoning)"
                    .to_owned(),
            )
        })?;
        amounts[kind.index()] = Some(read(value.get_ref()).map_err(|p| (name.to_owned(), p))?);
    }
    let [input, output, cache_read, cache_write, reasoning] = amounts;
    let input = input.ok_or_else(|| ("input".to_owned(), "is required".to_owned()))?;
    Ok(PerKind::new(
        input,
        [output, cache_read, cache_write, reasoning],
    ))
}

/// A decimal with at most `places` decimal places, scaled to a whole number of
/// `10^-places`, at least 0.
fn scaled(value: &DeValue<'_>, places: u32, what: &str) -> Result<u64, String> {
    let d = toml_source::decimal(value)?.normalize();
    if d.is_sign_negative() {
        return Err("must not be negative".to_owned());
    }
    if d.scale() > places {
        return Err(format!(
            "must have at most {places} decimal places ({what})"
        ));
    }
    (d * Decimal::from(10_u64.pow(places)))
        .to_u64()
        .ok_or_else(|| "is too large".to_owned())
}

/// Credits per million tokens, in hundredths.
fn hundredths(value: &DeValue<'_>) -> Result<u64, String> {
    scaled(value, 2, "credits")
}

/// An amount of the cost currency, in millionths.
fn millionths(value: &DeValue<'_>) -> Result<u64, String> {
    scaled(value, 6, "the cost currency to the millionth")
}

/// A markup as a fraction of the cost (`0.2` is +20%), in basis points.
fn basis_points(value: &DeValue<'_>) -> Result<u64, String> {
    scaled(value, 4, "a markup to the hundredth of a percent")
}

/// A UTC date (its midnight) or an RFC 3339 instant, as a string or a TOML date.
fn instant(value: &DeValue<'_>) -> Result<Timestamp, String> {
    let text = match value {
        DeValue::String(s) => s.to_string(),
        DeValue::Datetime(d) => d.to_string(),
        _ => return Err("must be a date such as \"2026-01-01\" or an RFC 3339 instant".into()),
    };
    if let Ok(date) = NaiveDate::parse_from_str(&text, "%Y-%m-%d") {
        let midnight = date
            .and_hms_opt(0, 0, 0)
            .map(|d| d.and_utc().timestamp_millis());
        return midnight
            .map(Timestamp::from_unix_millis)
            .ok_or_else(|| format!("{text:?} is not a date"));
    }
    DateTime::parse_from_rfc3339(&text)
        .map(|d| Timestamp::from_unix_millis(d.timestamp_millis()))
        .map_err(|_| format!("{text:?} is neither a date (2026-01-01) nor an RFC 3339 instant"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<PriceBook, Vec<ConfigError>> {
        load_price_book(&SourceFile::new("credits.toml", text))
    }

    fn model(name: &str) -> ModelName {
        ModelName::new(name).unwrap()
    }

    #[test]
    fn entries_are_read_with_their_dates_prices_and_costs() {
        let book = load(
            "[priceBook]\ncreditValue = 0.01\n\n\
             [[priceBook.entries]]\nmodel = \"gpt-4o\"\neffectiveFrom = \"2026-01-01\"\n\
             input = 250\noutput = 1000\ncacheRead = 125\n\
             cost = { input = 2.5, output = 10 }\n\n\
             [[priceBook.entries]]\nmodel = \"claude\"\neffectiveFrom = 2026-02-01T12:00:00Z\n\
             cost = { input = 3, output = 15 }\nmarkup = 0.2\n",
        )
        .unwrap();
        let jan = Timestamp::from_unix_millis(1_767_225_600_000);
        let gpt = book.entry_at(&model("gpt-4o"), jan).unwrap();
        assert_eq!(gpt.credits.of(TokenKind::Output), 100_000);
        assert_eq!(gpt.credits.of(TokenKind::Reasoning), 25_000);
        assert_eq!(gpt.cost.unwrap().of(TokenKind::Input), 2_500_000);
        assert!(
            book.entry_at(&model("gpt-4o"), jan.plus_millis(-1))
                .is_none()
        );
        let feb = Timestamp::from_unix_millis(1_769_947_200_000);
        let claude = book.entry_at(&model("claude"), feb).unwrap();
        assert_eq!(claude.credits.of(TokenKind::Input), 36_000);
        assert_eq!(claude.markup_basis_points, Some(2_000));
        assert!(load("").unwrap().is_empty());
    }

    #[test]
    fn the_shipped_example_loads_once_uncommented() {
        let shipped = include_str!("../../../config/credits.toml");
        let start = shipped.find("# [priceBook]").expect("the example");
        let example: Vec<&str> = shipped[start..]
            .lines()
            .map(|l| {
                l.strip_prefix("# ")
                    .or_else(|| l.strip_prefix('#'))
                    .unwrap_or(l)
            })
            .collect();
        let book = load(&example.join("\n")).unwrap();
        assert_eq!(book.entries().count(), 2);
    }

    #[test]
    fn each_problem_names_its_entry_and_key() {
        let cases = [
            (
                "[[priceBook.entries]]\nmodel = \"m\"\ninput = 1\n",
                "entries[0]",
                "effectiveFrom",
            ),
            (
                "[[priceBook.entries]]\nmodel = \"m\"\neffectiveFrom = \"2026-13-01\"\ninput = 1\n",
                "entries[0].effectiveFrom",
                "neither a date",
            ),
            (
                "[[priceBook.entries]]\nmodel = \"m\"\neffectiveFrom = \"2026-01-01\"\ninput = 0\n",
                "entries[0]",
                "greater than zero",
            ),
            (
                "[[priceBook.entries]]\nmodel = \"m\"\neffectiveFrom = \"2026-01-01\"\ninput = 1.001\n",
                "entries[0].input",
                "decimal places",
            ),
            (
                "[[priceBook.entries]]\nmodel = \"m\"\neffectiveFrom = \"2026-01-01\"\n\
                 cost = { input = 1 }\nmarkup = 0.5\n",
                "entries[0]",
                "creditValue",
            ),
            (
                "[[priceBook.entries]]\nmodel = \"m\"\neffectiveFrom = \"2026-01-01\"\ninput = 1\n\
                 markup = 0.5\n",
                "entries[0].markup",
                "no credit prices",
            ),
            (
                "[[priceBook.entries]]\nmodel = \"m\"\neffectiveFrom = \"2026-01-01\"\ninputs = 1\n",
                "entries[0].inputs",
                "not a known key",
            ),
            (
                "[[priceBook.entries]]\nmodel = \"m\"\neffectiveFrom = \"2026-01-01\"\ninput = 1\n\
                 cost = { output = 1 }\n",
                "entries[0].cost.input",
                "required",
            ),
            (
                "[[priceBook.entries]]\nmodel = \"m\"\neffectiveFrom = \"2026-01-01\"\ninput = 1\n\
                 [[priceBook.entries]]\nmodel = \"m\"\neffectiveFrom = \"2026-01-01\"\ninput = 2\n",
                "priceBook.entries",
                "same time",
            ),
            (
                "[priceBook]\ncreditValue = 0\n",
                "priceBook.creditValue",
                "above 0",
            ),
        ];
        for (text, key, problem) in cases {
            let errors = load(text).unwrap_err();
            let shown = errors[0].to_string();
            assert!(
                shown.contains(key) && shown.contains(problem),
                "{text}: {shown}"
            );
        }
    }
}
