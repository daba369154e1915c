//! Delivering events to the host application's webhook endpoints: the pure decisions.
//!
//! - [`RetrySchedule`]: when the next attempt of a failed delivery is due, or that it is
//!   abandoned (a schedule like Svix's: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, then every
//!   10 h, about three days in all);
//! - [`EndpointHealth`]: whether an endpoint that keeps failing is disabled;
//! - [`TargetPolicy`]: which URLs and addresses an endpoint may point at (no request ever goes
//!   to a private, loopback, link-local or metadata address in production unless the operator
//!   allows private targets);
//! - [`DeliveryStatus`]: a delivery's lifecycle.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::Timestamp;

/// Milliseconds in an hour.
const HOUR_MS: i64 = 3_600_000;
/// Milliseconds in a day.
const DAY_MS: i64 = 24 * HOUR_MS;

/// The delays before each attempt of a delivery, the first one included (usually 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    delays_ms: Vec<i64>,
}

/// Why a schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryScheduleError {
    /// No attempt at all, or more than [`RetrySchedule::MAX_ATTEMPTS`].
    #[error("a retry schedule has 1 to {} attempts", RetrySchedule::MAX_ATTEMPTS)]
    Length,
    /// A negative delay.
    #[error("a retry delay cannot be negative")]
    Negative,
}

/// What follows a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextAttempt {
    /// Try again at this time.
    At(Timestamp),
    /// The schedule is exhausted: the delivery is abandoned.
    Abandon,
}

impl RetrySchedule {
    /// The most attempts a schedule may have.
    pub const MAX_ATTEMPTS: usize = 50;

    /// The production schedule: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, then 10 h seven
    /// times: 13 attempts over about 3.2 days.
    #[must_use]
    pub fn standard() -> Self {
        let mut delays_ms = vec![0, 5_000, 300_000, 1_800_000, 2 * HOUR_MS, 5 * HOUR_MS];
        delays_ms.extend([10 * HOUR_MS; 7]);
        Self { delays_ms }
    }

    /// A schedule of these delays (the first is the delay of the first attempt).
    ///
    /// # Errors
    /// An empty or overlong list, or a negative delay.
    pub fn new(delays_ms: Vec<i64>) -> Result<Self, RetryScheduleError> {
        if delays_ms.is_empty() || delays_ms.len() > Self::MAX_ATTEMPTS {
            return Err(RetryScheduleError::Length);
        }
        if delays_ms.iter().any(|d| *d < 0) {
            return Err(RetryScheduleError::Negative);
        }
        Ok(Self { delays_ms })
    }

    /// How many attempts a delivery gets in all.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        u32::try_from(self.delays_ms.len()).unwrap_or(u32::MAX)
    }

    /// The time from the first attempt to the last one.
    #[must_use]
    pub fn span_ms(&self) -> i64 {
        self.delays_ms
            .iter()
            .skip(1)
            .fold(0, |a, d| a.saturating_add(*d))
    }

    /// The delays, first attempt first.
    #[must_use]
    pub fn delays_ms(&self) -> &[i64] {
        &self.delays_ms
    }

    /// What follows when attempt number `attempts_made` (counted from 1) failed at `now`.
    #[must_use]
    pub fn after_failure(&self, attempts_made: u32, now: Timestamp) -> NextAttempt {
        let next = usize::try_from(attempts_made).unwrap_or(usize::MAX);
        match self.delays_ms.get(next) {
            Some(delay_ms) => NextAttempt::At(now.plus_millis(*delay_ms)),
            None => NextAttempt::Abandon,
        }
    }
}

/// A delivery's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// Not attempted yet.
    Pending,
    /// The last attempt failed; another is scheduled.
    Failed,
    /// The endpoint answered 2xx.
    Succeeded,
    /// Every attempt failed, or the endpoint was disabled or deleted first.
    Abandoned,
}

impl DeliveryStatus {
    /// Every status.
    pub const ALL: [Self; 4] = [
        Self::Pending,
        Self::Failed,
        Self::Succeeded,
        Self::Abandoned,
    ];

