//! Configuration: the environment `.env.example` documents turned into a typed [`Config`] once, at
//! start-up. Each module owns its settings type (`LlmSettings`, `EngineSettings`,
//! `WorkerSettings`, `GraphSettings`, …); this one reads the variables and composes them. Every
//! bad value is reported (all of them, not just the first) with the variable's name; secrets are
//! wrapped in [`SecretString`] so they never reach a log or a `Debug` print.

mod env;

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::ops::Not as _;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use crate::crm::EventSettings;
use crate::engine::EngineSettings;
use crate::engine::handoff::HandoffSettings;
use crate::llm::{CallPolicy, LlmProvider, LlmSettings, LlmSpec};
use crate::outbound::{GraphSettings, SendLimits};
use crate::realestate::alerts::AlertSettings;
use crate::realestate::reminders::ReminderSettings;
use crate::runtime::WorkerSettings;
use crate::runtime::retention::Retention;
use crate::store::MongoConfig;
use crate::templates::Purpose;
use env::Env;

/// Every variable the service reads, as documented in `.env.example`.
pub const VARIABLES: &[&str] = &[
    "ZAGUAN_BIND_ADDR",
    "ZAGUAN_METRICS_ADDR",
    "WHATSAPP_VERIFY_TOKEN",
    "WHATSAPP_APP_SECRET",
    "WHATSAPP_ACCESS_TOKEN",
    "WHATSAPP_API_BASE_URL",
    "WHATSAPP_API_TIMEOUT",
    "WHATSAPP_SEND_RATE",
    "WHATSAPP_PAIR_INTERVAL",
    "WHATSAPP_PAIR_BURST",
    "WHATSAPP_PHONE_NUMBER_ID",
    "WHATSAPP_BUSINESS_ACCOUNT_ID",
    "WHATSAPP_REMINDER_TEMPLATE",
    "WHATSAPP_REMINDER_TEMPLATE_LANGUAGE",
    "WHATSAPP_ALERT_TEMPLATE",
    "WHATSAPP_ALERT_TEMPLATE_LANGUAGE",
    "ZAGUAN_REMINDER_TIME",
    "ZAGUAN_REMINDER_MIN_NOTICE",
    "ZAGUAN_OUTREACH_EVERY",
    "ZAGUAN_FOLLOW_UP_EVERY",
    "ZAGUAN_VISIT_OUTCOME_DELAY",
    "ZAGUAN_AGENDA_TIME",
    "ZAGUAN_OFFERS_TO_OWNERS",
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
    "LLM_HTTP2",
    "ZAGUAN_LLM_BREAKER_FAILURES",
    "ZAGUAN_LLM_BREAKER_COOLDOWN",
    "ZAGUAN_LLM_MAX_TOKENS",
    "ZAGUAN_FAST_ROUTE",
    "LLM_TRANSCRIBE",
    "ZAGUAN_TRANSCRIBE_TIMEOUT",
    "ZAGUAN_PROMPTS_DIR",
    "ZAGUAN_ADMIN_TOKEN",
    "ZAGUAN_PUBLIC_URL",
    "ZAGUAN_CLIENT_IP_HEADER",
    "ZAGUAN_TRUSTED_PROXIES",
    "ZAGUAN_LLM_PRICES",
    "ZAGUAN_WHATSAPP_PRICES",
    "ZAGUAN_EVENTS_URL",
    "ZAGUAN_EVENTS_SECRET",
    "ZAGUAN_EVENTS_TYPES",
    "ZAGUAN_EVENTS_TIMEOUT",
    "ZAGUAN_DIALOG_IDLE_TTL",
    "ZAGUAN_STUCK_AFTER",
    "ZAGUAN_HANDOFF_TTL",
    "ZAGUAN_HANDOFF_SLA",
    "ZAGUAN_HANDOFF_DIGEST",
    "WHATSAPP_HANDOFF_TEMPLATE",
    "WHATSAPP_HANDOFF_TEMPLATE_LANGUAGE",
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
    "ZAGUAN_PHONE_REGION",
    "ZAGUAN_LEADS_TOKEN",
    "ZAGUAN_CALENDAR_REFRESH",
    "ZAGUAN_LISTINGS_FEED_URL",
    "ZAGUAN_LISTINGS_FEED_EVERY",
    "ZAGUAN_LISTINGS_FEED_MIN_SHARE",
    "ZAGUAN_BUSINESS_NAME",
    "ZAGUAN_BUSINESS_CONTACT",
    "RUST_LOG",
    "ZAGUAN_LOG_FORMAT",
];

