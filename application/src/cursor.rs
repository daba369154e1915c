//! Keyset pagination by an opaque cursor (issue 18): a page is the rows after a position in the
//! list's index order, so page 5 000 costs what page 1 costs, and rows inserted meanwhile never
//! shift a page the way an offset does.
//!
//! A cursor names the last row of the previous page by its sort key. It is opaque to clients:
//! hex of the key's parts under a version tag, decoded and checked here; a cursor that does not
//! decode is [`CursorError::Invalid`], never a crash or a query of something else.

use crate::pagination::{DEFAULT_LIMIT, MAX_LIMIT};

/// Why a page request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// The cursor was not made by this service for this list.
    #[error("cursor is not valid for this list")]
    Invalid,
    /// `limit` is below 1 or above [`MAX_LIMIT`].
    #[error("limit must be between 1 and {MAX_LIMIT}")]
    Limit,
}

/// A sort key a cursor can carry.
pub trait CursorKey: Sized + Clone {
    /// The key's parts as text.
    fn parts(&self) -> Vec<String>;
    /// The key from its parts; `None` when they are not this key's.
    fn from_parts(parts: &[&str]) -> Option<Self>;
}

impl CursorKey for i64 {
    fn parts(&self) -> Vec<String> {
        vec![self.to_string()]
    }

    fn from_parts(parts: &[&str]) -> Option<Self> {
        match parts {
            [n] => n.parse().ok(),
            _ => None,
        }
    }
}

impl CursorKey for (i64, i64) {
    fn parts(&self) -> Vec<String> {
        vec![self.0.to_string(), self.1.to_string()]
    }

    fn from_parts(parts: &[&str]) -> Option<Self> {
        match parts {
            [a, b] => Some((a.parse().ok()?, b.parse().ok()?)),
            _ => None,
        }
    }
}

impl CursorKey for (i64, String) {
    fn parts(&self) -> Vec<String> {
        vec![self.0.to_string(), self.1.clone()]
    }

    fn from_parts(parts: &[&str]) -> Option<Self> {
        match parts {
            [a, b] => Some((a.parse().ok()?, (*b).to_owned())),
            _ => None,
        }
    }
}

impl CursorKey for (String, String) {
    fn parts(&self) -> Vec<String> {
        vec![self.0.clone(), self.1.clone()]
    }

    fn from_parts(parts: &[&str]) -> Option<Self> {
        match parts {
            [a, b] => Some(((*a).to_owned(), (*b).to_owned())),
            _ => None,
        }
    }
}

/// The version tag every cursor starts with (a later format can refuse older cursors cleanly).
const TAG: &str = "c1";
/// Separates a key's parts before encoding (never in an id, an e-mail or a number).
const SEPARATOR: char = '\u{1f}';
/// The longest cursor accepted, in characters (a bound on what a client can make us decode).
pub const MAX_CURSOR_CHARS: usize = 1024;

