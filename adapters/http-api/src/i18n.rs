//! Locale negotiation (`?locale=` first, then `Accept-Language`) and the catalog of credit
//! transaction descriptions, localised from the stable type code in `en` and `zh-CN`.

use domain::{Locale, TransactionKind};
use poem::Request;

/// The longest `Accept-Language` header looked at; longer ones are cut (a limit on work).
const MAX_ACCEPT_LANGUAGE_CHARS: usize = 512;
/// The most language ranges looked at in one header.
const MAX_LANGUAGE_RANGES: usize = 16;

/// The languages the API's own texts exist in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Language {
    English,
    SimplifiedChinese,
}

impl Language {
    /// The language of a locale tag, when the API has texts in it.
    fn of(locale: &Locale) -> Option<Self> {
        match locale.language().as_str() {
            "en" => Some(Language::English),
            "zh" => Some(Language::SimplifiedChinese),
            _ => None,
        }
    }
}

/// The locale the caller asked for: a valid `?locale=` value, else the preferred
/// `Accept-Language` range that is a valid tag, else none.
pub(crate) fn requested_locale(query: Option<&str>, request: &Request) -> Option<Locale> {
    query
        .and_then(Locale::parse)
        .or_else(|| accepted_locales(request).into_iter().next())
}

/// The language for the API's own texts: the first requested one it has, else English.
pub(crate) fn text_language(query: Option<&str>, request: &Request) -> Language {
    query
        .and_then(Locale::parse)
        .into_iter()
        .chain(accepted_locales(request))
        .find_map(|l| Language::of(&l))
        .unwrap_or(Language::English)
}

/// `Accept-Language` ranges that are valid tags, by descending quality (stable for ties).
fn accepted_locales(request: &Request) -> Vec<Locale> {
    let Some(header) = request
        .headers()
        .get("accept-language")
        .and_then(|v| v.to_str().ok())
    else {
        return Vec::new();
    };
    let header: String = header.chars().take(MAX_ACCEPT_LANGUAGE_CHARS).collect();
    let mut ranges: Vec<(u16, Locale)> = header
        .split(',')
        .take(MAX_LANGUAGE_RANGES)
        .filter_map(|range| {
            let mut parts = range.split(';');
            let locale = Locale::parse(parts.next()?.trim())?;
            let quality = parts
                .find_map(|p| p.trim().strip_prefix("q="))
                .map_or(Some(1000), quality_permille)?;
            (quality > 0).then_some((quality, locale))
        })
        .collect();
    ranges.sort_by_key(|(q, _)| std::cmp::Reverse(*q));
    ranges.into_iter().map(|(_, l)| l).collect()
}

/// A `q` value (`0`, `0.8`, `1.000`) in thousandths, without floating point.
fn quality_permille(raw: &str) -> Option<u16> {
    let (whole, fraction) = raw.split_once('.').unwrap_or((raw, ""));
    let whole: u16 = whole.parse().ok()?;
    let digits: String = fraction.chars().take(3).collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) || whole > 1 {
        return None;
    }
    let fraction: u16 = format!("{digits:0<3}").parse().ok()?;
    Some((whole * 1000 + fraction).min(1000))
}

/// The description of a credit transaction of `kind`, in `language`.
pub(crate) fn transaction_description(kind: TransactionKind, language: Language) -> &'static str {
    use Language::{English as En, SimplifiedChinese as Zh};
    use TransactionKind as K;
    match (kind, language) {
        (K::PurchaseGrant, En) => "Credits purchased",
        (K::PurchaseGrant, Zh) => "购买积分",
        (K::SubscriptionGrant, En) => "Subscription credits",
        (K::SubscriptionGrant, Zh) => "订阅赠送积分",
        (K::Consumption, En) => "Credits used",
        (K::Consumption, Zh) => "积分消费",
        (K::ReservationHold, En) => "Credits reserved",
        (K::ReservationHold, Zh) => "积分预留",
        (K::ReservationSettle, En) => "Reservation settled",
        (K::ReservationSettle, Zh) => "预留积分结算",
        (K::ReservationRelease, En) => "Reservation released",
        (K::ReservationRelease, Zh) => "预留积分释放",
        (K::RefundClawback, En) => "Credits withdrawn after a refund",
        (K::RefundClawback, Zh) => "退款扣回积分",
        (K::AdminAdjustment, En) => "Adjustment by an administrator",
        (K::AdminAdjustment, Zh) => "管理员调整",
        (K::Expiry, En) => "Credits expired",
        (K::Expiry, Zh) => "积分过期",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(accept_language: &str) -> Request {
        Request::builder()
            .header("accept-language", accept_language)
            .finish()
    }

    #[test]
    fn the_query_wins_over_the_header() {
        let req = request("zh-CN");
        assert_eq!(text_language(Some("en"), &req), Language::English);
        assert_eq!(text_language(None, &req), Language::SimplifiedChinese);
    }

    #[test]
    fn accept_language_is_read_by_quality() {
        let req = request("fr;q=0.9, zh-CN;q=0.95, en;q=0.1");
        assert_eq!(text_language(None, &req), Language::SimplifiedChinese);
        assert_eq!(
            requested_locale(None, &req).map(|l| l.to_string()),
            Some("zh-CN".to_owned())
        );
        assert_eq!(text_language(None, &request("de, *")), Language::English);
    }

    #[test]
    fn every_transaction_kind_has_a_description_in_both_languages() {
        for kind in TransactionKind::ALL {
            for language in [Language::English, Language::SimplifiedChinese] {
                assert!(!transaction_description(kind, language).is_empty());
            }
        }
    }

    #[test]
    fn quality_values_parse_without_floats() {
        assert_eq!(quality_permille("0.8"), Some(800));
        assert_eq!(quality_permille("1"), Some(1000));
        assert_eq!(quality_permille("0"), Some(0));
        assert_eq!(quality_permille("x"), None);
    }
}
