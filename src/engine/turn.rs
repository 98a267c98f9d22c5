//! One turn: from the inbox messages of a conversation to one reply in the outbox.
//!
//! The turn is a small state machine driven by the last persisted message, so a turn cut short
//! by a crash resumes exactly where it stopped:
//!
//! | last message                        | next node                                   |
//! |-------------------------------------|---------------------------------------------|
//! | human, or tool results              | the assistant `route_to_workflow` names     |
//! | AI with unanswered tool calls       | Router: enter / leave / tools (RouterTool)  |
//! | AI without tool calls               | guard_translator → outbox                   |
//!
//! A node's messages are stored together, and before anything else the turn changes (a new
//! `dialog_state`, a pending action, a confirmed tool's run, the reply) — the seed's
//! `update_state_in_db`, in as few writes as the graph allows. Messages not stored yet when a
//! turn is cut are made again when it resumes (nothing of them reached the user). A reply is
//! queued under ids derived from the inbound message it answers, so a resumed turn that queues
//! it again runs into the first copy and never answers twice.

use crate::domain::{Content, MediaKind};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::Utc;

use super::abuse::{BUDGET_HANDOFF_REASON, BUDGET_REPLY};
use super::attachments;
use super::confirm::{self, Answer};
use super::context::{ContextCache, ContextSource};
use super::history;
use super::roles::RoleDirectory;
use super::route::{RouteFallback, route_to_workflow};
use super::state::UserCache;
use super::state::{State, Window, context_with};
use super::tools::{TOOL_TIMEOUT, ToolContext, ToolOutput, ToolRegistry};
use crate::agents::fast_route::{Abstention, Decision};
use crate::agents::{Agent, AgentKind, AgentRegistry, COMPLETE_OR_ESCALATE, PromptContext};
use crate::domain::ToolCall;
use crate::domain::{MessageRole, PendingAction, Role};
use crate::domain::{WaId, WaMessageId};
use crate::guard::{GuardTranslator, LanguageDetector};
use crate::llm::{Llm, LlmRequest, ToolSpec};
use crate::store::{
    Attachment, BusinessEvent, Event, HandoffRequest, InboxEntry, Media, NewMessage, NewOutbox,
    OutboxEntry, RoleAssignment, RoleSource, Store, StoreError, StoredMessage, Template,
    reply_parts,
};
use crate::voice::VoiceNotes;

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
    /// LLM tokens a conversation may use per UTC day (see [`super::abuse`]); 0 is no budget.
    pub daily_token_budget: u64,
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
        }
    }
}

/// Said for a Confirm or Cancel button of an action that is no longer pending, before the
/// pending one is shown again with its own buttons.
const STALE_BUTTON_REASKED: &str =
    "Esa confirmación ya no es válida. Esto es lo que queda pendiente de confirmar:";

/// Said for a Confirm or Cancel button when nothing is pending.
const STALE_BUTTON: &str = "Esa confirmación ya no es válida: no hay nada pendiente de confirmar. ¿En qué te puedo ayudar?";

/// `ZAGUAN_BUSINESS_NAME` when unset.
pub const DEFAULT_BUSINESS_NAME: &str = "Zaguan Inmobiliaria";

/// Said when the turn cannot produce an answer (LLM down, runaway graph).
/// Offline, a subgraph hands back a message the router reads as the primary assistant's with at
/// least this probability (a thanks, a goodbye); below it, the subgraph keeps the conversation.
const OFFLINE_PRIMARY_CONFIDENCE: f32 = 0.5;

const APOLOGY: &str = "Lo siento, ahora mismo no puedo atenderte bien. Por favor, inténtalo de nuevo en unos minutos.";

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
    pub dialog_state: Vec<String>,
    /// Node transitions run in this call (a resumed turn counts only its own).
    pub transitions: usize,
    /// The inbox messages this turn answered: all it was given, or, when it resumed a turn
    /// cut short, only that turn's (the others get their own).
    pub answered: Vec<crate::domain::WaMessageId>,
    /// The reply's parts, for the caller to send now and record once sent
    /// ([`TurnOptions::send_now`]); `None` when the reply was queued in the outbox instead.
    pub to_send: Option<Vec<OutboxEntry>>,
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

/// The conversation engine, shared by all workers.
pub struct Engine {
    store: Arc<dyn Store>,
    llm: Arc<dyn Llm>,
    assistants: RwLock<Arc<Assistants>>,
    languages: Arc<LanguageDetector>,
    tools: Arc<ToolRegistry>,
    settings: EngineSettings,
    users: UserCache,
    windows: Mutex<Windows>,
    /// Who is an owner or an agent, by the business data; `None`: roles only as set.
    roles: Option<Arc<RoleDirectory>>,
    /// What the business data says about each user, for `{{ user_info }}`.
    context: Option<Arc<dyn ContextSource>>,
    contexts: ContextCache,
    /// Voice notes to text (`LLM_TRANSCRIBE`); without it they get the polite media answer.
    voice: Option<Arc<VoiceNotes>>,
}

/// The windows the last turns left, per conversation held (see [`TurnOptions::hold`]),
/// within a budget of messages.
#[derive(Default)]
struct Windows {
    entries: HashMap<WaId, (u64, Window)>,
    messages: usize,
}

/// Messages kept in windows at most (some tens of MB); past it, windows are dropped.
const WINDOWS_BUDGET: usize = 50_000;

impl Windows {
    fn take(&mut self, wa_id: &WaId, hold: u64) -> Option<Window> {
        let (token, window) = self.entries.remove(wa_id)?;
        self.messages -= window.messages.len();
        (token == hold).then_some(window)
    }

    fn put(&mut self, wa_id: WaId, hold: u64, window: Window) {
        if let Some((_, old)) = self.entries.remove(&wa_id) {
            self.messages -= old.messages.len();
        }
        while self.messages + window.messages.len() > WINDOWS_BUDGET {
            let Some(key) = self.entries.keys().next().cloned() else {
                break;
            };
            if let Some((_, old)) = self.entries.remove(&key) {
                self.messages -= old.messages.len();
            }
        }
        self.messages += window.messages.len();
        self.entries.insert(wa_id, (hold, window));
    }
}

/// A prompt set and the guard that knows its names and texts, swapped whole on reload: a turn
/// runs to its end with the set it started with.
struct Assistants {
    agents: Arc<AgentRegistry>,
    guard: GuardTranslator,
    /// What each agent is offered when talking to each role, built once per set: the domain
    /// tools the role may run, the delegations it may reach, CompleteOrEscalate for subgraphs.
    tools: HashMap<(String, Role), Arc<[ToolSpec]>>,
}

impl Assistants {
    fn new(
        agents: Arc<AgentRegistry>,
        tools: &ToolRegistry,
        llm: &Arc<dyn Llm>,
        languages: &Arc<LanguageDetector>,
        settings: &EngineSettings,
    ) -> Self {
        let guard = GuardTranslator::new(
            agents.clone(),
            tools.names(),
            llm.clone(),
            languages.clone(),
            settings.business_name.clone(),
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
            tools: offered,
        }
    }

