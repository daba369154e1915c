//! The parts of `/pricing` that show offers: the currency picker, the billing-interval toggle,
//! one card per offer, its payment methods, and the panel that continues a purchase after
//! sign-in.

use domain::plan::{Held, Holdings, Offer, OfferCard, PlanInterval, Prominence};
use domain::{Credits, Currency, Duration, Plan, PlanType, ProviderId};
use maud::{Markup, html};

use super::{Choices, Tab, buy_fields, buy_label_key, continue_link};
use crate::format;
use crate::markdown;
use crate::state::Visitor;

/// What every card needs besides its offer.
pub(crate) struct CardContext<'a> {
    pub(crate) v: &'a Visitor,
    pub(crate) choices: &'a Choices,
    pub(crate) holdings: &'a Holdings,
    pub(crate) development: bool,
}

/// The catalog key of a provider as a payment method a buyer knows ("Card", "PayPal").
pub(crate) fn method_key(provider: ProviderId) -> &'static str {
    match provider {
        ProviderId::WalletQr => "method.wallet_qr",
        ProviderId::WalletWeb => "method.wallet_web",
        ProviderId::CardGateway => "method.card_gateway",
        ProviderId::WalletGlobal => "method.wallet_global",
        ProviderId::MorA => "method.mor_a",
        ProviderId::MorB => "method.mor_b",
        ProviderId::MorC => "method.mor_c",
    }
}

/// The catalog key of a billing interval's toggle label.
fn period_key(interval: PlanInterval) -> &'static str {
    match interval {
        PlanInterval::Month => "pricing.period_month",
        PlanInterval::Quarter => "pricing.period_quarter",
        PlanInterval::HalfYear => "pricing.period_half_year",
        PlanInterval::Year => "pricing.period_year",
        PlanInterval::Months(_) => "pricing.period_months",
        PlanInterval::Lifetime | PlanInterval::OneTime => "pricing.period_once",
    }
}

/// Links to show only the offers priced in one currency, and all of them again, when the listed
/// plans use more than one. Without a chosen currency every offer shows, each in the reader's
/// language's currency where it has it.
pub(crate) fn currency_picker(c: &CardContext<'_>, plans: &[&Plan]) -> Markup {
    let mut currencies: Vec<Currency> = Vec::new();
    for plan in plans {
        let currency = plan.price().currency();
        if !currencies.contains(&currency) {
            currencies.push(currency);
        }
    }
    let shown = c.choices.currency.asked();
    let v = c.v;
    let all = c.choices.link(c.choices.tab, c.choices.period, None);
    html! {
        @if currencies.len() > 1 {
            nav.currency-picker aria-label=(v.t("pricing.currency_label")) data-testid="currencies" {
                span.currency-label { (v.t("pricing.currency_label")) }
                @if shown.is_none() {
                    a.currency-option.is-selected href=(all) aria-current="true"
                        data-currency="all" { (v.t("pricing.currency_all")) }
                } @else {
                    a.currency-option href=(all) data-currency="all" { (v.t("pricing.currency_all")) }
                }
                @for currency in currencies {
                    @let href = c.choices.link(c.choices.tab, c.choices.period, Some(currency));
                    @if Some(currency) == shown {
                        a.currency-option.is-selected href=(href) aria-current="true"
                            data-currency=(currency.code()) { (currency.code()) }
                    } @else {
                        a.currency-option href=(href) data-currency=(currency.code()) {
                            (currency.code())
                        }
                    }
                }
            }
        }
    }
}

