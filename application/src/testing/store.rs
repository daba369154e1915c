//! `InMemoryStore`: every storage port over one mutex-guarded state.

mod admin;
mod apply;
mod limits;
mod promo;
mod reports;
mod teams;
#[cfg(test)]
mod tests;
mod thresholds;
mod top_up;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use async_trait::async_trait;
use domain::{
    AccountId, Credits, Order, OrderId, OrderParts, OrderStatus, PlanId, ProviderId, Subscription,
    SubscriptionId, Timestamp, UserId,
};

use self::apply::admin_write;
use super::ledger::Ledger;
use super::lock;
use crate::accounts::{
    ApiKey, BuyerContact, Email, PasswordHash, PortalSession, Role, TokenHash, User,
};
use crate::pagination::{Page, PageRequest};
use crate::ports::*;

#[derive(Debug, Clone, Default)]
struct State {
    users: BTreeMap<UserId, (User, Option<PasswordHash>)>,
    host_identities: BTreeMap<(String, String), UserId>,
    /// Host users' contact details, as their tokens last said them.
    host_contacts: BTreeMap<UserId, BuyerContact>,
    sessions: BTreeMap<TokenHash, (UserId, Timestamp)>,
    /// Portal links by their digest, and the session each opened (digest, end).
    portal_links: BTreeMap<TokenHash, (NewPortalLink, Option<(TokenHash, Timestamp)>)>,
    api_keys: Vec<(ApiKey, TokenHash)>,
    plans: BTreeMap<PlanId, StoredPlan>,
    plan_allowances: BTreeMap<(UserId, PlanId), PlanAllowance>,
    orders: BTreeMap<OrderId, OrderRecord>,
    idempotency: BTreeMap<(UserId, String), (String, OrderId)>,
    subscriptions: BTreeMap<SubscriptionId, (Subscription, Option<OrderId>)>,
    inbox: BTreeSet<(ProviderId, String)>,
    inbox_entries: Vec<InboxEntry>,
    ledger: Ledger,
    charges: Vec<SubscriptionCharge>,
    refunds: Vec<RefundRecord>,
    host_events: Vec<StoredEvent>,
    /// The largest host event id handed out (kept when events are purged).
    host_events_issued: i64,
    audit: Vec<AuditEntry>,
    /// Credits every user created from now on is given ([`InMemoryStore::with_signup_grant`]).
    signup: Option<SignupGrant>,
    /// The identities given sign-up credits (kept whatever becomes of their accounts).
    signup_identities: BTreeSet<String>,
    /// Per UTC day (days since the epoch): sign-up grants given, sign-ups past the cap.
    signup_days: BTreeMap<i64, (u32, u32)>,
    /// What each user was last told of their entitlements.
    entitlements_told: BTreeMap<AccountId, ToldEntitlements>,
    /// Team accounts (a personal account is its user).
    accounts: BTreeMap<domain::AccountId, Account>,
    /// Teams' members.
    members: BTreeMap<(domain::AccountId, UserId), Member>,
    /// Members of host organisations' teams who are away, their rows kept.
    away: BTreeMap<(domain::AccountId, UserId), Member>,
    /// Invitations by id, with their token's digest, and whether used or revoked.
    invitations: BTreeMap<String, (crate::ports::Invitation, TokenHash, bool, bool)>,
    /// Accounts' spend limits, with their buckets.
    spend_limits: BTreeMap<domain::SpendLimitId, SpendLimitRecord>,
    /// What each pending hold counted against limits.
    hold_limit_counts: BTreeMap<domain::ReservationId, limits::HoldCounts>,
    /// Accounts' balance thresholds.
    thresholds: BTreeMap<domain::ThresholdId, ThresholdRecord>,
    /// Promo codes by id.
    promo_codes: BTreeMap<String, StoredPromoCode>,
    /// Promo code redemptions, oldest first, with their request keys.
    promo_redemptions: Vec<(RedemptionRecord, String)>,
    /// Accounts' automatic top-up rules.
    auto_top_ups: BTreeMap<domain::AccountId, crate::ports::AutoTopUpRecord>,
    /// Saved payment methods, oldest first.
    saved_methods: Vec<crate::ports::SavedMethodRecord>,
    /// Top-ups, oldest first.
    top_ups: Vec<crate::ports::TopUpRecord>,
}