    fn tools_for(&self, agent: &Agent, role: Role) -> Arc<[ToolSpec]> {
        self.tools
            .get(&(agent.name.clone(), role))
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
}

/// How a reply leaves: made in this call (never sent before) or read back from the history.
#[derive(Debug, Clone, Copy)]
struct Delivery {
    fresh: bool,
    options: TurnOptions,
}

/// What the last stored message asks for next.
enum Next {
    Assistant,
    Router(Vec<ToolCall>),
    Deliver(String),
}

/// What one tool call of an AI message becomes.
enum Plan<'a> {
    Enter { target: &'a Agent, query: String },
    Leave { reason: String },
    Run,
    Refuse(String),
}

impl Engine {
    pub fn new(
        store: Arc<dyn Store>,
        llm: Arc<dyn Llm>,
        agents: Arc<AgentRegistry>,
        tools: Arc<ToolRegistry>,
        settings: EngineSettings,
    ) -> Self {
        let languages = crate::guard::detector_for(&settings.languages).unwrap_or_else(|error| {
            tracing::error!("{error}; using the default languages");
            let defaults = EngineSettings::default().languages;
            crate::guard::detector_for(&defaults).expect("the default languages are supported")
        });
        let assistants = Assistants::new(agents, &tools, &llm, &languages, &settings);
        Self {
            store,
            llm,
            assistants: RwLock::new(Arc::new(assistants)),
            languages,
            tools,
            settings,
            users: UserCache::default(),
            windows: Mutex::default(),
            roles: None,
            context: None,
            contexts: ContextCache::default(),
            voice: None,
        }
    }

    /// Tells the assistants what `source` knows about each user (an owner's listings, a
    /// prospect's appointments and offers).
    pub fn with_context(mut self, source: Arc<dyn ContextSource>) -> Self {
        self.context = Some(source);
        self
    }

    /// Transcribes voice notes, so they run as the user's words.
    pub fn with_voice_notes(mut self, voice: Arc<VoiceNotes>) -> Self {
        self.voice = Some(voice);
        self
    }

    /// Gives users the role the business data says (owner, agent) unless an operator set one.
    pub fn with_roles(mut self, roles: Arc<RoleDirectory>) -> Self {
        self.roles = Some(roles);
        self
    }

    /// The prompt set new turns start with.
    pub fn prompts(&self) -> Arc<AgentRegistry> {
        self.assistants().agents.clone()
    }

    /// Makes `agents` the set of every turn that starts from now on; turns in flight finish
    /// with theirs.
    pub fn reload(&self, agents: Arc<AgentRegistry>) {
        let assistants = Arc::new(Assistants::new(
            agents,
            &self.tools,
            &self.llm,
            &self.languages,
            &self.settings,
        ));
        *self.assistants.write().unwrap_or_else(|e| e.into_inner()) = assistants;
    }

    fn windows(&self) -> std::sync::MutexGuard<'_, Windows> {
        self.windows.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the window kept for `wa_id` (its lease was given back).
    pub fn forget_window(&self, wa_id: &WaId) {
        let mut windows = self.windows();
        if let Some((_, window)) = windows.entries.remove(wa_id) {
            windows.messages -= window.messages.len();
        }
    }

