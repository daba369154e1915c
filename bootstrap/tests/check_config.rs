//! Black-box tests of `tally check-config`: the real binary, run on temporary config directories.
//!
//! The broken-catalog tests start from a small valid catalog ([`FIXTURE_PLANS`]), break one rule
//! in one plan, and expect exit status 2 with an error line naming that plan and that field, and
//! no error about anything else.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

/// A valid catalog: one plan per provider and per rule the tests break.
const FIXTURE_PLANS: &[(&str, &str)] = &[
    (
        "qr_lifetime",
        r#"provider = "wallet_qr"
amount = 99.00
developmentAmount = 0.01
currency = "CNY"
duration = { months = 999999, type = "one_time" }"#,
    ),
    (
        "web_credits",
        r#"provider = "wallet_web"
amount = 10.00
currency = "CNY"
duration = { type = "credits", credits = 100 }"#,
    ),
    (
        "card_monthly",
        r#"provider = "card_gateway"
amount = 9.99
currency = "USD"
duration = { months = 1, type = "recurring" }
cardGatewayPriceId = "price_card""#,
    ),
    (
        "global_monthly",
        r#"provider = "wallet_global"
amount = 12.00
currency = "EUR"
duration = { months = 1, type = "recurring" }
walletGlobalPlanId = "P-global""#,
    ),
    (
        "mor_a_yearly",
        r#"provider = "mor_a"
amount = 99.90
originalAmount = 119.88
currency = "USD"
recommended = true
duration = { months = 12, type = "recurring" }
morAProductId = "prod_a""#,
    ),
    (
        "mor_b_lifetime",
        r#"provider = "mor_b"
amount = 199
currency = "USD"
hidden = true
morBProductId = "pdt_b"

[plans.mor_b_lifetime.duration]
months = 999999
type = "one_time""#,
    ),
    (
        "mor_c_credits",
        r#"provider = "mor_c"
amount = 9.99
originalAmount = 19.90
currency = "CNY"
duration = { type = "credits", credits = 500 }
morCProductId = "PROD_c_credits""#,
    ),
    (
        "mor_c_monthly",
        r#"provider = "mor_c"
amount = 4.99
currency = "USD"
duration = { months = 1, type = "recurring" }
morCProductId = "PROD_c_monthly""#,
    ),
];

const FIXTURE_CREDITS: &str = r#"consumptionMode = "dynamic"
dynamicChatCostPerKiloToken = 0.5
unknownModel = "default"

[fixedCosts]
chat = 1
image = 5

[modelMultipliers]
default = 1
"gpt-4o" = 2
"#;

fn en_text(id: &str) -> String {
    format!(
        "[plans.{id}.i18n.en]\nname = \"Plan {id}\"\ndescription = \"The {id} plan\"\n\
         duration = \"month\"\nfeatures = [\"Everything\"]\n"
    )
}

fn zh_text(id: &str) -> String {
    format!(
        "[plans.{id}.i18n.zh-CN]\nname = \"计划 {id}\"\ndescription = \"{id} 计划\"\n\
         duration = \"月\"\nfeatures = [\"全部功能\"]\n"
    )
}

/// One plan's full text: its table, then its en and zh-CN texts.
fn plan_block(id: &str, body: &str) -> String {
    format!("[plans.{id}]\n{body}\n\n{}\n{}\n", en_text(id), zh_text(id))
}

/// The fixture's `payment.toml`, with `edit` applied to the block of plan `id`.
fn payment_toml_with(id: &str, edit: impl Fn(String) -> String) -> String {
    assert!(
        FIXTURE_PLANS.iter().any(|(plan, _)| *plan == id),
        "no fixture plan {id}"
    );
    FIXTURE_PLANS
        .iter()
        .map(|(plan, body)| {
            let block = plan_block(plan, body);
            if *plan == id { edit(block) } else { block }
        })
        .collect()
}

fn fixture_payment_toml() -> String {
    payment_toml_with("qr_lifetime", |block| block)
}

/// Replace `old` (which must occur exactly once) with `new`.
fn replace(old: &'static str, new: &'static str) -> impl Fn(String) -> String {
    move |text: String| {
        assert_eq!(text.matches(old).count(), 1, "{old:?} in\n{text}");
        text.replacen(old, new, 1)
    }
}

/// A config directory holding these two files.
fn config_dir(payment: &str, credits: &str) -> TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    fs::write(dir.path().join("payment.toml"), payment).expect("payment.toml written");
    fs::write(dir.path().join("credits.toml"), credits).expect("credits.toml written");
    dir
}

