//! Inbound ports: what the driving adapters (the JSON API, the pages) may ask of Tally.
//!
//! One object-safe trait per area, each method one use case with the same arguments and
//! result as the [`Service`] method it delegates to: [`PaymentsService`] (orders, provider
//! webhooks, a buyer's subscriptions), [`CreditsService`] (balances, spending, status and
//! entitlements), [`AccountsService`] (sign-up, sign-in, who is calling), [`PlansService`]
//! (the catalogue the pricing page shows), [`AdminService`] (the console: plans, API keys,
//! customers, orders, refunds, the webhook inbox, audit) and [`HostEventsService`] (the
//! event feed and webhook endpoints). What an adapter used to read from the service's parts
//! (the store, the gateways, the settings, the clock, the id generator) is a named query on
//! one of them, so an adapter never sees those parts.
//!
//! [`Ports`] bundles the six as `Arc<dyn …>`: the one non-generic value an adapter holds, and
//! what a handler test builds from fakes (with feature `mocks`, each trait has a `mockall`
//! mock: `MockPaymentsService`, …).
//!
//! Each trait is declared once, through `inbound_port!`: the macro writes the trait and its
//! implementation for [`Service`], every method of which calls the `Service` method of the same
//! name and arguments. A use case is written once, as that `Service` method.

/// Declares an inbound port: the trait as written (with its docs, object-safe through
/// `async_trait`, with a `mockall` mock under `test` or feature `mocks`) and its implementation
/// for [`Service`], each method calling the inherent `Service` method of the same name with the
/// same arguments (and awaiting it for an `async fn`).
///
/// Methods take `&self` and `name: Type` arguments, optionally with lifetime parameters. The
/// inherent method must exist: the macro checks it from a module where the trait is out of
/// scope, so a missing one is a compile error instead of a trait method calling itself.
macro_rules! inbound_port {
    (
        $(#[$($trait_attr:tt)*])*
        pub trait $port:ident {
            $($methods:tt)*
        }
    ) => {
        // The declaration keeps the tokens as written: `mockall` cannot read types that went
        // through a `ty` fragment, and the `self` of the bodies it writes must be the `self` of
        // the signatures, which are the invoker's.
        $(#[$($trait_attr)*])*
        pub trait $port: Send + Sync + 'static {
            $($methods)*
        }

        inbound_port!(@delegate $port [] [] $($methods)*);
    };
    (
        @delegate $port:ident [$($impls:tt)*] [$($names:ident)*]
        $(#[$attr:meta])*
        async fn $name:ident $(<$($lt:lifetime),+>)? (&self $(, $arg:ident: $ty:ty)* $(,)?)
            -> $ret:ty;
        $($rest:tt)*
    ) => {
        inbound_port!(
            @delegate $port
            [
                $($impls)*
                async fn $name $(<$($lt),+>)? (&self $(, $arg: $ty)*) -> $ret {
                    $crate::service::Service::$name(self $(, $arg)*).await
                }
            ]
            [$($names)* $name]
            $($rest)*
        );
    };
    (
        @delegate $port:ident [$($impls:tt)*] [$($names:ident)*]
        $(#[$attr:meta])*
        fn $name:ident $(<$($lt:lifetime),+>)? (&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
        $($rest:tt)*
    ) => {
        inbound_port!(
            @delegate $port
            [
                $($impls)*
                fn $name $(<$($lt),+>)? (&self $(, $arg: $ty)*) -> $ret {
                    $crate::service::Service::$name(self $(, $arg)*)
                }
            ]
            [$($names)* $name]
            $($rest)*
        );
    };
    (@delegate $port:ident [$($impls:tt)*] [$($names:ident)*]) => {
        #[async_trait::async_trait]
        impl<S, C, I, H> $port for $crate::service::Service<S, C, I, H>
        where
            S: $crate::ports::Store,
            C: $crate::ports::Clock,
            I: $crate::ports::IdGenerator,
            H: $crate::ports::SecretHasher,
        {
            $($impls)*
        }

        /// Where the port is out of scope, so `Service::name` can only be an inherent method.
        mod inherent {
            #[allow(dead_code)]
            fn exists<S, C, I, H>()
            where
                S: $crate::ports::Store,
                C: $crate::ports::Clock,
                I: $crate::ports::IdGenerator,
                H: $crate::ports::SecretHasher,
            {
                $(let _ = $crate::service::Service::<S, C, I, H>::$names;)*
            }
        }
    };
}

pub mod accounts;
pub mod admin;
pub mod credits;
pub mod host_events;
pub mod payments;
pub mod plans;

use std::sync::Arc;

use crate::ports::{Clock, IdGenerator, SecretHasher, Store};
use crate::service::Service;

pub use accounts::AccountsService;
pub use admin::AdminService;
pub use credits::CreditsService;
pub use host_events::HostEventsService;
pub use payments::PaymentsService;
pub use plans::PlansService;

#[cfg(any(test, feature = "mocks"))]
pub use accounts::MockAccountsService;
#[cfg(any(test, feature = "mocks"))]
pub use admin::MockAdminService;
#[cfg(any(test, feature = "mocks"))]
pub use credits::MockCreditsService;
#[cfg(any(test, feature = "mocks"))]
pub use host_events::MockHostEventsService;
#[cfg(any(test, feature = "mocks"))]
pub use payments::MockPaymentsService;
#[cfg(any(test, feature = "mocks"))]
pub use plans::MockPlansService;

/// Every inbound port, as the driving adapters hold them.
#[derive(Clone)]
pub struct Ports {
    /// Orders, provider webhooks and a buyer's subscriptions.
    pub payments: Arc<dyn PaymentsService>,
    /// Balances, spending, status and entitlements.
    pub credits: Arc<dyn CreditsService>,
    /// Sign-up, sign-in and who is calling.
    pub accounts: Arc<dyn AccountsService>,
    /// The plan catalogue.
    pub plans: Arc<dyn PlansService>,
    /// The administrators' console.
    pub admin: Arc<dyn AdminService>,
    /// The event feed and webhook endpoints.
    pub host_events: Arc<dyn HostEventsService>,
}

impl Ports {
    /// Every port answered by `service`.
    pub fn new<S, C, I, H>(service: Arc<Service<S, C, I, H>>) -> Self
    where
        S: Store,
        C: Clock,
        I: IdGenerator,
        H: SecretHasher,
    {
        Self {
            payments: service.clone(),
            credits: service.clone(),
            accounts: service.clone(),
            plans: service.clone(),
            admin: service.clone(),
            host_events: service,
        }
    }
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports").finish_non_exhaustive()
    }
}
