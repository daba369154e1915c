//! The hub's bounded stores: payments and subscriptions kept in the order they were created,
//! the oldest dropped once a store is full, and the payments indexed by what the simulators
//! look them up by (Tally's order id, an idempotency key, a capture id), so that a lookup
//! costs the same with ten thousand checkouts as with none.
//!
//! The sandbox is a development tool: what it drops is the oldest simulated checkout or
//! subscription, which a developer or a test finished with long ago. A request about one of
//! them is answered as the provider answers an unknown id (not found), and Tally's own orders
//! and ledger, which live in its database, are untouched.

use std::collections::{BTreeMap, HashMap, VecDeque};

use domain::ProviderId;

use super::SimPayment;

/// A map of at most `capacity` entries that drops the oldest-inserted entry to make room.
#[derive(Debug)]
pub(crate) struct BoundedMap<V> {
    entries: HashMap<String, V>,
    /// Every key of `entries`, oldest first.
    order: VecDeque<String>,
    capacity: usize,
}

impl<V> BoundedMap<V> {
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "a store keeps at least one entry");
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn get(&self, key: &str) -> Option<&V> {
        self.entries.get(key)
    }

    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.entries.get_mut(key)
    }

    /// Insert `value` under `key`, replacing (in its place in the order) what `key` held;
    /// returns the oldest entry when it was dropped to make room.
    pub(crate) fn insert(&mut self, key: String, value: V) -> Option<(String, V)> {
        if let Some(old) = self.entries.get_mut(&key) {
            *old = value;
            return None;
        }
        let dropped = if self.entries.len() >= self.capacity {
            self.order
                .pop_front()
                .and_then(|oldest| self.entries.remove(&oldest).map(|v| (oldest, v)))
        } else {
            None
        };
        self.order.push_back(key.clone());
        self.entries.insert(key, value);
        debug_assert_eq!(self.order.len(), self.entries.len());
        dropped
    }

    /// The entries, newest first.
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = &V> {
        self.order
            .iter()
            .rev()
            .filter_map(|key| self.entries.get(key))
    }
}

/// A payment's value under one of the names its provider's simulator looks payments up by.
type LookupKey = (ProviderId, &'static str, String);

/// The payments, bounded, with their indexes.
#[derive(Debug)]
pub(crate) struct Payments {
    all: BoundedMap<SimPayment>,
    /// Tally's order id to the ids of its payments, oldest first.
    by_order: HashMap<String, Vec<String>>,
    /// A looked-up value to the payment that last took it.
    by_lookup: HashMap<LookupKey, String>,
    /// The `extra` names each provider's payments are looked up by.
    lookup_names: BTreeMap<ProviderId, &'static [&'static str]>,
}