fn check_config(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("check-config")
        .arg("--config")
        .arg(dir)
        .output()
        .expect("tally runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The error lines of a failed run (without the closing count line).
fn error_lines(output: &Output) -> Vec<String> {
    assert_eq!(
        output.status.code(),
        Some(2),
        "stdout:\n{}\nstderr:\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    let stderr = text(&output.stderr);
    let mut lines: Vec<String> = stderr.lines().map(str::to_owned).collect();
    let summary = lines.pop().unwrap_or_default();
    assert!(summary.ends_with("problems found"), "{summary}");
    assert!(!lines.is_empty(), "no errors in\n{stderr}");
    lines
}

/// Run the fixture catalog with plan `id` edited; it must be refused, naming only `id` and
/// always naming `field`.
fn assert_refused(id: &str, field: &str, edit: impl Fn(String) -> String) {
    let dir = config_dir(&payment_toml_with(id, edit), FIXTURE_CREDITS);
    let lines = error_lines(&check_config(dir.path()));
    let subject = format!("plan {id:?}: {field} ");
    assert!(
        lines.iter().any(|l| l.contains(&subject)),
        "expected an error starting {subject:?}, got:\n{}",
        lines.join("\n")
    );
    let plan = format!("plan {id:?}: ");
    assert!(
        lines.iter().all(|l| l.contains(&plan)),
        "errors about something other than {id}:\n{}",
        lines.join("\n")
    );
}

/// The table row of plan `id`, with single spaces between cells.
fn row_of(stdout: &str, id: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{id} ")))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| panic!("no row for {id} in\n{stdout}"))
}

fn shipped_config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config")
}

/// The plan ids of a `payment.toml`, in file order.
fn plan_ids_in(payment_toml: &str) -> Vec<String> {
    payment_toml
        .lines()
        .filter_map(|l| l.strip_prefix("[plans.")?.strip_suffix(']'))
        .filter(|id| !id.contains('.'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_shipped_config_is_valid_and_every_plan_is_listed_in_file_order() {
    let dir = shipped_config_dir();
    let output = check_config(&dir);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let ids = plan_ids_in(&fs::read_to_string(dir.join("payment.toml")).expect("payment.toml"));
    assert!(ids.len() >= 14, "{ids:?}");
    let rows: Vec<&str> = stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .take(ids.len())
        .collect();
    assert_eq!(rows, ids, "\n{stdout}");
    assert!(stdout.contains("consumption: dynamic mode"), "{stdout}");
    assert!(stdout.contains(&format!("{} plans", ids.len())), "{stdout}");
}

/// The members count a feature text names ("Up to 10 members", "最多 10 名成员"), if any.
fn members_named_in(feature: &str) -> Option<u64> {
    if !(feature.contains("member") || feature.contains("成员")) {
        return None;
    }
    let digits: String = feature.chars().filter(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[test]
fn every_shipped_plan_text_naming_a_members_count_agrees_with_its_seats() {
    let catalog = bootstrap::catalog::load(&shipped_config_dir()).expect("the shipped catalog");
    let seats = domain::entitlements::EntitlementKey::new("seats").expect("a key");
    let mut checked = 0;
    for plan in catalog.plans() {
        let limit = match plan.entitlements().get(&seats) {
            Some(domain::entitlements::EntitlementValue::Limit(limit)) => Some(limit),
            _ => None,
        };
        for (locale, text) in plan.texts() {
            for feature in &text.features {
                let Some(named) = members_named_in(feature) else {
                    continue;
                };
                assert_eq!(
                    Some(named),
                    limit,
                    "plan {} ({locale:?}) says {feature:?} but its seats entitlement is {limit:?}",
                    plan.id().as_str()
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 2,
        "the team plan names its members in both locales"
    );
}

#[test]
fn the_fixture_catalog_is_valid_and_prints_exact_prices_durations_and_flags() {
    let dir = config_dir(&fixture_payment_toml(), FIXTURE_CREDITS);
    let output = check_config(dir.path());
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let row = |id: &str| row_of(&stdout, id);
    assert_eq!(
        row("qr_lifetime"),
        "qr_lifetime wallet_qr one_time 99.00 CNY - 0.01 CNY lifetime - -"
    );
    assert_eq!(
        row("mor_a_yearly"),
        "mor_a_yearly mor_a recurring 99.90 USD 119.88 USD - 12 months - recommended"
    );
    assert_eq!(
        row("mor_c_credits"),
        "mor_c_credits mor_c credits 9.99 CNY 19.90 CNY - - 500.00 -"
    );
    assert_eq!(
        row("card_monthly"),
        "card_monthly card_gateway recurring 9.99 USD - - 1 month - -"
    );
    assert!(row("mor_b_lifetime").ends_with("lifetime - hidden"));
}

#[test]
fn amounts_are_exact_decimals_whether_written_as_numbers_or_strings() {
    let payment = payment_toml_with(
        "card_monthly",
        replace("amount = 9.99", "amount = \"0.1\"\noriginalAmount = 0.30"),
    );
    let dir = config_dir(&payment, FIXTURE_CREDITS);
    let output = check_config(dir.path());
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(
        row_of(&stdout, "card_monthly"),
        "card_monthly card_gateway recurring 0.10 USD 0.30 USD - 1 month - -"
    );
}

#[test]
fn the_config_directory_defaults_to_config_in_the_working_directory() {
    let work = tempfile::tempdir().expect("a temporary directory");
    fs::create_dir(work.path().join("config")).expect("config/ created");
    fs::write(
        work.path().join("config/payment.toml"),
        fixture_payment_toml(),
    )
    .expect("written");
    fs::write(work.path().join("config/credits.toml"), FIXTURE_CREDITS).expect("written");
    let output = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("check-config")
        .current_dir(work.path())
        .output()
        .expect("tally runs");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
}

#[test]
fn a_missing_config_directory_is_reported_for_both_files_in_production() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lines = error_lines(&check_config_with(&dir.path().join("nowhere"), &PRODUCTION));
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].ends_with("payment.toml: does not exist"),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with("credits.toml: does not exist"),
        "{lines:?}"
    );
}

#[test]
fn development_without_a_config_directory_runs_on_the_built_in_sample_and_says_so() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let output = check_config_with(&dir.path().join("nowhere"), &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("does not exist: the sample catalog built into the binary"),
        "{stdout}"
    );
    // The built-in sample is the checkout's config/: the same plans, in the same order.
    let shipped = fs::read_to_string(shipped_config_dir().join("payment.toml")).expect("read");
    for id in plan_ids_in(&shipped) {
        assert!(
            stdout.contains(&format!("\n{id} ")),
            "{id} missing: {stdout}"
        );
    }
    // A directory that exists but lacks a file is still an error, not a silent fallback.
    let empty = tempfile::tempdir().expect("a temporary directory");
    let lines = error_lines(&check_config_with(empty.path(), &[]));
    assert_eq!(lines.len(), 2, "{lines:?}");
}

#[test]
fn production_refuses_the_shipped_sample_ids_and_development_notes_them() {
    let shipped = fs::read_to_string(shipped_config_dir().join("payment.toml")).expect("read");
    let credits = fs::read_to_string(shipped_config_dir().join("credits.toml")).expect("read");
    let dir = config_dir(&shipped, &credits);
    let dev = check_config_with(dir.path(), &[]);
    assert!(dev.status.success(), "{}", text(&dev.stderr));
    assert!(
        text(&dev.stdout).contains("are the shipped sample's placeholders"),
        "{}",
        text(&dev.stdout)
    );
    let card = FIXTURE_PLANS
        .iter()
        .find(|(id, _)| *id == "card_monthly")
        .expect("fixture");
    let sample_id = shipped
        .lines()
        .find_map(|l| l.strip_prefix("cardGatewayPriceId = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the sample sells through the card gateway");
    let body = card.1.replace("price_card", sample_id);
    let dir = config_dir(&plan_block(card.0, &body), FIXTURE_CREDITS);
    fs::write(dir.path().join("tally.toml"), CARD_ONLY).expect("tally.toml written");
    let lines = error_lines(&check_config_with(dir.path(), &PRODUCTION)).join("\n");
    assert!(
        lines.contains(&format!(
            "plan \"card_monthly\": cardGatewayPriceId {sample_id:?} is the shipped sample's placeholder"
        )),
        "{lines}"
    );
}

/// One test per broken rule: `name: (plan id, field, edit of that plan's block)`.
macro_rules! refused {
    ($($name:ident: ($id:literal, $field:literal, $edit:expr);)*) => {
        $(
            #[test]
            fn $name() {
                assert_refused($id, $field, $edit);
            }
        )*
    };
}

refused! {
    a_mor_a_plan_without_its_product_id_is_refused:
        ("mor_a_yearly", "morAProductId", replace("morAProductId = \"prod_a\"", ""));
    a_mor_b_plan_without_its_product_id_is_refused:
        ("mor_b_lifetime", "morBProductId", replace("morBProductId = \"pdt_b\"", ""));
    a_mor_c_plan_without_its_product_id_is_refused:
        ("mor_c_credits", "morCProductId", replace("morCProductId = \"PROD_c_credits\"", ""));
    a_card_gateway_subscription_without_its_price_id_is_refused:
        ("card_monthly", "cardGatewayPriceId", replace("cardGatewayPriceId = \"price_card\"", ""));
    a_wallet_global_subscription_without_its_plan_id_is_refused:
        ("global_monthly", "walletGlobalPlanId", replace("walletGlobalPlanId = \"P-global\"", ""));
    a_wallet_qr_subscription_is_refused:
        ("qr_lifetime", "duration.type", replace("months = 999999, type = \"one_time\"", "months = 1, type = \"recurring\""));
    a_wallet_web_plan_priced_in_usd_is_refused:
        ("web_credits", "currency", replace("currency = \"CNY\"", "currency = \"USD\""));
    a_mor_c_subscription_priced_in_cny_is_refused:
        ("mor_c_monthly", "currency", replace("currency = \"USD\"", "currency = \"CNY\""));
    a_credits_plan_without_credits_is_refused:
        ("web_credits", "duration.credits", replace(", credits = 100", ""));
    a_credits_plan_granting_zero_credits_is_refused:
        ("web_credits", "duration.credits", replace("credits = 100", "credits = 0"));
    a_credits_plan_granting_fractions_of_a_hundredth_is_refused:
        ("web_credits", "duration.credits", replace("credits = 100", "credits = 0.001"));
    a_zero_amount_is_refused:
        ("card_monthly", "amount", replace("amount = 9.99", "amount = 0"));
    a_negative_amount_is_refused:
        ("card_monthly", "amount", replace("amount = 9.99", "amount = -9.99"));
    an_amount_with_more_decimals_than_the_currency_is_refused:
        ("card_monthly", "amount", replace("amount = 9.99", "amount = 1.001"));
    a_fractional_yen_amount_is_refused:
        ("mor_c_monthly", "amount", replace("amount = 4.99\ncurrency = \"USD\"", "amount = 4.5\ncurrency = \"JPY\""));
    an_amount_in_exponent_notation_is_refused_rather_than_rounded:
        ("card_monthly", "amount", replace("amount = 9.99", "amount = 9.99e0"));
    an_amount_that_is_not_a_number_is_refused:
        ("card_monthly", "amount", replace("amount = 9.99", "amount = \"abc\""));
    an_amount_that_is_a_boolean_is_refused:
        ("card_monthly", "amount", replace("amount = 9.99", "amount = true"));
    an_original_amount_below_the_amount_is_refused:
        ("mor_c_credits", "originalAmount", replace("originalAmount = 19.90", "originalAmount = 5.00"));
    a_development_amount_above_the_amount_is_refused:
        ("qr_lifetime", "developmentAmount", replace("developmentAmount = 0.01", "developmentAmount = 100.00"));
    a_month_count_that_is_not_the_lifetime_marker_is_refused:
        ("mor_b_lifetime", "duration.months", replace("months = 999999", "months = 99999"));
    a_lifetime_subscription_is_refused:
        ("card_monthly", "duration.months", replace("months = 1,", "months = 999999,"));
    a_subscription_billed_less_often_than_yearly_is_refused:
        ("card_monthly", "duration.months", replace("months = 1,", "months = 24,"));
    a_fractional_month_count_is_refused:
        ("card_monthly", "duration.months", replace("months = 1,", "months = 1.5,"));
    a_one_time_plan_without_months_is_refused:
        ("mor_b_lifetime", "duration.months", replace("months = 999999\n", ""));
    a_plan_without_an_en_text_is_refused:
        ("card_monthly", "i18n.en", replace("[plans.card_monthly.i18n.en]\nname = \"Plan card_monthly\"\ndescription = \"The card_monthly plan\"\nduration = \"month\"\nfeatures = [\"Everything\"]\n", ""));
    a_plan_with_an_empty_en_name_is_refused:
        ("card_monthly", "i18n.en.name", replace("name = \"Plan card_monthly\"", "name = \"\""));
    a_feature_list_that_is_not_strings_is_refused:
        ("card_monthly", "i18n.zh-CN.features", replace("features = [\"全部功能\"]", "features = [\"全部功能\", 2]"));
    an_unknown_provider_is_refused:
        ("card_monthly", "provider", replace("provider = \"card_gateway\"", "provider = \"paypal\""));
    a_missing_provider_is_refused:
        ("card_monthly", "provider", replace("provider = \"card_gateway\"", ""));
    an_unknown_currency_is_refused:
        ("card_monthly", "currency", replace("currency = \"USD\"", "currency = \"XYZ\""));
    an_unknown_duration_type_is_refused:
        ("card_monthly", "duration.type", replace("type = \"recurring\"", "type = \"weekly\""));
    an_unknown_field_in_a_plan_is_refused:
        ("card_monthly", "colour", replace("currency = \"USD\"", "currency = \"USD\"\ncolour = \"blue\""));
    a_misspelled_field_in_a_plan_is_refused:
        ("mor_a_yearly", "morAproductId", replace("morAProductId", "morAproductId"));
    an_unknown_field_in_a_duration_is_refused:
        ("card_monthly", "duration.period", replace("type = \"recurring\"", "type = \"recurring\", period = 2"));
    an_unknown_field_in_a_text_is_refused:
        ("card_monthly", "i18n.en.title", replace("name = \"Plan card_monthly\"", "title = \"Plan\""));
    a_plan_repeating_a_different_id_is_refused:
        ("card_monthly", "id", replace("provider = \"card_gateway\"", "id = \"other\"\nprovider = \"card_gateway\""));
    a_toml_syntax_error_names_the_plan_and_the_key:
        ("card_monthly", "amount", replace("amount = 9.99", "amount = 9.9.9"));
    an_entitlement_key_outside_the_pattern_is_refused:
        ("card_monthly", "entitlements.Seats", replace("currency = \"USD\"", "currency = \"USD\"\nentitlements = { Seats = 3 }"));
    a_false_entitlement_is_refused:
        ("card_monthly", "entitlements.export", replace("currency = \"USD\"", "currency = \"USD\"\nentitlements = { export = false }"));
    a_negative_entitlement_limit_is_refused:
        ("card_monthly", "entitlements.seats", replace("currency = \"USD\"", "currency = \"USD\"\nentitlements = { seats = -1 }"));
    an_entitlement_written_as_a_string_is_refused:
        ("card_monthly", "entitlements.seats", replace("currency = \"USD\"", "currency = \"USD\"\nentitlements = { seats = \"5\" }"));
    entitlements_on_a_credits_plan_are_refused:
        ("web_credits", "entitlements", replace("currency = \"CNY\"", "currency = \"CNY\"\nentitlements = { export = true }"));
    a_group_that_is_not_a_slug_is_refused:
        ("card_monthly", "group", replace("currency = \"USD\"", "currency = \"USD\"\ngroup = \"Pro Plan\""));
    a_group_that_is_not_a_string_is_refused:
        ("card_monthly", "group", replace("currency = \"USD\"", "currency = \"USD\"\ngroup = 5"));
}

#[test]
fn plans_sharing_a_group_are_accepted() {
    let payment = payment_toml_with(
        "card_monthly",
        replace("currency = \"USD\"", "currency = \"USD\"\ngroup = \"pro\""),
    );
    let dir = config_dir(&payment, FIXTURE_CREDITS);
    let output = check_config(dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
}

#[test]
fn entitlements_of_true_and_limits_are_accepted() {
    let payment = payment_toml_with(
        "card_monthly",
        replace(
            "currency = \"USD\"",
            "currency = \"USD\"\nentitlements = { export = true, seats = 5, \"ai.models:gpt-4o\" = 0 }",
        ),
    );
    let dir = config_dir(&payment, FIXTURE_CREDITS);
    let output = check_config(dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
}

#[test]
fn an_invalid_plan_id_is_refused() {
    let payment = fixture_payment_toml().replace("plans.card_monthly", "plans.\"Card Monthly\"");
    let dir = config_dir(&payment, FIXTURE_CREDITS);
    let lines = error_lines(&check_config(dir.path()));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("plan \"Card Monthly\": id is invalid"),
        "{lines:?}"
    );
}

#[test]
fn a_provider_product_id_shared_by_two_plans_is_refused() {
    let payment = payment_toml_with(
        "mor_c_monthly",
        replace("\"PROD_c_monthly\"", "\"PROD_c_credits\""),
    );
    let dir = config_dir(&payment, FIXTURE_CREDITS);
    let lines = error_lines(&check_config(dir.path()));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("plan \"mor_c_monthly\": morCProductId \"PROD_c_credits\" is already used by plan \"mor_c_credits\""),
        "{lines:?}"
    );
}

#[test]
fn every_error_of_every_plan_and_both_files_is_reported_at_once() {
    let mut payment = fixture_payment_toml();
    for (old, new) in [
        ("morAProductId = \"prod_a\"", ""),
        (
            "amount = 9.99\ncurrency = \"USD\"",
            "amount = \"abc\"\ncurrency = \"XYZ\"",
        ),
        (
            "currency = \"CNY\"\nduration = { type = \"credits\", credits = 100 }",
            "currency = \"USD\"\nduration = { type = \"credits\", credits = 0 }\nprice = 3",
        ),
    ] {
        assert_eq!(payment.matches(old).count(), 1, "{old}");
        payment = payment.replacen(old, new, 1);
    }
    let credits = FIXTURE_CREDITS.replace("\"gpt-4o\" = 2", "\"gpt-4o\" = -2");
    let dir = config_dir(&payment, &credits);
    let lines = error_lines(&check_config(dir.path()));
    for expected in [
        "plan \"mor_a_yearly\": morAProductId ",
        "plan \"card_monthly\": amount ",
        "plan \"card_monthly\": currency ",
        "plan \"web_credits\": currency ",
        "plan \"web_credits\": duration.credits ",
        "plan \"web_credits\": price ",
        "credits.toml:11: modelMultipliers.gpt-4o ",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(expected)),
            "{expected:?} missing from:\n{}",
            lines.join("\n")
        );
    }
    assert_eq!(lines.len(), 7, "{}", lines.join("\n"));
    // A field that could not be read is reported once, not again as missing.
    assert!(!lines.iter().any(|l| l.contains("amount is required")));
}

#[test]
fn errors_name_the_line_of_the_field() {
    let payment = payment_toml_with(
        "qr_lifetime",
        replace("developmentAmount = 0.01", "developmentAmount = 100.00"),
    );
    let dir = config_dir(&payment, FIXTURE_CREDITS);
    let lines = error_lines(&check_config(dir.path()));
    assert!(
        lines[0].contains("payment.toml:4: plan \"qr_lifetime\": developmentAmount "),
        "{lines:?}"
    );
}

/// Run the fixture catalog with `credits.toml` edited; it must be refused naming `key`.
fn assert_credits_refused(key: &str, old: &str, new: &str) {
    assert_eq!(FIXTURE_CREDITS.matches(old).count(), 1, "{old}");
    let credits = FIXTURE_CREDITS.replacen(old, new, 1);
    let dir = config_dir(&fixture_payment_toml(), &credits);
    let lines = error_lines(&check_config(dir.path()));
    let subject = format!(": {key} ");
    assert!(
        lines
            .iter()
            .all(|l| l.contains("credits.toml") && l.contains(&subject)),
        "expected only errors about {key}, got:\n{}",
        lines.join("\n")
    );
}

#[test]
fn a_negative_model_multiplier_is_refused() {
    assert_credits_refused(
        "modelMultipliers.gpt-4o",
        "\"gpt-4o\" = 2",
        "\"gpt-4o\" = -2",
    );
}

#[test]
fn consumption_settings_without_a_default_multiplier_are_refused() {
    assert_credits_refused("modelMultipliers.default", "default = 1\n", "");
}

#[test]
fn an_unknown_consumption_mode_is_refused() {
    assert_credits_refused("consumptionMode", "\"dynamic\"", "\"per_token\"");
}

#[test]
fn a_zero_fixed_cost_is_refused() {
    assert_credits_refused("fixedCosts.image", "image = 5", "image = 0");
}

#[test]
fn dynamic_mode_without_a_cost_per_kilo_token_is_refused() {
    assert_credits_refused(
        "dynamicChatCostPerKiloToken",
        "dynamicChatCostPerKiloToken = 0.5\n",
        "",
    );
}

#[test]
fn fixed_mode_without_a_chat_cost_is_refused() {
    let credits = FIXTURE_CREDITS
        .replace("\"dynamic\"", "\"fixed\"")
        .replace("chat = 1\n", "");
    let dir = config_dir(&fixture_payment_toml(), &credits);
    let lines = error_lines(&check_config(dir.path()));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(": fixedCosts.chat is required in fixed mode"),
        "{lines:?}"
    );
}

#[test]
fn an_unknown_key_in_the_consumption_settings_is_refused() {
    assert_credits_refused(
        "unknownModels",
        "unknownModel = \"default\"",
        "unknownModel = \"default\"\nunknownModels = 1",
    );
}

#[test]
fn a_spend_order_is_given_first_or_paid_first() {
    for accepted in ["givenFirst", "paidFirst"] {
        let credits = FIXTURE_CREDITS.replacen(
            "unknownModel = \"default\"",
            &format!("unknownModel = \"default\"\nspendOrder = \"{accepted}\""),
            1,
        );
        let dir = config_dir(&fixture_payment_toml(), &credits);
        let output = check_config(dir.path());
        assert_eq!(output.status.code(), Some(0), "{accepted}: {output:?}");
    }
    assert_credits_refused(
        "spendOrder",
        "unknownModel = \"default\"",
        "unknownModel = \"default\"\nspendOrder = \"newestFirst\"",
    );
}

#[test]
fn a_catalog_without_plans_is_refused() {
    let dir = config_dir("# nothing for sale\n", FIXTURE_CREDITS);
    let lines = error_lines(&check_config(dir.path()));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("payment.toml: plans is required"),
        "{lines:?}"
    );
}

#[test]
fn a_catalog_with_more_than_a_thousand_plans_is_refused() {
    let payment: String = (0..1001).map(|i| format!("[plans.p{i}]\n")).collect();
    let dir = config_dir(&payment, FIXTURE_CREDITS);
    let lines = error_lines(&check_config(dir.path()));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("plans declares 1001 plans, more than the limit of 1000"),
        "{lines:?}"
    );
}

#[test]
fn a_plan_that_is_not_a_table_is_refused_once() {
    let payment = format!("{}[plans]\nbroken = 5\n", fixture_payment_toml());
    let dir = config_dir(&payment, FIXTURE_CREDITS);
    let lines = error_lines(&check_config(dir.path()));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("plan \"broken\": must be a table, found an integer"),
        "{lines:?}"
    );
}

#[test]
fn a_config_file_over_the_size_limit_is_refused_unread() {
    let big = format!("{}# {}\n", fixture_payment_toml(), "x".repeat(1024 * 1024));
    let dir = config_dir(&big, FIXTURE_CREDITS);
    let lines = error_lines(&check_config(dir.path()));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("payment.toml: is larger than the limit"),
        "{lines:?}"
    );
}