/// Every storage port in memory. Cheap to create; one per test.
#[derive(Debug, Default)]
pub struct InMemoryStore(Mutex<State>);

impl InMemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Give every user created from now on `grant`, with the user, as the SQL store does
    /// ([`SignupGrant`]); `None` gives nothing.
    #[must_use]
    pub fn with_signup_grant(self, grant: Option<SignupGrant>) -> Self {
        lock(&self.0).signup = grant;
        self
    }

    /// The sign-up grants given on UTC day `day` (days since the epoch) and the sign-ups that
    /// day refused one by its cap (for assertions).
    #[must_use]
    pub fn signup_day(&self, day: i64) -> (u32, u32) {
        lock(&self.0)
            .signup_days
            .get(&day)
            .copied()
            .unwrap_or_default()
    }

    /// Every inbox entry recorded so far (for assertions).
    #[must_use]
    pub fn inbox(&self) -> Vec<InboxEntry> {
        lock(&self.0).inbox_entries.clone()
    }

    /// Every credit transaction of every user, oldest first (for assertions).
    #[must_use]
    pub fn all_transactions(&self) -> Vec<CreditTransaction> {
        lock(&self.0).ledger.transactions.clone()
    }

    /// Append a host event to the outbox (this fake writes none by itself: the SQL store does,
    /// inside its transactions); its id is the next one.
    pub fn push_host_event(&self, mut event: StoredEvent) -> StoredEvent {
        let mut state = lock(&self.0);
        event.id = state.host_events_issued + 1;
        state.host_events_issued = event.id;
        state.host_events.push(event.clone());
        event
    }

    /// Run `f` on a copy of the state and keep the copy only if `f` succeeds: all or nothing.
    fn atomically<T, E>(&self, f: impl FnOnce(&mut State) -> Result<T, E>) -> Result<T, E> {
        let mut guard = lock(&self.0);
        let mut draft = guard.clone();
        let out = f(&mut draft)?;
        *guard = draft;
        Ok(out)
    }
}

fn paged<T: Clone>(all: Vec<T>, page: PageRequest) -> Page<T> {
    let total = all.len() as u64;
    let offset = usize::try_from(page.offset()).unwrap_or(usize::MAX);
    let items = all
        .into_iter()
        .skip(offset)
        .take(page.limit() as usize)
        .collect();
    Page {
        items,
        request: page,
        total,
    }
}

#[async_trait]
impl UserRepository for InMemoryStore {
    async fn create_user(&self, user: &NewUser) -> Result<User, StoreError> {
        self.atomically(|s| {
            if s.users.contains_key(&user.id)
                || s.users.values().any(|(u, _)| u.email == user.email)
            {
                return Err(StoreError::Conflict("user exists".into()));
            }
            let created = User {
                id: user.id.clone(),
                email: user.email.clone(),
                role: user.role,
                created_at: user.created_at,
            };
            s.users.insert(
                user.id.clone(),
                (created.clone(), user.password_hash.clone()),
            );
            admin::give_signup_grant(
                s,
                &created.id,
                created.created_at,
                user.signup_identity.as_ref(),
            )?;
            Ok(created)
        })
    }

    async fn find_user_by_email(
        &self,
        email: &Email,
    ) -> Result<Option<(User, Option<PasswordHash>)>, StoreError> {
        Ok(lock(&self.0)
            .users
            .values()
            .find(|(u, _)| &u.email == email)
            .cloned())
    }

    async fn find_user(&self, id: &UserId) -> Result<Option<User>, StoreError> {
        Ok(lock(&self.0).users.get(id).map(|(u, _)| u.clone()))
    }

    async fn find_or_create_host_user(&self, user: &NewHostUser) -> Result<User, StoreError> {
        self.atomically(|s| {
            let key = (user.issuer.clone(), user.subject.clone());
            let id = match s.host_identities.get(&key) {
                Some(id) => id.clone(),
                None => {
                    let id = fake_host_user_id(&user.issuer, &user.subject);
                    let email = Email::parse(&format!("{id}@host.invalid"))
                        .map_err(|e| StoreError::Unexpected(e.into()))?;
                    if s.users.contains_key(&id) || s.users.values().any(|(u, _)| u.email == email)
                    {
                        return Err(StoreError::Conflict("host user id taken".into()));
                    }
                    let created = User {
                        id: id.clone(),
                        email,
                        role: Role::User,
                        created_at: user.created_at,
                    };
                    s.users.insert(id.clone(), (created, None));
                    s.host_identities.insert(key, id.clone());
                    admin::give_signup_grant(
                        s,
                        &id,
                        user.created_at,
                        user.signup_identity.as_ref(),
                    )?;
                    id
                }
            };
            let stored = s.host_contacts.remove(&id).unwrap_or_default();
            s.host_contacts
                .insert(id.clone(), user.contact.clone().or(stored));
            match s.users.get(&id) {
                Some((found, None)) => Ok(found.clone()),
                _ => Err(StoreError::Conflict(
                    "host identity maps to no host user".into(),
                )),
            }
        })
    }

