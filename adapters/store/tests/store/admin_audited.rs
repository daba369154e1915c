//! An administrator's action and its audit entry in one transaction (issue 18) on both
//! databases: a payment event the action writes (a refund Tally applies, a cancel at period
//! end, a replay) or records, and every change to the webhook endpoints. A refused or
//! duplicate action writes no entry; a replayed mismatch is not told to the host twice.

use application::host_events::{self, HostEventKind};
use application::ports::{
    AdminConsoleStore, AuditAction, CreditLedger, EndpointChange, EndpointWrite, EndpointWritten,
    EventAudit, InboxEntry, MismatchNotice, NewAudit, OrderRepository, PaymentEventCommand,
    PaymentEventOutcome, RedeliveryTarget, StoreError, WebhookEndpoint, WebhookSecret,
    WebhookStore,
};
use domain::{EventOutcome, UserId};
use sea_orm::ConnectionTrait;

use crate::events::{inbox, payment};
use crate::support::{TestStore, c, contract_tests, order, t, user};
use application::ports::Writes;

fn audit(
    admin: &UserId,
    action: AuditAction,
    object: &str,
    mismatch: MismatchNotice,
) -> EventAudit {
    EventAudit {
        entry: NewAudit {
            admin_id: admin.clone(),
            action,
            object_kind: "order",
            object_id: object.into(),
            before: None,
            after: None,
            at: t(60),
        },
        mismatch,
    }
}

/// `command` with the action's audit entry, telling what the service decides it tells.
async fn apply_audited(
    store: &TestStore,
    command: &PaymentEventCommand,
    audit: &EventAudit,
) -> Result<PaymentEventOutcome, StoreError> {
    let mut command = command.clone();
    host_events::payment_event_told(&mut command, 0, audit.mismatch);
    command.audit = Some(audit.entry.clone());
    store.apply_payment_event(&command).await
}

/// `entry` recorded with the action's audit entry, telling what the service decides it tells.
async fn record_audited(
    store: &TestStore,
    entry: &InboxEntry,
    audit: &EventAudit,
) -> Result<bool, StoreError> {
    let told = host_events::recorded_event_told(entry, audit.mismatch);
    store.record_event(entry, &told, Some(&audit.entry)).await
}

async fn audits(store: &TestStore) -> i64 {
    store.raw_i64("SELECT COUNT(*) FROM admin_audit").await
}

async fn inbox_rows(store: &TestStore, event_id: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM webhook_inbox WHERE event_id = '{event_id}'");
    store.raw_i64(&sql).await
}

/// The `payment.mismatch` events written (read from the table: the feed hides an event while an
/// older transaction of the cluster, another test's, still runs).
async fn mismatches_told(store: &TestStore) -> i64 {
    let kind = HostEventKind::PaymentMismatch.code();
    let sql = format!("SELECT COUNT(*) FROM events WHERE event_type = '{kind}'");
    store.raw_i64(&sql).await
}

async fn a_payment_event_and_its_audit_entry_commit_together_or_not_at_all(store: &TestStore) {
    let admin = user(store, "boss").await;
    let buyer = user(store, "buyer").await;
    let first = order("o-1", &buyer, 10);
    store.create_order(&first, None).await.unwrap();
    let refund = audit(
        &admin,
        AuditAction::OrderRefunded,
        "o-1",
        MismatchNotice::Tell,
    );
    let command = payment("evt-1", first.id(), &buyer, true);
    let applied = apply_audited(store, &command, &refund).await.unwrap();
    assert!(matches!(applied, PaymentEventOutcome::Applied { .. }));
    assert_eq!(audits(store).await, 1, "the action and its entry");
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&buyer))
            .await
            .unwrap(),
        c(10_000)
    );

    let again = apply_audited(store, &command, &refund).await;
    assert_eq!(again.unwrap(), PaymentEventOutcome::Duplicate);
    assert_eq!(audits(store).await, 1, "a duplicate writes no entry");

    // Refused: the order's version moved since it was read (the event paid it): nothing of the
    // command, and no entry.
    let stale = payment("evt-2", first.id(), &buyer, true);
    let refused = apply_audited(store, &stale, &refund).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    assert_eq!(audits(store).await, 1, "a refused command writes no entry");
    assert_eq!(inbox_rows(store, "evt-2").await, 0);
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&buyer))
            .await
            .unwrap(),
        c(10_000)
    );

    // An event recorded without a change: its row and the entry, once.
    let mut recorded = inbox("evt-3", 70);
    recorded.outcome = EventOutcome::Ignored;
    let replay = audit(
        &admin,
        AuditAction::WebhookReplayed,
        "3",
        MismatchNotice::Tell,
    );
    assert!(record_audited(store, &recorded, &replay).await.unwrap());
    assert_eq!(audits(store).await, 2);
    assert!(!record_audited(store, &recorded, &replay).await.unwrap());
    assert_eq!(
        audits(store).await,
        2,
        "a recorded duplicate writes no entry"
    );
    let log = store
        .audit_page(&application::cursor::Keyset::first(5))
        .await
        .unwrap()
        .items;
    let actions: Vec<AuditAction> = log.iter().map(|e| e.action).collect();
    assert_eq!(
        actions,
        [AuditAction::WebhookReplayed, AuditAction::OrderRefunded]
    );
}

