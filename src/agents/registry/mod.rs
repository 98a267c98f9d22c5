//! The agents, loaded once from the prompts folder (one file per agent, see `prompts/README.md`),
//! and everything the engine derives from them: the primary agent of each role, the
//! `To<X>Assistant` delegation tools each agent is offered, `CompleteOrEscalate`, and the
//! rendered system prompts. Adding an agent is adding a file.

mod checks;
mod promises;

use crate::agents::registry::checks::{
    check_examples, prompt_paths, read_business, read_templates, tools_promised,
};

use crate::domain::AgentName;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Environment, context};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::fast_route::{Abstention, Decision, FastRouter};
pub use super::prompt::PromptProblem;
use super::prompt::{self, PromptFile, PromptKind};
use crate::business::Business;
use crate::domain::{Role, Situation};
use crate::llm::ToolSpec;
use crate::templates::Templates;

/// The tool a subgraph agent calls to hand the conversation back to the primary agent.
pub const COMPLETE_OR_ESCALATE: &str = "CompleteOrEscalate";

const ROLES: [Role; 3] = [Role::Prospect, Role::Owner, Role::Agent];

/// An owner is routed to a specialist prospects reach too only while the owners' own
/// specialists stay under this probability. Chosen on the training split's cross-validation
/// (`cargo run --release --example route_tune`).
const OWNERS_OWN_MAX: f32 = 0.01;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// Answers a role when no subgraph is active (`dialog_state == []`).
    Primary,
    /// A domain assistant, entered through its delegation tool, left with `CompleteOrEscalate`.
    Subgraph,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Primary => "primary",
            AgentKind::Subgraph => "subgraph",
        }
    }
}

/// Offline, the least probability of a subgraph its keywords name alone to be routed to.
const OFFLINE_KEYWORD_CONFIDENCE: f32 = 0.3;
/// Offline, the least probability of a subgraph to be routed to on the model's reading alone.
const OFFLINE_CONFIDENCE: f32 = 0.6;

/// One assistant, as its prompt file declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// snake_case, ends in `_assistant`; the name stored in `dialog_state`.
    pub name: AgentName,
    pub kind: AgentKind,
    /// What the LLM reads to decide when to delegate (subgraph agents only).
    pub delegation: Option<String>,
    /// Subgraph: the roles that may reach it. Primary: the roles it is the primary agent of.
    pub roles: Vec<Role>,
    /// Domain tools, by name.
    pub tools: Vec<String>,
    /// Words and phrases that send a message straight to this agent (fast path).
    pub keywords: Vec<String>,
    /// Messages users write that this agent should answer: what the fast path's router learns
    /// from (a primary agent's examples teach it when not to route).
    pub examples: Vec<String>,
    /// What to answer when no LLM is reachable.
    pub offline_reply: Option<String>,
    /// What the contact's situation must hold before the fast path enters it.
    pub fast_path_needs: Option<crate::domain::SituationNeed>,
    /// The file it came from, for messages.
    file: PathBuf,
}

impl Agent {
    pub fn file(&self) -> &Path {
        &self.file
    }
}

/// Who is asking and what is going on with them: what the router reads beside the words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asking {
    pub role: Role,
    /// As the agency's data says at the turn; `None` where nothing tells (no data source).
    pub situation: Option<Situation>,
}

impl From<Role> for Asking {
    fn from(role: Role) -> Self {
        Self {
            role,
            situation: None,
        }
    }
}

/// See [`AgentRegistry::fast_route_report`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FastRouteReport {
    pub examples: usize,
    /// `(agent, example)` the router does not send straight to the agent.
    pub misses: Vec<(String, String)>,
}

impl FastRouteReport {
    pub fn hits(&self) -> usize {
        self.examples - self.misses.len()
    }
}

/// What a system prompt's placeholders are filled with.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptContext {
    /// The WhatsApp profile name; rendered empty when unknown.
    pub user_name: Option<String>,
    pub user_role: Role,
    /// What the store knows about the user, as text.
    pub user_info: String,
    /// ISO 639-1 code of the user's language.
    pub lang: String,
    /// Current date and time in the business time zone, preformatted.
    pub now: String,
    pub business_name: String,
    /// How to reach the agency's people (`ZAGUAN_BUSINESS_CONTACT`); empty when not set.
    pub business_contact: String,
}

