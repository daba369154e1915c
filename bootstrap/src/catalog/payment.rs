//! `payment.toml`: the static plans of spec 2.2 and 2.3, one `[plans.<id>]` table each.
//!
//! Each plan table is read field by field into a [`PlanDraft`], recording where each field is and
//! which fields could not be read (wrong type, unknown field); then [`Plan::from_draft`] checks
//! the rules. A field already reported as unreadable is not reported again as missing.
//! Field names are the spec's camelCase ones; `developmentAmount` is the development price of
//! spec 2.2 rule 4, and `morCProductId` and `walletGlobalPlanId` the ids the spec leaves unnamed.

use std::collections::{BTreeMap, BTreeSet};

use domain::{Plan, PlanDraft, PlanText, RefField};
use toml::de::{DeTable, DeValue};

use super::toml_source::{self, Key, SourceFile, Value};
use super::{ConfigError, MAX_PLANS};

/// The most locales one plan may have texts in.
const MAX_LOCALES: usize = 50;

/// The keys a plan table may have before the provider references ([`RefField::all`]).
const PLAN_FIELDS_BEFORE_REFS: [&str; 9] = [
    "id",
    "provider",
    "amount",
    "originalAmount",
    "developmentAmount",
    "currency",
    "recommended",
    "hidden",
    "duration",
];
/// The keys a plan table may have after the provider references.
const PLAN_FIELDS_AFTER_REFS: [&str; 3] = ["i18n", "entitlements", "group"];

/// Every key a plan table may have, in the order an error lists them.
fn plan_fields() -> Vec<&'static str> {
    PLAN_FIELDS_BEFORE_REFS
        .into_iter()
        .chain(RefField::all().map(|r| r.field))
        .chain(PLAN_FIELDS_AFTER_REFS)
        .collect()
}

const DURATION_FIELDS: [&str; 5] = [
    "months",
    "type",
    "credits",
    "bonusCredits",
    "bonusExpiresInDays",
];
const TEXT_FIELDS: [&str; 4] = ["name", "description", "duration", "features"];

/// Read and validate every plan of `payment.toml`, in file order.
pub(super) fn load_plans(file: &SourceFile<'_>) -> Result<Vec<Plan>, Vec<ConfigError>> {
    let document = file.parse().map_err(|e| vec![e])?;
    let plans = plan_tables(file, &document)?;
    let mut errors = Vec::new();
    let mut entries = Vec::with_capacity(plans.len());
    for (key, value) in plans {
        let mut entry = PlanEntry::new(file, key);
        entry.read_plan(value);
        errors.append(&mut entry.errors);
        entries.push(entry);
    }
    errors.extend(shared_provider_refs(&entries));
    let mut validated = Vec::with_capacity(entries.len());
    for entry in entries.iter().filter(|e| !e.not_a_table) {
        match Plan::from_draft(&entry.draft) {
            Ok(plan) => validated.push(plan),
            Err(rule_errors) => errors.extend(rule_errors.0.into_iter().filter_map(|e| {
                (!entry.is_unreadable(&e.field))
                    .then(|| entry.error(&e.field, e.problem.to_string()))
            })),
        }
    }
    if errors.is_empty() {
        Ok(validated)
    } else {
        Err(errors)
    }
}

/// The `[plans.<id>]` tables in file order, or why there are none to read.
fn plan_tables<'d, 'i>(
    file: &SourceFile<'_>,
    document: &'d DeTable<'i>,
) -> Result<Vec<(&'d Key<'i>, &'d Value<'i>)>, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let mut plans = None;
    for (key, value) in document {
        let line = Some(file.line_of(key.span().start));
        match (key.get_ref().as_ref(), value.get_ref()) {
            ("plans", DeValue::Table(table)) => plans = Some(table),
            ("plans", other) => errors.push(file.error(
                line,
                None,
                Some("plans"),
                toml_source::table(other).err().unwrap_or_default(),
            )),
            (name, _) => errors.push(file.error(line, None, Some(name), unknown(name, &["plans"]))),
        }
    }
    let problem = match plans {
        None if errors.iter().any(|e| e.field.as_deref() == Some("plans")) => None,
        None => Some("is required: declare each plan as a [plans.<id>] table".to_owned()),
        Some(plans) if plans.is_empty() => Some("must declare at least one plan".to_owned()),
        Some(plans) if plans.len() > MAX_PLANS => Some(format!(
            "declares {} plans, more than the limit of {MAX_PLANS}",
            plans.len()
        )),
        Some(_) => None,
    };
    if let Some(problem) = problem {
        errors.push(file.error(None, None, Some("plans"), problem));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut plans: Vec<_> = plans.into_iter().flatten().collect();
    // The parsed table is sorted by key; the pricing page wants the order of the file.
    plans.sort_by_key(|(key, _)| key.span().start);
    Ok(plans)
}

