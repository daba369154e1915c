//! A bound on failed sign-ins per e-mail address, so the sign-in form cannot be used to guess
//! one account's password quickly, whatever addresses the guesses come from.
//!
//! Fixed windows per key; the table holds at most [`MAX_KEYS`] keys (the oldest windows are
//! dropped first), so memory stays bounded under a flood of made-up addresses.

use std::collections::HashMap;
use std::sync::Mutex;

use domain::Timestamp;

/// The most keys remembered.
const MAX_KEYS: usize = 10_000;

/// Failed attempts per key and window.
#[derive(Debug)]
pub(crate) struct Throttle {
    max_failures: u32,
    window_ms: i64,
    windows: Mutex<HashMap<String, (Timestamp, u32)>>,
}

impl Throttle {
    /// At most `max_failures` failures per key in each window of `window_ms`.
    pub(crate) fn new(max_failures: u32, window_ms: i64) -> Self {
        Self {
            max_failures,
            window_ms,
            windows: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Timestamp, u32)>> {
        self.windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `key` may try now.
    pub(crate) fn allows(&self, key: &str, now: Timestamp) -> bool {
        match self.lock().get(key) {
            Some((start, count)) => {
                now.unix_millis() - start.unix_millis() >= self.window_ms
                    || *count < self.max_failures
            }
            None => true,
        }
    }

    /// Count a failure of `key`.
    pub(crate) fn record_failure(&self, key: &str, now: Timestamp) {
        let mut windows = self.lock();
        if windows.len() >= MAX_KEYS && !windows.contains_key(key) {
            let window_ms = self.window_ms;
            windows.retain(|_, (start, _)| now.unix_millis() - start.unix_millis() < window_ms);
            if windows.len() >= MAX_KEYS {
                windows.clear();
            }
        }
        let entry = windows.entry(key.to_owned()).or_insert((now, 0));
        if now.unix_millis() - entry.0.unix_millis() >= self.window_ms {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }

    /// Forget `key` (after a successful sign-in).
    pub(crate) fn clear(&self, key: &str) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_after_the_limit_until_the_window_ends() {
        let throttle = Throttle::new(2, 1_000);
        let t = Timestamp::from_unix_millis;
        assert!(throttle.allows("a", t(0)));
        throttle.record_failure("a", t(0));
        throttle.record_failure("a", t(10));
        assert!(!throttle.allows("a", t(20)));
        assert!(throttle.allows("b", t(20)));
        assert!(throttle.allows("a", t(1_000)));
        throttle.clear("a");
        assert!(throttle.allows("a", t(30)));
    }
}
