//! The in-memory credit ledger: balances, append-only transactions, grant lots, reservations.

use std::collections::BTreeMap;

use domain::ledger::{self, GrantLot};
use domain::{
    AccountId, CreditDelta, Credits, ReservationId, SubscriptionId, Timestamp, TransactionKind,
    UserId,
};

use crate::ports::{
    AdjustCommand, ClawbackCommand, ConsumeCommand, CreditTransaction, GrantCommand, GrantSource,
    LedgerEffect, Replay, Reservation, ReservationError, ReservationStatus, ReserveCommand,
    SpendError, StoreError, UsageContext,
};

#[derive(Debug, Clone)]
pub(super) struct Lot {
    lot: GrantLot,
    user: AccountId,
    source: String,
    /// What the lot was granted with.
    granted: Credits,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Ledger {
    pub(super) balances: BTreeMap<AccountId, Credits>,
    pub(super) transactions: Vec<CreditTransaction>,
    lots: Vec<Lot>,
    reservations: BTreeMap<ReservationId, (Reservation, String, String)>,
    spend_keys: BTreeMap<(AccountId, String), (String, i64)>,
    adjust_keys: BTreeMap<(AccountId, String), String>,
    /// An administrator's adjustment keys: `(admin, key)` to the target user and request.
    admin_keys: BTreeMap<(UserId, String), String>,
}

fn source_key(source: &GrantSource) -> String {
    match source {
        GrantSource::Order(o) => format!("order:{o}"),
        GrantSource::OrderBonus(o) => format!("order:{o}:bonus"),
        GrantSource::SubscriptionPeriod(s, p) => {
            format!("subscription_period:{s}:{}", p.start().unix_millis())
        }
        GrantSource::Admin(r) => format!("admin:{r}"),
        GrantSource::Promo { redemption, .. } => format!("admin:promo:{redemption}"),
        GrantSource::PlanChange(s, asked) => {
            format!("subscription_period:{s}:change:{}", asked.unix_millis())
        }
    }
}

impl Ledger {
    pub(super) fn balance(&self, user: &AccountId) -> Credits {
        self.balances.get(user).copied().unwrap_or_default()
    }

    fn write(
        &mut self,
        user: &AccountId,
        kind: TransactionKind,
        amount: CreditDelta,
        context: UsageContext,
        now: Timestamp,
    ) -> Result<CreditTransaction, SpendError> {
        let after = ledger::post(self.balance(user), kind, amount).map_err(|e| match e {
            ledger::LedgerError::InsufficientCredits {
                requested,
                available,
            } => SpendError::Insufficient {
                requested,
                available,
            },
            other => SpendError::Store(StoreError::Unexpected(anyhow::anyhow!(other.to_string()))),
        })?;
        self.balances.insert(user.clone(), after);
        let tx = CreditTransaction {
            id: i64::try_from(self.transactions.len()).unwrap_or(i64::MAX) + 1,
            account_id: user.clone(),
            member_id: None,
            kind,
            amount,
            balance_after: after,
            context,
            created_at: now,
        };
        self.transactions.push(tx.clone());
        Ok(tx)
    }

    fn draw_lots(&mut self, order: domain::SpendOrder, user: &AccountId, amount: Credits) {
        let lots: Vec<GrantLot> = self
            .lots
            .iter()
            .filter(|l| &l.user == user)
            .map(|l| l.lot.clone())
            .collect();
        for (id, take) in ledger::allocate_spend_in(order, &lots, amount) {
            if let Some(l) = self.lots.iter_mut().find(|l| l.lot.id == id) {
                l.lot.remaining = l.lot.remaining.checked_sub(take).unwrap_or_default();
            }
        }
    }

