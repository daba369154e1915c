//! Wire types shared by several areas, and the conversions from domain values (HOUSE-STYLE.md
//! rule 3: the domain has no serde; every edge owns its DTOs).
//!
//! Conventions: money is a decimal string in major units plus the integer minor units
//! (`amount: "9.99"`, `amountMinor: 999`); credits are a decimal string with two places plus
//! the integer hundredths (`balance: "12.50"`, `balanceHundredths: 1250`); timestamps are
//! RFC 3339 strings in UTC with milliseconds (`2026-01-01T00:00:00.000Z`).

use application::pagination::{PageRequest, PaginationError};
use application::ports::{CheckoutTarget, OrderRecord, Reservation, ReservationStatus};
use chrono::{DateTime, SecondsFormat};
use domain::{
    CreditDelta, Credits, IdempotencyKey, Money, Order, OrderStatus, RenewalIntent, Subscription,
    SubscriptionAccess, Timestamp,
};
use poem::Request;
use poem_openapi::Object;

use crate::problem::{Code, Problem};

/// A timestamp as RFC 3339 in UTC, with milliseconds.
pub(crate) fn timestamp(t: Timestamp) -> String {
    DateTime::from_timestamp_millis(t.unix_millis())
        .map(|d| d.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| t.unix_millis().to_string())
}

/// Money in major units, with as many decimals as the currency has (`9.90`, `1000`).
pub(crate) fn major_units(money: Money) -> String {
    money.to_decimal().to_string()
}

/// A signed credit amount with two places and a minus sign only when negative (`-1.50`,
/// `100.00`).
pub(crate) fn signed_credits(delta: CreditDelta) -> String {
    if delta.is_decrease() {
        format!("-{}", delta.magnitude())
    } else {
        delta.magnitude().to_string()
    }
}

/// An id read from a path, a query or a body, parsed once, here. A malformed id is answered
/// with `unknown()`: the use case's own answer for an id it does not know, so that no answer
/// tells a malformed id from an absent one.
///
/// # Errors
/// `unknown()` when `parse` refuses `raw`.
pub(crate) fn parse_id<T>(
    raw: &str,
    parse: impl FnOnce(String) -> Result<T, domain::IdError>,
    unknown: impl FnOnce() -> Problem,
) -> Result<T, Problem> {
    parse(raw.to_owned()).map_err(|_| unknown())
}

/// The request's `Idempotency-Key`, if it sent one, as the domain accepts it.
///
/// `parsed` is what poem-openapi read from the header. It reads only values that are visible
/// ASCII and leaves any other value out, as if the header were absent; so when it has nothing,
/// the raw header is looked at, and a value that is there but unreadable (an emoji, Latin-1
/// bytes) is refused with the rule it broke instead of being ignored.
///
/// # Errors
/// `validation_failed` (400) naming the broken rule: empty, too long, or a character outside
/// printable ASCII without spaces.
pub(crate) fn parse_idempotency_key(
    parsed: Option<String>,
    request: &Request,
) -> Result<Option<IdempotencyKey>, Problem> {
    let refused = |e: domain::IdError| Problem::bad_input(format!("Idempotency-Key: {e}"));
    match parsed {
        Some(value) => IdempotencyKey::new(value).map(Some).map_err(refused),
        None => match request.headers().get(IDEMPOTENCY_KEY_HEADER) {
            None => Ok(None),
            Some(raw) => {
                let text = String::from_utf8_lossy(raw.as_bytes()).into_owned();
                match IdempotencyKey::new(text) {
                    Err(e) => Err(refused(e)),
                    // Unreachable: a value poem-openapi could not read is not visible ASCII.
                    Ok(_) => Err(Problem::bad_input(
                        "Idempotency-Key may contain only printable ASCII without spaces",
                    )),
                }
            }
        },
    }
}

/// The idempotency key header, as poem stores header names.
const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// Parse `page` and `limit` query values (defaults 1 and 20, limit at most 100).
pub(crate) fn page_request(
    page: Option<&str>,
    limit: Option<&str>,
) -> Result<PageRequest, Problem> {
    fn number(raw: Option<&str>, name: &str) -> Result<Option<i64>, Problem> {
        raw.map(|r| {
            r.trim().parse::<i64>().map_err(|_| {
                Problem::new(
                    Code::InvalidPagination,
                    format!("{name} must be an integer"),
                )
            })
        })
        .transpose()
    }
    PageRequest::new(number(page, "page")?, number(limit, "limit")?)
        .map_err(|e: PaginationError| Problem::new(Code::InvalidPagination, e.to_string()))
}

/// Where a page sits in the whole list.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PageInfo {
    /// This page's number, from 1.
    pub page: u32,
    /// The page size.
    pub limit: u32,
    /// Items in the whole list.
    pub total: u64,
    /// Pages in the whole list (0 for an empty list).
    pub total_pages: u64,
}