/// One plan being read: its draft, where each field is, and what went wrong.
struct PlanEntry<'f> {
    file: &'f SourceFile<'f>,
    draft: PlanDraft,
    line: usize,
    field_lines: BTreeMap<String, usize>,
    unreadable: BTreeSet<String>,
    /// The plan is not a table at all, so its rules are not worth checking.
    not_a_table: bool,
    errors: Vec<ConfigError>,
}

impl<'f> PlanEntry<'f> {
    fn new(file: &'f SourceFile<'f>, key: &Key<'_>) -> Self {
        Self {
            file,
            draft: PlanDraft {
                id: key.get_ref().to_string(),
                ..PlanDraft::default()
            },
            line: file.line_of(key.span().start),
            field_lines: BTreeMap::new(),
            unreadable: BTreeSet::new(),
            not_a_table: false,
            errors: Vec::new(),
        }
    }

    /// An error about `field`, on the line the field is on, or its table's, or the plan's.
    fn error(&self, field: &str, problem: String) -> ConfigError {
        let mut path = field;
        let line = loop {
            if let Some(line) = self.field_lines.get(path) {
                break *line;
            }
            match path.rsplit_once('.') {
                Some((parent, _)) => path = parent,
                None => break self.line,
            }
        };
        self.file
            .error(Some(line), Some(&self.draft.id), Some(field), problem)
    }

    fn fail(&mut self, field: &str, problem: String) {
        let error = self.error(field, problem);
        self.errors.push(error);
        self.unreadable.insert(field.to_owned());
    }

