//! Accounts: users, roles, sessions and service API keys.

use std::fmt;

use domain::{AccountId, Timestamp, UserId};
use unicode_normalization::UnicodeNormalization;

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

/// A normalized e-mail address: trimmed, Unicode NFC, lower-cased.
///
/// The whole address is lower-cased (not only the domain), as it always has been, so that
/// accounts registered before normalization still sign in with any casing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    /// The longest address, in bytes (RFC 5321's path limit less the angle brackets).
    pub const MAX_BYTES: usize = 254;

    /// Parse an address: trimmed, put in Unicode NFC (so a precomposed and a decomposed
    /// spelling of the same address are one account) and lower-cased; then one `@`, a
    /// non-empty local part, a dotted domain, at most [`Email::MAX_BYTES`] bytes, and no
    /// whitespace, control, bidirectional-formatting or zero-width characters (which let one
    /// address be displayed as another).
    ///
    /// # Errors
    /// [`AccountError::Email`].
    pub fn parse(raw: &str) -> Result<Self, AccountError> {
        // NFC again after lower-casing: a case mapping can leave a decomposed sequence.
        let lowered = raw.trim().nfc().collect::<String>().to_lowercase();
        let value: String = lowered.nfc().collect();
        let valid = value.len() <= Self::MAX_BYTES
            && !value.chars().any(|c| {
                c.is_whitespace() || c.is_control() || is_bidi_format(c) || is_zero_width(c)
            })
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

    /// Parse the address of a new password account: as [`Email::parse`], and not in the
    /// reserved `.invalid` top-level domain (RFC 2606), which the placeholder addresses of host
    /// users (`hst_…@host.invalid`) use, so that no password account can take one first.
    ///
    /// # Errors
    /// [`AccountError::Email`].
    pub fn parse_new(raw: &str) -> Result<Self, AccountError> {
        let email = Self::parse(raw)?;
        if email.0.ends_with(".invalid") {
            return Err(AccountError::Email);
        }
        Ok(email)
    }

    /// The address.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether mail to it can arrive: not an address in the reserved `.invalid` top-level
    /// domain, as the placeholders of host users without a known e-mail are. A provider is
    /// never sent one (its receipts and invoices would go nowhere).
    #[must_use]
    pub fn is_deliverable(&self) -> bool {
        !self.0.ends_with(".invalid")
    }
}

