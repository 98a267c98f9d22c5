use super::*;
use secrecy::ExposeSecret;

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn an_empty_environment_gives_the_documented_defaults() {
    let config = Config::from_vars(HashMap::new()).unwrap();
    assert_eq!(config.bind_addr, "0.0.0.0:8080".parse().unwrap());
    assert!(config.mongodb.is_none());
    assert!(config.whatsapp.app_secret.is_none());
    assert_eq!(
        config.whatsapp.graph.api_base_url.as_str(),
        "https://graph.facebook.com/v21.0"
    );
    assert_eq!(config.llm.primary.to_string(), "openai:gpt-4.1-mini");
    assert_eq!(
        config.llm.fallback.to_string(),
        "anthropic:claude-sonnet-4-5"
    );
    assert_eq!(config.prompts_dir, PathBuf::from("prompts"));
    assert_eq!(
        config.engine.dialog_idle_ttl,
        Duration::from_secs(24 * 3600)
    );
    assert_eq!(config.engine.timezone, chrono_tz::Europe::Madrid);
    assert_eq!(config.llm.policy, CallPolicy::default());
    assert_eq!(config.llm.max_tokens, 1024);
    assert!(config.engine.fast_route);
    assert_eq!(
        config.workers.user_turns,
        Some(governor::Quota::per_minute(NonZeroU32::new(12).unwrap()))
    );
    assert_eq!(config.workers.concurrency, 256);
    assert_eq!(config.engine.daily_token_budget, 300_000);
    assert_eq!(config.workers.lease, Duration::from_secs(10));
    assert!(!config.workers.owner.is_empty());
    assert!(config.outreach.is_none());
    assert_eq!(config.whatsapp.graph.api_timeout, Duration::from_secs(15));
}

#[test]
fn the_llm_policy_is_configurable() {
    let config = Config::from_vars(vars(&[
        ("ZAGUAN_LLM_TIMEOUT", "12s"),
        ("ZAGUAN_LLM_MAX_CONCURRENCY", "4"),
        ("ZAGUAN_LLM_BREAKER_FAILURES", "5"),
        ("ZAGUAN_LLM_BREAKER_COOLDOWN", "2m"),
        ("ZAGUAN_LLM_MAX_TOKENS", "2048"),
        ("ZAGUAN_FAST_ROUTE", "off"),
    ]))
    .unwrap();
    let policy = &config.llm.policy;
    assert_eq!(policy.timeout, Duration::from_secs(12));
    assert_eq!(policy.max_concurrency, 4);
    assert_eq!(policy.breaker_failures, 5);
    assert_eq!(policy.breaker_cooldown, Duration::from_secs(120));
    assert_eq!(config.llm.max_tokens, 2048);
    assert!(!config.engine.fast_route);
}

#[test]
fn the_business_is_named_and_reachable_as_configured() {
    let config = Config::from_vars(vars(&[])).unwrap();
    assert_eq!(config.engine.business_name, "Zaguan Inmobiliaria");
    assert_eq!(config.engine.business_contact, None);
    let config = Config::from_vars(vars(&[
        ("ZAGUAN_BUSINESS_NAME", " Casas Ribera "),
        ("ZAGUAN_BUSINESS_CONTACT", "Tel. 910 000 000 (L–V 9–19 h)"),
    ]))
    .unwrap();
    assert_eq!(config.engine.business_name, "Casas Ribera");
    assert_eq!(
        config.engine.business_contact.as_deref(),
        Some("Tel. 910 000 000 (L–V 9–19 h)")
    );
    let err = Config::from_vars(vars(&[
        ("ZAGUAN_BUSINESS_NAME", &"x".repeat(101)),
        ("ZAGUAN_BUSINESS_CONTACT", "Tel. 910\nhola@ejemplo.es"),
    ]))
    .unwrap_err();
    assert_eq!(err.0.len(), 2, "{err}");
    assert!(
        err.0[0].starts_with("ZAGUAN_BUSINESS_NAME: longer than 100"),
        "{err}"
    );
    assert!(
        err.0[1].starts_with("ZAGUAN_BUSINESS_CONTACT: must be one line"),
        "{err}"
    );
}

#[test]
fn voice_notes_are_transcribed_only_by_an_openai_compatible_model() {
    let config = Config::from_vars(vars(&[])).unwrap();
    assert_eq!(config.llm.transcribe, None);
    assert_eq!(config.llm.transcribe_timeout, Duration::from_secs(30));
    let config = Config::from_vars(vars(&[
        ("LLM_TRANSCRIBE", "openai:whisper-1"),
        ("ZAGUAN_TRANSCRIBE_TIMEOUT", "45s"),
    ]))
    .unwrap();
    assert_eq!(config.llm.transcribe.as_deref(), Some("whisper-1"));
    assert_eq!(config.llm.transcribe_timeout, Duration::from_secs(45));
    let err = Config::from_vars(vars(&[("LLM_TRANSCRIBE", "anthropic:claude")])).unwrap_err();
    assert!(
        err.0[0].starts_with("LLM_TRANSCRIBE: `anthropic:claude`: only `openai:MODEL`"),
        "{err}"
    );
}

