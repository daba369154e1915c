//! Promo codes: codes an operator creates that users redeem for credits.
//!
//! A code is case-insensitive (stored and compared upper-case), made of letters, digits, `-`
//! and `_`. Its terms say what a redemption grants (credits, their category and expiry) and who
//! may redeem it, when, and how often: a validity window, a limit on redemptions in total and
//! per user, and optionally only users who never paid for anything (Stripe's promotion codes'
//! `first_time_transaction`) or only holders of one plan.
//!
//! [`decide_redemption`] decides from facts read before the write; the write then guards what
//! concurrency could change: the code's count of redemptions only moves up while it is below
//! the total limit (the 1,000th redemption of a 1,000-code campaign is the last), and the
//! user's redemption is written under its ordinal (`by_user + 1`), unique per code and user, so
//! two concurrent redemptions by one user cannot both be their first.

use crate::{Credits, GrantCategory, PlanId, Timestamp};

/// The shortest code.
pub const PROMO_CODE_MIN_LEN: usize = 3;
/// The longest code.
pub const PROMO_CODE_MAX_LEN: usize = 40;
/// The most redemptions one user may be allowed of one code.
pub const MAX_REDEMPTIONS_PER_USER: u32 = 1000;
/// The longest expiry of a code's credits, in days (ten years).
pub const MAX_PROMO_EXPIRY_DAYS: u32 = 3650;

/// A promo code as users type it, normalized: trimmed and upper-case.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PromoCode(String);

/// Why a text is not a promo code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromoCodeError {
    /// Shorter than [`PROMO_CODE_MIN_LEN`] or longer than [`PROMO_CODE_MAX_LEN`].
    Length,
    /// A character other than a letter, a digit, `-` or `_`.
    Character,
}

impl std::fmt::Display for PromoCodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PromoCodeError::Length => write!(
                f,
                "must be {PROMO_CODE_MIN_LEN} to {PROMO_CODE_MAX_LEN} characters"
            ),
            PromoCodeError::Character => {
                f.write_str("may hold only letters A to Z, digits, '-' and '_'")
            }
        }
    }
}

impl std::error::Error for PromoCodeError {}

impl PromoCode {
    /// The code `text` stands for: surrounding spaces dropped, letters upper-cased.
    ///
    /// # Errors
    /// [`PromoCodeError`].
    pub fn parse(text: &str) -> Result<Self, PromoCodeError> {
        let code = text.trim().to_ascii_uppercase();
        if !(PROMO_CODE_MIN_LEN..=PROMO_CODE_MAX_LEN).contains(&code.len()) {
            return Err(PromoCodeError::Length);
        }
        if !code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(PromoCodeError::Character);
        }
        Ok(Self(code))
    }

    /// The normalized code.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PromoCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The note of a redemption's ledger entry: "Promo code LAUNCH-50".
#[must_use]
pub fn grant_note(code: &PromoCode) -> String {
    format!("Promo code {code}")
}

/// Who may redeem a code and what it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromoTerms {
    /// Credits per redemption (positive).
    pub credits: Credits,
    /// What the credits are (promotional unless the operator says otherwise).
    pub category: GrantCategory,
    /// Days after the redemption when its credits expire; `None`: they do not.
    pub expires_after_days: Option<u32>,
    /// From when it can be redeemed; `None`: from its creation.
    pub valid_from: Option<Timestamp>,
    /// Until when (exclusive); `None`: no end.
    pub valid_until: Option<Timestamp>,
    /// The most redemptions in total; `None`: no limit.
    pub max_redemptions: Option<u32>,
    /// The most redemptions by one user (at least one).
    pub per_user: u32,
    /// Only users who never paid an order.
    pub new_users_only: bool,
    /// Only users who hold this plan now (a running subscription or one-time access).
    pub plan: Option<PlanId>,
}

/// Why terms are not valid ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromoTermsError {
    /// Zero credits.
    ZeroCredits,
    /// A validity window that ends before it starts.
    Window,
    /// A total limit of zero.
    ZeroTotal,
    /// A per-user limit outside 1 to [`MAX_REDEMPTIONS_PER_USER`].
    PerUser,
    /// An expiry outside 1 to [`MAX_PROMO_EXPIRY_DAYS`] days.
    Expiry,
}

impl std::fmt::Display for PromoTermsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PromoTermsError::ZeroCredits => f.write_str("credits must be positive"),
            PromoTermsError::Window => f.write_str("validUntil must be after validFrom"),
            PromoTermsError::ZeroTotal => f.write_str("maxRedemptions must be at least 1"),
            PromoTermsError::PerUser => {
                write!(f, "perUser must be 1 to {MAX_REDEMPTIONS_PER_USER}")
            }
            PromoTermsError::Expiry => {
                write!(f, "expiresAfterDays must be 1 to {MAX_PROMO_EXPIRY_DAYS}")
            }
        }
    }
}

impl std::error::Error for PromoTermsError {}

