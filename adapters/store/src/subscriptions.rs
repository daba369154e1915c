//! Subscriptions: reads for the use cases, and the two writes a payment event makes (create, and
//! replace under compare-and-set on `last_event_at` and on the switch claim as it was read).

use application::pagination::{Page, PageRequest};
use application::ports::{OrderRecord, StoreError, SubscriptionRepository};
use async_trait::async_trait;
use domain::{
    AccountId, Credits, OrderId, PlanChange, ProviderId, RenewalIntent, ScheduledSwitch, SoldTerms,
    Subscription, SubscriptionId, Timestamp,
};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Value};

use crate::SeaOrmStore;
use crate::rows::{ORDER_COLUMNS, OrderRow, SUBSCRIPTION_COLUMNS, SubscriptionRow};

fn state_values(s: &Subscription) -> [Value; 5] {
    [
        s.status().code().into(),
        s.current_period().start().unix_millis().into(),
        s.current_period().end().unix_millis().into(),
        (s.renewal() == RenewalIntent::EndsAtPeriodEnd).into(),
        s.last_event_at().unix_millis().into(),
    ]
}

/// Insert `s`; returns false when the id or the provider's subscription id exists.
pub(crate) async fn create<C: ConnectionTrait>(
    conn: &C,
    s: &Subscription,
    order: Option<&OrderId>,
    now: Timestamp,
) -> Result<bool, DbErr> {
    let sql = "INSERT INTO subscriptions (id, user_id, order_id, plan_id, provider, \
        provider_subscription_id, status, period_start, period_end, cancel_at_period_end, \
        last_event_at, created_at, updated_at, price_minor, currency, interval_months, \
        credits_per_period_hundredths, pending_plan_id, pending_price_minor, pending_currency, \
        pending_interval_months, pending_credits_hundredths, pending_direction, \
        pending_requested_at, scheduled_plan_id, scheduled_requested_at, account_id) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14, $15, $16, \
        $17, $18, $19, $20, $21, $22, $23, $24, $25, $26) \
        ON CONFLICT DO NOTHING";
    let mut values: Vec<Value> = vec![
        s.id().as_str().into(),
        s.user_id().as_str().into(),
        order.map(|o| o.as_str().to_owned()).into(),
        s.plan_id().as_str().into(),
        s.provider().as_str().into(),
        s.provider_subscription_id().into(),
    ];
    values.extend(state_values(s));
    values.push(now.unix_millis().into());
    values.extend(sold_terms_values(s.sold_terms().as_ref()));
    values.extend(pending_change_values(s.pending_change()));
    values.extend(scheduled_switch_values(s.scheduled_switch()));
    values.push(s.account_id().as_str().into());
    Ok(crate::sql::execute(conn, sql, values).await? == 1)
}

/// The `scheduled_*` columns: the plan a subscription scheduled to end starts when it ends, and
/// when it was asked; both NULL without one.
fn scheduled_switch_values(switch: Option<&ScheduledSwitch>) -> [Value; 2] {
    [
        switch.map(|s| s.plan_id().as_str().to_owned()).into(),
        switch.map(|s| s.requested_at().unix_millis()).into(),
    ]
}

/// The claim rule of a replacement (`domain::scheduled_switch`, one switch at a time), on the
/// row as it was (`t` is its table prefix): a plan change (`$14`, `$20`) or a scheduled switch
/// (`$21`, `$22`) is written only where the row holds no claim or holds that same one; keeping
/// and clearing one always pass. Two concurrent switch requests read the same free row; the
/// second write finds the first one's claim and changes nothing.
fn claim_kept(t: &str) -> String {
    let free = format!("({t}pending_requested_at IS NULL AND {t}scheduled_requested_at IS NULL)");
    format!(
        "($20 IS NULL OR {free} OR ({t}pending_requested_at = $20 AND {t}pending_plan_id = $14)) \
         AND ($22 IS NULL OR {free} \
         OR ({t}scheduled_requested_at = $22 AND {t}scheduled_plan_id = $21))"
    )
}

