//! Accounts: users, roles, sessions and service API keys.

use std::fmt;

use domain::{Timestamp, UserId};

/// Why an account value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    /// Not an e-mail address.
    #[error("email address is invalid")]
    Email,
    /// A password shorter than 8 or longer than 256 characters.
    #[error("password must be 8 to 256 characters")]
    Password,
    /// An API key scope Tally does not know.
    #[error("unknown scope {0:?}")]
    Scope(String),
}

/// A normalized (trimmed, lower-cased) e-mail address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    /// Parse an address: one `@`, a non-empty local part, a dotted domain, at most 254 chars.
    ///
    /// # Errors
    /// [`AccountError::Email`].
    pub fn parse(raw: &str) -> Result<Self, AccountError> {
        let value = raw.trim().to_lowercase();
        let valid = value.len() <= 254
            && !value.chars().any(|c| c.is_whitespace() || c.is_control())
            && value.split_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
            });
        if valid {
            Ok(Self(value))
        } else {
            Err(AccountError::Email)
        }
    }

    /// The address.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A password as typed, checked for length only; never stored or logged.
pub struct Password(String);

impl Password {
    /// Check a password's length (8 to 256 characters).
    ///
    /// # Errors
    /// [`AccountError::Password`].
    pub fn parse(raw: String) -> Result<Self, AccountError> {
        if (8..=256).contains(&raw.chars().count()) {
            Ok(Self(raw))
        } else {
            Err(AccountError::Password)
        }
    }

    /// The password, for the hasher only.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password([redacted])")
    }
}

/// What a user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A customer.
    User,
    /// May manage plans and API keys.
    Admin,
}

impl Role {
    /// The stable code.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Admin => "admin",
        }
    }

    /// Parse the stable code.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        match code {
            "user" => Some(Role::User),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// A user account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Id.
    pub id: UserId,
    /// Sign-in address.
    pub email: Email,
    /// Role.
    pub role: Role,
    /// When the account was made.
    pub created_at: Timestamp,
}

/// A stored password hash (PHC string); opaque to the application.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(pub String);

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash([redacted])")
    }
}

/// The SHA-256 hex digest of a secret token (session or API key); only digests are stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TokenHash(pub String);

/// A scope a service API key may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Consume, reserve, settle and release credits for any user.
    CreditsConsume,
    /// Read any user's credits.
    CreditsRead,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 2] = [Scope::CreditsConsume, Scope::CreditsRead];

    /// The stable code, as clients send it.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Scope::CreditsConsume => "credits:consume",
            Scope::CreditsRead => "credits:read",
        }
    }

    /// Parse a scope code.
    ///
    /// # Errors
    /// [`AccountError::Scope`].
    pub fn parse(code: &str) -> Result<Self, AccountError> {
        Scope::ALL
            .into_iter()
            .find(|s| s.code() == code)
            .ok_or_else(|| AccountError::Scope(code.chars().take(40).collect()))
    }
}

/// A service API key as stored (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Id, shown in listings.
    pub id: String,
    /// The admin who made it.
    pub owner: UserId,
    /// A label.
    pub name: String,
    /// The first characters of the key, to recognise it.
    pub prefix: String,
    /// What it may do.
    pub scopes: Vec<Scope>,
    /// When made.
    pub created_at: Timestamp,
    /// When revoked, if it was.
    pub revoked_at: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalized_and_checked() {
        assert_eq!(
            Email::parse("  Ada@Example.COM ").unwrap().as_str(),
            "ada@example.com"
        );
        for bad in [
            "",
            "ada",
            "ada@",
            "@x.com",
            "a@b",
            "a b@c.com",
            "a@@b.com",
            "a@.com",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn passwords_are_length_checked_and_never_printed() {
        assert!(Password::parse("short".into()).is_err());
        let p = Password::parse("correct horse".into()).unwrap();
        assert_eq!(format!("{p:?}"), "Password([redacted])");
    }
}