    fn assistants(&self) -> Arc<Assistants> {
        self.assistants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Runs (or resumes) the turn answering `inbox`, the open inbox messages of `wa_id` in
    /// arrival order; several are merged into one human message.
    pub async fn run_turn(
        &self,
        wa_id: &WaId,
        inbox: &[InboxEntry],
    ) -> Result<TurnOutcome, EngineError> {
        self.run_turn_with(wa_id, inbox, || ()).await
    }

    /// [`run_turn`](Self::run_turn), calling `answering` once the bot is going to answer (not
    /// for a conversation an operator holds) and keeping what it returns — the worker's
    /// "typing…" indicator — until the turn ends.
    pub async fn run_turn_with<T>(
        &self,
        wa_id: &WaId,
        inbox: &[InboxEntry],
        answering: impl FnOnce() -> T,
    ) -> Result<TurnOutcome, EngineError> {
        self.serve_turn(wa_id, inbox, TurnOptions::default(), answering)
            .await
    }

    /// [`run_turn_with`](Self::run_turn_with) as `options` ask.
    #[tracing::instrument(name = "run_turn", skip_all, fields(conversation.id = %wa_id.masked(), turn.messages = inbox.len()))]
    pub async fn serve_turn<T>(
        &self,
        wa_id: &WaId,
        inbox: &[InboxEntry],
        options: TurnOptions,
        answering: impl FnOnce() -> T,
    ) -> Result<TurnOutcome, EngineError> {
        let started = std::time::Instant::now();
        let set = self.assistants();
        let user = self.users.user(self.store.as_ref(), wa_id).await?;
        // Taken out: put back only by a turn that ends well.
        let window = options
            .hold
            .and_then(|hold| self.windows().take(wa_id, hold));
        let mut state = context_with(self.store.as_ref(), wa_id, user, window.as_ref()).await?;
        self.role_from_data(&mut state).await?;
        if let Some(source) = &self.context {
            state.context = self
                .contexts
                .get(source.as_ref(), wa_id, state.user.role, Utc::now())
                .await;
        }
        // A turn cut short (crash, lost lease, store error) is finished first with the
        // messages it started with — those already in the history — so they get their own
        // reply; what arrived since is the next turn. Merging them would answer only the
        // newest message.
        let known: HashSet<&WaMessageId> = state
            .messages
            .iter()
            .filter(|m| m.message.role == MessageRole::Human)
            .flat_map(|m| m.message.wamids.iter())
            .collect();
        let resumed: Vec<InboxEntry> = inbox
            .iter()
            .filter(|e| known.contains(&e.wamid))
            .cloned()
            .collect();
        let inbox: Vec<InboxEntry> = if resumed.is_empty() {
            inbox.to_vec()
        } else {
            // Counted: a message whose turns keep being cut (one that crashes the process)
            // is given up on after `max_attempts`.
            if options.count_resume {
                let ids: Vec<WaMessageId> = resumed.iter().map(|e| e.wamid.clone()).collect();
                self.store.count_attempt(&ids).await?;
            }
            tracing::info!(messages = resumed.len(), "resuming a turn cut short");
            metrics::counter!("zaguan_turns_resumed_total").increment(1);
            resumed
        };
        let inbox = inbox.as_slice();
        let answered: Vec<WaMessageId> = inbox.iter().map(|e| e.wamid.clone()).collect();
        if inbox.is_empty() {
            return Ok(TurnOutcome {
                reply: None,
                parts: Vec::new(),
                dialog_state: state.dialog_state,
                transitions: 0,
                answered,
                to_send: None,
            });
        }
        // What was stored before this call: a reply delivered from it may have gone out.
        let loaded_seq = state.messages.last().map_or(0, |m| m.seq);
        let new = self.add_human_message(&set, &mut state, inbox).await?;
        let new: Vec<&InboxEntry> = new.iter().collect();
        let turn_started = Utc::now();
        if let Some(handoff) = state.handoff.take() {
            if handoff.is_active(turn_started) {
                // An operator answers: the messages are in the history for them (and for the
                // assistants once the conversation is back), the bot says nothing.
                tracing::info!(operator = %handoff.operator, "message held for the operator");
                metrics::counter!("zaguan_turns_total", "outcome" => "handoff").increment(1);
                self.save(&mut state).await?;
                return Ok(TurnOutcome {
                    reply: None,
                    parts: Vec::new(),
                    dialog_state: state.dialog_state,
                    transitions: 0,
                    answered,
                    to_send: None,
                });
            }
            tracing::info!(operator = %handoff.operator, "handoff expired: the bot answers again");
            metrics::counter!("zaguan_handoffs_ended_total", "how" => "expired").increment(1);
            self.store.set_handoff(&state.wa_id, None).await?;
        }
        let _answering = answering();
        if !new.is_empty() {
            self.before_assistant(&mut state, &new).await?;
            if matches!(next_step(&state), Next::Assistant) && self.over_budget(&state).await? {
                self.answer_over_budget(&mut state).await?;
            }
        }
        let reply_to = inbox.last();
        let mut transitions = 0;
        // Once every provider failed in this turn, the remaining nodes answer offline at once
        // instead of waiting for the same timeouts again.
        let mut llm_down = false;
        let outcome = loop {
            match next_step(&state) {
                Next::Deliver(text) => {
                    // A confirmation asked in this turn goes out with its buttons.
                    let asked = state
                        .pending_action
                        .as_ref()
                        .filter(|action| action.created_at >= turn_started);
                    let asked = asked.cloned();
                    let fresh = state.unsaved > 0
                        || state.messages.last().map_or(0, |m| m.seq) > loaded_seq;
                    let (parts, to_send) = self
                        .deliver(
                            &set,
                            &mut state,
                            &text,
                            asked.as_ref(),
                            reply_to,
                            Delivery { fresh, options },
                        )
                        .await?;
                    if state.first_contact {
                        // A lead: the contact's first message, and where it led.
                        let assistant = state.dialog_state.last().cloned().unwrap_or_else(|| {
                            set.agents.primary_for(state.user.role).name.clone()
                        });
                        let lead = BusinessEvent::LeadCreated {
                            name: state.user.name.clone(),
                            assistant,
                        };
                        self.record_events(wa_id, [lead], Utc::now()).await?;
                    }
                    break TurnOutcome {
                        reply: (!parts.is_empty()).then(|| parts.join("\n\n")),
                        parts,
                        dialog_state: state.dialog_state.clone(),
                        transitions,
                        answered: answered.clone(),
                        to_send,
                    };
                }
                _ if transitions >= self.settings.max_transitions => {
                    tracing::error!(transitions, "turn cut short: too many node transitions");
                    metrics::counter!("zaguan_turn_guard_total", "guard" => "transitions")
                        .increment(1);
                    self.set_dialog_state(&mut state, Vec::new()).await?;
                    let text = self.with_contact(APOLOGY);
                    self.append(&mut state, ai_message(wa_id, &text, "guard", Vec::new()))
                        .await?;
                }
                Next::Assistant => {
                    transitions += 1;
                    self.assistant_node(&set, &mut state, &mut llm_down).await?;
                }
                Next::Router(calls) => {
                    transitions += 1;
                    self.router(&set, &mut state, calls).await?;
                }
            }
        };
        if let Some(hold) = options.hold {
            let keep = state
                .messages
                .len()
                .saturating_sub(super::state::LOADED_MESSAGES);
            let window = Window {
                history_at: state.history_at,
                messages: state.messages.split_off(keep),
            };
            self.windows().put(wa_id.clone(), hold, window);
        }
        let elapsed = started.elapsed();
        // The agent that wrote the reply (the last of `dialog_state` is the one routed to).
        let agent = state
            .messages
            .iter()
            .rev()
            .find(|m| m.message.role == MessageRole::Ai)
            .and_then(|m| m.message.agent.as_deref())
            .unwrap_or("none");
        tracing::info!(
            agent = %agent,
            transitions = outcome.transitions,
            parts = outcome.parts.len(),
            ms = elapsed.as_millis() as u64,
            "turn answered"
        );
        metrics::counter!("zaguan_turns_total", "outcome" => "answered").increment(1);
        metrics::histogram!("zaguan_turn_transitions").record(outcome.transitions as f64);
        metrics::histogram!("zaguan_turn_duration_seconds").record(elapsed.as_secs_f64());
        Ok(outcome)
    }

    /// Appends the inbox messages not yet in the history as one human message, voice notes
    /// transcribed. Before that, a subgraph idle past the TTL is left, so the new message starts
    /// from the primary agent. Returns the new entries, a voice note's text its transcript.
    async fn add_human_message(
        &self,
        set: &Assistants,
        state: &mut State,
        inbox: &[InboxEntry],
    ) -> Result<Vec<InboxEntry>, EngineError> {
        let known: HashSet<&WaMessageId> = state
            .messages
            .iter()
            .filter(|m| m.message.role == MessageRole::Human)
            .flat_map(|m| m.message.wamids.iter())
            .collect();
        let mut new: Vec<InboxEntry> = inbox
            .iter()
            .filter(|e| !known.contains(&e.wamid))
            .cloned()
            .collect();
        if new.is_empty() {
            return Ok(new);
        }
        let mut voice_notes = HashSet::new();
        for entry in &mut new {
            if let Some(transcript) = self.transcribe(entry, state.lang.as_deref()).await {
                entry.text = Some(transcript);
                voice_notes.insert(entry.wamid.clone());
            }
        }
        if let Some(location) = new.iter().rev().find_map(shared_location) {
            self.store
                .set_conversation_location(&state.wa_id, location)
                .await?;
            state.location = Some(location);
        }
        let now = Utc::now();
        if !state.dialog_state.is_empty() {
            let last_activity = state
                .messages
                .last()
                .map(|m| m.message.at)
                .or(state.state_entered_at);
            let idle = last_activity.map(|at| (now - at).to_std().unwrap_or_default());
            if idle.is_some_and(|idle| idle >= self.settings.dialog_idle_ttl) {
                let agent = state.dialog_state.last().map_or("", String::as_str);
                tracing::info!(agent = %agent, "idle subgraph left before routing");
                metrics::counter!("zaguan_turn_guard_total", "guard" => "idle_ttl").increment(1);
                self.set_dialog_state(state, Vec::new()).await?;
            }
        }
        let content = new
            .iter()
            .map(|e| match &e.text {
                Some(text) if voice_notes.contains(&e.wamid) => format!("(voice note) {text}"),
                Some(text) => text.clone(),
                None => format!("(sent a {} without text)", e.kind),
            })
            .collect::<Vec<_>>()
            .join("\n");
        // The conversation's language follows the user's confident switches, in what they
        // wrote (not in the placeholders of media without text).
        let written: Vec<&str> = new.iter().filter_map(|e| e.text.as_deref()).collect();
        // Every message leaves the conversation with a language: the business's (the first of
        // `ZAGUAN_LANGUAGES`) until the user writes something that tells.
        let default = self.settings.languages.first().map_or("es", String::as_str);
        let lang = match (written.is_empty(), &state.lang) {
            (true, Some(lang)) => lang.clone(),
            (true, None) => default.to_owned(),
            (false, previous) => {
                set.guard
                    .languages()
                    .follow_or(&written.join("\n"), previous.as_deref(), default)
            }
        };
        if state.lang.as_ref() != Some(&lang) {
            tracing::info!(lang = %lang, "conversation language set");
            self.store
                .set_conversation_lang(&state.wa_id, &lang)
                .await?;
            state.lang = Some(lang);
        }
        state.first_contact = state.messages.is_empty();
        state.asked_for = new
            .iter()
            .rev()
            .find_map(|entry| attachments::asked_agent(&entry.content));
        let message = NewMessage {
            wa_id: state.wa_id.clone(),
            role: MessageRole::Human,
            content,
            agent: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            wamids: new.iter().map(|e| e.wamid.clone()).collect(),
            attachments: Vec::new(),
            at: now,
        };
        self.append(state, message).await?;
        Ok(new)
    }

    /// Whether the conversation has used its daily token budget. A turn that starts under
    /// it runs to the end, so the budget is overshot by at most one turn.
    async fn over_budget(&self, state: &State) -> Result<bool, EngineError> {
        let budget = self.settings.daily_token_budget;
        if budget == 0 {
            return Ok(false);
        }
        let midnight = Utc::now()
            .date_naive()
            .and_time(chrono::NaiveTime::MIN)
            .and_utc();
        let used = self
            .store
            .llm_tokens_since(state.wa_id.as_str(), midnight)
            .await?;
        Ok(used >= budget)
    }

    /// Answers without a model and flags the conversation for a person (once).
    async fn answer_over_budget(&self, state: &mut State) -> Result<(), EngineError> {
        tracing::warn!("daily token budget used up: fixed reply, flagged for a person");
        metrics::counter!("zaguan_turn_guard_total", "guard" => "token_budget").increment(1);
        if state.handoff_requested.is_none() {
            let request = HandoffRequest {
                at: Utc::now(),
                reason: BUDGET_HANDOFF_REASON.to_owned(),
            };
            self.store.request_handoff(&state.wa_id, &request).await?;
            let event = BusinessEvent::HandoffRequested {
                reason: request.reason.clone(),
            };
            self.record_events(&state.wa_id, [event], request.at)
                .await?;
            state.handoff_requested = Some(request);
        }
        let message = ai_message(&state.wa_id, BUDGET_REPLY, "guard", Vec::new());
        self.append(state, message).await
    }

    /// The transcript of a voice note (an `audio` message without text), when voice notes are
    /// set up and every step works; `None` otherwise, and the polite answer to media follows.
    async fn transcribe(&self, entry: &InboxEntry, lang: Option<&str>) -> Option<String> {
        let voice = self.voice.as_ref()?;
        let Content::Media {
            kind: MediaKind::Audio | MediaKind::Voice,
            id,
            ..
        } = &entry.content
        else {
            return None;
        };
        if entry.text.is_some() {
            return None;
        }
        let Some(media_id) = id.as_deref() else {
            tracing::warn!("voice note without a media id");
            metrics::counter!("zaguan_voice_notes_total", "outcome" => "no_media_id").increment(1);
            return None;
        };
        let started = std::time::Instant::now();
        match voice.transcript(media_id, lang).await {
            Ok(text) => {
                tracing::info!(
                    chars = text.chars().count(),
                    ms = started.elapsed().as_millis() as u64,
                    "voice note transcribed"
                );
                metrics::counter!("zaguan_voice_notes_total", "outcome" => "transcribed")
                    .increment(1);
                Some(text)
            }
            Err(error) => {
                tracing::warn!("voice note not transcribed: {error}");
                metrics::counter!("zaguan_voice_notes_total", "outcome" => error.label())
                    .increment(1);
                None
            }
        }
    }

    /// The role the business data gives the user, when theirs follows the data and differs:
    /// recorded (`users.role`, source `data`) and used from this turn on.
    async fn role_from_data(&self, state: &mut State) -> Result<(), EngineError> {
        let Some(roles) = &self.roles else {
            return Ok(());
        };
        if !state.user.role_follows_data() {
            return Ok(());
        }
        let Some(role) = roles.role_of(&state.wa_id).await else {
            return Ok(());
        };
        if role == state.user.role {
            return Ok(());
        }
        tracing::info!(
            from = state.user.role.as_str(),
            to = role.as_str(),
            "role from the business data"
        );
        metrics::counter!("zaguan_roles_from_data_total", "role" => role.as_str()).increment(1);
        self.store
            .assign_role(
                &state.wa_id,
                &RoleAssignment {
                    role,
                    source: RoleSource::Data,
                    by: "data".to_owned(),
                    at: Utc::now(),
                },
            )
            .await?;
        state.user.role = role;
        state.user.role_source = Some(RoleSource::Data);
        Ok(())
    }

    /// What the engine answers without an assistant: the user's yes or no to a pending action,
    /// and media it cannot read. Runs once per new human message.
    async fn before_assistant(
        &self,
        state: &mut State,
        new: &[&InboxEntry],
    ) -> Result<(), EngineError> {
        if let Some(action) = state.pending_action.clone() {
            let expired = Utc::now() - action.created_at
                > chrono::Duration::from_std(self.settings.pending_action_ttl)
                    .unwrap_or(chrono::Duration::MAX);
            if expired {
                tracing::info!(tool = %action.tool, "pending action dropped: expired");
                metrics::counter!("zaguan_pending_actions_total", "outcome" => "expired")
                    .increment(1);
                self.store.set_pending_action(&state.wa_id, None).await?;
                state.pending_action = None;
            }
        }
        match confirm::answer(new, state.pending_action.as_ref()) {
            None => {}
            Some(Answer::Stale) => return self.answer_stale_button(state).await,
            Some(answer) => {
                if let Some(action) = state.pending_action.clone() {
                    return self.settle_pending(state, action, answer).await;
                }
            }
        }
        if new.iter().all(|e| is_unreadable_media(e)) {
            metrics::counter!("zaguan_media_answers_total").increment(1);
            let text = media_answer(state.lang.as_deref());
            self.append(state, ai_message(&state.wa_id, text, "guard", Vec::new()))
                .await?;
        }
        Ok(())
    }

    /// A Confirm or Cancel button of an action that is not the pending one: nothing is run.
    /// The user is told so and, when another action is pending, shown it again with its own
    /// buttons; otherwise asked what they need.
    async fn answer_stale_button(&self, state: &mut State) -> Result<(), EngineError> {
        metrics::counter!("zaguan_pending_actions_total", "outcome" => "stale_button").increment(1);
        let text = match state.pending_action.clone() {
            Some(mut action) => {
                tracing::info!(tool = %action.tool, "stale confirmation button: the pending action asked again");
                if action.id.is_empty() {
                    action.id = confirm::new_action_id();
                }
                // Asked in this turn: the reply carries its summary and buttons again.
                action.created_at = Utc::now();
                self.store
                    .set_pending_action(&state.wa_id, Some(&action))
                    .await?;
                state.pending_action = Some(action);
                STALE_BUTTON_REASKED
            }
            None => {
                tracing::info!("stale confirmation button: nothing pending");
                STALE_BUTTON
            }
        };
        self.append(state, ai_message(&state.wa_id, text, "guard", Vec::new()))
            .await
    }

    /// Settles the pending action with the user's answer, written as the assistant's tool call
    /// and its result so the assistant answers from it as from any tool: run on a yes, dropped
    /// on a no, and on anything else dropped with what was pending, for the assistant to ask
    /// again with the user's changes. The call is stored before the action is cleared and run:
    /// a crash in between asks the user again.
    async fn settle_pending(
        &self,
        state: &mut State,
        action: PendingAction,
        answer: Answer,
    ) -> Result<(), EngineError> {
        let call = ToolCall {
            id: crate::llm::new_call_id(),
            name: action.tool.clone(),
            args: action.args.clone(),
        };
        self.append(
            state,
            ai_message(&state.wa_id, "", &action.agent, vec![call.clone()]),
        )
        .await?;
        self.save(state).await?;
        self.store.set_pending_action(&state.wa_id, None).await?;
        state.pending_action = None;
        let outcome = match answer {
            Answer::Confirm => "confirmed",
            Answer::Decline => "declined",
            Answer::Unclear | Answer::Stale => "unclear",
        };
        tracing::info!(tool = %action.tool, outcome, "pending action settled");
        metrics::counter!("zaguan_pending_actions_total", "outcome" => outcome).increment(1);
        let output: ToolOutput = match answer {
            Answer::Confirm if self.tools.allows(&call.name, state.user.role) => {
                let context = self.tool_context(state);
                let result = self
                    .tools
                    .run(&call, &context, self.settings.tool_timeout)
                    .await;
                // The user's appointments or offers may have changed.
                self.contexts.forget(&state.wa_id);
                result
            }
            Answer::Confirm => format!(
                "Error: the tool {} is not available for this user.",
                call.name
            )
            .into(),
            Answer::Decline => format!(
                "The user declined; nothing was done ({}). Acknowledge briefly and ask what \
                 else they need.",
                action.summary
            )
            .into(),
            Answer::Unclear | Answer::Stale => format!(
                "Not executed: the user was asked to confirm ({}) and answered with something \
                 other than a plain yes or no (their message is above). Nothing was done. If \
                 they want it with changes, call {} again with the changed details (they will \
                 be asked to confirm again); if they do not want it, acknowledge; otherwise \
                 answer what they said.",
                action.summary, call.name
            )
            .into(),
        };
        let ToolOutput {
            text: content,
            attachments,
            events,
        } = output;
        self.record_events(&state.wa_id, events, Utc::now()).await?;
        let message = NewMessage {
            wa_id: state.wa_id.clone(),
            role: MessageRole::Tool,
            content,
            agent: Some(action.agent.clone()),
            tool_calls: Vec::new(),
            tool_call_id: Some(call.id),
            wamids: Vec::new(),
            attachments,
            at: Utc::now(),
        };
        self.append(state, message).await
    }

    /// Business events of `wa_id`'s conversation for the agency's CRM, written in the step
    /// that made the change.
    async fn record_events(
        &self,
        wa_id: &WaId,
        events: impl IntoIterator<Item = BusinessEvent>,
        at: chrono::DateTime<Utc>,
    ) -> Result<(), EngineError> {
        let events: Vec<Event> = events
            .into_iter()
            .map(|event| Event::new(wa_id, event, at))
            .collect();
        if events.is_empty() {
            return Ok(());
        }
        self.store.insert_events(&events).await?;
        for event in events {
            metrics::counter!("zaguan_events_total", "type" => event.event.kind(), "outcome" => "recorded")
                .increment(1);
        }
        Ok(())
    }

    fn tool_context(&self, state: &State) -> ToolContext {
        ToolContext {
            wa_id: state.wa_id.clone(),
            role: state.user.role,
            location: state.location,
            now: Utc::now(),
            timezone: self.settings.timezone,
        }
    }

    /// An assistant node: one LLM call with the agent's prompt, tools and the cleaned window —
    /// unless the fast path decides the route by keywords, or the LLM is down and the agent's
    /// offline reply (after keyword routing, where it finds the subgraph) answers instead.
    async fn assistant_node(
        &self,
        set: &Assistants,
        state: &mut State,
        llm_down: &mut bool,
    ) -> Result<(), EngineError> {
        let role = state.user.role;
        let (route, fallback) = route_to_workflow(&state.dialog_state, role, &set.agents);
        if let Some(fallback) = fallback {
            tracing::warn!(
                ?fallback,
                "dialog_state not followed; using {}",
                route.agent.name
            );
            metrics::counter!("zaguan_route_fallbacks_total").increment(1);
            if !matches!(fallback, RouteFallback::SeveralAgents(_)) {
                self.set_dialog_state(state, Vec::new()).await?;
            }
        }
        let agent = route.agent;
        metrics::counter!("zaguan_route_total", "agent" => agent.name.clone()).increment(1);

        if let Some(message) = self.tapped_route(set, state, agent) {
            return self.append(state, message).await;
        }
        if self.settings.fast_route
            && let Some((target, message)) = self.fast_delegation(set, state, agent)
        {
            metrics::counter!("zaguan_fast_route_total", "agent" => target.name.clone())
                .increment(1);
            tracing::info!(to = %target.name, "fast path: entered by the router");
            return self.append(state, message).await;
        }
        if self.settings.fast_route
            && route.in_subgraph
            && let Some((target, message)) = self.fast_leave(set, state, agent)
        {
            // The primary assistant's fast path enters `target` in the next node.
            metrics::counter!("zaguan_fast_leaves_total", "agent" => agent.name.clone())
                .increment(1);
            tracing::info!(from = %agent.name, to = %target.name, "fast path: left for another assistant");
            return self.append(state, message).await;
        }

        let message = if *llm_down {
            None
        } else {
            let request = self.request_for(set, agent, state);
            match self.llm.complete(&request).await {
                Ok(response) => Some(ai_message(
                    &state.wa_id,
                    &response.content,
                    &agent.name,
                    response.tool_calls,
                )),
                Err(crate::llm::LlmError::Unavailable(why))
                    if why == crate::llm::offline::OFFLINE_MODE =>
                {
                    // No provider configured: offline mode is the setting, not a failure.
                    tracing::debug!(agent = %agent.name, "offline mode: answering without a model");
                    *llm_down = true;
                    None
                }
                Err(error) => {
                    tracing::error!(agent = %agent.name, "LLM failed, answering offline: {error}");
                    *llm_down = true;
                    None
                }
            }
        };
        if message.is_none() && agent.kind == AgentKind::Subgraph {
            // Offline, no model can call CompleteOrEscalate: the router decides whether the
            // new message is still this assistant's. It is not when the router reads it as
            // another assistant's or as the primary's (thanks, goodbye, small talk); then the
            // conversation goes back to the primary assistant, which routes it in the next node.
            let leaves = state
                .messages
                .last()
                .filter(|m| m.message.role == MessageRole::Human)
                .is_some_and(|last| {
                    match set
                        .agents
                        .fast_route_decision(&last.message.content, agent, role)
                    {
                        Decision::Route { .. } => true,
                        Decision::Abstain(Abstention::Primary { confidence }) => {
                            confidence >= OFFLINE_PRIMARY_CONFIDENCE
                        }
                        Decision::Abstain(_) => false,
                    }
                });
            if leaves {
                tracing::info!(from = %agent.name, "offline: left by the router");
                metrics::counter!("zaguan_offline_leaves_total", "agent" => agent.name.clone())
                    .increment(1);
                return self.set_dialog_state(state, Vec::new()).await;
            }
        }
        let message = match message {
            Some(message) => message,
            None => match self.fast_delegation(set, state, agent) {
                // Offline, keywords still find the right subgraph, whose offline reply is more
                // useful than the primary's general one.
                Some((target, delegation)) => {
                    metrics::counter!("zaguan_offline_routes_total", "agent" => target.name.clone())
                        .increment(1);
                    delegation
                }
                None => {
                    metrics::counter!("zaguan_offline_replies_total", "agent" => agent.name.clone())
                        .increment(1);
                    let text = self.with_contact(agent.offline_reply.as_deref().unwrap_or(APOLOGY));
                    ai_message(&state.wa_id, &text, &agent.name, Vec::new())
                }
            },
        };
        self.append(state, message).await
    }

    /// A reply that cannot help, followed by how to reach the agency's people when configured.
    fn with_contact(&self, text: &str) -> String {
        match &self.settings.business_contact {
            Some(contact) => format!("{text}\n\n{contact}"),
            None => text.to_owned(),
        }
    }

    /// The `To<X>Assistant` call the primary agent would make for the user's new message, when
    /// the router is sure which reachable subgraph it belongs to: written as if the LLM had made
    /// it, so the router node, the history and every provider see an ordinary delegation.
    fn fast_delegation<'a>(
        &self,
        set: &'a Assistants,
        state: &State,
        agent: &Agent,
    ) -> Option<(&'a Agent, NewMessage)> {
        if agent.kind != AgentKind::Primary || !state.dialog_state.is_empty() {
            return None;
        }
        let text = unanswered_user_text(state)?;
        let target = set.agents.fast_route(text, agent, state.user.role)?;
        let call = delegation_call(&target.name, text);
        Some((
            target,
            ai_message(&state.wa_id, "", &agent.name, vec![call]),
        ))
    }