    pub(super) fn consume(
        &mut self,
        c: &ConsumeCommand,
    ) -> Result<(CreditTransaction, Replay), SpendError> {
        let key = (c.account_id.clone(), c.idempotency.key.as_str().to_owned());
        if let Some((hash, id)) = self.spend_keys.get(&key) {
            if hash != &c.idempotency.request_hash {
                return Err(SpendError::IdempotencyConflict);
            }
            let tx = self
                .transactions
                .iter()
                .find(|t| t.id == *id)
                .cloned()
                .ok_or(StoreError::NotFound)?;
            return Ok((tx, Replay::Replayed));
        }
        let mut tx = self.write(
            &c.account_id,
            TransactionKind::Consumption,
            c.amount.as_decrease(),
            c.context.clone(),
            c.now,
        )?;
        self.by_member(&mut tx, c.member_id.as_ref());
        self.draw_lots(c.spend_order, &c.account_id, c.amount);
        self.spend_keys
            .insert(key, (c.idempotency.request_hash.clone(), tx.id));
        Ok((tx, Replay::Fresh))
    }

    pub(super) fn reserve(
        &mut self,
        c: &ReserveCommand,
    ) -> Result<(Reservation, Replay), SpendError> {
        let existing = self
            .reservations
            .values()
            .find(|(r, _, key)| r.account_id == c.account_id && key == c.idempotency.key.as_str());
        if let Some((r, hash, _)) = existing {
            if hash != &c.idempotency.request_hash {
                return Err(SpendError::IdempotencyConflict);
            }
            return Ok((r.clone(), Replay::Replayed));
        }
        let context = UsageContext {
            reservation_id: Some(c.reservation_id.clone()),
            ..c.context.clone()
        };
        let mut tx = self.write(
            &c.account_id,
            TransactionKind::ReservationHold,
            c.amount.as_decrease(),
            context,
            c.now,
        )?;
        self.by_member(&mut tx, c.member_id.as_ref());
        let r = Reservation {
            id: c.reservation_id.clone(),
            account_id: c.account_id.clone(),
            member_id: c.member_id.clone(),
            held: c.amount,
            status: ReservationStatus::Pending,
            context: c.context.clone(),
            created_at: c.now,
            expires_at: c.expires_at,
        };
        let entry = (
            r.clone(),
            c.idempotency.request_hash.clone(),
            c.idempotency.key.as_str().to_owned(),
        );
        self.reservations.insert(c.reservation_id.clone(), entry);
        Ok((r, Replay::Fresh))
    }

    fn pending(
        &self,
        user: &AccountId,
        id: &ReservationId,
    ) -> Result<Reservation, ReservationError> {
        self.reservations
            .get(id)
            .filter(|(r, ..)| &r.account_id == user)
            .map(|(r, ..)| r.clone())
            .ok_or(ReservationError::NotFound)
    }

    fn set_status(&mut self, id: &ReservationId, status: ReservationStatus) -> Reservation {
        let entry = self.reservations.get_mut(id).expect("checked by pending()");
        entry.0.status = status;
        entry.0.clone()
    }

    fn resolve_context(r: &Reservation) -> UsageContext {
        UsageContext {
            reservation_id: Some(r.id.clone()),
            ..r.context.clone()
        }
    }

    /// A hold as it stands (for the member's count a release gives back).
    pub(super) fn pending_hold(&self, user: &AccountId, id: &ReservationId) -> Option<Reservation> {
        self.pending(user, id).ok()
    }

    /// Whether `by` may resolve `r`: on a personal account its user (naming no member), on a
    /// team's the member who holds it. (The SQL store also lets the team's owners and admins
    /// resolve a member's hold, and lets a member's overrun spend within their limit; this fake
    /// settles a member's hold within what it holds.)
    fn resolvable_by(r: &Reservation, by: Option<&UserId>) -> bool {
        r.member_id.as_ref() == by
    }

    /// Set the member of the transaction `tx` (the last written).
    fn by_member(&mut self, tx: &mut CreditTransaction, member: Option<&UserId>) {
        tx.member_id = member.cloned();
        if let Some(last) = self.transactions.last_mut() {
            last.member_id = member.cloned();
        }
    }

