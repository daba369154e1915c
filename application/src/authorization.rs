//! Who may do what: the decisions every use case applies to the [`Principal`] an adapter
//! authenticated. The adapters only say which permission an action needs and turn a
//! [`Denied`] into their own answer; the policy lives here, once.

use domain::UserId;

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

/// The API key behind `principal`, when it carries `scope`.
///
/// # Errors
/// [`Denied::MissingScope`] for a user or a key without it.
pub fn service_key(principal: Principal, scope: Scope) -> Result<ApiKey, Denied> {
    authorize(&principal, Permission::Service(scope))?;
    match principal {
        Principal::Service(key) => Ok(key),
        Principal::User(_) | Principal::Portal(_) => Err(Denied::MissingScope(scope)),
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

/// A user whose data a request is about, and who acts on it.
#[derive(Debug, Clone)]
pub struct Acting {
    /// The user.
    pub user: User,
    /// Who acts.
    pub actor: Actor,
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Whose data a read guarded by `scope` (credits, entitlements) is about: a signed-in
    /// user's own (naming another user is refused), or, for an API key with `scope`, the user
    /// it names.
    ///
    /// # Errors
    /// As [`Service::acting_for`].
    #[tracing::instrument(skip_all, fields(scope = ?scope, named_user = named))]
    pub async fn data_owner(
        &self,
        principal: Principal,
        scope: Scope,
        named: Option<&str>,
    ) -> Result<User, OwnerError> {
        Ok(self.acting_for(principal, scope, named).await?.user)
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
        let own = |user: User| match named {
            Some(other) if other != user.id.as_str() => Err(Denied::OthersData(scope).into()),
            _ => Ok(Acting {
                user,
                actor: Actor::TheUser,
            }),
        };
        match principal {
            Principal::User(user) => own(user),
            // A portal session is its user's billing, and nothing but that user's.
            Principal::Portal(portal) => own(billing_user(Principal::Portal(portal))?),
            Principal::Service(key) => {
                authorize(&Principal::Service(key), Permission::Service(scope))?;
                let raw = named.ok_or(Denied::NoUserNamed)?;
                let id = UserId::new(raw).map_err(|_| Denied::UserNotFound)?;
                let user = self.store.find_user(&id).await.map_err(InfraError::from)?;
                Ok(Acting {
                    user: user.ok_or(Denied::UserNotFound)?,
                    actor: Actor::ServiceKey,
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
