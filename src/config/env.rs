//! The environment as the configuration reads it: each value trimmed, an empty one unset, and
//! every problem collected with the variable's name instead of stopping at the first.

use std::collections::HashMap;
use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use crate::store::MongoConfig;

/// Reads variables and collects every problem instead of stopping at the first.
pub(super) struct Env {
    pub(super) vars: HashMap<String, String>,
    pub(super) problems: Vec<String>,
}

impl Env {
    /// The trimmed value, with an empty value treated as unset (as `.env` files often leave them).
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    pub(super) fn string(&self, name: &str, default: &str) -> String {
        self.get(name).unwrap_or(default).to_owned()
    }

    pub(super) fn secret(&self, name: &str) -> Option<SecretString> {
        self.get(name).map(|v| SecretString::from(v.to_owned()))
    }

    pub(super) fn parsed<T>(
        &mut self,
        name: &str,
        default: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Option<T> {
        let value = self.get(name).unwrap_or(default).to_owned();
        parse(&value)
            .map_err(|why| self.problems.push(format!("{name}: {why}")))
            .ok()
    }

    /// A whole number of `what` within `range`.
    pub(super) fn count(
        &mut self,
        name: &str,
        default: u32,
        range: std::ops::RangeInclusive<u32>,
        what: &str,
    ) -> Option<u32> {
        let (low, high) = (*range.start(), *range.end());
        self.parsed(name, &default.to_string(), |v| {
            v.parse::<u32>()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or_else(|| format!("`{v}` is not a number of {what} between {low} and {high}"))
        })
    }

    /// One line of text for customers, at most `max` characters.
    pub(super) fn line(&mut self, name: &str, default: &str, max: usize) -> Option<String> {
        self.parsed(name, default, |v| {
            if v.chars().count() > max {
                Err(format!("longer than {max} characters"))
            } else if v.chars().any(char::is_control) {
                Err("must be one line, without control characters".to_owned())
            } else {
                Ok(v.to_owned())
            }
        })
    }

    /// A positive duration like `30s`, `90m` or `24h`.
    pub(super) fn duration(&mut self, name: &str, default: &str) -> Option<Duration> {
        self.parsed(name, default, |v| match humantime::parse_duration(v) {
            Ok(d) if !d.is_zero() => Ok(d),
            Ok(_) => Err(format!("`{v}` must be longer than zero")),
            Err(e) => Err(format!(
                "`{v}` is not a duration like `30s`, `90m` or `24h`: {e}"
            )),
        })
    }

    /// `ZAGUAN_INSTANCE_ID`, else the host name (`HOSTNAME`, `/etc/hostname`), else `zaguan`.
    pub(super) fn instance_id(&mut self) -> Option<String> {
        let id = match self.get("ZAGUAN_INSTANCE_ID") {
            Some(id) => id.to_owned(),
            None => self
                .get("HOSTNAME")
                .map(str::to_owned)
                .unwrap_or_else(crate::runtime::instances::default_instance_id),
        };
        if id.len() > 128 || id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            self.problems.push(format!(
                "ZAGUAN_INSTANCE_ID: `{id}` is not a name (at most 128 characters, no spaces)"
            ));
            return None;
        }
        Some(id)
    }

    /// A retention period; `0` keeps forever.
    pub(super) fn retention(&mut self, name: &str, default: &str) -> Option<Duration> {
        self.parsed(name, default, |v| {
            if v.trim() == "0" {
                return Ok(None);
            }
            humantime::parse_duration(v).map(Some).map_err(|e| {
                format!("`{v}` is not a duration like `30d`, or 0 to keep forever: {e}")
            })
        })
        .flatten()
    }

    pub(super) fn url(&mut self, name: &str, default: &str) -> Option<Url> {
        self.parsed(name, default, |v| match Url::parse(v) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(url),
            Ok(_) => Err(format!("`{v}` must be an http:// or https:// URL")),
            Err(e) => Err(format!("`{v}` is not a URL: {e}")),
        })
    }

    /// `ZAGUAN_EVENTS_URL` (URLs separated by commas or spaces), its secret, the types sent
    /// and the request timeout.
    pub(super) fn events(&mut self) -> Option<crate::crm::EventSettings> {
        let timeout = self.duration("ZAGUAN_EVENTS_TIMEOUT", "10s");
        let types = self.get("ZAGUAN_EVENTS_TYPES").map(|list| {
            list.split([',', ' '])
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect::<std::collections::BTreeSet<String>>()
        });
        if let Some(types) = &types {
            let known = crate::store::BusinessEvent::TYPES;
            for unknown in types.iter().filter(|t| !known.contains(&t.as_str())) {
                self.problems.push(format!(
                    "ZAGUAN_EVENTS_TYPES: `{unknown}` is not one of {}",
                    known.join(", ")
                ));
            }
        }
        let list = self.get("ZAGUAN_EVENTS_URL")?.to_owned();
        let mut urls = Vec::new();
        for item in list
            .split([',', ' '])
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            match Url::parse(item) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => urls.push(url),
                _ => self.problems.push(format!(
                    "ZAGUAN_EVENTS_URL: `{item}` is not an http:// or https:// URL"
                )),
            }
        }
        let Some(secret) = self.secret("ZAGUAN_EVENTS_SECRET") else {
            self.problems.push(
                "ZAGUAN_EVENTS_SECRET: required with ZAGUAN_EVENTS_URL (receivers verify the \
                 signature with it)"
                    .to_owned(),
            );
            return None;
        };
        let mut settings = crate::crm::EventSettings::new(urls, secret);
        settings.types = types;
        if let Some(timeout) = timeout {
            settings.timeout = timeout;
        }
        Some(settings)
    }

    /// `MONGODB_URI` and `MONGODB_DATABASE`; the URI may hold a password, so problems with it
    /// are described without echoing it.
    pub(super) fn mongo(&mut self) -> Option<MongoConfig> {
        let database = self.string("MONGODB_DATABASE", "zaguan");
        if database.is_empty() || database.contains(['/', '\\', '.', ' ', '"', '$']) {
            self.problems.push(format!(
                "MONGODB_DATABASE: `{database}` is not a valid database name"
            ));
        }
        let uri = self.get("MONGODB_URI")?.to_owned();
        if !(uri.starts_with("mongodb://") || uri.starts_with("mongodb+srv://")) {
            self.problems
                .push("MONGODB_URI: must start with `mongodb://` or `mongodb+srv://`".to_owned());
        }
        Some(MongoConfig {
            uri: SecretString::from(uri),
            database,
        })
    }
}