    pub(super) fn settle(
        &mut self,
        (user, by): (&AccountId, Option<&UserId>),
        id: &ReservationId,
        (actual, order): (Credits, domain::SpendOrder),
        now: Timestamp,
    ) -> Result<(Reservation, Replay), ReservationError> {
        let r = self.pending(user, id)?;
        if !Self::resolvable_by(&r, by) {
            return Err(ReservationError::NotFound);
        }
        match r.status {
            ReservationStatus::Settled { actual: a, .. } if a == actual => {
                return Ok((r, Replay::Replayed));
            }
            ReservationStatus::Pending => {}
            other => return Err(ReservationError::AlreadyResolved(other.code())),
        }
        let available = match r.member_id {
            None => self.balance(user),
            Some(_) => Credits::ZERO,
        };
        let s = ledger::settle(r.held, actual, available);
        if s.amount.hundredths() != 0 {
            let mut tx = self
                .write(
                    user,
                    TransactionKind::ReservationSettle,
                    s.amount,
                    Self::resolve_context(&r),
                    now,
                )
                .map_err(spend_to_reservation)?;
            self.by_member(&mut tx, r.member_id.as_ref());
        }
        self.draw_lots(order, user, s.charged);
        Ok((
            self.set_status(
                id,
                ReservationStatus::Settled {
                    actual,
                    charged: s.charged,
                },
            ),
            Replay::Fresh,
        ))
    }

    pub(super) fn release(
        &mut self,
        user: &AccountId,
        by: Option<&UserId>,
        id: &ReservationId,
        now: Timestamp,
        status: ReservationStatus,
    ) -> Result<(Reservation, Replay), ReservationError> {
        let r = self.pending(user, id)?;
        if by.is_some() && !Self::resolvable_by(&r, by) {
            return Err(ReservationError::NotFound);
        }
        match r.status {
            s if s == status => return Ok((r, Replay::Replayed)),
            ReservationStatus::Pending => {}
            other => return Err(ReservationError::AlreadyResolved(other.code())),
        }
        let mut tx = self
            .write(
                user,
                TransactionKind::ReservationRelease,
                r.held.as_increase(),
                Self::resolve_context(&r),
                now,
            )
            .map_err(spend_to_reservation)?;
        self.by_member(&mut tx, r.member_id.as_ref());
        Ok((self.set_status(id, status), Replay::Fresh))
    }

    pub(super) fn pending_reservations(&self, user: &AccountId) -> Vec<Reservation> {
        self.reservations
            .values()
            .map(|(r, ..)| r)
            .filter(|r| &r.account_id == user && r.status == ReservationStatus::Pending)
            .cloned()
            .collect()
    }

    pub(super) fn expire_reservations(&mut self, now: Timestamp, limit: u32) -> u32 {
        let due: Vec<(AccountId, ReservationId)> = self
            .reservations
            .values()
            .map(|(r, ..)| r)
            .filter(|r| r.status == ReservationStatus::Pending && r.expires_at <= now)
            .take(limit as usize)
            .map(|r| (r.account_id.clone(), r.id.clone()))
            .collect();
        let mut n = 0;
        for (user, id) in due {
            if self
                .release(&user, None, &id, now, ReservationStatus::Expired)
                .is_ok()
            {
                n += 1;
            }
        }
        n
    }

    pub(super) fn grant(&mut self, c: &GrantCommand) -> Result<LedgerEffect, StoreError> {
        self.grant_as(c, (c.source.category(), domain::GrantPriority::default()))
    }

