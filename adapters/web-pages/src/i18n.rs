//! The pages' two languages, their catalogs and locale negotiation.
//!
//! Every user-visible string comes from `i18n/en.toml` or `i18n/zh-CN.toml` (embedded at build
//! time); a unit test keeps their key sets identical and checks that every key the code asks
//! for exists. The reader's language is, in order: `?lang=`, the `tally_lang` cookie, the
//! first supported `Accept-Language` range, English.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use domain::Locale;
use poem::Request;

use crate::cookies;

/// The cookie that remembers a language chosen with `?lang=`.
pub(crate) const LANG_COOKIE: &str = "tally_lang";
/// The longest `Accept-Language` header looked at (a limit on work).
const MAX_ACCEPT_LANGUAGE_CHARS: usize = 512;
/// The most language ranges looked at in one header.
const MAX_LANGUAGE_RANGES: usize = 16;

/// A language the pages are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    /// English (`en`), the fallback.
    En,
    /// Simplified Chinese (`zh-CN`).
    ZhCn,
}

impl Lang {
    /// Every language, in the order the switcher shows them.
    pub(crate) const ALL: [Lang; 2] = [Lang::En, Lang::ZhCn];

    /// The locale tag (`en`, `zh-CN`), as `?lang=` and `<html lang>` spell it.
    pub(crate) const fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::ZhCn => "zh-CN",
        }
    }

    /// The language's own name, for the switcher.
    pub(crate) const fn native_name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::ZhCn => "中文",
        }
    }

    /// The switcher's label on narrow screens.
    pub(crate) const fn short_name(self) -> &'static str {
        match self {
            Lang::En => "EN",
            Lang::ZhCn => "中文",
        }
    }

    /// The domain locale, for plan texts and locale filtering.
    pub(crate) fn locale(self) -> Locale {
        Locale::parse(self.tag()).unwrap_or_else(Locale::english)
    }

    /// The language of a tag: `zh`, `zh-CN`, `zh-Hans`… are Chinese, `en*` English.
    pub(crate) fn from_tag(tag: &str) -> Option<Lang> {
        let primary = tag.split(['-', '_']).next()?.trim().to_ascii_lowercase();
        match primary.as_str() {
            "en" => Some(Lang::En),
            "zh" => Some(Lang::ZhCn),
            _ => None,
        }
    }

    /// The catalog string for `key`, or the key itself when the catalog lacks it (a test
    /// guarantees every key the code uses exists in both catalogs).
    pub(crate) fn t(self, key: &str) -> &str {
        let catalog = match self {
            Lang::En => &CATALOGS.en,
            Lang::ZhCn => &CATALOGS.zh_cn,
        };
        match catalog.get(key) {
            Some(text) => text.as_str(),
            None => {
                tracing::warn!(key, lang = self.tag(), "missing catalog key");
                key
            }
        }
    }

    /// The catalog string for `key` with each `{name}` replaced by its value.
    pub(crate) fn tf(self, key: &str, args: &[(&str, &str)]) -> String {
        let mut text = self.t(key).to_owned();
        for (name, value) in args {
            text = text.replace(&format!("{{{name}}}"), value);
        }
        text
    }
}

/// Where the reader's language came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LangSource {
    /// `?lang=`: remember it in the cookie.
    Query,
    /// The cookie, `Accept-Language` or the default: nothing to remember.
    Other,
}

/// The reader's language: `?lang=`, then the cookie, then `Accept-Language`, then English.
pub(crate) fn negotiate(request: &Request) -> (Lang, LangSource) {
    if let Some(lang) = query_lang(request) {
        return (lang, LangSource::Query);
    }
    let from_cookie = cookies::get(request, LANG_COOKIE).and_then(Lang::from_tag);
    let lang = from_cookie
        .or_else(|| accepted(request))
        .unwrap_or(Lang::En);
    (lang, LangSource::Other)
}

fn query_lang(request: &Request) -> Option<Lang> {
    let query = request.uri().query()?;
    serde_urlencoded::from_str::<Vec<(String, String)>>(query)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == "lang")
        .and_then(|(_, v)| Lang::from_tag(&v))
}

/// The first supported language among the `Accept-Language` ranges, by descending quality.
fn accepted(request: &Request) -> Option<Lang> {
    let header = request.headers().get("accept-language")?.to_str().ok()?;
    let header: String = header.chars().take(MAX_ACCEPT_LANGUAGE_CHARS).collect();
    let mut ranges: Vec<(u16, Lang)> = header
        .split(',')
        .take(MAX_LANGUAGE_RANGES)
        .filter_map(|range| {
            let mut parts = range.trim().split(';');
            let lang = Lang::from_tag(parts.next()?)?;
            let quality = parts
                .find_map(|p| p.trim().strip_prefix("q="))
                .map_or(1000, quality_per_mille);
            (quality > 0).then_some((quality, lang))
        })
        .collect();
    ranges.sort_by_key(|r| std::cmp::Reverse(r.0));
    ranges.first().map(|(_, lang)| *lang)
}

/// `q=0.8` as 800; anything unreadable as 0 (ignored).
fn quality_per_mille(raw: &str) -> u16 {
    let raw = raw.trim();
    let (whole, fraction) = raw.split_once('.').unwrap_or((raw, ""));
    let digits: String = fraction.chars().take(3).collect();
    let padded = format!("{digits:0<3}");
    match (whole, padded.parse::<u16>()) {
        ("1", _) => 1000,
        ("0", Ok(per_mille)) => per_mille,
        _ => 0,
    }
}

