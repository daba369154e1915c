//! `[hostApp]` and `[branding]` in `tally.toml`: where a host application's buyers may be sent
//! back to (exact origins; any loopback origin in development), the secret that signs their
//! return links, and the name, logo, colour and contacts every page shows.

use domain::{AppEnvironment, Origin, ReturnOrigins, ReturnUrl};
use secrecy::SecretString;
use serde::Deserialize;

use crate::settings::{Env, SettingsError};

/// The shortest return secret production accepts, in bytes.
const MIN_SECRET_BYTES: usize = 32;
/// The longest brand name, in characters.
const MAX_NAME_CHARS: usize = 60;

/// `[hostApp]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct HostAppFile {
    #[serde(default)]
    return_origins: Vec<String>,
    return_secret: Option<String>,
}

/// `[branding]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BrandingFile {
    name: Option<String>,
    logo_url: Option<String>,
    accent_color: Option<String>,
    support_email: Option<String>,
    support_url: Option<String>,
    home_url: Option<String>,
}

/// The host application's side of checkouts and the portal.
#[derive(Debug, Clone)]
pub struct HostAppSettings {
    /// The origins return URLs may point to (loopback ones too in development).
    pub return_origins: ReturnOrigins,
    /// `TALLY_RETURN_SECRET` or `[hostApp] returnSecret`: signs return links. Required in
    /// production with return origins; otherwise a random one per process when unset (return
    /// links then work only on the instance that made them, until it restarts).
    pub return_secret: Option<SecretString>,
}

fn bad(setting: &str, problem: impl Into<String>) -> SettingsError {
    SettingsError {
        setting: setting.to_owned(),
        problem: problem.into(),
    }
}

/// `[hostApp]` and `TALLY_RETURN_SECRET`.
///
/// # Errors
/// An origin that is not `scheme://host[:port]`, an http origin in production (loopback
/// excepted), a missing or short secret in production, an unset `${VAR}`.
pub(crate) fn resolve(
    file: HostAppFile,
    env: &dyn Env,
    environment: AppEnvironment,
) -> Result<HostAppSettings, SettingsError> {
    let production = environment == AppEnvironment::Production;
    let mut origins = Vec::new();
    for raw in &file.return_origins {
        let origin = Origin::parse(raw).map_err(|_| {
            bad(
                "hostApp.returnOrigins",
                format!("{raw:?} is not an origin like https://app.example.com"),
            )
        })?;
        if production && !origin.is_https() && !origin.is_loopback() {
            return Err(bad(
                "hostApp.returnOrigins",
                format!("{raw:?} must be https in production"),
            ));
        }
        origins.push(origin);
    }
    let secret = match (env.get("TALLY_RETURN_SECRET"), file.return_secret) {
        (Some(secret), _) => Some(("TALLY_RETURN_SECRET", secret)),
        (None, Some(text)) => Some(("hostApp.returnSecret", expand(env, text)?)),
        (None, None) => None,
    };
    match &secret {
        Some((setting, secret)) if production && secret.len() < MIN_SECRET_BYTES => {
            return Err(bad(
                setting,
                format!("production needs a secret of at least {MIN_SECRET_BYTES} bytes"),
            ));
        }
        None if production && !origins.is_empty() => {
            return Err(bad(
                "TALLY_RETURN_SECRET",
                "must be set in production with hostApp.returnOrigins (at least 32 random \
                 bytes, the same on every instance): it signs the links that bring buyers back \
                 from a checkout",
            ));
        }
        _ => {}
    }
    Ok(HostAppSettings {
        return_origins: ReturnOrigins::new(origins, !production),
        return_secret: secret.map(|(_, s)| SecretString::from(s)),
    })
}

fn expand(env: &dyn Env, text: String) -> Result<String, SettingsError> {
    match text.strip_prefix("${").and_then(|t| t.strip_suffix('}')) {
        Some(var) => env.get(var).ok_or_else(|| {
            bad(
                "hostApp.returnSecret",
                format!("environment variable {var} is not set"),
            )
        }),
        None => Ok(text),
    }
}

