//! Per-client rate limits on sign-in and payment initiation (governor's keyed GCRA limiter),
//! answered with a 429 `rate_limited` problem and `Retry-After`. Registration is limited by the
//! service's sign-up policy (`application::sign_up`), which the pages share; this module only
//! names its client.
//!
//! The client is the peer address, or the last `X-Forwarded-For` entry (the one the trusted
//! proxy appended) when `trust_forwarded_for` is on.

use std::num::NonZeroU32;

use application::sign_up::ClientAddress;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use poem::Request;

use crate::ApiSettings;
use crate::problem::Problem;

/// Above this many tracked clients, idle entries are dropped (a bound on memory).
const MAX_TRACKED_CLIENTS: usize = 100_000;

/// A limit: a sustained rate and a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed per minute, sustained.
    pub per_minute: NonZeroU32,
    /// Requests allowed at once before the rate applies.
    pub burst: NonZeroU32,
}

impl RateLimit {
    /// `per_minute` requests a minute with bursts of `burst`.
    #[must_use]
    pub const fn per_minute(per_minute: NonZeroU32, burst: NonZeroU32) -> Self {
        Self { per_minute, burst }
    }

    fn quota(self) -> Quota {
        Quota::per_minute(self.per_minute).allow_burst(self.burst)
    }
}

/// What is being limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    SignIn,
    Initiate,
}

/// One keyed limiter per action.
pub(crate) struct RateLimiters {
    sign_in: DefaultKeyedRateLimiter<String>,
    initiate: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
    trust_forwarded_for: bool,
}

impl RateLimiters {
    pub(crate) fn new(settings: &ApiSettings) -> Self {
        let clock = DefaultClock::default();
        let limiter =
            |limit: RateLimit| RateLimiter::dashmap_with_clock(limit.quota(), clock.clone());
        Self {
            sign_in: limiter(settings.sign_in_limit),
            initiate: limiter(settings.initiate_limit),
            clock: clock.clone(),
            trust_forwarded_for: settings.trust_forwarded_for,
        }
    }

    /// Count one `action` by the client of `request`.
    ///
    /// # Errors
    /// `rate_limited` with the seconds to wait.
    pub(crate) fn check(&self, action: Action, request: &Request) -> Result<(), Problem> {
        let limiter = match action {
            Action::SignIn => &self.sign_in,
            Action::Initiate => &self.initiate,
        };
        if limiter.len() > MAX_TRACKED_CLIENTS {
            limiter.retain_recent();
        }
        let key = self.client(request).as_str().to_owned();
        limiter.check_key(&key).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now());
            // Round up: retrying after a truncated wait would be refused again.
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            Problem::rate_limited(seconds.max(1))
        })
    }
}

impl RateLimiters {
    /// Who the client of `request` is, for rate limits.
    pub(crate) fn client(&self, request: &Request) -> ClientAddress {
        let forwarded = request
            .headers()
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok());
        let remote = request.remote_addr();
        let peer = remote
            .as_socket_addr()
            .map_or_else(|| remote.to_string(), |addr| addr.ip().to_string());
        ClientAddress::from_request(&peer, forwarded, self.trust_forwarded_for)
    }
}