    /// A tapped list row asks a named assistant (the property assistant, for a search result):
    /// the primary delegates to it, or the subgraph holding the conversation hands back so the
    /// primary can, whatever the router or a model would read in the row's words.
    fn tapped_route(
        &self,
        set: &Assistants,
        state: &mut State,
        agent: &Agent,
    ) -> Option<NewMessage> {
        let name = state.asked_for.clone()?;
        let role = state.user.role;
        let target = set
            .agents
            .get(&name)
            .filter(|t| t.kind == AgentKind::Subgraph && t.roles.contains(&role));
        let Some(target) = target.filter(|t| t.name != agent.name) else {
            // There already, or not one this user may reach: the assistant reads the row.
            state.asked_for = None;
            return None;
        };
        let call = match agent.kind {
            AgentKind::Primary if state.dialog_state.is_empty() => {
                state.asked_for = None;
                delegation_call(&target.name, unanswered_user_text(state)?)
            }
            AgentKind::Subgraph => {
                leave_call(format!("the user tapped an option for {}", target.name))
            }
            _ => {
                state.asked_for = None;
                return None;
            }
        };
        tracing::info!(from = %agent.name, to = %target.name, "a tapped list row routes the turn");
        metrics::counter!("zaguan_tapped_routes_total", "agent" => target.name.clone())
            .increment(1);
        Some(ai_message(&state.wa_id, "", &agent.name, vec![call]))
    }

