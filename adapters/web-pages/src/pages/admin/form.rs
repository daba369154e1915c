//! The admin plan form: its fields (named as the spec spells them, so a validation error's
//! field names its input), parsing into a [`PlanInput`], localised validation errors shown
//! next to their fields, and rendering.

use std::collections::BTreeMap;

use application::ports::StoredPlan;
use application::use_cases::manage_plans::{MAX_LOCALES, PlanInput};
use domain::entitlements::{EntitlementDraft, Entitlements};
use domain::plan::PlanProblem;
use domain::{
    CapabilityError, Currency, Locale, Plan, PlanDraft, PlanText, PlanType, ProviderId,
    ProviderRefs, RefField,
};
use maud::{Markup, html};
use rust_decimal::Decimal;

use crate::i18n::Lang;
use crate::layout::csrf_field;
use crate::pages::{plan_type_key, provider_key};
use crate::state::Visitor;

/// The locales the form edits texts for; texts in other locales are kept as they are.
const FORM_LOCALES: [&str; 2] = ["en", "zh-CN"];
/// The entitlements input (one `key = value` per line).
const ENTITLEMENTS: &str = "entitlements";
/// The label's catalog key of a provider-side id field: `admin.field_` and the field in snake
/// case (`admin.field_card_gateway_price_id`).
pub(crate) fn ref_label(field: RefField) -> String {
    format!("admin.field_{}", field.key)
}

/// Submitted (or stored) values by field name.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlanForm {
    values: BTreeMap<String, String>,
}

/// Localised messages by field name.
pub(crate) type FieldErrors = BTreeMap<String, Vec<String>>;

impl PlanForm {
    /// The form as submitted.
    pub(crate) fn submitted(values: BTreeMap<String, String>) -> Self {
        Self { values }
    }