    async fn find_buyer_contact(&self, id: &UserId) -> Result<BuyerContact, StoreError> {
        let state = lock(&self.0);
        let (user, _) = state.users.get(id).ok_or(StoreError::NotFound)?;
        let own = BuyerContact::new(Some(user.email.clone()), None);
        Ok(state
            .host_contacts
            .get(id)
            .cloned()
            .unwrap_or_default()
            .or(own))
    }

    async fn set_role(&self, id: &UserId, role: Role) -> Result<(), StoreError> {
        self.atomically(|s| {
            let (user, _) = s.users.get_mut(id).ok_or(StoreError::NotFound)?;
            user.role = role;
            Ok(())
        })
    }

    async fn create_session(
        &self,
        token: &TokenHash,
        user: &UserId,
        _now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        lock(&self.0)
            .sessions
            .insert(token.clone(), (user.clone(), expires_at));
        Ok(())
    }

    async fn find_session_user(
        &self,
        token: &TokenHash,
        now: Timestamp,
    ) -> Result<Option<User>, StoreError> {
        let s = lock(&self.0);
        Ok(s.sessions
            .get(token)
            .filter(|(_, exp)| *exp > now)
            .and_then(|(u, _)| s.users.get(u))
            .map(|(u, _)| u.clone()))
    }

    async fn delete_session(&self, token: &TokenHash) -> Result<(), StoreError> {
        lock(&self.0).sessions.remove(token);
        Ok(())
    }

    async fn create_portal_link(&self, link: &NewPortalLink) -> Result<(), StoreError> {
        lock(&self.0)
            .portal_links
            .insert(link.link.clone(), (link.clone(), None));
        Ok(())
    }

    async fn open_portal_link(
        &self,
        link: &TokenHash,
        session: &TokenHash,
        now: Timestamp,
        session_expires_at: Timestamp,
    ) -> Result<Option<PortalSession>, StoreError> {
        let mut s = lock(&self.0);
        let Some((stored, opened)) = s.portal_links.get_mut(link) else {
            return Ok(None);
        };
        if opened.is_some() || stored.expires_at <= now {
            return Ok(None);
        }
        *opened = Some((session.clone(), session_expires_at));
        let stored = stored.clone();
        Ok(s.users.get(&stored.user_id).map(|(user, _)| PortalSession {
            account: (stored.account_id.clone()).unwrap_or_else(|| AccountId::personal(&user.id)),
            user: user.clone(),
            return_url: stored.return_url,
            locale: stored.locale,
            expires_at: session_expires_at,
        }))
    }

    async fn find_portal_session(
        &self,
        session: &TokenHash,
        now: Timestamp,
    ) -> Result<Option<PortalSession>, StoreError> {
        let s = lock(&self.0);
        let found = s
            .portal_links
            .values()
            .find_map(|(link, opened)| match opened {
                Some((hash, ends)) if hash == session && *ends > now => Some((link, *ends)),
                _ => None,
            });
        Ok(found.and_then(|(link, ends)| {
            s.users.get(&link.user_id).map(|(user, _)| PortalSession {
                account: (link.account_id.clone()).unwrap_or_else(|| AccountId::personal(&user.id)),
                user: user.clone(),
                return_url: link.return_url.clone(),
                locale: link.locale.clone(),
                expires_at: ends,
            })
        }))
    }
}

#[async_trait]
impl ApiKeyRepository for InMemoryStore {
    async fn create_api_key(&self, key: &ApiKey, hash: &TokenHash) -> Result<(), StoreError> {
        self.atomically(|s| {
            admin_write(
                s,
                AdminWrite::CreateApiKey(key, hash),
                Timestamp::from_unix_millis(0),
            )
            .map(drop)
        })
    }

