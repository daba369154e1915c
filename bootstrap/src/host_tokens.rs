//! Host-application tokens: JWTs signed by an application that already signs its users in
//! (Auth.js, Better Auth, Clerk, Supabase, Firebase …), verified with the one key source the
//! operator configured (`[hostJwt]` in `tally.toml`, or `HOST_JWT_SECRET`).
//!
//! The accepted algorithm comes from the key, never from the token alone: a shared secret
//! verifies HS256 only, an RSA public key RS256 only, a P-256 key ES256 only, so `none` and
//! "HS256 signed with the public key" are refused. `exp` is required and `nbf` honoured, with
//! checked arithmetic; the issuer and audience are checked when configured. A JWKS URL is
//! fetched with a bounded timeout and response size, cached, and fetched again for an unknown
//! key id at most once every [`JWKS_REFRESH_MS`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use application::accounts::Role;
use application::ports::{
    HostIdentity, HostOrganisation, HostOrganisationClaim, HostTokenVerifier,
};
use async_trait::async_trait;
use domain::MemberRole;

use domain::{AppEnvironment, Timestamp};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;

use crate::settings::{Env, SettingsError};

/// The shortest HS256 secret production accepts, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// How often a JWKS URL may be fetched again for an unknown key id.
pub const JWKS_REFRESH_MS: i64 = 30_000;

/// How long one JWKS fetch may take.
const JWKS_TIMEOUT_MS: u64 = 5_000;

/// The largest JWKS document read.
const JWKS_MAX_BYTES: usize = 64 * 1024;

/// The most keys kept from one JWKS document.
const JWKS_MAX_KEYS: usize = 32;

/// How far ahead of our clock a token's `nbf` may be (the host's clock may run a little fast).
const NBF_LEEWAY_MS: i64 = 30_000;

/// The longest issuer, audience or claim mapping accepted, in bytes.
const MAX_SETTING_BYTES: usize = 512;

/// Where the keys that sign host tokens come from (exactly one).
#[derive(Debug, Clone)]
pub enum HostJwtKey {
    /// A shared secret (HS256).
    Secret(SecretString),
    /// The host's public key as a PEM file (RS256 or ES256, from the key's type).
    PublicKeyFile(PathBuf),
    /// The host's keys as a JWKS file.
    JwksFile(PathBuf),
    /// The host's keys at a JWKS URL.
    JwksUrl(String),
}

/// `hostJwt.adminClaim`: a dotted path to a claim and the value that makes the bearer an admin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminClaim {
    path: Vec<String>,
    value: String,
}

/// A dotted path to a claim (`email`, `user.email_verified`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimPath(Vec<String>);

impl ClaimPath {
    /// Parse `path.to.claim`.
    ///
    /// # Errors
    /// An empty segment, or a path over 512 bytes.
    pub fn parse(text: &str) -> Result<Self, String> {
        let path: Vec<String> = text.trim().split('.').map(str::to_owned).collect();
        if text.len() > MAX_SETTING_BYTES || path.iter().any(String::is_empty) {
            return Err(format!("{text:?} is not a claim.path"));
        }
        Ok(Self(path))
    }

    /// The claim at this path in `claims`.
    fn find<'a>(&self, claims: &'a Value) -> Option<&'a Value> {
        self.0
            .iter()
            .try_fold(claims, |at, segment| at.get(segment))
    }
}

/// Where a host token says its user's e-mail address, whether the host verified it, and the
/// user's name (`hostJwt.emailClaim`, default `email`; `hostJwt.emailVerifiedClaim`, default
/// `email_verified`, which must be the JSON `true`; `hostJwt.nameClaim`, default `name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactClaims {
    /// The address's claim.
    pub email: ClaimPath,
    /// The claim that is `true` when the host verified the address.
    pub verified: ClaimPath,
    /// The name's claim.
    pub name: ClaimPath,
}

impl Default for ContactClaims {
    fn default() -> Self {
        Self {
            email: ClaimPath(vec!["email".to_owned()]),
            verified: ClaimPath(vec!["email_verified".to_owned()]),
            name: ClaimPath(vec!["name".to_owned()]),
        }
    }
}

/// The longest name claim kept, in bytes (a longer one is ignored).
const MAX_NAME_CLAIM_BYTES: usize = 1024;

impl ContactClaims {
    /// The address in `claims`, verified or not (at most 254 bytes).
    fn email(&self, claims: &Value) -> Option<String> {
        let email = self.email.find(claims)?.as_str()?;
        (email.len() <= application::accounts::Email::MAX_BYTES).then(|| email.to_owned())
    }

    /// The name in `claims` (a string of at most [`MAX_NAME_CLAIM_BYTES`]).
    fn name(&self, claims: &Value) -> Option<String> {
        let name = self.name.find(claims)?.as_str()?;
        (name.len() <= MAX_NAME_CLAIM_BYTES).then(|| name.to_owned())
    }

    /// The address in `claims` if the verified claim is `true` (at most 254 bytes).
    fn verified_email(&self, claims: &Value) -> Option<String> {
        if self.verified.find(claims)? != &Value::Bool(true) {
            return None;
        }
        let email = self.email.find(claims)?.as_str()?;
        (email.len() <= application::accounts::Email::MAX_BYTES).then(|| email.to_owned())
    }
}

/// Where a host token names its user's organisation and their role in it
/// (`hostJwt.orgClaim`, off unless set; `hostJwt.orgRoleClaim`, default `org_role`;
/// `hostJwt.orgNameClaim`, off unless set; `hostJwt.orgRoles`, the role each value of the role
/// claim gives).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgClaims {
    /// The organisation id's claim (Clerk: `org_id`; its v2 session token: `o.id`).
    pub id: ClaimPath,
    /// The role's claim (Clerk: `org_role`, or `o.rol`).
    pub role: ClaimPath,
    /// The organisation name's claim, if any (Clerk: `org_slug`, or `o.slg`).
    pub name: Option<ClaimPath>,
    /// The role claim's values that make an owner or an admin; any other value, or none, is a
    /// member.
    pub roles: Vec<(String, MemberRole)>,
}

/// The role claim values understood without `hostJwt.orgRoles`: Clerk's (`org:admin`, or
/// `admin` in its v2 session token) and the plain words.
const DEFAULT_ORG_ROLES: &[(&str, MemberRole)] = &[
    ("owner", MemberRole::Owner),
    ("org:owner", MemberRole::Owner),
    ("admin", MemberRole::Admin),
    ("org:admin", MemberRole::Admin),
];