/// Every agent of the prompts folder, with its compiled template.
#[derive(Debug)]
pub struct AgentRegistry {
    /// Sorted by name.
    agents: Vec<Agent>,
    /// Index in `agents` of the primary agent of each role, in the order of `ROLES`.
    primaries: [usize; 3],
    /// Delegation tool name → index in `agents`.
    delegations: BTreeMap<String, usize>,
    /// The fast path's router, learned from the examples and keywords.
    router: std::sync::Arc<FastRouter>,
    /// Every prompt file's body as written (templates unrendered), for the leak guard.
    bodies: Vec<String>,
    /// Whether `guard_translator` is among the templates.
    has_translator: bool,
    templates: Environment<'static>,
    /// What was loaded, for operators: a hash of the files and when they were read.
    version: String,
    loaded_at: chrono::DateTime<chrono::Utc>,
    /// What loads but deserves a look (a body naming a tool the agent does not have).
    warnings: Vec<PromptProblem>,
    /// The business file beside the prompts (empty without one).
    business: Arc<Business>,
    /// The templates file beside the prompts (empty without one).
    whatsapp_templates: Arc<Templates>,
}

impl AgentRegistry {
    /// Reads every `*.md` file of `dir` except `README.md` and hidden files. `known_tools` are the
    /// tool names a prompt may list. On failure, every problem found, sorted by file and line.
    pub fn load(dir: &Path, known_tools: &BTreeSet<String>) -> Result<Self, Vec<PromptProblem>> {
        let mut problems = Vec::new();
        let mut templates = Environment::new();
        templates.set_auto_escape_callback(|_| AutoEscape::None);
        // A `{% if %}` on a line of its own leaves no blank line behind.
        templates.set_syntax(
            SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .expect("the default delimiters are valid"),
        );

        let paths = prompt_paths(dir).map_err(|problem| vec![problem])?;
        let mut files = Vec::new();
        let mut version = Sha256::new();
        for path in paths {
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(error) => {
                    problems.push(PromptProblem::new(
                        &path,
                        1,
                        format!("cannot read: {error}"),
                    ));
                    continue;
                }
            };
            for part in [
                path.file_name().unwrap_or_default().as_encoded_bytes(),
                text.as_bytes(),
            ] {
                version.update((part.len() as u64).to_le_bytes());
                version.update(part);
            }
            if let Some(file) = prompt::parse(&path, &text, known_tools, &mut problems) {
                file.compile(&mut templates, &mut problems);
                files.push(file);
            }
        }

        let mut seen: BTreeMap<&str, &PromptFile> = BTreeMap::new();
        for file in &files {
            if let Some(first) = seen.insert(&file.name, file) {
                problems.push(file.problem(
                    file.key_line("name"),
                    format!(
                        "duplicate name `{}` (also in {})",
                        file.name,
                        first.path.display()
                    ),
                ));
            }
        }

        let business = read_business(dir, &mut version, &mut problems);
        let whatsapp_templates = read_templates(dir, &mut version, &mut problems);

        let agent_files: Vec<&PromptFile> = files
            .iter()
            .filter(|file| file.kind != PromptKind::Translator)
            .collect();
        for role in ROLES {
            let serving: Vec<&PromptFile> = agent_files
                .iter()
                .copied()
                .filter(|file| file.kind == PromptKind::Primary && file.roles.contains(&role))
                .collect();
            match serving.as_slice() {
                [] => problems.push(PromptProblem::new(
                    dir,
                    1,
                    format!(
                        "no primary agent serves role `{}`: add it to the `roles` of one primary agent",
                        role.as_str()
                    ),
                )),
                [_] => {}
                [first, rest @ ..] => {
                    for other in rest {
                        problems.push(other.problem(
                            other.key_line("roles"),
                            format!(
                                "role `{}` has two primary agents: `{}` and `{}`",
                                role.as_str(),
                                first.name,
                                other.name
                            ),
                        ));
                    }
                }
            }
        }