    /// The `CompleteOrEscalate` the subgraph `agent` holding the conversation would call when
    /// the router is sure the user's new message belongs to another assistant: the subgraph
    /// hands back, and the primary's fast path enters the right one in the same turn.
    fn fast_leave<'a>(
        &self,
        set: &'a Assistants,
        state: &State,
        agent: &Agent,
    ) -> Option<(&'a Agent, NewMessage)> {
        let last = state.messages.last()?;
        if last.message.role != MessageRole::Human {
            return None;
        }
        let target = set
            .agents
            .fast_route(&last.message.content, agent, state.user.role)?;
        let call = leave_call(format!("the user's request is for {}", target.name));
        Some((
            target,
            ai_message(&state.wa_id, "", &agent.name, vec![call]),
        ))
    }

    fn request_for(&self, set: &Assistants, agent: &Agent, state: &State) -> LlmRequest {
        let role = state.user.role;
        let context = PromptContext {
            user_name: state.user.name.clone(),
            user_role: role,
            user_info: state.user_info(),
            lang: state.lang.clone().unwrap_or_else(|| "es".to_owned()),
            now: spanish_now(Utc::now().with_timezone(&self.settings.timezone)),
            business_name: self.settings.business_name.clone(),
            business_contact: self.settings.business_contact.clone().unwrap_or_default(),
        };
        let system = set
            .agents
            .render_system_prompt(agent, &context)
            .unwrap_or_else(|error| {
                tracing::error!(agent = %agent.name, "prompt did not render: {error:#}");
                String::new()
            });
        let tools = set.tools_for(agent, role);
        LlmRequest {
            agent: agent.name.clone(),
            conversation: Some(state.wa_id.as_str().to_owned()),
            system,
            messages: {
                let chat = state.chat_messages();
                history::with_opening_words(&chat, history::clean(&chat, self.settings.window))
            },
            tools,
        }
    }

