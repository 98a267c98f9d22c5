//! What the engine is built with, what a turn is asked to do, and what it did.

use crate::domain::DialogState;
use std::time::Duration;

use crate::engine::history;
use crate::engine::tools::TOOL_TIMEOUT;
use crate::store::{OutboxEntry, StoreError};
use crate::templates::{Category, Purpose, TemplateSpec, Templates};

/// Limits and names of the engine.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Node transitions allowed in one turn before it is cut short with an apology.
    pub max_transitions: usize,
    /// A subgraph idle this long is left before the next message is routed.
    pub dialog_idle_ttl: Duration,
    /// Messages of history sent to the LLM.
    pub window: usize,
    pub tool_timeout: Duration,
    pub business_name: String,
    /// How to reach the agency's people (`ZAGUAN_BUSINESS_CONTACT`): in the prompts, and after
    /// every reply that cannot help (offline, cut short).
    pub business_contact: Option<String>,
    /// Where "now" is told to the assistants.
    pub timezone: chrono_tz::Tz,
    /// Enter a subgraph without asking the primary's LLM when the keywords leave no doubt.
    pub fast_route: bool,
    /// ISO 639-1 codes of the languages users are answered in.
    pub languages: Vec<String>,
    /// A pending action not confirmed within this is dropped.
    pub pending_action_ttl: Duration,
    /// LLM tokens a conversation may use per UTC day (see [`crate::engine::abuse`]); 0 is no budget.
    pub daily_token_budget: u64,
    /// The environment's one template per purpose (`WHATSAPP_REMINDER_TEMPLATE`,
    /// `WHATSAPP_ALERT_TEMPLATE`, `WHATSAPP_HANDOFF_TEMPLATE`): what stands for a purpose the
    /// prompts' `templates.toml` does not list.
    pub templates: Templates,
    /// What time it is: the system's, or `zaguan test`'s manual clock.
    pub clock: std::sync::Arc<dyn crate::domain::Clock>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            max_transitions: 25,
            dialog_idle_ttl: Duration::from_secs(24 * 3600),
            window: history::WINDOW,
            tool_timeout: TOOL_TIMEOUT,
            business_name: DEFAULT_BUSINESS_NAME.to_owned(),
            business_contact: None,
            timezone: chrono_tz::Europe::Madrid,
            fast_route: true,
            pending_action_ttl: Duration::from_secs(30 * 60),
            daily_token_budget: 0,
            languages: crate::guard::DEFAULT_LANGUAGES
                .iter()
                .map(|code| (*code).to_owned())
                .collect(),
            templates: default_templates("visit_reminder", "listing_alert", "staff_handoff", "es"),
            clock: std::sync::Arc::new(crate::domain::SystemClock),
        }
    }
}

/// The environment's templates: one per purpose, each approved in `language` (its first two
/// letters are the contacts' language it stands for, and the fallback language).
pub fn default_templates(reminder: &str, alert: &str, handoff: &str, language: &str) -> Templates {
    default_templates_in(&[
        (
            Purpose::VisitReminder,
            reminder,
            language,
            &["property", "when", "address"],
        ),
        (
            Purpose::ListingAlert,
            alert,
            language,
            &["title", "price", "reference"],
        ),
        (
            Purpose::StaffHandoff,
            handoff,
            language,
            &["customer", "reason", "link"],
        ),
    ])
}

/// Templates from `(purpose, name, approved language, parameters)`; the first one's language is
/// the fallback.
pub fn default_templates_in(specs: &[(Purpose, &str, &str, &[&str])]) -> Templates {
    let contact_language = |language: &str| language.chars().take(2).collect::<String>();
    let mut templates = Templates {
        fallback_language: specs.first().map_or_else(
            || "es".to_owned(),
            |(_, _, language, _)| contact_language(language),
        ),
        ..Templates::default()
    };
    for (purpose, name, language, parameters) in specs {
        templates.entries.insert(
            (*purpose, contact_language(language)),
            TemplateSpec::new(
                *name,
                *language,
                Category::Utility,
                parameters.iter().map(|p| (*p).to_owned()).collect(),
            ),
        );
    }
    templates
}

/// `ZAGUAN_BUSINESS_NAME` when unset.
pub const DEFAULT_BUSINESS_NAME: &str = "Zaguan Inmobiliaria";

/// Said when the turn cannot produce an answer (LLM down, runaway graph).

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed: the turn stops here and is resumed later from what was stored.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a turn did.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The reply queued in the outbox, its parts joined by blank lines (`None` when one was
    /// already queued before a crash).
    pub reply: Option<String>,
    /// The WhatsApp text messages of the reply, in order; the photos and lists the tools
    /// showed follow them in the outbox (`to_send`), not here.
    pub parts: Vec<String>,
    pub dialog_state: DialogState,
    /// Node transitions run in this call (a resumed turn counts only its own).
    pub transitions: usize,
    /// The inbox messages this turn answered: all it was given, or, when it resumed a turn
    /// cut short, only that turn's (the others get their own).
    pub answered: Vec<crate::domain::WaMessageId>,
    /// The reply's parts, for the caller to send now and record once sent
    /// ([`TurnOptions::send_now`]); `None` when the reply was queued in the outbox instead.
    pub to_send: Option<Vec<OutboxEntry>>,
}

impl TurnOutcome {
    /// A turn that says nothing and runs no node: no message to answer, or an operator has
    /// the conversation.
    pub(crate) fn silent(
        dialog_state: DialogState,
        answered: Vec<crate::domain::WaMessageId>,
    ) -> Self {
        Self {
            reply: None,
            parts: Vec::new(),
            dialog_state,
            transitions: 0,
            answered,
            to_send: None,
        }
    }
}

/// How the caller wants a turn run.
#[derive(Debug, Clone, Copy)]
pub struct TurnOptions {
    /// The caller sends a new reply itself as soon as the turn returns
    /// ([`TurnOutcome::to_send`]) and records it once sent — one write for the reply instead
    /// of three. `false`: the reply is queued in the outbox for the sender.
    pub send_now: bool,
    /// A reply a cut turn may already have sent (its answer, its record lost with the
    /// process) is recorded `sending`, and waits this long for its status webhook before it
    /// is sent again.
    pub unconfirmed_grace: Duration,
    /// Resuming a cut turn counts an attempt on its messages (a message that crashes the
    /// process is given up on after a few); `false` when the caller knows the cut was the
    /// store's doing (slow or unavailable), which must never get a message marked `failed`.
    pub count_resume: bool,
    /// The caller holds the conversation's lease without a break since it got this token
    /// (a claim of its own): the window the last turn under it left is the history's, and is
    /// used instead of reading it again.
    pub hold: Option<u64>,
}

impl Default for TurnOptions {
    fn default() -> Self {
        Self {
            send_now: false,
            unconfirmed_grace: Duration::from_secs(30),
            count_resume: true,
            hold: None,
        }
    }
}
