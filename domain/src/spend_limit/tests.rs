use proptest::prelude::*;

use super::*;

const HOUR: i64 = 3_600_000;

fn c(whole: i64) -> Credits {
    Credits::from_whole(whole).unwrap()
}

fn at(millis: i64) -> Timestamp {
    Timestamp::from_unix_millis(millis)
}

fn hard(credits: i64, window: SpendWindow) -> SpendLimit {
    SpendLimit {
        credits: c(credits),
        window,
        enforcement: Enforcement::Hard,
    }
}

#[test]
fn windows_parse_from_their_codes_and_hours() {
    for w in [
        SpendWindow::Hour,
        SpendWindow::Day,
        SpendWindow::Week,
        SpendWindow::Month,
    ] {
        assert_eq!(SpendWindow::parse(w.code(), None), Ok(w));
        assert_eq!(
            SpendWindow::parse(w.code(), Some(5)),
            Err(SpendWindowError::Hours)
        );
    }
    assert_eq!(
        SpendWindow::parse("rolling", Some(5)),
        Ok(SpendWindow::Rolling { hours: 5 })
    );
    for hours in [None, Some(0), Some(MAX_ROLLING_HOURS + 1)] {
        assert_eq!(
            SpendWindow::parse("rolling", hours),
            Err(SpendWindowError::Hours)
        );
    }
    assert_eq!(
        SpendWindow::parse("fortnight", None),
        Err(SpendWindowError::UnknownWindow)
    );
}

#[test]
fn an_hour_window_counts_from_the_top_of_the_hour() {
    let now = at(10 * HOUR + 1_234);
    assert_eq!(SpendWindow::Hour.bucket_of(now), at(10 * HOUR));
    assert_eq!(SpendWindow::Hour.counts_from(now), at(10 * HOUR));
    assert_eq!(
        SpendWindow::Hour.bucket_leaves(at(10 * HOUR)),
        at(11 * HOUR)
    );
}

#[test]
fn a_rolling_window_sums_its_last_hours_and_resets_when_the_oldest_leaves() {
    let limit = hard(100, SpendWindow::Rolling { hours: 5 });
    let now = at(20 * HOUR + 30 * 60_000);
    let buckets = [
        Bucket {
            start: at(15 * HOUR),
            spent: c(50),
        }, // left the window (20:00 − 4 h = 16:00 is the first bucket)
        Bucket {
            start: at(16 * HOUR),
            spent: c(30),
        },
        Bucket {
            start: at(20 * HOUR),
            spent: c(20),
        },
    ];
    let s = limit.standing(&buckets, now);
    assert_eq!(s.used, c(50));
    assert_eq!(s.left, c(50));
    assert_eq!(s.resets_at, at(21 * HOUR));
    assert_eq!(
        limit.count(&buckets, c(51), now),
        Err(LimitRefusal {
            left: c(50),
            resets_at: at(21 * HOUR)
        })
    );
    assert_eq!(
        limit.count(&buckets, c(50), now),
        Ok(Counted {
            bucket: at(20 * HOUR),
            crossed: true,
            after: LimitStanding {
                used: c(100),
                left: c(0),
                resets_at: at(21 * HOUR)
            }
        })
    );
}

#[test]
fn of_several_limits_the_one_with_the_least_left_refuses() {
    let now = at(10 * HOUR);
    let day = hard(10, SpendWindow::Day);
    let hour = hard(6, SpendWindow::Hour);
    let soft = SpendLimit {
        enforcement: Enforcement::Soft,
        ..hard(1, SpendWindow::Day)
    };
    let spent = [Bucket {
        start: at(10 * HOUR),
        spent: c(4),
    }];
    let day_spent = [Bucket {
        start: at(0),
        spent: c(4),
    }];
    let limits = [
        (&soft, &day_spent[..]),
        (&day, &day_spent[..]),
        (&hour, &spent[..]),
    ];
    // Day leaves 6, hour leaves 2: a spend of 7 is refused by the hour.
    let refused = count_all(limits, c(7), now).unwrap_err();
    assert_eq!((refused.0, refused.1.left), (2, c(2)));
    // A spend of 2 fits both hard limits and crosses the soft one.
    let counted = count_all(limits, c(2), now).unwrap();
    assert_eq!(counted.len(), 3);
    assert!(!counted[0].crossed, "the soft limit was passed before");
    assert_eq!(counted[1].after.used, c(6));
    assert!(counted[2].crossed, "the hour is used up");
}

