use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::ledger;

fn at(millis: i64) -> Timestamp {
    Timestamp::from_unix_millis(millis)
}

fn credits(whole: i64) -> Credits {
    Credits::from_whole(whole).expect("valid")
}

/// 2026-11-29T15:30:00Z, a Sunday.
const SUNDAY: i64 = 1_795_966_200_000;

#[test]
fn owners_and_admins_manage_a_team_s_billing_and_members_only_spend() {
    let billing: Vec<MemberRole> = MemberRole::ALL
        .into_iter()
        .filter(|r| r.manages_billing())
        .collect();
    assert_eq!(billing, [MemberRole::Owner, MemberRole::Admin]);
}

#[test]
fn windows_start_at_midnight_monday_and_the_first_utc() {
    let now = at(SUNDAY);
    // 2026-11-29T00:00Z, 2026-11-23T00:00Z (Monday), 2026-11-01T00:00Z.
    assert_eq!(LimitWindow::Day.start_of(now), at(1_795_910_400_000));
    assert_eq!(LimitWindow::Week.start_of(now), at(1_795_392_000_000));
    assert_eq!(LimitWindow::Month.start_of(now), at(1_793_491_200_000));
    assert_eq!(
        LimitWindow::Month.end_of(LimitWindow::Month.start_of(now)),
        at(1_796_083_200_000),
        "December starts 2026-12-01T00:00Z"
    );
    for window in LimitWindow::ALL {
        let start = window.start_of(now);
        assert!(start <= now && now < window.end_of(start));
        assert_eq!(window.start_of(start), start);
        assert_eq!(
            window.start_of(window.end_of(start)),
            window.end_of(start),
            "the next window starts where this one ends"
        );
        assert_eq!(LimitWindow::parse(window.code()), Some(window));
    }
}

#[test]
fn a_spend_past_the_limit_is_refused_with_what_is_left_and_when_it_resets() {
    let limit = MemberLimit {
        credits: credits(10),
        window: LimitWindow::Day,
    };
    let now = at(SUNDAY);
    let count = count_spend(Some(limit), WindowCount::NONE, credits(7), now).expect("within");
    assert_eq!(count.spent, credits(7));
    let refused = count_spend(Some(limit), count, credits(4), now).expect_err("past");
    assert_eq!(refused.left, credits(3));
    assert_eq!(refused.resets_at, at(1_795_996_800_000));
    // Exactly up to the limit is allowed; the next day starts from nothing.
    let full = count_spend(Some(limit), count, credits(3), now).expect("exactly");
    assert_eq!(full.spent, credits(10));
    let tomorrow = at(SUNDAY + DAY_MS);
    let next = count_spend(Some(limit), full, credits(10), tomorrow).expect("a new day");
    assert_eq!(next.spent, credits(10));
    // Without a limit nothing is counted or refused.
    assert_eq!(
        count_spend(None, count, credits(1_000), now).expect("no limit"),
        count
    );
}

#[test]
fn headroom_comes_back_only_to_the_window_the_hold_counted_in() {
    let limit = Some(MemberLimit {
        credits: credits(10),
        window: LimitWindow::Day,
    });
    let now = at(SUNDAY);
    let held = count_spend(limit, WindowCount::NONE, credits(6), now).expect("hold");
    let back = give_back(limit, held, Some(held.start), credits(6), now);
    assert_eq!(back.spent, Credits::ZERO);
    // Released the next day: yesterday's count stays spent, today's is untouched.
    let tomorrow = at(SUNDAY + DAY_MS);
    let later = give_back(limit, held, Some(held.start), credits(6), tomorrow);
    assert_eq!(later.spent, Credits::ZERO);
    assert_eq!(later.start, LimitWindow::Day.start_of(tomorrow));
}

fn facts(actor: Option<MemberRole>, target: Option<MemberRole>, owners: u32) -> MemberFacts {
    MemberFacts {
        kind: AccountKind::Team,
        actor,
        to_self: false,
        target,
        owners,
        members: 3,
        seats: None,
        host_managed: false,
    }
}