/// `tally check-config` with `env` added to the process environment.
fn check_config_with(dir: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("check-config")
        .arg("--config")
        .arg(dir)
        .env_remove("APP_ENV")
        .env_remove("APP_BASE_URL")
        .envs(env.iter().copied())
        .output()
        .expect("tally runs")
}

const CARD_ONLY: &str =
    "[providers.card_gateway]\nsecretKey = \"sk_live_x\"\nwebhookSecret = \"whsec_x\"\n";
const PRODUCTION: [(&str, &str); 2] = [
    ("APP_ENV", "production"),
    ("APP_BASE_URL", "https://pay.example.com"),
];

#[test]
fn production_refuses_plans_of_providers_that_are_off_naming_each_one() {
    let dir = config_dir(&fixture_payment_toml(), FIXTURE_CREDITS);
    fs::write(dir.path().join("tally.toml"), CARD_ONLY).expect("tally.toml written");
    let lines = error_lines(&check_config_with(dir.path(), &PRODUCTION));
    let all = lines.join("\n");
    for (id, body) in FIXTURE_PLANS {
        let provider = body
            .lines()
            .find_map(|l| l.strip_prefix("provider = \""))
            .and_then(|p| p.strip_suffix('"'))
            .expect("every fixture plan names its provider");
        let named = all.contains(&format!("{id} ({provider})"));
        assert_eq!(named, provider != "card_gateway", "{id}: {all}");
    }
    // Development runs the same catalog with the other providers on the sandbox.
    let dev = check_config_with(dir.path(), &[]);
    assert!(dev.status.success(), "{}", text(&dev.stderr));
    assert!(
        text(&dev.stdout).contains(
            "providers live: card_gateway; sandboxed: wallet_qr, wallet_web, wallet_global, mor_a, mor_b, mor_c; off: none"
        ),
        "{}",
        text(&dev.stdout)
    );
}