impl Payments {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            all: BoundedMap::new(capacity),
            by_order: HashMap::new(),
            by_lookup: HashMap::new(),
            lookup_names: BTreeMap::new(),
        }
    }

    /// Index `provider`'s payments by the `extra` values under `names` from now on.
    pub(crate) fn index(&mut self, provider: ProviderId, names: &'static [&'static str]) {
        self.lookup_names.insert(provider, names);
    }

    pub(crate) fn len(&self) -> usize {
        self.all.len()
    }

    pub(crate) fn get(&self, id: &str) -> Option<&SimPayment> {
        self.all.get(id)
    }

    /// Store `payment` (replacing the payment of the same id); returns the oldest payment if it
    /// was dropped to make room.
    pub(crate) fn insert(&mut self, payment: SimPayment) -> Option<SimPayment> {
        if let Some(old) = self.all.get(&payment.id).cloned() {
            self.remove_from_indexes(&old);
        }
        self.add_to_indexes(&payment);
        let (_, dropped) = self.all.insert(payment.id.clone(), payment)?;
        self.remove_from_indexes(&dropped);
        Some(dropped)
    }

    /// Apply `change` to the payment `id`, keeping the indexes right; `None` when unknown.
    pub(crate) fn update<T>(
        &mut self,
        id: &str,
        change: impl FnOnce(&mut SimPayment) -> T,
    ) -> Option<T> {
        let payment = self.all.get_mut(id)?;
        let (order_before, lookups_before) = (
            payment.order_id.clone(),
            lookups(&self.lookup_names, payment),
        );
        let outcome = change(payment);
        debug_assert_eq!(payment.id, id, "a payment keeps its id");
        let (order_after, lookups_after) = (
            payment.order_id.clone(),
            lookups(&self.lookup_names, payment),
        );
        if order_after != order_before {
            self.remove_from_order(&order_before, id);
            self.add_to_order(order_after, id);
        }
        for key in &lookups_before {
            if !lookups_after.contains(key) {
                self.forget_lookup(key, id);
            }
        }
        // A value the payment already had stays with whichever payment took it since.
        for key in lookups_after {
            if !lookups_before.contains(&key) {
                self.by_lookup.insert(key, id.to_owned());
            }
        }
        Some(outcome)
    }

    /// The newest payment of `provider` for Tally's order `order_id`.
    pub(crate) fn newest_for_order(
        &self,
        provider: ProviderId,
        order_id: &str,
    ) -> Option<&SimPayment> {
        self.by_order
            .get(order_id)?
            .iter()
            .filter_map(|id| self.all.get(id))
            .filter(|p| p.provider == provider)
            .max_by_key(|p| p.created_at_ms)
    }

    /// Every payment for Tally's order `order_id`, oldest first.
    pub(crate) fn for_order(&self, order_id: &str) -> impl Iterator<Item = &SimPayment> {
        self.by_order
            .get(order_id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.all.get(id))
    }

    /// The payment of `provider` that last took `value` under `name`, which MUST be one of the
    /// names the provider's payments are indexed by.
    pub(crate) fn looked_up(
        &self,
        provider: ProviderId,
        name: &'static str,
        value: &str,
    ) -> Option<&SimPayment> {
        debug_assert!(
            self.lookup_names
                .get(&provider)
                .is_some_and(|names| names.contains(&name)),
            "{provider:?} payments are not indexed by {name}"
        );
        let id = self.by_lookup.get(&(provider, name, value.to_owned()))?;
        self.all.get(id)
    }

    /// Every payment, newest first.
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = &SimPayment> {
        self.all.newest_first()
    }

    fn add_to_indexes(&mut self, payment: &SimPayment) {
        self.add_to_order(payment.order_id.clone(), &payment.id);
        for key in lookups(&self.lookup_names, payment) {
            self.by_lookup.insert(key, payment.id.clone());
        }
    }

    fn remove_from_indexes(&mut self, payment: &SimPayment) {
        self.remove_from_order(&payment.order_id, &payment.id);
        for key in lookups(&self.lookup_names, payment) {
            self.forget_lookup(&key, &payment.id);
        }
    }

    fn add_to_order(&mut self, order_id: String, id: &str) {
        let ids = self.by_order.entry(order_id).or_default();
        if !ids.iter().any(|known| known == id) {
            ids.push(id.to_owned());
        }
    }

    fn remove_from_order(&mut self, order_id: &str, id: &str) {
        if let Some(ids) = self.by_order.get_mut(order_id) {
            ids.retain(|known| known != id);
            if ids.is_empty() {
                self.by_order.remove(order_id);
            }
        }
    }

    fn forget_lookup(&mut self, key: &LookupKey, id: &str) {
        if self.by_lookup.get(key).is_some_and(|holder| holder == id) {
            self.by_lookup.remove(key);
        }
    }
}