impl<T> From<&application::pagination::Page<T>> for PageInfo {
    fn from(page: &application::pagination::Page<T>) -> Self {
        Self {
            page: page.request.page(),
            limit: page.request.limit(),
            total: page.total,
            total_pages: page.total_pages(),
        }
    }
}

/// An order and, while it is pending, where to pay it.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct OrderView {
    /// The order id.
    pub order_id: String,
    /// The account it buys for: the buyer's personal account (the buyer's own id) or a team.
    pub account_id: String,
    /// `pending`, `paid`, `failed`, `cancelled`, `expired`, `partially_refunded` or `refunded`.
    pub status: String,
    /// The plan bought.
    pub plan_id: String,
    /// `one_time`, `recurring` or `credits`.
    pub plan_type: String,
    /// The provider id.
    pub provider: String,
    /// The price in major units (decimal string).
    pub amount: String,
    /// The price in minor units.
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// Credits the order grants (credits plans), decimal string with two places.
    #[oai(skip_serializing_if_is_none)]
    pub credits: Option<String>,
    /// Credits the order grants, in hundredths.
    #[oai(skip_serializing_if_is_none)]
    pub credits_hundredths: Option<i64>,
    /// Of `credits`, the pack's bonus (granted apart as `bonus`), in hundredths.
    #[oai(skip_serializing_if_is_none)]
    pub bonus_credits_hundredths: Option<i64>,
    /// When the order was placed.
    pub created_at: String,
    /// When an unpaid order expires.
    pub expires_at: String,
    /// When it was paid.
    #[oai(skip_serializing_if_is_none)]
    pub paid_at: Option<String>,
    /// The provider's payment page (pending orders of redirecting providers).
    #[oai(skip_serializing_if_is_none)]
    pub payment_url: Option<String>,
    /// The payment link to show as a QR code (pending `wallet_qr` orders).
    #[oai(skip_serializing_if_is_none)]
    pub qr_code_url: Option<String>,
}

impl From<&OrderRecord> for OrderView {
    fn from(record: &OrderRecord) -> Self {
        let mut view = Self::of(&record.order);
        let target = record
            .checkout
            .as_ref()
            .filter(|_| *record.order.status() == OrderStatus::Pending)
            .map(|c| &c.target);
        view.payment_url = match target {
            Some(CheckoutTarget::Redirect(url)) => Some(url.clone()),
            _ => None,
        };
        view.qr_code_url = match target {
            Some(CheckoutTarget::QrCode(url)) => Some(url.clone()),
            _ => None,
        };
        view
    }
}

impl OrderView {
    /// The view of `order` without where to pay it (as events show orders).
    pub(crate) fn of(order: &Order) -> Self {
        let paid_at = match order.status() {
            OrderStatus::Paid { paid_at }
            | OrderStatus::PartiallyRefunded { paid_at, .. }
            | OrderStatus::Refunded { paid_at } => Some(timestamp(*paid_at)),
            _ => None,
        };
        Self {
            order_id: order.id().to_string(),
            account_id: order.account_id().to_string(),
            status: order.status().code().to_owned(),
            plan_id: order.plan().plan_id.to_string(),
            plan_type: order.plan().plan_type.as_str().to_owned(),
            provider: order.provider().as_str().to_owned(),
            amount: major_units(order.plan().price),
            amount_minor: order.plan().price.amount_minor(),
            currency: order.plan().price.currency().code().to_owned(),
            credits: order.plan().credits.map(|c| c.to_string()),
            credits_hundredths: order.plan().credits.map(Credits::hundredths),
            bonus_credits_hundredths: order.plan().bonus.map(|b| b.credits.hundredths()),
            created_at: timestamp(order.created_at()),
            expires_at: timestamp(order.expires_at()),
            paid_at,
            payment_url: None,
            qr_code_url: None,
        }
    }
}

/// A subscription.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct SubscriptionView {
    /// The subscription id.
    pub id: String,
    /// The account it belongs to: the subscriber's personal account (their own id) or a team.
    pub account_id: String,
    /// The plan subscribed to.
    pub plan_id: String,
    /// The provider id.
    pub provider: String,
    /// `trialing`, `active`, `past_due`, `canceled` or `expired`.
    pub status: String,
    /// Start of the paid period.
    pub current_period_start: String,
    /// End of the paid period.
    pub current_period_end: String,
    /// Whether it ends at the end of the current period instead of renewing.
    pub cancel_at_period_end: bool,
    /// When its access ends: the period's end when canceled or scheduled to cancel, the
    /// period's end plus the past-due grace when a renewal failed; `null` while it renews.
    pub access_until: Option<String>,
    /// The plan a switch asked the provider for, until the provider's event confirms it (then
    /// `planId` is that plan); absent when no switch is pending.
    #[oai(skip_serializing_if_is_none)]
    pub pending_plan_id: Option<String>,
    /// `upgrade` or `downgrade`: the pending switch; absent when none is pending.
    #[oai(skip_serializing_if_is_none)]
    pub pending_change: Option<String>,
    /// The plan a switch at the period's end starts when this subscription ends (with a new
    /// checkout); absent when none is scheduled. Resuming the subscription clears it.
    #[oai(skip_serializing_if_is_none)]
    pub scheduled_plan_id: Option<String>,
}