    async fn find_api_key(&self, hash: &TokenHash) -> Result<Option<ApiKey>, StoreError> {
        Ok(lock(&self.0)
            .api_keys
            .iter()
            .find(|(k, h)| h == hash && k.revoked_at.is_none())
            .map(|(k, _)| k.clone()))
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        Ok(lock(&self.0)
            .api_keys
            .iter()
            .rev()
            .map(|(k, _)| k.clone())
            .collect())
    }

    async fn revoke_api_key(&self, id: &str, now: Timestamp) -> Result<(), StoreError> {
        self.atomically(|s| admin_write(s, AdminWrite::RevokeApiKey(id), now).map(drop))
    }
}

#[async_trait]
impl PlanRepository for InMemoryStore {
    async fn list_plans(&self) -> Result<Vec<StoredPlan>, StoreError> {
        let mut plans: Vec<StoredPlan> = lock(&self.0).plans.values().cloned().collect();
        plans.sort_by(|a, b| {
            (a.listing.sort_order, a.plan.id()).cmp(&(b.listing.sort_order, b.plan.id()))
        });
        Ok(plans)
    }

    async fn find_plan(&self, id: &PlanId) -> Result<Option<StoredPlan>, StoreError> {
        Ok(lock(&self.0).plans.get(id).cloned())
    }

    async fn plan_allowed(&self, user: &UserId, plan: &PlanId) -> Result<bool, StoreError> {
        let key = (user.clone(), plan.clone());
        Ok(lock(&self.0).plan_allowances.contains_key(&key))
    }

    async fn plan_allowances(&self, user: &UserId) -> Result<Vec<PlanAllowance>, StoreError> {
        Ok((lock(&self.0).plan_allowances.values())
            .filter(|a| &a.user_id == user)
            .cloned()
            .collect())
    }

    async fn create_plan(&self, plan: &StoredPlan, now: Timestamp) -> Result<(), StoreError> {
        self.atomically(|s| admin_write(s, AdminWrite::CreatePlan(plan), now).map(drop))
    }

    async fn update_plan(&self, plan: &StoredPlan, now: Timestamp) -> Result<(), StoreError> {
        self.atomically(|s| admin_write(s, AdminWrite::UpdatePlan(plan), now).map(drop))
    }

    async fn delete_plan(&self, id: &PlanId) -> Result<(), StoreError> {
        self.atomically(|s| {
            admin_write(
                s,
                AdminWrite::DeletePlan(id),
                Timestamp::from_unix_millis(0),
            )
            .map(drop)
        })
    }

    async fn reorder_plans(&self, ids: &[PlanId], now: Timestamp) -> Result<(), StoreError> {
        self.atomically(|s| admin_write(s, AdminWrite::ReorderPlans(ids), now).map(drop))
    }
}

#[async_trait]
impl OrderRepository for InMemoryStore {
    async fn create_order(
        &self,
        order: &Order,
        idempotency: Option<&IdempotencyRecord>,
    ) -> Result<CreateOrderOutcome, StoreError> {
        self.atomically(|s| {
            if let Some(record) = idempotency {
                let key = (order.user_id().clone(), record.key.as_str().to_owned());
                if let Some((hash, existing)) = s.idempotency.get(&key) {
                    if hash != &record.request_hash {
                        return Ok(CreateOrderOutcome::KeyConflict);
                    }
                    let found = s
                        .orders
                        .get(existing)
                        .cloned()
                        .ok_or(StoreError::NotFound)?;
                    return Ok(CreateOrderOutcome::Replayed(found));
                }
                s.idempotency
                    .insert(key, (record.request_hash.clone(), order.id().clone()));
            }
            if s.orders.contains_key(order.id()) {
                return Err(StoreError::Conflict("order exists".into()));
            }
            orders_insert(s, order);
            Ok(CreateOrderOutcome::Created)
        })
    }

    async fn earlier_order(
        &self,
        user: &UserId,
        idempotency: &IdempotencyRecord,
    ) -> Result<Option<CreateOrderOutcome>, StoreError> {
        self.atomically(|s| {
            let key = (user.clone(), idempotency.key.as_str().to_owned());
            let Some((hash, existing)) = s.idempotency.get(&key) else {
                return Ok(None);
            };
            if hash != &idempotency.request_hash {
                return Ok(Some(CreateOrderOutcome::KeyConflict));
            }
            let found = s
                .orders
                .get(existing)
                .cloned()
                .ok_or(StoreError::NotFound)?;
            Ok(Some(CreateOrderOutcome::Replayed(found)))
        })
    }

