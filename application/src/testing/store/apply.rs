//! The in-memory [`ChangeStore::apply`]: every part of a set on a draft of the state, kept
//! whole or dropped whole.

use async_trait::async_trait;
use domain::{Credits, Plan, Timestamp};

use super::{InMemoryStore, State, admin::push_audit, apply_event_parts, keep_entitlements};
use crate::ports::{
    AdminWrite, Applied, ApplyError, ChangeSet, ChangeStore, Done, ImportReport, LedgerOp,
    LedgerOutcome, Listing, ReservationStatus, StoreError, StoredPlan,
};

/// An administrator's configuration write on `s`.
pub(super) fn admin_write(
    s: &mut State,
    write: AdminWrite<'_>,
    at: Timestamp,
) -> Result<Option<ImportReport>, StoreError> {
    match write {
        AdminWrite::ImportPlans(plans) => return Ok(Some(import(s, plans))),
        AdminWrite::CreatePlan(plan) => {
            if s.plans.contains_key(plan.plan.id()) {
                return Err(StoreError::Conflict("plan exists".into()));
            }
            s.plans.insert(plan.plan.id().clone(), plan.clone());
        }
        AdminWrite::UpdatePlan(plan) => {
            let stored = s
                .plans
                .get_mut(plan.plan.id())
                .ok_or(StoreError::NotFound)?;
            *stored = plan.clone();
        }
        AdminWrite::DeletePlan(id) => {
            s.plans.remove(id).ok_or(StoreError::NotFound)?;
        }
        AdminWrite::ReorderPlans(ids) => {
            let count = i32::try_from(ids.len()).unwrap_or(i32::MAX);
            for (position, id) in ids.iter().enumerate() {
                let plan = s.plans.get_mut(id).ok_or(StoreError::NotFound)?;
                plan.listing.sort_order = i32::try_from(position).unwrap_or(i32::MAX);
            }
            for plan in s.plans.values_mut().filter(|p| !ids.contains(p.plan.id())) {
                plan.listing.sort_order = plan.listing.sort_order.saturating_add(count);
            }
        }
        AdminWrite::CreateApiKey(key, hash) => {
            if s.api_keys.iter().any(|(k, h)| k.id == key.id || h == hash) {
                return Err(StoreError::Conflict("api key exists".into()));
            }
            s.api_keys.push((key.clone(), hash.clone()));
        }
        AdminWrite::RevokeApiKey(id) => {
            let (key, _) = s
                .api_keys
                .iter_mut()
                .find(|(k, _)| k.id == id)
                .ok_or(StoreError::NotFound)?;
            key.revoked_at.get_or_insert(at);
        }
        AdminWrite::AllowPlan(allowance) => {
            let key = (allowance.user_id.clone(), allowance.plan_id.clone());
            s.plan_allowances
                .entry(key)
                .or_insert_with(|| allowance.clone());
        }
        AdminWrite::RemovePlanAllowance(user, plan) => {
            s.plan_allowances.remove(&(user.clone(), plan.clone()));
        }
        AdminWrite::AddSpendLimit(new) => {
            super::limits::add_limit(s, new).map_err(StoreError::from)?;
        }
        AdminWrite::RemoveSpendLimit(account, id) => super::limits::remove_limit(s, account, id)
            .then_some(())
            .ok_or(StoreError::NotFound)?,
        AdminWrite::CreatePromoCode(code) => super::promo::create(s, code)?,
        AdminWrite::SetPromoCodeActive(id, active) => super::promo::set_active(s, id, active)?,
    }
    Ok(None)
}

/// Insert or replace `plans` in `s`, keeping stored listings; new ones listed last.
fn import(s: &mut State, plans: &[Plan]) -> ImportReport {
    let mut report = ImportReport::default();
    for plan in plans {
        match s.plans.get_mut(plan.id()) {
            Some(stored) => {
                stored.plan = plan.clone();
                report.updated += 1;
            }
            None => {
                let listing = Listing {
                    sort_order: i32::try_from(s.plans.len()).unwrap_or(i32::MAX),
                    locales: Vec::new(),
                };
                let stored = StoredPlan {
                    plan: plan.clone(),
                    listing,
                };
                s.plans.insert(plan.id().clone(), stored);
                report.created += 1;
            }
        }
    }
    report
}

