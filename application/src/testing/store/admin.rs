//! The admin console's port over the in-memory state, following `AdminConsoleStore`'s contract
//! (the SQL store's tests are the reference). The fake renders before and after states as
//! `key=value` lines rather than JSON: tests read the entries, not their text.

use std::collections::BTreeMap;

use async_trait::async_trait;
use domain::{AccountKind, Currency, OrderStatus, Timestamp, UserId};

use super::{InMemoryStore, State};
use crate::accounts::User;
use crate::cursor::{Keyset, KeysetPage};
use crate::ports::{
    AdminConsoleStore, AuditEntry, AuditFacts, AuditValue, CreditTransaction, CustomerSearch,
    EmailKey, GrantCommand, GrantSource, IdMatch, InboxFilter, LedgerEffect, NewAudit, OrderFilter,
    OrderRecord, PaymentTotal, RecordedEvent, SignupGrantOutcome, StoreError, TeamAccountSummary,
    TimeNumberKey, TimeTextKey,
};
use crate::sign_up::SignupIdentity;
use crate::testing::lock;

/// Rows after `keyset.after` in `rows` (already in the list's order, keyed by `key`), one page.
fn page_of<T, K: Clone + PartialOrd>(
    rows: Vec<T>,
    keyset: &Keyset<K>,
    key: impl Fn(&T) -> K,
    descending: bool,
) -> KeysetPage<T, K> {
    let after: Vec<T> = rows
        .into_iter()
        .filter(|row| match &keyset.after {
            None => true,
            Some(k) if descending => key(row) < *k,
            Some(k) => key(row) > *k,
        })
        .take(keyset.fetch() as usize)
        .collect();
    KeysetPage::from_rows(after, keyset.limit, key)
}

fn render(facts: Option<&AuditFacts>) -> Option<String> {
    facts.map(|f| {
        f.iter()
            .map(|(k, v)| match v {
                AuditValue::Text(t) => format!("{k}={t}"),
                AuditValue::Integer(n) => format!("{k}={n}"),
                AuditValue::Null => format!("{k}=null"),
            })
            .collect::<Vec<_>>()
            .join("\n")
    })
}

pub(super) fn push_audit(state: &mut State, entry: &NewAudit) -> i64 {
    let id = state.audit.last().map_or(1, |e| e.id + 1);
    state.audit.push(AuditEntry {
        id,
        admin_id: entry.admin_id.clone(),
        action: entry.action,
        object_kind: entry.object_kind.to_owned(),
        object_id: entry.object_id.clone(),
        before: render(entry.before.as_ref()),
        after: render(entry.after.as_ref()),
        at: entry.at,
    });
    id
}

/// The note of a sign-up grant's ledger entry (the SQL store's words).
const SIGNUP_NOTE: &str = "sign-up credits";
/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// Give `user`, created at `created_at`, the store's sign-up grant in the caller's atomic change
/// (the one that creates the user), by `UserRepository::create_user`'s rule: only with an
/// identity never given one before, and within the UTC day's cap (a capped sign-up is counted).
/// An `admin_adjustment` noted [`SIGNUP_NOTE`] whose lot is keyed by the user.
pub(super) fn give_signup_grant(
    state: &mut State,
    user: &UserId,
    created_at: Timestamp,
    identity: Option<&SignupIdentity>,
) -> Result<SignupGrantOutcome, StoreError> {
    let (Some(grant), Some(identity)) = (state.signup, identity) else {
        return Ok(SignupGrantOutcome::NotEligible);
    };
    if state.signup_identities.contains(identity.as_str()) {
        return Ok(SignupGrantOutcome::AlreadyGranted);
    }
    let day = created_at.unix_millis().div_euclid(DAY_MS);
    let (granted, capped) = state.signup_days.entry(day).or_default();
    if *granted >= grant.daily_cap.get() {
        *capped += 1;
        return Ok(SignupGrantOutcome::DailyCapReached);
    }
    *granted += 1;
    state.signup_identities.insert(identity.as_str().to_owned());
    let command = GrantCommand {
        account_id: domain::AccountId::personal(user),
        amount: grant.amount,
        source: GrantSource::Admin(format!("signup:{user}")),
        expires_at: grant.expires_after_days.map(|days| {
            Timestamp::from_unix_millis(created_at.unix_millis() + i64::from(days) * DAY_MS)
        }),
        now: created_at,
    };
    let promotional = (
        domain::GrantCategory::Promotional,
        domain::GrantPriority::default(),
    );
    if let LedgerEffect::Written(tx) = state.ledger.grant_as(&command, promotional)?
        && let Some(written) = state
            .ledger
            .transactions
            .iter_mut()
            .rev()
            .find(|t| t.id == tx.id)
    {
        written.context.note = Some(SIGNUP_NOTE.to_owned());
    }
    Ok(SignupGrantOutcome::Granted)
}

fn add_total(
    totals: &mut BTreeMap<Currency, (i64, i64)>,
    currency: Currency,
    paid: i64,
    back: i64,
) {
    let entry = totals.entry(currency).or_insert((0, 0));
    entry.0 += paid;
    entry.1 += back;
}

#[async_trait]
impl AdminConsoleStore for InMemoryStore {
    async fn search_users(
        &self,
        search: &CustomerSearch,
        keyset: &Keyset<EmailKey>,
    ) -> Result<KeysetPage<User, EmailKey>, StoreError> {
        let key = |u: &User| (u.email.as_str().to_lowercase(), u.id.to_string());
        let mut found: Vec<User> = lock(&self.0)
            .users
            .values()
            .map(|(u, _)| u.clone())
            .filter(|u| {
                key(u).0.starts_with(&search.email_prefix)
                    || match &search.id {
                        IdMatch::None => false,
                        IdMatch::Exact(id) => u.id.as_str() == id,
                        IdMatch::Prefix(p) => u.id.as_str().starts_with(p.as_str()),
                    }
            })
            .collect();
        found.sort_by_key(key);
        Ok(page_of(found, keyset, key, false))
    }