    async fn attach_checkout(
        &self,
        id: &OrderId,
        checkout: &CheckoutRecord,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.atomically(|s| {
            let r = s.orders.get_mut(id).ok_or(StoreError::NotFound)?;
            if *r.order.status() != OrderStatus::Pending {
                return Err(StoreError::Conflict("order is not pending".into()));
            }
            r.checkout = Some(checkout.clone());
            r.updated_at = now;
            Ok(())
        })
    }

    async fn find_order(&self, id: &OrderId) -> Result<Option<OrderRecord>, StoreError> {
        Ok(lock(&self.0).orders.get(id).cloned())
    }

    async fn find_order_by_reference(
        &self,
        provider: ProviderId,
        reference: &str,
    ) -> Result<Option<OrderRecord>, StoreError> {
        Ok(lock(&self.0)
            .orders
            .values()
            .find(|r| {
                r.order.provider() == provider
                    && r.checkout
                        .as_ref()
                        .and_then(|c| c.provider_reference.as_deref())
                        == Some(reference)
            })
            .cloned())
    }

    async fn list_orders(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<OrderRecord>, StoreError> {
        let mut all: Vec<OrderRecord> = lock(&self.0)
            .orders
            .values()
            .filter(|r| r.order.account_id() == account)
            .cloned()
            .collect();
        all.sort_by(|a, b| {
            (b.order.created_at(), b.order.id()).cmp(&(a.order.created_at(), a.order.id()))
        });
        Ok(paged(all, page))
    }

    async fn claim_pending_orders(
        &self,
        created_before: Timestamp,
        limit: u32,
        _now: Timestamp,
        _lease_ms: i64,
    ) -> Result<Vec<OrderRecord>, StoreError> {
        let mut due: Vec<OrderRecord> = lock(&self.0)
            .orders
            .values()
            .filter(|r| {
                *r.order.status() == OrderStatus::Pending && r.order.created_at() < created_before
            })
            .cloned()
            .collect();
        due.sort_by_key(|r| r.order.created_at());
        due.truncate(limit as usize);
        Ok(due)
    }
}

/// Keep a new order at its first version.
fn orders_insert(s: &mut State, order: &Order) {
    let record = OrderRecord {
        order: order.clone(),
        checkout: None,
        updated_at: order.created_at(),
        mismatch: None,
        version: OrderRecord::FIRST_VERSION,
        charge_reference: None,
    };
    s.orders.insert(order.id().clone(), record);
}

/// `order` with `status` written over its status, as the SQL store updates that column and
/// reads the order back.
fn with_status(order: &Order, status: OrderStatus) -> Order {
    Order::restore(OrderParts {
        id: order.id().clone(),
        user_id: order.user_id().clone(),
        account: Some(order.account_id().clone()),
        provider: order.provider(),
        plan: order.plan().clone(),
        status,
        created_at: order.created_at(),
        expires_at: order.expires_at(),
        returns: order.returns().clone(),
        save_method: order.save_method(),
    })
}

fn apply_charge(s: &mut State, change: Option<&ChargeChange>) -> Result<(), StoreError> {
    match change {
        None => Ok(()),
        Some(ChargeChange::Record(charge)) => {
            if let Some(same) = s
                .charges
                .iter_mut()
                .find(|c| c.subscription_id == charge.subscription_id && c.period == charge.period)
            {
                if same.charge_ref.is_none() {
                    same.charge_ref.clone_from(&charge.charge_ref);
                }
                return Ok(());
            }
            let ref_taken = charge.charge_ref.is_some()
                && s.charges
                    .iter()
                    .any(|c| c.provider == charge.provider && c.charge_ref == charge.charge_ref);
            if ref_taken {
                return Err(StoreError::Conflict("charge id taken".into()));
            }
            s.charges.push(charge.clone());
            Ok(())
        }
        Some(ChargeChange::Refund {
            subscription_id,
            period_start,
            expected,
            refunded,
        }) => {
            let charge = s
                .charges
                .iter_mut()
                .find(|c| {
                    &c.subscription_id == subscription_id && c.period.start() == *period_start
                })
                .ok_or(StoreError::NotFound)?;
            if charge.refunded != *expected {
                return Err(StoreError::Conflict(
                    "charge refunded since it was read".into(),
                ));
            }
            charge.refunded = *refunded;
            Ok(())
        }
    }
}

#[async_trait]
impl RefundRepository for InMemoryStore {
    async fn refunds_of(
        &self,
        provider: ProviderId,
        target: &RefundTarget,
    ) -> Result<Vec<RefundRecord>, StoreError> {
        Ok(lock(&self.0)
            .refunds
            .iter()
            .filter(|r| r.provider == provider && &r.target == target)
            .cloned()
            .collect())
    }