/// Unicode's bidirectional formatting characters: the Arabic letter mark, the left-to-right
/// and right-to-left marks, embeddings and overrides (U+202A–U+202E) and isolates
/// (U+2066–U+2069).
fn is_bidi_format(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// Zero-width space, non-joiner, joiner and the byte-order mark (zero-width no-break space).
fn is_zero_width(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200D}' | '\u{FEFF}')
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A person's name as a payment provider shows it on a checkout, receipt or invoice: trimmed, 1
/// to [`CustomerName::MAX_CHARS`] characters, without control, bidirectional-formatting or
/// zero-width characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CustomerName(String);

/// Why a name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("name must be 1 to 200 characters, without control or formatting characters")]
pub struct CustomerNameError;

impl CustomerName {
    /// The longest name, in characters.
    pub const MAX_CHARS: usize = 200;

    /// Parse a name (trimmed, put in Unicode NFC).
    ///
    /// # Errors
    /// [`CustomerNameError`].
    pub fn parse(raw: &str) -> Result<Self, CustomerNameError> {
        let value: String = raw.trim().nfc().collect();
        let count = value.chars().count();
        let clean = !value
            .chars()
            .any(|c| c.is_control() || is_bidi_format(c) || is_zero_width(c));
        if (1..=Self::MAX_CHARS).contains(&count) && clean {
            Ok(Self(value))
        } else {
            Err(CustomerNameError)
        }
    }

    /// The name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How a payment provider may reach the person paying: an address mail can arrive at (never a
/// `.invalid` placeholder) and a name, each when known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuyerContact {
    /// The buyer's e-mail address; always deliverable ([`Email::is_deliverable`]).
    email: Option<Email>,
    /// The buyer's name.
    pub name: Option<CustomerName>,
}

impl BuyerContact {
    /// A contact with `email` (dropped when it is not deliverable) and `name`.
    #[must_use]
    pub fn new(email: Option<Email>, name: Option<CustomerName>) -> Self {
        Self {
            email: email.filter(Email::is_deliverable),
            name,
        }
    }

    /// The buyer's deliverable e-mail address, when known.
    #[must_use]
    pub const fn email(&self) -> Option<&Email> {
        self.email.as_ref()
    }

    /// This contact, with what `other` knows filled in where this one knows nothing.
    #[must_use]
    pub fn or(self, other: Self) -> Self {
        Self {
            email: self.email.or(other.email),
            name: self.name.or(other.name),
        }
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
    /// Read the host events feed.
    EventsRead,
    /// Read any user's entitlements.
    EntitlementsRead,
    /// Read a named user's orders and subscriptions (the app's backend acting for its user).
    BillingRead,
    /// Buy, cancel, resume and switch for a named user; also every `billing:read` read.
    BillingWrite,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 6] = [
        Scope::CreditsConsume,
        Scope::CreditsRead,
        Scope::EventsRead,
        Scope::EntitlementsRead,
        Scope::BillingRead,
        Scope::BillingWrite,
    ];

    /// The stable code, as clients send it.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Scope::CreditsConsume => "credits:consume",
            Scope::CreditsRead => "credits:read",
            Scope::EventsRead => "events:read",
            Scope::EntitlementsRead => "entitlements:read",
            Scope::BillingRead => "billing:read",
            Scope::BillingWrite => "billing:write",
        }
    }

    /// Whether a key carrying this scope may act with `needed`: the scope itself, and
    /// `billing:write` also allows what `billing:read` does (one who may cancel may look).
    #[must_use]
    pub fn allows(self, needed: Scope) -> bool {
        self == needed || (self == Scope::BillingWrite && needed == Scope::BillingRead)
    }

    /// Whether the scope reaches beyond any one account (the host events feed): a key bound to
    /// an account may not carry it.
    #[must_use]
    pub const fn is_app_wide(self) -> bool {
        matches!(self, Scope::EventsRead)
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

/// A customer-portal session: a browser session a host application opened for one of its
/// users, that may do nothing but that user's billing, with the way back to the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortalSession {
    /// The user, always with the role `user` (a portal never administers).
    pub user: User,
    /// The account whose billing it shows: the user's personal account, or a team the host
    /// asked for (where the user's role is checked again at every action).
    pub account: domain::AccountId,
    /// Where "Back to the app" leads.
    pub return_url: domain::ReturnUrl,
    /// The page language the host asked for, if any.
    pub locale: Option<String>,
    /// When the session ends.
    pub expires_at: Timestamp,
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
    /// The one account it acts for, when it is bound to one: it then reads and charges that
    /// account alone, for its members alone, and none of the app-wide calls.
    pub account: Option<AccountId>,
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
    fn nfc_and_nfd_spellings_of_an_address_are_one_address() {
        let composed = Email::parse("Zo\u{00EB}@Example.com").unwrap();
        let decomposed = Email::parse("zoe\u{0308}@example.COM").unwrap();
        assert_eq!(composed, decomposed);
        assert_eq!(composed.as_str(), "zo\u{00EB}@example.com");
    }

    #[test]
    fn existing_lower_cased_addresses_are_unchanged() {
        for stored in ["ada@example.com", "first.last+tag@sub.example.org"] {
            assert_eq!(Email::parse(stored).unwrap().as_str(), stored);
            let shouted = stored.to_uppercase();
            assert_eq!(Email::parse(&shouted).unwrap().as_str(), stored);
        }
    }

    #[test]
    fn control_bidi_and_zero_width_characters_are_refused() {
        let refused = [
            '\u{0000}', '\u{0007}', '\u{001B}', '\u{007F}', '\u{0085}', '\u{061C}', '\u{200B}',
            '\u{200C}', '\u{200D}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}',
            '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{FEFF}',
        ];
        for c in refused {
            for address in [format!("ad{c}a@example.com"), format!("ada@exa{c}mple.com")] {
                assert_eq!(
                    Email::parse(&address),
                    Err(AccountError::Email),
                    "U+{:04X}",
                    u32::from(c)
                );
            }
        }
        // Leading or trailing, they are not trimmed away either (only whitespace is).
        assert!(Email::parse("\u{202E}ada@example.com").is_err());
        assert!(Email::parse("ada@example.com\u{FEFF}").is_err());
    }

    #[test]
    fn new_accounts_cannot_take_the_reserved_invalid_domain_of_host_users() {
        let placeholder = "hst_0123456789abcdef0123456789@host.invalid";
        assert!(
            Email::parse(placeholder).is_ok(),
            "stored host users still read"
        );
        for reserved in [placeholder, "ada@example.INVALID"] {
            assert_eq!(
                Email::parse_new(reserved),
                Err(AccountError::Email),
                "{reserved}"
            );
        }
        assert!(Email::parse_new("ada@invalid.example.com").is_ok());
    }

    #[test]
    fn names_are_trimmed_bounded_and_free_of_formatting_characters() {
        assert_eq!(
            CustomerName::parse("  Ada Lovelace ").unwrap().as_str(),
            "Ada Lovelace"
        );
        assert!(CustomerName::parse(&"x".repeat(200)).is_ok());
        for bad in [
            String::new(),
            "   ".into(),
            "x".repeat(201),
            "Ada\u{202E}ecalevol".into(),
            "Ada\nLovelace".into(),
            "Ada\u{200B}".into(),
        ] {
            assert_eq!(CustomerName::parse(&bad), Err(CustomerNameError), "{bad:?}");
        }
    }

    #[test]
    fn a_buyer_contact_never_holds_an_invalid_placeholder() {
        let placeholder = Email::parse("hst_0123@host.invalid").unwrap();
        assert_eq!(BuyerContact::new(Some(placeholder), None).email(), None);
        let real = Email::parse("ada@example.com").unwrap();
        let stored = BuyerContact::new(Some(real.clone()), CustomerName::parse("Ada").ok());
        let sent = BuyerContact::new(None, CustomerName::parse("Ada L.").ok()).or(stored);
        assert_eq!(sent.email(), Some(&real));
        assert_eq!(sent.name.unwrap().as_str(), "Ada L.");
    }

    #[test]
    fn passwords_are_length_checked_and_never_printed() {
        assert!(Password::parse("short".into()).is_err());
        let p = Password::parse("correct horse".into()).unwrap();
        assert_eq!(format!("{p:?}"), "Password([redacted])");
    }
}