#[test]
fn a_calendar_window_forgets_the_last_one() {
    let limit = hard(10, SpendWindow::Day);
    let yesterday = Bucket {
        start: at(0),
        spent: c(10),
    };
    let today = at(24 * HOUR + 5);
    let s = limit.standing(&[yesterday], today);
    assert_eq!(s.used, Credits::ZERO);
    assert_eq!(s.resets_at, at(48 * HOUR));
    assert!(limit.count(&[yesterday], c(10), today).is_ok());
}

#[test]
fn a_soft_limit_never_refuses_and_tells_the_crossing_once() {
    let limit = SpendLimit {
        credits: c(10),
        window: SpendWindow::Month,
        enforcement: Enforcement::Soft,
    };
    let now = at(HOUR);
    let before = [Bucket {
        start: SpendWindow::Month.bucket_of(now),
        spent: c(8),
    }];
    assert!(limit.count(&before, c(5), now).unwrap().crossed);
    let past = [Bucket {
        start: SpendWindow::Month.bucket_of(now),
        spent: c(13),
    }];
    assert!(!limit.count(&past, c(5), now).unwrap().crossed);
    assert_eq!(limit.room(&past, now), None);
    assert_eq!(limit.standing(&past, now).left, Credits::ZERO);
}

#[test]
fn a_new_limit_starts_from_what_its_window_already_spent() {
    let now = at(30 * HOUR + 10);
    let spends = [
        (at(23 * HOUR), 500), // yesterday: outside the day
        (at(25 * HOUR), 300),
        (at(29 * HOUR), 200),
        (at(29 * HOUR + 5), -50), // a settle for less, at its hold's time
    ];
    assert_eq!(
        seed(SpendWindow::Day, &spends, now),
        vec![Bucket {
            start: at(24 * HOUR),
            spent: Credits::from_hundredths(450).unwrap()
        }]
    );
    assert_eq!(
        seed(SpendWindow::Rolling { hours: 2 }, &spends, now),
        vec![Bucket {
            start: at(29 * HOUR),
            spent: Credits::from_hundredths(150).unwrap()
        }]
    );
    assert_eq!(seed(SpendWindow::Hour, &spends, now), vec![]);
}

#[test]
fn giving_back_never_goes_below_zero() {
    assert_eq!(given_back(c(5), c(3)), c(2));
    assert_eq!(given_back(c(5), c(8)), Credits::ZERO);
}

/// One step of a run against a limit.
#[derive(Debug, Clone)]
enum Step {
    Consume(i64),
    Reserve(i64),
    Settle { hold: usize, charged: i64 },
    Release(usize),
    Wait(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1..40i64).prop_map(Step::Consume),
        (1..40i64).prop_map(Step::Reserve),
        (0..8usize, 0..60i64).prop_map(|(hold, charged)| Step::Settle { hold, charged }),
        (0..8usize).prop_map(Step::Release),
        (0..3 * HOUR).prop_map(Step::Wait),
    ]
}

fn window() -> impl Strategy<Value = SpendWindow> {
    prop_oneof![
        Just(SpendWindow::Hour),
        Just(SpendWindow::Day),
        Just(SpendWindow::Week),
        (1..8u32).prop_map(|hours| SpendWindow::Rolling { hours }),
    ]
}

/// A model of the store: buckets, and holds with the bucket they counted in.
struct Model {
    limit: SpendLimit,
    buckets: Vec<Bucket>,
    holds: Vec<(Timestamp, Credits)>,
    now: Timestamp,
}

impl Model {
    fn add(&mut self, bucket: Timestamp, amount: Credits) {
        match self.buckets.iter_mut().find(|b| b.start == bucket) {
            Some(b) => b.spent = b.spent.checked_add(amount).unwrap(),
            None => self.buckets.push(Bucket {
                start: bucket,
                spent: amount,
            }),
        }
    }

    fn give_back(&mut self, bucket: Timestamp, amount: Credits) {
        if let Some(b) = self.buckets.iter_mut().find(|b| b.start == bucket) {
            b.spent = given_back(b.spent, amount);
        }
    }