    async fn granted_by(&self, source: &GrantSource) -> Result<Option<Credits>, StoreError> {
        Ok(lock(&self.0).ledger.granted_by(source))
    }

    async fn change_grants(
        &self,
        subscription: &SubscriptionId,
    ) -> Result<Vec<(Timestamp, Credits)>, StoreError> {
        Ok(lock(&self.0).ledger.change_grants(subscription))
    }

    async fn find_charge(
        &self,
        provider: ProviderId,
        charge_ref: &str,
    ) -> Result<Option<SubscriptionCharge>, StoreError> {
        Ok(lock(&self.0)
            .charges
            .iter()
            .find(|c| c.provider == provider && c.charge_ref.as_deref() == Some(charge_ref))
            .cloned())
    }

    async fn charges_with_unapplied_refunds(
        &self,
        limit: u32,
    ) -> Result<Vec<SubscriptionCharge>, StoreError> {
        let s = lock(&self.0);
        Ok(s.charges
            .iter()
            .filter(|c| {
                let Some(charge_ref) = &c.charge_ref else {
                    return false;
                };
                let target = RefundTarget::Charge(charge_ref.clone());
                let kept: Vec<domain::KeptRefund> = s
                    .refunds
                    .iter()
                    .filter(|r| r.provider == c.provider && r.target == target)
                    .map(|r| r.refund)
                    .collect();
                domain::refunded_total(c.amount, &kept).amount_minor() > c.refunded.amount_minor()
            })
            .take(limit as usize)
            .cloned()
            .collect())
    }

    async fn find_charge_of_order(
        &self,
        order: &OrderId,
    ) -> Result<Option<SubscriptionCharge>, StoreError> {
        Ok(lock(&self.0)
            .charges
            .iter()
            .find(|c| c.order_id.as_ref() == Some(order))
            .cloned())
    }
}

#[async_trait]
impl SubscriptionRepository for InMemoryStore {
    async fn find_subscription(
        &self,
        id: &SubscriptionId,
    ) -> Result<Option<Subscription>, StoreError> {
        Ok(lock(&self.0).subscriptions.get(id).map(|(s, _)| s.clone()))
    }

    async fn find_subscription_by_provider_id(
        &self,
        provider: ProviderId,
        provider_subscription_id: &str,
    ) -> Result<Option<Subscription>, StoreError> {
        Ok(lock(&self.0)
            .subscriptions
            .values()
            .find(|(s, _)| {
                s.provider() == provider && s.provider_subscription_id() == provider_subscription_id
            })
            .map(|(s, _)| s.clone()))
    }

    async fn find_subscription_by_order(
        &self,
        order: &OrderId,
    ) -> Result<Option<Subscription>, StoreError> {
        Ok(lock(&self.0)
            .subscriptions
            .values()
            .find(|(_, o)| o.as_ref() == Some(order))
            .map(|(s, _)| s.clone()))
    }

    async fn list_subscriptions(
        &self,
        account: &AccountId,
    ) -> Result<Vec<Subscription>, StoreError> {
        let mut subs: Vec<Subscription> = lock(&self.0)
            .subscriptions
            .values()
            .filter(|(s, _)| s.account_id() == account)
            .map(|(s, _)| s.clone())
            .collect();
        subs.sort_by_key(|s| std::cmp::Reverse(s.last_event_at()));
        Ok(subs)
    }

    async fn page_subscriptions(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<Subscription>, StoreError> {
        let mut subs = self.list_subscriptions(account).await?;
        // This fake keeps no creation time: the period's start, then the id, stand in for it.
        subs.sort_by(|a, b| {
            (b.current_period().start(), b.id()).cmp(&(a.current_period().start(), a.id()))
        });
        Ok(paged(subs, page))
    }

    async fn subscription_order(
        &self,
        id: &SubscriptionId,
    ) -> Result<Option<OrderRecord>, StoreError> {
        let state = lock(&self.0);
        let order = state
            .subscriptions
            .get(id)
            .and_then(|(_, order)| order.as_ref());
        Ok(order.and_then(|order| state.orders.get(order)).cloned())
    }
}

#[async_trait]
impl CreditLedger for InMemoryStore {
    async fn balance(&self, user: &domain::AccountId) -> Result<Credits, StoreError> {
        Ok(lock(&self.0).ledger.balance(user))
    }