/// The shortest `ZAGUAN_ADMIN_TOKEN` taken: it opens the admin API and the console.
pub const MIN_ADMIN_TOKEN: usize = 32;

/// The service's whole configuration: the modules' settings, composed.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind_addr: SocketAddr,
    /// Where `/metrics` is served instead of the public port (`ZAGUAN_METRICS_ADDR`); `None`:
    /// on the public port, as the contract has it.
    pub metrics_addr: Option<SocketAddr>,
    pub whatsapp: WhatsAppConfig,
    pub mongodb: Option<MongoConfig>,
    pub llm: LlmSettings,
    /// The engine's limits and the business it speaks for (time zone, languages, name,
    /// contact, the fast path, the daily token budget).
    pub engine: EngineSettings,
    /// This process's workers: its instance id (`owner`), lease, concurrency, turns per user.
    pub workers: WorkerSettings,
    /// What is sent unasked; `None` without `WHATSAPP_PHONE_NUMBER_ID`, the business number
    /// it is sent from.
    pub outreach: Option<Outreach>,
    pub prompts_dir: PathBuf,
    /// Bearer token of the admin API; `None` turns the admin API off (404).
    pub admin_token: Option<SecretString>,
    /// The token portals' and CRMs' lead pushes carry (`ZAGUAN_LEADS_TOKEN`); `None` turns
    /// `POST /leads` off (404).
    pub leads_token: Option<SecretString>,
    /// Where operators reach the service (`ZAGUAN_PUBLIC_URL`): https makes the console's
    /// cookie `Secure`.
    pub public_url: Option<Url>,
    /// The header a proxy in front writes the client's address into (`ZAGUAN_CLIENT_IP_HEADER`,
    /// e.g. `X-Forwarded-For`): the console's failed sign-ins are counted per client by it.
    /// `None`: the connection's peer is the client.
    pub client_ip_header: Option<String>,
    /// The proxies whose `client_ip_header` is believed (`ZAGUAN_TRUSTED_PROXIES`, addresses
    /// or CIDR ranges); from anyone else, the connection's peer is the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// What each model costs (`ZAGUAN_LLM_PRICES`, USD per million input/output tokens) and
    /// each WhatsApp message (`ZAGUAN_WHATSAPP_PRICES`, USD per delivered message by category
    /// and country code): the console's reports turn tokens and messages into money with it.
    pub llm_prices: crate::admin::reports::Prices,
    /// Where business events go (`ZAGUAN_EVENTS_URL`); `None`: they are only recorded.
    pub events: Option<EventSettings>,
    /// A conversation in an assistant idle this long counts as stuck (metrics, log).
    pub stuck_after: Duration,
    /// An operator's handoff ends by itself after this (unless released before).
    pub handoff_ttl: Duration,
    /// How the staff on duty are told when a customer asks for a person.
    pub handoffs: HandoffSettings,
    /// On SIGTERM, how long in-flight turns may take to finish before the process exits.
    pub drain_timeout: Duration,
    /// How often agents' own calendars are read (`ZAGUAN_CALENDAR_REFRESH`).
    pub calendar_refresh: Duration,
    /// The agency's listings feed, imported by `serve` (`ZAGUAN_LISTINGS_FEED_URL`).
    pub listings_feed: Option<crate::realestate::feed::schedule::FeedSettings>,
    /// Where a number typed without a country code is (`ZAGUAN_PHONE_REGION`).
    pub phone_region: crate::domain::phone::PhoneRegion,
    /// How long finished records are kept before the cleanup job deletes them.
    pub retention: Retention,
}