    /// Router + RouterTool + enter/leave: every call gets exactly one tool message. A
    /// delegation or CompleteOrEscalate wins over the other calls of the same message, which
    /// are answered as not executed; otherwise regular tools run concurrently.
    async fn router(
        &self,
        set: &Assistants,
        state: &mut State,
        calls: Vec<ToolCall>,
    ) -> Result<(), EngineError> {
        let role = state.user.role;
        let caller = state
            .messages
            .iter()
            .rev()
            .find(|m| m.message.role == MessageRole::Ai)
            .and_then(|m| m.message.agent.as_deref())
            .and_then(|name| set.agents.get(name))
            .unwrap_or_else(|| set.agents.primary_for(role));
        let plans: Vec<Plan<'_>> = calls
            .iter()
            .map(|c| self.plan(set, caller, role, c))
            .collect();
        let winner = plans
            .iter()
            .position(|p| matches!(p, Plan::Enter { .. } | Plan::Leave { .. }));

        let results: Vec<ToolOutput> = match winner {
            Some(w) => {
                let (new_state, text, what) = match &plans[w] {
                    Plan::Enter { target, query } => (
                        vec![target.name.clone()],
                        format!(
                            "The conversation is now handled by {}. Continue helping the user \
                             with: {query}. Act as the assistant the user talks to, without \
                             mentioning any transfer. When the request is done or outside your \
                             domain, call {COMPLETE_OR_ESCALATE}.",
                            target.name
                        ),
                        format!("{} took over", calls[w].name),
                    ),
                    Plan::Leave { reason } => (
                        Vec::new(),
                        format!(
                            "Back with the primary assistant ({reason}). Reflect on the \
                             conversation and keep helping the user."
                        ),
                        format!("{COMPLETE_OR_ESCALATE} returned control"),
                    ),
                    _ => unreachable!("the winner is a transition"),
                };
                // dialog_state first: a crash before the tool messages replays the transition.
                self.set_dialog_state(state, new_state).await?;
                (0..plans.len())
                    .map(|i| {
                        if i == w {
                            text.clone().into()
                        } else {
                            format!("Not executed: {what} in the same step.").into()
                        }
                    })
                    .collect()
            }
            None => {
                let context = self.tool_context(state);
                // A call that changes data waits for the user's yes (one per step).
                let mut asked: Option<PendingAction> = None;
                let mut results = Vec::with_capacity(calls.len());
                for (call, plan) in calls.iter().zip(&plans) {
                    let outcome = match plan {
                        Plan::Run => self.tools.confirmation(call, &context).await,
                        _ => None,
                    };
                    results.push(match outcome {
                        None => None,
                        Some(Err(error)) => Some(error),
                        Some(Ok(_)) if asked.is_some() => Some(
                            "Not executed: another action is already waiting for the user's \
                             confirmation; one at a time."
                                .to_owned(),
                        ),
                        Some(Ok(summary)) => {
                            let text = format!(
                                "Waiting for the user's confirmation: {summary}. They have been \
                                 shown Confirm / Cancel buttons. Tell them in one short sentence \
                                 what will be done once they confirm; do not call {} again.",
                                call.name
                            );
                            asked = Some(PendingAction {
                                id: confirm::new_action_id(),
                                tool: call.name.clone(),
                                args: call.args.clone(),
                                summary,
                                agent: caller.name.clone(),
                                created_at: Utc::now(),
                            });
                            Some(text)
                        }
                    });
                }
                if let Some(action) = asked {
                    self.save(state).await?;
                    self.store
                        .set_pending_action(&state.wa_id, Some(&action))
                        .await?;
                    metrics::counter!("zaguan_pending_actions_total", "outcome" => "asked")
                        .increment(1);
                    state.pending_action = Some(action);
                }
                let runs = calls
                    .iter()
                    .zip(&plans)
                    .zip(results)
                    .map(|((call, plan), done)| {
                        let context = &context;
                        async move {
                            match (plan, done) {
                                (_, Some(text)) => ToolOutput::from(text),
                                (Plan::Refuse(why), None) => why.clone().into(),
                                _ => {
                                    self.tools
                                        .run(call, context, self.settings.tool_timeout)
                                        .await
                                }
                            }
                        }
                    });
                futures::future::join_all(runs).await
            }
        };
        let events = results
            .iter()
            .flat_map(|output| output.events.iter().cloned());
        self.record_events(&state.wa_id, events, Utc::now()).await?;
        for (call, output) in calls.iter().zip(results) {
            let message = NewMessage {
                wa_id: state.wa_id.clone(),
                role: MessageRole::Tool,
                content: output.text,
                agent: Some(caller.name.clone()),
                tool_calls: Vec::new(),
                tool_call_id: Some(call.id.clone()),
                wamids: Vec::new(),
                attachments: output.attachments,
                at: Utc::now(),
            };
            self.append(state, message).await?;
        }
        Ok(())
    }

