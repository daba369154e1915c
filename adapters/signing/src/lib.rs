//! Signing and encryption primitives shared by the gateways and by the sandbox, which plays
//! the providers' side: HMAC-SHA256, RSA-SHA256 (PKCS#1 v1.5), SHA-256, AES-256-GCM, base64 and
//! hex. Comparisons of MACs are constant-time.
//!
//! A crate of its own so that the sandbox signs as the providers do without depending on the
//! gateways: the simulator shares these primitives, never the gateways' parsing of the wire
//! formats (`tests/tests/api/dependency_rule.rs` keeps it so). Nothing here knows a provider.

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit as AesKeyInit, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs1v15::{Signature, SigningKey, VerifyingKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use rsa::signature::{SignatureEncoding, Signer, Verifier};
use rsa::{RsaPrivateKey, RsaPublicKey};
use sha2::{Digest, Sha256};

pub use rsa::{RsaPrivateKey as PrivateKey, RsaPublicKey as PublicKey};

/// Why key material could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key is neither PEM (PKCS#8 or PKCS#1) nor bare base64 DER.
    #[error("key cannot be read: {0}")]
    Unreadable(String),
    /// AES-GCM needs exactly 32 bytes of key.
    #[error("AES-256 key must be 32 bytes")]
    AesKeyLength,
}

/// Install the process-wide TLS crypto provider (ring) once, before the first HTTPS client.
/// Safe to call more than once.
pub fn install_crypto_provider() {
    // Err only means a provider is installed already, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// HMAC-SHA256 of `message` under `key`.
#[must_use]
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// Whether `tag` is the HMAC-SHA256 of `message` under `key` (constant-time).
#[must_use]
pub fn verify_hmac_sha256(key: &[u8], message: &[u8], tag: &[u8]) -> bool {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(message);
    mac.verify_slice(tag).is_ok()
}

/// SHA-256 of `bytes`.
#[must_use]
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lower-case hex.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Decode lower- or upper-case hex; `None` for anything else.
#[must_use]
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Standard base64 with padding.
#[must_use]
pub fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decode standard base64; `None` when malformed.
#[must_use]
pub fn unb64(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text.trim()).ok()
}

/// RSA-SHA256 (PKCS#1 v1.5) signature of `message`.
#[must_use]
pub fn rsa_sha256_sign(key: &RsaPrivateKey, message: &[u8]) -> Vec<u8> {
    SigningKey::<Sha256>::new(key.clone())
        .sign(message)
        .to_vec()
}

/// Whether `signature` is an RSA-SHA256 (PKCS#1 v1.5) signature of `message` by `key`.
#[must_use]
pub fn rsa_sha256_verify(key: &RsaPublicKey, message: &[u8], signature: &[u8]) -> bool {
    let Ok(signature) = Signature::try_from(signature) else {
        return false;
    };
    VerifyingKey::<Sha256>::new(key.clone())
        .verify(message, &signature)
        .is_ok()
}

/// Read a private key: PEM (PKCS#8 or PKCS#1) or bare base64 of the DER (as Alipay hands them out).
///
/// # Errors
/// [`KeyError::Unreadable`].
pub fn private_key(text: &str) -> Result<RsaPrivateKey, KeyError> {
    let text = text.trim();
    if text.starts_with("-----") {
        return RsaPrivateKey::from_pkcs8_pem(text)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(text))
            .map_err(|e| KeyError::Unreadable(e.to_string()));
    }
    let der = unb64(text).ok_or_else(|| KeyError::Unreadable("not PEM nor base64".into()))?;
    RsaPrivateKey::from_pkcs8_der(&der)
        .or_else(|_| RsaPrivateKey::from_pkcs1_der(&der))
        .map_err(|e| KeyError::Unreadable(e.to_string()))
}

/// Read a public key: PEM (SPKI or PKCS#1) or bare base64 of the DER.
///
/// # Errors
/// [`KeyError::Unreadable`].
pub fn public_key(text: &str) -> Result<RsaPublicKey, KeyError> {
    let text = text.trim();
    if text.starts_with("-----") {
        return RsaPublicKey::from_public_key_pem(text)
            .or_else(|_| RsaPublicKey::from_pkcs1_pem(text))
            .map_err(|e| KeyError::Unreadable(e.to_string()));
    }
    let der = unb64(text).ok_or_else(|| KeyError::Unreadable("not PEM nor base64".into()))?;
    RsaPublicKey::from_public_key_der(&der)
        .or_else(|_| RsaPublicKey::from_pkcs1_der(&der))
        .map_err(|e| KeyError::Unreadable(e.to_string()))
}