#[test]
fn nobody_is_added_once_the_members_fill_the_seats_and_nobody_is_removed_for_it() {
    use MemberRole::*;
    let add = MemberChange::Add(Member);
    let full = |members, seats| MemberFacts {
        members,
        seats,
        ..facts(Some(Owner), None, 1)
    };
    assert_eq!(decide_member_change(full(4, Some(5)), add), Ok(()));
    assert_eq!(
        decide_member_change(full(5, Some(5)), add),
        Err(MemberChangeRefusal::SeatsExhausted { seats: 5 })
    );
    // After a downgrade below the count: additions are refused, nothing else is.
    let over = full(7, Some(5));
    assert_eq!(
        decide_member_change(over, add),
        Err(MemberChangeRefusal::SeatsExhausted { seats: 5 })
    );
    let member = MemberFacts {
        target: Some(Member),
        ..over
    };
    assert_eq!(decide_member_change(member, MemberChange::Remove), Ok(()));
    assert_eq!(
        decide_member_change(member, MemberChange::SetRole(Admin)),
        Ok(())
    );
    assert_eq!(decide_member_change(full(500, None), add), Ok(()));
    // A member without the right to add is told so before the seats.
    let plain = MemberFacts {
        actor: Some(Member),
        ..full(5, Some(5))
    };
    assert_eq!(
        decide_member_change(plain, add),
        Err(MemberChangeRefusal::NotAllowed)
    );
}

#[test]
fn the_seats_are_the_limit_of_the_seats_entitlement() {
    use crate::entitlements::{EntitlementKey, EntitlementValue, Entitlements};
    let with = |value| Entitlements::from_pairs([(EntitlementKey::new(SEATS_KEY).unwrap(), value)]);
    assert_eq!(seat_cap(&with(EntitlementValue::Limit(10))), Some(10));
    assert_eq!(seat_cap(&with(EntitlementValue::Enabled)), None);
    assert_eq!(seat_cap(&Entitlements::none()), None);
}

#[test]
fn a_change_that_lowers_the_seats_below_the_members_says_so_once() {
    use crate::entitlements::{EntitlementKey, EntitlementValue, Entitlements};
    let seats = |n| {
        Entitlements::from_pairs([(
            EntitlementKey::new(SEATS_KEY).unwrap(),
            EntitlementValue::Limit(n),
        )])
    };
    let none = Entitlements::none();
    // Ten seats down to two, five members: over by three.
    assert_eq!(seats_reduced_below(&seats(10), &seats(2), 5), Some(2));
    // No cap down to a cap below the members.
    assert_eq!(seats_reduced_below(&none, &seats(3), 4), Some(3));
    // Lowered, but the members still fit (or exactly fill it).
    assert_eq!(seats_reduced_below(&seats(10), &seats(5), 5), None);
    // Not lowered: the same cap, a raised one, or no cap at all now.
    assert_eq!(seats_reduced_below(&seats(2), &seats(2), 5), None);
    assert_eq!(seats_reduced_below(&seats(2), &seats(3), 5), None);
    assert_eq!(seats_reduced_below(&seats(2), &none, 5), None);
}

