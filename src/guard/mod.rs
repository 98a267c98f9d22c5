//! guard_translator, the seed's "final step before sending a response to the user": the reply is
//! cleared of internal artefacts ([`leak`]), put in the user's language ([`lang`], translated by
//! the LLM chain with `prompts/guard_translator.md` only when it is not already), turned into
//! WhatsApp markup ([`format`]) and cut into parts WhatsApp accepts ([`split`]). It never yields
//! nothing: an empty result becomes a short apology in the user's language.

pub mod format;
pub mod lang;
pub mod leak;
pub mod split;

use std::sync::Arc;

use crate::agents::{AgentRegistry, COMPLETE_OR_ESCALATE};
use crate::domain::phrases;
use crate::llm::{ChatMessage, Llm, LlmRequest};

pub use lang::LanguageDetector;
pub use leak::{Leak, LeakGuard};

/// The languages served unless `ZAGUAN_LANGUAGES` says otherwise.
pub const DEFAULT_LANGUAGES: &[&str] = &["es", "en", "pt", "fr", "de", "it", "ca"];

/// Markdown as WhatsApp messages: formatted, then split to WhatsApp's length limit.
pub fn whatsapp_parts(markdown: &str) -> Vec<String> {
    split::split(&format::to_whatsapp(markdown), split::MAX_CHARS)
}

/// One detector per set of languages for the whole process: building one loads language
/// models, and tests build many engines.
pub fn detector_for(codes: &[String]) -> Result<Arc<LanguageDetector>, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static DETECTORS: OnceLock<Mutex<HashMap<Vec<String>, Arc<LanguageDetector>>>> =
        OnceLock::new();
    let mut detectors = DETECTORS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(detector) = detectors.get(codes) {
        return Ok(detector.clone());
    }
    let refs: Vec<&str> = codes.iter().map(String::as_str).collect();
    let detector = Arc::new(LanguageDetector::new(&refs)?);
    detectors.insert(codes.to_vec(), detector.clone());
    Ok(detector)
}

/// What the guard made of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded {
    /// The WhatsApp messages to send, in order; never empty, none empty.
    pub parts: Vec<String>,
    /// Whether the LLM translated it.
    pub translated: bool,
    pub leaks: Vec<Leak>,
}

/// The guard of one engine.
pub struct GuardTranslator {
    leaks: LeakGuard,
    languages: Arc<LanguageDetector>,
    llm: Arc<dyn Llm>,
    agents: Arc<AgentRegistry>,
    business_name: String,
}

impl GuardTranslator {
    /// The leak guard learns every agent, delegation and tool name and every system prompt of
    /// `agents`; `tools` are the domain tools' names.
    pub fn new(
        agents: Arc<AgentRegistry>,
        tools: impl IntoIterator<Item = String>,
        llm: Arc<dyn Llm>,
        languages: Arc<LanguageDetector>,
        business_name: String,
    ) -> Self {
        let mut names: Vec<String> = tools.into_iter().collect();
        names.push(COMPLETE_OR_ESCALATE.to_owned());
        for agent in agents.agents() {
            names.push(agent.name.to_string());
            names.push(AgentRegistry::delegation_tool_name(&agent.name));
        }
        let rendered = agents.prompt_renderings(&business_name);
        let leaks = LeakGuard::new(
            names,
            agents
                .prompt_bodies()
                .chain(rendered.iter().map(String::as_str)),
        );
        Self {
            leaks,
            languages,
            llm,
            agents,
            business_name,
        }
    }

    pub fn languages(&self) -> &LanguageDetector {
        &self.languages
    }

    /// `reply` as it may reach a user who writes in `user_lang` (`None`: unknown, no
    /// translation). `conversation` is for usage accounting of the translation call.
    pub async fn guard(&self, reply: &str, user_lang: Option<&str>, conversation: &str) -> Guarded {
        let cleaned = self.leaks.clean(reply);
        let mut leaks = cleaned.leaks;
        let mut text = cleaned.text;
        let mut translated = false;
        if let Some(target) = user_lang
            && !text.is_empty()
            && let Some(found) = self.languages.detect(&text)
            && found != target
        {
            match self.translate(&text, target, conversation).await {
                Some(translation) => {
                    let cleaned = self.leaks.clean(&translation);
                    if !cleaned.text.is_empty() {
                        leaks.extend(cleaned.leaks);
                        text = cleaned.text;
                        translated = true;
                    }
                }
                None => {
                    tracing::warn!(
                        from = found,
                        to = target,
                        "translation failed; sending the reply untranslated"
                    );
                }
            }
        }
        let parts = if text.is_empty() {
            Vec::new()
        } else {
            whatsapp_parts(&text)
        };
        let parts = if parts.is_empty() {
            tracing::warn!("nothing left to send; answering with an apology");
            metrics::counter!("zaguan_guard_apologies_total").increment(1);
            vec![phrases::apology(user_lang).to_owned()]
        } else {
            parts
        };
        Guarded {
            parts,
            translated,
            leaks,
        }
    }

    /// One call to the chain with the translator prompt and no tools.
    async fn translate(&self, text: &str, target: &str, conversation: &str) -> Option<String> {
        let system = self
            .agents
            .translator_prompt()?
            .render(target, &self.business_name)
            .map_err(|error| tracing::error!("translator prompt did not render: {error:#}"))
            .ok()?;
        let request = LlmRequest {
            agent: "guard_translator".into(),
            conversation: Some(conversation.to_owned()),
            system: system.into(),
            messages: vec![ChatMessage::human(text)],
            tools: Arc::from(Vec::new()),
        };
        let outcome = self.llm.complete(&request).await;
        let label = if outcome.is_ok() {
            "translated"
        } else {
            "failed"
        };
        metrics::counter!("zaguan_translations_total", "outcome" => label, "to" => target.to_owned())
            .increment(1);
        match outcome {
            Ok(answer) if !answer.content.trim().is_empty() => Some(answer.content),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!("translation call failed: {error}");
                None
            }
        }
    }
}