impl SubscriptionView {
    /// The view of `s`, whose access is `access`.
    pub(crate) fn new(s: &Subscription, access: SubscriptionAccess) -> Self {
        Self {
            id: s.id().to_string(),
            account_id: s.account_id().to_string(),
            plan_id: s.plan_id().to_string(),
            provider: s.provider().as_str().to_owned(),
            status: s.status().code().to_owned(),
            current_period_start: timestamp(s.current_period().start()),
            current_period_end: timestamp(s.current_period().end()),
            cancel_at_period_end: s.renewal() == RenewalIntent::EndsAtPeriodEnd,
            access_until: access.ends_at().map(timestamp),
            pending_plan_id: s.pending_change().map(|c| c.plan_id().to_string()),
            pending_change: (s.pending_change())
                .map(|c| c.kind(s.sold_terms().as_ref()).code().to_owned()),
            scheduled_plan_id: s.scheduled_switch().map(|w| w.plan_id().to_string()),
        }
    }
}

/// A credit reservation (a two-phase hold).
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ReservationView {
    /// The reservation id.
    pub id: String,
    /// Whose credits.
    pub user_id: String,
    /// The account whose credits it holds (the user's own id for their personal account).
    pub account_id: String,
    /// `pending`, `settled`, `released` or `expired`.
    pub status: String,
    /// Credits held (decimal string).
    pub held: String,
    /// Credits held, in hundredths.
    pub held_hundredths: i64,
    /// Settled: the cost of the reported usage (decimal string).
    #[oai(skip_serializing_if_is_none)]
    pub actual: Option<String>,
    /// Settled: what was finally charged (decimal string).
    #[oai(skip_serializing_if_is_none)]
    pub charged: Option<String>,
    /// Settled: what was finally charged, in hundredths.
    #[oai(skip_serializing_if_is_none)]
    pub charged_hundredths: Option<i64>,
    /// The feature it is for.
    #[oai(skip_serializing_if_is_none)]
    pub feature: Option<String>,
    /// The AI model it is for.
    #[oai(skip_serializing_if_is_none)]
    pub model: Option<String>,
    /// The tokens estimated.
    #[oai(skip_serializing_if_is_none)]
    pub tokens: Option<u64>,
    /// When it was made.
    pub created_at: String,
    /// When an unsettled hold is released by itself.
    pub expires_at: String,
}

/// Who a spend or hold is by: the member of a team's account who made it, else the user whose
/// personal account it is.
pub(crate) fn spender(account: &domain::AccountId, member: Option<&domain::UserId>) -> String {
    account
        .acting_user(member)
        .map_or_else(|| account.to_string(), |u| u.to_string())
}

impl From<&Reservation> for ReservationView {
    fn from(r: &Reservation) -> Self {
        let (actual, charged) = match r.status {
            ReservationStatus::Settled { actual, charged } => (Some(actual), Some(charged)),
            _ => (None, None),
        };
        Self {
            id: r.id.to_string(),
            user_id: spender(&r.account_id, r.member_id.as_ref()),
            account_id: r.account_id.to_string(),
            status: r.status.code().to_owned(),
            held: r.held.to_string(),
            held_hundredths: r.held.hundredths(),
            actual: actual.map(|c| c.to_string()),
            charged: charged.map(|c| c.to_string()),
            charged_hundredths: charged.map(Credits::hundredths),
            feature: r.context.feature.clone(),
            model: r.context.model.clone(),
            tokens: r.context.tokens,
            created_at: timestamp(r.created_at),
            expires_at: timestamp(r.expires_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_in_utc_with_milliseconds() {
        assert_eq!(
            timestamp(Timestamp::from_unix_millis(1_767_225_600_123)),
            "2026-01-01T00:00:00.123Z"
        );
    }

    #[test]
    fn money_keeps_the_currency_decimals() {
        let usd = Money::from_minor(990, domain::Currency::Usd).unwrap();
        assert_eq!(major_units(usd), "9.90");
        let jpy = Money::from_minor(1000, domain::Currency::Jpy).unwrap();
        assert_eq!(major_units(jpy), "1000");
    }

    #[test]
    fn pagination_defaults_and_refusals() {
        let p = page_request(None, None).unwrap();
        assert_eq!((p.page(), p.limit()), (1, 20));
        for (page, limit) in [(Some("0"), None), (None, Some("101")), (Some("x"), None)] {
            let problem = page_request(page, limit).unwrap_err();
            assert_eq!(problem.code(), "invalid_pagination");
        }
    }
}
