//! Customer-portal links and the sessions they open (`portal_sessions`): one row per link,
//! stored by its token's digest; opening it writes the session's digest into the same row with
//! one conditional `UPDATE`, so a link opens once.

use application::accounts::{PortalSession, TokenHash};
use application::ports::{NewPortalLink, StoreError};
use domain::{AccountId, ReturnUrl, Timestamp};
use sea_orm::FromQueryResult;

use crate::SeaOrmStore;
use crate::rows::{UserRow, corrupt};

/// A portal session with its user's columns.
#[derive(Debug, FromQueryResult)]
struct PortalRow {
    id: String,
    email: String,
    password_hash: Option<String>,
    role: String,
    created_at: i64,
    return_url: String,
    locale: Option<String>,
    session_expires_at: i64,
    account_id: Option<String>,
}

impl PortalRow {
    fn into_domain(self) -> Result<PortalSession, StoreError> {
        let return_url = ReturnUrl::parse(&self.return_url)
            .map_err(|e| corrupt("portal_sessions", &self.id, e))?;
        let (user, _) = UserRow::from_parts(
            self.id,
            self.email,
            self.password_hash,
            self.role,
            self.created_at,
        )
        .into_domain()?;
        let account = match self.account_id {
            Some(raw) => {
                AccountId::new(raw).map_err(|e| corrupt("portal_sessions", user.id.as_str(), e))?
            }
            None => AccountId::personal(&user.id),
        };
        Ok(PortalSession {
            account,
            user,
            return_url,
            locale: self.locale,
            expires_at: Timestamp::from_unix_millis(self.session_expires_at),
        })
    }
}

/// The session whose digest is `$1`, unexpired at `$2`.
const FIND_SESSION: &str = "SELECT u.id, u.email, u.password_hash, u.role, u.created_at, \
    p.return_url, p.locale, p.session_expires_at, p.account_id \
    FROM portal_sessions p JOIN users u ON u.id = p.user_id \
    WHERE p.session_hash = $1 AND p.session_expires_at > $2";

impl SeaOrmStore {
    pub(crate) async fn insert_portal_link(&self, link: &NewPortalLink) -> Result<(), StoreError> {
        let sql = "INSERT INTO portal_sessions (link_hash, user_id, return_url, locale, \
            created_by, created_at, link_expires_at, account_id) \
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
        let values = vec![
            link.link.0.as_str().into(),
            link.user_id.as_str().into(),
            link.return_url.as_str().into(),
            link.locale.clone().into(),
            link.created_by.as_str().into(),
            link.created_at.unix_millis().into(),
            link.expires_at.unix_millis().into(),
            link.account_id
                .as_ref()
                .map(|a| a.as_str().to_owned())
                .into(),
        ];
        self.run_execute("create_portal_link", sql, values)
            .await
            .map(drop)
    }

    pub(crate) async fn open_link(
        &self,
        link: &TokenHash,
        session: &TokenHash,
        now: Timestamp,
        session_expires_at: Timestamp,
    ) -> Result<Option<PortalSession>, StoreError> {
        let sql = "UPDATE portal_sessions SET session_hash = $2, opened_at = $3, \
            session_expires_at = $4 \
            WHERE link_hash = $1 AND opened_at IS NULL AND link_expires_at > $3";
        let values = vec![
            link.0.as_str().into(),
            session.0.as_str().into(),
            now.unix_millis().into(),
            session_expires_at.unix_millis().into(),
        ];
        if self.run_execute("open_portal_link", sql, values).await? == 0 {
            return Ok(None);
        }
        self.find_portal(session, now).await
    }

    pub(crate) async fn find_portal(
        &self,
        session: &TokenHash,
        now: Timestamp,
    ) -> Result<Option<PortalSession>, StoreError> {
        let values = vec![session.0.as_str().into(), now.unix_millis().into()];
        let row: Option<PortalRow> = self
            .fetch_one("find_portal_session", FIND_SESSION, values)
            .await?;
        row.map(PortalRow::into_domain).transpose()
    }
}