/// One ledger operation on `s`.
fn ledger_op(s: &mut State, op: &LedgerOp) -> Result<LedgerOutcome, ApplyError> {
    Ok(match op {
        LedgerOp::Grant(c) => LedgerOutcome::Effect(s.ledger.grant(c)?),
        LedgerOp::Clawback(c) => LedgerOutcome::Effect(s.ledger.clawback(c)?),
        LedgerOp::Adjust { command, admin } => {
            LedgerOutcome::Effect(s.ledger.adjust_as(admin, command)?)
        }
        LedgerOp::Consume(c) => {
            if let Some(member) = &c.member_id {
                super::teams::member_spend(s, &c.account_id, member, c.amount, c.now)?;
            }
            let (tx, replay) = s.ledger.consume(c)?;
            // A replay counts nothing again (a refusal drops the whole draft).
            if replay == crate::ports::Replay::Fresh {
                let spend = c.context.spent_as(c.member_id.as_ref());
                super::limits::count(s, &c.account_id, &spend, c.amount, c.now)?;
            }
            LedgerOutcome::Spent(tx, replay)
        }
        LedgerOp::Reserve(c) => {
            // As in the database: the reservation row's foreign key to its account fails first.
            let known = match c.account_id.owner() {
                Some(user) => s.users.contains_key(&user),
                None => s.accounts.contains_key(&c.account_id),
            };
            if !known {
                return Err(StoreError::Conflict("refers to a missing row".into()).into());
            }
            if let Some(member) = &c.member_id {
                super::teams::member_spend(s, &c.account_id, member, c.amount, c.now)?;
            }
            let (r, replay) = s.ledger.reserve(c)?;
            if replay == crate::ports::Replay::Fresh {
                let spend = c.context.spent_as(c.member_id.as_ref());
                let counted = super::limits::count(s, &c.account_id, &spend, c.amount, c.now)?;
                s.hold_limit_counts.insert(r.id.clone(), counted);
            }
            LedgerOutcome::Held(r, replay)
        }
        LedgerOp::Settle {
            account,
            member,
            id,
            actual,
            order,
            now,
        } => settle(s, (account, member.as_ref()), id, (*actual, *order), *now)?,
        LedgerOp::Release {
            account,
            member,
            id,
            now,
        } => release(s, (account, member.as_ref()), id, *now)?,
    })
}

/// A settle on `s`: the unused part of the hold goes back to the limits it counted against.
fn settle(
    s: &mut State,
    (account, member): (&domain::AccountId, Option<&domain::UserId>),
    id: &domain::ReservationId,
    actual: (Credits, domain::SpendOrder),
    now: Timestamp,
) -> Result<LedgerOutcome, ApplyError> {
    let (r, replay) = s.ledger.settle((account, member), id, actual, now)?;
    if let (ReservationStatus::Settled { charged, .. }, crate::ports::Replay::Fresh) =
        (&r.status, replay)
    {
        let unused = r.held.checked_sub(*charged).unwrap_or(Credits::ZERO);
        super::limits::give_back(s, id, Some(unused));
    }
    Ok(LedgerOutcome::Held(r, replay))
}

/// A release on `s`: the whole hold goes back to the limits and the member's window it counted
/// in.
fn release(
    s: &mut State,
    (account, member): (&domain::AccountId, Option<&domain::UserId>),
    id: &domain::ReservationId,
    now: Timestamp,
) -> Result<LedgerOutcome, ApplyError> {
    let held = s.ledger.pending_hold(account, id);
    let (r, replay) = s
        .ledger
        .release(account, member, id, now, ReservationStatus::Released)?;
    if replay == crate::ports::Replay::Fresh {
        super::limits::give_back(s, id, None);
    }
    if let (Some(hold), crate::ports::Replay::Fresh) = (held, replay)
        && let Some(holder) = &hold.member_id
        && let Some(window) = super::teams::window_of(s, account, holder, hold.created_at)
    {
        super::teams::member_give_back(s, account, holder, window, hold.held, now);
    }
    Ok(LedgerOutcome::Held(r, replay))
}

/// Every part of `set` on `s` (the caller keeps or drops `s` whole). This fake keeps no host
/// events.
fn apply_set(s: &mut State, set: &ChangeSet<'_>) -> Result<Applied, ApplyError> {
    if let Some(entry) = &set.inbox {
        if !s.inbox.insert((entry.provider, entry.event_id.clone())) {
            return Ok(Applied::Duplicate);
        }
        s.inbox_entries.push(entry.clone());
    }
    apply_event_parts(s, set)?;
    let mut done = Done::default();
    if let Some(write) = set.admin {
        done.imported = admin_write(s, write, set.at)?;
    }
    if let Some(new) = &set.promo {
        super::promo::redeem(s, new)?;
    }
    if let Some(write) = &set.top_up {
        super::top_up::write(s, write);
    }
    for op in &set.ledger {
        done.ledger.push(ledger_op(s, op)?);
    }
    if let Some(told) = &set.entitlements {
        keep_entitlements(s, &told.write)?;
    }
    if let Some(entry) = set.audit.as_ref().and_then(|audit| audit.entry(&done)) {
        push_audit(s, &entry);
    }
    Ok(Applied::Done(done))
}

#[async_trait]
impl ChangeStore for InMemoryStore {
    async fn apply(&self, set: ChangeSet<'_>) -> Result<Applied, ApplyError> {
        self.atomically(|s| apply_set(s, &set))
    }
}