    /// Its stored and wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Failed => "failed",
            Self::Succeeded => "succeeded",
            Self::Abandoned => "abandoned",
        }
    }

    /// The status named `name`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether another attempt may still be made.
    #[must_use]
    pub const fn is_open(self) -> bool {
        matches!(self, Self::Pending | Self::Failed)
    }
}

/// When an endpoint that keeps failing is disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointHealth {
    /// Disabled once every delivery has failed for this long (default five days).
    pub disable_after_ms: i64,
}

impl Default for EndpointHealth {
    fn default() -> Self {
        Self {
            disable_after_ms: 5 * DAY_MS,
        }
    }
}

/// Why an endpoint was disabled automatically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisableReason {
    /// Every delivery failed for [`EndpointHealth::disable_after_ms`].
    FailingTooLong,
    /// A delivery was abandoned after its whole schedule without any success in between.
    ScheduleExhausted,
}

impl DisableReason {
    /// The text the endpoint list shows.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::FailingTooLong => "every delivery failed for five days",
            Self::ScheduleExhausted => "a delivery failed on every attempt of its retry schedule",
        }
    }
}

impl EndpointHealth {
    /// After a failed attempt at `now`: whether the endpoint, failing since `failing_since`
    /// (its first failure since its last success), is disabled. `abandoned` tells whether this
    /// failure abandoned a delivery whose schedule spans `schedule_span_ms`.
    #[must_use]
    pub fn after_failure(
        self,
        failing_since: Timestamp,
        now: Timestamp,
        abandoned: bool,
        schedule_span_ms: i64,
    ) -> Option<DisableReason> {
        let failing_ms = now
            .unix_millis()
            .saturating_sub(failing_since.unix_millis());
        if failing_ms >= self.disable_after_ms {
            Some(DisableReason::FailingTooLong)
        } else if abandoned && failing_ms >= schedule_span_ms {
            Some(DisableReason::ScheduleExhausted)
        } else {
            None
        }
    }
}

/// Which targets endpoints may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetPolicy {
    /// Only `https` URLs (production); otherwise `http` too.
    pub https_only: bool,
    /// Private, loopback, link-local, unique-local and shared (CGNAT) addresses are allowed.
    pub allow_private: bool,
}

impl TargetPolicy {
    /// Production: https and public addresses, unless the operator allows private targets.
    #[must_use]
    pub const fn production(allow_private: bool) -> Self {
        Self {
            https_only: true,
            allow_private,
        }
    }

    /// Development: http and https, private and loopback addresses (a local app can listen).
    #[must_use]
    pub const fn development() -> Self {
        Self {
            https_only: false,
            allow_private: true,
        }
    }

    /// Check a URL's scheme (lower case).
    ///
    /// # Errors
    /// A scheme other than https (or http when allowed).
    pub fn check_scheme(self, scheme: &str) -> Result<(), TargetRefusal> {
        match scheme {
            "https" => Ok(()),
            "http" if !self.https_only => Ok(()),
            "http" => Err(TargetRefusal::NotHttps),
            _ => Err(TargetRefusal::Scheme),
        }
    }

    /// Check one address a target's host resolves to.
    ///
    /// # Errors
    /// An address of a class this policy refuses.
    pub fn check_address(self, address: IpAddr) -> Result<(), TargetRefusal> {
        let class = AddressClass::of(address);
        match class {
            AddressClass::Public => Ok(()),
            AddressClass::Metadata
            | AddressClass::Unspecified
            | AddressClass::Multicast
            | AddressClass::Broadcast => Err(TargetRefusal::Address(class)),
            _ if self.allow_private => Ok(()),
            _ => Err(TargetRefusal::Address(class)),
        }
    }
}

/// Why a target was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TargetRefusal {
    /// Not an absolute http(s) URL with a host, or with credentials in it.
    #[error("the URL must be an absolute http(s) URL with a host and no credentials")]
    Malformed,
    /// A scheme other than http or https.
    #[error("the URL's scheme must be https")]
    Scheme,
    /// `http` where only `https` is allowed.
    #[error("the URL must use https")]
    NotHttps,
    /// The host does not resolve.
    #[error("the URL's host does not resolve")]
    Unresolved,
    /// The host resolves to an address of a refused class.
    #[error("the URL's host resolves to a {0} address, which is not allowed")]
    Address(AddressClass),
}

