//! Per-client rate limits on sign-in and payment initiation (governor's keyed GCRA limiter),
//! answered with a 429 `rate_limited` problem and `Retry-After`. Registration is limited by the
//! service's sign-up policy (`application::sign_up`), which the pages share; this module only
//! names its client.
//!
//! The client is the peer address, or the last `X-Forwarded-For` entry (the one the trusted
//! proxy appended) when `trust_forwarded_for` is on.

use std::num::NonZeroU32;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use application::sign_up::ClientAddress;
use governor::clock::{Clock, DefaultClock, Reference as _};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};
use poem::Request;

use crate::ApiSettings;
use crate::problem::Problem;

/// The most clients one limiter tracks. Past it, the clients whose allowance has refilled are
/// forgotten, and if that is not enough, every client is (each gets a fresh allowance: a
/// burst more for those who were limited, and a bound on memory of about 10 MB whatever the
/// number of addresses that call).
const MAX_TRACKED_CLIENTS: usize = 100_000;
/// How often the clients whose allowance has refilled are forgotten and the table shrunk,
/// at most.
const SWEEP_INTERVAL: Duration = Duration::from_secs(10);
/// How often a limiter over [`MAX_TRACKED_CLIENTS`] sweeps, at most (a sweep walks the table).
const FULL_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

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
    sign_in: ClientLimiter<DefaultClock>,
    initiate: ClientLimiter<DefaultClock>,
    trust_forwarded_for: bool,
}

impl RateLimiters {
    pub(crate) fn new(settings: &ApiSettings) -> Self {
        let clock = DefaultClock::default();
        let limiter = |limit: RateLimit| {
            ClientLimiter::new(limit.quota(), clock.clone(), MAX_TRACKED_CLIENTS)
        };
        Self {
            sign_in: limiter(settings.sign_in_limit),
            initiate: limiter(settings.initiate_limit),
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
        limiter
            .check(self.client(request).as_str())
            .map_err(|wait| {
                // Round up: retrying after a truncated wait would be refused again.
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                Problem::rate_limited(seconds.max(1))
            })
    }
}

type KeyedLimiter<C> =
    RateLimiter<String, DashMapStateStore<String>, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// A keyed GCRA limiter (governor) that keeps its table small: it forgets the clients whose
/// allowance has refilled, at most every [`SWEEP_INTERVAL`], and never tracks more than
/// `max_clients` for long. A forgotten client is indistinguishable from a new one, so
/// forgetting the refilled ones changes no answer.
struct ClientLimiter<C: Clock> {
    limiter: RwLock<KeyedLimiter<C>>,
    quota: Quota,
    clock: C,
    max_clients: usize,
    started: C::Instant,
    /// When the table was last swept, in nanoseconds since `started`.
    swept_ns: AtomicU64,
}

impl<C: Clock + Clone> ClientLimiter<C> {
    fn new(quota: Quota, clock: C, max_clients: usize) -> Self {
        let started = clock.now();
        Self {
            limiter: RwLock::new(RateLimiter::dashmap_with_clock(quota, clock.clone())),
            quota,
            clock,
            max_clients,
            started,
            swept_ns: AtomicU64::new(0),
        }
    }

    /// Count one request of `client`; refused, how long to wait.
    fn check(&self, client: &str) -> Result<(), Duration> {
        self.sweep_if_due();
        let limiter = self.limiter.read().unwrap_or_else(|e| e.into_inner());
        limiter
            .check_key(&client.to_owned())
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// How many clients the limiter tracks now.
    fn tracked(&self) -> usize {
        self.limiter.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Forget the clients whose allowance has refilled and shrink the table, when a sweep is
    /// due; start over when that leaves more than `max_clients`. One caller sweeps at a time.
    fn sweep_if_due(&self) {
        let now_ns = self.clock.now().duration_since(self.started).as_u64();
        let swept_ns = self.swept_ns.load(Ordering::Relaxed);
        let since = Duration::from_nanos(now_ns.saturating_sub(swept_ns));
        let due = since >= SWEEP_INTERVAL
            || (since >= FULL_SWEEP_INTERVAL && self.tracked() > self.max_clients);
        if !due
            || self
                .swept_ns
                .compare_exchange(swept_ns, now_ns, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let still_full = {
            let limiter = self.limiter.read().unwrap_or_else(|e| e.into_inner());
            limiter.retain_recent();
            limiter.shrink_to_fit();
            limiter.len() > self.max_clients
        };
        if still_full {
            *self.limiter.write().unwrap_or_else(|e| e.into_inner()) =
                RateLimiter::dashmap_with_clock(self.quota, self.clock.clone());
        }
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

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    fn limiter(
        per_minute: u32,
        burst: u32,
        max_clients: usize,
    ) -> (ClientLimiter<FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        let limit = RateLimit::per_minute(
            NonZeroU32::new(per_minute).expect("positive"),
            NonZeroU32::new(burst).expect("positive"),
        );
        (
            ClientLimiter::new(limit.quota(), clock.clone(), max_clients),
            clock,
        )
    }

    #[test]
    fn a_client_is_limited_after_its_burst_until_its_allowance_refills() {
        let (limiter, clock) = limiter(6, 2, 100);
        assert_eq!(limiter.check("10.0.0.1"), Ok(()));
        assert_eq!(limiter.check("10.0.0.1"), Ok(()));
        assert_eq!(limiter.check("10.0.0.1"), Err(Duration::from_secs(10)));
        assert_eq!(
            limiter.check("10.0.0.2"),
            Ok(()),
            "another client has its own"
        );
        clock.advance(Duration::from_secs(10));
        assert_eq!(limiter.check("10.0.0.1"), Ok(()));
    }

    #[test]
    fn clients_whose_allowance_refilled_are_forgotten_at_the_next_sweep() {
        let (limiter, clock) = limiter(60, 1, 100);
        for n in 0..50 {
            assert_eq!(limiter.check(&format!("10.0.0.{n}")), Ok(()));
        }
        assert_eq!(limiter.tracked(), 50);
        clock.advance(SWEEP_INTERVAL);
        assert_eq!(limiter.check("10.0.1.1"), Ok(()));
        assert_eq!(limiter.tracked(), 1, "only the client that just called");
    }

    #[test]
    fn a_limiter_never_tracks_many_more_clients_than_its_bound() {
        let (limiter, clock) = limiter(1, 1, 10);
        for n in 0..1_000 {
            assert_eq!(
                limiter.check(&format!("10.0.{}.{}", n / 256, n % 256)),
                Ok(())
            );
            clock.advance(Duration::from_millis(100));
            assert!(limiter.tracked() <= 20, "{} after {n}", limiter.tracked());
        }
    }

    #[test]
    fn a_limited_client_stays_limited_across_sweeps_while_under_the_bound() {
        let (limiter, clock) = limiter(1, 1, 100);
        assert_eq!(limiter.check("10.0.0.1"), Ok(()));
        clock.advance(SWEEP_INTERVAL);
        assert_eq!(limiter.check("10.0.0.1"), Err(Duration::from_secs(50)));
    }
}