/// The opaque text of `key`.
#[must_use]
pub fn encode<K: CursorKey>(key: &K) -> String {
    let joined = key.parts().join(&SEPARATOR.to_string());
    let mut out = String::with_capacity(TAG.len() + joined.len() * 2);
    out.push_str(TAG);
    for byte in joined.bytes() {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The key `text` carries.
///
/// # Errors
/// [`CursorError::Invalid`] for anything [`encode`] did not make for a key of this type.
pub fn decode<K: CursorKey>(text: &str) -> Result<K, CursorError> {
    let hex = text
        .strip_prefix(TAG)
        .filter(|h| h.len() <= MAX_CURSOR_CHARS && h.len() % 2 == 0)
        .ok_or(CursorError::Invalid)?;
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or(CursorError::Invalid)?;
    let joined = String::from_utf8(bytes).map_err(|_| CursorError::Invalid)?;
    let parts: Vec<&str> = joined.split(SEPARATOR).collect();
    K::from_parts(&parts).ok_or(CursorError::Invalid)
}

/// A validated page request: the rows after `after` (from the start without one), at most
/// `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyset<K> {
    /// The sort key of the last row of the previous page.
    pub after: Option<K>,
    /// The page size, 1 to [`MAX_LIMIT`].
    pub limit: u32,
}

impl<K: CursorKey> Keyset<K> {
    /// Validate a client's `cursor` and `limit` (default [`DEFAULT_LIMIT`]).
    ///
    /// # Errors
    /// See [`CursorError`].
    pub fn parse(cursor: Option<&str>, limit: Option<i64>) -> Result<Self, CursorError> {
        let limit = limit.unwrap_or(i64::from(DEFAULT_LIMIT));
        let limit = u32::try_from(limit)
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or(CursorError::Limit)?;
        let after = cursor
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(decode)
            .transpose()?;
        Ok(Self { after, limit })
    }
}

impl<K> Keyset<K> {
    /// The first page of `limit` rows.
    #[must_use]
    pub fn first(limit: u32) -> Self {
        Self {
            after: None,
            limit: limit.clamp(1, MAX_LIMIT),
        }
    }

    /// How many rows an adapter fetches: one more than the page, to know whether another
    /// follows.
    #[must_use]
    pub fn fetch(&self) -> u32 {
        self.limit + 1
    }
}

/// One page of a keyset-paginated list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeysetPage<T, K> {
    /// The rows, in the list's order.
    pub items: Vec<T>,
    /// The key of the last row when more rows follow; `None` on the last page.
    pub next: Option<K>,
}

impl<T, K> KeysetPage<T, K> {
    /// The page from up to `request.fetch()` rows: keeps `request.limit` and, when a row beyond
    /// them was fetched, names the last kept row's key as where the next page starts.
    pub fn from_rows(mut rows: Vec<T>, request_limit: u32, key: impl Fn(&T) -> K) -> Self {
        let limit = request_limit as usize;
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(key)
        } else {
            None
        };
        Self { items: rows, next }
    }
}

impl<T, K: CursorKey> KeysetPage<T, K> {
    /// The next page's cursor text, if there is a next page.
    #[must_use]
    pub fn next_cursor(&self) -> Option<String> {
        self.next.as_ref().map(encode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_the_key_it_was_made_from() {
        let key = (1_700_000_000_123_i64, "ord_x".to_owned());
        assert_eq!(decode::<(i64, String)>(&encode(&key)), Ok(key));
        let email = ("a@b.c".to_owned(), "u1".to_owned());
        assert_eq!(decode::<(String, String)>(&encode(&email)), Ok(email));
        assert_eq!(decode::<i64>(&encode(&42_i64)), Ok(42));
    }

    #[test]
    fn a_foreign_or_tampered_cursor_is_invalid() {
        assert_eq!(decode::<i64>("zz"), Err(CursorError::Invalid));
        assert_eq!(decode::<i64>("c1zz"), Err(CursorError::Invalid));
        assert_eq!(decode::<i64>("c1abc"), Err(CursorError::Invalid));
        let pair = encode(&(1_i64, 2_i64));
        assert_eq!(decode::<i64>(&pair), Err(CursorError::Invalid));
        assert_eq!(decode::<i64>(&"c1".repeat(600)), Err(CursorError::Invalid));
    }

    #[test]
    fn limits_are_checked_and_a_page_names_its_successor() {
        assert_eq!(Keyset::<i64>::parse(None, Some(0)), Err(CursorError::Limit));
        assert_eq!(
            Keyset::<i64>::parse(None, Some(101)),
            Err(CursorError::Limit)
        );
        let request = Keyset::<i64>::parse(Some(&encode(&7_i64)), Some(2)).unwrap();
        assert_eq!((request.after, request.fetch()), (Some(7), 3));
        let page = KeysetPage::from_rows(vec![9, 8, 7], 2, |n: &i64| *n);
        assert_eq!((page.items.clone(), page.next), (vec![9, 8], Some(8)));
        let last = KeysetPage::from_rows(vec![9, 8], 2, |n: &i64| *n);
        assert_eq!(last.next, None);
    }
}
