//! Sign-up credits: given in the transaction that creates the user, at most once per identity
//! (`signup_grant_identities`, whose primary key outlives the account) and at most the
//! configured number per UTC day for every instance together (`signup_grant_days`, taken by
//! one conditional upsert: no read then write).

use application::ports::{GrantSource, SignupGrant, SignupGrantOutcome, UsageContext};
use application::sign_up::SignupIdentity;
use domain::{Timestamp, UserId};
use sea_orm::DatabaseTransaction;

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::sql;

/// The note of a sign-up grant's ledger entry.
const SIGNUP_NOTE: &str = "sign-up credits";
/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// Claim identity `$1` for user `$2` at `$3`; no row when it was claimed before.
const CLAIM_IDENTITY: &str = "INSERT INTO signup_grant_identities (identity, user_id, granted_at) \
                              VALUES ($1, $2, $3) ON CONFLICT (identity) DO NOTHING";
/// Count one grant on day `$1` if fewer than `$2` were given; no row when the cap is reached.
const TAKE_DAY: &str = "INSERT INTO signup_grant_days (day, granted, capped) VALUES ($1, 1, 0) \
                        ON CONFLICT (day) DO UPDATE SET granted = signup_grant_days.granted + 1 \
                        WHERE signup_grant_days.granted < $2";
/// Count one sign-up past day `$1`'s cap (its row exists: the cap was reached on it).
const COUNT_CAPPED: &str = "UPDATE signup_grant_days SET capped = capped + 1 WHERE day = $1";
/// Give identity `$1` back (its grant was refused by the cap in this same transaction).
const RELEASE_IDENTITY: &str = "DELETE FROM signup_grant_identities WHERE identity = $1";

/// Give `user`, created at `created_at` in `tx`, the sign-up grant if `identity` was never
/// given one and the UTC day's cap allows, and tell it to the host; the lot is keyed by the
/// user, so a second call for the same user grants nothing. The outcome is logged.
pub(crate) async fn give_signup_grant(
    tx: &DatabaseTransaction,
    user: &UserId,
    created_at: Timestamp,
    grant: SignupGrant,
    identity: Option<&SignupIdentity>,
    events: &crate::Enc,
) -> Result<SignupGrantOutcome, Fail> {
    let outcome = match identity {
        None => SignupGrantOutcome::NotEligible,
        Some(identity) => claim(tx, user, created_at, grant, identity).await?,
    };
    if outcome == SignupGrantOutcome::Granted {
        write_grant(tx, user, created_at, grant, events).await?;
    }
    match outcome {
        SignupGrantOutcome::DailyCapReached => tracing::warn!(
            user = %user,
            "sign-up credits not given: the day's cap on sign-up grants is reached"
        ),
        other => tracing::info!(user = %user, outcome = ?other, "sign-up credits"),
    }
    Ok(outcome)
}

/// Claim `identity` and take a place in the day's cap, both or neither.
async fn claim(
    tx: &DatabaseTransaction,
    user: &UserId,
    created_at: Timestamp,
    grant: SignupGrant,
    identity: &SignupIdentity,
) -> Result<SignupGrantOutcome, Fail> {
    let values = vec![
        identity.as_str().into(),
        user.as_str().into(),
        created_at.unix_millis().into(),
    ];
    if sql::execute(tx, CLAIM_IDENTITY, values).await? == 0 {
        return Ok(SignupGrantOutcome::AlreadyGranted);
    }
    let day = created_at.unix_millis().div_euclid(DAY_MS);
    let cap = i64::from(grant.daily_cap.get());
    if sql::execute(tx, TAKE_DAY, vec![day.into(), cap.into()]).await? == 1 {
        return Ok(SignupGrantOutcome::Granted);
    }
    sql::execute(tx, COUNT_CAPPED, vec![day.into()]).await?;
    sql::execute(tx, RELEASE_IDENTITY, vec![identity.as_str().into()]).await?;
    Ok(SignupGrantOutcome::DailyCapReached)
}

/// The grant's ledger entry and lot (an `admin_adjustment` noted [`SIGNUP_NOTE`]).
async fn write_grant(
    tx: &DatabaseTransaction,
    user: &UserId,
    created_at: Timestamp,
    grant: SignupGrant,
    events: &crate::Enc,
) -> Result<(), Fail> {
    let source = GrantSource::Admin(format!("signup:{user}"));
    let context = UsageContext {
        note: Some(SIGNUP_NOTE.to_owned()),
        ..UsageContext::default()
    };
    let expires_at = grant.expires_after_days.map(|days| {
        Timestamp::from_unix_millis(created_at.unix_millis() + i64::from(days) * DAY_MS)
    });
    let mut told = crate::outbox::Outbox::default();
    let account = domain::AccountId::personal(user);
    crate::ledger::grant(
        tx,
        &crate::ledger::NewGrant {
            user: &account,
            amount: grant.amount,
            source: &source,
            expires_at,
            now: created_at,
            context: Some(&context),
            key: None,
            grant: (
                domain::GrantCategory::Promotional,
                domain::GrantPriority::default(),
            ),
        },
        &mut told,
    )
    .await?;
    Ok(told.write(tx, events).await?)
}

impl SeaOrmStore {
    /// Give users created from now on `grant` in the transaction that creates them, by the
    /// rule of [`SignupGrant`]; `None` gives nothing.
    #[must_use]
    pub fn with_signup_grant(mut self, grant: Option<SignupGrant>) -> Self {
        self.signup = grant;
        self
    }

    /// The sign-up grant, if one is configured.
    pub(crate) fn signup_grant(&self) -> Option<SignupGrant> {
        self.signup
    }
}
