//! Who may do what: the decisions every use case applies to the [`Principal`] an adapter
//! authenticated. The adapters only say which permission an action needs and turn a
//! [`Denied`] into their own answer; the policy lives here, once.

use domain::{AccountId, OrderId, SubscriptionId, UserId};

use crate::accounts::{ApiKey, Role, Scope, User};
use crate::ports::{Clock, IdGenerator, SecretHasher, Store};
use crate::service::Service;
use crate::use_cases::InfraError;
use crate::use_cases::sessions::Principal;

/// What an action needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// A signed-in user acting on their own account (not an API key, not a portal session).
    OwnAccount,
    /// A signed-in user, or a customer-portal session, acting on that user's own billing:
    /// payments, orders, subscriptions, credits and entitlements read.
    OwnBilling,
    /// A signed-in administrator.
    Administer,
    /// A service API key carrying the scope.
    Service(Scope),
    /// Reading the host events feed: administrators, and API keys with `events:read`.
    ReadEvents,
}

/// Why a principal may not do what it asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// An API key where a signed-in user is needed.
    #[error("signed-in users only, not API keys")]
    UsersOnly,
    /// A customer-portal session asking for anything but its user's billing.
    #[error("a customer-portal session may act only on its user's billing")]
    PortalBillingOnly,
    /// A user who is not an administrator.
    #[error("administrators only")]
    AdministratorsOnly,
    /// A user, or a key without the scope, where a key with the scope is needed.
    #[error("an API key with scope {} is needed", .0.code())]
    MissingScope(Scope),
    /// Neither an administrator nor a key with `events:read`.
    #[error("administrators and API keys with scope events:read only")]
    EventsReadersOnly,
    /// A user asking about, or acting on, another user's data (what the scope guards).
    #[error("users may read and act on only their own data")]
    OthersData(Scope),
    /// An API key that did not name the user it asks about.
    #[error("an API key must name the user")]
    NoUserNamed,
    /// The user a key named does not exist.
    #[error("no such user")]
    UserNotFound,
    /// A key bound to an account, asked about another account or an app-wide call.
    #[error("this API key acts only for account {0}")]
    KeyBoundTo(AccountId),
}

/// Whether `principal` has `permission`.
///
/// # Errors
/// [`Denied`] naming what is missing.
pub fn authorize(principal: &Principal, permission: Permission) -> Result<(), Denied> {
    let admin = matches!(principal, Principal::User(user) if user.role == Role::Admin);
    match (permission, principal) {
        (Permission::OwnAccount | Permission::OwnBilling, Principal::User(_))
        | (Permission::OwnBilling, Principal::Portal(_)) => Ok(()),
        (
            Permission::OwnAccount | Permission::OwnBilling | Permission::Administer,
            Principal::Service(_),
        ) => Err(Denied::UsersOnly),
        // A portal session is the billing of one user: nothing of the account, no console, no
        // key's scope, no events feed, whatever the user's own role.
        (_, Principal::Portal(_)) => Err(Denied::PortalBillingOnly),
        (Permission::Administer, _) if admin => Ok(()),
        (Permission::Administer, _) => Err(Denied::AdministratorsOnly),
        (Permission::Service(scope), _) if principal.has_scope(scope) => Ok(()),
        (Permission::Service(scope), _) => Err(Denied::MissingScope(scope)),
        (Permission::ReadEvents, Principal::Service(key)) if key.account.is_some() => {
            Err(Denied::EventsReadersOnly)
        }
        (Permission::ReadEvents, _) if admin || principal.has_scope(Scope::EventsRead) => Ok(()),
        (Permission::ReadEvents, _) => Err(Denied::EventsReadersOnly),
    }
}

/// The signed-in user behind `principal`.
///
/// # Errors
/// [`Denied::UsersOnly`] for an API key.
pub fn signed_in_user(principal: Principal) -> Result<User, Denied> {
    authorize(&principal, Permission::OwnAccount)?;
    match principal {
        Principal::User(user) => Ok(user),
        Principal::Portal(_) => Err(Denied::PortalBillingOnly),
        Principal::Service(_) => Err(Denied::UsersOnly),
    }
}

