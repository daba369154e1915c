//! The abuse policy for account creation, one for every way an account is made (the sign-up
//! page, the JSON API, a host application's token): how often one client address and one
//! e-mail domain may sign up, and who may be given sign-up credits.
//!
//! The rate limits are counted here, in memory, per instance ([`SignUpLimiter`]); the
//! once-per-identity rule and the daily cap on sign-up credits are the store's, exact in the
//! transaction that creates the user ([`SignupIdentity`] names what it keys them by).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;

use domain::Timestamp;

use crate::accounts::Email;

/// The most keys one limiter remembers; past it, keys whose bucket is full again are dropped,
/// and if none is, all are (a flood of addresses forgets rather than grows without bound).
const MAX_TRACKED_KEYS: usize = 100_000;
/// The longest client address kept, in characters.
const MAX_CLIENT_ADDRESS_CHARS: usize = 64;
/// Milliseconds in an hour.
const HOUR_MS: i64 = 3_600_000;

/// Who is signing up, as far as the network tells: the peer address, or the last
/// `X-Forwarded-For` entry when the operator said a proxy appends it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientAddress(String);

impl ClientAddress {
    /// The client of a request from `peer`, with `forwarded_for` the request's
    /// `X-Forwarded-For` header if any: its last entry (the one the trusted proxy appended)
    /// when `trust_forwarded_for`, else the peer. At most 64 characters are kept.
    #[must_use]
    pub fn from_request(
        peer: &str,
        forwarded_for: Option<&str>,
        trust_forwarded_for: bool,
    ) -> Self {
        let forwarded = forwarded_for
            .filter(|_| trust_forwarded_for)
            .and_then(|value| value.rsplit(',').next())
            .map(str::trim)
            .filter(|value| !value.is_empty());
        Self(
            forwarded
                .unwrap_or(peer)
                .chars()
                .take(MAX_CLIENT_ADDRESS_CHARS)
                .collect(),
        )
    }

    /// The address as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The identity sign-up credits are given to at most once: a normalized e-mail address (the
/// local part's `+tag` dropped), or a host's issuer and subject when the operator does not ask
/// for a verified e-mail address and the host names none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SignupIdentity(String);

impl SignupIdentity {
    /// The identity of `email`: `email:` and the address, lower-cased (as [`Email`] is) with
    /// the local part's `+tag` removed, so `ada+1@example.com` and `Ada@example.com` are one.
    #[must_use]
    pub fn of_email(email: &Email) -> Self {
        let (local, domain) = email
            .as_str()
            .split_once('@')
            .unwrap_or((email.as_str(), ""));
        let local = local.split('+').next().unwrap_or(local);
        Self(format!("email:{local}@{domain}"))
    }

    /// The identity of a host user with no verified e-mail address: its issuer and subject
    /// (the issuer's length first, so no two pairs read the same).
    #[must_use]
    pub fn of_host_subject(issuer: &str, subject: &str) -> Self {
        Self(format!("host:{}:{issuer}:{subject}", issuer.len()))
    }

    /// The identity as stored.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Which new accounts may be given sign-up credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignupCreditsFor {
    /// Only an account whose e-mail address is verified: a host user whose token's
    /// verified-email claim is true. Password accounts (Tally sends no confirmation mail) get
    /// none.
    VerifiedEmail,
    /// Every new account, keyed by its e-mail address as given (or a host user's subject).
    AnyIdentity,
}

/// A rate: `per_hour` sustained, with bursts of `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignUpRate {
    /// Sign-ups allowed per hour, sustained.
    pub per_hour: NonZeroU32,
    /// Sign-ups allowed at once before the rate applies.
    pub burst: NonZeroU32,
}

impl SignUpRate {
    /// Milliseconds between two sign-ups at the sustained rate (at least one).
    fn interval_ms(self) -> i64 {
        (HOUR_MS / i64::from(self.per_hour.get())).max(1)
    }
}