    fn spend(&mut self, amount: Credits) -> Option<Timestamp> {
        let counted = self.limit.count(&self.buckets, amount, self.now).ok()?;
        self.add(counted.bucket, amount);
        Some(counted.bucket)
    }

    fn run(&mut self, step: &Step) {
        match *step {
            Step::Consume(n) => {
                self.spend(c(n));
            }
            Step::Reserve(n) => {
                if let Some(bucket) = self.spend(c(n)) {
                    self.holds.push((bucket, c(n)));
                }
            }
            Step::Settle { hold, charged } => {
                if hold >= self.holds.len() {
                    return;
                }
                let (bucket, held) = self.holds.remove(hold);
                let room = self.limit.room(&self.buckets, self.now).unwrap();
                let charged = c(charged).min(held.checked_add(room).unwrap());
                match charged.checked_sub(held) {
                    Ok(over) => {
                        if !over.is_zero() {
                            self.spend(over).expect("the room covers the overrun");
                        }
                    }
                    Err(_) => self.give_back(bucket, held.checked_sub(charged).unwrap()),
                }
            }
            Step::Release(hold) => {
                if hold < self.holds.len() {
                    let (bucket, held) = self.holds.remove(hold);
                    self.give_back(bucket, held);
                }
            }
            Step::Wait(ms) => self.now = self.now.plus_millis(ms),
        }
    }
}

proptest! {
    /// For any interleaving of consumes, holds, settles, releases and waits across window
    /// boundaries, what a hard limit's window holds never passes the limit.
    #[test]
    fn a_hard_limit_is_never_passed(
        credits in 1..100i64,
        window in window(),
        start in 0..(30 * 24 * HOUR),
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let mut model = Model {
            limit: hard(credits, window),
            buckets: Vec::new(),
            holds: Vec::new(),
            now: at(start),
        };
        for s in &steps {
            model.run(s);
            let standing = model.limit.standing(&model.buckets, model.now);
            prop_assert!(standing.used <= model.limit.credits, "{standing:?} after {s:?}");
            prop_assert_eq!(
                standing.left,
                model.limit.credits.checked_sub(standing.used).unwrap()
            );
            prop_assert!(standing.resets_at > model.now);
        }
    }
}

#[test]
fn a_limit_counts_the_spends_of_its_feature_model_key_and_member() {
    use super::LimitScope;
    let scope =
        |feature: Option<&str>, model: Option<&str>, key: Option<&str>, member: Option<&str>| {
            LimitScope {
                feature: feature.map(str::to_owned),
                model: model.map(str::to_owned),
                api_key: key.map(str::to_owned),
                member: member.map(|m| crate::UserId::new(m).unwrap()),
            }
        };
    let spend = scope(Some("chat"), Some("gpt-4o"), Some("key_1"), Some("usr_1"));
    let bare = scope(None, None, None, None);
    // Every spend of the account, with or without any part.
    assert!(bare.counts(&spend));
    assert!(bare.counts(&bare));
    // Each part alone: the spend's own, not another's, nor a spend without it.
    let parts = [
        (
            scope(Some("chat"), None, None, None),
            scope(Some("image"), None, None, None),
        ),
        (
            scope(None, Some("gpt-4o"), None, None),
            scope(None, Some("o3"), None, None),
        ),
        (
            scope(None, None, Some("key_1"), None),
            scope(None, None, Some("key_2"), None),
        ),
        (
            scope(None, None, None, Some("usr_1")),
            scope(None, None, None, Some("usr_2")),
        ),
    ];
    for (mine, other) in parts {
        assert!(mine.counts(&spend), "{mine:?}");
        assert!(!other.counts(&spend), "{other:?}");
        assert!(!mine.counts(&bare), "{mine:?}");
    }
    // Several parts: all must be the spend's.
    assert!(spend.counts(&spend));
    assert!(scope(Some("chat"), Some("gpt-4o"), None, None).counts(&spend));
    assert!(!scope(Some("chat"), Some("o3"), None, None).counts(&spend));
    assert!(!scope(Some("image"), None, Some("key_1"), None).counts(&spend));
    // What a refusal names.
    assert_eq!(bare.owner_code(), "account");
    assert_eq!(
        scope(Some("chat"), Some("o3"), None, None).owner_code(),
        "account"
    );
    assert_eq!(scope(None, None, Some("key_1"), None).owner_code(), "key");
    assert_eq!(spend.owner_code(), "member");
}