struct Catalogs {
    en: BTreeMap<String, String>,
    zh_cn: BTreeMap<String, String>,
}

static CATALOGS: LazyLock<Catalogs> = LazyLock::new(|| Catalogs {
    en: flatten(EN_SOURCE),
    zh_cn: flatten(ZH_CN_SOURCE),
});

/// Parse both catalogs now (at startup), so a defect in them cannot surface in a request.
pub(crate) fn load() {
    LazyLock::force(&CATALOGS);
}

/// The English catalog's source.
pub(crate) const EN_SOURCE: &str = include_str!("../i18n/en.toml");
/// The Simplified Chinese catalog's source.
pub(crate) const ZH_CN_SOURCE: &str = include_str!("../i18n/zh-CN.toml");

/// A catalog as dotted keys (`[pricing] title = "…"` is `pricing.title`). The catalogs are
/// embedded and checked by tests, so a malformed one is a build defect.
pub(crate) fn flatten(source: &str) -> BTreeMap<String, String> {
    let table: toml::Table = source
        .parse()
        .unwrap_or_else(|e| panic!("an embedded catalog is not valid TOML: {e}"));
    let mut out = BTreeMap::new();
    flatten_into(&mut out, "", &table);
    out
}

fn flatten_into(out: &mut BTreeMap<String, String>, prefix: &str, table: &toml::Table) {
    for (key, value) in table {
        let full = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) => flatten_into(out, &full, inner),
            toml::Value::String(text) => {
                out.insert(full, text.clone());
            }
            other => panic!("catalog key {full} is not a string: {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str, headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder().uri(uri.parse().unwrap());
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.finish()
    }

    /// Every string literal in the crate's sources that looks like a catalog key (a dotted
    /// name whose first part is one of the catalog's sections).
    fn used_keys() -> Vec<String> {
        let sections: Vec<String> = flatten(EN_SOURCE)
            .keys()
            .filter_map(|k| k.split('.').next().map(str::to_owned))
            .collect();
        let mut keys = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src"
        ))];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let source = std::fs::read_to_string(&path).unwrap();
                    keys.extend(
                        source
                            .split('"')
                            .skip(1)
                            .step_by(2)
                            .filter(|literal| {
                                let looks_like_key = literal.contains('.')
                                    && literal
                                        .chars()
                                        .all(|c| c.is_ascii_lowercase() || c == '_' || c == '.');
                                looks_like_key
                                    && literal
                                        .split('.')
                                        .next()
                                        .is_some_and(|first| sections.iter().any(|s| s == first))
                            })
                            .map(str::to_owned),
                    );
                }
            }
        }
        assert!(
            keys.len() > 100,
            "the key scan found too few keys: {}",
            keys.len()
        );
        keys
    }

    #[test]
    fn both_catalogs_have_exactly_the_same_keys() {
        let en: Vec<_> = flatten(EN_SOURCE).into_keys().collect();
        let zh: Vec<_> = flatten(ZH_CN_SOURCE).into_keys().collect();
        let only_en: Vec<_> = en.iter().filter(|k| !zh.contains(k)).collect();
        let only_zh: Vec<_> = zh.iter().filter(|k| !en.contains(k)).collect();
        assert!(only_en.is_empty(), "keys only in en: {only_en:?}");
        assert!(only_zh.is_empty(), "keys only in zh-CN: {only_zh:?}");
    }

    #[test]
    fn every_key_the_code_uses_exists() {
        let en = flatten(EN_SOURCE);
        let mut missing = Vec::new();
        for key in used_keys() {
            if !en.contains_key(&key) {
                missing.push(key);
            }
        }
        assert!(
            missing.is_empty(),
            "keys used but not in the catalogs: {missing:?}"
        );
    }

    #[test]
    fn every_transaction_kind_and_status_has_a_text_in_both_languages() {
        for lang in Lang::ALL {
            for kind in domain::TransactionKind::ALL {
                let key = format!("transaction.{}", kind.code());
                assert_ne!(lang.t(&key), key, "{key} in {}", lang.tag());
            }
        }
    }

    #[test]
    fn the_query_wins_then_the_cookie_then_accept_language() {
        let r = request("/p?lang=zh-CN", &[("cookie", "tally_lang=en")]);
        assert_eq!(negotiate(&r), (Lang::ZhCn, LangSource::Query));
        let r = request(
            "/p",
            &[
                ("cookie", "a=b; tally_lang=zh-CN"),
                ("accept-language", "en"),
            ],
        );
        assert_eq!(negotiate(&r), (Lang::ZhCn, LangSource::Other));
        let r = request(
            "/p",
            &[("accept-language", "fr;q=0.9, zh-Hans;q=0.8, en;q=0.5")],
        );
        assert_eq!(negotiate(&r).0, Lang::ZhCn);
        let r = request("/p", &[("accept-language", "de, fr")]);
        assert_eq!(negotiate(&r).0, Lang::En);
        let r = request("/p?lang=xx", &[("accept-language", "zh;q=0")]);
        assert_eq!(negotiate(&r), (Lang::En, LangSource::Other));
    }

    #[test]
    fn placeholders_are_filled() {
        assert_eq!(
            Lang::En.tf("credits.amount", &[("amount", "1,000")]),
            "1,000 credits"
        );
    }
}