    /// A stored plan's values, for editing.
    pub(crate) fn from_stored(stored: &StoredPlan) -> Self {
        let draft = stored.plan.to_draft();
        let mut values = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            values.insert(k.to_owned(), v);
        };
        put("id", draft.id.clone());
        put("provider", draft.provider.clone().unwrap_or_default());
        put(
            "duration.type",
            draft.duration_type.clone().unwrap_or_default(),
        );
        put("currency", draft.currency.clone().unwrap_or_default());
        put("group", draft.group.clone().unwrap_or_default());
        put("amount", decimal_text(draft.amount));
        put("originalAmount", decimal_text(draft.original_amount));
        put("developmentAmount", decimal_text(draft.development_amount));
        put(
            "duration.months",
            draft.months.map(|m| m.to_string()).unwrap_or_default(),
        );
        put("duration.credits", decimal_text(draft.credits));
        put("duration.bonusCredits", decimal_text(draft.bonus_credits));
        put(
            "duration.bonusExpiresInDays",
            draft
                .bonus_expires_in_days
                .map(|d| d.to_string())
                .unwrap_or_default(),
        );
        if draft.recommended {
            put("recommended", "on".into());
        }
        if draft.hidden {
            put("hidden", "on".into());
        }
        for field in RefField::all() {
            let id = draft.provider_refs.get(field.provider).unwrap_or_default();
            put(field.field, id.to_owned());
        }
        let locales: Vec<&str> = stored.listing.locales.iter().map(Locale::as_str).collect();
        put("locales", locales.join(", "));
        put(
            "entitlements",
            entitlement_lines(stored.plan.entitlements()),
        );
        for tag in FORM_LOCALES {
            if let Some(text) = draft.i18n.get(tag) {
                put(&format!("i18n.{tag}.name"), text.name.clone());
                put(&format!("i18n.{tag}.description"), text.description.clone());
                put(&format!("i18n.{tag}.duration"), text.duration.clone());
                put(&format!("i18n.{tag}.features"), text.features.join("\n"));
            }
        }
        Self { values }
    }

    /// A fresh form for a new plan.
    pub(crate) fn blank() -> Self {
        let mut values = BTreeMap::new();
        values.insert("duration.type".to_owned(), "recurring".to_owned());
        values.insert("provider".to_owned(), "card_gateway".to_owned());
        values.insert("currency".to_owned(), "USD".to_owned());
        values.insert("duration.months".to_owned(), "1".to_owned());
        Self { values }
    }

    fn get(&self, name: &str) -> &str {
        self.values.get(name).map_or("", |v| v.trim())
    }

    fn checked(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// Parse and validate into a [`PlanInput`], keeping `existing`'s texts in other locales.
    ///
    /// # Errors
    /// Every problem, localised for `lang`, by field.
    pub(crate) fn to_input(
        &self,
        lang: Lang,
        existing: Option<&StoredPlan>,
        sort_order: i32,
    ) -> Result<PlanInput, FieldErrors> {
        let mut errors = FieldErrors::new();
        let draft = self.draft(lang, existing, &mut errors);
        if let Err(problems) = Plan::from_draft(&draft) {
            for problem in problems.0 {
                let field = if problem.field == "i18n.en" {
                    "i18n.en.name".to_owned()
                } else if problem.field.starts_with("entitlements") {
                    // One input holds every entitlement: its error says what each line needs.
                    errors
                        .entry(ENTITLEMENTS.to_owned())
                        .or_insert_with(|| vec![lang.t("admin.error.entitlement").to_owned()]);
                    continue;
                } else {
                    problem.field
                };
                if !errors.contains_key(&field) {
                    errors
                        .entry(field)
                        .or_default()
                        .push(problem_text(lang, &problem.problem));
                }
            }
        }
        let locales = self.locales(lang, &mut errors);
        if errors.is_empty() {
            Ok(PlanInput {
                draft,
                sort_order,
                locales,
            })
        } else {
            Err(errors)
        }
    }

    fn draft(
        &self,
        lang: Lang,
        existing: Option<&StoredPlan>,
        errors: &mut FieldErrors,
    ) -> PlanDraft {
        let mut decimal = |name: &str| -> Option<Decimal> {
            let raw = self.get(name);
            if raw.is_empty() {
                return None;
            }
            raw.parse::<Decimal>()
                .map_err(|_| {
                    errors
                        .entry(name.to_owned())
                        .or_default()
                        .push(lang.t("admin.error.number").to_owned())
                })
                .ok()
        };
        let amount = decimal("amount");
        let original_amount = decimal("originalAmount");
        let development_amount = decimal("developmentAmount");
        let credits = decimal("duration.credits");
        let bonus_credits = decimal("duration.bonusCredits");
        let mut whole = |name: &str| match self.get(name) {
            "" => None,
            raw => raw
                .parse::<i64>()
                .map_err(|_| {
                    errors
                        .entry(name.to_owned())
                        .or_default()
                        .push(lang.t("admin.error.whole_number").to_owned())
                })
                .ok(),
        };
        let months = whole("duration.months");
        let bonus_expires_in_days = whole("duration.bonusExpiresInDays");
        let optional = |name: &str| Some(self.get(name).to_owned()).filter(|v| !v.is_empty());
        PlanDraft {
            bonus_credits,
            bonus_expires_in_days,
            id: self.get("id").to_owned(),
            provider: optional("provider"),
            amount,
            original_amount,
            development_amount,
            currency: optional("currency"),
            recommended: self.checked("recommended"),
            hidden: self.checked("hidden"),
            group: optional("group"),
            months,
            duration_type: optional("duration.type"),
            credits,
            provider_refs: {
                let mut refs = ProviderRefs::default();
                for field in RefField::all() {
                    refs.set(field, optional(field.field));
                }
                refs
            },
            i18n: self.texts(existing),
            entitlements: self.entitlements(lang, errors),
        }
    }

    /// The `entitlements` input: one `key = value` per line, `true`/`false` or an integer
    /// (the plan rules then check keys and values); a line without `=` or a key given twice
    /// is an error here.
    fn entitlements(
        &self,
        lang: Lang,
        errors: &mut FieldErrors,
    ) -> BTreeMap<String, EntitlementDraft> {
        let mut drafts = BTreeMap::new();
        let mut malformed = false;
        for line in self.get(ENTITLEMENTS).lines().map(str::trim) {
            if line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                malformed = true;
                continue;
            };
            let value = value.trim();
            let draft = match value {
                "true" => EntitlementDraft::Flag(true),
                "false" => EntitlementDraft::Flag(false),
                _ => value.parse::<i64>().map_or_else(
                    |_| EntitlementDraft::Unsupported(format!("{value:?}")),
                    EntitlementDraft::Integer,
                ),
            };
            malformed |= drafts.insert(key.trim().to_owned(), draft).is_some();
        }
        if malformed {
            errors
                .entry(ENTITLEMENTS.to_owned())
                .or_default()
                .push(lang.t("admin.error.entitlement").to_owned());
        }
        drafts
    }

    fn texts(&self, existing: Option<&StoredPlan>) -> BTreeMap<String, PlanText> {
        let mut texts: BTreeMap<String, PlanText> = existing
            .map(|s| s.plan.to_draft().i18n)
            .unwrap_or_default()
            .into_iter()
            .filter(|(tag, _)| !FORM_LOCALES.contains(&tag.as_str()))
            .collect();
        for tag in FORM_LOCALES {
            let field = |name: &str| self.get(&format!("i18n.{tag}.{name}")).to_owned();
            let text = PlanText {
                name: field("name"),
                description: field("description"),
                duration: field("duration"),
                features: field("features")
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect(),
            };
            if tag == "en" || text != PlanText::default() {
                texts.insert(tag.to_owned(), text);
            }
        }
        texts
    }

    fn locales(&self, lang: Lang, errors: &mut FieldErrors) -> Vec<String> {
        let tags: Vec<String> = self
            .get("locales")
            .split([',', ' ', '\n'])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        for tag in &tags {
            if Locale::parse(tag).is_none() {
                errors
                    .entry("locales".into())
                    .or_default()
                    .push(lang.tf("admin.error.locale", &[("tag", tag)]));
            }
        }
        if tags.len() > MAX_LOCALES {
            errors.entry("locales".into()).or_default().push(lang.tf(
                "admin.error.too_many_locales",
                &[("max", &MAX_LOCALES.to_string())],
            ));
        }
        tags
    }
}