#[test]
fn every_bad_value_is_reported_by_name() {
    let err = Config::from_vars(vars(&[
        ("ZAGUAN_BIND_ADDR", "localhost"),
        ("LLM_PRIMARY", "gpt-4"),
        ("LLM_FALLBACK", "gemini:flash"),
        ("OPENAI_BASE_URL", "ftp://x"),
        ("ZAGUAN_DIALOG_IDLE_TTL", "soon"),
        ("ZAGUAN_TIMEZONE", "Madrid"),
        ("MONGODB_URI", "postgres://user:hunter2@db"),
        ("ZAGUAN_LLM_TIMEOUT", "0s"),
        ("ZAGUAN_LLM_MAX_CONCURRENCY", "0"),
        ("ZAGUAN_LLM_BREAKER_FAILURES", "many"),
        ("ZAGUAN_LLM_BREAKER_COOLDOWN", "-1s"),
        ("ZAGUAN_LLM_MAX_TOKENS", "1"),
        ("ZAGUAN_FAST_ROUTE", "maybe"),
        ("ZAGUAN_ADMIN_TOKEN", "short-token-for-everything"),
    ]))
    .unwrap_err();
    let text = err.to_string();
    for name in [
        "ZAGUAN_BIND_ADDR",
        "LLM_PRIMARY",
        "LLM_FALLBACK",
        "OPENAI_BASE_URL",
        "ZAGUAN_DIALOG_IDLE_TTL",
        "ZAGUAN_TIMEZONE",
        "MONGODB_URI",
        "ZAGUAN_LLM_TIMEOUT",
        "ZAGUAN_LLM_MAX_CONCURRENCY",
        "ZAGUAN_LLM_BREAKER_FAILURES",
        "ZAGUAN_LLM_BREAKER_COOLDOWN",
        "ZAGUAN_LLM_MAX_TOKENS",
        "ZAGUAN_FAST_ROUTE",
        "ZAGUAN_ADMIN_TOKEN",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    assert_eq!(err.0.len(), 14);
    assert!(!text.contains("hunter2"), "a secret was printed:\n{text}");
    assert!(
        !text.contains("short-token-for-everything"),
        "a secret was printed:\n{text}"
    );
}

#[test]
fn secrets_are_never_printed_by_debug() {
    let config = Config::from_vars(vars(&[
        ("WHATSAPP_APP_SECRET", "s3cr3t-app"),
        ("WHATSAPP_VERIFY_TOKEN", "verify-tok"),
        ("WHATSAPP_ACCESS_TOKEN", "EAAG-token"),
        ("OPENAI_API_KEY", "sk-openai-key"),
        ("ANTHROPIC_API_KEY", "sk-ant-key"),
        ("MONGODB_URI", "mongodb://u:pw-in-uri@localhost/"),
        ("ZAGUAN_ADMIN_TOKEN", "admin-tok-of-at-least-32-characters"),
    ]))
    .unwrap();
    let debug = format!("{config:?}");
    for secret in [
        "s3cr3t-app",
        "verify-tok",
        "EAAG-token",
        "sk-openai-key",
        "sk-ant-key",
        "pw-in-uri",
        "admin-tok-of-at-least-32-characters",
    ] {
        assert!(!debug.contains(secret), "{secret} leaked in {debug}");
    }
    assert_eq!(
        config.whatsapp.app_secret.unwrap().expose_secret(),
        "s3cr3t-app"
    );
}

#[test]
fn mongodb_settings_are_read_together() {
    let config = Config::from_vars(vars(&[
        ("MONGODB_URI", "mongodb://127.0.0.1:27017"),
        ("MONGODB_DATABASE", "zaguan_test"),
    ]))
    .unwrap();
    assert_eq!(config.mongodb.unwrap().database, "zaguan_test");
}

#[test]
fn env_example_documents_every_variable_and_is_valid() {
    let example = include_str!("../../.env.example");
    let mut documented = HashMap::new();
    let mut previous = "";
    for line in example.lines() {
        if let Some((name, value)) = line.split_once('=').filter(|_| !line.starts_with('#')) {
            assert!(
                previous.starts_with("# "),
                "{name} has no one-line comment above it"
            );
            documented.insert(name.to_owned(), value.to_owned());
        }
        previous = line;
    }
    let mut names: Vec<&str> = documented.keys().map(String::as_str).collect();
    names.sort_unstable();
    let mut expected = VARIABLES.to_vec();
    expected.sort_unstable();
    assert_eq!(names, expected);
    Config::from_vars(documented).expect(".env.example is a valid configuration");
}

#[test]
fn reminders_and_alerts_are_sent_from_the_business_number() {
    let config = Config::from_vars(vars(&[
        ("WHATSAPP_PHONE_NUMBER_ID", "109876543210"),
        ("ZAGUAN_REMINDER_TIME", "18:30"),
        ("ZAGUAN_TIMEZONE", "Atlantic/Canary"),
        ("WHATSAPP_ALERT_TEMPLATE", "nuevo_piso"),
        ("ZAGUAN_OUTREACH_EVERY", "30s"),
    ]))
    .unwrap();
    let Outreach {
        reminders, alerts, ..
    } = config.outreach.unwrap();
    assert_eq!(reminders.phone_number_id, "109876543210");
    assert_eq!(reminders.every, Duration::from_secs(30));
    assert_eq!(alerts.every, Duration::from_secs(30));
    assert_eq!(
        reminders.at,
        chrono::NaiveTime::from_hms_opt(18, 30, 0).unwrap()
    );
    assert_eq!(reminders.timezone, chrono_tz::Atlantic::Canary);
    assert_eq!(alerts.phone_number_id, "109876543210");
    let templates = &config.engine.templates;
    let named = |purpose| {
        templates
            .for_purpose(purpose, Some("es"))
            .map(|spec| (spec.name.as_str(), spec.language.as_str()))
    };
    assert_eq!(
        named(crate::templates::Purpose::VisitReminder),
        Some(("visit_reminder", "es"))
    );
    assert_eq!(
        named(crate::templates::Purpose::ListingAlert),
        Some(("nuevo_piso", "es"))
    );
}