/// `[branding]`: "Tally" and no logo, colour or contacts by default.
///
/// # Errors
/// An empty or overlong name, a colour that is not `#rrggbb`, a URL that is not absolute
/// http(s) (https in production), an e-mail address that is not one.
pub(crate) fn branding(
    file: BrandingFile,
    environment: AppEnvironment,
) -> Result<web_pages::Branding, SettingsError> {
    let name = file.name.unwrap_or_else(|| "Tally".to_owned());
    let name = name.trim().to_owned();
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(bad(
            "branding.name",
            format!("must be 1 to {MAX_NAME_CHARS} characters"),
        ));
    }
    if let Some(color) = &file.accent_color
        && !(color.len() == 7
            && color.starts_with('#')
            && color[1..].chars().all(|c| c.is_ascii_hexdigit()))
    {
        return Err(bad(
            "branding.accentColor",
            format!("{color:?} is not a colour like #4f46e5"),
        ));
    }
    if let Some(email) = &file.support_email
        && application::accounts::Email::parse(email).is_err()
    {
        return Err(bad("branding.supportEmail", "is not an e-mail address"));
    }
    let production = environment == AppEnvironment::Production;
    let url = |setting: &str, raw: Option<String>| -> Result<Option<String>, SettingsError> {
        let Some(raw) = raw else { return Ok(None) };
        let parsed = ReturnUrl::parse(&raw)
            .map_err(|_| bad(setting, format!("{raw:?} is not an absolute http(s) URL")))?;
        if production && !parsed.origin().is_https() {
            return Err(bad(setting, "must be https in production"));
        }
        Ok(Some(raw))
    };
    Ok(web_pages::Branding {
        name,
        logo_url: url("branding.logoUrl", file.logo_url)?,
        accent_color: file.accent_color.map(|c| c.to_ascii_lowercase()),
        support_email: file.support_email,
        support_url: url("branding.supportUrl", file.support_url)?,
        home_url: url("branding.homeUrl", file.home_url)?,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn host_app(
        toml_text: &str,
        env: &[(&str, &str)],
        environment: AppEnvironment,
    ) -> Result<HostAppSettings, SettingsError> {
        let file: HostAppFile = toml::from_str(toml_text).unwrap();
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        resolve(file, &env, environment)
    }

    #[test]
    fn return_origins_are_exact_and_loopback_only_in_development() {
        let dev = host_app(
            "returnOrigins = [\"https://app.example.com\"]",
            &[],
            AppEnvironment::Development,
        )
        .unwrap();
        let allowed = |s: &HostAppSettings, url: &str| {
            s.return_origins.allows(&ReturnUrl::parse(url).unwrap())
        };
        assert!(allowed(&dev, "https://app.example.com/x"));
        assert!(allowed(&dev, "http://localhost:3000/x"));
        assert!(dev.return_secret.is_none());
        let prod = host_app(
            "returnOrigins = [\"https://app.example.com\"]\nreturnSecret = \"${S}\"",
            &[("S", &"s".repeat(32))],
            AppEnvironment::Production,
        )
        .unwrap();
        assert!(allowed(&prod, "https://app.example.com/x"));
        assert!(!allowed(&prod, "http://localhost:3000/x"));
    }

    #[test]
    fn production_needs_https_origins_and_a_long_secret() {
        let long = "s".repeat(32);
        let err = host_app(
            "returnOrigins = [\"http://app.example.com\"]",
            &[("TALLY_RETURN_SECRET", &long)],
            AppEnvironment::Production,
        )
        .unwrap_err();
        assert_eq!(err.setting, "hostApp.returnOrigins");
        let err = host_app(
            "returnOrigins = [\"https://app.example.com\"]",
            &[],
            AppEnvironment::Production,
        )
        .unwrap_err();
        assert_eq!(err.setting, "TALLY_RETURN_SECRET");
        assert!(host_app("", &[], AppEnvironment::Production).is_ok());
        let err = host_app(
            "",
            &[("TALLY_RETURN_SECRET", "short")],
            AppEnvironment::Production,
        )
        .unwrap_err();
        assert_eq!(err.setting, "TALLY_RETURN_SECRET");
        let err = host_app(
            "returnOrigins = [\"app.example.com\"]",
            &[],
            AppEnvironment::Development,
        )
        .unwrap_err();
        assert_eq!(err.setting, "hostApp.returnOrigins");
    }

    #[test]
    fn branding_is_validated_and_defaults_to_tally() {
        let brand = |text: &str, environment| branding(toml::from_str(text).unwrap(), environment);
        assert_eq!(
            brand("", AppEnvironment::Development).unwrap().name,
            "Tally"
        );
        let acme = brand(
            "name = \"Acme\"\naccentColor = \"#FF6600\"\nlogoUrl = \"https://cdn.acme.test/l.png\"",
            AppEnvironment::Production,
        )
        .unwrap();
        assert_eq!(acme.accent_color.as_deref(), Some("#ff6600"));
        for (text, setting) in [
            ("accentColor = \"red\"", "branding.accentColor"),
            ("accentColor = \"#ff660\"", "branding.accentColor"),
            ("name = \"\"", "branding.name"),
            ("logoUrl = \"file:///etc/passwd\"", "branding.logoUrl"),
            ("supportEmail = \"nope\"", "branding.supportEmail"),
        ] {
            assert_eq!(
                brand(text, AppEnvironment::Development)
                    .unwrap_err()
                    .setting,
                setting
            );
        }
        let err = brand(
            "logoUrl = \"http://cdn.acme.test/l.png\"",
            AppEnvironment::Production,
        )
        .unwrap_err();
        assert_eq!(err.setting, "branding.logoUrl");
    }
}
