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
//!
//! [`Engine`] holds what outlives a turn (the prompt set, caches, the services); each node is a
//! function of the turn's `Turn` (`graph.rs`) and its `State` (`inbound`, `confirmations`,
//! `assistant`, `router`, `delivery`).

use crate::domain::DialogState;
use crate::domain::phrases;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use chrono::Utc;

use crate::agents::AgentRegistry;
use crate::domain::{WaId, WaMessageId};
use crate::engine::context_extractor::UserCache;
use crate::engine::context_extractor::{Window, context_with};
use crate::engine::handoff::{HandoffDesk, HandoffSettings};
use crate::engine::offline::{ModelStatus, OfflineAssistants};
use crate::engine::roles::RoleDirectory;
use crate::engine::tools::ToolRegistry;
use crate::engine::user_info::{ContextCache, ContextSource};
use crate::guard::LanguageDetector;
use crate::llm::Llm;
use crate::store::{BusinessEvent, InboxEntry, Store};
use crate::templates::Templates;
use crate::voice::VoiceNotes;

mod assistant;
mod confirmations;
mod delivery;
mod graph;
mod inbound;
mod prompt_set;
mod router;
mod settings;

pub use delivery::{Notified, Outreach};
pub use router::AWAITING_CONFIRMATION;
pub use settings::{
    DEFAULT_BUSINESS_NAME, EngineError, EngineSettings, TurnOptions, TurnOutcome,
    default_templates, default_templates_in,
};

use assistant::AssistantNode;
use delivery::Delivery;
use graph::{Next, Turn, next_step};
use inbound::is_reaction;
use prompt_set::PromptSet;

/// The conversation engine, shared by all workers.
pub struct Engine {
    store: Arc<dyn Store>,
    llm: Arc<dyn Llm>,
    /// The prompt set new turns start with; a reload swaps it whole.
    prompt_set: RwLock<Arc<PromptSet>>,
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
    /// Tells the staff on duty when a customer asks for a person.
    handoffs: Arc<HandoffDesk>,
    /// Answers the business's follow-up questions without a model; `None`: none asked.
    presses: Option<Arc<dyn crate::engine::presses::Presses>>,
    /// Serves the assistants when no model answers; `None`: their `offline_reply`.
    offline: Option<Arc<dyn OfflineAssistants>>,
    /// Whether a model answers, for the console.
    model_status: Arc<ModelStatus>,
    /// Where steps taken without a model are recorded beside the model calls (`llm_calls`,
    /// provider `fast_path` or `offline`), so reports can tell the shares apart.
    decisions: Option<Arc<dyn crate::llm::CallLog>>,
}

/// The windows the last turns left, per conversation held (see [`TurnOptions::hold`]),
/// within a budget of messages.
#[derive(Default)]
struct Windows {
    entries: HashMap<WaId, (u64, Window)>,
    messages: usize,
}