/// A mismatch that only records its outcome (no order to mark).
fn mismatch(event_id: &str, user: &UserId) -> InboxEntry {
    InboxEntry {
        outcome: EventOutcome::Mismatch,
        detail: Some("paid 0.01 USD, order price 10.00 USD".into()),
        user_id: Some(user.clone()),
        ..inbox(event_id, 80)
    }
}

fn mismatch_command(event_id: &str, user: &UserId) -> PaymentEventCommand {
    PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: mismatch(event_id, user),
        order: None,
        subscription: None,
        grant: None,
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    }
}

async fn a_replayed_mismatch_told_before_is_not_told_again(store: &TestStore) {
    let admin = user(store, "boss").await;
    let buyer = user(store, "buyer").await;
    let told = |id| {
        audit(
            &admin,
            AuditAction::WebhookReplayed,
            id,
            MismatchNotice::ToldBefore,
        )
    };
    let tell = |id| {
        audit(
            &admin,
            AuditAction::WebhookReplayed,
            id,
            MismatchNotice::Tell,
        )
    };

    let recorded = mismatch("evt-1#replay-rp_1", &buyer);
    assert!(record_audited(store, &recorded, &told("1")).await.unwrap());
    let applied = mismatch_command("evt-2#replay-rp_2", &buyer);
    apply_audited(store, &applied, &told("2")).await.unwrap();
    assert_eq!(mismatches_told(store).await, 0, "told when they arrived");
    assert_eq!(audits(store).await, 2, "each replay is audited");

    // A mismatch the original did not tell (it was, say, an unknown order then) is told.
    let recorded = mismatch("evt-3#replay-rp_3", &buyer);
    assert!(record_audited(store, &recorded, &tell("3")).await.unwrap());
    let applied = mismatch_command("evt-4#replay-rp_4", &buyer);
    apply_audited(store, &applied, &tell("4")).await.unwrap();
    assert_eq!(mismatches_told(store).await, 2);
}

fn endpoint(id: &str) -> WebhookEndpoint {
    WebhookEndpoint {
        id: id.into(),
        url: "https://host.example/hooks".into(),
        event_types: Vec::new(),
        enabled: true,
        disabled_reason: None,
        secret: WebhookSecret::new("whsec_c2VjcmV0".into()),
        previous_secret: None,
        cursor: 0,
        failing_since: None,
        created_at: t(10),
        updated_at: t(10),
    }
}

/// The entry of `admin`'s endpoint write, named after what it did.
fn entry_of(admin: &UserId, written: &EndpointWritten) -> NewAudit {
    let (action, object_id) = match written {
        EndpointWritten::Created(e) => (AuditAction::WebhookEndpointCreated, e.id.clone()),
        EndpointWritten::Updated { after, .. } => {
            (AuditAction::WebhookEndpointUpdated, after.id.clone())
        }
        EndpointWritten::Deleted(e) => (AuditAction::WebhookEndpointDeleted, e.id.clone()),
        EndpointWritten::Rotated(e) => (AuditAction::WebhookEndpointRotated, e.id.clone()),
        EndpointWritten::Redelivered(d) => (AuditAction::WebhookRedelivered, d.id.clone()),
    };
    NewAudit {
        admin_id: admin.clone(),
        action,
        object_kind: "webhook_endpoint",
        object_id,
        before: None,
        after: None,
        at: t(90),
    }
}

/// The actions of the audit log, newest first.
async fn logged(store: &TestStore) -> Vec<AuditAction> {
    let page = store
        .audit_page(&application::cursor::Keyset::first(20))
        .await
        .unwrap();
    page.items.iter().map(|e| e.action).collect()
}

