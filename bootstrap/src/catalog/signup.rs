//! `credits.toml`'s `[signupGrant]`: credits a new user is given once.
//!
//! ```toml
//! [signupGrant]
//! amount = 10                 # credits, above 0, two decimal places at most
//! expiresInDays = 30          # optional: the credits expire this many days after sign-up
//! requireVerifiedEmail = true # optional (default true): only a verified e-mail address gets them
//! dailyCap = 1000             # optional (default 1000): sign-up grants per UTC day, all instances
//! ```
//!
//! Without the table nobody is given anything. Every problem is reported, naming its key.

use std::num::NonZeroU32;

use application::ports::SignupGrant;
use application::sign_up::SignupCreditsFor;
use domain::{Credits, CreditsError};

use super::ConfigError;
use super::toml_source::{self, SourceFile};

/// The table's name in `credits.toml`.
pub(super) const TABLE: &str = "signupGrant";
/// The longest expiry accepted, in days (a hundred years).
const MAX_DAYS: i64 = 36_500;
/// The largest daily cap accepted, in grants.
const MAX_DAILY_CAP: i64 = 10_000_000;
/// The daily cap when none is set: 1,000 grants per UTC day.
const DEFAULT_DAILY_CAP: NonZeroU32 = NonZeroU32::MIN.saturating_add(999);
/// The keys of the table.
const KEYS: &str = "amount, expiresInDays, requireVerifiedEmail, dailyCap";

/// The sign-up grant and who may be given it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SignupCredits {
    /// What is given, how long it lasts, how many a day.
    pub grant: SignupGrant,
    /// `requireVerifiedEmail`: [`SignupCreditsFor::VerifiedEmail`] unless set to false.
    pub credits_for: SignupCreditsFor,
}

/// The table's keys as read so far.
#[derive(Debug, Default)]
struct Keys {
    amount: Option<Credits>,
    expires_after_days: Option<u32>,
    require_verified_email: Option<bool>,
    daily_cap: Option<NonZeroU32>,
}

/// The sign-up grant `credits.toml` declares, if it declares one.
pub(super) fn load_signup_grant(
    file: &SourceFile<'_>,
) -> Result<Option<SignupCredits>, Vec<ConfigError>> {
    let document = file.parse().map_err(|e| vec![e])?;
    let Some(value) = document.get(TABLE) else {
        return Ok(None);
    };
    let line = Some(file.line_of(value.span().start));
    let fail = |key: &str, problem: String| {
        file.error(line, None, Some(&format!("{TABLE}.{key}")), problem)
    };
    let table = toml_source::table(value.get_ref())
        .map_err(|p| vec![file.error(line, None, Some(TABLE), p)])?;
    let mut keys = Keys::default();
    let errors: Vec<ConfigError> = table
        .iter()
        .filter_map(|(key, value)| {
            let key = key.get_ref().as_ref();
            read_key(&mut keys, key, value.get_ref())
                .err()
                .map(|p| fail(key, p))
        })
        .collect();
    match keys.amount {
        Some(amount) if errors.is_empty() => Ok(Some(SignupCredits {
            grant: SignupGrant {
                amount,
                expires_after_days: keys.expires_after_days,
                daily_cap: keys.daily_cap.unwrap_or(DEFAULT_DAILY_CAP),
            },
            credits_for: match keys.require_verified_email {
                Some(false) => SignupCreditsFor::AnyIdentity,
                Some(true) | None => SignupCreditsFor::VerifiedEmail,
            },
        })),
        None if errors.is_empty() => Err(vec![fail("amount", "is required".to_owned())]),
        _ => Err(errors),
    }
}

/// Read one key of the table into `keys`.
fn read_key(keys: &mut Keys, key: &str, value: &toml::de::DeValue<'_>) -> Result<(), String> {
    match key {
        "amount" => keys.amount = Some(positive_credits(value)?),
        "expiresInDays" => {
            let days = toml_source::integer(value)?;
            if !(1..=MAX_DAYS).contains(&days) {
                return Err(format!("must be 1 to {MAX_DAYS}"));
            }
            keys.expires_after_days = u32::try_from(days).ok();
        }
        "requireVerifiedEmail" => keys.require_verified_email = Some(toml_source::boolean(value)?),
        "dailyCap" => {
            let cap = toml_source::integer(value)?;
            let cap = u32::try_from(cap)
                .ok()
                .and_then(NonZeroU32::new)
                .filter(|_| cap <= MAX_DAILY_CAP);
            keys.daily_cap = Some(cap.ok_or(format!("must be 1 to {MAX_DAILY_CAP}"))?);
        }
        _ => return Err(format!("is not a known key (expected {KEYS})")),
    }
    Ok(())
}

pub(super) fn positive_credits(value: &toml::de::DeValue<'_>) -> Result<Credits, String> {
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
        load_signup_grant(&SourceFile::new("credits.toml", text)).map(|c| c.map(|c| c.grant))
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
                daily_cap: DEFAULT_DAILY_CAP,
            })
        );
        let forever = load("[signupGrant]\namount = 3\n").unwrap().unwrap();
        assert_eq!(forever.expires_after_days, None);
    }

    #[test]
    fn only_verified_addresses_get_credits_unless_the_operator_says_otherwise() {
        let read = |text: &str| load_signup_grant(&SourceFile::new("credits.toml", text));
        let careful = read("[signupGrant]\namount = 3\n").unwrap().unwrap();
        assert_eq!(careful.credits_for, SignupCreditsFor::VerifiedEmail);
        assert_eq!(careful.grant.daily_cap.get(), 1000);
        let open = read("[signupGrant]\namount = 3\nrequireVerifiedEmail = false\ndailyCap = 7\n")
            .unwrap()
            .unwrap();
        assert_eq!(open.credits_for, SignupCreditsFor::AnyIdentity);
        assert_eq!(open.grant.daily_cap.get(), 7);
        let errors = read("[signupGrant]\namount = 3\ndailyCap = 0\nrequireVerifiedEmail = 1\n")
            .unwrap_err();
        let fields: Vec<_> = errors.iter().filter_map(|e| e.field.clone()).collect();
        assert_eq!(
            fields,
            ["signupGrant.dailyCap", "signupGrant.requireVerifiedEmail"]
        );
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
