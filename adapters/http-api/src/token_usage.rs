//! A call's tokens by kind, as consume, reserve and settle take them and the ledger's views
//! show them, with how the use was priced.

use application::ports::UsageContext;
use domain::pricing::{TokenKind, TokenUsage};
use poem_openapi::Object;

use crate::dto::timestamp;

/// Tokens of one call by kind, in the shape the AI SDKs report (`usage`). A kind left out is
/// 0; together they are 1 to 100,000,000. Each kind is priced by the model's price-book entry
/// (a kind the entry has no price for costs as input); a model without one is charged for
/// their total by the per-kilotoken rule.
#[derive(Debug, Clone, Default, Object)]
#[oai(rename_all = "camelCase")]
pub struct TokenUsageBody {
    /// Prompt tokens not read from the provider's cache.
    #[oai(validator(minimum(value = "0"), maximum(value = "100000000")))]
    pub input_tokens: Option<i64>,
    /// Completion tokens (without reasoning tokens).
    #[oai(validator(minimum(value = "0"), maximum(value = "100000000")))]
    pub output_tokens: Option<i64>,
    /// Prompt tokens read from the provider's cache.
    #[oai(validator(minimum(value = "0"), maximum(value = "100000000")))]
    pub cache_read_tokens: Option<i64>,
    /// Prompt tokens written to the provider's cache.
    #[oai(validator(minimum(value = "0"), maximum(value = "100000000")))]
    pub cache_write_tokens: Option<i64>,
    /// Reasoning (thinking) tokens.
    #[oai(validator(minimum(value = "0"), maximum(value = "100000000")))]
    pub reasoning_tokens: Option<i64>,
}

impl TokenUsageBody {
    /// The counts in [`TokenKind::ALL`]'s order (a kind left out is 0); checked by
    /// [`TokenUsage::new`] where they are priced.
    pub(crate) fn counts(&self) -> [i64; 5] {
        [
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.reasoning_tokens,
        ]
        .map(|c| c.unwrap_or(0))
    }
}

/// A call's tokens by kind, as recorded.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct TokenUsageView {
    /// Prompt tokens not read from the provider's cache.
    pub input_tokens: u64,
    /// Completion tokens (without reasoning tokens).
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_tokens: u64,
    /// Reasoning (thinking) tokens.
    pub reasoning_tokens: u64,
}

impl From<&TokenUsage> for TokenUsageView {
    fn from(u: &TokenUsage) -> Self {
        TokenUsageView {
            input_tokens: u.get(TokenKind::Input),
            output_tokens: u.get(TokenKind::Output),
            cache_read_tokens: u.get(TokenKind::CacheRead),
            cache_write_tokens: u.get(TokenKind::CacheWrite),
            reasoning_tokens: u.get(TokenKind::Reasoning),
        }
    }
}

/// How a spend was priced, as its views show it.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PricingView {
    /// The call's tokens by kind, when they were reported so.
    #[oai(skip_serializing_if_is_none)]
    pub usage: Option<TokenUsageView>,
    /// When the price-book entry of `model` that priced it took effect; absent: priced by
    /// the per-kilotoken or fixed rules.
    #[oai(skip_serializing_if_is_none)]
    pub price_from: Option<String>,
    /// The provider's cost of the use, in millionths of the price book's cost currency
    /// (rounded up), when the entry that priced it records costs.
    #[oai(skip_serializing_if_is_none)]
    pub cost_basis_millionths: Option<i64>,
}

impl From<&UsageContext> for PricingView {
    fn from(c: &UsageContext) -> Self {
        PricingView {
            usage: c.breakdown.as_ref().map(TokenUsageView::from),
            price_from: c.price_from.map(timestamp),
            cost_basis_millionths: c.cost_basis_millionths,
        }
    }
}
