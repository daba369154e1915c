//! Runtime ports: time, identifiers, randomness and secrets hashing come in through these, so
//! that use cases are deterministic under test.

use async_trait::async_trait;
use domain::Timestamp;

use crate::accounts::{Password, PasswordHash, Role, TokenHash};

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

/// Signs short messages with the server's secret (HMAC-SHA256 in production), so that a value
/// handed to a browser (a checkout's return token) can be checked when it comes back.
pub trait MessageSigner: Send + Sync + 'static {
    /// The tag of `message`: URL-safe text.
    fn sign(&self, message: &str) -> String;

    /// Whether `tag` is the tag of `message`, compared in constant time. A malformed tag is
    /// never valid.
    fn verify(&self, message: &str, tag: &str) -> bool;
}

/// Who a valid host-application token names, and what it may do for this request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostIdentity {
    /// The host's issuer: the configured issuer, or `''` when none is configured.
    pub issuer: String,
    /// The token's subject (its `sub` claim), unique within the issuer.
    pub subject: String,
    /// `Admin` only when the operator mapped a claim to the admin role and this token carries
    /// it; decided per token, never stored.
    pub role: Role,
    /// The user's e-mail address when the token says the host verified it (the configured
    /// verified-email claim is `true`), as the token spells it; `None` otherwise.
    pub verified_email: Option<String>,
    /// The user's e-mail address as the token's e-mail claim says it, verified or not (the
    /// address the payment provider sends receipts to); `None` without the claim.
    pub email: Option<String>,
    /// The user's name as the token's name claim says it; `None` without the claim.
    pub name: Option<String>,
    /// The organisation the token names, when the operator maps organisation claims.
    pub organisation: HostOrganisationClaim,
}

/// What a host token says of its user's organisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostOrganisationClaim {
    /// The operator maps no organisation claim: host tokens say nothing of organisations and
    /// the memberships of host organisations' teams are left as they are.
    NotMapped,
    /// The token names no organisation (the user acts in none).
    NoOrganisation,
    /// The token names this organisation.
    Organisation(HostOrganisation),
}

/// An organisation a host token names, and its user's role in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOrganisation {
    /// The host's id of the organisation (Clerk's `org_id`, say).
    pub id: String,
    /// The user's role in it, as the operator's role mapping reads the token's role claim.
    pub role: domain::MemberRole,
    /// Its name, when the token carries one.
    pub name: Option<String>,
}

/// Verifies tokens issued by a host application that already signs its users in (JWTs signed
/// with a shared secret or the host's public key), for deployments that set it up.
#[async_trait]
pub trait HostTokenVerifier: Send + Sync + 'static {
    /// The identity named by a valid token: signature by a configured key with a configured
    /// algorithm, `exp` after `now`, `nbf` (if present) not after `now`, and the configured
    /// issuer and audience. `None` for anything else; a verifier never panics on a claim.
    async fn verify(&self, token: &str, now: Timestamp) -> Option<HostIdentity>;
}
