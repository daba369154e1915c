//! Small helpers for the text providers send and receive: ids checked before they go into a URL
//! path, quotes of provider text cut to a bound, and descriptions of unreadable JSON that never
//! echo its content.

use application::ports::{CheckoutRequest, GatewayError};
use domain::Locale;

/// `id` when it is safe in a URL path (or a header): 1 to `max_chars` ASCII letters and digits,
/// and the characters in `also` (such as `_` and `-`).
#[must_use]
pub fn path_id<'a>(id: &'a str, max_chars: usize, also: &[char]) -> Option<&'a str> {
    let ok = !id.is_empty()
        && id.len() <= max_chars
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || also.contains(&c));
    ok.then_some(id)
}

/// What the buyer is shown as the thing bought: the plan's English name, or its id when the
/// name is blank.
#[must_use]
pub fn plan_name(request: &CheckoutRequest) -> &str {
    let name = &request.plan.text_for(&Locale::english()).name;
    if name.trim().is_empty() {
        request.plan.id().as_str()
    } else {
        name.as_str()
    }
}

/// Whether `url` is an `http://` or `https://` URL (a base URL, or a page a buyer is sent to).
#[must_use]
pub fn is_web_url(url: &str) -> bool {
    url.starts_with("https://") || url.starts_with("http://")
}

/// At most the first `max_chars` characters of `text`.
#[must_use]
pub fn clip(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}

/// At most the first `max_chars` printable characters of `text` (control characters dropped).
#[must_use]
pub fn printable(text: &str, max_chars: usize) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .take(max_chars)
        .collect()
}

/// Where JSON could not be read, without echoing its content (which may be personal data).
#[must_use]
pub fn unreadable(what: &str, error: &serde_json::Error) -> String {
    format!(
        "{what} is not the expected JSON ({:?} error at line {}, column {})",
        error.classify(),
        error.line(),
        error.column()
    )
}

/// `prefix` and a top-up's idempotency key, as the provider's idempotency header: at most
/// `max_chars` in all, the key not blank and free of control characters.
///
/// # Errors
/// [`GatewayError::Rejected`] for a blank key, a control character, or one too long.
pub fn prefixed_key(prefix: &str, key: &str, max_chars: usize) -> Result<String, GatewayError> {
    let prefixed = format!("{prefix}{key}");
    if key.trim().is_empty()
        || prefixed.chars().count() > max_chars
        || prefixed.chars().any(char::is_control)
    {
        let most = max_chars.saturating_sub(prefix.chars().count());
        return Err(GatewayError::Rejected(format!(
            "a top-up's idempotency key must be 1 to {most} printable characters"
        )));
    }
    Ok(prefixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_ids_take_letters_digits_and_the_allowed_characters_only() {
        assert_eq!(path_id("cs_test_1-2", 64, &['_', '-']), Some("cs_test_1-2"));
        assert_eq!(path_id("cs_test_1-2", 64, &['_']), None);
        for bad in ["", "a/b", "a?b", "a.b", "a b", "é", "a%2F"] {
            assert_eq!(path_id(bad, 64, &['_', '-']), None, "{bad:?}");
        }
        assert_eq!(path_id(&"a".repeat(8), 8, &[]), Some("aaaaaaaa"));
        assert_eq!(path_id(&"a".repeat(9), 8, &[]), None);
    }

    #[test]
    fn quotes_are_cut_by_characters_and_printable_drops_control_characters() {
        assert_eq!(clip("héllo", 2), "hé");
        assert_eq!(clip("a\nb", 3), "a\nb");
        assert_eq!(printable("a\nb\tc", 2), "ab");
    }

    #[test]
    fn unreadable_json_is_described_by_position_without_its_content() {
        let error = serde_json::from_str::<u32>("\"secret-value\"").unwrap_err();
        let text = unreadable("answer", &error);
        assert!(text.starts_with("answer is not the expected JSON (Data error at line 1"));
        assert!(!text.contains("secret-value"), "{text}");
    }
}