impl PromoTerms {
    /// When the credits of a redemption made `at` expire, if they do.
    #[must_use]
    pub fn expires_at(&self, at: Timestamp) -> Option<Timestamp> {
        self.expires_after_days
            .map(|days| at.plus_days(i64::from(days)))
    }

    /// Check the terms' own rules.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn check(&self) -> Result<(), PromoTermsError> {
        if self.credits.is_zero() {
            return Err(PromoTermsError::ZeroCredits);
        }
        if let (Some(from), Some(until)) = (self.valid_from, self.valid_until)
            && until.unix_millis() <= from.unix_millis()
        {
            return Err(PromoTermsError::Window);
        }
        if self.max_redemptions == Some(0) {
            return Err(PromoTermsError::ZeroTotal);
        }
        if !(1..=MAX_REDEMPTIONS_PER_USER).contains(&self.per_user) {
            return Err(PromoTermsError::PerUser);
        }
        if self
            .expires_after_days
            .is_some_and(|d| !(1..=MAX_PROMO_EXPIRY_DAYS).contains(&d))
        {
            return Err(PromoTermsError::Expiry);
        }
        Ok(())
    }
}

/// What a redemption is decided from, read before the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedemptionFacts {
    /// Now.
    pub now: Timestamp,
    /// Whether an administrator has not disabled the code.
    pub active: bool,
    /// Its redemptions so far, by everyone.
    pub redeemed: u32,
    /// The redeeming user's redemptions of it so far.
    pub by_user: u32,
    /// Whether the user ever paid an order.
    pub has_paid: bool,
    /// Whether the user holds the plan the terms name (false when they name none).
    pub holds_plan: bool,
}

/// Why a redemption is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromoRefusal {
    /// No such code, disabled, or outside its validity window (told alike, so that guessing
    /// learns nothing about codes the guesser cannot redeem).
    Invalid,
    /// Redeemed as often as its total limit allows.
    Exhausted,
    /// The user redeemed it as often as the per-user limit allows.
    AlreadyRedeemed,
    /// Only for users who never paid an order.
    NewUsersOnly,
    /// Only for holders of a plan the user does not hold.
    PlanRequired,
}

impl PromoRefusal {
    /// The stable code (API, pages).
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            PromoRefusal::Invalid => "promo_code_invalid",
            PromoRefusal::Exhausted => "promo_code_exhausted",
            PromoRefusal::AlreadyRedeemed => "promo_code_already_redeemed",
            PromoRefusal::NewUsersOnly | PromoRefusal::PlanRequired => "promo_code_not_eligible",
        }
    }
}

/// A redemption decided: what to grant, and the guards its write keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redemption {
    /// The user's how-manieth redemption of the code (from 1): unique per code and user.
    pub ordinal: u32,
    /// Credits to grant.
    pub credits: Credits,
    /// Their category.
    pub category: GrantCategory,
    /// When they expire.
    pub expires_at: Option<Timestamp>,
}