/// Meta's side: the webhook's secrets and the Graph API replies leave through.
#[derive(Debug, Clone)]
pub struct WhatsAppConfig {
    /// Token Meta echoes in the `GET /webhook` handshake.
    pub verify_token: Option<SecretString>,
    /// HMAC key of `X-Hub-Signature-256`; `None` refuses every `POST /webhook`.
    pub app_secret: Option<SecretString>,
    pub graph: GraphSettings,
}

/// The messages sent from the business number without a customer's message to answer: visit
/// reminders and saved-search notices. Both or neither, as the number is set or not.
#[derive(Debug, Clone)]
pub struct Outreach {
    pub reminders: ReminderSettings,
    pub alerts: AlertSettings,
    /// Agents' notices, outcome questions, offers and their answers.
    pub follow_ups: crate::realestate::follow_up::FollowUpSettings,
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
        let metrics_addr = env.get("ZAGUAN_METRICS_ADDR").is_some().then(|| {
            env.parsed("ZAGUAN_METRICS_ADDR", "", |v| {
                v.parse::<SocketAddr>()
                    .map_err(|_| format!("`{v}` is not an address like `127.0.0.1:9100`"))
            })
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
        let handoff_sla = env.duration("ZAGUAN_HANDOFF_SLA", "15m");
        let handoff_digest = env.duration("ZAGUAN_HANDOFF_DIGEST", "2m");
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
        let reminder_min_notice = env.duration("ZAGUAN_REMINDER_MIN_NOTICE", "3h");
        // How often the reminder and alert loops look for work.
        let outreach_every = env.duration("ZAGUAN_OUTREACH_EVERY", "1m");
        // An agent hears of a booking within this (the 5 s, with room).
        let follow_up_every = env.duration("ZAGUAN_FOLLOW_UP_EVERY", "2s");
        let outcome_delay = env.duration("ZAGUAN_VISIT_OUTCOME_DELAY", "30m");
        let agenda_time = env.parsed("ZAGUAN_AGENDA_TIME", "08:30", |v| {
            if v.eq_ignore_ascii_case("off") {
                return Ok(None);
            }
            chrono::NaiveTime::parse_from_str(v, "%H:%M")
                .map(Some)
                .map_err(|_| format!("`{v}` is not a time like `08:30`, nor `off`"))
        });
        let offers_to_owners = env.parsed("ZAGUAN_OFFERS_TO_OWNERS", "true", |v| {
            match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "on" | "yes" => Ok(true),
                "0" | "false" | "off" | "no" => Ok(false),
                _ => Err(format!("`{v}` is not `true` or `false`")),
            }
        });
        let llm_timeout = env.duration("ZAGUAN_LLM_TIMEOUT", "30s");
        let llm_http2 = env.parsed("LLM_HTTP2", "auto", crate::llm::Http2::parse);
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
        let feed_every = env.duration("ZAGUAN_LISTINGS_FEED_EVERY", "1h");
        let calendar_refresh = env.duration("ZAGUAN_CALENDAR_REFRESH", "5m");
        let feed_min_share = env.parsed("ZAGUAN_LISTINGS_FEED_MIN_SHARE", "0.5", |v| {
            v.parse::<f64>()
                .ok()
                .filter(|share| (0.0..=1.0).contains(share))
                .ok_or_else(|| format!("`{v}` is not a share from 0 to 1 like `0.5`"))
        });
        let feed_url = env
            .get("ZAGUAN_LISTINGS_FEED_URL")
            .is_some_and(|v| !v.is_empty())
            .then(|| env.url("ZAGUAN_LISTINGS_FEED_URL", ""))
            .flatten();
        let phone_region = env.parsed(
            "ZAGUAN_PHONE_REGION",
            "ES",
            crate::domain::phone::PhoneRegion::parse,
        );
        let events = env.events();
        let public_url = env
            .get("ZAGUAN_PUBLIC_URL")
            .is_some()
            .then(|| env.url("ZAGUAN_PUBLIC_URL", ""))
            .flatten();
        let mongodb = env.mongo();
        let llm_prices = env.parsed(
            "ZAGUAN_LLM_PRICES",
            "",
            crate::admin::reports::Prices::parse,
        );
        let whatsapp_prices = env.parsed(
            "ZAGUAN_WHATSAPP_PRICES",
            "",
            crate::admin::reports::WhatsAppPrices::parse,
        );
        let trusted_proxies = env.parsed("ZAGUAN_TRUSTED_PROXIES", "", |list| {
            list.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| {
                    item.parse::<ipnet::IpNet>()
                        .or_else(|_| item.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                        .map_err(|_| {
                            format!("`{item}` is not an address or a range like `10.0.0.0/8`")
                        })
                })
                .collect::<Result<Vec<_>, _>>()
        });
        let client_ip_header = env
            .get("ZAGUAN_CLIENT_IP_HEADER")
            .is_some()
            .then(|| {
                env.parsed("ZAGUAN_CLIENT_IP_HEADER", "", |name| {
                    axum::http::HeaderName::from_bytes(name.trim().as_bytes())
                        .map(|name| name.as_str().to_owned())
                        .map_err(|_| format!("`{name}` is not an HTTP header name"))
                })
            })
            .flatten();
        let admin_token = env.secret("ZAGUAN_ADMIN_TOKEN");
        let leads_token = env.secret("ZAGUAN_LEADS_TOKEN");
        if leads_token.as_ref().is_some_and(|token| {
            secrecy::ExposeSecret::expose_secret(token).chars().count() < MIN_ADMIN_TOKEN
        }) {
            env.problems.push(format!(
                "ZAGUAN_LEADS_TOKEN: at least {MIN_ADMIN_TOKEN} characters: it lets leads in \
                 (`openssl rand -hex 24` makes one)"
            ));
        }
        if admin_token.as_ref().is_some_and(|token| {
            secrecy::ExposeSecret::expose_secret(token).chars().count() < MIN_ADMIN_TOKEN
        }) {
            env.problems.push(format!(
                "ZAGUAN_ADMIN_TOKEN: at least {MIN_ADMIN_TOKEN} characters: it opens the admin \
                 API and the console (`openssl rand -hex 24` makes one)"
            ));
        }

        if !env.problems.is_empty() {
            return Err(ConfigError(env.problems));
        }
        let checked = "every problem was reported above";
        let timezone = timezone.expect(checked);
        let graph = GraphSettings {
            access_token: env.secret("WHATSAPP_ACCESS_TOKEN"),
            api_base_url: api_base_url.expect(checked),
            api_timeout: api_timeout.expect(checked),
            limits: SendLimits {
                per_number: nonzero(send_rate.expect(checked)),
                pair_interval: pair_interval.expect(checked),
                pair_burst: nonzero(pair_burst.expect(checked)),
            },
            business_account_id: env.get("WHATSAPP_BUSINESS_ACCOUNT_ID").map(str::to_owned),
        };
        // Each purpose's one template, for contacts of its language and as the fallback;
        // prompts/templates.toml, when it lists a purpose, takes its place.
        let templates = crate::engine::default_templates_in(&[
            (
                Purpose::VisitReminder,
                &env.string("WHATSAPP_REMINDER_TEMPLATE", "visit_reminder"),
                &env.string("WHATSAPP_REMINDER_TEMPLATE_LANGUAGE", "es"),
                &["property", "when", "address"],
            ),
            (
                Purpose::ListingAlert,
                &env.string("WHATSAPP_ALERT_TEMPLATE", "listing_alert"),
                &env.string("WHATSAPP_ALERT_TEMPLATE_LANGUAGE", "es"),
                &["title", "price", "reference"],
            ),
            (
                Purpose::StaffHandoff,
                &env.string("WHATSAPP_HANDOFF_TEMPLATE", "staff_handoff"),
                &env.string("WHATSAPP_HANDOFF_TEMPLATE_LANGUAGE", "es"),
                &["customer", "reason", "link"],
            ),
        ]);
        let outreach = env
            .get("WHATSAPP_PHONE_NUMBER_ID")
            .map(|phone_number_id| Outreach {
                reminders: ReminderSettings {
                    at: reminder_time.expect(checked),
                    min_notice: reminder_min_notice.expect(checked),
                    timezone,
                    phone_number_id: phone_number_id.to_owned(),
                    every: outreach_every.expect(checked),
                },
                alerts: AlertSettings {
                    phone_number_id: phone_number_id.to_owned(),
                    every: outreach_every.expect(checked),
                },
                follow_ups: crate::realestate::follow_up::FollowUpSettings {
                    timezone,
                    phone_number_id: phone_number_id.to_owned(),
                    every: follow_up_every.expect(checked),
                    outcome_delay: outcome_delay.expect(checked),
                    agenda_at: agenda_time.expect(checked),
                    offers_to_owners: offers_to_owners.expect(checked),
                    public_url: public_url.clone(),
                },
            });
        Ok(Config {
            bind_addr: bind_addr.expect(checked),
            metrics_addr: metrics_addr.map(|addr| addr.expect(checked)),
            whatsapp: WhatsAppConfig {
                verify_token: env.secret("WHATSAPP_VERIFY_TOKEN"),
                app_secret: env.secret("WHATSAPP_APP_SECRET"),
                graph,
            },
            mongodb,
            llm: LlmSettings {
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
                transcribe: transcribe.expect(checked),
                transcribe_timeout: transcribe_timeout.expect(checked),
                http2: llm_http2.expect(checked),
            },
            engine: EngineSettings {
                dialog_idle_ttl: dialog_idle_ttl.expect(checked),
                timezone,
                fast_route: fast_route.expect(checked),
                languages: languages.expect(checked),
                daily_token_budget: u64::from(daily_token_budget.expect(checked)),
                business_name: business_name.expect(checked),
                business_contact: Some(business_contact.expect(checked)).filter(|c| !c.is_empty()),
                templates,
                ..EngineSettings::default()
            },
            workers: WorkerSettings {
                owner: instance_id.expect(checked),
                lease: lease.expect(checked),
                concurrency: worker_concurrency.expect(checked) as usize,
                user_turns: NonZeroU32::new(user_turns_per_minute.expect(checked))
                    .map(governor::Quota::per_minute),
                ..WorkerSettings::default()
            },
            outreach,
            prompts_dir: PathBuf::from(env.string("ZAGUAN_PROMPTS_DIR", "prompts")),
            admin_token,
            leads_token,
            events,
            public_url: public_url.clone(),
            client_ip_header,
            trusted_proxies: trusted_proxies.expect(checked),
            llm_prices: llm_prices
                .expect(checked)
                .with_whatsapp(whatsapp_prices.expect(checked)),
            stuck_after: stuck_after.expect(checked),
            handoff_ttl: handoff_ttl.expect(checked),
            handoffs: HandoffSettings {
                sla: handoff_sla.expect(checked),
                digest: handoff_digest.expect(checked),
                phone_number_id: env.get("WHATSAPP_PHONE_NUMBER_ID").map(str::to_owned),
                public_url,
                timezone,
            },
            drain_timeout: drain_timeout.expect(checked),
            phone_region: phone_region.expect(checked),
            calendar_refresh: calendar_refresh.expect(checked),
            listings_feed: feed_url.map(|url| crate::realestate::feed::schedule::FeedSettings {
                url,
                every: feed_every.expect(checked),
                min_share: feed_min_share.expect(checked),
            }),
            retention,
        })
    }
}

/// A count already checked to be at least 1.
fn nonzero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

#[cfg(test)]
mod tests;
