//! Teams that mirror the host application's organisations.
//!
//! A host token may name an organisation and the user's role in it. Such an organisation is a
//! team whose membership the host decides: the user is a member, with the token's role, of the
//! organisation their latest token names, and acts in no other such team until a token names
//! it again. A member whose token names another organisation, or none, is *away*: their row,
//! limit and window count are kept, but they neither act in the team nor hold one of its seats.
//! Coming back, like joining, takes a seat.

use super::{AccountId, MemberRole};

/// How the id of a team mirroring a host organisation starts: [`AccountId::TEAM_PREFIX`] and
/// `org_`, so the id tells by itself that the host manages the team's members.
pub const HOST_ORG_TEAM_PREFIX: &str = "team_org_";

impl AccountId {
    /// Whether this team mirrors a host organisation (its members follow the host's tokens).
    #[must_use]
    pub fn is_host_org(&self) -> bool {
        self.as_str().starts_with(HOST_ORG_TEAM_PREFIX)
    }
}

/// A user's membership of a host organisation's team, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOrgMembership {
    /// The team.
    pub account: AccountId,
    /// Their role, as the last token naming the organisation said.
    pub role: MemberRole,
    /// Whether they are away (their latest token named another organisation, or none).
    pub away: bool,
}

/// What a host token says of its user's organisation: the team it maps to and their role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOrgClaim {
    /// The organisation's team.
    pub account: AccountId,
    /// The user's role in it.
    pub role: MemberRole,
}

/// What keeping a user's memberships in step with their token writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostOrgSteps {
    /// Add them to the claimed team with this role (they have no row in it): takes a seat.
    pub join: Option<MemberRole>,
    /// They were away from the claimed team and come back: takes a seat.
    pub come_back: bool,
    /// Their role in the claimed team changes to this.
    pub set_role: Option<MemberRole>,
    /// The other teams they are present in and now step away from.
    pub step_away: Vec<AccountId>,
}

impl HostOrgSteps {
    /// Whether nothing is to be written.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.join.is_none()
            && !self.come_back
            && self.set_role.is_none()
            && self.step_away.is_empty()
    }

    /// Whether the steps take a seat in the claimed team.
    #[must_use]
    pub fn takes_a_seat(&self) -> bool {
        self.join.is_some() || self.come_back
    }
}

/// Plan what keeps `held` (the user's memberships of host organisations' teams) in step with
/// `claim` (the organisation their token names, if any): join or come back to the claimed
/// team with the claimed role, and step away from every other.
#[must_use]
pub fn plan_host_org(held: &[HostOrgMembership], claim: Option<&HostOrgClaim>) -> HostOrgSteps {
    let claimed = |m: &HostOrgMembership| claim.is_some_and(|c| c.account == m.account);
    let step_away = held
        .iter()
        .filter(|m| !m.away && !claimed(m))
        .map(|m| m.account.clone())
        .collect();
    let Some(claim) = claim else {
        return HostOrgSteps {
            step_away,
            ..HostOrgSteps::default()
        };
    };
    match held.iter().find(|m| claimed(m)) {
        None => HostOrgSteps {
            join: Some(claim.role),
            step_away,
            ..HostOrgSteps::default()
        },
        Some(row) => HostOrgSteps {
            join: None,
            come_back: row.away,
            set_role: (row.role != claim.role).then_some(claim.role),
            step_away,
        },
    }
}

