//! Automatic top-up in memory: the rules, saved methods and top-ups, with the guards the
//! database keeps (one top-up in flight per account, the rule's compare-and-set). Spends here
//! ask for no top-up: that happens in the SQL store's posting path, tested through it.

use async_trait::async_trait;
use domain::{AccountId, DisabledReason, OrderId, TopUpState, TopUpStatus};

use super::{InMemoryStore, State, lock};
use crate::ports::{
    AutoTopUpRecord, PutAutoTopUp, PutAutoTopUpError, RuleEffect, SavedMethodRecord, StartTopUp,
    StoreError, TopUpRecord, TopUpStore, TopUpWrite, may_move,
};

fn with_method(s: &State, record: &AutoTopUpRecord) -> AutoTopUpRecord {
    let mut record = record.clone();
    if let Some(id) = record.method.as_ref().map(|m| m.id.clone()) {
        record.method = s.saved_methods.iter().find(|m| m.id == id).cloned();
    }
    record.state.has_method = record.method.is_some();
    record
}

fn rule_effect(s: &mut State, account: &AccountId, effect: RuleEffect) {
    let Some(rule) = s.auto_top_ups.get_mut(account) else {
        return;
    };
    let give_back = |state: &mut TopUpState, money: i64| {
        state.month_count = state.month_count.saturating_sub(1);
        state.month_amount = (state.month_amount - money).max(0);
    };
    match effect {
        RuleEffect::Keep => return,
        RuleEffect::Reset => {
            rule.state.declines = 0;
            rule.state.cool_off_until = None;
        }
        RuleEffect::Declined {
            after,
            give_back: money,
        } => {
            give_back(&mut rule.state, money);
            match after {
                domain::AfterDecline::CoolOff { until, declines } => {
                    rule.state.declines = declines;
                    rule.state.cool_off_until = Some(until);
                }
                domain::AfterDecline::Disable { declines } => {
                    rule.state.declines = declines;
                    rule.rule.enabled = false;
                    rule.disabled_reason = Some(DisabledReason::Declines);
                }
            }
        }
        RuleEffect::CoolOff {
            until,
            give_back: money,
        } => {
            rule.state.cool_off_until = Some(until);
            if let Some(money) = money {
                give_back(&mut rule.state, money);
            }
        }
    }
    rule.version += 1;
}

/// A change set's top-up part.
pub(super) fn write(s: &mut State, write: &TopUpWrite) {
    match write {
        TopUpWrite::MethodSaved(saved) => {
            if s.saved_methods.iter().any(|m| m.order_id == saved.order_id) {
                return;
            }
            s.saved_methods.push(saved.clone());
            if let Some(rule) = s.auto_top_ups.get_mut(&saved.account_id) {
                rule.method = Some(saved.clone());
                rule.version += 1;
            }
        }
        TopUpWrite::Settle {
            id,
            account,
            to,
            reason,
            action_url,
            rule,
        } => {
            let Some(top_up) = s
                .top_ups
                .iter_mut()
                .find(|t| &t.id == id && &t.account_id == account)
            else {
                return;
            };
            if !may_move(top_up.status, *to) {
                return;
            }
            top_up.status = *to;
            top_up.reason = reason.clone().or_else(|| top_up.reason.clone());
            top_up.action_url = action_url.clone().or_else(|| top_up.action_url.clone());
            rule_effect(s, account, *rule);
        }
        TopUpWrite::Disable { account, reason } => {
            if let Some(rule) = s.auto_top_ups.get_mut(account) {
                rule.rule.enabled = false;
                rule.disabled_reason = Some(*reason);
                rule.version += 1;
            }
        }
        TopUpWrite::RemoveMethod { account, id } => {
            let Some(method) = s
                .saved_methods
                .iter_mut()
                .find(|m| &m.id == id && &m.account_id == account)
            else {
                return;
            };
            method.removed_at = Some(method.created_at);
            if let Some(rule) = s.auto_top_ups.get_mut(account)
                && rule.method.as_ref().is_some_and(|m| &m.id == id)
            {
                rule.method = None;
                rule.rule.enabled = false;
                rule.disabled_reason = Some(DisabledReason::MethodRemoved);
                rule.version += 1;
            }
        }
    }
}

#[async_trait]
impl TopUpStore for InMemoryStore {
    async fn auto_top_up(
        &self,
        account: &AccountId,
    ) -> Result<Option<AutoTopUpRecord>, StoreError> {
        let s = lock(&self.0);
        Ok(s.auto_top_ups.get(account).map(|r| with_method(&s, r)))
    }