/// What kind of address an IP address is, for the target policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// Globally routable.
    Public,
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16.
    Private,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// fc00::/7.
    UniqueLocal,
    /// 100.64/10 (carrier-grade NAT).
    SharedCgnat,
    /// Cloud instance metadata (169.254.169.254, fd00:ec2::254, 100.100.100.200).
    Metadata,
    /// 0.0.0.0/8, ::.
    Unspecified,
    /// 224/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// Documentation, benchmarking, reserved and transition ranges.
    Reserved,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Public => "public",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::LinkLocal => "link-local",
            Self::UniqueLocal => "unique-local",
            Self::SharedCgnat => "shared (CGNAT)",
            Self::Metadata => "cloud metadata",
            Self::Unspecified => "unspecified",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Reserved => "reserved",
        })
    }
}

impl AddressClass {
    /// The class of `address`; an IPv4-mapped or IPv4-compatible IPv6 address is classed by its
    /// IPv4 address.
    #[must_use]
    pub fn of(address: IpAddr) -> Self {
        match address {
            IpAddr::V4(v4) => Self::of_v4(v4),
            IpAddr::V6(v6) => Self::of_v6(v6),
        }
    }

    fn of_v4(ip: Ipv4Addr) -> Self {
        let [a, b, c, _] = ip.octets();
        if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
            Self::Metadata
        } else if a == 0 {
            Self::Unspecified
        } else if ip.is_loopback() {
            Self::Loopback
        } else if ip.is_private() {
            Self::Private
        } else if ip.is_link_local() {
            Self::LinkLocal
        } else if a == 100 && (64..128).contains(&b) {
            Self::SharedCgnat
        } else if ip.is_broadcast() {
            Self::Broadcast
        } else if ip.is_multicast() {
            Self::Multicast
        } else if ip.is_documentation()
            || a >= 240
            || (a == 192 && b == 0 && c == 0)
            || (a == 198 && (18..20).contains(&b))
        {
            Self::Reserved
        } else {
            Self::Public
        }
    }

    fn of_v6(ip: Ipv6Addr) -> Self {
        let segments = ip.segments();
        if let Some(v4) = ip.to_ipv4_mapped() {
            return Self::of_v4(v4);
        }
        if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
            Self::Metadata
        } else if ip.is_unspecified() {
            Self::Unspecified
        } else if ip.is_loopback() {
            Self::Loopback
        } else if segments[..6] == [0; 6] {
            // IPv4-compatible (::a.b.c.d, deprecated): classed by its IPv4 address.
            let [_, _, _, _, _, _, high, low] = segments;
            let [h1, h2] = high.to_be_bytes();
            let [l1, l2] = low.to_be_bytes();
            Self::of_v4(Ipv4Addr::new(h1, h2, l1, l2))
        } else if ip.is_multicast() {
            Self::Multicast
        } else if ip.is_unicast_link_local() {
            Self::LinkLocal
        } else if ip.is_unique_local() {
            Self::UniqueLocal
        } else if matches!(segments[0], 0x2001) && segments[1] == 0x0db8
            || segments[0] == 0x0064 && segments[1] == 0xff9b
            || segments[0] == 0x0100 && segments[1..4] == [0; 3]
            || segments[0] == 0x2002
            || (segments[0] == 0x2001 && segments[1] < 0x0200)
            || segments[0] & 0xe000 != 0x2000
        {
            // Documentation, NAT64 (64:ff9b::/96), discard-only, 6to4 and Teredo embed or stand
            // for addresses the policy cannot see; outside 2000::/3 nothing is global unicast.
            Self::Reserved
        } else {
            Self::Public
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp::from_unix_millis(1_700_000_000_000);

    #[test]
    fn the_standard_schedule_retries_like_svix_for_about_three_days() {
        let schedule = RetrySchedule::standard();
        assert_eq!(schedule.attempts(), 13);
        assert_eq!(
            &schedule.delays_ms()[..7],
            &[
                0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000
            ]
        );
        let days = schedule.span_ms() / DAY_MS;
        assert_eq!(days, 3, "{} ms", schedule.span_ms());
    }

    #[test]
    fn each_failure_schedules_the_next_delay_until_the_schedule_runs_out() {
        let schedule = RetrySchedule::standard();
        assert_eq!(
            schedule.after_failure(1, T0),
            NextAttempt::At(T0.plus_millis(5_000))
        );
        assert_eq!(
            schedule.after_failure(2, T0),
            NextAttempt::At(T0.plus_millis(300_000))
        );
        assert_eq!(
            schedule.after_failure(12, T0),
            NextAttempt::At(T0.plus_millis(10 * HOUR_MS))
        );
        assert_eq!(schedule.after_failure(13, T0), NextAttempt::Abandon);
        assert_eq!(schedule.after_failure(u32::MAX, T0), NextAttempt::Abandon);
        let short = RetrySchedule::new(vec![0, 100]).unwrap();
        assert_eq!(
            short.after_failure(1, T0),
            NextAttempt::At(T0.plus_millis(100))
        );
        assert_eq!(short.after_failure(2, T0), NextAttempt::Abandon);
    }

    #[test]
    fn a_schedule_needs_one_to_fifty_non_negative_delays() {
        assert_eq!(RetrySchedule::new(vec![]), Err(RetryScheduleError::Length));
        assert_eq!(
            RetrySchedule::new(vec![0; 51]),
            Err(RetryScheduleError::Length)
        );
        assert_eq!(
            RetrySchedule::new(vec![0, -1]),
            Err(RetryScheduleError::Negative)
        );
        assert!(RetrySchedule::new(vec![0]).is_ok());
    }

    #[test]
    fn statuses_round_trip_and_only_pending_and_failed_are_open() {
        for status in DeliveryStatus::ALL {
            assert_eq!(DeliveryStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(DeliveryStatus::parse("done"), None);
        assert!(DeliveryStatus::Pending.is_open());
        assert!(DeliveryStatus::Failed.is_open());
        assert!(!DeliveryStatus::Succeeded.is_open());
        assert!(!DeliveryStatus::Abandoned.is_open());
    }

    #[test]
    fn an_endpoint_failing_for_five_days_is_disabled() {
        let health = EndpointHealth::default();
        let span = RetrySchedule::standard().span_ms();
        let almost = T0.plus_millis(5 * DAY_MS - 1);
        assert_eq!(health.after_failure(T0, almost, false, span), None);
        assert_eq!(
            health.after_failure(T0, T0.plus_days(5), false, span),
            Some(DisableReason::FailingTooLong)
        );
    }

    #[test]
    fn an_endpoint_is_disabled_when_a_delivery_is_abandoned_without_a_success_in_between() {
        let health = EndpointHealth::default();
        let span = RetrySchedule::standard().span_ms();
        // Failing the whole schedule long: disabled at the abandonment.
        assert_eq!(
            health.after_failure(T0, T0.plus_millis(span), true, span),
            Some(DisableReason::ScheduleExhausted)
        );
        // A success since (failing_since later than the schedule's start): kept.
        assert_eq!(
            health.after_failure(T0.plus_days(1), T0.plus_millis(span), true, span),
            None
        );
        // Failing as long, but nothing abandoned: kept.
        assert_eq!(
            health.after_failure(T0, T0.plus_millis(span), false, span),
            None
        );
    }

    fn refused(policy: TargetPolicy, address: &str) -> Option<AddressClass> {
        match policy.check_address(address.parse().unwrap()) {
            Ok(()) => None,
            Err(TargetRefusal::Address(class)) => Some(class),
            Err(other) => panic!("{address}: {other}"),
        }
    }

    #[test]
    fn production_refuses_every_non_public_range_of_ipv4() {
        let policy = TargetPolicy::production(false);
        for (address, class) in [
            ("127.0.0.1", AddressClass::Loopback),
            ("127.255.0.9", AddressClass::Loopback),
            ("10.1.2.3", AddressClass::Private),
            ("172.16.0.1", AddressClass::Private),
            ("172.31.255.255", AddressClass::Private),
            ("192.168.1.1", AddressClass::Private),
            ("169.254.1.1", AddressClass::LinkLocal),
            ("169.254.169.254", AddressClass::Metadata),
            ("100.100.100.200", AddressClass::Metadata),
            ("100.64.0.1", AddressClass::SharedCgnat),
            ("100.127.255.254", AddressClass::SharedCgnat),
            ("0.0.0.0", AddressClass::Unspecified),
            ("0.1.2.3", AddressClass::Unspecified),
            ("224.0.0.1", AddressClass::Multicast),
            ("239.255.255.250", AddressClass::Multicast),
            ("255.255.255.255", AddressClass::Broadcast),
            ("240.0.0.1", AddressClass::Reserved),
            ("192.0.2.10", AddressClass::Reserved),
            ("198.18.0.1", AddressClass::Reserved),
            ("192.0.0.8", AddressClass::Reserved),
        ] {
            assert_eq!(refused(policy, address), Some(class), "{address}");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "93.184.216.34",
        ] {
            assert_eq!(refused(policy, public), None, "{public}");
        }
    }

    #[test]
    fn production_refuses_every_non_public_range_of_ipv6_and_mapped_ipv4() {
        let policy = TargetPolicy::production(false);
        for (address, class) in [
            ("::1", AddressClass::Loopback),
            ("::", AddressClass::Unspecified),
            ("fe80::1", AddressClass::LinkLocal),
            ("fc00::1", AddressClass::UniqueLocal),
            ("fd12:3456::1", AddressClass::UniqueLocal),
            ("fd00:ec2::254", AddressClass::Metadata),
            ("ff02::1", AddressClass::Multicast),
            ("2001:db8::1", AddressClass::Reserved),
            ("64:ff9b::a00:1", AddressClass::Reserved),
            ("2002:a00:1::", AddressClass::Reserved),
            ("2001::1", AddressClass::Reserved),
            ("100::1", AddressClass::Reserved),
            ("::ffff:127.0.0.1", AddressClass::Loopback),
            ("::ffff:10.0.0.1", AddressClass::Private),
            ("::ffff:169.254.169.254", AddressClass::Metadata),
            ("::ffff:100.64.0.1", AddressClass::SharedCgnat),
            ("::127.0.0.1", AddressClass::Loopback),
            ("::10.0.0.1", AddressClass::Private),
        ] {
            assert_eq!(refused(policy, address), Some(class), "{address}");
        }
        for public in [
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(refused(policy, public), None, "{public}");
        }
    }

    #[test]
    fn allowing_private_targets_or_development_lets_private_ranges_through_but_never_metadata() {
        for policy in [TargetPolicy::production(true), TargetPolicy::development()] {
            for allowed in [
                "127.0.0.1",
                "10.0.0.1",
                "192.168.0.2",
                "::1",
                "fd00::2",
                "100.64.1.1",
            ] {
                assert_eq!(refused(policy, allowed), None, "{allowed}");
            }
            for never in [
                "169.254.169.254",
                "::ffff:169.254.169.254",
                "0.0.0.0",
                "::",
                "224.0.0.1",
                "255.255.255.255",
            ] {
                assert!(refused(policy, never).is_some(), "{never}");
            }
        }
    }

    #[test]
    fn production_needs_https_and_development_accepts_http() {
        let production = TargetPolicy::production(true);
        assert_eq!(production.check_scheme("https"), Ok(()));
        assert_eq!(
            production.check_scheme("http"),
            Err(TargetRefusal::NotHttps)
        );
        assert_eq!(production.check_scheme("ftp"), Err(TargetRefusal::Scheme));
        let development = TargetPolicy::development();
        assert_eq!(development.check_scheme("http"), Ok(()));
        assert_eq!(development.check_scheme("https"), Ok(()));
        assert_eq!(development.check_scheme("file"), Err(TargetRefusal::Scheme));
    }
}