    fn plan<'a>(
        &self,
        set: &'a Assistants,
        caller: &Agent,
        role: crate::domain::Role,
        call: &ToolCall,
    ) -> Plan<'a> {
        if call.name == COMPLETE_OR_ESCALATE {
            return if caller.kind == AgentKind::Subgraph {
                let reason = call
                    .args
                    .get("reason")
                    .and_then(|r| r.as_str())
                    .unwrap_or("task finished")
                    .to_owned();
                Plan::Leave { reason }
            } else {
                Plan::Refuse(format!(
                    "Error: {COMPLETE_OR_ESCALATE} is only for specialised assistants."
                ))
            };
        }
        if let Some(target) = set.agents.delegation_target(&call.name) {
            if target.name == caller.name {
                return Plan::Refuse(format!(
                    "Error: you already are {}; help the user directly.",
                    target.name
                ));
            }
            if !target.roles.contains(&role) {
                metrics::counter!("zaguan_delegations_refused_total").increment(1);
                return Plan::Refuse(format!(
                    "Error: {} is not available for this user ({}); help them yourself or \
                     explain what you can do.",
                    call.name,
                    role.as_str()
                ));
            }
            let query = call
                .args
                .get("query")
                .and_then(|q| q.as_str())
                .unwrap_or_default()
                .to_owned();
            return Plan::Enter { target, query };
        }
        if caller.tools.contains(&call.name) {
            if self.tools.allows(&call.name, role) {
                Plan::Run
            } else {
                metrics::counter!("zaguan_tool_refusals_total", "reason" => "role").increment(1);
                Plan::Refuse(format!(
                    "Error: {} is not available for this user ({}); do not call it again.",
                    call.name,
                    role.as_str()
                ))
            }
        } else {
            Plan::Refuse(format!(
                "Error: the tool {} is not available to you.",
                call.name
            ))
        }
    }

    /// guard_translator, then the reply: for the caller to send now, or queued in the outbox.
    /// A reply read back from the history (the turn was cut after its answer was stored) may
    /// have gone out already: it is recorded as sent-but-unconfirmed, for its status webhook
    /// to confirm or its grace to resend — never sent again at once. Its parts' ids come from
    /// the inbound message, so recording it again changes nothing.
    async fn deliver(
        &self,
        set: &Assistants,
        state: &mut State,
        text: &str,
        asked: Option<&PendingAction>,
        reply_to: Option<&InboxEntry>,
        delivery: Delivery,
    ) -> Result<(Vec<String>, Option<Vec<OutboxEntry>>), EngineError> {
        self.save(state).await?;
        let lang = state.lang.as_deref();
        let mut bodies = set
            .guard
            .guard(text, lang, state.wa_id.as_str())
            .await
            .parts;
        let texts = bodies.len();
        // What the turn's tools show (photos, a list to tap), after the words.
        let mut media = Vec::new();
        let wa_id = state.wa_id.as_str();
        for attachment in attachments::this_turn(state) {
            let said = |text: String| async move {
                set.guard.guard(&text, lang, wa_id).await.parts.join("\n")
            };
            match attachment {
                Attachment::Image { link, caption } => {
                    bodies.push(attachments::caption(&said(caption).await));
                    media.push(Media::Image { link });
                }
                Attachment::List { text, rows } => {
                    let text = said(text).await;
                    bodies.push(attachments::plain_list(&text, &rows));
                    media.push(Media::List {
                        text,
                        button: attachments::list_button(lang).to_owned(),
                        rows,
                    });
                }
            }
        }
        let mut buttons = Vec::new();
        if let Some(action) = asked {
            // The summary with Confirm / Cancel buttons, as a last message of its own.
            let summary = set
                .guard
                .guard(&action.summary, lang, state.wa_id.as_str())
                .await
                .parts
                .join("\n");
            bodies.push(
                summary
                    .chars()
                    .take(crate::outbound::graph::MAX_INTERACTIVE_BODY)
                    .collect(),
            );
            buttons = confirm::buttons(&action.id, lang);
        }
        let now = Utc::now();
        let mut parts = NewOutbox::parts(
            &state.wa_id,
            reply_to.map(|e| &e.wamid),
            reply_to.map(|e| e.phone_number_id.as_str()),
            &bodies,
            now,
        );
        for (part, media) in parts.iter_mut().skip(texts).zip(media) {
            part.media = Some(media);
        }
        if let Some(last) = parts.last_mut() {
            last.buttons = buttons;
        }
        // The customer's reply reads as the words and the confirmation, not the captions.
        let bodies: Vec<String> = bodies
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i < texts || parts.get(*i).is_some_and(|p| p.media.is_none()))
            .map(|(_, body)| body)
            .collect();
        let Some(reply_to) = reply_to else {
            self.store.insert_outbox(&parts).await?;
            return Ok((bodies, None));
        };
        let mut entries = reply_parts(&parts, reply_to.received_at);
        let options = delivery.options;
        if delivery.fresh && options.send_now {
            return Ok((bodies, Some(entries)));
        }
        if !delivery.fresh {
            let resend_at = now
                + chrono::Duration::from_std(options.unconfirmed_grace)
                    .unwrap_or(chrono::Duration::MAX);
            for entry in &mut entries {
                entry.status = crate::store::OutboxStatus::Sending;
                entry.sending_at = Some(now);
                entry.next_attempt_at = Some(resend_at);
                entry.attempts = 1;
            }
        }
        self.store.record_reply(&entries).await?;
        Ok((bodies, None))
    }

    /// Queues a message of the engine's own (not an answer to any inbound message, so it
    /// never stands in for one), translated into the conversation's language and sent from
    /// the number `via` arrived on.
    pub async fn notice(
        &self,
        wa_id: &WaId,
        text: &str,
        via: &InboxEntry,
    ) -> Result<(), EngineError> {
        let set = self.assistants();
        let lang = self.store.conversation(wa_id).await?.and_then(|c| c.lang);
        let bodies = set
            .guard
            .guard(text, lang.as_deref(), wa_id.as_str())
            .await
            .parts;
        let parts = NewOutbox::parts(wa_id, None, Some(&via.phone_number_id), &bodies, Utc::now());
        self.store.insert_outbox(&parts).await?;
        Ok(())
    }

    /// A message of the business's own that answers nothing (a visit reminder): put into the
    /// conversation's language by guard_translator like any reply, queued from
    /// `phone_number_id` — as `closed_window` instead when WhatsApp's 24-hour window is closed
    /// (only approved templates are delivered then) — and written to the history as `agent`'s,
    /// so the next turn knows what the user is answering. Queued first: a crash before the
    /// history write loses that line, never the message. Returns what was queued.
    pub async fn notify(
        &self,
        wa_id: &WaId,
        text: &str,
        agent: &str,
        phone_number_id: &str,
        closed_window: Template,
        now: chrono::DateTime<Utc>,
    ) -> Result<Vec<NewOutbox>, EngineError> {
        let conversation = self.store.conversation(wa_id).await?;
        let open = conversation
            .as_ref()
            .and_then(|c| c.last_inbound_at)
            .is_some_and(|at| now - at < chrono::Duration::hours(24));
        let lang = conversation.and_then(|c| c.lang);
        let set = self.assistants();
        let mut bodies = set
            .guard
            .guard(text, lang.as_deref(), wa_id.as_str())
            .await
            .parts;
        if !open {
            // One template message; its body copy is the readable text.
            bodies = vec![bodies.join("\n\n")];
        }
        let mut parts = NewOutbox::parts(wa_id, None, Some(phone_number_id), &bodies, now);
        if !open && let Some(part) = parts.first_mut() {
            part.template = Some(closed_window);
        }
        self.store.insert_outbox(&parts).await?;
        self.store
            .append_message(NewMessage {
                wa_id: wa_id.clone(),
                role: MessageRole::Ai,
                content: bodies.join("\n\n"),
                agent: Some(agent.to_owned()),
                tool_calls: Vec::new(),
                tool_call_id: None,
                wamids: Vec::new(),
                attachments: Vec::new(),
                at: now,
            })
            .await?;
        self.store.note_history_written(wa_id, now).await?;
        Ok(parts)
    }

    async fn set_dialog_state(
        &self,
        state: &mut State,
        dialog_state: Vec<String>,
    ) -> Result<(), EngineError> {
        if state.dialog_state != dialog_state {
            // The messages that led here first: a crash after them replays the transition.
            self.save(state).await?;
            self.store
                .set_dialog_state(&state.wa_id, &dialog_state, Utc::now())
                .await?;
            state.dialog_state = dialog_state;
        }
        Ok(())
    }

    /// A node's output, kept for the next write ([`save`](Self::save)); the state machine
    /// reads it at once.
    async fn append(&self, state: &mut State, message: NewMessage) -> Result<(), EngineError> {
        let seq = state.messages.last().map_or(0, |m| m.seq) + 1;
        state.messages.push(StoredMessage { seq, message });
        state.unsaved += 1;
        Ok(())
    }

    /// update_state_in_db: the messages not stored yet, in one write. Runs before anything
    /// else the turn changes, so the history always explains the state.
    async fn save(&self, state: &mut State) -> Result<(), EngineError> {
        if state.unsaved == 0 {
            return Ok(());
        }
        let first = state.messages.len() - state.unsaved;
        let after = first
            .checked_sub(1)
            .map_or(0, |last| state.messages[last].seq);
        let unsaved: Vec<NewMessage> = state.messages[first..]
            .iter()
            .map(|m| m.message.clone())
            .collect();
        let stored = self.store.append_messages(unsaved, after).await?;
        state.messages.truncate(first);
        state.messages.extend(stored);
        state.unsaved = 0;
        Ok(())
    }
}

