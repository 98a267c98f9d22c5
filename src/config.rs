//! Configuration: the environment of ARCHITECTURE.md §3 turned into a typed [`Config`] once, at
//! start-up. Every bad value is reported (all of them, not just the first) with the variable's
//! name; secrets are wrapped in [`SecretString`] so they never reach a log or a `Debug` print.

use crate::engine::retention::Retention;
use crate::store::MongoConfig;
use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Not as _;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use crate::llm::CallPolicy;
use crate::outbound::SendLimits;

/// Every variable the service reads, as documented in `.env.example`.
pub const VARIABLES: &[&str] = &[
    "ZAGUAN_BIND_ADDR",
    "WHATSAPP_VERIFY_TOKEN",
    "WHATSAPP_APP_SECRET",
    "WHATSAPP_ACCESS_TOKEN",
    "WHATSAPP_API_BASE_URL",
    "WHATSAPP_API_TIMEOUT",
    "WHATSAPP_SEND_RATE",
    "WHATSAPP_PAIR_INTERVAL",
    "WHATSAPP_PAIR_BURST",
    "WHATSAPP_PHONE_NUMBER_ID",
    "WHATSAPP_REMINDER_TEMPLATE",
    "WHATSAPP_REMINDER_TEMPLATE_LANGUAGE",
    "WHATSAPP_ALERT_TEMPLATE",
    "WHATSAPP_ALERT_TEMPLATE_LANGUAGE",
    "ZAGUAN_REMINDER_TIME",
    "MONGODB_URI",
    "MONGODB_DATABASE",
    "LLM_PRIMARY",
    "LLM_FALLBACK",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ZAGUAN_LLM_TIMEOUT",
    "ZAGUAN_LLM_MAX_CONCURRENCY",
    "ZAGUAN_LLM_BREAKER_FAILURES",
    "ZAGUAN_LLM_BREAKER_COOLDOWN",
    "ZAGUAN_LLM_MAX_TOKENS",
    "ZAGUAN_FAST_ROUTE",
    "LLM_TRANSCRIBE",
    "ZAGUAN_TRANSCRIBE_TIMEOUT",
    "ZAGUAN_PROMPTS_DIR",
    "ZAGUAN_ADMIN_TOKEN",
    "ZAGUAN_PUBLIC_URL",
    "ZAGUAN_EVENTS_URL",
    "ZAGUAN_EVENTS_SECRET",
    "ZAGUAN_EVENTS_TYPES",
    "ZAGUAN_EVENTS_TIMEOUT",
    "ZAGUAN_DIALOG_IDLE_TTL",
    "ZAGUAN_STUCK_AFTER",
    "ZAGUAN_HANDOFF_TTL",
    "ZAGUAN_USER_TURNS_PER_MINUTE",
    "ZAGUAN_DAILY_TOKEN_BUDGET",
    "ZAGUAN_LEASE",
    "ZAGUAN_INSTANCE_ID",
    "ZAGUAN_WORKER_CONCURRENCY",
    "ZAGUAN_DRAIN_TIMEOUT",
    "ZAGUAN_RETENTION_INBOX",
    "ZAGUAN_RETENTION_OUTBOX",
    "ZAGUAN_RETENTION_MESSAGES",
    "ZAGUAN_RETENTION_LLM_CALLS",
    "ZAGUAN_RETENTION_EVENTS",
    "ZAGUAN_TIMEZONE",
    "ZAGUAN_LANGUAGES",
    "ZAGUAN_BUSINESS_NAME",
    "ZAGUAN_BUSINESS_CONTACT",
    "RUST_LOG",
    "ZAGUAN_LOG_FORMAT",
];