/// The monthly / yearly (/ …) toggle of the subscriptions tab, when offers come in more than
/// one interval (in the chosen currency, when there is one); the yearly link says the best
/// saving.
pub(crate) fn period_toggle(c: &CardContext<'_>, offers: &[Offer<'_>]) -> Markup {
    let intervals = c.choices.currency.sold_intervals(offers);
    let v = c.v;
    html! {
        @if intervals.len() > 1 {
            nav.period-toggle aria-label=(v.t("pricing.period_label")) data-testid="period-toggle" {
                @for interval in intervals {
                    @let href = c.choices.link(Tab::Subscriptions, Some(interval), c.choices.currency.asked());
                    @let saving = best_saving(c, offers, interval);
                    a.period-option.is-selected[c.choices.period == Some(interval)]
                        href=(href) data-period=(super::period_slug(interval))
                        aria-current=[(c.choices.period == Some(interval)).then_some("true")] {
                        (period_label(v, interval))
                        @if let Some(percent) = saving {
                            " "
                            span.badge.badge-success.saving {
                                (v.tf("pricing.save_percent", &[("percent", &percent.to_string())]))
                            }
                        }
                    }
                }
            }
        }
    }
}

fn period_label(v: &Visitor, interval: PlanInterval) -> String {
    match interval {
        PlanInterval::Months(n) => v.tf(period_key(interval), &[("months", &n.to_string())]),
        other => v.t(period_key(other)).to_owned(),
    }
}

/// The largest saving any offer gives at `interval` over its monthly price.
fn best_saving(c: &CardContext<'_>, offers: &[Offer<'_>], interval: PlanInterval) -> Option<u32> {
    if interval == PlanInterval::Month {
        return None;
    }
    offers
        .iter()
        .filter_map(|offer| {
            let choice = offer.choose(Some(interval), c.choices.currency.preferred());
            (choice.interval == interval)
                .then(|| offer.saving_percent(PlanInterval::Month, interval, choice.currency))
                .flatten()
        })
        .max()
}

/// The cards a tab shows: on the subscriptions tab only offers sold at the toggle's interval,
/// and with a chosen currency only offers priced in it (at that interval).
pub(crate) fn shown<'o, 'p>(
    choices: &Choices,
    tab: Tab,
    offers: &'o [Offer<'p>],
) -> Vec<OfferCard<'o, 'p>> {
    let wanted = (tab == Tab::Subscriptions)
        .then_some(choices.period)
        .flatten();
    choices.currency.cards(offers, wanted)
}

/// The cards of one tab; when the chosen currency leaves none, a link to every currency.
pub(crate) fn offer_grid(c: &CardContext<'_>, tab: Tab, offers: &[Offer<'_>]) -> Markup {
    let cards = shown(c.choices, tab, offers);
    let v = c.v;
    html! {
        @if cards.is_empty() {
            div.empty-state {
                @if let (Some(currency), false) = (c.choices.currency.asked(), offers.is_empty()) {
                    p { (v.tf("pricing.empty_in_currency", &[("currency", currency.code())])) }
                    a.btn.btn-secondary href=(c.choices.link(tab, c.choices.period, None)) {
                        (v.t("pricing.all_currencies"))
                    }
                } @else {
                    p { (v.t("pricing.empty")) }
                }
            }
        } @else {
            div.plan-grid {
                @for card in &cards {
                    (offer_card(c, card))
                }
            }
        }
    }
}

/// One offer's card: the first method's plan gives the texts and the price; each method is a
/// Buy button. The card's id is `plan-<that plan's id>`.
fn offer_card(c: &CardContext<'_>, card: &OfferCard<'_, '_>) -> Markup {
    let (offer, choice) = (card.offer, &card.choice);
    let v = c.v;
    let lead = choice.methods[0];
    let text = lead.text_for(&v.lang.locale());
    let recommended = choice
        .methods
        .iter()
        .any(|p| p.prominence() == Prominence::Recommended);
    let held = c.holdings.of(card);
    let saving = offer.saving_percent(PlanInterval::Month, choice.interval, choice.currency);
    html! {
        article.plan-card.is-recommended[recommended].is-held[held != Held::Nothing]
            id={"plan-" (lead.id())} data-plan-id=(lead.id()) data-offer=(offer.key().anchor())
            data-interval=(choice.interval.code()) data-currency=(choice.currency.code()) {
            @if recommended && held == Held::Nothing {
                span.badge.badge-primary.plan-ribbon { (v.t("pricing.recommended")) }
            }
            (held_badge(v, held))
            header.plan-head {
                h2.plan-name { (text.name) }
                @if let Some(percent) = saving {
                    span.badge.badge-success.saving data-testid="saving" {
                        (v.tf("pricing.save_percent", &[("percent", &percent.to_string())]))
                    }
                }
            }
            (markdown::paragraphs(&text.description, "plan-description"))
            (price_block(v, lead, &text.duration))
            @if let (Some(dev), true) = (lead.development_price(), c.development) {
                p.dev-price {
                    (v.tf("pricing.development_price", &[("price", &format::money(dev, v.lang))]))
                }
            }
            @if !text.features.is_empty() {
                ul.features {
                    @for feature in &text.features {
                        li { (markdown::inline(feature)) }
                    }
                }
            }
            div.plan-action { (methods(c, choice, held)) }
        }
    }
}