#[test]
fn production_with_a_catalog_of_live_providers_passes_and_says_which_are_off() {
    let card = FIXTURE_PLANS
        .iter()
        .find(|(id, _)| *id == "card_monthly")
        .expect("fixture");
    let dir = config_dir(&plan_block(card.0, card.1), FIXTURE_CREDITS);
    fs::write(dir.path().join("tally.toml"), CARD_ONLY).expect("tally.toml written");
    let output = check_config_with(dir.path(), &PRODUCTION);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains(
            "providers live: card_gateway; sandboxed: none; off: wallet_qr, wallet_web, wallet_global, mor_a, mor_b, mor_c"
        ),
        "{}",
        text(&output.stdout)
    );
    // No live provider at all, or an http base URL, is refused with the setting named.
    fs::remove_file(dir.path().join("tally.toml")).expect("removed");
    let none = error_lines(&check_config_with(dir.path(), &PRODUCTION)).join("\n");
    assert!(none.contains("at least one live provider"), "{none}");
    let http = error_lines(&check_config_with(
        dir.path(),
        &[
            ("APP_ENV", "production"),
            ("APP_BASE_URL", "http://pay.example.com"),
        ],
    ))
    .join("\n");
    assert!(http.contains("APP_BASE_URL"), "{http}");
}