/// The service's whole configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind_addr: SocketAddr,
    pub whatsapp: WhatsAppConfig,
    pub mongodb: Option<MongoConfig>,
    pub llm: LlmConfig,
    pub prompts_dir: PathBuf,
    /// Bearer token of the admin API; `None` turns the admin API off (404).
    pub admin_token: Option<SecretString>,
    /// Where operators reach the service (`ZAGUAN_PUBLIC_URL`): https makes the console's
    /// cookie `Secure`.
    pub public_url: Option<Url>,
    /// Where business events go (`ZAGUAN_EVENTS_URL`); `None`: they are only recorded.
    pub events: Option<crate::events::EventSettings>,
    /// A subgraph left idle this long is exited on the next message.
    pub dialog_idle_ttl: Duration,
    /// A conversation in an assistant idle this long counts as stuck (metrics, log).
    pub stuck_after: Duration,
    /// An operator's handoff ends by itself after this (unless released before).
    pub handoff_ttl: Duration,
    /// Turns one user gets per minute before the next waits (messages meanwhile are merged);
    /// 0 is no limit.
    pub user_turns_per_minute: u32,
    /// LLM tokens one conversation may use per UTC day before it is answered with a fixed
    /// reply and flagged for a person; 0 is no budget.
    pub daily_token_budget: u64,
    /// An instance whose heartbeat stops this long is gone: its conversations are taken over
    /// (it stops itself well before, at 3/5 of it).
    pub lease: Duration,
    /// This process's stable identity (`ZAGUAN_INSTANCE_ID`, by default the host name): a
    /// restart under it takes its conversations back at once.
    pub instance_id: String,
    /// Conversations this process runs turns for at once (each mostly waiting on the LLM).
    pub worker_concurrency: usize,
    /// On SIGTERM, how long in-flight turns may take to finish before the process exits.
    pub drain_timeout: Duration,
    /// How long finished records are kept before the cleanup job deletes them.
    pub retention: Retention,
    /// The business's time zone: "now" in prompts, dates said to customers.
    pub timezone: chrono_tz::Tz,
    /// ISO 639-1 codes of the languages customers are answered in.
    pub languages: Vec<String>,
    /// The agency's name, as the assistants say it.
    pub business_name: String,
    /// How customers reach the agency's people (a phone, an email, opening hours), said after
    /// replies that cannot help and when a person is asked for; `None`: not said.
    pub business_contact: Option<String>,
}

#[derive(Debug, Clone)]
pub struct WhatsAppConfig {
    /// Token Meta echoes in the `GET /webhook` handshake.
    pub verify_token: Option<SecretString>,
    /// HMAC key of `X-Hub-Signature-256`; `None` refuses every `POST /webhook`.
    pub app_secret: Option<SecretString>,
    /// Graph API bearer token; `None` means dry run (replies only logged).
    pub access_token: Option<SecretString>,
    pub api_base_url: Url,
    /// Longest one Graph API call may take before it is retried.
    pub api_timeout: Duration,
    /// Meta's throughput and pair rate limits, kept on our side.
    pub limits: SendLimits,
    /// The business number messages not answering one are sent from (reminders); unset →
    /// no reminders.
    pub phone_number_id: Option<String>,
    /// The approved template of visit reminders outside the 24-hour window, and its language.
    pub reminder_template: String,
    pub reminder_template_language: String,
    /// The approved template of saved-search notices outside the 24-hour window, and its
    /// language.
    pub alert_template: String,
    pub alert_template_language: String,
    /// From this local time, tomorrow's visits are reminded.
    pub reminder_time: chrono::NaiveTime,
}

#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub primary: LlmSpec,
    pub fallback: LlmSpec,
    pub openai_api_key: Option<SecretString>,
    pub openai_base_url: Url,
    pub anthropic_api_key: Option<SecretString>,
    pub anthropic_base_url: Url,
    /// Timeout, concurrency and breaker of the fallback chain.
    pub policy: CallPolicy,
    /// Most tokens one Anthropic answer may use (its API requires a bound).
    pub max_tokens: u32,
    /// Enter a subgraph without an LLM call when the keywords leave no doubt.
    pub fast_route: bool,
    /// The model that transcribes voice notes (`LLM_TRANSCRIBE=openai:MODEL`, spoken to at
    /// `OPENAI_BASE_URL` with `OPENAI_API_KEY`); `None`: voice notes get the polite answer.
    pub transcribe: Option<String>,
    /// Bounds each media download and each transcription call.
    pub transcribe_timeout: Duration,
}

/// Which wire format a model is spoken to in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmProvider {
    /// Any OpenAI-compatible Chat Completions server.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

/// `provider:model`, e.g. `openai:gpt-4.1-mini`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmSpec {
    pub provider: LlmProvider,
    pub model: String,
}

impl FromStr for LlmSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (provider, model) = s
            .split_once(':')
            .ok_or_else(|| format!("expected `provider:model`, got `{s}`"))?;
        let provider = match provider {
            "openai" => LlmProvider::OpenAi,
            "anthropic" => LlmProvider::Anthropic,
            other => {
                return Err(format!(
                    "unknown provider `{other}` (expected `openai` or `anthropic`)"
                ));
            }
        };
        let model = model.trim();
        if model.is_empty() {
            return Err(format!("model name missing in `{s}`"));
        }
        Ok(Self {
            provider,
            model: model.to_owned(),
        })
    }
}