fn held_badge(v: &Visitor, held: Held) -> Markup {
    html! {
        @match held {
            Held::Current => span.badge.badge-success.plan-ribbon data-testid="current-plan" {
                (v.t("pricing.current_plan"))
            },
            Held::Owned => span.badge.badge-success.plan-ribbon data-testid="owned" {
                (v.t("pricing.owned"))
            },
            Held::Nothing => {},
        }
    }
}

fn price_block(v: &Visitor, plan: &Plan, duration_label: &str) -> Markup {
    html! {
        div.price {
            @if let Some(original) = plan.original_price() {
                del.price-was data-testid="original-price" {
                    span.sr-only { (v.t("pricing.original_price")) " " }
                    (format::money(original, v.lang))
                }
            }
            span.price-now data-testid="price" { (format::money(plan.price(), v.lang)) }
            // A credit pack is bought once: its months are how long the credits last, not a
            // billing period.
            @if !duration_label.is_empty() && plan.plan_type() != PlanType::Credits {
                span.price-period { "/ " (duration_label) }
            }
        }
        @if let Some(credits) = plan.credits() {
            p.plan-credits { (credits_line(v, plan, credits, duration_label)) }
        }
        @if let Some(validity) = credits_validity(v, plan) {
            p.plan-validity data-testid="credits-validity" { (validity) }
        }
    }
}

/// "Credits valid for 12 months" for a credit pack whose credits expire; `None` otherwise.
fn credits_validity(v: &Visitor, plan: &Plan) -> Option<String> {
    match (plan.plan_type(), plan.duration()) {
        (PlanType::Credits, Some(Duration::Months(months))) if months.get() == 1 => {
            Some(v.t("pricing.credits_valid_month").to_owned())
        }
        (PlanType::Credits, Some(Duration::Months(months))) => Some(v.tf(
            "pricing.credits_valid_months",
            &[("months", &months.get().to_string())],
        )),
        _ => None,
    }
}

/// "1,000 credits", or for a subscription "Includes 1,000 credits every month".
fn credits_line(v: &Visitor, plan: &Plan, credits: Credits, duration_label: &str) -> String {
    let amount = format::credits(credits);
    match (plan.plan_type(), duration_label.is_empty()) {
        (PlanType::Recurring, false) => v.tf(
            "pricing.credits_per_duration",
            &[("amount", &amount), ("duration", duration_label)],
        ),
        (PlanType::Recurring, true) => v.tf("pricing.credits_per_period", &[("amount", &amount)]),
        // A pack's credits count its bonus in: "500 + 50 bonus credits".
        _ => match plan.bonus() {
            Some(bonus) => {
                let paid = credits.checked_sub(bonus.credits).unwrap_or(Credits::ZERO);
                v.tf(
                    "credits.amount_with_bonus",
                    &[
                        ("amount", &format::credits(paid)),
                        ("bonus", &format::credits(bonus.credits)),
                    ],
                )
            }
            None => v.tf("credits.amount", &[("amount", &amount)]),
        },
    }
}