async fn endpoint_writes_commit_with_their_audit_entry_or_not_at_all(store: &TestStore) {
    let admin = user(store, "boss").await;
    let build = |written: &EndpointWritten| entry_of(&admin, written);
    let write = |w| store.write_endpoint(w, &build);
    let new = endpoint("we_1");
    let created = write(EndpointWrite::Create(&new)).await.unwrap();
    assert!(matches!(created, Some(EndpointWritten::Created(ref e)) if e.id == "we_1"));
    assert!(
        write(EndpointWrite::Create(&new)).await.is_err(),
        "a taken id"
    );
    assert_eq!(audits(store).await, 1, "no entry for the refused create");

    let change = EndpointChange {
        url: Some("https://host.example/v2".into()),
        enabled: Some(false),
        ..EndpointChange::default()
    };
    let update = |id| EndpointWrite::Update {
        id,
        change: &change,
        now: t(20),
    };
    let Some(EndpointWritten::Updated { before, after }) = write(update("we_1")).await.unwrap()
    else {
        panic!("updated");
    };
    assert_eq!(
        (before.url.as_str(), before.enabled),
        ("https://host.example/hooks", true),
        "read in the write's transaction"
    );
    assert_eq!(
        (after.url.as_str(), after.enabled),
        ("https://host.example/v2", false)
    );

    let secret = WebhookSecret::new("whsec_bmV3".into());
    let rotate = |id| EndpointWrite::Rotate {
        id,
        secret: &secret,
        previous_until: t(1_000),
        now: t(30),
    };
    let rotated = write(rotate("we_1")).await.unwrap();
    assert!(matches!(rotated, Some(EndpointWritten::Rotated(ref e)) if e.secret == secret));

    store
        .connection()
        .execute_unprepared(
            "INSERT INTO events (event_id, event_type, payload, occurred_at) \
             VALUES ('evt_a', 'order.paid', '{}', 40)",
        )
        .await
        .unwrap();
    let event = RedeliveryTarget::Event("evt_a".into());
    let redeliver = |target| EndpointWrite::Redeliver {
        endpoint_id: "we_1",
        target,
        now: t(40),
    };
    let Some(EndpointWritten::Redelivered(delivery)) = write(redeliver(&event)).await.unwrap()
    else {
        panic!("redelivered");
    };
    assert_eq!(delivery.event_id, "evt_a");

    let deleted = write(EndpointWrite::Delete("we_1")).await.unwrap();
    assert!(matches!(deleted, Some(EndpointWritten::Deleted(ref e)) if e.url.ends_with("/v2")));
    assert_eq!(store.find_endpoint("we_1").await.unwrap(), None);
    assert_eq!(audits(store).await, 5);

    // Refused: nothing to change, so nothing and no entry.
    let missing = RedeliveryTarget::Delivery("wd_none".into());
    for refused in [
        update("we_none"),
        rotate("we_none"),
        EndpointWrite::Delete("we_none"),
        redeliver(&missing),
    ] {
        assert_eq!(write(refused).await.unwrap(), None, "{refused:?}");
    }
    assert_eq!(
        logged(store).await,
        [
            AuditAction::WebhookEndpointDeleted,
            AuditAction::WebhookRedelivered,
            AuditAction::WebhookEndpointRotated,
            AuditAction::WebhookEndpointUpdated,
            AuditAction::WebhookEndpointCreated,
        ],
        "no entry for a refused write"
    );
}

/// A plan allowed to a user is kept once per user and plan, with its audit entry each time;
/// withdrawing it (or nothing) writes its entry too.
async fn plan_allowances_are_kept_once_and_written_with_their_entry(store: &TestStore) {
    use application::ports::{AdminWrite, PlanAllowance, PlanRepository};
    let admin = user(store, "boss").await;
    let buyer = user(store, "buyer").await;
    let legacy = domain::PlanId::new("pro_monthly_legacy").unwrap();
    let entry = |action| NewAudit {
        admin_id: admin.clone(),
        action,
        object_kind: "user",
        object_id: buyer.to_string(),
        before: None,
        after: None,
        at: t(60),
    };
    assert!(!store.plan_allowed(&buyer, &legacy).await.unwrap());
    let allowance = |at| PlanAllowance {
        user_id: buyer.clone(),
        plan_id: legacy.clone(),
        allowed_by: admin.clone(),
        allowed_at: t(at),
    };
    for at in [60, 70] {
        let write = AdminWrite::AllowPlan(&allowance(at));
        store
            .write_admin(write, &entry(AuditAction::PlanAllowed))
            .await
            .unwrap();
    }
    assert!(store.plan_allowed(&buyer, &legacy).await.unwrap());
    assert!(!store.plan_allowed(&admin, &legacy).await.unwrap());
    assert_eq!(
        store.plan_allowances(&buyer).await.unwrap(),
        vec![allowance(60)]
    );
    assert_eq!(audits(store).await, 2);
    for _ in 0..2 {
        let write = AdminWrite::RemovePlanAllowance(&buyer, &legacy);
        let removed = entry(AuditAction::PlanAllowanceRemoved);
        store.write_admin(write, &removed).await.unwrap();
    }
    assert!(!store.plan_allowed(&buyer, &legacy).await.unwrap());
    assert_eq!(audits(store).await, 4);
}

contract_tests!(
    plan_allowances_are_kept_once_and_written_with_their_entry,
    a_payment_event_and_its_audit_entry_commit_together_or_not_at_all,
    a_replayed_mismatch_told_before_is_not_told_again,
    endpoint_writes_commit_with_their_audit_entry_or_not_at_all,
);