/// The user whose billing `principal` acts on: a signed-in user's own, or a portal session's.
///
/// # Errors
/// [`Denied::UsersOnly`] for an API key.
pub fn billing_user(principal: Principal) -> Result<User, Denied> {
    authorize(&principal, Permission::OwnBilling)?;
    match principal {
        Principal::User(user) => Ok(user),
        Principal::Portal(portal) => Ok(portal.user),
        Principal::Service(_) => Err(Denied::UsersOnly),
    }
}

/// The administrator behind `principal`.
///
/// # Errors
/// [`Denied::UsersOnly`] for an API key, [`Denied::AdministratorsOnly`] for another user.
pub fn administrator(principal: Principal) -> Result<User, Denied> {
    authorize(&principal, Permission::Administer)?;
    signed_in_user(principal)
}

/// The API key behind `principal`, when it carries `scope`, for a call about the whole app
/// (a key bound to an account is refused: see [`account_key`] for calls about one account).
///
/// # Errors
/// [`Denied::MissingScope`] for a user or a key without it; [`Denied::KeyBoundTo`].
pub fn service_key(principal: Principal, scope: Scope) -> Result<ApiKey, Denied> {
    let key = account_key(principal, scope)?;
    match key.account {
        Some(bound) => Err(Denied::KeyBoundTo(bound)),
        None => Ok(key),
    }
}

/// The API key behind `principal`, when it carries `scope`, for a call about one account (a
/// spend or a reservation): the caller then settles the account with [`key_account`].
///
/// # Errors
/// [`Denied::MissingScope`] for a user or a key without it.
pub fn account_key(principal: Principal, scope: Scope) -> Result<ApiKey, Denied> {
    authorize(&principal, Permission::Service(scope))?;
    match principal {
        Principal::Service(key) => Ok(key),
        Principal::User(_) | Principal::Portal(_) => Err(Denied::MissingScope(scope)),
    }
}

/// The account a call by `key` is about when the request names `named` (or none): a bound
/// key's own account (naming another is refused); for an unbound key, what the request named.
///
/// # Errors
/// [`Denied::KeyBoundTo`].
pub fn key_account(key: &ApiKey, named: Option<AccountId>) -> Result<Option<AccountId>, Denied> {
    match (&key.account, named) {
        (None, named) => Ok(named),
        (Some(bound), Some(named)) if &named != bound => Err(Denied::KeyBoundTo(bound.clone())),
        (Some(bound), _) => Ok(Some(bound.clone())),
    }
}

/// Why the owner of a read could not be settled.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    /// Not allowed, or the named user does not exist.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// Who acts on a user's data: the user themself, or the app's backend with an API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// The user's own credential (a session or a host token).
    TheUser,
    /// A service API key naming the user (the host application's backend acting for them).
    ServiceKey,
}

/// Which accounts a request may read and act on. Within them, the user's role in each
/// account decides (the use cases check it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Every account the user belongs to: the user's own credential, or an unbound API key.
    Memberships,
    /// The one account a customer-portal session was opened for: the user's personal account,
    /// or a team the host asked for.
    Portal(AccountId),
    /// One account alone: an API key bound to it.
    Key(AccountId),
}

/// A user whose data a request is about, who acts on it, and which accounts it may reach.
#[derive(Debug, Clone)]
pub struct Acting {
    /// The user.
    pub user: User,
    /// Who acts.
    pub actor: Actor,
    /// Which accounts.
    pub reach: Reach,
}