/// Whether `facts` allow a redemption of a code with `terms`, and what it grants.
///
/// # Errors
/// [`PromoRefusal`], in this order: invalid (disabled, not yet valid, expired), exhausted,
/// already redeemed by the user, not eligible.
pub fn decide_redemption(
    terms: &PromoTerms,
    facts: &RedemptionFacts,
) -> Result<Redemption, PromoRefusal> {
    let now = facts.now.unix_millis();
    let started = terms.valid_from.is_none_or(|t| t.unix_millis() <= now);
    let ended = terms.valid_until.is_some_and(|t| t.unix_millis() <= now);
    if !facts.active || !started || ended {
        return Err(PromoRefusal::Invalid);
    }
    if terms
        .max_redemptions
        .is_some_and(|max| facts.redeemed >= max)
    {
        return Err(PromoRefusal::Exhausted);
    }
    if facts.by_user >= terms.per_user {
        return Err(PromoRefusal::AlreadyRedeemed);
    }
    if terms.new_users_only && facts.has_paid {
        return Err(PromoRefusal::NewUsersOnly);
    }
    if terms.plan.is_some() && !facts.holds_plan {
        return Err(PromoRefusal::PlanRequired);
    }
    Ok(Redemption {
        ordinal: facts.by_user + 1,
        credits: terms.credits,
        category: terms.category,
        expires_at: terms.expires_at(facts.now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn terms() -> PromoTerms {
        PromoTerms {
            credits: Credits::from_hundredths(50_000).unwrap(),
            category: GrantCategory::Promotional,
            expires_after_days: Some(30),
            valid_from: Some(Timestamp::from_unix_millis(1_000)),
            valid_until: Some(Timestamp::from_unix_millis(10_000)),
            max_redemptions: Some(3),
            per_user: 1,
            new_users_only: false,
            plan: None,
        }
    }

    fn facts(now: i64) -> RedemptionFacts {
        RedemptionFacts {
            now: Timestamp::from_unix_millis(now),
            active: true,
            redeemed: 0,
            by_user: 0,
            has_paid: false,
            holds_plan: false,
        }
    }

    #[test]
    fn codes_are_case_insensitive_and_checked() {
        assert_eq!(
            PromoCode::parse("  launch-50 ").unwrap().as_str(),
            "LAUNCH-50"
        );
        assert_eq!(PromoCode::parse("ab"), Err(PromoCodeError::Length));
        assert_eq!(
            PromoCode::parse(&"A".repeat(41)),
            Err(PromoCodeError::Length)
        );
        assert_eq!(
            PromoCode::parse("LAUNCH 50"),
            Err(PromoCodeError::Character)
        );
        assert_eq!(PromoCode::parse("LAUNCHÉ"), Err(PromoCodeError::Character));
    }

    #[test]
    fn terms_check_their_own_rules() {
        assert_eq!(terms().check(), Ok(()));
        let zero = PromoTerms {
            credits: Credits::ZERO,
            ..terms()
        };
        assert_eq!(zero.check(), Err(PromoTermsError::ZeroCredits));
        let window = PromoTerms {
            valid_until: Some(Timestamp::from_unix_millis(1_000)),
            ..terms()
        };
        assert_eq!(window.check(), Err(PromoTermsError::Window));
        let per_user = PromoTerms {
            per_user: 0,
            ..terms()
        };
        assert_eq!(per_user.check(), Err(PromoTermsError::PerUser));
        let total = PromoTerms {
            max_redemptions: Some(0),
            ..terms()
        };
        assert_eq!(total.check(), Err(PromoTermsError::ZeroTotal));
        let expiry = PromoTerms {
            expires_after_days: Some(0),
            ..terms()
        };
        assert_eq!(expiry.check(), Err(PromoTermsError::Expiry));
    }

    #[test]
    fn a_redemption_grants_the_terms_credits_with_their_expiry() {
        let r = decide_redemption(&terms(), &facts(2_000)).unwrap();
        assert_eq!(r.ordinal, 1);
        assert_eq!(r.credits, terms().credits);
        assert_eq!(r.category, GrantCategory::Promotional);
        assert_eq!(
            r.expires_at,
            Some(Timestamp::from_unix_millis(2_000 + 30 * 86_400_000))
        );
    }

    #[test]
    fn refusals_in_their_order() {
        let t = terms();
        let refuse = |f: RedemptionFacts, t: &PromoTerms| decide_redemption(t, &f).unwrap_err();
        assert_eq!(refuse(facts(999), &t), PromoRefusal::Invalid);
        assert_eq!(refuse(facts(10_000), &t), PromoRefusal::Invalid);
        let disabled = RedemptionFacts {
            active: false,
            ..facts(2_000)
        };
        assert_eq!(refuse(disabled, &t), PromoRefusal::Invalid);
        let full = RedemptionFacts {
            redeemed: 3,
            by_user: 1,
            ..facts(2_000)
        };
        assert_eq!(refuse(full, &t), PromoRefusal::Exhausted);
        let again = RedemptionFacts {
            by_user: 1,
            ..facts(2_000)
        };
        assert_eq!(refuse(again, &t), PromoRefusal::AlreadyRedeemed);
        let new_only = PromoTerms {
            new_users_only: true,
            ..terms()
        };
        let paid = RedemptionFacts {
            has_paid: true,
            ..facts(2_000)
        };
        assert_eq!(refuse(paid, &new_only), PromoRefusal::NewUsersOnly);
        let plan = PromoTerms {
            plan: Some(PlanId::new("pro").unwrap()),
            ..terms()
        };
        assert_eq!(refuse(facts(2_000), &plan), PromoRefusal::PlanRequired);
        let holder = RedemptionFacts {
            holds_plan: true,
            ..facts(2_000)
        };
        assert!(decide_redemption(&plan, &holder).is_ok());
    }

    proptest! {
        /// However many users try in whatever order, redemptions granted never pass either
        /// limit: each grant's guard is the count it was decided at.
        #[test]
        fn limits_are_never_passed(
            max in 1u32..20,
            per_user in 1u32..4,
            attempts in proptest::collection::vec(0u8..6, 0..80),
        ) {
            let t = PromoTerms { max_redemptions: Some(max), per_user, ..terms() };
            let mut total = 0u32;
            let mut by_user = [0u32; 6];
            for user in attempts {
                let f = RedemptionFacts {
                    redeemed: total,
                    by_user: by_user[usize::from(user)],
                    ..facts(2_000)
                };
                if let Ok(r) = decide_redemption(&t, &f) {
                    prop_assert_eq!(r.ordinal, by_user[usize::from(user)] + 1);
                    total += 1;
                    by_user[usize::from(user)] += 1;
                }
            }
            prop_assert!(total <= max);
            prop_assert!(by_user.iter().all(|&n| n <= per_user));
        }
    }
}