/// Entitlements as the form shows them: `key = value`, one per line, keys in order.
fn entitlement_lines(entitlements: &Entitlements) -> String {
    entitlements
        .iter()
        .map(|(key, value)| format!("{key} = {value}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn decimal_text(value: Option<Decimal>) -> String {
    value.map(|d| d.normalize().to_string()).unwrap_or_default()
}

/// A plan rule's message in the admin's language.
pub(crate) fn problem_text(lang: Lang, problem: &PlanProblem) -> String {
    match problem {
        PlanProblem::Missing => lang.t("admin.error.missing").to_owned(),
        PlanProblem::Invalid(_) => lang.t("admin.error.invalid").to_owned(),
        PlanProblem::NotPositive => lang.t("admin.error.not_positive").to_owned(),
        PlanProblem::BelowAmount => lang.t("admin.error.below_amount").to_owned(),
        PlanProblem::AboveAmount => lang.t("admin.error.above_amount").to_owned(),
        PlanProblem::MonthsOutOfRange { min, max } => lang.tf(
            "admin.error.months_range",
            &[("min", &min.to_string()), ("max", &max.to_string())],
        ),
        PlanProblem::LifetimeSubscription => lang.t("admin.error.lifetime_subscription").to_owned(),
        PlanProblem::NotAllowedFor(plan_type) => lang.tf(
            "admin.error.not_allowed_for",
            &[("type", lang.t(plan_type_key(*plan_type)))],
        ),
        PlanProblem::Capability(CapabilityError::PlanTypeNotSupported { .. }) => {
            lang.t("admin.error.provider_type").to_owned()
        }
        PlanProblem::Capability(CapabilityError::CurrencyNotSupported { .. }) => {
            lang.t("admin.error.provider_currency").to_owned()
        }
        PlanProblem::TooLong(max) => lang.tf("admin.error.too_long", &[("max", &max.to_string())]),
    }
}

/// How an input looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Text,
    Number,
    TextArea,
    Checkbox,
}

/// What every field of one rendering shares: the reader, the values and the errors.
struct Fields<'a> {
    v: &'a Visitor,
    form: &'a PlanForm,
    errors: &'a FieldErrors,
}