#[test]
fn a_live_wechat_pay_needs_an_https_base_url_even_in_development() {
    let qr = FIXTURE_PLANS
        .iter()
        .find(|(id, _)| *id == "qr_lifetime")
        .expect("fixture");
    let dir = config_dir(&plan_block(qr.0, qr.1), FIXTURE_CREDITS);
    fs::write(
        dir.path().join("tally.toml"),
        "[providers.wallet_qr]\nmchId = \"1900000109\"\n",
    )
    .expect("tally.toml written");
    for base in [None, Some("http://pay.example.com")] {
        let env: Vec<(&str, &str)> = base.map(|b| ("APP_BASE_URL", b)).into_iter().collect();
        let refused = error_lines(&check_config_with(dir.path(), &env)).join("\n");
        assert!(
            refused.contains("APP_BASE_URL must be an https:// URL while wallet_qr is live"),
            "{base:?}: {refused}"
        );
    }
    let https = check_config_with(dir.path(), &[("APP_BASE_URL", "https://pay.example.com")]);
    assert!(https.status.success(), "{}", text(&https.stderr));
}

#[test]
fn the_host_applications_key_file_is_loaded_as_serve_loads_it() {
    let card = FIXTURE_PLANS
        .iter()
        .find(|(id, _)| *id == "card_monthly")
        .expect("fixture");
    let dir = config_dir(&plan_block(card.0, card.1), FIXTURE_CREDITS);
    fs::write(
        dir.path().join("tally.toml"),
        "[hostJwt]\npublicKeyFile = \"/nonexistent/host.pem\"\n",
    )
    .expect("tally.toml written");
    let refused = error_lines(&check_config_with(dir.path(), &[])).join("\n");
    assert!(refused.contains("hostJwt.publicKeyFile"), "{refused}");
    let pem = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host-jwt/ec-public.pem");
    fs::write(
        dir.path().join("tally.toml"),
        format!(
            "[hostJwt]\npublicKeyFile = {:?}\n",
            pem.display().to_string()
        ),
    )
    .expect("tally.toml written");
    let output = check_config_with(dir.path(), &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
}

#[test]
fn serve_in_production_refuses_the_shipped_sample_ids_before_opening_anything() {
    let shipped = fs::read_to_string(shipped_config_dir().join("payment.toml")).expect("read");
    let sample_id = shipped
        .lines()
        .find_map(|l| l.strip_prefix("cardGatewayPriceId = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the sample sells through the card gateway");
    let card = FIXTURE_PLANS
        .iter()
        .find(|(id, _)| *id == "card_monthly")
        .expect("fixture");
    let dir = config_dir(
        &plan_block(card.0, &card.1.replace("price_card", sample_id)),
        FIXTURE_CREDITS,
    );
    // The database URL points nowhere: the refusal must come before any connection.
    fs::write(
        dir.path().join("tally.toml"),
        format!("databaseUrl = \"postgres://nobody@127.0.0.1:9/none\"\n{CARD_ONLY}"),
    )
    .expect("tally.toml written");
    let output = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("serve")
        .arg("--config")
        .arg(dir.path())
        .env_remove("DATABASE_URL")
        .envs(PRODUCTION.iter().copied())
        .output()
        .expect("tally runs");
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("is the shipped sample's placeholder"),
        "{}",
        text(&output.stderr)
    );
}