/// The card's action: "Current plan" / "Owned" with a link to the dashboard, else one Buy
/// button per payment method (a form each, or for a signed-out reader a link through sign-in
/// that comes back to continue the purchase). A method whose price differs from the card's
/// says its own.
fn methods(c: &CardContext<'_>, choice: &domain::plan::OfferChoice<'_>, held: Held) -> Markup {
    let v = c.v;
    let lead = choice.methods[0];
    let several = choice.methods.len() > 1;
    html! {
        @if held != Held::Nothing {
            a.btn.btn-block.btn-secondary href=(c.choices.dashboard_link()) data-testid="manage" {
                (v.t("pricing.dashboard_link"))
            }
        } @else {
            @if several {
                p.method-label { (v.t(buy_label_key(lead.plan_type()))) " · " (v.t("pricing.choose_method")) }
            }
            div.methods role=[several.then_some("group")]
                aria-label=[several.then(|| v.t("pricing.choose_method"))] {
                @for (index, plan) in choice.methods.iter().enumerate() {
                    (method_button(v, plan, lead, index == 0, several))
                }
            }
            @if v.user.is_none() {
                p.sign-in-note { (v.t("pricing.sign_in_to_buy")) }
            }
        }
    }
}

fn method_button(v: &Visitor, plan: &Plan, lead: &Plan, first: bool, several: bool) -> Markup {
    let variant = if first && (several || plan.prominence() == Prominence::Recommended) {
        "btn-primary"
    } else {
        "btn-secondary"
    };
    let method = v.t(method_key(plan.provider()));
    let label = if several {
        method.to_owned()
    } else {
        v.tf(
            "pricing.buy_with",
            &[
                ("action", v.t(buy_label_key(plan.plan_type()))),
                ("method", method),
            ],
        )
    };
    let own_price = (plan.price() != lead.price()).then(|| format::money(plan.price(), v.lang));
    let content = html! {
        (label)
        @if let Some(price) = own_price { " · " span.method-price { (price) } }
    };
    html! {
        @if v.user.is_some() {
            form.method-form method="post" action="/pricing/buy" data-busy
                data-method-plan=(plan.id()) {
                (buy_fields(v, plan))
                button.btn.btn-block.(variant) type="submit" data-testid="buy"
                    data-method=(plan.provider().as_str()) { (content) }
            }
        } @else {
            a.btn.btn-block.(variant) data-testid="buy" data-method=(plan.provider().as_str())
                data-method-plan=(plan.id()) href=(continue_link(plan)) { (content) }
        }
    }
}

/// `/pricing/continue`: the plan and method the buyer chose before signing in, and one button
/// that buys it.
pub(crate) fn resume_panel(v: &Visitor, plan: &Plan, development: bool) -> Markup {
    let text = plan.text_for(&v.lang.locale());
    let method = v.t(method_key(plan.provider()));
    html! {
        section.narrow.message-panel.resume-purchase data-testid="continue-purchase" {
            h1 { (v.t("pricing.continue_title")) }
            p.lead { (v.t("pricing.continue_text")) }
            div.plan-card.resume-card id={"plan-" (plan.id())} data-plan-id=(plan.id()) {
                h2.plan-name { (text.name) }
                (price_block(v, plan, &text.duration))
                @if let (Some(dev), true) = (plan.development_price(), development) {
                    p.dev-price {
                        (v.tf("pricing.development_price", &[("price", &format::money(dev, v.lang))]))
                    }
                }
                p.resume-method { (v.tf("pricing.paying_with", &[("method", method)])) }
            }
            div.actions {
                form method="post" action="/pricing/buy" data-busy {
                    (buy_fields(v, plan))
                    button.btn.btn-primary type="submit" data-testid="continue-buy" {
                        (v.tf("pricing.buy_with", &[
                            ("action", v.t(buy_label_key(plan.plan_type()))),
                            ("method", method),
                        ]))
                    }
                }
                " "
                a.btn.btn-secondary href="/pricing" { (v.t("pricing.back")) }
            }
        }
    }
}