    async fn list_users(
        &self,
        keyset: &Keyset<TimeTextKey>,
    ) -> Result<KeysetPage<User, TimeTextKey>, StoreError> {
        let key = |u: &User| (u.created_at.unix_millis(), u.id.to_string());
        let mut all: Vec<User> = lock(&self.0)
            .users
            .values()
            .map(|(u, _)| u.clone())
            .collect();
        all.sort_by_key(|u| std::cmp::Reverse(key(u)));
        Ok(page_of(all, keyset, key, true))
    }

    async fn payment_totals(&self, user: &UserId) -> Result<Vec<PaymentTotal>, StoreError> {
        let state = lock(&self.0);
        let mut totals = BTreeMap::new();
        for record in state.orders.values() {
            let order = &record.order;
            let paid = matches!(
                order.status(),
                OrderStatus::Paid { .. }
                    | OrderStatus::PartiallyRefunded { .. }
                    | OrderStatus::Refunded { .. }
            );
            if order.user_id() == user && paid {
                let price = order.plan().price;
                let back = order.refunded().map_or(0, |m| m.amount_minor());
                add_total(&mut totals, price.currency(), price.amount_minor(), back);
            }
        }
        for charge in &state.charges {
            if &charge.user_id == user && charge.order_id.is_none() {
                let (paid, back) = (charge.amount, charge.refunded);
                add_total(
                    &mut totals,
                    paid.currency(),
                    paid.amount_minor(),
                    back.amount_minor(),
                );
            }
        }
        Ok(totals
            .into_iter()
            .map(|(currency, (paid_minor, refunded_minor))| PaymentTotal {
                currency,
                paid_minor,
                refunded_minor,
            })
            .collect())
    }

    async fn orders_page(
        &self,
        filter: &OrderFilter,
        keyset: &Keyset<TimeTextKey>,
    ) -> Result<KeysetPage<OrderRecord, TimeTextKey>, StoreError> {
        let key = |r: &OrderRecord| (r.order.created_at().unix_millis(), r.order.id().to_string());
        let mut all: Vec<OrderRecord> = lock(&self.0)
            .orders
            .values()
            .filter(|r| {
                let o = &r.order;
                filter.status.is_none_or(|s| s == o.status().kind())
                    && filter.provider.is_none_or(|p| p == o.provider())
                    && filter.user_id.as_ref().is_none_or(|u| u == o.user_id())
            })
            .cloned()
            .collect();
        all.sort_by_key(|r| std::cmp::Reverse(key(r)));
        Ok(page_of(all, keyset, key, true))
    }

    async fn team_accounts(
        &self,
        keyset: &Keyset<TimeTextKey>,
    ) -> Result<KeysetPage<TeamAccountSummary, TimeTextKey>, StoreError> {
        let key =
            |t: &TeamAccountSummary| (t.account.created_at.unix_millis(), t.account.id.to_string());
        let state = lock(&self.0);
        let mut all: Vec<TeamAccountSummary> = state
            .accounts
            .values()
            .filter(|a| a.kind == AccountKind::Team)
            .map(|a| TeamAccountSummary {
                account: a.clone(),
                balance: state.ledger.balance(&a.id),
                members: u64::try_from(state.members.keys().filter(|(id, _)| *id == a.id).count())
                    .unwrap_or(u64::MAX),
            })
            .collect();
        all.sort_by_key(|t| std::cmp::Reverse(key(t)));
        Ok(page_of(all, keyset, key, true))
    }

    async fn transactions_page(
        &self,
        user: &UserId,
        keyset: &Keyset<TimeNumberKey>,
    ) -> Result<KeysetPage<CreditTransaction, TimeNumberKey>, StoreError> {
        let key = |t: &CreditTransaction| (t.created_at.unix_millis(), t.id);
        let mut all: Vec<CreditTransaction> = lock(&self.0)
            .ledger
            .transactions
            .iter()
            .filter(|t| t.account_id.is_personal_of(user))
            .cloned()
            .collect();
        all.sort_by_key(|t| std::cmp::Reverse(key(t)));
        Ok(page_of(all, keyset, key, true))
    }

    async fn inbox_page(
        &self,
        filter: &InboxFilter,
        keyset: &Keyset<i64>,
    ) -> Result<KeysetPage<RecordedEvent, i64>, StoreError> {
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
        Ok(page_of(all, keyset, |e| e.id, true))
    }

    async fn find_recorded_event(&self, id: i64) -> Result<Option<RecordedEvent>, StoreError> {
        let index = usize::try_from(id - 1).ok();
        Ok(index.and_then(|i| {
            lock(&self.0).inbox_entries.get(i).map(|e| RecordedEvent {
                id,
                entry: e.clone(),
            })
        }))
    }

    async fn record_audit(&self, entry: &NewAudit) -> Result<i64, StoreError> {
        Ok(push_audit(&mut lock(&self.0), entry))
    }

    async fn audit_page(
        &self,
        keyset: &Keyset<i64>,
    ) -> Result<KeysetPage<AuditEntry, i64>, StoreError> {
        let all: Vec<AuditEntry> = lock(&self.0).audit.iter().rev().cloned().collect();
        Ok(page_of(all, keyset, |e| e.id, true))
    }
}