/// The SPKI DER of a public key, base64 (the "bare" form some providers use).
#[must_use]
pub fn public_key_base64(key: &RsaPublicKey) -> String {
    key.to_public_key_der()
        .map(|d| b64(d.as_bytes()))
        .unwrap_or_default()
}

/// AES-256-GCM decryption (WeChat Pay's notification resource).
///
/// # Errors
/// A key that is not 32 bytes; a tag that does not verify (`None` inside `Ok` is never returned).
pub fn aes_256_gcm_decrypt(
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    ciphertext_and_tag: &[u8],
) -> Result<Option<Vec<u8>>, KeyError> {
    let cipher = Aes256Gcm::new_from_slice(key).map_err(|_| KeyError::AesKeyLength)?;
    let Ok(nonce) = <[u8; 12]>::try_from(nonce) else {
        return Ok(None);
    };
    Ok(cipher
        .decrypt(
            &Nonce::from(nonce),
            Payload {
                msg: ciphertext_and_tag,
                aad,
            },
        )
        .ok())
}

/// AES-256-GCM encryption (for the sandbox and tests, which play WeChat's side).
///
/// # Errors
/// A key that is not 32 bytes, or a nonce that is not 12 bytes.
pub fn aes_256_gcm_encrypt(
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    plaintext: &[u8],
) -> Result<Vec<u8>, KeyError> {
    let cipher = Aes256Gcm::new_from_slice(key).map_err(|_| KeyError::AesKeyLength)?;
    let nonce = <[u8; 12]>::try_from(nonce)
        .map_err(|_| KeyError::Unreadable("nonce must be 12 bytes".into()))?;
    cipher
        .encrypt(
            &Nonce::from(nonce),
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .map_err(|_| KeyError::Unreadable("encryption failed".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        // RFC 4231 test case 2.
        let tag = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(verify_hmac_sha256(
            b"Jefe",
            b"what do ya want for nothing?",
            &tag
        ));
        assert!(!verify_hmac_sha256(
            b"Jefe",
            b"what do ya want for nothing!",
            &tag
        ));
    }

    #[test]
    fn rsa_signatures_verify_only_with_the_matching_key_and_message() {
        let private = private_key(include_str!("../../sandbox/keys/merchant_private.pem")).unwrap();
        let public = public_key(include_str!("../../sandbox/keys/merchant_public.pem")).unwrap();
        let other = public_key(include_str!("../../sandbox/keys/provider_public.pem")).unwrap();
        let signature = rsa_sha256_sign(&private, b"message");
        assert!(rsa_sha256_verify(&public, b"message", &signature));
        assert!(!rsa_sha256_verify(&public, b"messagE", &signature));
        assert!(!rsa_sha256_verify(&other, b"message", &signature));
        let bare = public_key(&public_key_base64(&public)).unwrap();
        assert_eq!(bare, public);
    }

    #[test]
    fn aes_gcm_round_trips_and_refuses_tampering() {
        let key = [7_u8; 32];
        let sealed =
            aes_256_gcm_encrypt(&key, b"123456789012", b"transaction", b"{\"a\":1}").unwrap();
        assert_eq!(
            aes_256_gcm_decrypt(&key, b"123456789012", b"transaction", &sealed)
                .unwrap()
                .unwrap(),
            b"{\"a\":1}"
        );
        let mut tampered = sealed.clone();
        tampered[0] ^= 1;
        assert_eq!(
            aes_256_gcm_decrypt(&key, b"123456789012", b"transaction", &tampered).unwrap(),
            None
        );
        assert_eq!(
            aes_256_gcm_decrypt(&key, b"123456789012", b"other", &sealed).unwrap(),
            None
        );
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(unhex(&hex(&[0, 15, 255])).unwrap(), vec![0, 15, 255]);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("abc"), None);
    }
}
