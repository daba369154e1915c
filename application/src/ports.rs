//! Ports: the traits the use cases need from the outside world.
//!
//! Each port method is one atomic business operation; no transaction ever spans two calls.
//! Adapters implement them (`store` for storage, `gateways` for providers, `bootstrap` for the
//! clock, ids and secrets); `testing` has in-memory fakes.

pub mod admin;
pub mod change_set;
pub mod gateway;
pub mod host_events;
pub mod limits;
pub mod metrics;
pub mod promo;
pub mod reports;
pub mod runtime;
pub mod store;
pub mod teams;
pub mod thresholds;
pub mod top_up;
pub mod webhooks;

pub use admin::*;
pub use change_set::*;
pub use gateway::*;
pub use host_events::*;
pub use limits::*;
pub use metrics::*;
pub use promo::*;
pub use reports::*;
pub use runtime::*;
pub use store::*;
pub use teams::*;
pub use thresholds::*;
pub use top_up::*;
pub use webhooks::*;
