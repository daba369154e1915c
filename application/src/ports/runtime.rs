//! Runtime ports: time, identifiers, randomness and secrets hashing come in through these, so
//! that use cases are deterministic under test.

use domain::Timestamp;

use crate::accounts::{Password, PasswordHash, TokenHash};

/// The current time.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now(&self) -> Timestamp;
}

/// New identifiers and secret tokens.
pub trait IdGenerator: Send + Sync + 'static {
    /// A new unique id with a readable prefix, such as `ord_…`; at most 64 characters of
    /// `[A-Za-z0-9_-]`.
    fn new_id(&self, prefix: &str) -> String;

    /// A new secret token with at least 128 bits of entropy, URL-safe.
    fn new_secret(&self) -> String;
}

/// Password and token hashing.
pub trait SecretHasher: Send + Sync + 'static {
    /// Hash a password for storage (argon2id in production).
    ///
    /// # Errors
    /// Only on a hasher failure, reported as text.
    fn hash_password(&self, password: &Password) -> Result<PasswordHash, String>;

    /// Whether `password` matches `hash`. A malformed hash never matches.
    fn verify_password(&self, password: &Password, hash: &PasswordHash) -> bool;

    /// The digest under which a session token or API key is stored (SHA-256 hex).
    fn hash_token(&self, token: &str) -> TokenHash;
}

/// Verifies tokens issued by a host application that already signs its users in (HS256 JWTs in
/// production), for deployments that set it up.
pub trait HostTokenVerifier: Send + Sync + 'static {
    /// The user id (the token's subject) of a valid, unexpired token; `None` otherwise.
    fn verify(&self, token: &str, now: Timestamp) -> Option<String>;
}
