//! The prompt set a turn runs with: the agents and their prompts, the guard that knows their
//! names, the agency's name and contact lines, the templates, and what each agent is offered
//! for each role — built once per reload, swapped whole.

use std::collections::HashMap;
use std::sync::Arc;

use crate::agents::{Agent, AgentKind, AgentRegistry};
use crate::domain::{AgentName, Role};
use crate::engine::tools::ToolRegistry;
use crate::engine::turn::EngineSettings;
use crate::guard::{GuardTranslator, LanguageDetector};
use crate::llm::{Llm, ToolSpec};
use crate::templates::Templates;

/// A prompt set and the guard that knows its names and texts, swapped whole on reload: a turn
/// runs to its end with the set it started with.
pub(super) struct PromptSet {
    pub(super) agents: Arc<AgentRegistry>,
    pub(super) guard: GuardTranslator,
    /// The agency's name: the business file's, else `ZAGUAN_BUSINESS_NAME`.
    pub(super) business_name: String,
    /// How customers reach a person: the business file's lines, else
    /// `ZAGUAN_BUSINESS_CONTACT`.
    pub(super) business_contact: Option<String>,
    /// The templates of the prompts' `templates.toml`, and the environment's for the
    /// purposes it does not list.
    pub(super) templates: Arc<Templates>,
    /// What each agent is offered when talking to each role, built once per set: the domain
    /// tools the role may run, the delegations it may reach, CompleteOrEscalate for subgraphs.
    pub(super) tools: HashMap<(AgentName, Role), Arc<[ToolSpec]>>,
}

impl PromptSet {
    pub(super) fn new(
        agents: Arc<AgentRegistry>,
        tools: &ToolRegistry,
        llm: &Arc<dyn Llm>,
        languages: &Arc<LanguageDetector>,
        settings: &EngineSettings,
    ) -> Self {
        let business = agents.business();
        let business_name = business
            .name
            .clone()
            .unwrap_or_else(|| settings.business_name.clone());
        let business_contact = business
            .contact_line()
            .or_else(|| settings.business_contact.clone());
        let mut templates = (**agents.templates()).clone();
        if !templates.from_file {
            templates.fallback_language = settings.templates.fallback_language.clone();
        }
        for ((purpose, lang), spec) in &settings.templates.entries {
            templates = templates.with_default(*purpose, lang, spec.clone());
        }
        let guard = GuardTranslator::new(
            agents.clone(),
            tools.names(),
            llm.clone(),
            languages.clone(),
            business_name.clone(),
        );
        let mut offered = HashMap::new();
        for agent in agents.agents() {
            for &role in crate::engine::ALL_ROLES {
                let mut specs: Vec<ToolSpec> = agent
                    .tools
                    .iter()
                    .filter(|name| tools.allows(name, role))
                    .filter_map(|name| tools.spec(name))
                    .collect();
                specs.extend(agents.delegation_tools(agent, role));
                if agent.kind == AgentKind::Subgraph {
                    specs.push(AgentRegistry::complete_or_escalate());
                }
                offered.insert((agent.name.clone(), role), specs.into());
            }
        }
        Self {
            agents,
            guard,
            business_name,
            business_contact,
            templates: Arc::new(templates),
            tools: offered,
        }
    }

    /// A reply that cannot help, followed by how to reach the agency's people when known.
    pub(super) fn with_contact(&self, text: &str) -> String {
        match &self.business_contact {
            Some(contact) => format!("{text}\n\n{contact}"),
            None => text.to_owned(),
        }
    }

    pub(super) fn tools_for(&self, agent: &Agent, role: Role) -> Arc<[ToolSpec]> {
        self.tools
            .get(&(agent.name.clone(), role))
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
}