/// The user's message the graph still has to answer: the last message when it is the user's,
/// or the user's message before a subgraph handed the conversation back (a `CompleteOrEscalate`
/// call and its result, nothing else), so the primary assistant can route it on.
fn unanswered_user_text(state: &State) -> Option<&str> {
    for message in state.messages.iter().rev().map(|m| &m.message) {
        match message.role {
            MessageRole::Human => return Some(&message.content),
            MessageRole::Tool => continue,
            MessageRole::Ai
                if message.content.is_empty()
                    && !message.tool_calls.is_empty()
                    && message
                        .tool_calls
                        .iter()
                        .all(|call| call.name == COMPLETE_OR_ESCALATE) =>
            {
                continue;
            }
            _ => return None,
        }
    }
    None
}

/// The `To<X>Assistant` call the primary makes to hand `query` to `target`.
fn delegation_call(target: &str, query: &str) -> ToolCall {
    ToolCall {
        id: crate::llm::new_call_id(),
        name: AgentRegistry::delegation_tool_name(target),
        args: serde_json::json!({ "query": query }),
    }
}

/// The `CompleteOrEscalate` a subgraph calls to hand the conversation back for `reason`.
fn leave_call(reason: String) -> ToolCall {
    ToolCall {
        id: crate::llm::new_call_id(),
        name: COMPLETE_OR_ESCALATE.to_owned(),
        args: serde_json::json!({ "cancel": true, "reason": reason }),
    }
}

fn ai_message(wa_id: &WaId, content: &str, agent: &str, tool_calls: Vec<ToolCall>) -> NewMessage {
    NewMessage {
        wa_id: wa_id.clone(),
        role: MessageRole::Ai,
        content: content.to_owned(),
        agent: Some(agent.to_owned()),
        tool_calls,
        tool_call_id: None,
        wamids: Vec::new(),
        attachments: Vec::new(),
        at: Utc::now(),
    }
}

/// Reads the next step off the stored history.
fn next_step(state: &State) -> Next {
    let messages = &state.messages;
    let Some(last) = messages.last() else {
        return Next::Assistant;
    };
    match last.message.role {
        MessageRole::Human => Next::Assistant,
        MessageRole::Ai if last.message.tool_calls.is_empty() => {
            Next::Deliver(last.message.content.clone())
        }
        MessageRole::Ai => Next::Router(last.message.tool_calls.clone()),
        MessageRole::Tool => {
            // The AI message this run of tool results answers; calls still unanswered (a crash
            // between two tool messages) go back to the router.
            let run_start = messages
                .iter()
                .rposition(|m| m.message.role != MessageRole::Tool)
                .unwrap_or(0);
            let answered: HashSet<&str> = messages[run_start..]
                .iter()
                .filter_map(|m| m.message.tool_call_id.as_deref())
                .collect();
            match &messages[run_start].message {
                ai if ai.role == MessageRole::Ai => {
                    let pending: Vec<ToolCall> = ai
                        .tool_calls
                        .iter()
                        .filter(|c| !answered.contains(c.id.as_str()))
                        .cloned()
                        .collect();
                    if pending.is_empty() {
                        Next::Assistant
                    } else {
                        Next::Router(pending)
                    }
                }
                _ => Next::Assistant,
            }
        }
    }
}

/// The location a WhatsApp location message carries.
fn shared_location(entry: &InboxEntry) -> Option<crate::domain::GeoPoint> {
    match entry.content {
        Content::Location {
            latitude,
            longitude,
            ..
        } => Some(crate::domain::GeoPoint {
            lat: latitude,
            lon: longitude,
        }),
        _ => None,
    }
}

/// Images, audio, video, documents and stickers without a caption: nothing an assistant can
/// read.
fn is_unreadable_media(entry: &InboxEntry) -> bool {
    matches!(
        entry.kind.as_str(),
        "image" | "audio" | "video" | "document" | "sticker" | "voice"
    ) && entry.text.as_deref().is_none_or(|t| t.trim().is_empty())
}

/// The polite answer to media the assistants cannot read.
fn media_answer(lang: Option<&str>) -> &'static str {
    match lang.unwrap_or("es") {
        "en" => {
            "Thanks! I can't open images, audio or files here yet. Could you tell me in writing what you need?"
        }
        "pt" => {
            "Obrigado! Ainda não consigo abrir imagens, áudios ou ficheiros aqui. Pode escrever-me o que precisa?"
        }
        "fr" => {
            "Merci ! Je ne peux pas encore ouvrir les images, audios ou fichiers ici. Pouvez-vous m'écrire ce dont vous avez besoin ?"
        }
        "de" => {
            "Danke! Bilder, Audios oder Dateien kann ich hier noch nicht öffnen. Können Sie mir schreiben, was Sie brauchen?"
        }
        "it" => {
            "Grazie! Qui non riesco ancora ad aprire immagini, audio o file. Può scrivermi di cosa ha bisogno?"
        }
        "ca" => {
            "Gràcies! Encara no puc obrir imatges, àudios ni fitxers aquí. Em pots escriure què necessites?"
        }
        _ => {
            "¡Gracias! Por aquí todavía no puedo abrir imágenes, audios ni archivos. ¿Me cuentas por escrito qué necesitas?"
        }
    }
}

/// "jueves 2026-11-26 10:30 (CET)": the prompts are Spanish, and so is the day they are told.
fn spanish_now(now: chrono::DateTime<chrono_tz::Tz>) -> String {
    use chrono::Datelike as _;
    format!(
        "{} {}",
        crate::domain::phrases::weekday_es(now.weekday()),
        now.format("%Y-%m-%d %H:%M (%Z)")
    )
}