    /// [`Self::grant`] of credits that are `category`, at `priority` in spend order.
    pub(super) fn grant_as(
        &mut self,
        c: &GrantCommand,
        (category, priority): (domain::GrantCategory, domain::GrantPriority),
    ) -> Result<LedgerEffect, StoreError> {
        let key = source_key(&c.source);
        if self.lots.iter().any(|l| l.source == key) {
            return Ok(LedgerEffect::Nothing);
        }
        let (kind, context) = match &c.source {
            GrantSource::Order(o) | GrantSource::OrderBonus(o) => (
                TransactionKind::PurchaseGrant,
                UsageContext {
                    order_id: Some(o.clone()),
                    ..UsageContext::default()
                },
            ),
            GrantSource::SubscriptionPeriod(s, _) | GrantSource::PlanChange(s, _) => (
                TransactionKind::SubscriptionGrant,
                UsageContext {
                    subscription_id: Some(s.clone()),
                    ..UsageContext::default()
                },
            ),
            GrantSource::Admin(r) => (
                TransactionKind::AdminAdjustment,
                UsageContext {
                    note: Some(r.clone()),
                    ..UsageContext::default()
                },
            ),
            GrantSource::Promo { code, .. } => (
                TransactionKind::AdminAdjustment,
                UsageContext {
                    note: Some(domain::promo::grant_note(code)),
                    ..UsageContext::default()
                },
            ),
        };
        let context = UsageContext {
            grant_category: Some(category),
            ..context
        };
        let tx = self
            .write(&c.account_id, kind, c.amount.as_increase(), context, c.now)
            .map_err(spend_to_store)?;
        let lot = GrantLot {
            id: tx.id,
            remaining: c.amount,
            expires_at: c.expires_at,
            granted_at: c.now,
            category,
            priority,
        };
        self.lots.push(Lot {
            lot,
            user: c.account_id.clone(),
            source: key,
            granted: c.amount,
        });
        Ok(LedgerEffect::Written(tx))
    }

    /// The credits the lot of `source` was granted with.
    pub(super) fn granted_by(&self, source: &GrantSource) -> Option<Credits> {
        let key = source_key(source);
        self.lots
            .iter()
            .find(|l| l.source == key)
            .map(|l| l.granted)
    }

    pub(super) fn change_grants(&self, subscription: &SubscriptionId) -> Vec<(Timestamp, Credits)> {
        let prefix = format!("subscription_period:{subscription}:change:");
        let mut lots: Vec<_> = self
            .lots
            .iter()
            .filter_map(|l| {
                let asked = l.source.strip_prefix(&prefix)?.parse().ok()?;
                Some((Timestamp::from_unix_millis(asked), l.granted))
            })
            .collect();
        lots.sort_by_key(|(asked, _)| *asked);
        lots
    }

    pub(super) fn clawback(&mut self, c: &ClawbackCommand) -> Result<LedgerEffect, StoreError> {
        let key = source_key(&c.source);
        let Some(index) = self.lots.iter().position(|l| l.source == key) else {
            return Ok(LedgerEffect::Nothing);
        };
        let t = ledger::take_back(
            c.wanted,
            self.lots[index].lot.remaining,
            self.balance(&c.account_id),
        );
        if t.taken.is_zero() {
            return Ok(LedgerEffect::Nothing);
        }
        let context = match &c.source {
            GrantSource::Order(order) | GrantSource::OrderBonus(order) => UsageContext {
                order_id: Some(order.clone()),
                ..UsageContext::default()
            },
            GrantSource::SubscriptionPeriod(subscription, _)
            | GrantSource::PlanChange(subscription, _) => UsageContext {
                subscription_id: Some(subscription.clone()),
                ..UsageContext::default()
            },
            GrantSource::Admin(_) | GrantSource::Promo { .. } => UsageContext::default(),
        };
        let tx = self
            .write(
                &c.account_id,
                TransactionKind::RefundClawback,
                t.taken.as_decrease(),
                context,
                c.now,
            )
            .map_err(spend_to_store)?;
        let lot = &mut self.lots[index].lot;
        lot.remaining = lot.remaining.checked_sub(t.taken).unwrap_or_default();
        Ok(LedgerEffect::Written(tx))
    }

    /// `user`'s lots that still hold credits (an expired lot holds none).
    pub(super) fn grant_lots(&self, user: &AccountId) -> Vec<GrantLot> {
        self.lots
            .iter()
            .filter(|l| &l.user == user && !l.lot.remaining.is_zero())
            .map(|l| l.lot.clone())
            .collect()
    }