impl fmt::Display for LlmSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let provider = match self.provider {
            LlmProvider::OpenAi => "openai",
            LlmProvider::Anthropic => "anthropic",
        };
        write!(f, "{provider}:{}", self.model)
    }
}

/// One or more variables with a bad value; `Display` lists each on its own line.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError(pub Vec<String>);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "invalid configuration:")?;
        for problem in &self.0 {
            writeln!(f, "  - {problem}")?;
        }
        Ok(())
    }
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(std::env::vars().collect())
    }

    /// Reads the given variables; the seam tests use instead of the process environment.
    pub fn from_vars(vars: HashMap<String, String>) -> Result<Self, ConfigError> {
        let mut env = Env {
            vars,
            problems: Vec::new(),
        };
        let bind_addr = env.parsed("ZAGUAN_BIND_ADDR", "0.0.0.0:8080", |v| {
            v.parse::<SocketAddr>()
                .map_err(|_| format!("`{v}` is not an address like `0.0.0.0:8080`"))
        });
        let api_base_url = env.url("WHATSAPP_API_BASE_URL", "https://graph.facebook.com/v21.0");
        let api_timeout = env.duration("WHATSAPP_API_TIMEOUT", "15s");
        let primary = env.parsed("LLM_PRIMARY", "openai:gpt-4.1-mini", |v| v.parse());
        let fallback = env.parsed("LLM_FALLBACK", "anthropic:claude-sonnet-4-5", |v| v.parse());
        let openai_base_url = env.url("OPENAI_BASE_URL", "https://api.openai.com/v1");
        let anthropic_base_url = env.url("ANTHROPIC_BASE_URL", "https://api.anthropic.com");
        let dialog_idle_ttl = env.duration("ZAGUAN_DIALOG_IDLE_TTL", "24h");
        let stuck_after = env.duration("ZAGUAN_STUCK_AFTER", "2h");
        let handoff_ttl = env.duration("ZAGUAN_HANDOFF_TTL", "2h");
        let user_turns_per_minute =
            env.count("ZAGUAN_USER_TURNS_PER_MINUTE", 12, 0..=10_000, "turns");
        let daily_token_budget =
            env.count("ZAGUAN_DAILY_TOKEN_BUDGET", 300_000, 0..=u32::MAX, "tokens");
        let lease = env.duration("ZAGUAN_LEASE", "10s");
        let instance_id = env.instance_id();
        let worker_concurrency = env.count(
            "ZAGUAN_WORKER_CONCURRENCY",
            256,
            1..=100_000,
            "conversations",
        );
        let drain_timeout = env.duration("ZAGUAN_DRAIN_TIMEOUT", "25s");
        let retention = Retention {
            inbox: env.retention("ZAGUAN_RETENTION_INBOX", "30d"),
            outbox: env.retention("ZAGUAN_RETENTION_OUTBOX", "30d"),
            messages: env.retention("ZAGUAN_RETENTION_MESSAGES", "365d"),
            llm_calls: env.retention("ZAGUAN_RETENTION_LLM_CALLS", "90d"),
            events: env.retention("ZAGUAN_RETENTION_EVENTS", "90d"),
        };
        let timezone = env.parsed("ZAGUAN_TIMEZONE", "Europe/Madrid", |v| {
            v.parse::<chrono_tz::Tz>()
                .map_err(|_| format!("`{v}` is not an IANA time zone like `Europe/Madrid`"))
        });
        let send_rate = env.count("WHATSAPP_SEND_RATE", 80, 1..=10_000, "messages per second");
        let pair_interval = env.duration("WHATSAPP_PAIR_INTERVAL", "6s");
        let pair_burst = env.count("WHATSAPP_PAIR_BURST", 45, 1..=1000, "messages");
        let reminder_time = env.parsed("ZAGUAN_REMINDER_TIME", "19:00", |v| {
            chrono::NaiveTime::parse_from_str(v, "%H:%M")
                .map_err(|_| format!("`{v}` is not a time like `19:00`"))
        });
        let llm_timeout = env.duration("ZAGUAN_LLM_TIMEOUT", "30s");
        let max_concurrency = env.count("ZAGUAN_LLM_MAX_CONCURRENCY", 64, 1..=10_000, "calls");
        let breaker_failures = env.count("ZAGUAN_LLM_BREAKER_FAILURES", 3, 1..=1000, "failures");
        let breaker_cooldown = env.duration("ZAGUAN_LLM_BREAKER_COOLDOWN", "30s");
        let max_tokens = env.count("ZAGUAN_LLM_MAX_TOKENS", 1024, 16..=200_000, "tokens");
        let fast_route = env.parsed("ZAGUAN_FAST_ROUTE", "true", |v| {
            match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "on" | "yes" => Ok(true),
                "0" | "false" | "off" | "no" => Ok(false),
                _ => Err(format!("`{v}` is not `true` or `false`")),
            }
        });
        let transcribe = match env.get("LLM_TRANSCRIBE").map(str::to_owned) {
            None => Some(None),
            Some(_) => env.parsed("LLM_TRANSCRIBE", "", |value| match value.parse::<LlmSpec>() {
                Ok(LlmSpec {
                    provider: LlmProvider::OpenAi,
                    model,
                }) => Ok(Some(model)),
                Ok(_) => Err(format!(
                    "`{value}`: only `openai:MODEL` (an OpenAI-compatible /audio/transcriptions)"
                )),
                Err(why) => Err(why),
            }),
        };
        let transcribe_timeout = env.duration("ZAGUAN_TRANSCRIBE_TIMEOUT", "30s");
        let languages = env.parsed("ZAGUAN_LANGUAGES", "es,en,pt,fr,de,it,ca", |v| {
            let codes: Vec<String> = v
                .split(',')
                .map(|c| c.trim().to_ascii_lowercase())
                .filter(|c| !c.is_empty())
                .collect();
            match codes
                .iter()
                .find(|c| crate::guard::lang::is_supported(c).not())
            {
                Some(bad) => Err(format!(
                    "`{bad}` is not a supported language; use ISO 639-1 codes among {}",
                    crate::guard::lang::SUPPORTED.join(", ")
                )),
                None if codes.is_empty() => Err("no language given".to_owned()),
                None => Ok(codes),
            }
        });
        let business_name = env.line(
            "ZAGUAN_BUSINESS_NAME",
            crate::engine::DEFAULT_BUSINESS_NAME,
            100,
        );
        let business_contact = env.line("ZAGUAN_BUSINESS_CONTACT", "", 300);
        let events = env.events();
        let public_url = env
            .get("ZAGUAN_PUBLIC_URL")
            .is_some()
            .then(|| env.url("ZAGUAN_PUBLIC_URL", ""))
            .flatten();
        let mongodb = env.mongo();

        if !env.problems.is_empty() {
            return Err(ConfigError(env.problems));
        }
        let checked = "every problem was reported above";
        Ok(Config {
            bind_addr: bind_addr.expect(checked),
            whatsapp: WhatsAppConfig {
                verify_token: env.secret("WHATSAPP_VERIFY_TOKEN"),
                app_secret: env.secret("WHATSAPP_APP_SECRET"),
                access_token: env.secret("WHATSAPP_ACCESS_TOKEN"),
                api_base_url: api_base_url.expect(checked),
                api_timeout: api_timeout.expect(checked),
                limits: SendLimits {
                    per_number: nonzero(send_rate.expect(checked)),
                    pair_interval: pair_interval.expect(checked),
                    pair_burst: nonzero(pair_burst.expect(checked)),
                },
                phone_number_id: env.get("WHATSAPP_PHONE_NUMBER_ID").map(str::to_owned),
                reminder_template: env.string("WHATSAPP_REMINDER_TEMPLATE", "visit_reminder"),
                reminder_template_language: env.string("WHATSAPP_REMINDER_TEMPLATE_LANGUAGE", "es"),
                alert_template: env.string("WHATSAPP_ALERT_TEMPLATE", "listing_alert"),
                alert_template_language: env.string("WHATSAPP_ALERT_TEMPLATE_LANGUAGE", "es"),
                reminder_time: reminder_time.expect(checked),
            },
            mongodb,
            llm: LlmConfig {
                primary: primary.expect(checked),
                fallback: fallback.expect(checked),
                openai_api_key: env.secret("OPENAI_API_KEY"),
                openai_base_url: openai_base_url.expect(checked),
                anthropic_api_key: env.secret("ANTHROPIC_API_KEY"),
                anthropic_base_url: anthropic_base_url.expect(checked),
                policy: CallPolicy {
                    timeout: llm_timeout.expect(checked),
                    max_concurrency: max_concurrency.expect(checked) as usize,
                    breaker_failures: breaker_failures.expect(checked),
                    breaker_cooldown: breaker_cooldown.expect(checked),
                },
                max_tokens: max_tokens.expect(checked),
                fast_route: fast_route.expect(checked),
                transcribe: transcribe.expect(checked),
                transcribe_timeout: transcribe_timeout.expect(checked),
            },
            prompts_dir: PathBuf::from(env.string("ZAGUAN_PROMPTS_DIR", "prompts")),
            admin_token: env.secret("ZAGUAN_ADMIN_TOKEN"),
            events,
            public_url,
            dialog_idle_ttl: dialog_idle_ttl.expect(checked),
            stuck_after: stuck_after.expect(checked),
            handoff_ttl: handoff_ttl.expect(checked),
            user_turns_per_minute: user_turns_per_minute.expect(checked),
            daily_token_budget: u64::from(daily_token_budget.expect(checked)),
            lease: lease.expect(checked),
            instance_id: instance_id.expect(checked),
            worker_concurrency: worker_concurrency.expect(checked) as usize,
            drain_timeout: drain_timeout.expect(checked),
            retention,
            timezone: timezone.expect(checked),
            languages: languages.expect(checked),
            business_name: business_name.expect(checked),
            business_contact: Some(business_contact.expect(checked)).filter(|c| !c.is_empty()),
        })
    }
}