    async fn transactions(
        &self,
        user: &domain::AccountId,
        page: PageRequest,
    ) -> Result<Page<CreditTransaction>, StoreError> {
        let all: Vec<CreditTransaction> = lock(&self.0)
            .ledger
            .transactions
            .iter()
            .rev()
            .filter(|t| &t.account_id == user)
            .cloned()
            .collect();
        Ok(paged(all, page))
    }

    async fn pending_reservations(
        &self,
        user: &domain::AccountId,
    ) -> Result<Vec<Reservation>, StoreError> {
        Ok(lock(&self.0).ledger.pending_reservations(user))
    }

    async fn grant_lots(
        &self,
        user: &domain::AccountId,
    ) -> Result<Vec<domain::GrantLot>, StoreError> {
        Ok(lock(&self.0).ledger.grant_lots(user))
    }

    async fn expire_reservations(&self, now: Timestamp, limit: u32) -> Result<u32, StoreError> {
        self.atomically(|s| Ok(s.ledger.expire_reservations(now, limit)))
    }

    async fn expire_grants(&self, now: Timestamp, limit: u32) -> Result<u32, StoreError> {
        self.atomically(|s| Ok(s.ledger.expire_grants(now, limit)))
    }
}

/// The order, refund, charge and subscription parts of `set` on `s` (the caller keeps or
/// drops `s` as a whole).
fn apply_event_parts(s: &mut State, set: &ChangeSet<'_>) -> Result<(), StoreError> {
    if let Some(o) = &set.order {
        let r = s.orders.get_mut(o.after.id()).ok_or(StoreError::NotFound)?;
        if r.version != o.expected_version {
            return Err(StoreError::Conflict(format!(
                "order is {} at version {}, not {}",
                r.order.status(),
                r.version,
                o.expected_version
            )));
        }
        r.order = with_status(&r.order, o.after.status().clone());
        if let Some(m) = &o.mismatch {
            r.mismatch = Some(m.clone());
        }
        r.version += 1;
        r.updated_at = set.at;
    }
    if let Some(refund) = &set.refund {
        if s.refunds
            .iter()
            .any(|k| k.provider == refund.provider && k.key == refund.key)
        {
            return Err(StoreError::Conflict("refund kept before".into()));
        }
        s.refunds.push(refund.clone());
    }
    apply_charge(s, set.charge.as_ref())?;
    apply_subscription_change(s, set.subscription.as_ref())
}

/// The subscription part of [`apply_event_parts`]: create, or compare-and-set on the last event and
/// on the claim as it was read.
fn apply_subscription_change(
    s: &mut State,
    change: Option<&SubscriptionChange>,
) -> Result<(), StoreError> {
    match change {
        Some(SubscriptionChange::Create(sub, order)) => {
            let exists = s.subscriptions.values().any(|(x, _)| {
                x.provider() == sub.provider()
                    && x.provider_subscription_id() == sub.provider_subscription_id()
            });
            if exists || s.subscriptions.contains_key(sub.id()) {
                return Err(StoreError::Conflict("subscription exists".into()));
            }
            s.subscriptions
                .insert(sub.id().clone(), (sub.clone().as_stored(), order.clone()));
        }
        Some(SubscriptionChange::Update {
            before,
            subscription,
        }) => {
            let (stored, _) = s
                .subscriptions
                .get_mut(subscription.id())
                .ok_or(StoreError::NotFound)?;
            // Compare-and-set on the last event and on the claim as it was read: a write decided
            // before a claim was written never clears or replaces it.
            if stored.last_event_at() != before.last_event_at()
                || !subscription.claim_unchanged_since_read(stored)
            {
                return Err(StoreError::Conflict("subscription changed".into()));
            }
            // One switch at a time: a claim is never replaced by another.
            if subscription.overwrites_claim_of(stored) {
                return Err(StoreError::Conflict("another switch is in progress".into()));
            }
            *stored = subscription.clone().as_stored();
        }
        None => {}
    }
    Ok(())
}

/// Keep `write` in `s` if the record still has the version it expects.
fn keep_entitlements(s: &mut State, write: &EntitlementsWrite) -> Result<(), StoreError> {
    let version = s.entitlements_told.get(&write.account).map(|t| t.version);
    if version != write.expected_version {
        return Err(StoreError::Conflict("entitlements changed".into()));
    }
    let told = ToldEntitlements {
        entitlements: write.entitlements.clone(),
        next_change_at: write.next_change_at,
        version: version.map_or(1, |v| v + 1),
    };
    s.entitlements_told.insert(write.account.clone(), told);
    Ok(())
}

#[async_trait]
impl PaymentEventStore for InMemoryStore {
    async fn list_events(
        &self,
        filter: &InboxFilter,
        page: PageRequest,
    ) -> Result<Page<RecordedEvent>, StoreError> {
        let all: Vec<RecordedEvent> = lock(&self.0)
            .inbox_entries
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, e)| {
                filter.provider.is_none_or(|p| p == e.provider)
                    && filter.outcome.is_none_or(|o| o == e.outcome)
            })
            .map(|(i, e)| RecordedEvent {
                id: i64::try_from(i).unwrap_or(i64::MAX) + 1,
                entry: e.clone(),
            })
            .collect();
        Ok(paged(all, page))
    }
}