/// The operator's abuse policy for account creation (`[signup]` in `tally.toml`, with
/// `requireVerifiedEmail` from `[signupGrant]` in `credits.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignUpPolicy {
    /// Sign-ups from one client address.
    pub per_address: SignUpRate,
    /// Sign-ups with addresses in one e-mail domain.
    pub per_domain: SignUpRate,
    /// Who may be given sign-up credits.
    pub credits_for: SignupCreditsFor,
}

impl Default for SignUpPolicy {
    /// 5 at once then 10 an hour per address (the JSON API's earlier limit allowed 5 at once);
    /// 50 at once then 300 an hour per domain; credits only for a verified e-mail address.
    fn default() -> Self {
        Self {
            per_address: SignUpRate {
                per_hour: NonZeroU32::MIN.saturating_add(9),
                burst: NonZeroU32::MIN.saturating_add(4),
            },
            per_domain: SignUpRate {
                per_hour: NonZeroU32::MIN.saturating_add(299),
                burst: NonZeroU32::MIN.saturating_add(49),
            },
            credits_for: SignupCreditsFor::VerifiedEmail,
        }
    }
}

/// A sign-up refused by a rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignUpRefused {
    /// Which limit.
    pub limit: SignUpLimit,
    /// Whole seconds to wait before the next sign-up is allowed (at least one).
    pub retry_after_seconds: u64,
}

/// Which rate limit refused a sign-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignUpLimit {
    /// Too many from the client's address.
    Address,
    /// Too many in the e-mail address's domain.
    Domain,
}

/// The in-memory rate limits of [`SignUpPolicy`] (one per service, so the pages and the API
/// share it): a generic cell rate algorithm per key, in integer milliseconds.
#[derive(Debug)]
pub struct SignUpLimiter {
    policy: SignUpPolicy,
    addresses: Mutex<HashMap<String, i64>>,
    domains: Mutex<HashMap<String, i64>>,
}

impl SignUpLimiter {
    /// A limiter counting by `policy`, with nothing counted yet.
    #[must_use]
    pub fn new(policy: SignUpPolicy) -> Self {
        Self {
            policy,
            addresses: Mutex::new(HashMap::new()),
            domains: Mutex::new(HashMap::new()),
        }
    }

    /// The policy it counts by.
    #[must_use]
    pub fn policy(&self) -> &SignUpPolicy {
        &self.policy
    }

    /// Count one sign-up from `client` with an address in `domain` (lower-cased), at `now`.
    /// The address is counted first; a sign-up it refuses is not counted against the domain.
    ///
    /// # Errors
    /// [`SignUpRefused`] with the limit and how long to wait.
    pub fn check(
        &self,
        client: &ClientAddress,
        domain: &str,
        now: Timestamp,
    ) -> Result<(), SignUpRefused> {
        take(
            &self.addresses,
            client.as_str(),
            self.policy.per_address,
            now,
        )
        .map_err(|retry_after_seconds| SignUpRefused {
            limit: SignUpLimit::Address,
            retry_after_seconds,
        })?;
        take(&self.domains, domain, self.policy.per_domain, now).map_err(|retry_after_seconds| {
            SignUpRefused {
                limit: SignUpLimit::Domain,
                retry_after_seconds,
            }
        })
    }
}

/// Attempts per key (a user's guesses at promo codes), counted in memory per instance with the
/// same cell rate algorithm as sign-ups.
#[derive(Debug)]
pub struct AttemptLimiter {
    rate: SignUpRate,
    table: Mutex<HashMap<String, i64>>,
}

impl AttemptLimiter {
    /// A limiter allowing `rate` attempts per key, nothing counted yet.
    #[must_use]
    pub fn new(rate: SignUpRate) -> Self {
        Self {
            rate,
            table: Mutex::new(HashMap::new()),
        }
    }

    /// Count one attempt of `key` at `now`.
    ///
    /// # Errors
    /// The whole seconds to wait before the next attempt is allowed.
    pub fn check(&self, key: &str, now: Timestamp) -> Result<(), u64> {
        take(&self.table, key, self.rate, now)
    }
}