/// The whole form, posting to `action`.
pub(crate) fn render(
    v: &Visitor,
    form: &PlanForm,
    errors: &FieldErrors,
    action: &str,
    editing: bool,
) -> Markup {
    let f = Fields { v, form, errors };
    html! {
        @if !errors.is_empty() {
            div.alert.alert-danger role="alert" data-testid="form-errors" {
                p { strong { (v.t("admin.fix_errors")) } }
                ul {
                    @for field in errors.keys() {
                        li { a href={"#" (input_id(field))} { (field_label(v, field)) } }
                    }
                }
            }
        }
        form.plan-form method="post" action=(action) novalidate data-busy {
            (csrf_field(v))
            (basics(&f, editing))
            (price_section(&f))
            fieldset.form-section {
                legend { (v.t("admin.section_duration")) }
                div.form-grid {
                    (f.input("duration.months", "admin.field_months", Input::Number,
                        Some("admin.hint_months")))
                    (f.input("duration.credits", "admin.field_credits", Input::Number,
                        Some("admin.hint_credits")))
                    (f.input("duration.bonusCredits", "admin.field_bonus_credits", Input::Number,
                        Some("admin.hint_bonus_credits")))
                    (f.input("duration.bonusExpiresInDays", "admin.field_bonus_expiry",
                        Input::Number, None))
                }
            }
            fieldset.form-section {
                legend { (v.t("admin.section_provider_ids")) }
                p.hint { (v.t("admin.hint_provider_ids")) }
                div.form-grid {
                    @for field in RefField::all() {
                        (f.input(field.field, &ref_label(field), Input::Text, None))
                    }
                }
            }
            fieldset.form-section {
                legend { (v.t("admin.section_entitlements")) }
                (f.input(ENTITLEMENTS, "admin.field_entitlements", Input::TextArea,
                    Some("admin.hint_entitlements")))
            }
            fieldset.form-section {
                legend { (v.t("admin.section_visibility")) }
                (f.input("locales", "admin.field_locales", Input::Text, Some("admin.hint_locales")))
                div.checks {
                    (f.input("recommended", "admin.field_recommended", Input::Checkbox, None))
                    (f.input("hidden", "admin.field_hidden", Input::Checkbox, None))
                }
            }
            @for tag in FORM_LOCALES { (texts_section(&f, tag)) }
            div.form-actions {
                button.btn.btn-primary type="submit" data-testid="save-plan" {
                    (v.t(if editing { "admin.save" } else { "admin.create" }))
                }
                a.btn.btn-ghost href="/admin/pricing" { (v.t("admin.cancel")) }
            }
        }
    }
}

fn basics(f: &Fields<'_>, editing: bool) -> Markup {
    let v = f.v;
    let types: Vec<(String, String)> = [PlanType::Recurring, PlanType::OneTime, PlanType::Credits]
        .into_iter()
        .map(|t| (t.as_str().to_owned(), v.t(plan_type_key(t)).to_owned()))
        .collect();
    let providers: Vec<(String, String)> = ProviderId::ALL
        .into_iter()
        .map(|p| {
            (
                p.as_str().to_owned(),
                format!("{} — {}", p.as_str(), v.t(provider_key(p))),
            )
        })
        .collect();
    html! {
        fieldset.form-section {
            legend { (v.t("admin.section_basics")) }
            div.form-grid {
                @if editing {
                    div.field {
                        label for="f-id" { (v.t("admin.field_id")) }
                        input #f-id type="text" name="id" value=(f.form.get("id")) readonly;
                        p.hint { (v.t("admin.hint_id_fixed")) }
                    }
                } @else {
                    (f.input("id", "admin.field_id", Input::Text, Some("admin.hint_id")))
                }
                (f.select("duration.type", "admin.field_type", &types))
                (f.select("provider", "admin.field_provider", &providers))
                (f.input("group", "admin.field_group", Input::Text, Some("admin.hint_group")))
            }
        }
    }
}

fn price_section(f: &Fields<'_>) -> Markup {
    let currencies: Vec<(String, String)> = Currency::ALL
        .into_iter()
        .map(|c| (c.code().to_owned(), c.code().to_owned()))
        .collect();
    html! {
        fieldset.form-section {
            legend { (f.v.t("admin.section_price")) }
            div.form-grid {
                (f.select("currency", "admin.field_currency", &currencies))
                (f.input("amount", "admin.field_amount", Input::Number, None))
                (f.input("originalAmount", "admin.field_original_amount", Input::Number,
                    Some("admin.hint_original_amount")))
                (f.input("developmentAmount", "admin.field_development_amount", Input::Number,
                    Some("admin.hint_development_amount")))
            }
        }
    }
}

