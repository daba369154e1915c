//! `tally.toml`'s `[signup]`: the rate limits of the sign-up abuse policy, the same for the
//! sign-up page and `POST /api/auth/register` (see `application::sign_up`).
//!
//! ```toml
//! [signup]
//! perAddressBurst = 5      # sign-ups at once from one client address
//! perAddressPerHour = 10   # then this many an hour
//! perDomainBurst = 50      # sign-ups at once with addresses in one e-mail domain
//! perDomainPerHour = 300   # then this many an hour
//! ```
//!
//! The counts are in memory, per instance: with N instances behind a balancer a client can
//! sign up up to N times as often (`docs/operations.md`).

use std::num::NonZeroU32;

use application::sign_up::{SignUpPolicy, SignUpRate, SignupCreditsFor};
use serde::Deserialize;

use crate::settings::SettingsError;

/// The largest rate or burst accepted.
const MAX_RATE: u32 = 1_000_000;

/// The sign-up rate limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignUpRates {
    /// Per client address.
    pub per_address: SignUpRate,
    /// Per e-mail domain.
    pub per_domain: SignUpRate,
}

impl Default for SignUpRates {
    fn default() -> Self {
        let policy = SignUpPolicy::default();
        Self {
            per_address: policy.per_address,
            per_domain: policy.per_domain,
        }
    }
}

impl SignUpRates {
    /// The whole policy, with who may be given sign-up credits (from `credits.toml`).
    #[must_use]
    pub fn policy(self, credits_for: SignupCreditsFor) -> SignUpPolicy {
        SignUpPolicy {
            per_address: self.per_address,
            per_domain: self.per_domain,
            credits_for,
        }
    }
}

/// `[signup]` as written in `tally.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SignUpFile {
    per_address_burst: Option<u32>,
    per_address_per_hour: Option<u32>,
    per_domain_burst: Option<u32>,
    per_domain_per_hour: Option<u32>,
}

/// The rates of `file`, each defaulted when not set.
///
/// # Errors
/// A value outside 1 to 1,000,000, named.
pub(crate) fn resolve(file: &SignUpFile) -> Result<SignUpRates, SettingsError> {
    let defaults = SignUpRates::default();
    let pick = |setting: &str, value: Option<u32>, default: NonZeroU32| match value {
        None => Ok(default),
        Some(value) => NonZeroU32::new(value)
            .filter(|v| v.get() <= MAX_RATE)
            .ok_or_else(|| SettingsError {
                setting: format!("signup.{setting}"),
                problem: format!("must be 1 to {MAX_RATE}"),
            }),
    };
    Ok(SignUpRates {
        per_address: SignUpRate {
            per_hour: pick(
                "perAddressPerHour",
                file.per_address_per_hour,
                defaults.per_address.per_hour,
            )?,
            burst: pick(
                "perAddressBurst",
                file.per_address_burst,
                defaults.per_address.burst,
            )?,
        },
        per_domain: SignUpRate {
            per_hour: pick(
                "perDomainPerHour",
                file.per_domain_per_hour,
                defaults.per_domain.per_hour,
            )?,
            burst: pick(
                "perDomainBurst",
                file.per_domain_burst,
                defaults.per_domain.burst,
            )?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_rates_are_the_policys_defaults_and_zero_is_refused() {
        let rates = resolve(&SignUpFile::default()).unwrap();
        assert_eq!(rates, SignUpRates::default());
        assert_eq!(rates.per_address.burst.get(), 5);
        let file: SignUpFile =
            toml::from_str("perDomainBurst = 2\nperAddressPerHour = 60").unwrap();
        let rates = resolve(&file).unwrap();
        assert_eq!(rates.per_domain.burst.get(), 2);
        assert_eq!(rates.per_address.per_hour.get(), 60);
        let zero: SignUpFile = toml::from_str("perAddressBurst = 0").unwrap();
        assert_eq!(
            resolve(&zero).unwrap_err().setting,
            "signup.perAddressBurst"
        );
    }
}
