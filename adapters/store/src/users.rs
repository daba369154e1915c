//! Users, sign-in sessions and service API keys.

use application::accounts::{
    ApiKey, BuyerContact, Email, PasswordHash, PortalSession, Role, TokenHash, User,
};
use application::ports::{
    ApiKeyRepository, HOST_USER_ID_PREFIX, NewHostUser, NewPortalLink, NewUser, SignupGrant,
    StoreError, UserRepository,
};
use async_trait::async_trait;
use domain::{AccountId, Timestamp, UserId};
use sea_orm::DatabaseTransaction;

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::rows::{API_KEY_COLUMNS, ApiKeyRow, HostUserRow, USER_COLUMNS, UserRow, scopes_value};
use crate::sql::{self, End};

/// The id of the user created for a host identity: [`HOST_USER_ID_PREFIX`] and 26 hex digits
/// (104 bits) of SHA-256(issuer || 0x00 || subject). Password accounts are `usr_…`, so the two
/// never meet; instances racing on a first request compute the same id.
fn host_user_id(issuer: &str, subject: &str) -> Result<UserId, StoreError> {
    let hex = application::ports::derived_id_digits(&[issuer, subject]);
    UserId::new(format!("{HOST_USER_ID_PREFIX}{hex}")).map_err(|e| StoreError::Unexpected(e.into()))
}

/// The user a host identity ($1 issuer, $2 subject) maps to, read through the mapping.
const MAPPED_USER: &str = "SELECT u.id, u.email, u.password_hash, u.role, u.created_at \
                           FROM host_identities h JOIN users u ON u.id = h.user_id \
                           WHERE h.issuer = $1 AND h.subject = $2";

/// [`MAPPED_USER`] with the identity's stored contact details.
const MAPPED_HOST_USER: &str = "SELECT u.id, u.email, u.password_hash, u.role, u.created_at, \
                                h.email AS contact_email, h.name AS contact_name \
                                FROM host_identities h JOIN users u ON u.id = h.user_id \
                                WHERE h.issuer = $1 AND h.subject = $2";

/// Keep what a host token says now about its user ($1 issuer, $2 subject; $3 e-mail, $4 name):
/// a detail the token does not carry (NULL) keeps its stored value.
const UPDATE_CONTACT: &str = "UPDATE host_identities \
                              SET email = COALESCE($3, email), name = COALESCE($4, name) \
                              WHERE issuer = $1 AND subject = $2";

/// The values of [`UPDATE_CONTACT`] and of the mapping's insert: issuer, subject, then the
/// contact's e-mail and name.
fn contact_values(user: &NewHostUser) -> [sea_orm::Value; 2] {
    [
        user.contact.email().map(|e| e.as_str().to_owned()).into(),
        user.contact
            .name
            .as_ref()
            .map(|n| n.as_str().to_owned())
            .into(),
    ]
}

/// Whether the token says something about its user that differs from what is stored.
fn contact_changed(stored: &BuyerContact, now: &BuyerContact) -> bool {
    (now.email().is_some() && now.email() != stored.email())
        || (now.name.is_some() && now.name != stored.name)
}

/// The user `user`'s identity maps to, creating it and the mapping when there is none; it must
/// be a password-less user (never a password account).
async fn host_user(
    tx: &DatabaseTransaction,
    user: &NewHostUser,
    (signup, ceiling): (Option<SignupGrant>, Option<domain::Credits>),
    events: &crate::Enc,
) -> Result<End<User>, Fail> {
    let found = match mapped_user(tx, user).await? {
        Some(found) => Some(found),
        None => {
            create_host_user(tx, user, (signup, ceiling), events).await?;
            mapped_user(tx, user).await?
        }
    };
    match found {
        Some((found, None)) => Ok(End::Commit(found)),
        Some((_, Some(_))) => Err(Fail::Store(StoreError::Conflict(
            "host identity maps to a password account".into(),
        ))),
        None => Err(Fail::Store(StoreError::Conflict(
            "host identity could not be mapped".into(),
        ))),
    }
}

