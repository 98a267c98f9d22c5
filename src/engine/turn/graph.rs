//! What the nodes of one turn share — the prompt set the turn started with and the services
//! they write through — and the step the stored history asks for next.
//!
//! Every node is a function of a [`Turn`] and the conversation's [`State`]; what only one
//! node uses (the model for the assistant node, voice notes for the inbound messages) it
//! takes as its own input.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::Utc;

use crate::domain::{AgentName, DialogState, LlmCall, MessageRole, ToolCall, WaId};
use crate::engine::context_extractor::{State, UserCache};
use crate::engine::handoff::HandoffDesk;
use crate::engine::tools::{ToolContext, ToolRegistry};
use crate::engine::turn::{EngineError, EngineSettings, PromptSet};
use crate::engine::user_info::ContextCache;
use crate::llm::CallLog;
use crate::store::{BusinessEvent, Event, NewMessage, Store, StoredMessage};

/// One turn's view of the engine, made when the turn starts.
pub(super) struct Turn<'a> {
    /// Where the history, `dialog_state` and whatever the turn changes are written.
    pub(super) store: &'a dyn Store,
    /// The prompt set the turn started with: a reload in the middle does not change it.
    pub(super) set: &'a Arc<PromptSet>,
    pub(super) settings: &'a EngineSettings,
    /// The domain tools the router runs, and a confirmed action.
    pub(super) tools: &'a ToolRegistry,
    /// Tells the staff on duty when a customer needs a person.
    pub(super) handoffs: &'a HandoffDesk,
    /// Answers the business's follow-up questions without a model.
    pub(super) presses: Option<&'a dyn crate::engine::presses::Presses>,
    /// Where steps taken without a model are recorded beside the model calls.
    pub(super) decisions: Option<&'a dyn CallLog>,
    /// The user profiles a consent change makes stale.
    pub(super) users: &'a UserCache,
    /// What the business data says about users, made stale by a confirmed booking or offer.
    pub(super) contexts: &'a ContextCache,
}

impl Turn<'_> {
    /// What time it is for this turn (see [`crate::domain::Clock`]).
    pub(super) fn now(&self) -> chrono::DateTime<Utc> {
        self.settings.clock.now()
    }

    /// An AI message of `agent` for the history, stamped now.
    pub(super) fn ai_message(
        &self,
        wa_id: &WaId,
        content: &str,
        agent: impl Into<AgentName>,
        tool_calls: Vec<ToolCall>,
    ) -> NewMessage {
        NewMessage::ai(wa_id, content, agent, tool_calls, self.now())
    }

    /// A node's output, kept for the next write ([`save`](Self::save)); the state machine
    /// reads it at once.
    pub(super) fn append(&self, state: &mut State, message: NewMessage) {
        let seq = state.messages.last().map_or(0, |m| m.seq) + 1;
        state.messages.push(StoredMessage { seq, message });
        state.unsaved += 1;
    }

    /// update_state_in_db: the messages not stored yet, in one write. Runs before anything
    /// else the turn changes, so the history always explains the state.
    pub(super) async fn save(&self, state: &mut State) -> Result<(), EngineError> {
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

    /// Moves the conversation to `dialog_state`, after the messages that led there.
    pub(super) async fn set_dialog_state(
        &self,
        state: &mut State,
        dialog_state: DialogState,
    ) -> Result<(), EngineError> {
        if state.dialog_state != dialog_state {
            // The messages that led here first: a crash after them replays the transition.
            self.save(state).await?;
            self.store
                .set_dialog_state(&state.wa_id, &dialog_state, self.now())
                .await?;
            state.dialog_state = dialog_state;
        }
        Ok(())
    }

    /// Business events of `wa_id`'s conversation for the agency's CRM, written in the step
    /// that made the change — before the step is recorded done, so a step cut short by a crash
    /// is replayed with its change and writes its events then; `key` names the step (the tool
    /// call), so the replay's events have the same ids and are written once.
    pub(super) async fn record_events(
        &self,
        wa_id: &WaId,
        events: impl IntoIterator<Item = BusinessEvent>,
        at: chrono::DateTime<Utc>,
        key: &str,
    ) -> Result<(), EngineError> {
        let events: Vec<Event> = events
            .into_iter()
            .map(|event| Event::keyed(wa_id, event, at, key))
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

    /// What a tool run in this turn knows of the conversation.
    pub(super) fn tool_context(&self, state: &State) -> ToolContext {
        ToolContext {
            wa_id: state.wa_id.clone(),
            role: state.user.role,
            location: state.location,
            now: self.now(),
            timezone: self.settings.timezone,
            call_id: String::new(),
            business: self.set.agents.business().clone(),
            fallback_contact: self.settings.business_contact.clone(),
            lang: state.lang.clone(),
            opted_out: state.user.opted_out(),
        }
    }

    /// A step `agent` took without a model: `how` is `fast_path` (keywords, a tapped row) or
    /// `offline` (the agency's data).
    pub(super) fn decided_without_model(&self, wa_id: &WaId, agent: &AgentName, how: &'static str) {
        if let Some(log) = self.decisions {
            log.record(LlmCall {
                conversation: Some(wa_id.as_str().to_owned()),
                agent: agent.clone(),
                provider: how.to_owned(),
                model: "-".to_owned(),
                outcome: crate::domain::CallOutcome::Ok,
                input_tokens: 0,
                output_tokens: 0,
                latency: std::time::Duration::ZERO,
                error: None,
                at: self.now(),
            });
        }
    }

    /// Asks the staff on duty for a person for `state`'s customer (the step `key` names) and
    /// records the event; returns what the customer may truthfully be told.
    pub(super) async fn hand_over(
        &self,
        state: &mut State,
        reason: &str,
        key: &str,
        now: chrono::DateTime<Utc>,
    ) -> Result<String, EngineError> {
        let business = self.set.agents.business();
        let outcome = self
            .handoffs
            .request(&state.wa_id, reason, key, business, now)
            .await?;
        let event = BusinessEvent::HandoffRequested {
            reason: reason.to_owned(),
        };
        self.record_events(&state.wa_id, [event], now, key).await?;
        Ok(outcome.customer_text(
            state.lang.as_deref(),
            business,
            self.set.business_contact.as_deref(),
            self.settings.timezone,
            now,
        ))
    }
}

/// What the last stored message asks for next.
pub(super) enum Next {
    Assistant,
    Router(Vec<ToolCall>),
    Deliver(String),
}

/// Reads the next step off the stored history.
pub(super) fn next_step(state: &State) -> Next {
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