    async fn saved_methods(
        &self,
        account: &AccountId,
    ) -> Result<Vec<SavedMethodRecord>, StoreError> {
        let s = lock(&self.0);
        let mut methods: Vec<_> = s
            .saved_methods
            .iter()
            .filter(|m| &m.account_id == account)
            .cloned()
            .collect();
        methods.reverse();
        Ok(methods)
    }

    async fn put_auto_top_up(
        &self,
        put: &PutAutoTopUp,
    ) -> Result<AutoTopUpRecord, PutAutoTopUpError> {
        let mut s = lock(&self.0);
        let current = s.auto_top_ups.get(&put.account_id).cloned();
        if current.as_ref().map(|c| c.version) != put.expected_version {
            return Err(PutAutoTopUpError::Conflict);
        }
        let method = match &put.method_id {
            None => None,
            Some(id) => Some(
                s.saved_methods
                    .iter()
                    .find(|m| {
                        &m.id == id && m.account_id == put.account_id && m.removed_at.is_none()
                    })
                    .cloned()
                    .ok_or(PutAutoTopUpError::NoSuchMethod)?,
            ),
        };
        let fresh = TopUpState {
            month_start: domain::LimitWindow::Month.start_of(put.at),
            month_count: 0,
            month_amount: 0,
            declines: 0,
            cool_off_until: None,
            has_method: method.is_some(),
        };
        let mut state = current.as_ref().map_or(fresh, |c| c.state);
        if put.rule.enabled {
            state.declines = 0;
            state.cool_off_until = None;
        }
        let record = AutoTopUpRecord {
            account_id: put.account_id.clone(),
            rule: put.rule.clone(),
            state,
            method,
            disabled_reason: current
                .as_ref()
                .and_then(|c| c.disabled_reason)
                .filter(|_| !put.rule.enabled),
            version: current.map_or(1, |c| c.version + 1),
            updated_by: Some(put.by.clone()),
            updated_at: put.at,
        };
        s.auto_top_ups
            .insert(put.account_id.clone(), record.clone());
        Ok(record)
    }

    async fn claim_top_ups(
        &self,
        _now: domain::Timestamp,
        _times: (i64, i64),
        limit: u32,
    ) -> Result<Vec<TopUpRecord>, StoreError> {
        let s = lock(&self.0);
        Ok(s.top_ups
            .iter()
            .filter(|t| t.status == TopUpStatus::Requested)
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect())
    }

    async fn start_top_up(&self, start: &StartTopUp) -> Result<bool, StoreError> {
        let mut s = lock(&self.0);
        let account = &start.top_up.account_id;
        if s.auto_top_ups.get(account).map(|r| r.version) != Some(start.expected_version) {
            return Ok(false);
        }
        let Some(top_up) = s.top_ups.iter_mut().find(|t| t.id == start.top_up.id) else {
            return Ok(false);
        };
        if top_up.status != TopUpStatus::Requested {
            return Ok(false);
        }
        top_up.status = TopUpStatus::Charging;
        top_up.order_id = Some(start.order.id().clone());
        top_up.amount = Some(start.order.plan().price);
        top_up.credits = start.order.plan().credits;
        if let Some(rule) = s.auto_top_ups.get_mut(account) {
            rule.state = start.state;
            rule.version += 1;
        }
        super::orders_insert(&mut s, &start.order);
        Ok(true)
    }

    async fn keep_charge_reference(
        &self,
        order: &OrderId,
        reference: &str,
    ) -> Result<(), StoreError> {
        let mut s = lock(&self.0);
        if let Some(record) = s.orders.get_mut(order)
            && record.checkout.is_none()
            && record.charge_reference.is_none()
        {
            record.charge_reference = Some(reference.to_owned());
        }
        Ok(())
    }

    async fn top_up_of_order(&self, order: &OrderId) -> Result<Option<TopUpRecord>, StoreError> {
        let s = lock(&self.0);
        Ok(s.top_ups
            .iter()
            .find(|t| t.order_id.as_ref() == Some(order))
            .cloned())
    }

    async fn top_ups(
        &self,
        account: &AccountId,
        limit: u32,
    ) -> Result<Vec<TopUpRecord>, StoreError> {
        let s = lock(&self.0);
        Ok(s.top_ups
            .iter()
            .rev()
            .filter(|t| &t.account_id == account)
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect())
    }
}