#[test]
fn who_may_change_members() {
    use MemberChangeRefusal as R;
    use MemberRole::{Admin, Member, Owner};
    let decide = decide_member_change;
    // Owners do anything; admins never touch owners nor make one; members manage nobody.
    assert_eq!(
        decide(facts(Some(Owner), None, 1), MemberChange::Add(Owner)),
        Ok(())
    );
    assert_eq!(
        decide(facts(Some(Admin), None, 1), MemberChange::Add(Admin)),
        Ok(())
    );
    assert_eq!(
        decide(facts(Some(Admin), None, 1), MemberChange::Add(Owner)),
        Err(R::NotAllowed)
    );
    assert_eq!(
        decide(facts(Some(Member), None, 1), MemberChange::Add(Member)),
        Err(R::NotAllowed)
    );
    assert_eq!(
        decide(facts(None, None, 1), MemberChange::Add(Member)),
        Err(R::NotAllowed)
    );
    assert_eq!(
        decide(facts(Some(Admin), Some(Owner), 2), MemberChange::Remove),
        Err(R::NotAllowed)
    );
    assert_eq!(
        decide(
            facts(Some(Admin), Some(Member), 1),
            MemberChange::SetRole(Admin)
        ),
        Ok(())
    );
    assert_eq!(
        decide(
            facts(Some(Owner), Some(Member), 1),
            MemberChange::Add(Member)
        ),
        Err(R::AlreadyMember)
    );
    assert_eq!(
        decide(facts(Some(Owner), None, 1), MemberChange::Remove),
        Err(R::NotAMember)
    );
    // The last owner stays: not removed, not demoted, does not leave.
    let last = MemberFacts {
        to_self: true,
        ..facts(Some(Owner), Some(Owner), 1)
    };
    assert_eq!(decide(last, MemberChange::Remove), Err(R::LastOwner));
    assert_eq!(
        decide(last, MemberChange::SetRole(Admin)),
        Err(R::LastOwner)
    );
    assert_eq!(
        decide(MemberFacts { owners: 2, ..last }, MemberChange::Remove),
        Ok(())
    );
    // Anyone leaves; only an owner sets their own limit.
    let me = MemberFacts {
        to_self: true,
        ..facts(Some(Member), Some(Member), 1)
    };
    assert_eq!(decide(me, MemberChange::Remove), Ok(()));
    assert_eq!(decide(me, MemberChange::SetLimit(None)), Err(R::NotAllowed));
    let admin_self = MemberFacts {
        to_self: true,
        ..facts(Some(Admin), Some(Admin), 1)
    };
    assert_eq!(
        decide(admin_self, MemberChange::SetLimit(None)),
        Err(R::NotAllowed)
    );
    assert_eq!(decide(last, MemberChange::SetLimit(None)), Ok(()));
    // A personal account has no members to change.
    let personal = MemberFacts {
        kind: AccountKind::Personal,
        ..facts(Some(Owner), None, 1)
    };
    assert_eq!(
        decide(personal, MemberChange::Add(Member)),
        Err(R::PersonalAccount)
    );
}

/// One step of a member spending from a team's pool.
#[derive(Debug, Clone)]
enum Step {
    Consume(i64),
    Hold(i64),
    /// Settle the n-th pending hold (modulo) at this actual cost.
    Settle(usize, i64),
    Release(usize),
    /// Time passes (hours).
    Wait(i64),
    /// The member is removed (their holds still settle, within what they hold).
    Removed,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1..=40i64).prop_map(Step::Consume),
        3 => (1..=40i64).prop_map(Step::Hold),
        3 => (any::<usize>(), 0..=60i64).prop_map(|(n, a)| Step::Settle(n, a)),
        2 => any::<usize>().prop_map(Step::Release),
        2 => (1..=30i64).prop_map(Step::Wait),
        1 => Just(Step::Removed),
    ]
}

fn window() -> impl Strategy<Value = LimitWindow> {
    prop_oneof![
        Just(LimitWindow::Day),
        Just(LimitWindow::Week),
        Just(LimitWindow::Month)
    ]
}

/// A pending hold: held, the window it counted in, when it was taken.
#[derive(Debug, Clone, Copy)]
struct Hold {
    held: Credits,
    counted_in: Timestamp,
}

