//! A secret setting that prints as `[redacted]`.

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

/// A secret setting: a [`SecretString`] (zeroized on drop, read only through
/// [`ExposeSecret`]) whose `Debug` is exactly `[redacted]`, for settings whose printed form
/// promises that word (PayPal's `clientSecret`); the other settings keep [`SecretString`],
/// which prints `SecretBox<str>([REDACTED])`. Either way a derived `Debug` never shows it.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Secret(SecretString);

impl Secret {
    /// The secret as a [`SecretString`], for a gateway to keep.
    #[must_use]
    pub fn to_secret_string(&self) -> SecretString {
        self.0.clone()
    }
}

impl ExposeSecret<str> for Secret {
    fn expose_secret(&self) -> &str {
        self.0.expose_secret()
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(SecretString::from(value))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_reads_from_a_string_and_prints_as_redacted_only() {
        let secret: Secret = serde_json::from_str("\"sk_live_very_secret\"").unwrap();
        assert_eq!(secret.expose_secret(), "sk_live_very_secret");
        assert_eq!(format!("{secret:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some([redacted])");
        assert_eq!(
            secret.to_secret_string().expose_secret(),
            "sk_live_very_secret"
        );
    }
}