/// The rest of a replacement's compare-and-set, on the row as it is (`t` is its table prefix):
/// its claim is still the one the writer read (`$23` … `$26`: the pending plan and when it was
/// asked, the scheduled plan and when it was asked; NULL for none). A claim does not move
/// `last_event_at` (the provider's event time), so a provider event read before a claim was
/// written and written after it passes `last_event_at = $2` with the claim columns as it read
/// them; this makes its write fail like any lost compare-and-set, and it is decided again from
/// a fresh read. SQLite's `IS` is PostgreSQL's `IS NOT DISTINCT FROM`.
fn claim_as_read(t: &str, backend: DbBackend) -> String {
    let same = if backend == DbBackend::Postgres {
        "IS NOT DISTINCT FROM"
    } else {
        "IS"
    };
    format!(
        "{t}pending_plan_id {same} $23 AND {t}pending_requested_at {same} $24 \
         AND {t}scheduled_plan_id {same} $25 AND {t}scheduled_requested_at {same} $26"
    )
}

/// `$23` … `$26` of [`claim_as_read`]: the claim `s` was read with.
fn claim_as_read_values(s: &Subscription) -> [Value; 4] {
    let pending = s.pending_change_as_read();
    let scheduled = s.scheduled_switch_as_read();
    [
        pending.map(|c| c.plan_id().as_str().to_owned()).into(),
        pending.map(|c| c.requested_at().unix_millis()).into(),
        scheduled.map(|w| w.plan_id().as_str().to_owned()).into(),
        scheduled.map(|w| w.requested_at().unix_millis()).into(),
    ]
}

/// The `pending_*` columns: the plan change asked of the provider and not confirmed yet (plan,
/// the terms it sells, direction, when asked); all NULL without one.
fn pending_change_values(change: Option<&PlanChange>) -> [Value; 7] {
    let terms = change.map(PlanChange::terms);
    let [price, currency, interval, credits] = sold_terms_values(terms.as_ref());
    [
        change.map(|c| c.plan_id().as_str().to_owned()).into(),
        price,
        currency,
        interval,
        credits,
        change.map(|c| c.direction().code().to_owned()).into(),
        change.map(|c| c.requested_at().unix_millis()).into(),
    ]
}

/// `price_minor, currency, interval_months, credits_per_period_hundredths`; all NULL without
/// terms. Written at creation, and again only when a renewal moved the subscription to another
/// of our plans (a provider-side price change the use case recorded).
fn sold_terms_values(terms: Option<&SoldTerms>) -> [Value; 4] {
    [
        terms.map(|t| t.price().amount_minor()).into(),
        terms.map(|t| t.price().currency().code().to_owned()).into(),
        terms
            .map(|t| i32::try_from(t.interval().get()).unwrap_or(i32::MAX))
            .into(),
        terms
            .and_then(SoldTerms::credits_per_period)
            .map(Credits::hundredths)
            .into(),
    ]
}

/// The columns a payment event replaces (`$3` … `$22`; `$1` is the id, `$2` the expected
/// `last_event_at`, `$23` … `$26` the claim as read), in the order of [`replacement_values`].
const REPLACED_COLUMNS: &str = "status = $3, period_start = $4, period_end = $5, \
    cancel_at_period_end = $6, last_event_at = $7, updated_at = $8, plan_id = $9, \
    price_minor = $10, currency = $11, interval_months = $12, \
    credits_per_period_hundredths = $13, pending_plan_id = $14, pending_price_minor = $15, \
    pending_currency = $16, pending_interval_months = $17, \
    pending_credits_hundredths = $18, pending_direction = $19, pending_requested_at = $20, \
    scheduled_plan_id = $21, scheduled_requested_at = $22";

/// `$1` … `$22` of [`REPLACED_COLUMNS`] for replacing the state of `s`, and `$23` … `$26` of
/// [`claim_as_read`].
fn replacement_values(s: &Subscription, expected: Timestamp, now: Timestamp) -> Vec<Value> {
    let mut values: Vec<Value> = vec![s.id().as_str().into(), expected.unix_millis().into()];
    values.extend(state_values(s));
    values.push(now.unix_millis().into());
    values.push(s.plan_id().as_str().into());
    values.extend(sold_terms_values(s.sold_terms().as_ref()));
    values.extend(pending_change_values(s.pending_change()));
    values.extend(scheduled_switch_values(s.scheduled_switch()));
    values.extend(claim_as_read_values(s));
    values
}