/// Messages kept in windows at most (a few MB: 200 full windows of 50, or 2,500 of four);
/// past it, windows are dropped and their next turns read the history from the store.
const WINDOWS_BUDGET: usize = 10_000;

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
        let assistants = PromptSet::new(agents, &tools, &llm, &languages, &settings);
        let handoffs = Arc::new(HandoffDesk::new(
            store.clone(),
            None,
            HandoffSettings {
                timezone: settings.timezone,
                ..HandoffSettings::default()
            },
        ));
        Self {
            handoffs,
            store,
            llm,
            prompt_set: RwLock::new(Arc::new(assistants)),
            languages,
            tools,
            settings,
            users: UserCache::default(),
            windows: Mutex::default(),
            roles: None,
            context: None,
            contexts: ContextCache::default(),
            voice: None,
            presses: None,
            offline: None,
            model_status: Arc::default(),
            decisions: None,
        }
    }

    /// Records the steps taken without a model in `log` (the model calls' own log).
    pub fn with_call_log(mut self, log: Arc<dyn crate::llm::CallLog>) -> Self {
        self.decisions = Some(log);
        self
    }

    /// Serves the assistants with `offline` when no model answers, instead of their
    /// `offline_reply`.
    pub fn with_offline(mut self, offline: Arc<dyn OfflineAssistants>) -> Self {
        self.offline = Some(offline);
        self
    }

    /// Whether a model answers this process's turns, and since when not.
    pub fn model_status(&self) -> &Arc<ModelStatus> {
        &self.model_status
    }

    /// Tells the assistants what `source` knows about each user (an owner's listings, a
    /// prospect's appointments and offers).
    /// What time it is for this engine's turns (see [`crate::domain::Clock`]).
    pub fn now(&self) -> chrono::DateTime<Utc> {
        self.settings.clock.now()
    }

    pub fn with_context(mut self, source: Arc<dyn ContextSource>) -> Self {
        self.context = Some(source);
        self
    }

    /// Transcribes voice notes, so they run as the user's words.
    pub fn with_voice_notes(mut self, voice: Arc<VoiceNotes>) -> Self {
        self.voice = Some(voice);
        self
    }

    /// Tells the staff on duty through `desk` when a customer asks for a person (without it,
    /// nobody can be told and the customer is given the contact line).
    pub fn with_handoffs(mut self, desk: Arc<HandoffDesk>) -> Self {
        desk.use_templates(self.prompt_set().templates.clone());
        self.handoffs = desk;
        self
    }

    /// The handoff desk: `request_human`, callbacks and the escalation use the same one.
    pub fn handoffs(&self) -> &Arc<HandoffDesk> {
        &self.handoffs
    }

    /// Answers presses of the business's follow-up buttons (a visit's outcome, an offer's
    /// answer) before any assistant runs.
    pub fn with_presses(mut self, presses: Arc<dyn crate::engine::presses::Presses>) -> Self {
        self.presses = Some(presses);
        self
    }

    /// Gives users the role the business data says (owner, agent) unless an operator set one.
    pub fn with_roles(mut self, roles: Arc<RoleDirectory>) -> Self {
        self.roles = Some(roles);
        self
    }

    /// The agency's name: the business file's, else `ZAGUAN_BUSINESS_NAME`.
    pub fn business_name(&self) -> String {
        self.prompt_set().business_name.clone()
    }

    /// How customers reach a person: the business file's lines, else
    /// `ZAGUAN_BUSINESS_CONTACT`.
    pub fn business_contact(&self) -> Option<String> {
        self.prompt_set().business_contact.clone()
    }

    /// The templates messages are sent with: the prompts' `templates.toml`, and the
    /// environment's for the purposes it leaves out.
    pub fn templates(&self) -> Arc<Templates> {
        self.prompt_set().templates.clone()
    }

    /// The prompt set new turns start with.
    pub fn prompts(&self) -> Arc<AgentRegistry> {
        self.prompt_set().agents.clone()
    }

    /// Makes `agents` the set of every turn that starts from now on; turns in flight finish
    /// with theirs.
    pub fn reload(&self, agents: Arc<AgentRegistry>) {
        let assistants = Arc::new(PromptSet::new(
            agents,
            &self.tools,
            &self.llm,
            &self.languages,
            &self.settings,
        ));
        self.handoffs.use_templates(assistants.templates.clone());
        *self.prompt_set.write().unwrap_or_else(|e| e.into_inner()) = assistants;
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

    fn prompt_set(&self) -> Arc<PromptSet> {
        self.prompt_set
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One turn's view of the engine, with the prompt set `set` it started with.
    fn turn<'a>(&'a self, set: &'a Arc<PromptSet>) -> Turn<'a> {
        Turn {
            store: self.store.as_ref(),
            set,
            settings: &self.settings,
            tools: &self.tools,
            handoffs: &self.handoffs,
            presses: self.presses.as_deref(),
            decisions: self.decisions.as_deref(),
            users: &self.users,
            contexts: &self.contexts,
        }
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
        let set = self.prompt_set();
        delivery::notice(self.store.as_ref(), &set, wa_id, text, via, self.now()).await
    }

    /// A message of the business's own that answers nothing (a visit reminder, a listing
    /// alert, a notice to an agent): the send governor decides whether it may go and how —
    /// text inside the contact's 24-hour window (with the purpose's template as its
    /// fallback), the template in their language outside it, or nothing, recorded as
    /// `skipped`, to a contact who opted out or with no template to send. The words go through
    /// guard_translator like any reply and are written to the history as `outreach.agent`'s,
    /// so the next turn knows what the user is answering. Queued first, under the step's id:
    /// a crash before the history write loses that line, never the message, and the step run
    /// again queues nothing twice.
    pub async fn notify(
        &self,
        outreach: Outreach<'_>,
        now: chrono::DateTime<Utc>,
    ) -> Result<Notified, EngineError> {
        let set = self.prompt_set();
        delivery::notify(self.store.as_ref(), &set, outreach, now).await
    }

    /// The detector of the languages served (`ZAGUAN_LANGUAGES`).
    pub fn languages(&self) -> &Arc<LanguageDetector> {
        &self.languages
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
    ///
    /// The steps other than the model call are boxed where they are awaited: a future keeps
    /// room for every future it awaits inline, and a turn spends its life waiting on the model,
    /// so the room is held by every waiting turn (`docs/performance.md`, *Memory per waiting
    /// turn*).
    #[tracing::instrument(name = "run_turn", skip_all, fields(conversation.id = %wa_id.masked(), turn.messages = inbox.len()))]
    pub async fn serve_turn<T>(
        &self,
        wa_id: &WaId,
        inbox: &[InboxEntry],
        options: TurnOptions,
        answering: impl FnOnce() -> T,
    ) -> Result<TurnOutcome, EngineError> {
        let started = std::time::Instant::now();
        let set = self.prompt_set();
        let turn = self.turn(&set);
        let user = Box::pin(self.users.user(self.store.as_ref(), wa_id)).await?;
        // Taken out: put back only by a turn that ends well.
        let window = options
            .hold
            .and_then(|hold| self.windows().take(wa_id, hold));
        let mut state = Box::pin(context_with(self.store.as_ref(), wa_id, user, window)).await?;
        Box::pin(inbound::role_from_data(
            &turn,
            self.roles.as_deref(),
            &mut state,
        ))
        .await?;
        if let Some(source) = &self.context {
            let context =
                Box::pin(
                    self.contexts
                        .get(source.as_ref(), wa_id, state.user.role, self.now()),
                )
                .await;
            state.situation = context.as_ref().map(|c| c.situation);
            state.context = context.and_then(|c| c.text);
        }
        // A turn cut short (crash, lost lease, store error) is finished first with the
        // messages it started with — those already in the history — so they get their own
        // reply; what arrived since is the next turn. Merging them would answer only the
        // newest message.
        let resumed: Vec<InboxEntry> = inbox
            .iter()
            .filter(|e| state.is_stored(&e.wamid))
            .cloned()
            .collect();
        // Borrowed in the usual case: a turn waiting on the model holds one copy of its
        // messages, the worker's.
        let inbox: Cow<'_, [InboxEntry]> = if resumed.is_empty() {
            Cow::Borrowed(inbox)
        } else {
            // Counted: a message whose turns keep being cut (one that crashes the process)
            // is given up on after `max_attempts`.
            if options.count_resume {
                let ids: Vec<WaMessageId> = resumed.iter().map(|e| e.wamid.clone()).collect();
                self.store.count_attempt(&ids).await?;
            }
            tracing::info!(messages = resumed.len(), "resuming a turn cut short");
            metrics::counter!("zaguan_turns_resumed_total").increment(1);
            Cow::Owned(resumed)
        };
        let inbox = inbox.as_ref();
        let answered: Vec<WaMessageId> = inbox.iter().map(|e| e.wamid.clone()).collect();
        if inbox.is_empty() {
            return Ok(TurnOutcome::silent(state.dialog_state, answered));
        }
        // What was stored before this call: a reply delivered from it may have gone out.
        let loaded_seq = state.messages.last().map_or(0, |m| m.seq);
        let new = Box::pin(inbound::add_human_message(
            &turn,
            self.voice.as_deref(),
            &mut state,
            inbox,
        ))
        .await?;
        let new: Vec<&InboxEntry> = new.iter().map(AsRef::as_ref).collect();
        // The turn's messages, new or resumed after a crash: all reactions, nothing to answer
        // — but a reaction to a confirmation's buttons, which is told how to confirm (once).
        let held = state
            .handoff
            .as_ref()
            .is_some_and(|h| h.is_active(self.now()));
        if !inbox.is_empty()
            && inbox.iter().all(is_reaction)
            && (held || !Box::pin(confirmations::answer_reaction(&turn, &mut state, &new)).await?)
        {
            // A reaction is context for the next turn, never a message to answer (nor a yes).
            tracing::info!(reactions = new.len(), "reaction recorded, not answered");
            metrics::counter!("zaguan_turns_total", "outcome" => "reaction").increment(1);
            Box::pin(turn.save(&mut state)).await?;
            return Ok(TurnOutcome::silent(state.dialog_state, answered));
        }
        if let Some(last) = new.last().copied()
            && Box::pin(inbound::delivered_late(&turn, last)).await
        {
            Box::pin(inbound::answer_late(&turn, &mut state, last)).await?;
            return Ok(TurnOutcome::silent(state.dialog_state, answered));
        }
        let turn_started = self.now();
        if let Some(handoff) = state.handoff.take() {
            if handoff.is_active(turn_started) {
                // An operator answers: the messages are in the history for them (and for the
                // assistants once the conversation is back), the bot says nothing.
                tracing::info!(operator = %handoff.operator, "message held for the operator");
                metrics::counter!("zaguan_turns_total", "outcome" => "handoff").increment(1);
                Box::pin(turn.save(&mut state)).await?;
                return Ok(TurnOutcome::silent(state.dialog_state, answered));
            }
            tracing::info!(operator = %handoff.operator, "handoff expired: the bot answers again");
            metrics::counter!("zaguan_handoffs_ended_total", "how" => "expired").increment(1);
            self.store.set_handoff(&state.wa_id, None).await?;
        }
        let _answering = answering();
        // Once every provider failed in this turn (or the conversation's budget is spent), the
        // remaining nodes answer offline at once instead of waiting for the same timeouts.
        let mut llm_down = false;
        if !new.is_empty() {
            Box::pin(confirmations::before_assistant(&turn, &mut state, &new)).await?;
            if matches!(next_step(&state), Next::Assistant)
                && Box::pin(inbound::over_budget(&turn, &state)).await?
            {
                if self.offline.is_some() {
                    // Past its budget, the conversation is served without a model.
                    Box::pin(inbound::flag_over_budget(&turn, &mut state)).await?;
                    llm_down = true;
                } else {
                    Box::pin(inbound::answer_over_budget(&turn, &mut state)).await?;
                }
            }
        }
        let reply_to = inbox.last();
        let mut transitions = 0;
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
                    let (parts, to_send) = Box::pin(delivery::deliver(
                        &turn,
                        &mut state,
                        &text,
                        asked.as_ref(),
                        reply_to,
                        Delivery { fresh, options },
                    ))
                    .await?;
                    if state.first_contact {
                        // A lead: the contact's first message, and where it led.
                        let assistant = state
                            .dialog_state
                            .current()
                            .map(str::to_owned)
                            .unwrap_or_else(|| {
                                set.agents.primary_for(state.user.role).name.to_string()
                            });
                        // On the profile too: exports read leads from there, so they outlive
                        // the events' retention.
                        self.store
                            .record_lead(wa_id, self.now(), &assistant)
                            .await?;
                        let lead = BusinessEvent::LeadCreated {
                            name: state.user.name.clone(),
                            assistant,
                        };
                        Box::pin(turn.record_events(wa_id, [lead], self.now(), "")).await?;
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
                    Box::pin(turn.set_dialog_state(&mut state, DialogState::primary())).await?;
                    let text = set.with_contact(phrases::apology(None));
                    let message = turn.ai_message(wa_id, &text, "guard", Vec::new());
                    turn.append(&mut state, message);
                }
                Next::Assistant => {
                    transitions += 1;
                    AssistantNode {
                        llm: self.llm.as_ref(),
                        model_status: &self.model_status,
                        offline: self.offline.as_deref(),
                    }
                    .run(&turn, &mut state, &mut llm_down)
                    .await?;
                }
                Next::Router(calls) => {
                    transitions += 1;
                    Box::pin(router::router(&turn, &mut state, calls)).await?;
                }
            }
        };
        if let Some(hold) = options.hold {
            let keep = state
                .messages
                .len()
                .saturating_sub(super::context_extractor::LOADED_MESSAGES);
            let window = Window {
                history_at: state.history_at,
                messages: state.messages.split_off(keep),
            };
            self.windows().put(wa_id.clone(), hold, window);
        }
        let elapsed = started.elapsed();
        // The agent that wrote the reply (the last of `dialog_state` is the one routed to).
        let agent = state.last_agent().unwrap_or("none");
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
}
