//! A short-lived cache of API keys found by hash, so that a service calling the credit
//! endpoints at a high rate does not read `api_keys` on every request.
//!
//! Only keys that were found are kept, each for `ttl` after it was read; revoking a key through
//! this store empties the cache at once, and another instance's revocation takes effect here
//! within `ttl` (the documented trade-off, `TALLY_API_KEY_CACHE_MS`, 0 turns it off). The cache
//! holds at most [`CAPACITY`] keys and is emptied when full, so it never grows without bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use application::accounts::ApiKey;

/// The most keys kept.
const CAPACITY: usize = 4_096;

/// API keys by hash, each with the moment it was read.
#[derive(Debug, Clone)]
pub(crate) struct KeyCache {
    ttl: Duration,
    keys: Arc<Mutex<HashMap<String, (ApiKey, Instant)>>>,
}

impl KeyCache {
    /// A cache keeping keys for `ttl` (zero: keep nothing).
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            keys: Arc::default(),
        }
    }

    /// The key with `hash`, if it was read less than `ttl` ago.
    pub(crate) fn get(&self, hash: &str) -> Option<ApiKey> {
        if self.ttl.is_zero() {
            return None;
        }
        let keys = self.keys.lock().ok()?;
        let (key, read) = keys.get(hash)?;
        (read.elapsed() < self.ttl).then(|| key.clone())
    }

    /// Keep `key`, just read by `hash`.
    pub(crate) fn put(&self, hash: &str, key: &ApiKey) {
        if self.ttl.is_zero() {
            return;
        }
        if let Ok(mut keys) = self.keys.lock() {
            if keys.len() >= CAPACITY {
                keys.clear();
            }
            keys.insert(hash.to_owned(), (key.clone(), Instant::now()));
        }
    }

    /// Forget every key (a key was revoked).
    pub(crate) fn clear(&self) {
        if let Ok(mut keys) = self.keys.lock() {
            keys.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use application::accounts::Scope;

    fn key() -> ApiKey {
        ApiKey {
            id: "key_1".into(),
            owner: domain::UserId::new("usr_admin").unwrap(),
            name: "service".into(),
            prefix: "tk_live_abcd".into(),
            scopes: vec![Scope::CreditsConsume],
            account: None,
            created_at: domain::Timestamp::from_unix_millis(0),
            revoked_at: None,
        }
    }

    #[test]
    fn keeps_found_keys_for_the_ttl_and_forgets_them_on_clear() {
        let cache = KeyCache::new(Duration::from_secs(60));
        assert!(cache.get("h").is_none());
        cache.put("h", &key());
        assert_eq!(cache.get("h").map(|k| k.id), Some("key_1".into()));
        cache.clear();
        assert!(cache.get("h").is_none());
    }

    #[test]
    fn a_zero_ttl_keeps_nothing_and_old_entries_expire() {
        let off = KeyCache::new(Duration::ZERO);
        off.put("h", &key());
        assert!(off.get("h").is_none());
        let short = KeyCache::new(Duration::from_millis(1));
        short.put("h", &key());
        std::thread::sleep(Duration::from_millis(5));
        assert!(short.get("h").is_none());
    }
}