proptest! {
    /// Whatever a member does, in any order and across any window boundaries: what counts in
    /// each window (consumptions and holds taken in it, less what a release or settle gave back
    /// in it, plus the overruns settled in it) never passes the limit, the stored count is that
    /// sum for the current window, and the pool never goes below zero.
    #[test]
    fn a_member_never_spends_past_their_limit(
        steps in proptest::collection::vec(step(), 1..60),
        limit_whole in 1..=100i64,
        window in window(),
        pool_whole in 0..=400i64,
    ) {
        let limit = MemberLimit { credits: credits(limit_whole), window };
        let mut now = at(SUNDAY);
        let mut count = WindowCount::NONE;
        let mut balance = credits(pool_whole);
        let mut member = true;
        let mut pending: Vec<Hold> = Vec::new();
        // Ground truth: what counts in each window, by its start.
        let mut usage: BTreeMap<Timestamp, i64> = BTreeMap::new();
        for step in steps {
            match step {
                Step::Consume(a) | Step::Hold(a) if member => {
                    let amount = credits(a);
                    let Ok(after) = ledger::post(balance, ledger::TransactionKind::Consumption, amount.as_decrease()) else {
                        continue;
                    };
                    match count_spend(Some(limit), count, amount, now) {
                        Ok(next) => {
                            count = next;
                            balance = after;
                            *usage.entry(next.start).or_default() += amount.hundredths();
                            if matches!(step, Step::Hold(_)) {
                                pending.push(Hold { held: amount, counted_in: next.start });
                            }
                        }
                        Err(refused) => {
                            let current = count.at(window, now);
                            prop_assert!(current.spent.hundredths() + amount.hundredths() > limit.credits.hundredths());
                            prop_assert_eq!(refused.left.hundredths(), limit.credits.hundredths() - current.spent.hundredths());
                            prop_assert!(refused.resets_at > now);
                        }
                    }
                }
                Step::Consume(_) | Step::Hold(_) => {}
                Step::Settle(n, actual) if !pending.is_empty() => {
                    let hold = pending.remove(n % pending.len());
                    let ceiling = settle_ceiling(balance, Some(limit), count, member, now);
                    let s = ledger::settle(hold.held, credits(actual), ceiling);
                    prop_assert!(s.charged <= hold.held.checked_add(ceiling).expect("small"));
                    balance = balance.checked_add(hold.held).expect("small").checked_sub(s.charged).expect("covered");
                    if s.charged > hold.held {
                        let over = s.charged.checked_sub(hold.held).expect("over");
                        count = count_spend(Some(limit), count, over, now).expect("within the ceiling");
                        *usage.entry(count.start).or_default() += over.hundredths();
                    } else {
                        let back = hold.held.checked_sub(s.charged).expect("under");
                        let before = count.at(window, now);
                        count = give_back(Some(limit), count, Some(hold.counted_in), back, now);
                        if before.start == hold.counted_in {
                            *usage.entry(hold.counted_in).or_default() -= back.hundredths();
                        }
                    }
                }
                Step::Release(n) if !pending.is_empty() => {
                    let hold = pending.remove(n % pending.len());
                    balance = balance.checked_add(hold.held).expect("small");
                    let before = count.at(window, now);
                    count = give_back(Some(limit), count, Some(hold.counted_in), hold.held, now);
                    if before.start == hold.counted_in {
                        *usage.entry(hold.counted_in).or_default() -= hold.held.hundredths();
                    }
                }
                Step::Settle(..) | Step::Release(_) => {}
                Step::Wait(hours) => now = now.plus_millis(hours * 3_600_000),
                Step::Removed => member = false,
            }
            for (start, used) in &usage {
                prop_assert!(*used >= 0, "window {start} counts {used}");
                prop_assert!(*used <= limit.credits.hundredths(), "window {start} counts {used}");
            }
            let current = count.at(window, now);
            prop_assert_eq!(
                current.spent.hundredths(),
                usage.get(&current.start).copied().unwrap_or(0)
            );
        }
    }
}

#[test]
fn in_a_host_organisation_s_team_only_limits_change_here() {
    use MemberRole::*;
    let host = MemberFacts {
        host_managed: true,
        ..facts(Some(Owner), Some(Member), 1)
    };
    let limit = MemberLimit {
        credits: credits(5),
        window: LimitWindow::Day,
    };
    for change in [
        MemberChange::Add(Member),
        MemberChange::SetRole(Admin),
        MemberChange::Remove,
    ] {
        assert_eq!(
            decide_member_change(host, change),
            Err(MemberChangeRefusal::HostManaged),
            "{change:?}"
        );
    }
    assert_eq!(
        decide_member_change(host, MemberChange::SetLimit(Some(limit))),
        Ok(())
    );
}