/// Replace the state of `s` if its `last_event_at` is still `expected` and its claim still the
/// one `s` was read with; returns whether it did.
pub(crate) async fn update<C: ConnectionTrait>(
    conn: &C,
    s: &Subscription,
    expected: Timestamp,
    now: Timestamp,
) -> Result<bool, DbErr> {
    let sql = format!(
        "UPDATE subscriptions SET {REPLACED_COLUMNS} WHERE id = $1 AND last_event_at = $2 \
         AND {} AND {}",
        claim_kept(""),
        claim_as_read("", conn.get_database_backend())
    );
    let values = replacement_values(s, expected, now);
    Ok(crate::sql::execute(conn, &sql, values).await? == 1)
}

impl SeaOrmStore {
    async fn subscriptions_where(
        &self,
        what: &'static str,
        condition: &str,
        values: Vec<Value>,
    ) -> Result<Vec<Subscription>, StoreError> {
        let sql = format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE {condition} \
             ORDER BY updated_at DESC, id DESC"
        );
        let rows: Vec<SubscriptionRow> = self.fetch_all(what, &sql, values).await?;
        rows.into_iter().map(SubscriptionRow::into_domain).collect()
    }
}

#[async_trait]
impl SubscriptionRepository for SeaOrmStore {
    async fn find_subscription(
        &self,
        id: &SubscriptionId,
    ) -> Result<Option<Subscription>, StoreError> {
        let found = self
            .subscriptions_where("find_subscription", "id = $1", vec![id.as_str().into()])
            .await?;
        Ok(found.into_iter().next())
    }

    async fn find_subscription_by_provider_id(
        &self,
        provider: ProviderId,
        provider_subscription_id: &str,
    ) -> Result<Option<Subscription>, StoreError> {
        let values = vec![provider.as_str().into(), provider_subscription_id.into()];
        let condition = "provider = $1 AND provider_subscription_id = $2";
        let found = self
            .subscriptions_where("find_subscription_by_provider_id", condition, values)
            .await?;
        Ok(found.into_iter().next())
    }

    async fn subscription_order(
        &self,
        id: &SubscriptionId,
    ) -> Result<Option<OrderRecord>, StoreError> {
        let sql = format!(
            "SELECT {ORDER_COLUMNS} FROM orders \
             WHERE id = (SELECT order_id FROM subscriptions WHERE id = $1)"
        );
        let row: Option<OrderRow> = self
            .fetch_one("subscription_order", &sql, vec![id.as_str().into()])
            .await?;
        row.map(OrderRow::into_domain).transpose()
    }

    async fn find_subscription_by_order(
        &self,
        order: &OrderId,
    ) -> Result<Option<Subscription>, StoreError> {
        let found = self
            .subscriptions_where(
                "find_subscription_by_order",
                "order_id = $1",
                vec![order.as_str().into()],
            )
            .await?;
        Ok(found.into_iter().next())
    }

    async fn list_subscriptions(
        &self,
        account: &AccountId,
    ) -> Result<Vec<Subscription>, StoreError> {
        self.subscriptions_where(
            "list_subscriptions",
            crate::rows::OWNED_BY_ACCOUNT,
            vec![account.as_str().into()],
        )
        .await
    }

    async fn page_subscriptions(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<Subscription>, StoreError> {
        let owned = crate::rows::OWNED_BY_ACCOUNT;
        let count = format!("SELECT COUNT(*) AS total FROM subscriptions WHERE {owned}");
        let items = format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE {owned} \
             ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
        );
        let (total, rows) = self
            .retry
            .run("page_subscriptions", || {
                crate::sql::page::<SubscriptionRow>(
                    &self.db,
                    &count,
                    vec![account.as_str().into()],
                    &items,
                    crate::orders::page_values(account, page),
                )
            })
            .await?;
        let items = rows
            .into_iter()
            .map(SubscriptionRow::into_domain)
            .collect::<Result<_, _>>()?;
        Ok(Page {
            items,
            request: page,
            total: u64::try_from(total).unwrap_or(0),
        })
    }
}