/// A count already checked to be at least 1.
fn nonzero(n: u32) -> std::num::NonZeroU32 {
    std::num::NonZeroU32::new(n).unwrap_or(std::num::NonZeroU32::MIN)
}

/// Reads variables and collects every problem instead of stopping at the first.
struct Env {
    vars: HashMap<String, String>,
    problems: Vec<String>,
}

impl Env {
    /// The trimmed value, with an empty value treated as unset (as `.env` files often leave them).
    fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    fn string(&self, name: &str, default: &str) -> String {
        self.get(name).unwrap_or(default).to_owned()
    }

    fn secret(&self, name: &str) -> Option<SecretString> {
        self.get(name).map(|v| SecretString::from(v.to_owned()))
    }

    fn parsed<T>(
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
    fn count(
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
    fn line(&mut self, name: &str, default: &str, max: usize) -> Option<String> {
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
    fn duration(&mut self, name: &str, default: &str) -> Option<Duration> {
        self.parsed(name, default, |v| match humantime::parse_duration(v) {
            Ok(d) if !d.is_zero() => Ok(d),
            Ok(_) => Err(format!("`{v}` must be longer than zero")),
            Err(e) => Err(format!(
                "`{v}` is not a duration like `30s`, `90m` or `24h`: {e}"
            )),
        })
    }

    /// `ZAGUAN_INSTANCE_ID`, else the host name (`HOSTNAME`, `/etc/hostname`), else `zaguan`.
    fn instance_id(&mut self) -> Option<String> {
        let id = match self.get("ZAGUAN_INSTANCE_ID") {
            Some(id) => id.to_owned(),
            None => self
                .get("HOSTNAME")
                .map(str::to_owned)
                .unwrap_or_else(crate::engine::instances::default_instance_id),
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
    fn retention(&mut self, name: &str, default: &str) -> Option<Duration> {
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

    fn url(&mut self, name: &str, default: &str) -> Option<Url> {
        self.parsed(name, default, |v| match Url::parse(v) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(url),
            Ok(_) => Err(format!("`{v}` must be an http:// or https:// URL")),
            Err(e) => Err(format!("`{v}` is not a URL: {e}")),
        })
    }

    /// `ZAGUAN_EVENTS_URL` (URLs separated by commas or spaces), its secret, the types sent
    /// and the request timeout.
    fn events(&mut self) -> Option<crate::events::EventSettings> {
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
        let mut settings = crate::events::EventSettings::new(urls, secret);
        settings.types = types;
        if let Some(timeout) = timeout {
            settings.timeout = timeout;
        }
        Some(settings)
    }

    /// `MONGODB_URI` and `MONGODB_DATABASE`; the URI may hold a password, so problems with it
    /// are described without echoing it.
    fn mongo(&mut self) -> Option<MongoConfig> {
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

#[cfg(test)]
mod tests;