/// An object a request acts on by its id, whose account must be within the request's reach.
#[derive(Debug, Clone, Copy)]
pub enum Owned<'a> {
    /// A subscription.
    Subscription(&'a SubscriptionId),
    /// An order.
    Order(&'a OrderId),
}

impl Acting {
    /// The user's own credential acting on every account they belong to.
    #[must_use]
    pub fn user(user: User) -> Self {
        Acting {
            user,
            actor: Actor::TheUser,
            reach: Reach::Memberships,
        }
    }

    /// A customer-portal session of `user` opened for `account` (their personal account, or a
    /// team): their own credential on that account alone.
    #[must_use]
    pub fn portal(user: User, account: AccountId) -> Self {
        Acting {
            reach: Reach::Portal(account),
            user,
            actor: Actor::TheUser,
        }
    }

    /// The account a request naming `named` (or none) is about: the named one when it is
    /// within reach; otherwise the personal account, or the one account a bound key or a
    /// portal session reaches. Whether the user belongs to it is the use case's to check.
    ///
    /// # Errors
    /// [`Denied::PortalBillingOnly`] or [`Denied::KeyBoundTo`] for an account out of reach.
    pub fn account(&self, named: Option<AccountId>) -> Result<AccountId, Denied> {
        match (&self.reach, named) {
            (_, Some(named)) => {
                self.reaches(&named)?;
                Ok(named)
            }
            (Reach::Memberships, None) => Ok(AccountId::personal(&self.user.id)),
            (Reach::Portal(only) | Reach::Key(only), None) => Ok(only.clone()),
        }
    }

    /// Whether the request may reach every account the user belongs to (a list of them, a new
    /// team): only with the user's own credential or an unbound key.
    ///
    /// # Errors
    /// [`Denied::PortalBillingOnly`] or [`Denied::KeyBoundTo`].
    pub fn reaches_every_account(&self) -> Result<(), Denied> {
        match &self.reach {
            Reach::Memberships => Ok(()),
            Reach::Portal(_) => Err(Denied::PortalBillingOnly),
            Reach::Key(only) => Err(Denied::KeyBoundTo(only.clone())),
        }
    }

    /// Whether `account` is within reach.
    ///
    /// # Errors
    /// [`Denied::PortalBillingOnly`] or [`Denied::KeyBoundTo`].
    pub fn reaches(&self, account: &AccountId) -> Result<(), Denied> {
        match &self.reach {
            Reach::Memberships => Ok(()),
            Reach::Portal(only) | Reach::Key(only) if only == account => Ok(()),
            Reach::Portal(_) => Err(Denied::PortalBillingOnly),
            Reach::Key(only) => Err(Denied::KeyBoundTo(only.clone())),
        }
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Whether `owned`'s account is within `acting`'s reach. An unknown object passes (the use
    /// case answers not found).
    ///
    /// # Errors
    /// [`Denied::PortalBillingOnly`], [`Denied::KeyBoundTo`]; infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %acting.user.id))]
    pub async fn within_reach(&self, acting: &Acting, owned: Owned<'_>) -> Result<(), OwnerError> {
        if acting.reach == Reach::Memberships {
            return Ok(());
        }
        let account = match owned {
            Owned::Subscription(id) => self
                .store
                .find_subscription(id)
                .await
                .map_err(InfraError::from)?
                .map(|s| s.account_id().clone()),
            Owned::Order(id) => self
                .store
                .find_order(id)
                .await
                .map_err(InfraError::from)?
                .map(|r| r.order.account_id().clone()),
        };
        if let Some(account) = account {
            acting.reaches(&account)?;
        }
        Ok(())
    }

    /// Whom an action guarded by `scope` is for, and who acts: a signed-in user acts for
    /// themself (naming another user is refused, naming themself is allowed); an API key with
    /// `scope` (`billing:write` also allows `billing:read`) acts for the user it names, who
    /// must exist. This is the one policy for reads (credits, entitlements, orders) and for
    /// the billing actions an app's backend takes for its users (buy, cancel, resume, switch).
    ///
    /// # Errors
    /// [`Denied::OthersData`], [`Denied::MissingScope`], [`Denied::NoUserNamed`],
    /// [`Denied::UserNotFound`]; infrastructure.
    #[tracing::instrument(skip_all, fields(scope = ?scope, named_user = named))]
    pub async fn acting_for(
        &self,
        principal: Principal,
        scope: Scope,
        named: Option<&str>,
    ) -> Result<Acting, OwnerError> {
        let own = |acting: Acting| match named {
            Some(other) if other != acting.user.id.as_str() => {
                Err(Denied::OthersData(scope).into())
            }
            _ => Ok(acting),
        };
        match principal {
            Principal::User(user) => own(Acting::user(user)),
            // A portal session is its user's billing in the account it was opened for, and
            // nothing else.
            Principal::Portal(portal) => {
                let account = portal.account.clone();
                own(Acting::portal(
                    billing_user(Principal::Portal(portal))?,
                    account,
                ))
            }
            Principal::Service(key) => {
                let key = account_key(Principal::Service(key), scope)?;
                let raw = named.ok_or(Denied::NoUserNamed)?;
                let id = UserId::new(raw).map_err(|_| Denied::UserNotFound)?;
                let reach = match key.account {
                    // A bound key acts for its account's members alone (its user, for a
                    // personal account): anyone else, existing or not, is answered alike, so
                    // the key cannot tell which user ids exist.
                    Some(bound) => {
                        let member = (self.role_in(&id, &bound).await).map_err(InfraError::from)?;
                        if member.is_none() {
                            return Err(Denied::KeyBoundTo(bound).into());
                        }
                        Reach::Key(bound)
                    }
                    None => Reach::Memberships,
                };
                let user = self.store.find_user(&id).await.map_err(InfraError::from)?;
                Ok(Acting {
                    user: user.ok_or(Denied::UserNotFound)?,
                    actor: Actor::ServiceKey,
                    reach,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use domain::Timestamp;

    use super::*;
    use crate::accounts::{Email, PortalSession};

    fn user(role: Role) -> Principal {
        Principal::User(User {
            id: UserId::new("u_1").unwrap(),
            email: Email::parse("a@example.com").unwrap(),
            role,
            created_at: Timestamp::from_unix_millis(0),
        })
    }

    fn key(scopes: &[Scope]) -> Principal {
        Principal::Service(ApiKey {
            id: "k_1".into(),
            owner: UserId::new("u_admin").unwrap(),
            name: "backend".into(),
            prefix: "tly_abcd".into(),
            scopes: scopes.to_vec(),
            account: None,
            created_at: Timestamp::from_unix_millis(0),
            revoked_at: None,
        })
    }

    #[test]
    fn users_act_on_their_own_account_and_keys_do_not() {
        assert_eq!(authorize(&user(Role::User), Permission::OwnAccount), Ok(()));
        assert_eq!(
            signed_in_user(key(&Scope::ALL)).unwrap_err(),
            Denied::UsersOnly
        );
    }

    #[test]
    fn only_administrators_administer() {
        assert!(administrator(user(Role::Admin)).is_ok());
        assert_eq!(
            administrator(user(Role::User)).unwrap_err(),
            Denied::AdministratorsOnly
        );
        assert_eq!(
            administrator(key(&Scope::ALL)).unwrap_err(),
            Denied::UsersOnly
        );
    }

    #[test]
    fn service_calls_need_a_key_with_the_scope() {
        assert!(service_key(key(&[Scope::CreditsConsume]), Scope::CreditsConsume).is_ok());
        assert_eq!(
            service_key(key(&[Scope::CreditsRead]), Scope::CreditsConsume).unwrap_err(),
            Denied::MissingScope(Scope::CreditsConsume)
        );
        assert_eq!(
            service_key(user(Role::Admin), Scope::CreditsConsume).unwrap_err(),
            Denied::MissingScope(Scope::CreditsConsume)
        );
    }

    fn portal(role: Role) -> Principal {
        let Principal::User(user) = user(role) else {
            unreachable!()
        };
        Principal::Portal(PortalSession {
            account: AccountId::personal(&user.id),
            user,
            return_url: domain::ReturnUrl::parse("https://app.example.com/account").unwrap(),
            locale: None,
            expires_at: Timestamp::from_unix_millis(1),
        })
    }

    #[test]
    fn a_portal_session_reaches_its_users_billing_and_nothing_else() {
        for role in [Role::User, Role::Admin] {
            let p = portal(role);
            assert_eq!(billing_user(p.clone()).unwrap().id.as_str(), "u_1");
            assert_eq!(authorize(&p, Permission::OwnBilling), Ok(()));
            for refused in [
                Permission::OwnAccount,
                Permission::Administer,
                Permission::ReadEvents,
                Permission::Service(Scope::CreditsConsume),
                Permission::Service(Scope::BillingWrite),
            ] {
                assert_eq!(
                    authorize(&p, refused),
                    Err(Denied::PortalBillingOnly),
                    "{refused:?}"
                );
            }
            assert_eq!(
                signed_in_user(p.clone()).unwrap_err(),
                Denied::PortalBillingOnly
            );
            assert!(administrator(p.clone()).is_err());
            assert!(service_key(p, Scope::CreditsConsume).is_err());
        }
    }

    #[test]
    fn billing_is_for_users_and_portal_sessions_not_keys() {
        assert!(billing_user(user(Role::User)).is_ok());
        assert_eq!(
            billing_user(key(&Scope::ALL)).unwrap_err(),
            Denied::UsersOnly
        );
    }

    #[test]
    fn billing_write_also_allows_billing_reads_and_nothing_else() {
        let writer = key(&[Scope::BillingWrite]);
        assert!(writer.has_scope(Scope::BillingWrite));
        assert!(writer.has_scope(Scope::BillingRead));
        assert!(!writer.has_scope(Scope::CreditsRead));
        let reader = key(&[Scope::BillingRead]);
        assert!(reader.has_scope(Scope::BillingRead));
        assert_eq!(
            service_key(reader, Scope::BillingWrite).unwrap_err(),
            Denied::MissingScope(Scope::BillingWrite)
        );
        assert!(!user(Role::Admin).has_scope(Scope::BillingRead));
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.code()), Ok(scope));
        }
    }

    fn bound(account: &str) -> ApiKey {
        let Principal::Service(key) = key(&[Scope::CreditsConsume, Scope::EventsRead]) else {
            unreachable!()
        };
        ApiKey {
            account: Some(AccountId::new(account).unwrap()),
            ..key
        }
    }

    #[test]
    fn a_bound_key_reaches_its_account_alone_and_no_app_wide_call() {
        let team = AccountId::new("team_a").unwrap();
        let other = AccountId::new("team_b").unwrap();
        let key = bound("team_a");
        assert_eq!(key_account(&key, None), Ok(Some(team.clone())));
        assert_eq!(
            key_account(&key, Some(team.clone())),
            Ok(Some(team.clone()))
        );
        assert_eq!(
            key_account(&key, Some(other.clone())),
            Err(Denied::KeyBoundTo(team.clone()))
        );
        let Principal::Service(unbound) = self::key(&[Scope::CreditsConsume]) else {
            unreachable!()
        };
        assert_eq!(key_account(&unbound, Some(other.clone())), Ok(Some(other)));
        assert_eq!(key_account(&unbound, None), Ok(None));
        // App-wide calls: a host's call about any user, the events feed.
        let principal = Principal::Service(key);
        assert_eq!(
            service_key(principal.clone(), Scope::CreditsConsume).unwrap_err(),
            Denied::KeyBoundTo(team)
        );
        assert!(account_key(principal.clone(), Scope::CreditsConsume).is_ok());
        assert_eq!(
            authorize(&principal, Permission::ReadEvents),
            Err(Denied::EventsReadersOnly)
        );
    }

    #[test]
    fn a_request_names_accounts_within_its_reach() {
        let Principal::User(user) = user(Role::User) else {
            unreachable!()
        };
        let personal = AccountId::personal(&user.id);
        let team = AccountId::new("team_a").unwrap();
        let other = AccountId::new("team_b").unwrap();
        let acting = |reach| Acting {
            user: user.clone(),
            actor: Actor::TheUser,
            reach,
        };
        let own = acting(Reach::Memberships);
        assert_eq!(own.account(None), Ok(personal.clone()));
        assert_eq!(own.account(Some(other.clone())), Ok(other.clone()));
        assert_eq!(own.reaches_every_account(), Ok(()));
        let portal = acting(Reach::Portal(personal.clone()));
        assert_eq!(portal.account(None), Ok(personal.clone()));
        assert_eq!(
            portal.account(Some(team.clone())),
            Err(Denied::PortalBillingOnly)
        );
        assert_eq!(
            portal.reaches_every_account(),
            Err(Denied::PortalBillingOnly)
        );
        let key = acting(Reach::Key(team.clone()));
        assert_eq!(key.account(None), Ok(team.clone()));
        assert_eq!(key.account(Some(team.clone())), Ok(team.clone()));
        for out in [personal, other] {
            assert_eq!(
                key.account(Some(out)),
                Err(Denied::KeyBoundTo(team.clone()))
            );
        }
        assert_eq!(key.reaches_every_account(), Err(Denied::KeyBoundTo(team)));
    }

    #[test]
    fn the_events_feed_is_for_administrators_and_keys_with_events_read() {
        let read = |p: &Principal| authorize(p, Permission::ReadEvents);
        assert_eq!(read(&user(Role::Admin)), Ok(()));
        assert_eq!(read(&key(&[Scope::EventsRead])), Ok(()));
        assert_eq!(read(&user(Role::User)), Err(Denied::EventsReadersOnly));
        assert_eq!(
            read(&key(&[Scope::CreditsRead])),
            Err(Denied::EventsReadersOnly)
        );
    }
}