/// The user an identity maps to, read through the mapping, with its password hash.
async fn mapped_user(
    tx: &DatabaseTransaction,
    user: &NewHostUser,
) -> Result<Option<(User, Option<PasswordHash>)>, Fail> {
    let values = vec![user.issuer.as_str().into(), user.subject.as_str().into()];
    let row: Option<UserRow> = sql::one(tx, MAPPED_USER, values).await?;
    Ok(row.map(UserRow::into_domain).transpose()?)
}

/// Insert the identity's user and mapping, each unless it exists: an instance racing on the
/// same first request computes the same id, and whichever commits first wins for both.
async fn create_host_user(
    tx: &DatabaseTransaction,
    user: &NewHostUser,
    (signup, ceiling): (Option<SignupGrant>, Option<domain::Credits>),
    events: &crate::Enc,
) -> Result<(), Fail> {
    let id = host_user_id(&user.issuer, &user.subject)?;
    let now = user.created_at.unix_millis();
    // A taken id is the same identity created by another instance (or, at odds of 2^-104, a
    // collision, which the caller's check refuses); a taken placeholder address is a conflict.
    let sql = "INSERT INTO users (id, email, password_hash, role, created_at) \
               VALUES ($1, $2, NULL, 'user', $3) ON CONFLICT (id) DO NOTHING";
    let values = vec![
        id.as_str().into(),
        format!("{id}@host.invalid").into(),
        now.into(),
    ];
    // Only the instance whose insert made the user opens their account and gives the sign-up
    // credits (the lot is keyed by the user as well).
    let made = sql::execute(tx, sql, values).await? == 1;
    if made {
        crate::accounts::open_personal(tx, &id, user.created_at, ceiling).await?;
    }
    if made && let Some(grant) = signup {
        crate::signup::give_signup_grant(
            tx,
            &id,
            user.created_at,
            grant,
            user.signup_identity.as_ref(),
            events,
        )
        .await?;
    }
    let sql = "INSERT INTO host_identities (issuer, subject, user_id, created_at, email, name) \
               VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING";
    let mut values = vec![
        user.issuer.as_str().into(),
        user.subject.as_str().into(),
        id.as_str().into(),
        now.into(),
    ];
    values.extend(contact_values(user));
    sql::execute(tx, sql, values).await?;
    Ok(())
}

/// A user's own address and, for a host user, its identity's contact details.
#[derive(Debug, sea_orm::FromQueryResult)]
struct ContactRow {
    account_email: String,
    email: Option<String>,
    name: Option<String>,
}

fn user_by(column: &str) -> String {
    format!("SELECT {USER_COLUMNS} FROM users WHERE {column} = $1")
}