/// Take one cell for `key` at `rate` (GCRA: each key keeps the theoretical arrival time of its
/// next sign-up); `Err` with the whole seconds to wait when the bucket is empty.
fn take(
    table: &Mutex<HashMap<String, i64>>,
    key: &str,
    rate: SignUpRate,
    now: Timestamp,
) -> Result<(), u64> {
    let mut table = table
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let now_ms = now.unix_millis();
    let interval_ms = rate.interval_ms();
    let tolerance_ms = interval_ms.saturating_mul(i64::from(rate.burst.get()));
    if table.len() >= MAX_TRACKED_KEYS && !table.contains_key(key) {
        table.retain(|_, arrival_ms| *arrival_ms > now_ms);
        if table.len() >= MAX_TRACKED_KEYS {
            table.clear();
        }
    }
    let arrival_ms = table.get(key).copied().unwrap_or(now_ms).max(now_ms);
    let next_ms = arrival_ms.saturating_add(interval_ms);
    let wait_ms = next_ms - now_ms - tolerance_ms;
    if wait_ms > 0 {
        // Round up: a retry after a truncated wait would be refused again.
        let seconds = u64::try_from(wait_ms).map_or(u64::MAX, |ms| ms.div_ceil(1_000));
        return Err(seconds.max(1));
    }
    table.insert(key.to_owned(), next_ms);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_hour: u32, burst: u32) -> SignUpRate {
        SignUpRate {
            per_hour: NonZeroU32::new(per_hour).unwrap(),
            burst: NonZeroU32::new(burst).unwrap(),
        }
    }

    fn limiter(address: SignUpRate, domain: SignUpRate) -> SignUpLimiter {
        SignUpLimiter::new(SignUpPolicy {
            per_address: address,
            per_domain: domain,
            credits_for: SignupCreditsFor::VerifiedEmail,
        })
    }

    fn client(text: &str) -> ClientAddress {
        ClientAddress::from_request(text, None, false)
    }

    #[test]
    fn a_burst_is_allowed_then_the_rate_applies() {
        let limits = limiter(rate(60, 3), rate(1000, 1000));
        let at = |ms| Timestamp::from_unix_millis(ms);
        for _ in 0..3 {
            assert!(limits.check(&client("a"), "x.com", at(0)).is_ok());
        }
        let refused = limits.check(&client("a"), "x.com", at(0)).unwrap_err();
        assert_eq!(refused.limit, SignUpLimit::Address);
        assert_eq!(refused.retry_after_seconds, 60);
        assert!(limits.check(&client("b"), "x.com", at(0)).is_ok());
        assert!(limits.check(&client("a"), "x.com", at(60_000)).is_ok());
        assert!(limits.check(&client("a"), "x.com", at(60_000)).is_err());
    }

    #[test]
    fn one_domain_is_limited_across_addresses() {
        let limits = limiter(rate(1000, 1000), rate(60, 2));
        let now = Timestamp::from_unix_millis(5);
        assert!(limits.check(&client("a"), "spam.example", now).is_ok());
        assert!(limits.check(&client("b"), "spam.example", now).is_ok());
        let refused = limits.check(&client("c"), "spam.example", now).unwrap_err();
        assert_eq!(refused.limit, SignUpLimit::Domain);
        assert!(limits.check(&client("c"), "other.example", now).is_ok());
    }

    #[test]
    fn the_forwarded_address_counts_only_when_trusted() {
        let forwarded = Some("203.0.113.9, 198.51.100.7");
        assert_eq!(
            ClientAddress::from_request("10.0.0.1", forwarded, true).as_str(),
            "198.51.100.7"
        );
        assert_eq!(
            ClientAddress::from_request("10.0.0.1", forwarded, false).as_str(),
            "10.0.0.1"
        );
    }

    #[test]
    fn an_identity_ignores_case_and_plus_tags() {
        let identity = |raw: &str| SignupIdentity::of_email(&Email::parse(raw).unwrap());
        assert_eq!(
            identity("Ada+promo@Example.com"),
            identity("ada@example.com")
        );
        assert_eq!(
            identity("ada@example.com").as_str(),
            "email:ada@example.com"
        );
        assert_ne!(identity("ada@example.com"), identity("ada@example.org"));
    }
}