/// A deterministic id for a host identity (the fake's stand-in for the real store's digest).
fn fake_host_user_id(issuer: &str, subject: &str) -> UserId {
    use std::hash::{Hash, Hasher};
    // `DefaultHasher::new()` has fixed keys, so the same identity always gets the same id.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (issuer, subject).hash(&mut hasher);
    UserId::new(format!("{HOST_USER_ID_PREFIX}{:016x}", hasher.finish()))
        .expect("a prefix and 16 hex digits are a valid user id")
}

#[async_trait]
impl HostEventLog for InMemoryStore {
    async fn events_after(
        &self,
        after: Option<i64>,
        limit: u32,
        kinds: &[crate::host_events::HostEventKind],
    ) -> Result<EventsRead, StoreError> {
        let limit = limit.min(MAX_EVENTS_PER_READ) as usize;
        let events = lock(&self.0)
            .host_events
            .iter()
            .filter(|e| after.is_none_or(|a| e.id > a))
            .filter(|e| kinds.is_empty() || kinds.contains(&e.kind))
            .take(limit)
            .cloned()
            .collect();
        Ok(EventsRead {
            events,
            looked_through: None,
        })
    }

    async fn issued_through(&self) -> Result<i64, StoreError> {
        Ok(lock(&self.0).host_events_issued)
    }

    async fn purge_events(&self, before: Timestamp, limit: u32) -> Result<u32, StoreError> {
        let mut state = lock(&self.0);
        let mut purged = 0;
        state.host_events.retain(|e| {
            if purged < limit && e.occurred_at < before {
                purged += 1;
                false
            } else {
                true
            }
        });
        Ok(purged)
    }

    async fn entitlement_basis(&self, account: &AccountId) -> Result<EntitlementBasis, StoreError> {
        let state = lock(&self.0);
        let subscriptions: Vec<(Subscription, Option<OrderId>)> = (state.subscriptions.values())
            .filter(|(s, _)| s.account_id() == account)
            .cloned()
            .collect();
        let orders = (state.orders.values())
            .filter(|r| r.order.account_id() == account)
            .filter(|r| {
                r.order.one_time_access().is_some()
                    || subscriptions
                        .iter()
                        .any(|(_, origin)| origin.as_ref() == Some(r.order.id()))
            })
            .map(|r| r.order.clone())
            .collect();
        Ok(EntitlementBasis {
            told: state.entitlements_told.get(account).cloned(),
            subscriptions,
            orders,
        })
    }

    async fn entitlements_due(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<AccountId>, StoreError> {
        let state = lock(&self.0);
        let mut due: Vec<(Timestamp, AccountId)> = (state.entitlements_told.iter())
            .filter_map(|(user, told)| told.next_change_at.map(|at| (at, user.clone())))
            .filter(|(at, _)| *at <= now)
            .collect();
        due.sort_by_key(|(at, user)| (at.unix_millis(), user.clone()));
        Ok(due
            .into_iter()
            .take(limit as usize)
            .map(|(_, u)| u)
            .collect())
    }
}