/// The longest organisation name claim kept, in bytes (a longer one is ignored).
const MAX_ORG_NAME_CLAIM_BYTES: usize = 1024;

impl OrgClaims {
    /// What `claims` say of the organisation: none when the id claim is absent, not a string,
    /// or empty.
    fn organisation(&self, claims: &Value) -> HostOrganisationClaim {
        let Some(id) = self.id.find(claims).and_then(Value::as_str) else {
            return HostOrganisationClaim::NoOrganisation;
        };
        if id.is_empty() {
            return HostOrganisationClaim::NoOrganisation;
        }
        let role = self
            .role
            .find(claims)
            .and_then(Value::as_str)
            .and_then(|text| {
                self.roles
                    .iter()
                    .find(|(value, _)| value == text)
                    .map(|(_, role)| *role)
            })
            .unwrap_or(MemberRole::Member);
        let name = self
            .name
            .as_ref()
            .and_then(|path| path.find(claims))
            .and_then(Value::as_str)
            .filter(|name| name.len() <= MAX_ORG_NAME_CLAIM_BYTES)
            .map(str::to_owned);
        HostOrganisationClaim::Organisation(HostOrganisation {
            id: id.to_owned(),
            role,
            name,
        })
    }
}

/// How host tokens are verified.
#[derive(Debug, Clone)]
pub struct HostJwtSettings {
    /// The key source.
    pub key: HostJwtKey,
    /// `hostJwt.issuer`: required in tokens when set; also the identity's namespace.
    pub issuer: Option<String>,
    /// `hostJwt.audience`: required in tokens when set.
    pub audience: Option<String>,
    /// `hostJwt.adminClaim`: off unless set.
    pub admin_claim: Option<AdminClaim>,
    /// `hostJwt.emailClaim`, `hostJwt.emailVerifiedClaim` and `hostJwt.nameClaim`.
    pub contact_claims: ContactClaims,
    /// `hostJwt.orgClaim` and the settings that go with it: `None` when organisations are not
    /// mapped.
    pub org_claims: Option<OrgClaims>,
}

/// The `[hostJwt]` table of `tally.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct HostJwtFile {
    secret: Option<String>,
    public_key_file: Option<PathBuf>,
    jwks_file: Option<PathBuf>,
    jwks_url: Option<String>,
    issuer: Option<String>,
    audience: Option<String>,
    admin_claim: Option<String>,
    email_claim: Option<String>,
    email_verified_claim: Option<String>,
    name_claim: Option<String>,
    org_claim: Option<String>,
    org_role_claim: Option<String>,
    org_name_claim: Option<String>,
    org_roles: Option<std::collections::BTreeMap<String, String>>,
}

fn bad(setting: &str, problem: impl Into<String>) -> SettingsError {
    SettingsError {
        setting: setting.to_owned(),
        problem: problem.into(),
    }
}

impl AdminClaim {
    /// Parse `path.to.claim=value`.
    ///
    /// # Errors
    /// A missing `=`, an empty path segment or value, or a mapping over 512 bytes.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some((path, value)) = text.split_once('=') else {
            return Err(format!("{text:?} is not claim.path=value"));
        };
        let path: Vec<String> = path.trim().split('.').map(str::to_owned).collect();
        let value = value.trim();
        if text.len() > MAX_SETTING_BYTES || value.is_empty() || path.iter().any(String::is_empty) {
            return Err(format!("{text:?} is not claim.path=value"));
        }
        Ok(Self {
            path,
            value: value.to_owned(),
        })
    }

    /// Whether the claim at the path equals the value, or is an array holding it.
    fn matches(&self, claims: &Value) -> bool {
        let mut at = claims;
        for segment in &self.path {
            match at.get(segment) {
                Some(inner) => at = inner,
                None => return false,
            }
        }
        let equal = |v: &Value| match v {
            Value::String(text) => *text == self.value,
            Value::Bool(_) | Value::Number(_) => {
                serde_json::from_str::<Value>(&self.value).is_ok_and(|wanted| wanted == *v)
            }
            _ => false,
        };
        match at {
            Value::Array(items) => items.iter().any(equal),
            other => equal(other),
        }
    }
}

/// A `${VAR}` value replaced from the environment; other values as written.
fn expand(env: &dyn Env, setting: &str, text: String) -> Result<String, SettingsError> {
    match text.strip_prefix("${").and_then(|t| t.strip_suffix('}')) {
        Some(var) => env
            .get(var)
            .ok_or_else(|| bad(setting, format!("environment variable {var} is not set"))),
        None => Ok(text),
    }
}

/// The host-token settings from `[hostJwt]` and `HOST_JWT_SECRET`; `None` when no key source
/// is configured (host tokens are then refused).
///
/// # Errors
/// Two key sources, a short secret in production, a bad URL, issuer, audience or claim mapping.
pub(crate) fn resolve(
    mut file: HostJwtFile,
    env: &dyn Env,
    environment: AppEnvironment,
) -> Result<Option<HostJwtSettings>, SettingsError> {
    let mut sources = key_sources(&mut file, env, environment)?;
    let checked = |setting: &str, value: Option<String>| match value {
        Some(v) if v.is_empty() || v.len() > MAX_SETTING_BYTES => {
            Err(bad(setting, "must be 1 to 512 bytes"))
        }
        other => Ok(other),
    };
    let issuer = checked("hostJwt.issuer", file.issuer)?;
    let audience = checked("hostJwt.audience", file.audience)?;
    let admin_claim = file
        .admin_claim
        .map(|text| AdminClaim::parse(&text).map_err(|e| bad("hostJwt.adminClaim", e)))
        .transpose()?;
    let contact_claims =
        contact_claims(file.email_claim, file.email_verified_claim, file.name_claim)?;
    let org_claims = org_claims(
        file.org_claim,
        file.org_role_claim,
        file.org_name_claim,
        file.org_roles,
    )?;
    let key = match sources.len() {
        0 if issuer.is_some() || audience.is_some() || admin_claim.is_some() => {
            return Err(bad(
                "hostJwt",
                "needs a key: secret, publicKeyFile, jwksFile or jwksUrl",
            ));
        }
        0 => return Ok(None),
        1 => sources.remove(0).1,
        _ => {
            let names: Vec<&str> = sources.iter().map(|(name, _)| *name).collect();
            return Err(bad(
                names[1],
                format!("only one key source may be set, found {}", names.join(", ")),
            ));
        }
    };
    Ok(Some(HostJwtSettings {
        key,
        issuer,
        audience,
        admin_claim,
        contact_claims,
        org_claims,
    }))
}