        let subgraphs: Vec<(&str, &[String], &[String])> = agent_files
            .iter()
            .filter(|file| file.kind == PromptKind::Subgraph)
            .map(|file| {
                (
                    file.name.as_str(),
                    file.examples.as_slice(),
                    file.keywords.as_slice(),
                )
            })
            .collect();
        let primary_examples: Vec<&String> = agent_files
            .iter()
            .filter(|file| file.kind == PromptKind::Primary)
            .flat_map(|file| &file.examples)
            .collect();
        let router = FastRouter::learned(&subgraphs, &primary_examples);
        check_examples(&agent_files, &router, &mut problems);
        let mut warnings = tools_promised(&agent_files, known_tools);
        warnings.extend(promises::promises_without_tools(&agent_files));
        warnings.extend(checks::always_open(dir, &business));
        warnings.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));

        if !problems.is_empty() {
            problems.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
            return Err(problems);
        }

        let has_translator = files.iter().any(|file| file.kind == PromptKind::Translator);
        let bodies = files.iter().map(|file| file.body.clone()).collect();
        let mut agents: Vec<Agent> = files
            .into_iter()
            .filter_map(|file| {
                let kind = match file.kind {
                    PromptKind::Primary => AgentKind::Primary,
                    PromptKind::Subgraph => AgentKind::Subgraph,
                    PromptKind::Translator => return None,
                };
                Some(Agent {
                    name: file.name,
                    kind,
                    delegation: file.delegation,
                    roles: file.roles,
                    tools: file.tools,
                    keywords: file.keywords,
                    examples: file.examples,
                    offline_reply: file.offline_reply,
                    fast_path_needs: file.fast_path_needs,
                    file: file.path,
                })
            })
            .collect();
        agents.sort_by(|a, b| a.name.cmp(&b.name));
        let primaries = ROLES.map(|role| {
            agents
                .iter()
                .position(|agent| agent.kind == AgentKind::Primary && agent.roles.contains(&role))
                .expect("every role has exactly one primary agent (checked above)")
        });
        let delegations = agents
            .iter()
            .enumerate()
            .filter(|(_, agent)| agent.kind == AgentKind::Subgraph)
            .map(|(index, agent)| (Self::delegation_tool_name(&agent.name), index))
            .collect();
        Ok(Self {
            agents,
            primaries,
            delegations,
            router,
            has_translator,
            bodies,
            templates,
            version: hex::encode(&version.finalize()[..6]),
            loaded_at: chrono::Utc::now(),
            warnings,
            business: Arc::new(business),
            whatsapp_templates: Arc::new(whatsapp_templates),
        })
    }

    /// The first 12 hex digits of a SHA-256 over the files' names and contents: equal sets,
    /// equal versions, whenever and wherever they are loaded.
    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn loaded_at(&self) -> chrono::DateTime<chrono::Utc> {
        self.loaded_at
    }

    /// What loads but deserves a look: a body naming a tool its agent does not have promises
    /// customers something the assistant cannot do.
    pub fn warnings(&self) -> &[PromptProblem] {
        &self.warnings
    }

    /// The business file of the set (`business.toml`), or an empty one.
    pub fn business(&self) -> &Arc<Business> {
        &self.business
    }

    /// The templates file of the set (`templates.toml`), or an empty one.
    pub fn templates(&self) -> &Arc<Templates> {
        &self.whatsapp_templates
    }

    pub fn get(&self, name: &str) -> Option<&Agent> {
        self.agents
            .binary_search_by(|agent| agent.name.as_str().cmp(name))
            .ok()
            .map(|index| &self.agents[index])
    }

    /// The agent a user of `role` talks to when no subgraph is active.
    pub fn primary_for(&self, role: Role) -> &Agent {
        let slot = ROLES
            .iter()
            .position(|r| *r == role)
            .expect("ROLES lists every role");
        &self.agents[self.primaries[slot]]
    }

    /// The bodies of every prompt file, as written: what a reply must never quote.
    pub fn prompt_bodies(&self) -> impl Iterator<Item = &str> {
        self.bodies.iter().map(String::as_str)
    }

    /// Every agent's system prompt rendered as each role would see it, for `business_name`:
    /// the leak guard's view of what a model may quote. The per-turn values (date, name, what
    /// we know) are left empty, so only text every conversation shares is matched.
    pub fn prompt_renderings(&self, business_name: &str) -> Vec<String> {
        let mut rendered = Vec::new();
        for agent in &self.agents {
            for role in ROLES {
                let context = PromptContext {
                    user_name: None,
                    user_role: role,
                    user_info: String::new(),
                    lang: "es".to_owned(),
                    now: String::new(),
                    business_name: business_name.to_owned(),
                    business_contact: String::new(),
                };
                if let Ok(text) = self.render_system_prompt(agent, &context) {
                    rendered.push(text);
                }
            }
        }
        rendered
    }

    /// Every agent, by name.
    pub fn agents(&self) -> impl Iterator<Item = &Agent> {
        self.agents.iter()
    }

    /// `To` + PascalCase of the name without `_assistant` + `Assistant`:
    /// `appointment_assistant` → `ToAppointmentAssistant`.
    pub fn delegation_tool_name(agent_name: &str) -> String {
        let stem = agent_name.strip_suffix("_assistant").unwrap_or(agent_name);
        let mut name = String::from("To");
        for part in stem.split('_') {
            let mut chars = part.chars();
            if let Some(first) = chars.next() {
                name.extend(first.to_uppercase());
                name.push_str(chars.as_str());
            }
        }
        name.push_str("Assistant");
        name
    }

    /// The delegation tools offered to `agent` talking to a user of `role`: one per subgraph agent
    /// `role` may reach, never `agent`'s own.
    pub fn delegation_tools(&self, agent: &Agent, role: Role) -> Vec<ToolSpec> {
        self.agents
            .iter()
            .filter(|target| {
                target.kind == AgentKind::Subgraph
                    && target.name != agent.name
                    && target.roles.contains(&role)
            })
            .map(|target| ToolSpec {
                name: Self::delegation_tool_name(&target.name),
                description: target.delegation.clone().unwrap_or_default(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "query": {
                            "type": "string",
                            "description": "Lo que el usuario necesita, con los datos que ya ha dado \
                                            (propiedad, fechas, importes…), para que el asistente \
                                            especializado no tenga que volver a preguntarlo."
                        }
                    },
                    "required": ["query"]
                }),
            })
            .collect()
    }

    /// The subgraph agent `caller` would delegate `text` to, decided without an LLM: the one
    /// the router is sure of, when it is a subgraph other than `caller` that `role` may reach;
    /// `None` when the router abstains (the LLM decides then).
    pub fn fast_route(
        &self,
        text: &str,
        caller: &Agent,
        asking: impl Into<Asking>,
    ) -> Option<&Agent> {
        self.get(self.fast_route_decision(text, caller, asking).agent()?)
    }

    /// The router's decision for `text` from `caller`, with its reason when it abstains.
    ///
    /// The role counts twice: an agent the role cannot reach is out of the reading (its share of
    /// the probability goes to the others), and an owner
    /// (who writes mostly about the property they sell) goes to a specialist prospects reach
    /// too only when the owners' own specialists are unlikely («¿podéis ponerlo en alquiler?»
    /// is about their flat, not a search).
    ///
    /// The contact's situation counts too, where known: an agent whose prompt says
    /// `fast_path_needs` (the visit follow-up needs a visit made) is not entered for a contact
    /// without it, and the model decides: the words and the data disagree, and a wrong route
    /// costs more than a model call.
    pub fn fast_route_decision(
        &self,
        text: &str,
        caller: &Agent,
        asking: impl Into<Asking>,
    ) -> Decision<'_> {
        let Asking { role, situation } = asking.into();
        let decision = self.role_decision(text, caller, role);
        if let Decision::Route { agent, confidence } = decision
            && !self.needs_met(agent, situation)
        {
            return Decision::Abstain(Abstention::Situation { confidence });
        }
        decision
    }

    /// Whether `agent`'s `fast_path_needs` holds in `situation` (always, when unknown).
    fn needs_met(&self, agent: &str, situation: Option<Situation>) -> bool {
        let need = self.get(agent).and_then(|a| a.fast_path_needs);
        match (need, situation) {
            (Some(need), Some(situation)) => need.met_by(situation),
            _ => true,
        }
    }

    /// The router's decision for `text` from `caller`, by the words and the role.
    fn role_decision(&self, text: &str, caller: &Agent, role: Role) -> Decision<'_> {
        let decision = self.router.decide(
            text,
            |name| self.get(name).is_some_and(|a| a.roles.contains(&role)),
            Some(caller.name.as_str()),
        );
        if let Decision::Route { agent, confidence } = decision
            && role == Role::Owner
            && self
                .get(agent)
                .is_some_and(|a| a.roles.contains(&Role::Prospect))
        {
            let owners_own = self.router.probability(text, |name| {
                self.get(name).is_some_and(|a| {
                    a.roles.contains(&Role::Owner) && !a.roles.contains(&Role::Prospect)
                })
            });
            if owners_own >= OWNERS_OWN_MAX {
                return Decision::Abstain(Abstention::Unsure { confidence });
            }
        }
        decision
    }

    /// Offline, where no model routes what the router is unsure of: the subgraph `text` most
    /// likely asks for, when it is not `caller` and the reading is clear enough — its keywords
    /// name it alone, or it wins by a wide margin. A wrong guess costs a reply from the wrong
    /// assistant; no guess, a menu instead of an answer.
    pub fn offline_route(
        &self,
        text: &str,
        caller: &Agent,
        asking: impl Into<Asking>,
    ) -> Option<&Agent> {
        // Offline, a guess by the words alone: the visit follow-up serves an owner's visit
        // figures too, and a menu is all the alternative.
        let Asking { role, .. } = asking.into();
        let reading = self.router.read_for(text, |name| {
            self.get(name).is_some_and(|a| a.roles.contains(&role))
        })?;
        let agent = reading.agent?;
        if agent == caller.name || reading.two_requests {
            return None;
        }
        let clear = (reading.keywords_agree && reading.confidence >= OFFLINE_KEYWORD_CONFIDENCE)
            || reading.confidence >= OFFLINE_CONFIDENCE;
        clear.then(|| self.get(agent)).flatten()
    }

    /// How the fast path does on the subgraph agents' own example phrases: an example is a hit
    /// when, from the primary agent of every role that may reach its agent, the keywords send it
    /// straight there. Misses are fine (the LLM routes them); the rate says how many turns skip
    /// an LLM round trip.
    pub fn fast_route_report(&self) -> FastRouteReport {
        let mut report = FastRouteReport::default();
        for agent in self.agents.iter().filter(|a| a.kind == AgentKind::Subgraph) {
            for example in &agent.examples {
                report.examples += 1;
                let hit = agent.roles.iter().all(|&role| {
                    self.fast_route(example, self.primary_for(role), role)
                        .is_some_and(|routed| routed.name == agent.name)
                });
                if !hit {
                    report
                        .misses
                        .push((agent.name.to_string(), example.clone()));
                }
            }
        }
        report
    }

    /// The subgraph agent a delegation tool leads to, whatever the role (the engine checks roles).
    pub fn delegation_target(&self, tool_name: &str) -> Option<&Agent> {
        self.delegations
            .get(tool_name)
            .map(|index| &self.agents[*index])
    }

    /// `CompleteOrEscalate { cancel: bool = true, reason: string }`, which the engine adds to
    /// every subgraph agent's tools and to no primary agent's.
    pub fn complete_or_escalate() -> ToolSpec {
        ToolSpec {
            name: COMPLETE_OR_ESCALATE.to_owned(),
            description: "Da por terminada la tarea actual o devuelve el control al asistente \
                          principal, que puede redirigir la conversación según lo que necesite el \
                          usuario. Úsala cuando la tarea está completa, cuando el usuario cambia de \
                          tema o cuando lo que pide queda fuera de tu ámbito."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "cancel": {
                        "type": "boolean",
                        "default": true,
                        "description": "true si se abandona la tarea sin completarla; false si está terminada."
                    },
                    "reason": {
                        "type": "string",
                        "description": "Por qué se devuelve el control: qué se hizo o qué pide ahora el usuario."
                    }
                },
                "required": ["reason"]
            }),
        }
    }

    /// `agent`'s system prompt with the placeholders filled, trimmed.
    pub fn render_system_prompt(
        &self,
        agent: &Agent,
        context: &PromptContext,
    ) -> Result<String, anyhow::Error> {
        let template = self
            .templates
            .get_template(&agent.name)
            .with_context(|| format!("no prompt for agent `{}`", agent.name))?;
        let rendered = template
            .render(context! {
                user_name => context.user_name.as_deref().unwrap_or(""),
                user_role => context.user_role.as_str(),
                user_info => &context.user_info,
                lang => &context.lang,
                now => &context.now,
                business_name => &context.business_name,
                business_contact => &context.business_contact,
            })
            .with_context(|| format!("rendering the prompt of `{}`", agent.name))?;
        Ok(rendered.trim().to_owned())
    }

    /// The `guard_translator` prompt, when the folder has one.
    pub fn translator_prompt(&self) -> Option<TranslatorPrompt<'_>> {
        self.has_translator
            .then_some(TranslatorPrompt { registry: self })
    }
}

/// The translator prompt of a registry (`guard_translator.md`), not an agent.
#[derive(Debug, Clone, Copy)]
pub struct TranslatorPrompt<'a> {
    registry: &'a AgentRegistry,
}

impl TranslatorPrompt<'_> {
    /// The prompt with `lang` (ISO 639-1 target language) and `business_name` filled, trimmed.
    pub fn render(&self, lang: &str, business_name: &str) -> Result<String, anyhow::Error> {
        let rendered = self
            .registry
            .templates
            .get_template(prompt::TRANSLATOR_NAME)
            .context("no translator prompt")?
            .render(context! { lang, business_name })
            .context("rendering the translator prompt")?;
        Ok(rendered.trim().to_owned())
    }
}

#[cfg(test)]
mod tests;
