//! Invitations to a team by e-mail: single-use, expiring, accepted only by a user signed in as
//! the address invited.
//!
//! Inviting is decided as an addition ([`super::decide_member_change`] with
//! [`super::MemberChange::Add`]): who may grant the role, a team mirroring a host organisation,
//! the seats. Accepting is decided here on the invitation's state, then as a join: the user must
//! not be a member already, and a seat must be free when they accept.

use crate::time::Timestamp;

/// How long an invitation may be accepted: seven days.
pub const INVITATION_LIFETIME_MS: i64 = 7 * 86_400_000;

/// An invitation's state, read in the acceptance's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvitationFacts {
    /// When it stops being acceptable.
    pub expires_at: Timestamp,
    /// Whether someone accepted it already.
    pub accepted: bool,
    /// Whether an owner or admin revoked it.
    pub revoked: bool,
    /// Whether the accepting user is signed in as the address invited.
    pub same_email: bool,
}

/// Why an invitation cannot be accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvitationRefusal {
    /// It was accepted already (it is single-use).
    Used,
    /// It was revoked.
    Revoked,
    /// It expired.
    Expired,
    /// The user is not signed in as the address invited.
    OtherEmail,
}

/// Decide whether an invitation in the state `facts` is accepted at `now`: neither used,
/// revoked nor expired, and accepted by the address it invited.
///
/// # Errors
/// The refusal, in that order of precedence.
pub fn decide_acceptance(facts: InvitationFacts, now: Timestamp) -> Result<(), InvitationRefusal> {
    if facts.accepted {
        return Err(InvitationRefusal::Used);
    }
    if facts.revoked {
        return Err(InvitationRefusal::Revoked);
    }
    if now >= facts.expires_at {
        return Err(InvitationRefusal::Expired);
    }
    if !facts.same_email {
        return Err(InvitationRefusal::OtherEmail);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> InvitationFacts {
        InvitationFacts {
            expires_at: Timestamp::from_unix_millis(INVITATION_LIFETIME_MS),
            accepted: false,
            revoked: false,
            same_email: true,
        }
    }

    #[test]
    fn an_invitation_is_accepted_once_before_it_expires_by_its_address() {
        let now = Timestamp::from_unix_millis(1);
        assert_eq!(decide_acceptance(facts(), now), Ok(()));
        let used = InvitationFacts {
            accepted: true,
            ..facts()
        };
        assert_eq!(decide_acceptance(used, now), Err(InvitationRefusal::Used));
        let revoked = InvitationFacts {
            revoked: true,
            ..facts()
        };
        assert_eq!(
            decide_acceptance(revoked, now),
            Err(InvitationRefusal::Revoked)
        );
        let late = facts().expires_at;
        assert_eq!(
            decide_acceptance(facts(), late),
            Err(InvitationRefusal::Expired)
        );
        let other = InvitationFacts {
            same_email: false,
            ..facts()
        };
        assert_eq!(
            decide_acceptance(other, now),
            Err(InvitationRefusal::OtherEmail)
        );
    }
}