    pub(super) fn expire_grants(&mut self, now: Timestamp, limit: u32) -> u32 {
        let mut n = 0;
        for i in 0..self.lots.len() {
            if n >= limit {
                break;
            }
            let Lot { lot, user, .. } = self.lots[i].clone();
            if lot.expires_at.is_none_or(|e| e > now) || lot.remaining.is_zero() {
                continue;
            }
            let taken = lot.remaining.min(self.balance(&user));
            if !taken.is_zero() {
                let _ = self.write(
                    &user,
                    TransactionKind::Expiry,
                    taken.as_decrease(),
                    UsageContext::default(),
                    now,
                );
            }
            self.lots[i].lot.remaining = Credits::ZERO;
            n += 1;
        }
        n
    }

    pub(super) fn adjust(&mut self, c: &AdjustCommand) -> Result<LedgerEffect, SpendError> {
        let hash = format!("{}|{}|{:?}", c.amount.hundredths(), c.note, c.expires_at);
        let key = (c.account_id.clone(), c.reference.clone());
        match self.adjust_keys.get(&key) {
            Some(seen) if *seen == hash => return Ok(LedgerEffect::Nothing),
            Some(_) => return Err(SpendError::IdempotencyConflict),
            None => {}
        }
        let effect = self.adjust_once(c)?;
        self.adjust_keys.insert(key, hash);
        Ok(effect)
    }

    /// `admin`'s adjustment: the key is the administrator's, bound to the target user and the
    /// request (the same again replays, anything else is a conflict), as in the SQL store.
    pub(super) fn adjust_as(
        &mut self,
        admin: &UserId,
        c: &AdjustCommand,
    ) -> Result<LedgerEffect, SpendError> {
        let hash = format!(
            "{}|{}|{}|{:?}",
            c.account_id,
            c.amount.hundredths(),
            c.note,
            c.expires_at
        );
        let key = (admin.clone(), c.reference.clone());
        match self.admin_keys.get(&key) {
            Some(seen) if *seen == hash => return Ok(LedgerEffect::Nothing),
            Some(_) => return Err(SpendError::IdempotencyConflict),
            None => {}
        }
        let effect = self.adjust(c)?;
        if matches!(effect, LedgerEffect::Written(_)) {
            self.admin_keys.insert(key, hash);
        }
        Ok(effect)
    }

    fn adjust_once(&mut self, c: &AdjustCommand) -> Result<LedgerEffect, SpendError> {
        if c.amount.is_decrease() {
            let context = UsageContext {
                note: Some(c.note.clone()),
                ..UsageContext::default()
            };
            let tx = self.write(
                &c.account_id,
                TransactionKind::AdminAdjustment,
                c.amount,
                context,
                c.now,
            )?;
            self.draw_lots(c.spend_order, &c.account_id, c.amount.magnitude());
            return Ok(LedgerEffect::Written(tx));
        }
        let balance = self.balance(&c.account_id);
        if let Err(domain::LedgerError::Overflow) =
            domain::ledger::post(balance, TransactionKind::AdminAdjustment, c.amount)
        {
            return Err(SpendError::BalanceLimit {
                balance,
                amount: c.amount.magnitude(),
            });
        }
        let grant = GrantCommand {
            account_id: c.account_id.clone(),
            amount: c.amount.magnitude(),
            source: GrantSource::Admin(c.reference.clone()),
            expires_at: c.expires_at,
            now: c.now,
        };
        // As in the SQL store: an administrator's grant carries the reason, not the key.
        match self.grant_as(&grant, c.grant)? {
            LedgerEffect::Written(mut tx) => {
                tx.context.note = Some(c.note.clone());
                if let Some(last) = self.transactions.iter_mut().rev().find(|t| t.id == tx.id) {
                    last.context.note = tx.context.note.clone();
                }
                Ok(LedgerEffect::Written(tx))
            }
            // The lot's source is another user's (or a sign-up grant's): a conflict, as in the
            // SQL store, never a silent nothing.
            LedgerEffect::Nothing => Err(SpendError::IdempotencyConflict),
        }
    }
}

fn spend_to_store(e: SpendError) -> StoreError {
    match e {
        SpendError::Store(s) => s,
        other => StoreError::Unexpected(anyhow::anyhow!(other.to_string())),
    }
}

fn spend_to_reservation(e: SpendError) -> ReservationError {
    ReservationError::Store(spend_to_store(e))
}
