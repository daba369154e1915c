//! In-memory fakes of every port, for use-case tests (feature `testing`).
//!
//! `InMemoryStore` follows the same contracts as the SQL store (the store's contract suite is
//! the reference): all-or-nothing operations, compare-and-set transitions, one grant per source,
//! idempotent spends, balances that never go below zero.

pub mod fixtures;
mod gateway;
mod ledger;
mod store;

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use domain::Timestamp;

use crate::accounts::{Password, PasswordHash, TokenHash};
use crate::ports::{Clock, IdGenerator, SecretHasher};

pub use gateway::{FAKE_SIGNATURE_HEADER, FakeGateway};
pub use store::InMemoryStore;

/// A clock that says what it is told.
#[derive(Debug)]
pub struct FixedClock(AtomicI64);

impl FixedClock {
    /// A clock at `millis` since the epoch.
    #[must_use]
    pub fn at(millis: i64) -> Self {
        Self(AtomicI64::new(millis))
    }

    /// Move the clock forward.
    pub fn advance_ms(&self, millis: i64) {
        self.0.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_millis(self.0.load(Ordering::SeqCst))
    }
}

/// Ids `prefix_1`, `prefix_2`, … and secrets `secret_1`, ….
#[derive(Debug, Default)]
pub struct SequentialIds(AtomicU64);

impl IdGenerator for SequentialIds {
    fn new_id(&self, prefix: &str) -> String {
        format!("{prefix}_{}", self.0.fetch_add(1, Ordering::SeqCst) + 1)
    }

    fn new_secret(&self) -> String {
        format!("secret_{}", self.0.fetch_add(1, Ordering::SeqCst) + 1)
    }
}

/// A transparent "hasher" for tests: `plain:<password>` and `h:<token>`.
#[derive(Debug, Default)]
pub struct PlainHasher;

impl SecretHasher for PlainHasher {
    fn hash_password(&self, password: &Password) -> Result<PasswordHash, String> {
        Ok(PasswordHash(format!("plain:{}", password.expose())))
    }

    fn verify_password(&self, password: &Password, hash: &PasswordHash) -> bool {
        hash.0 == format!("plain:{}", password.expose())
    }

    fn hash_token(&self, token: &str) -> TokenHash {
        TokenHash(format!("h:{token}"))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A client address of its own for the test user `email`, so tests that register many users
/// are not refused by the per-address sign-up limit (the per-domain limit still counts them).
#[must_use]
pub fn client_of(email: &str) -> crate::sign_up::ClientAddress {
    crate::sign_up::ClientAddress::from_request(&format!("test:{email}"), None, false)
}