/// Whether a team whose present members number `members` has a seat for one more, given the
/// seats it holds (`None`: no cap).
///
/// # Errors
/// [`super::MemberChangeRefusal::SeatsExhausted`] when the members fill the seats.
pub fn seat_free(members: u64, seats: Option<u64>) -> Result<(), super::MemberChangeRefusal> {
    match seats {
        Some(seats) if members >= seats => {
            Err(super::MemberChangeRefusal::SeatsExhausted { seats })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn team(n: u8) -> AccountId {
        AccountId::new(format!("{HOST_ORG_TEAM_PREFIX}{n:02}")).expect("valid")
    }

    fn held(n: u8, role: MemberRole, away: bool) -> HostOrgMembership {
        HostOrgMembership {
            account: team(n),
            role,
            away,
        }
    }

    fn claim(n: u8, role: MemberRole) -> HostOrgClaim {
        HostOrgClaim {
            account: team(n),
            role,
        }
    }

    #[test]
    fn a_host_organisation_s_team_is_told_by_its_id() {
        assert!(team(1).is_host_org());
        assert!(team(1).is_team());
        assert!(!AccountId::new("team_abc").expect("valid").is_host_org());
        assert!(!AccountId::new("usr_abc").expect("valid").is_host_org());
    }

    #[test]
    fn first_sight_joins_with_the_claimed_role() {
        let steps = plan_host_org(&[], Some(&claim(1, MemberRole::Admin)));
        assert_eq!(steps.join, Some(MemberRole::Admin));
        assert!(steps.takes_a_seat());
        assert!(steps.step_away.is_empty());
    }

    #[test]
    fn a_token_in_step_writes_nothing() {
        let rows = [
            held(1, MemberRole::Member, false),
            held(2, MemberRole::Owner, true),
        ];
        assert!(plan_host_org(&rows, Some(&claim(1, MemberRole::Member))).is_empty());
    }

    #[test]
    fn another_organisation_steps_away_from_the_first_and_keeps_it() {
        let rows = [held(1, MemberRole::Member, false)];
        let steps = plan_host_org(&rows, Some(&claim(2, MemberRole::Owner)));
        assert_eq!(steps.join, Some(MemberRole::Owner));
        assert_eq!(steps.step_away, [team(1)]);
        let back = plan_host_org(
            &[
                held(1, MemberRole::Member, true),
                held(2, MemberRole::Owner, false),
            ],
            Some(&claim(1, MemberRole::Admin)),
        );
        assert_eq!(back.join, None);
        assert!(back.come_back && back.takes_a_seat());
        assert_eq!(back.set_role, Some(MemberRole::Admin));
        assert_eq!(back.step_away, [team(2)]);
    }

    #[test]
    fn no_organisation_steps_away_from_every_team() {
        let rows = [
            held(1, MemberRole::Member, false),
            held(2, MemberRole::Admin, false),
        ];
        let steps = plan_host_org(&rows, None);
        assert_eq!(steps.step_away, [team(1), team(2)]);
        assert!(!steps.takes_a_seat());
        assert!(plan_host_org(&[held(3, MemberRole::Owner, true)], None).is_empty());
    }

    #[test]
    fn a_seat_is_free_below_the_cap_only() {
        assert!(seat_free(4, Some(5)).is_ok());
        assert!(seat_free(5, Some(5)).is_err());
        assert!(seat_free(9, Some(5)).is_err());
        assert!(seat_free(1_000, None).is_ok());
    }

    fn role() -> impl Strategy<Value = MemberRole> {
        prop::sample::select(MemberRole::ALL.to_vec())
    }

    proptest! {
        /// Whatever a user held and whatever their token names, after the steps they are
        /// present in the claimed team alone, with the claimed role, and every other row is
        /// kept (away).
        #[test]
        fn after_the_steps_the_user_is_present_in_the_claimed_team_alone(
            rows in prop::collection::btree_map(0_u8..6, (role(), any::<bool>()), 0..6),
            claimed in prop::option::of((0_u8..8, role())),
        ) {
            let rows: Vec<HostOrgMembership> =
                rows.into_iter().map(|(n, (r, away))| held(n, r, away)).collect();
            let claim = claimed.map(|(n, r)| claim(n, r));
            let steps = plan_host_org(&rows, claim.as_ref());
            let mut after = rows.clone();
            for row in &mut after {
                if steps.step_away.contains(&row.account) {
                    prop_assert!(!row.away, "only a present member steps away");
                    row.away = true;
                }
                if claim.as_ref().is_some_and(|c| c.account == row.account) {
                    prop_assert!(steps.join.is_none());
                    if steps.come_back { row.away = false; }
                    if let Some(r) = steps.set_role { row.role = r; }
                }
            }
            if let Some(role) = steps.join {
                after.push(HostOrgMembership { account: claim.clone().expect("a claim").account, role, away: false });
            }
            let present: Vec<&HostOrgMembership> = after.iter().filter(|m| !m.away).collect();
            match &claim {
                Some(c) => {
                    prop_assert_eq!(present.len(), 1);
                    prop_assert_eq!(&present[0].account, &c.account);
                    prop_assert_eq!(present[0].role, c.role);
                }
                None => prop_assert!(present.is_empty()),
            }
            prop_assert!(after.len() >= rows.len(), "no row is removed");
        }
    }
}