#[async_trait]
impl UserRepository for SeaOrmStore {
    async fn create_user(&self, user: &NewUser) -> Result<User, StoreError> {
        let sql = "INSERT INTO users (id, email, password_hash, role, created_at) \
                   VALUES ($1, $2, $3, $4, $5)";
        let hash = user.password_hash.as_ref().map(|h| h.0.clone());
        let values = vec![
            user.id.as_str().into(),
            user.email.as_str().into(),
            hash.into(),
            user.role.code().into(),
            user.created_at.unix_millis().into(),
        ];
        let (grant, ceiling) = (self.signup_grant(), self.new_account_ceiling());
        // The user, their personal account and their sign-up credits commit together.
        self.retry
            .run("create_user", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = async {
                    sql::execute(&tx, sql, values.clone()).await?;
                    crate::accounts::open_personal(&tx, &user.id, user.created_at, ceiling).await?;
                    if let Some(grant) = grant {
                        crate::signup::give_signup_grant(
                            &tx,
                            &user.id,
                            user.created_at,
                            grant,
                            user.signup_identity.as_ref(),
                            &*self.events,
                        )
                        .await?;
                    }
                    Ok(End::Commit(()))
                }
                .await;
                sql::finish(tx, body).await
            })
            .await?;
        Ok(User {
            id: user.id.clone(),
            email: user.email.clone(),
            role: user.role,
            created_at: user.created_at,
        })
    }

    async fn find_user_by_email(
        &self,
        email: &Email,
    ) -> Result<Option<(User, Option<PasswordHash>)>, StoreError> {
        let row: Option<UserRow> = self
            .fetch_one(
                "find_user_by_email",
                &user_by("email"),
                vec![email.as_str().into()],
            )
            .await?;
        row.map(UserRow::into_domain).transpose()
    }

    async fn find_user(&self, id: &UserId) -> Result<Option<User>, StoreError> {
        let row: Option<UserRow> = self
            .fetch_one("find_user", &user_by("id"), vec![id.as_str().into()])
            .await?;
        Ok(row
            .map(UserRow::into_domain)
            .transpose()?
            .map(|(user, _)| user))
    }

    async fn find_or_create_host_user(&self, user: &NewHostUser) -> Result<User, StoreError> {
        // Every request with a host token comes here: a known identity costs one read, not a
        // write transaction (which on SQLite takes the database's write lock).
        let values = vec![user.issuer.as_str().into(), user.subject.as_str().into()];
        let known: Option<HostUserRow> = self
            .fetch_one("find_host_user", MAPPED_HOST_USER, values.clone())
            .await?;
        if let Some((found, None, stored)) = known.map(HostUserRow::into_domain).transpose()? {
            if contact_changed(&stored, &user.contact) {
                let mut values = values;
                values.extend(contact_values(user));
                self.run_execute("update_host_contact", UPDATE_CONTACT, values)
                    .await?;
            }
            return Ok(found);
        }
        self.retry
            .run("find_or_create_host_user", || async {
                let (_turn, tx) = self.begin_write().await?;
                let opening = (self.signup_grant(), self.new_account_ceiling());
                let body = host_user(&tx, user, opening, &*self.events).await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn find_buyer_contact(&self, id: &UserId) -> Result<BuyerContact, StoreError> {
        let sql = "SELECT u.email AS account_email, h.email, h.name \
                   FROM users u LEFT JOIN host_identities h ON h.user_id = u.id \
                   WHERE u.id = $1";
        let row: Option<ContactRow> = self
            .fetch_one("find_buyer_contact", sql, vec![id.as_str().into()])
            .await?;
        let row = row.ok_or(StoreError::NotFound)?;
        let own = crate::rows::contact("users", id.as_str(), Some(row.account_email), None)?;
        Ok(crate::rows::contact("host_identities", id.as_str(), row.email, row.name)?.or(own))
    }

    async fn set_role(&self, id: &UserId, role: Role) -> Result<(), StoreError> {
        let sql = "UPDATE users SET role = $2 WHERE id = $1";
        match self
            .run_execute(
                "set_role",
                sql,
                vec![id.as_str().into(), role.code().into()],
            )
            .await?
        {
            0 => Err(StoreError::NotFound),
            _ => Ok(()),
        }
    }

    async fn create_session(
        &self,
        token: &TokenHash,
        user: &UserId,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        let sql = "INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)";
        let values = vec![
            token.0.as_str().into(),
            user.as_str().into(),
            now.unix_millis().into(),
            expires_at.unix_millis().into(),
        ];
        self.run_execute("create_session", sql, values)
            .await
            .map(drop)
    }

    async fn find_session_user(
        &self,
        token: &TokenHash,
        now: Timestamp,
    ) -> Result<Option<User>, StoreError> {
        let sql = "SELECT u.id, u.email, u.password_hash, u.role, u.created_at \
                   FROM sessions s JOIN users u ON u.id = s.user_id \
                   WHERE s.token_hash = $1 AND s.expires_at > $2";
        let values = vec![token.0.as_str().into(), now.unix_millis().into()];
        let row: Option<UserRow> = self.fetch_one("find_session_user", sql, values).await?;
        Ok(row
            .map(UserRow::into_domain)
            .transpose()?
            .map(|(user, _)| user))
    }

    async fn delete_session(&self, token: &TokenHash) -> Result<(), StoreError> {
        let sql = "DELETE FROM sessions WHERE token_hash = $1";
        self.run_execute("delete_session", sql, vec![token.0.as_str().into()])
            .await
            .map(drop)
    }

    async fn create_portal_link(&self, link: &NewPortalLink) -> Result<(), StoreError> {
        self.insert_portal_link(link).await
    }

    async fn open_portal_link(
        &self,
        link: &TokenHash,
        session: &TokenHash,
        now: Timestamp,
        session_expires_at: Timestamp,
    ) -> Result<Option<PortalSession>, StoreError> {
        self.open_link(link, session, now, session_expires_at).await
    }

    async fn find_portal_session(
        &self,
        session: &TokenHash,
        now: Timestamp,
    ) -> Result<Option<PortalSession>, StoreError> {
        self.find_portal(session, now).await
    }
}

/// Store an API key: [`api_key_values`].
pub(crate) const INSERT_API_KEY: &str = "INSERT INTO api_keys (id, owner_id, name, prefix, \
    key_hash, scopes, created_at, revoked_at, account_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, \
    $9)";

/// Revoke key `$1` at `$2`; the first revocation's time is kept.
pub(crate) const REVOKE_API_KEY: &str =
    "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1";

/// The values of [`INSERT_API_KEY`].
pub(crate) fn api_key_values(key: &ApiKey, hash: &TokenHash) -> Vec<sea_orm::Value> {
    vec![
        key.id.as_str().into(),
        key.owner.as_str().into(),
        key.name.as_str().into(),
        key.prefix.as_str().into(),
        hash.0.as_str().into(),
        scopes_value(&key.scopes).into(),
        key.created_at.unix_millis().into(),
        key.revoked_at.map(Timestamp::unix_millis).into(),
        key.account.as_ref().map(AccountId::as_str).into(),
    ]
}

#[async_trait]
impl ApiKeyRepository for SeaOrmStore {
    async fn create_api_key(&self, key: &ApiKey, hash: &TokenHash) -> Result<(), StoreError> {
        self.run_execute("create_api_key", INSERT_API_KEY, api_key_values(key, hash))
            .await
            .map(drop)
    }

    async fn find_api_key(&self, hash: &TokenHash) -> Result<Option<ApiKey>, StoreError> {
        if let Some(key) = self.keys.get(&hash.0) {
            return Ok(Some(key));
        }
        let sql = format!(
            "SELECT {API_KEY_COLUMNS} FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL"
        );
        let row: Option<ApiKeyRow> = self
            .fetch_one("find_api_key", &sql, vec![hash.0.as_str().into()])
            .await?;
        let key = row.map(ApiKeyRow::into_domain).transpose()?;
        if let Some(key) = &key {
            self.keys.put(&hash.0, key);
        }
        Ok(key)
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        let sql =
            format!("SELECT {API_KEY_COLUMNS} FROM api_keys ORDER BY created_at DESC, id DESC");
        let rows: Vec<ApiKeyRow> = self.fetch_all("list_api_keys", &sql, Vec::new()).await?;
        rows.into_iter().map(ApiKeyRow::into_domain).collect()
    }

    async fn revoke_api_key(&self, id: &str, now: Timestamp) -> Result<(), StoreError> {
        let revoked = self
            .run_execute(
                "revoke_api_key",
                REVOKE_API_KEY,
                vec![id.into(), now.unix_millis().into()],
            )
            .await;
        // Forget cached keys whatever the outcome: a failed revocation may still have committed.
        self.keys.clear();
        match revoked? {
            0 => Err(StoreError::NotFound),
            _ => Ok(()),
        }
    }
}