    /// Convert `value`, recording the field's line, or report why it cannot be.
    fn read<T>(
        &mut self,
        field: &str,
        value: &Value<'_>,
        convert: fn(&DeValue<'_>) -> Result<T, String>,
    ) -> Option<T> {
        let line = self.file.line_of(value.span().start);
        self.field_lines.insert(field.to_owned(), line);
        convert(value.get_ref())
            .map_err(|problem| self.fail(field, problem))
            .ok()
    }

    /// The entries of a table-valued field, each with its dotted field name.
    fn entries<'v, 'i>(
        &mut self,
        field: &str,
        value: &'v Value<'i>,
    ) -> Vec<(String, &'v Key<'i>, &'v Value<'i>)> {
        let line = self.file.line_of(value.span().start);
        self.field_lines.insert(field.to_owned(), line);
        match toml_source::table(value.get_ref()) {
            Ok(table) => table
                .iter()
                .map(|(key, value)| (format!("{field}.{}", key.get_ref()), key, value))
                .collect(),
            Err(problem) => {
                self.fail(field, problem);
                Vec::new()
            }
        }
    }

    /// Report a key that is not one of `known`.
    fn unknown_field(&mut self, field: &str, name: &str, value: &Value<'_>, known: &[&str]) {
        let line = self.file.line_of(value.span().start);
        self.field_lines.insert(field.to_owned(), line);
        self.fail(field, unknown(name, known));
    }

    /// Whether `field` or a table holding it was already reported as unreadable.
    fn is_unreadable(&self, field: &str) -> bool {
        let mut path = field;
        loop {
            if self.unreadable.contains(path) {
                return true;
            }
            match path.rsplit_once('.') {
                Some((parent, _)) => path = parent,
                None => return false,
            }
        }
    }

    fn read_plan(&mut self, value: &Value<'_>) {
        let DeValue::Table(table) = value.get_ref() else {
            let problem = toml_source::table(value.get_ref())
                .err()
                .unwrap_or_default();
            self.errors.push(
                self.file
                    .error(Some(self.line), Some(&self.draft.id), None, problem),
            );
            self.not_a_table = true;
            return;
        };
        for (key, value) in table {
            let name = key.get_ref().as_ref();
            self.read_plan_field(name, value);
        }
    }

    fn read_plan_field(&mut self, name: &str, value: &Value<'_>) {
        use toml_source::{boolean, decimal, string};
        match name {
            "id" => self.check_id(value),
            "provider" => self.draft.provider = self.read(name, value, string),
            "amount" => self.draft.amount = self.read(name, value, decimal),
            "originalAmount" => self.draft.original_amount = self.read(name, value, decimal),
            "developmentAmount" => self.draft.development_amount = self.read(name, value, decimal),
            "currency" => self.draft.currency = self.read(name, value, string),
            "group" => self.draft.group = self.read(name, value, string),
            "recommended" => self.draft.recommended = self.read(name, value, boolean) == Some(true),
            "hidden" => self.draft.hidden = self.read(name, value, boolean) == Some(true),
            "duration" => self.read_duration(value),
            "i18n" => self.read_i18n(value),
            "entitlements" => self.read_entitlements(value),
            _ => match RefField::all().find(|r| r.field == name) {
                Some(r) => {
                    let id = self.read(name, value, string);
                    self.draft.provider_refs.set(r, id);
                }
                None => self.unknown_field(name, name, value, &plan_fields()),
            },
        }
    }

    /// `id` is the table key; repeating it inside the table is allowed only when it agrees.
    fn check_id(&mut self, value: &Value<'_>) {
        if let Some(id) = self.read("id", value, toml_source::string)
            && id != self.draft.id
        {
            let problem = format!(
                "must equal the table key {:?} or be left out",
                self.draft.id
            );
            self.fail("id", problem);
        }
    }

    fn read_duration(&mut self, value: &Value<'_>) {
        use toml_source::{decimal, integer, string};
        for (field, key, value) in self.entries("duration", value) {
            match key.get_ref().as_ref() {
                "months" => self.draft.months = self.read(&field, value, integer),
                "type" => self.draft.duration_type = self.read(&field, value, string),
                "credits" => self.draft.credits = self.read(&field, value, decimal),
                "bonusCredits" => self.draft.bonus_credits = self.read(&field, value, decimal),
                "bonusExpiresInDays" => {
                    self.draft.bonus_expires_in_days = self.read(&field, value, integer);
                }
                other => self.unknown_field(&field, other, value, &DURATION_FIELDS),
            }
        }
    }

    /// `entitlements`: a table of feature keys; keys and values are checked by the plan rules.
    fn read_entitlements(&mut self, value: &Value<'_>) {
        for (field, key, value) in self.entries("entitlements", value) {
            if let Some(draft) = self.read(&field, value, toml_source::entitlement) {
                self.draft
                    .entitlements
                    .insert(key.get_ref().to_string(), draft);
            }
        }
    }

    fn read_i18n(&mut self, value: &Value<'_>) {
        let locales = self.entries("i18n", value);
        if locales.len() > MAX_LOCALES {
            self.fail("i18n", format!("has more than {MAX_LOCALES} locales"));
            return;
        }
        for (locale_field, key, value) in locales {
            let mut text = PlanText::default();
            for (field, key, value) in self.entries(&locale_field, value) {
                self.read_text_field(&mut text, &field, key.get_ref(), value);
            }
            self.draft.i18n.insert(key.get_ref().to_string(), text);
        }
    }

    fn read_text_field(&mut self, text: &mut PlanText, field: &str, name: &str, value: &Value<'_>) {
        use toml_source::{string, strings};
        match name {
            "name" => text.name = self.read(field, value, string).unwrap_or_default(),
            "description" => text.description = self.read(field, value, string).unwrap_or_default(),
            "duration" => text.duration = self.read(field, value, string).unwrap_or_default(),
            "features" => text.features = self.read(field, value, strings).unwrap_or_default(),
            other => self.unknown_field(field, other, value, &TEXT_FIELDS),
        }
    }
}

/// A provider-side id names one plan: webhooks and renewals that carry only the provider's id
/// must resolve to exactly one plan, so two plans cannot share a `morAProductId` or a
/// `cardGatewayPriceId`.
fn shared_provider_refs(entries: &[PlanEntry<'_>]) -> Vec<ConfigError> {
    let mut first_user: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    let mut errors = Vec::new();
    for entry in entries {
        for (field, value) in super::ref_fields(&entry.draft.provider_refs) {
            match first_user.get(&(field, value)) {
                Some(other) => errors.push(entry.error(
                    field,
                    format!("{value:?} is already used by plan {other:?}"),
                )),
                None => {
                    first_user.insert((field, value), &entry.draft.id);
                }
            }
        }
    }
    errors
}

/// The problem of an unknown key, with a suggestion when it is a known one misspelled in case
/// or separators (`morAproductId`, `original_amount`).
fn unknown(name: &str, known: &[&str]) -> String {
    let squash = |s: &str| s.replace(['_', '-'], "").to_ascii_lowercase();
    match known.iter().find(|k| squash(k) == squash(name)) {
        Some(suggestion) => format!("is not a known field (did you mean {suggestion:?})"),
        None => format!(
            "is not a known field (expected one of: {})",
            known.join(", ")
        ),
    }
}