/// `hostJwt.orgClaim` with `orgRoleClaim`, `orgNameClaim` and `orgRoles`; `None` without
/// `orgClaim` (the others are then refused: they would do nothing).
///
/// # Errors
/// A claim path that does not parse, an `orgRoles` role other than owner, admin or member, or
/// a setting without `orgClaim`.
pub fn org_claims(
    id: Option<String>,
    role: Option<String>,
    name: Option<String>,
    roles: Option<std::collections::BTreeMap<String, String>>,
) -> Result<Option<OrgClaims>, SettingsError> {
    let path = |setting: &str, text: String| ClaimPath::parse(&text).map_err(|e| bad(setting, e));
    let Some(id) = id else {
        if role.is_some() || name.is_some() || roles.is_some() {
            return Err(bad(
                "hostJwt.orgClaim",
                "must be set for orgRoleClaim, orgNameClaim or orgRoles to apply",
            ));
        }
        return Ok(None);
    };
    let roles = match roles {
        None => DEFAULT_ORG_ROLES
            .iter()
            .map(|(value, role)| ((*value).to_owned(), *role))
            .collect(),
        Some(table) => table
            .into_iter()
            .map(|(value, role)| {
                if value.is_empty() || value.len() > MAX_SETTING_BYTES {
                    return Err(bad("hostJwt.orgRoles", "a value must be 1 to 512 bytes"));
                }
                let role = MemberRole::parse(&role).ok_or_else(|| {
                    bad(
                        "hostJwt.orgRoles",
                        format!("{role:?} is not owner, admin or member"),
                    )
                })?;
                Ok((value, role))
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(Some(OrgClaims {
        id: path("hostJwt.orgClaim", id)?,
        role: path(
            "hostJwt.orgRoleClaim",
            role.unwrap_or_else(|| "org_role".to_owned()),
        )?,
        name: name.map(|n| path("hostJwt.orgNameClaim", n)).transpose()?,
        roles,
    }))
}

/// `hostJwt.emailClaim`, `hostJwt.emailVerifiedClaim` and `hostJwt.nameClaim`, each defaulted
/// when not set.
fn contact_claims(
    email: Option<String>,
    verified: Option<String>,
    name: Option<String>,
) -> Result<ContactClaims, SettingsError> {
    let defaults = ContactClaims::default();
    let parse = |setting: &str, text: Option<String>, default: ClaimPath| {
        text.map_or(Ok(default), |text| {
            ClaimPath::parse(&text).map_err(|e| bad(setting, e))
        })
    };
    Ok(ContactClaims {
        email: parse("hostJwt.emailClaim", email, defaults.email)?,
        verified: parse("hostJwt.emailVerifiedClaim", verified, defaults.verified)?,
        name: parse("hostJwt.nameClaim", name, defaults.name)?,
    })
}

/// Every key source configured, named by its setting (`HOST_JWT_SECRET` wins over
/// `hostJwt.secret`, which is usually `"${HOST_JWT_SECRET}"` anyway).
fn key_sources(
    file: &mut HostJwtFile,
    env: &dyn Env,
    environment: AppEnvironment,
) -> Result<Vec<(&'static str, HostJwtKey)>, SettingsError> {
    let secret = match (env.get("HOST_JWT_SECRET"), file.secret.take()) {
        (Some(secret), _) => Some(("HOST_JWT_SECRET", secret)),
        (None, Some(text)) => Some(("hostJwt.secret", expand(env, "hostJwt.secret", text)?)),
        (None, None) => None,
    };
    let mut sources = Vec::new();
    if let Some((setting, secret)) = secret {
        if environment == AppEnvironment::Production && secret.len() < MIN_SECRET_BYTES {
            return Err(bad(
                setting,
                format!("production needs a secret of at least {MIN_SECRET_BYTES} bytes"),
            ));
        }
        sources.push((setting, HostJwtKey::Secret(SecretString::from(secret))));
    }
    if let Some(path) = file.public_key_file.take() {
        sources.push(("hostJwt.publicKeyFile", HostJwtKey::PublicKeyFile(path)));
    }
    if let Some(path) = file.jwks_file.take() {
        sources.push(("hostJwt.jwksFile", HostJwtKey::JwksFile(path)));
    }
    if let Some(url) = file.jwks_url.take() {
        check_jwks_url(&url, environment)?;
        sources.push(("hostJwt.jwksUrl", HostJwtKey::JwksUrl(url)));
    }
    Ok(sources)
}

fn check_jwks_url(url: &str, environment: AppEnvironment) -> Result<(), SettingsError> {
    let https = url.starts_with("https://");
    if !(https || url.starts_with("http://")) {
        return Err(bad("hostJwt.jwksUrl", "must be an http:// or https:// URL"));
    }
    if environment == AppEnvironment::Production && !https {
        return Err(bad("hostJwt.jwksUrl", "production needs an https:// URL"));
    }
    Ok(())
}

/// One verification key and the one algorithm it verifies.
#[derive(Clone)]
struct HostKey {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

/// Keys fixed at start, or fetched from a URL.
enum KeySource {
    Fixed(Vec<HostKey>),
    Remote(RemoteJwks),
}

/// A JWKS URL, its client, and the keys last fetched.
struct RemoteJwks {
    url: String,
    client: reqwest::Client,
    cache: tokio::sync::Mutex<JwksCache>,
}

#[derive(Default)]
struct JwksCache {
    keys: Vec<HostKey>,
    /// When the last fetch was attempted (on our clock), successful or not.
    fetched_at_ms: Option<i64>,
}

/// Verifies host tokens as [`HostJwtSettings`] say.
pub struct HostJwtVerifier {
    keys: KeySource,
    issuer: Option<String>,
    audience: Option<String>,
    admin_claim: Option<AdminClaim>,
    contact_claims: ContactClaims,
    org_claims: Option<OrgClaims>,
}

impl std::fmt::Debug for HostJwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostJwtVerifier")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("admin_claim", &self.admin_claim)
            .finish_non_exhaustive()
    }
}

impl HostJwtVerifier {
    /// A verifier for `settings`; key files are read now, a JWKS URL on the first token.
    ///
    /// # Errors
    /// A key file that cannot be read or holds no RS256 or ES256 key, named by its setting;
    /// an HTTP client that cannot start.
    pub fn new(settings: &HostJwtSettings) -> Result<Self, SettingsError> {
        let keys = match &settings.key {
            HostJwtKey::Secret(secret) => KeySource::Fixed(vec![HostKey {
                kid: None,
                algorithm: Algorithm::HS256,
                key: DecodingKey::from_secret(secret.expose_secret().as_bytes()),
            }]),
            HostJwtKey::PublicKeyFile(path) => {
                let pem = read(path, "hostJwt.publicKeyFile")?;
                KeySource::Fixed(vec![
                    pem_key(&pem).map_err(|e| bad("hostJwt.publicKeyFile", e))?,
                ])
            }
            HostJwtKey::JwksFile(path) => {
                let json = read(path, "hostJwt.jwksFile")?;
                KeySource::Fixed(jwks_keys(&json).map_err(|e| bad("hostJwt.jwksFile", e))?)
            }
            HostJwtKey::JwksUrl(url) => KeySource::Remote(RemoteJwks::new(url)?),
        };
        Ok(Self {
            keys,
            issuer: settings.issuer.clone(),
            audience: settings.audience.clone(),
            admin_claim: settings.admin_claim.clone(),
            contact_claims: settings.contact_claims.clone(),
            org_claims: settings.org_claims.clone(),
        })
    }

    /// The claims of `token` if one of `keys` verifies it with its own algorithm and the
    /// configured issuer and audience.
    fn decode(&self, token: &str, header: &Header, keys: &[HostKey]) -> Option<Value> {
        keys.iter().filter(|k| fits(k, header)).find_map(|k| {
            let mut validation = Validation::new(k.algorithm);
            validation.algorithms = vec![k.algorithm];
            // Time claims are checked below against our clock, with checked arithmetic.
            validation.validate_exp = false;
            validation.validate_nbf = false;
            let mut required = vec!["exp", "sub"];
            if let Some(issuer) = &self.issuer {
                validation.set_issuer(&[issuer]);
                required.push("iss");
            }
            match &self.audience {
                Some(audience) => {
                    validation.set_audience(&[audience]);
                    required.push("aud");
                }
                None => validation.validate_aud = false,
            }
            validation.set_required_spec_claims(&required);
            jsonwebtoken::decode::<Value>(token, &k.key, &validation)
                .ok()
                .map(|data| data.claims)
        })
    }

    /// The identity in verified `claims`, if they are in force at `now`.
    fn identity(&self, claims: &Value, now: Timestamp) -> Option<HostIdentity> {
        let now_ms = now.unix_millis();
        if claim_millis(claims.get("exp")?)? <= now_ms {
            return None;
        }
        if let Some(nbf) = claims.get("nbf")
            && claim_millis(nbf)? > now_ms.saturating_add(NBF_LEEWAY_MS)
        {
            return None;
        }
        if let Some(issuer) = &self.issuer
            && claims.get("iss")?.as_str()? != issuer
        {
            return None;
        }
        let subject = claims.get("sub")?.as_str()?.to_owned();
        let admin = self.admin_claim.as_ref().is_some_and(|c| c.matches(claims));
        Some(HostIdentity {
            issuer: self.issuer.clone().unwrap_or_default(),
            subject,
            role: if admin { Role::Admin } else { Role::User },
            verified_email: self.contact_claims.verified_email(claims),
            email: self.contact_claims.email(claims),
            name: self.contact_claims.name(claims),
            organisation: self
                .org_claims
                .as_ref()
                .map_or(HostOrganisationClaim::NotMapped, |org| {
                    org.organisation(claims)
                }),
        })
    }
}

/// A whole-second claim in milliseconds; `None` for anything but an integer that fits.
fn claim_millis(value: &Value) -> Option<i64> {
    value.as_i64()?.checked_mul(1000)
}

/// Whether `key` may verify a token with `header`: the same algorithm (the key's, never only
/// the header's) and, when both name one, the same key id.
fn fits(key: &HostKey, header: &Header) -> bool {
    key.algorithm == header.alg
        && match (&header.kid, &key.kid) {
            (Some(wanted), Some(kid)) => wanted == kid,
            _ => true,
        }
}

#[async_trait]
impl HostTokenVerifier for HostJwtVerifier {
    async fn verify(&self, token: &str, now: Timestamp) -> Option<HostIdentity> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        let claims = match &self.keys {
            KeySource::Fixed(keys) => self.decode(token, &header, keys),
            KeySource::Remote(remote) => {
                let keys = remote.keys_for(&header, now).await;
                self.decode(token, &header, &keys)
            }
        }?;
        self.identity(&claims, now)
    }
}

fn read(path: &Path, setting: &str) -> Result<Vec<u8>, SettingsError> {
    std::fs::read(path).map_err(|e| bad(setting, format!("{}: {e}", path.display())))
}

/// The key in a PEM file: an RSA public key (RS256, as `PUBLIC KEY` or `RSA PUBLIC KEY`) or an
/// EC public key (ES256; a key of another curve never verifies an ES256 signature), parsed by
/// jsonwebtoken's own PEM support.
fn pem_key(pem: &[u8]) -> Result<HostKey, String> {
    let (algorithm, key) = if let Ok(key) = DecodingKey::from_rsa_pem(pem) {
        (Algorithm::RS256, key)
    } else if let Ok(key) = DecodingKey::from_ec_pem(pem) {
        (Algorithm::ES256, key)
    } else {
        return Err("not a PEM RSA or EC public key".into());
    };
    Ok(HostKey {
        kid: None,
        algorithm,
        key,
    })
}

/// The RS256 and ES256 signing keys of a JWKS document; other keys are skipped.
fn jwks_keys(json: &[u8]) -> Result<Vec<HostKey>, String> {
    let set: JwkSet = serde_json::from_slice(json).map_err(|e| format!("not a JWKS: {e}"))?;
    let keys: Vec<HostKey> = set
        .keys
        .iter()
        .filter(|jwk| jwk.common.public_key_use != Some(PublicKeyUse::Encryption))
        .filter_map(|jwk| {
            let algorithm = match (&jwk.common.key_algorithm, &jwk.algorithm) {
                (None | Some(KeyAlgorithm::RS256), AlgorithmParameters::RSA(_)) => Algorithm::RS256,
                (None | Some(KeyAlgorithm::ES256), AlgorithmParameters::EllipticCurve(ec))
                    if ec.curve == EllipticCurve::P256 =>
                {
                    Algorithm::ES256
                }
                _ => return None,
            };
            Some(HostKey {
                kid: jwk.common.key_id.clone(),
                algorithm,
                key: DecodingKey::from_jwk(jwk).ok()?,
            })
        })
        .take(JWKS_MAX_KEYS)
        .collect();
    if keys.is_empty() {
        return Err("no RS256 or ES256 signing key".into());
    }
    Ok(keys)
}

impl RemoteJwks {
    fn new(url: &str) -> Result<Self, SettingsError> {
        gateways::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(JWKS_TIMEOUT_MS))
            .connect_timeout(Duration::from_millis(JWKS_TIMEOUT_MS))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| bad("hostJwt.jwksUrl", format!("http client: {e}")))?;
        Ok(Self {
            url: url.to_owned(),
            client,
            cache: tokio::sync::Mutex::default(),
        })
    }

    /// The cached keys that fit `header`; when none does, the keys fetched again, unless the
    /// last fetch was less than [`JWKS_REFRESH_MS`] ago.
    async fn keys_for(&self, header: &Header, now: Timestamp) -> Vec<HostKey> {
        let fitting = |keys: &[HostKey]| -> Vec<HostKey> {
            keys.iter().filter(|k| fits(k, header)).cloned().collect()
        };
        let mut cache = self.cache.lock().await;
        let found = fitting(&cache.keys);
        let now_ms = now.unix_millis();
        let due = cache
            .fetched_at_ms
            .is_none_or(|at| now_ms.saturating_sub(at) >= JWKS_REFRESH_MS);
        if !found.is_empty() || !due {
            return found;
        }
        cache.fetched_at_ms = Some(now_ms);
        match self.fetch().await {
            Ok(keys) => cache.keys = keys,
            // The URL is not logged with the body; keys in hand are kept.
            Err(e) => tracing::warn!(error = %e, "host JWKS fetch failed"),
        }
        fitting(&cache.keys)
    }

    async fn fetch(&self) -> Result<Vec<HostKey>, String> {
        let mut response = self
            .client
            .get(&self.url)
            .send()
            .await
            .map_err(|e| format!("request: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("body: {e}"))? {
            if body.len() + chunk.len() > JWKS_MAX_BYTES {
                return Err(format!("larger than {JWKS_MAX_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        jwks_keys(&body)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use base64::Engine as _;
    use jsonwebtoken::{EncodingKey, encode};
    use serde_json::json;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    const NOW_S: i64 = 1_700_000_000;
    const SECRET: &str = "a-shared-secret-of-at-least-32-bytes!";

    fn now() -> Timestamp {
        Timestamp::from_unix_millis(NOW_S * 1000)
    }

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/host-jwt")
            .join(name)
    }

    fn private(name: &str, algorithm: Algorithm) -> EncodingKey {
        // RSA keys are PKCS#1 (`RSA PRIVATE KEY`), the EC key PKCS#8, as the library wants.
        let pem = std::fs::read(fixture(name)).unwrap();
        match algorithm {
            Algorithm::ES256 => EncodingKey::from_ec_pem(&pem).unwrap(),
            _ => EncodingKey::from_rsa_pem(&pem).unwrap(),
        }
    }

    fn sign(claims: &Value, algorithm: Algorithm, key: &EncodingKey, kid: Option<&str>) -> String {
        let mut header = Header::new(algorithm);
        header.kid = kid.map(str::to_owned);
        encode(&header, claims, key).unwrap()
    }

    fn hs256(claims: &Value) -> String {
        sign(
            claims,
            Algorithm::HS256,
            &EncodingKey::from_secret(SECRET.as_bytes()),
            None,
        )
    }

    fn rs256(claims: &Value, kid: Option<&str>) -> String {
        sign(
            claims,
            Algorithm::RS256,
            &private("rsa-private.pem", Algorithm::RS256),
            kid,
        )
    }

    fn es256(claims: &Value, kid: Option<&str>) -> String {
        sign(
            claims,
            Algorithm::ES256,
            &private("ec-private.pem", Algorithm::ES256),
            kid,
        )
    }

    fn claims() -> Value {
        json!({"sub": "host-user-1", "exp": NOW_S + 60})
    }

    fn settings(key: HostJwtKey) -> HostJwtSettings {
        HostJwtSettings {
            key,
            issuer: None,
            audience: None,
            admin_claim: None,
            contact_claims: ContactClaims::default(),
            org_claims: None,
        }
    }

    fn verifier(key: HostJwtKey) -> HostJwtVerifier {
        HostJwtVerifier::new(&settings(key)).unwrap()
    }

    fn secret_verifier() -> HostJwtVerifier {
        verifier(HostJwtKey::Secret(SecretString::from(SECRET)))
    }

    async fn subject(verifier: &HostJwtVerifier, token: &str) -> Option<String> {
        verifier
            .verify(token, now())
            .await
            .map(|identity| identity.subject)
    }

    fn user(subject: &str) -> Option<String> {
        Some(subject.to_owned())
    }

    #[tokio::test]
    async fn hs256_needs_the_shared_secret_and_refuses_other_algorithms() {
        let v = secret_verifier();
        let identity = v.verify(&hs256(&claims()), now()).await.unwrap();
        assert_eq!(
            identity,
            HostIdentity {
                issuer: String::new(),
                subject: "host-user-1".into(),
                role: Role::User,
                verified_email: None,
                email: None,
                name: None,
                organisation: HostOrganisationClaim::NotMapped,
            }
        );
        let other = sign(
            &claims(),
            Algorithm::HS256,
            &EncodingKey::from_secret(b"other"),
            None,
        );
        assert_eq!(subject(&v, &other).await, None, "wrong secret");
        assert_eq!(subject(&v, &rs256(&claims(), None)).await, None, "RS256");
        let unsigned = format!(
            "{}.{}.",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims().to_string())
        );
        assert_eq!(subject(&v, &unsigned).await, None, "alg none");
        assert_eq!(subject(&v, "not.a.jwt").await, None);
    }

    #[tokio::test]
    async fn rs256_and_es256_verify_with_a_pem_public_key_and_nothing_else() {
        let rsa = verifier(HostJwtKey::PublicKeyFile(fixture("rsa-public.pem")));
        assert_eq!(
            subject(&rsa, &rs256(&claims(), None)).await,
            user("host-user-1")
        );
        assert_eq!(
            subject(&rsa, &rs256(&claims(), Some("any"))).await,
            user("host-user-1")
        );
        let other = private("rsa-other-private.pem", Algorithm::RS256);
        let wrong = sign(&claims(), Algorithm::RS256, &other, None);
        assert_eq!(subject(&rsa, &wrong).await, None, "another RSA key");
        // The public key used as an HMAC secret (algorithm confusion).
        let public = std::fs::read(fixture("rsa-public.pem")).unwrap();
        let confused = sign(
            &claims(),
            Algorithm::HS256,
            &EncodingKey::from_secret(&public),
            None,
        );
        assert_eq!(
            subject(&rsa, &confused).await,
            None,
            "HS256 with the public key"
        );
        assert_eq!(subject(&rsa, &es256(&claims(), None)).await, None, "ES256");

        let ec = verifier(HostJwtKey::PublicKeyFile(fixture("ec-public.pem")));
        assert_eq!(
            subject(&ec, &es256(&claims(), None)).await,
            user("host-user-1")
        );
        assert_eq!(subject(&ec, &rs256(&claims(), None)).await, None, "RS256");
        let err = HostJwtVerifier::new(&settings(HostJwtKey::PublicKeyFile(fixture("README.md"))))
            .unwrap_err();
        assert_eq!(err.setting, "hostJwt.publicKeyFile");
    }

    #[tokio::test]
    async fn a_jwks_file_verifies_each_algorithm_by_key_id() {
        let v = verifier(HostJwtKey::JwksFile(fixture("jwks.json")));
        assert_eq!(
            subject(&v, &rs256(&claims(), Some("rsa-1"))).await,
            user("host-user-1")
        );
        assert_eq!(
            subject(&v, &es256(&claims(), Some("ec-1"))).await,
            user("host-user-1")
        );
        assert_eq!(
            subject(&v, &rs256(&claims(), None)).await,
            user("host-user-1"),
            "no kid"
        );
        assert_eq!(
            subject(&v, &rs256(&claims(), Some("ec-1"))).await,
            None,
            "kid of an EC key"
        );
        let other = private("rsa-other-private.pem", Algorithm::RS256);
        let wrong = sign(&claims(), Algorithm::RS256, &other, Some("rsa-1"));
        assert_eq!(
            subject(&v, &wrong).await,
            None,
            "signed by a key not in the set"
        );
        assert_eq!(subject(&v, &hs256(&claims())).await, None, "HS256");
    }

    #[tokio::test]
    async fn issuer_and_audience_are_checked_and_required_when_configured() {
        let v = HostJwtVerifier::new(&HostJwtSettings {
            issuer: Some("https://idp.example".into()),
            audience: Some("tally".into()),
            ..settings(HostJwtKey::Secret(SecretString::from(SECRET)))
        })
        .unwrap();
        let with = |iss: Value, aud: Value| {
            hs256(&json!({"sub": "s", "exp": NOW_S + 60, "iss": iss, "aud": aud}))
        };
        let good = v
            .verify(&with(json!("https://idp.example"), json!("tally")), now())
            .await;
        assert_eq!(good.unwrap().issuer, "https://idp.example");
        let listed = with(json!("https://idp.example"), json!(["other", "tally"]));
        assert_eq!(subject(&v, &listed).await, user("s"));
        for (iss, aud) in [
            (json!("https://evil.example"), json!("tally")),
            (json!(["https://idp.example"]), json!("tally")),
            (json!("https://idp.example"), json!("other")),
            (json!(null), json!("tally")),
            (json!("https://idp.example"), json!(null)),
        ] {
            assert_eq!(
                subject(&v, &with(iss.clone(), aud.clone())).await,
                None,
                "{iss} {aud}"
            );
        }
        let missing = hs256(&json!({"sub": "s", "exp": NOW_S + 60}));
        assert_eq!(subject(&v, &missing).await, None, "neither claim");
        // Without a configured audience, a token's audience is not held against it.
        let open = secret_verifier();
        assert_eq!(
            subject(&open, &with(json!("x"), json!("y"))).await,
            user("s")
        );
    }

    #[tokio::test]
    async fn time_claims_are_checked_without_overflow() {
        let v = secret_verifier();
        let with_exp = |exp: Value| hs256(&json!({"sub": "s", "exp": exp}));
        assert_eq!(subject(&v, &with_exp(json!(NOW_S + 1))).await, user("s"));
        for exp in [
            json!(NOW_S - 1),
            json!(NOW_S),
            json!(i64::MAX),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-1),
            json!(1.7e9),
            json!("4102444800"),
            json!(null),
        ] {
            assert_eq!(subject(&v, &with_exp(exp.clone())).await, None, "exp {exp}");
        }
        let missing = hs256(&json!({"sub": "s"}));
        assert_eq!(subject(&v, &missing).await, None, "no exp");
        let with_nbf = |nbf: Value| hs256(&json!({"sub": "s", "exp": NOW_S + 60, "nbf": nbf}));
        assert_eq!(subject(&v, &with_nbf(json!(NOW_S - 10))).await, user("s"));
        assert_eq!(
            subject(&v, &with_nbf(json!(NOW_S + 10))).await,
            user("s"),
            "leeway"
        );
        for nbf in [json!(NOW_S + 31), json!(i64::MAX), json!("soon")] {
            assert_eq!(subject(&v, &with_nbf(nbf.clone())).await, None, "nbf {nbf}");
        }
        let numeric_sub = hs256(&json!({"sub": 7, "exp": NOW_S + 60}));
        assert_eq!(
            subject(&v, &numeric_sub).await,
            None,
            "sub must be a string"
        );
    }

    #[tokio::test]
    async fn the_admin_claim_mapping_decides_the_role_per_token() {
        let v = HostJwtVerifier::new(&HostJwtSettings {
            admin_claim: Some(AdminClaim::parse("app_metadata.role=admin").unwrap()),
            ..settings(HostJwtKey::Secret(SecretString::from(SECRET)))
        })
        .unwrap();
        let role = |metadata: Value| {
            let token = hs256(&json!({"sub": "s", "exp": NOW_S + 60, "app_metadata": metadata}));
            let v = &v;
            async move { v.verify(&token, now()).await.map(|i| i.role) }
        };
        assert_eq!(role(json!({"role": "admin"})).await, Some(Role::Admin));
        assert_eq!(
            role(json!({"role": ["user", "admin"]})).await,
            Some(Role::Admin)
        );
        assert_eq!(role(json!({"role": "user"})).await, Some(Role::User));
        assert_eq!(role(json!({"role": "Admin"})).await, Some(Role::User));
        assert_eq!(role(json!({"other": "admin"})).await, Some(Role::User));
        assert_eq!(role(json!("admin")).await, Some(Role::User));
        // Without a mapping nobody is an admin, whatever the token says.
        let token = hs256(&json!({"sub": "s", "exp": NOW_S + 60, "role": "admin"}));
        let plain = secret_verifier().verify(&token, now()).await.unwrap();
        assert_eq!(plain.role, Role::User);
        let flag = AdminClaim::parse("is_admin=true").unwrap();
        assert!(flag.matches(&json!({"is_admin": true})));
        assert!(!flag.matches(&json!({"is_admin": false})));
        for bad in ["role", "=admin", "role=", "a..b=admin", ".role=admin"] {
            assert!(AdminClaim::parse(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn an_email_counts_as_verified_only_when_its_claim_is_true() {
        let nested = HostJwtVerifier::new(&HostJwtSettings {
            contact_claims: ContactClaims {
                email: ClaimPath::parse("user.mail").unwrap(),
                verified: ClaimPath::parse("user.mail_ok").unwrap(),
                name: ClaimPath::parse("user.full_name").unwrap(),
            },
            ..settings(HostJwtKey::Secret(SecretString::from(SECRET)))
        })
        .unwrap();
        async fn email(v: &HostJwtVerifier, extra: Value) -> Option<String> {
            let mut claims = claims();
            if let (Some(all), Value::Object(more)) = (claims.as_object_mut(), extra) {
                all.extend(more);
            }
            let token = hs256(&claims);
            v.verify(&token, now()).await.and_then(|i| i.verified_email)
        }
        let plain = secret_verifier();
        let verified = json!({"email": "Ada@Example.com", "email_verified": true});
        assert_eq!(
            email(&plain, verified).await.as_deref(),
            Some("Ada@Example.com")
        );
        for unverified in [
            json!({"email": "ada@example.com"}),
            json!({"email": "ada@example.com", "email_verified": false}),
            json!({"email": "ada@example.com", "email_verified": "true"}),
            json!({"email_verified": true}),
        ] {
            assert_eq!(email(&plain, unverified).await, None);
        }
        let deep = json!({"user": {"mail": "bo@example.com", "mail_ok": true}});
        assert_eq!(
            email(&nested, deep).await.as_deref(),
            Some("bo@example.com")
        );
        assert!(ClaimPath::parse("a..b").is_err());
    }

    #[tokio::test]
    async fn the_contact_email_and_name_come_from_their_claims_verified_or_not() {
        let contact = |v: HostJwtVerifier, extra: Value| async move {
            let mut claims = claims();
            if let (Some(all), Value::Object(more)) = (claims.as_object_mut(), extra) {
                all.extend(more);
            }
            let identity = v.verify(&hs256(&claims), now()).await.unwrap();
            (identity.email, identity.name)
        };
        let unverified = json!({"email": "ada@example.com", "name": "Ada Lovelace"});
        assert_eq!(
            contact(secret_verifier(), unverified).await,
            (Some("ada@example.com".into()), Some("Ada Lovelace".into()))
        );
        let nested = HostJwtVerifier::new(&HostJwtSettings {
            contact_claims: ContactClaims {
                name: ClaimPath::parse("profile.display").unwrap(),
                ..ContactClaims::default()
            },
            ..settings(HostJwtKey::Secret(SecretString::from(SECRET)))
        })
        .unwrap();
        let deep = json!({"name": "not this", "profile": {"display": "Bo"}});
        assert_eq!(contact(nested, deep).await, (None, Some("Bo".into())));
        let odd = json!({"email": 7, "name": "x".repeat(2000)});
        assert_eq!(contact(secret_verifier(), odd).await, (None, None));
    }

    #[tokio::test]
    async fn an_organisation_and_its_role_come_from_the_mapped_claims() {
        let org = |v: HostJwtVerifier, extra: Value| async move {
            let mut claims = claims();
            if let (Some(all), Value::Object(more)) = (claims.as_object_mut(), extra) {
                all.extend(more);
            }
            v.verify(&hs256(&claims), now()).await.unwrap().organisation
        };
        let mapped = |roles| {
            HostJwtVerifier::new(&HostJwtSettings {
                org_claims: org_claims(Some("org_id".into()), None, Some("org_slug".into()), roles)
                    .unwrap(),
                ..settings(HostJwtKey::Secret(SecretString::from(SECRET)))
            })
            .unwrap()
        };
        let named = |id: &str, role, name: Option<&str>| {
            HostOrganisationClaim::Organisation(HostOrganisation {
                id: id.into(),
                role,
                name: name.map(str::to_owned),
            })
        };
        // Clerk's claims: org_id, org_role ("org:admin"), org_slug.
        let clerk = json!({"org_id": "org_2x", "org_role": "org:admin", "org_slug": "acme"});
        assert_eq!(
            org(mapped(None), clerk.clone()).await,
            named("org_2x", MemberRole::Admin, Some("acme"))
        );
        assert_eq!(
            org(secret_verifier(), clerk).await,
            HostOrganisationClaim::NotMapped,
            "not mapped"
        );
        for (extra, want) in [
            (
                json!({"org_id": "o", "org_role": "org:member"}),
                named("o", MemberRole::Member, None),
            ),
            (json!({"org_id": "o"}), named("o", MemberRole::Member, None)),
            (
                json!({"org_id": "o", "org_role": ["admin"]}),
                named("o", MemberRole::Member, None),
            ),
            (json!({"org_id": ""}), HostOrganisationClaim::NoOrganisation),
            (json!({"org_id": 7}), HostOrganisationClaim::NoOrganisation),
            (json!({}), HostOrganisationClaim::NoOrganisation),
        ] {
            assert_eq!(org(mapped(None), extra.clone()).await, want, "{extra}");
        }
        // A mapping of one's own replaces the default one.
        let roles = [("boss".to_owned(), "owner".to_owned())]
            .into_iter()
            .collect();
        let own = json!({"org_id": "o", "org_role": "boss"});
        assert_eq!(
            org(mapped(Some(roles)), own).await,
            named("o", MemberRole::Owner, None)
        );
        let roles = [("boss".to_owned(), "owner".to_owned())]
            .into_iter()
            .collect();
        let admin = json!({"org_id": "o", "org_role": "admin"});
        assert_eq!(
            org(mapped(Some(roles)), admin).await,
            named("o", MemberRole::Member, None)
        );
        // Settings that would do nothing, or cannot be read, stop the start.
        assert!(org_claims(None, Some("org_role".into()), None, None).is_err());
        let wrong = [("x".to_owned(), "boss".to_owned())].into_iter().collect();
        assert!(org_claims(Some("org_id".into()), None, None, Some(wrong)).is_err());
        assert!(org_claims(Some("a..b".into()), None, None, None).is_err());
    }

    async fn jwks_server(first: &str, then: Option<&str>) -> MockServer {
        let server = MockServer::start().await;
        let body = |name: &str| std::fs::read_to_string(fixture(name)).unwrap();
        let first = Mock::given(method("GET"))
            .and(path("/.well-known/jwks.json"))
            .respond_with(ResponseTemplate::new(200).set_body_string(body(first)));
        match then {
            Some(then) => {
                first.up_to_n_times(1).mount(&server).await;
                Mock::given(method("GET"))
                    .and(path("/.well-known/jwks.json"))
                    .respond_with(ResponseTemplate::new(200).set_body_string(body(then)))
                    .mount(&server)
                    .await;
            }
            None => first.mount(&server).await,
        }
        server
    }

    fn url_verifier(server: &MockServer) -> HostJwtVerifier {
        verifier(HostJwtKey::JwksUrl(format!(
            "{}/.well-known/jwks.json",
            server.uri()
        )))
    }

    async fn fetches(server: &MockServer) -> usize {
        server.received_requests().await.unwrap().len()
    }

    #[tokio::test]
    async fn a_jwks_url_is_fetched_once_and_cached() {
        let server = jwks_server("jwks.json", None).await;
        let v = url_verifier(&server);
        assert_eq!(
            subject(&v, &rs256(&claims(), Some("rsa-1"))).await,
            user("host-user-1")
        );
        assert_eq!(
            subject(&v, &es256(&claims(), Some("ec-1"))).await,
            user("host-user-1")
        );
        assert_eq!(subject(&v, &hs256(&claims())).await, None);
        assert_eq!(fetches(&server).await, 1);
    }

    #[tokio::test]
    async fn an_unknown_key_id_refreshes_the_jwks_at_most_once_per_30_seconds() {
        let server = jwks_server("jwks.json", Some("jwks-rotated.json")).await;
        let v = url_verifier(&server);
        let rotated = private("rsa-other-private.pem", Algorithm::RS256);
        let new_key = sign(&claims(), Algorithm::RS256, &rotated, Some("rsa-2"));
        let at = |seconds: i64| Timestamp::from_unix_millis((NOW_S + seconds) * 1000);
        let found = |token: String, seconds: i64| {
            let v = &v;
            async move { v.verify(&token, at(seconds)).await.is_some() }
        };
        assert!(found(rs256(&claims(), Some("rsa-1")), 0).await);
        assert!(!found(new_key.clone(), 1).await, "too soon to fetch again");
        assert_eq!(fetches(&server).await, 1);
        assert!(found(new_key.clone(), 31).await, "fetched again");
        assert_eq!(fetches(&server).await, 2);
        for second in 32..40 {
            let random = rs256(&claims(), Some(&format!("random-{second}")));
            assert!(!found(random, second).await);
        }
        assert!(found(new_key, 40).await, "cached");
        assert_eq!(fetches(&server).await, 2, "random key ids do not fetch");
    }

    #[tokio::test]
    async fn a_jwks_url_that_fails_or_is_too_large_verifies_nothing() {
        // A valid JWKS, padded past the size limit: refused for its size alone.
        let jwks = std::fs::read_to_string(fixture("jwks.json")).unwrap();
        let padded = format!("{jwks}{}", " ".repeat(JWKS_MAX_BYTES));
        for response in [
            ResponseTemplate::new(200).set_body_string(padded),
            ResponseTemplate::new(500).set_body_string(jwks),
        ] {
            let server = MockServer::start().await;
            Mock::given(method("GET"))
                .respond_with(response)
                .mount(&server)
                .await;
            let v = url_verifier(&server);
            assert_eq!(subject(&v, &rs256(&claims(), Some("rsa-1"))).await, None);
            assert_eq!(fetches(&server).await, 1);
        }
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn resolved(
        toml_text: &str,
        pairs: &[(&str, &str)],
        environment: AppEnvironment,
    ) -> Result<Option<HostJwtSettings>, SettingsError> {
        let file: HostJwtFile = toml::from_str(toml_text).unwrap();
        resolve(file, &env(pairs), environment)
    }

    #[test]
    fn settings_take_one_key_source_and_guard_production() {
        let dev = AppEnvironment::Development;
        let prod = AppEnvironment::Production;
        assert!(resolved("", &[], dev).unwrap().is_none());
        let s = resolved("", &[("HOST_JWT_SECRET", "short")], dev)
            .unwrap()
            .unwrap();
        assert!(matches!(s.key, HostJwtKey::Secret(_)));
        assert!(
            !format!("{s:?}").contains("short"),
            "the secret stays out of Debug"
        );
        let from_file = "secret = \"${HOST_JWT_SECRET}\"\nissuer = \"https://idp.example\"\n";
        let s = resolved(from_file, &[("HOST_JWT_SECRET", SECRET)], prod)
            .unwrap()
            .unwrap();
        assert_eq!(s.issuer.as_deref(), Some("https://idp.example"));
        let cases = [
            (
                "",
                vec![("HOST_JWT_SECRET", "short")],
                prod,
                "HOST_JWT_SECRET",
            ),
            ("secret = \"short\"", vec![], prod, "hostJwt.secret"),
            ("secret = \"${NOPE}\"", vec![], dev, "hostJwt.secret"),
            (
                "jwksFile = \"a.json\"",
                vec![("HOST_JWT_SECRET", SECRET)],
                dev,
                "hostJwt.jwksFile",
            ),
            (
                "publicKeyFile = \"a.pem\"\njwksUrl = \"https://x\"",
                vec![],
                dev,
                "hostJwt.jwksUrl",
            ),
            (
                "jwksUrl = \"http://idp.example/jwks\"",
                vec![],
                prod,
                "hostJwt.jwksUrl",
            ),
            (
                "jwksUrl = \"ftp://idp.example/jwks\"",
                vec![],
                dev,
                "hostJwt.jwksUrl",
            ),
            (
                "secret = \"x\"\nadminClaim = \"role\"",
                vec![],
                dev,
                "hostJwt.adminClaim",
            ),
            (
                "secret = \"x\"\nissuer = \"\"",
                vec![],
                dev,
                "hostJwt.issuer",
            ),
            ("audience = \"tally\"", vec![], dev, "hostJwt"),
        ];
        for (text, pairs, environment, setting) in cases {
            let err = resolved(text, &pairs, environment).unwrap_err();
            assert_eq!(err.setting, setting, "{text}: {err}");
        }
        assert!(toml::from_str::<HostJwtFile>("algorithm = \"none\"").is_err());
    }
}
