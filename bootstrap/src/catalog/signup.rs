//! `credits.toml`'s `[signupGrant]`: credits every new user is given once (issue 18).
//!
//! ```toml
//! [signupGrant]
//! amount = 10            # credits, above 0, two decimal places at most
//! expiresInDays = 30     # optional: the credits expire this many days after sign-up
//! ```
//!
//! Without the table nobody is given anything. Every problem is reported, naming its key.

use application::ports::SignupGrant;
use domain::{Credits, CreditsError};

use super::ConfigError;
use super::toml_source::{self, SourceFile};

/// The table's name in `credits.toml`.
pub(super) const TABLE: &str = "signupGrant";
/// The longest expiry accepted, in days (a hundred years).
const MAX_DAYS: i64 = 36_500;

/// The sign-up grant `credits.toml` declares, if it declares one.
pub(super) fn load_signup_grant(
    file: &SourceFile<'_>,
) -> Result<Option<SignupGrant>, Vec<ConfigError>> {
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
    let mut amount = None;
    let mut expires_after_days = None;
    let mut errors = Vec::new();
    for (key, value) in table {
        match key.get_ref().as_ref() {
            "amount" => match positive_credits(value.get_ref()) {
                Ok(credits) => amount = Some(credits),
                Err(p) => errors.extend(fail("amount", p)),
            },
            "expiresInDays" => match toml_source::integer(value.get_ref()) {
                Ok(days) if (1..=MAX_DAYS).contains(&days) => {
                    expires_after_days = u32::try_from(days).ok();
                }
                Ok(_) => errors.extend(fail("expiresInDays", format!("must be 1 to {MAX_DAYS}"))),
                Err(p) => errors.extend(fail("expiresInDays", p)),
            },
            other => errors.extend(fail(
                other,
                "is not a known key (expected amount, expiresInDays)".to_owned(),
            )),
        }
    }
    match amount {
        Some(amount) if errors.is_empty() => Ok(Some(SignupGrant {
            amount,
            expires_after_days,
        })),
        None if errors.is_empty() => Err(fail("amount", "is required".to_owned())),
        _ => Err(errors),
    }
}

fn positive_credits(value: &toml::de::DeValue<'_>) -> Result<Credits, String> {
    let credits = Credits::from_decimal(toml_source::decimal(value)?).map_err(|e| match e {
        CreditsError::Negative => "must not be negative".to_owned(),
        CreditsError::TooPrecise => "must have at most two decimal places".to_owned(),
        other => other.to_string(),
    })?;
    if credits.is_zero() {
        return Err("must be greater than zero".to_owned());
    }
    Ok(credits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Option<SignupGrant>, Vec<ConfigError>> {
        load_signup_grant(&SourceFile::new("credits.toml", text))
    }

    #[test]
    fn a_grant_is_read_with_its_optional_expiry() {
        assert_eq!(load("chat = 1").unwrap(), None);
        let grant = load("[signupGrant]\namount = 12.5\nexpiresInDays = 30\n").unwrap();
        assert_eq!(
            grant,
            Some(SignupGrant {
                amount: Credits::from_hundredths(1250).unwrap(),
                expires_after_days: Some(30),
            })
        );
        let forever = load("[signupGrant]\namount = 3\n").unwrap().unwrap();
        assert_eq!(forever.expires_after_days, None);
    }

    #[test]
    fn every_problem_names_its_key() {
        let errors = load("[signupGrant]\namount = 0\nexpiresInDays = 0\nextra = 1\n").unwrap_err();
        let fields: Vec<_> = errors.iter().filter_map(|e| e.field.clone()).collect();
        assert_eq!(
            fields,
            [
                "signupGrant.amount",
                "signupGrant.expiresInDays",
                "signupGrant.extra"
            ]
        );
        let missing = load("[signupGrant]\nexpiresInDays = 3\n").unwrap_err();
        assert_eq!(missing[0].field.as_deref(), Some("signupGrant.amount"));
        assert!(load("signupGrant = 5").is_err());
    }
}