fn texts_section(f: &Fields<'_>, tag: &str) -> Markup {
    let name = |field: &str| format!("i18n.{tag}.{field}");
    let legend = f.v.tf("admin.section_texts", &[("locale", tag)]);
    html! {
        fieldset.form-section lang=(tag) {
            legend { (legend) }
            @if tag != "en" { p.hint { (f.v.t("admin.hint_optional_locale")) } }
            div.form-grid {
                (f.input(&name("name"), "admin.field_name", Input::Text, None))
                (f.input(&name("duration"), "admin.field_duration_label", Input::Text,
                    Some("admin.hint_duration_label")))
            }
            (f.input(&name("description"), "admin.field_description", Input::TextArea, None))
            (f.input(&name("features"), "admin.field_features", Input::TextArea,
                Some("admin.hint_features")))
        }
    }
}

/// A field's label for the error summary (the texts' fields name their locale).
fn field_label(v: &Visitor, field: &str) -> String {
    let key = match field {
        "id" => "admin.field_id",
        "duration.type" => "admin.field_type",
        "provider" => "admin.field_provider",
        "group" => "admin.field_group",
        "currency" => "admin.field_currency",
        "amount" => "admin.field_amount",
        "originalAmount" => "admin.field_original_amount",
        "developmentAmount" => "admin.field_development_amount",
        "duration.months" => "admin.field_months",
        "duration.credits" => "admin.field_credits",
        "duration.bonusCredits" => "admin.field_bonus_credits",
        "duration.bonusExpiresInDays" => "admin.field_bonus_expiry",
        "locales" => "admin.field_locales",
        ENTITLEMENTS => "admin.field_entitlements",
        other => {
            if let Some(rest) = other.strip_prefix("i18n.")
                && let Some((tag, part)) = rest.split_once('.')
            {
                let label = match part {
                    "name" => "admin.field_name",
                    "description" => "admin.field_description",
                    "duration" => "admin.field_duration_label",
                    _ => "admin.field_features",
                };
                return format!("{} ({tag})", v.t(label));
            }
            return other.to_owned();
        }
    };
    v.t(key).to_owned()
}

fn input_id(name: &str) -> String {
    format!("f-{}", name.replace('.', "-"))
}

impl Fields<'_> {
    /// One labelled input with its hint and its errors.
    fn input(&self, name: &str, label: &str, input: Input, hint: Option<&str>) -> Markup {
        let id = input_id(name);
        let messages = self.errors.get(name);
        let described = messages.map(|_| format!("{id}-error"));
        let invalid = messages.map(|_| "true");
        let value = self.form.get(name);
        html! {
            div.field.has-error[messages.is_some()].field-check[input == Input::Checkbox] {
                @if input == Input::Checkbox {
                    label.check for=(id) {
                        input #(id) type="checkbox" name=(name) checked[self.form.checked(name)];
                        span { (self.v.t(label)) }
                    }
                } @else {
                    label for=(id) { (self.v.t(label)) }
                    @if input == Input::TextArea {
                        textarea #(id) name=(name) rows="3" aria-invalid=[invalid]
                            aria-describedby=[described.as_deref()] { (value) }
                    } @else {
                        input #(id) type="text" name=(name) value=(value)
                            inputmode=[(input == Input::Number).then_some("decimal")]
                            aria-invalid=[invalid] aria-describedby=[described.as_deref()];
                    }
                }
                @if let Some(hint) = hint { p.hint { (self.v.t(hint)) } }
                @if let Some(messages) = messages {
                    p.field-error id=[described.as_deref()] data-field=(name) {
                        @for m in messages { (m) " " }
                    }
                }
            }
        }
    }

    /// One labelled select with its errors.
    fn select(&self, name: &str, label: &str, options: &[(String, String)]) -> Markup {
        let id = input_id(name);
        let messages = self.errors.get(name);
        let current = self.form.get(name);
        html! {
            div.field.has-error[messages.is_some()] {
                label for=(id) { (self.v.t(label)) }
                select #(id) name=(name) aria-invalid=[messages.map(|_| "true")] {
                    @for (value, text) in options {
                        option value=(value) selected[value == current] { (text) }
                    }
                }
                @if let Some(messages) = messages {
                    p.field-error data-field=(name) { @for m in messages { (m) " " } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_reference_has_a_label_in_both_languages() {
        for lang in Lang::ALL {
            for field in RefField::all() {
                let key = ref_label(field);
                assert_ne!(lang.t(&key), key, "{key} in {}", lang.tag());
            }
        }
    }
}
