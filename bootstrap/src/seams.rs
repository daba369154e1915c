//! The runtime seams: the real clock, random ids and secrets, argon2id password hashing and
//! SHA-256 token digests (host-application tokens are verified in `host_tokens`). These are the
//! only places that read the system clock or the OS random source (clippy.toml bans them
//! elsewhere).

use application::accounts::{Password, PasswordHash, TokenHash};
use application::ports::{Clock, IdGenerator, MessageSigner, SecretHasher};
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::Timestamp;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(
        clippy::disallowed_methods,
        reason = "the one place that reads the system clock"
    )]
    fn now(&self) -> Timestamp {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp::from_unix_millis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
    }
}

/// The application's clock: the system clock; in a build with the `test-clock` feature (the
/// black-box tests' build, never the `tally` binary's), moved forward by what a test asked for,
/// so that a test can cross a spend limit's reset. No request can move it.
#[derive(Debug, Clone, Default)]
pub struct AppClock {
    #[cfg(feature = "test-clock")]
    shift_ms: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

impl AppClock {
    /// Move the clock forward by `ms` (every part of the application reads the moved time).
    #[cfg(feature = "test-clock")]
    pub fn advance(&self, ms: i64) {
        self.shift_ms
            .fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for AppClock {
    fn now(&self) -> Timestamp {
        let now = SystemClock.now();
        #[cfg(feature = "test-clock")]
        let now = now.plus_millis(self.shift_ms.load(std::sync::atomic::Ordering::SeqCst));
        now
    }
}

/// Ids and secrets from the OS random source.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomIds;

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0_u8; N];
    // The OS random source failing is unrecoverable for a payment service: ids would collide.
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes
}

impl IdGenerator for RandomIds {
    fn new_id(&self, prefix: &str) -> String {
        // 16 random bytes: 128 bits, collision-free in practice; URL-safe base64 is id-safe.
        format!(
            "{prefix}_{}",
            URL_SAFE_NO_PAD
                .encode(random_bytes::<16>())
                .replace('-', "0")
        )
    }

    fn new_secret(&self) -> String {
        URL_SAFE_NO_PAD.encode(random_bytes::<32>())
    }
}

/// HMAC-SHA256 under the server's secret (`[hostApp] returnSecret`), tags in URL-safe base64.
#[derive(Debug, Clone)]
pub struct HmacSigner {
    key: SecretString,
}

impl HmacSigner {
    /// A signer under `key`.
    #[must_use]
    pub fn new(key: SecretString) -> Self {
        Self { key }
    }

    /// A signer under a fresh random key (development without a configured secret: return
    /// links then last as long as the process).
    #[must_use]
    pub fn ephemeral() -> Self {
        Self::new(SecretString::from(RandomIds.new_secret()))
    }
}

impl MessageSigner for HmacSigner {
    fn sign(&self, message: &str) -> String {
        let tag = signing::hmac_sha256(self.key.expose_secret().as_bytes(), message.as_bytes());
        URL_SAFE_NO_PAD.encode(tag)
    }

    fn verify(&self, message: &str, tag: &str) -> bool {
        URL_SAFE_NO_PAD.decode(tag).is_ok_and(|tag| {
            signing::verify_hmac_sha256(
                self.key.expose_secret().as_bytes(),
                message.as_bytes(),
                &tag,
            )
        })
    }
}

/// argon2id for passwords (OWASP's minimum parameters: 19 MiB, 2 passes), SHA-256 for tokens.
#[derive(Debug, Clone)]
pub struct Argon2Hasher {
    params: Params,
}

impl Default for Argon2Hasher {
    fn default() -> Self {
        Self {
            params: Params::new(19 * 1024, 2, 1, None).expect("valid argon2 parameters"),
        }
    }
}

impl Argon2Hasher {
    fn argon2(&self) -> Argon2<'static> {
        Argon2::new(Algorithm::Argon2id, Version::V0x13, self.params.clone())
    }
}

impl SecretHasher for Argon2Hasher {
    fn hash_password(&self, password: &Password) -> Result<PasswordHash, String> {
        let salt = SaltString::generate(&mut OsRng);
        self.argon2()
            .hash_password(password.expose().as_bytes(), &salt)
            .map(|h| PasswordHash(h.to_string()))
            .map_err(|e| e.to_string())
    }

    fn verify_password(&self, password: &Password, hash: &PasswordHash) -> bool {
        argon2::password_hash::PasswordHash::new(&hash.0).is_ok_and(|parsed| {
            self.argon2()
                .verify_password(password.expose().as_bytes(), &parsed)
                .is_ok()
        })
    }

    fn hash_token(&self, token: &str) -> TokenHash {
        TokenHash(
            Sha256::digest(token.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_hash_with_argon2id_and_verify() {
        let hasher = Argon2Hasher::default();
        let password = Password::parse("correct horse battery".into()).unwrap();
        let hash = hasher.hash_password(&password).unwrap();
        assert!(hash.0.starts_with("$argon2id$"));
        assert!(hasher.verify_password(&password, &hash));
        assert!(!hasher.verify_password(&Password::parse("wrong password".into()).unwrap(), &hash));
        assert!(!hasher.verify_password(&password, &PasswordHash("garbage".into())));
    }

    #[test]
    fn signatures_verify_only_for_their_message_and_key() {
        let signer = HmacSigner::new(SecretString::from("k".repeat(32)));
        let tag = signer.sign("tally-return:v1:success:ord_1:5");
        assert!(signer.verify("tally-return:v1:success:ord_1:5", &tag));
        assert!(!signer.verify("tally-return:v1:success:ord_2:5", &tag));
        assert!(!HmacSigner::ephemeral().verify("tally-return:v1:success:ord_1:5", &tag));
        assert!(!signer.verify("tally-return:v1:success:ord_1:5", "not base64!"));
    }

    #[test]
    fn ids_are_unique_and_id_safe() {
        let a = RandomIds.new_id("ord");
        let b = RandomIds.new_id("ord");
        assert_ne!(a, b);
        assert!(domain::OrderId::new(a.clone()).is_ok(), "{a}");
        assert!(RandomIds.new_secret().len() >= 43);
    }
}