/// `payment`'s values under the names its provider's payments are indexed by.
fn lookups(
    names: &BTreeMap<ProviderId, &'static [&'static str]>,
    payment: &SimPayment,
) -> Vec<LookupKey> {
    let names = names.get(&payment.provider).copied().unwrap_or_default();
    names
        .iter()
        .filter_map(|name| {
            let value = payment.extra.get(*name)?;
            Some((payment.provider, *name, value.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use domain::Currency;

    use super::*;
    use crate::hub::{SimKind, SimStatus};

    const KEY: &str = "idempotencyKey";

    fn payment(id: &str, order_id: &str, key: Option<&str>) -> SimPayment {
        SimPayment {
            id: id.into(),
            provider: ProviderId::CardGateway,
            order_id: order_id.into(),
            amount_minor: 499,
            currency: Currency::Usd,
            kind: SimKind::OneTime,
            status: SimStatus::Open,
            success_url: String::new(),
            cancel_url: String::new(),
            notify_url: String::new(),
            refunded_minor: 0,
            subscription_id: None,
            created_at_ms: 1,
            extra: key
                .map(|k| (KEY.to_owned(), k.to_owned()))
                .into_iter()
                .collect(),
        }
    }

    fn store(capacity: usize) -> Payments {
        let mut store = Payments::new(capacity);
        store.index(ProviderId::CardGateway, &[KEY]);
        store
    }

    fn ids<'a>(payments: impl Iterator<Item = &'a SimPayment>) -> Vec<&'a str> {
        payments.map(|p| p.id.as_str()).collect()
    }

    #[test]
    fn a_full_store_drops_the_oldest_created_payment_from_every_index() {
        let mut store = store(3);
        // Created in this order, which is not the order of their ids as text.
        for (id, order, key) in [
            ("cs_9", "ord_a", "k9"),
            ("cs_10", "ord_b", "k10"),
            ("cs_11", "ord_a", "k11"),
        ] {
            assert_eq!(store.insert(payment(id, order, Some(key))), None);
        }
        let dropped = store.insert(payment("cs_12", "ord_c", Some("k12")));
        assert_eq!(dropped.map(|p| p.id), Some("cs_9".to_owned()));
        assert_eq!(store.len(), 3);
        assert_eq!(store.get("cs_9"), None);
        assert_eq!(
            store.looked_up(ProviderId::CardGateway, KEY, "k9"),
            None,
            "its idempotency key is forgotten"
        );
        assert_eq!(ids(store.for_order("ord_a")), ["cs_11"]);
        assert_eq!(
            ids(store.newest_first()),
            ["cs_12", "cs_11", "cs_10"],
            "newest first"
        );
        for key in ["k10", "k11", "k12"] {
            assert!(store.looked_up(ProviderId::CardGateway, KEY, key).is_some());
        }
    }

    #[test]
    fn a_store_never_holds_more_than_its_capacity_and_its_indexes_shrink_with_it() {
        let mut store = store(100);
        for n in 0..1_000 {
            let key = format!("key_{n}");
            store.insert(payment(&format!("cs_{n}"), &format!("ord_{n}"), Some(&key)));
            assert!(store.len() <= 100);
        }
        assert_eq!(store.len(), 100);
        assert_eq!(store.by_order.len(), 100);
        assert_eq!(store.by_lookup.len(), 100);
        assert_eq!(
            store
                .looked_up(ProviderId::CardGateway, KEY, "key_999")
                .map(|p| p.id.as_str()),
            Some("cs_999")
        );
    }

    #[test]
    fn the_newest_payment_of_an_order_is_the_latest_created_of_its_provider() {
        let mut store = store(10);
        store.insert(payment("cs_9", "ord_a", None));
        store.insert(payment("cs_10", "ord_a", None));
        let mut other = payment("x_1", "ord_a", None);
        other.provider = ProviderId::WalletQr;
        store.insert(other);
        let newest = store.newest_for_order(ProviderId::CardGateway, "ord_a");
        assert_eq!(newest.map(|p| p.id.as_str()), Some("cs_10"));
        let newest = store.newest_for_order(ProviderId::WalletQr, "ord_a");
        assert_eq!(newest.map(|p| p.id.as_str()), Some("x_1"));
        assert_eq!(
            store.newest_for_order(ProviderId::CardGateway, "ord_b"),
            None
        );
    }

    #[test]
    fn a_change_to_a_payment_moves_its_lookups_and_leaves_other_payments_theirs() {
        let mut store = store(10);
        store.insert(payment("cs_1", "ord_a", None));
        store.insert(payment("cs_2", "ord_b", Some("shared")));
        store.update("cs_1", |p| {
            p.extra.insert(KEY.into(), "late".into());
        });
        let found = store.looked_up(ProviderId::CardGateway, KEY, "late");
        assert_eq!(
            found.map(|p| p.id.as_str()),
            Some("cs_1"),
            "a value set later"
        );
        store.update("cs_1", |p| {
            p.extra.insert(KEY.into(), "shared".into());
            p.order_id = "ord_c".into();
        });
        assert_eq!(store.looked_up(ProviderId::CardGateway, KEY, "late"), None);
        let found = store.looked_up(ProviderId::CardGateway, KEY, "shared");
        assert_eq!(
            found.map(|p| p.id.as_str()),
            Some("cs_1"),
            "the last to take it"
        );
        assert_eq!(ids(store.for_order("ord_c")), ["cs_1"]);
        assert_eq!(ids(store.for_order("ord_a")), Vec::<&str>::new());
        store.update("cs_2", |p| p.status = SimStatus::Paid);
        let found = store.looked_up(ProviderId::CardGateway, KEY, "shared");
        assert_eq!(
            found.map(|p| p.id.as_str()),
            Some("cs_1"),
            "a change that leaves a value as it was does not take it back"
        );
        assert_eq!(store.update("nope", |_| ()), None);
    }

    #[test]
    fn a_payment_stored_again_under_its_id_keeps_its_place_and_is_indexed_anew() {
        let mut store = store(2);
        store.insert(payment("cs_1", "ord_a", Some("k1")));
        store.insert(payment("cs_2", "ord_b", None));
        assert_eq!(store.insert(payment("cs_1", "ord_z", Some("k2"))), None);
        assert_eq!(store.len(), 2);
        assert_eq!(ids(store.for_order("ord_z")), ["cs_1"]);
        assert_eq!(ids(store.for_order("ord_a")), Vec::<&str>::new());
        assert_eq!(store.looked_up(ProviderId::CardGateway, KEY, "k1"), None);
        let dropped = store.insert(payment("cs_3", "ord_c", None));
        assert_eq!(
            dropped.map(|p| p.id),
            Some("cs_1".to_owned()),
            "still the oldest"
        );
    }
}
