//! The assistant node: one model call for the agent `route_to_workflow` names, with its tools
//! and the conversation's context, or the fast path's decision instead of the call.

use crate::domain::{DialogState, phrases};

use chrono::Utc;

use crate::agents::fast_route::{Abstention, Decision};
use crate::agents::{Agent, AgentKind, PromptContext};
use crate::domain::llm_call::{FAST_PATH, OFFLINE};
use crate::domain::{MessageRole, ToolCall, WaId};
use crate::engine::context_extractor::State;
use crate::engine::history;
use crate::engine::offline::{Keep, OfflineAnswer, OfflineTurn};
use crate::engine::route::route_to_workflow;
use crate::engine::tools::ToolContext;
use crate::llm::LlmRequest;
use crate::store::{BusinessEvent, Event, NewMessage};

use crate::engine::turn::Assistants;
use crate::engine::{Engine, EngineError};

/// Offline, a subgraph hands back a message the router reads as the primary assistant's with at
/// least this probability (a thanks, a goodbye); below it, the subgraph keeps the conversation.
const OFFLINE_PRIMARY_CONFIDENCE: f32 = 0.5;

impl Engine {
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

    pub(super) fn tool_context(&self, set: &Assistants, state: &State) -> ToolContext {
        ToolContext {
            wa_id: state.wa_id.clone(),
            role: state.user.role,
            location: state.location,
            now: self.now(),
            timezone: self.settings.timezone,
            call_id: String::new(),
            business: set.agents.business().clone(),
            fallback_contact: self.settings.business_contact.clone(),
        }
    }

    /// An assistant node: one LLM call with the agent's prompt, tools and the cleaned window —
    /// unless the fast path decides the route by keywords, or the LLM is down and the agent's
    /// offline reply (after keyword routing, where it finds the subgraph) answers instead.
    pub(super) async fn assistant_node(
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
            self.set_dialog_state(state, DialogState::primary()).await?;
        }
        let agent = route.agent;
        metrics::counter!("zaguan_route_total", "agent" => agent.name.clone()).increment(1);

        if let Some(message) = self.tapped_route(set, state, agent) {
            self.decided_without_model(&state.wa_id, &agent.name, FAST_PATH);
            return self.append(state, message).await;
        }
        if self.settings.fast_route
            && let Some((target, message)) = self.fast_delegation(set, state, agent)
        {
            metrics::counter!("zaguan_fast_route_total", "agent" => target.name.clone())
                .increment(1);
            tracing::info!(to = %target.name, "fast path: entered by the router");
            self.decided_without_model(&state.wa_id, &agent.name, FAST_PATH);
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
            self.decided_without_model(&state.wa_id, &agent.name, FAST_PATH);
            return self.append(state, message).await;
        }

        let message = if *llm_down {
            None
        } else {
            let request = self.request_for(set, agent, state);
            match self.llm.complete(&request).await {
                Ok(response) => Some({
                    self.model_status.answered();
                    self.ai_message(
                        &state.wa_id,
                        &response.content,
                        &agent.name,
                        response.tool_calls,
                    )
                }),
                Err(crate::llm::LlmError::Unavailable(why))
                    if why == crate::llm::offline::OFFLINE_MODE =>
                {
                    // No provider configured: offline mode is the setting, not a failure.
                    tracing::debug!(agent = %agent.name, "offline mode: answering without a model");
                    self.model_status.went_offline(self.now());
                    *llm_down = true;
                    None
                }
                Err(error) => {
                    tracing::error!(agent = %agent.name, "LLM failed, answering offline: {error}");
                    self.model_status.went_offline(self.now());
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
            // A message may answer what this assistant just showed (a city picked, a button
            // pressed): it stays, whatever its words read as. Otherwise the router decides,
            // and where it is unsure, its best reading does: no model will.
            let keep = self.offline.as_ref().map_or(Keep::No, |offline| {
                offline.keeps(&self.offline_turn(set, state, agent))
            });
            let leaves = keep != Keep::Answer
                && state
                    .messages
                    .last()
                    .filter(|m| m.message.role == MessageRole::Human)
                    .is_some_and(|last| {
                        let text = &last.message.content;
                        let elsewhere = || {
                            set.agents.offline_route(text, agent, role).is_some()
                                || self.offline.as_ref().is_some_and(|offline| {
                                    offline
                                        .route(&self.offline_turn(set, state, agent))
                                        .is_some()
                                })
                        };
                        match set.agents.fast_route_decision(text, agent, role) {
                            Decision::Route { .. } => true,
                            Decision::Abstain(Abstention::Primary { confidence }) => {
                                (confidence >= OFFLINE_PRIMARY_CONFIDENCE && keep == Keep::No)
                                    || elsewhere()
                            }
                            Decision::Abstain(Abstention::Holder) => false,
                            Decision::Abstain(_) => elsewhere(),
                        }
                    });
            if leaves {
                tracing::info!(from = %agent.name, "offline: left by the router");
                metrics::counter!("zaguan_offline_leaves_total", "agent" => agent.name.clone())
                    .increment(1);
                return self.set_dialog_state(state, DialogState::primary()).await;
            }
        }
        if message.is_none() {
            self.decided_without_model(&state.wa_id, &agent.name, OFFLINE);
        }
        let message = match message {
            Some(message) => message,
            None => match self
                .fast_delegation(set, state, agent)
                .or_else(|| self.offline_delegation(set, state, agent))
            {
                // Offline, keywords still find the right subgraph, whose offline reply is more
                // useful than the primary's general one.
                Some((target, delegation)) => {
                    metrics::counter!("zaguan_offline_routes_total", "agent" => target.name.clone())
                        .increment(1);
                    delegation
                }
                None => self.offline_message(set, state, agent).await?,
            },
        };
        self.append(state, message).await
    }

    /// The step of `agent` when no model answers: the offline engine's, or the agent's
    /// `offline_reply` with the contact lines when the engine does not serve it.
    async fn offline_message(
        &self,
        set: &Assistants,
        state: &mut State,
        agent: &Agent,
    ) -> Result<NewMessage, EngineError> {
        let answer = match &self.offline {
            Some(offline) => offline.answer(&self.offline_turn(set, state, agent)).await,
            None => None,
        };
        let served = |how: &'static str| {
            metrics::counter!("zaguan_offline_turns_total", "agent" => agent.name.clone(), "how" => how)
                .increment(1);
        };
        Ok(match answer {
            Some(OfflineAnswer::Calls(calls)) => {
                metrics::counter!("zaguan_offline_calls_total", "agent" => agent.name.clone())
                    .increment(calls.len() as u64);
                tracing::info!(agent = %agent.name, calls = calls.len(), "offline: tools called");
                self.ai_message(&state.wa_id, "", &agent.name, calls)
            }
            Some(OfflineAnswer::Reply { text, attachments }) => {
                served("engine");
                let mut message = self.ai_message(&state.wa_id, &text, &agent.name, Vec::new());
                message.attachments = attachments;
                message
            }
            Some(OfflineAnswer::Transfer { to }) => {
                tracing::info!(from = %agent.name, %to, "offline: handed to another assistant");
                metrics::counter!("zaguan_offline_calls_total", "agent" => agent.name.clone())
                    .increment(1);
                // As a tapped row asking for `to`: a subgraph hands back, and the primary
                // enters `to` with the customer's words in the next node.
                state.asked_for = Some(to.to_owned());
                let call = match agent.kind {
                    AgentKind::Primary => {
                        let text = super::router::unanswered_user_text(state)
                            .unwrap_or_default()
                            .to_owned();
                        super::router::delegation_call(to, &text)
                    }
                    AgentKind::Subgraph => {
                        super::router::leave_call(format!("the offline engine hands over to {to}"))
                    }
                };
                self.ai_message(&state.wa_id, "", &agent.name, vec![call])
            }
            Some(OfflineAnswer::Handoff { reason }) => {
                served("handoff");
                let key = state
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.message.role == MessageRole::Human)
                    .and_then(|m| m.message.wamids.last())
                    .map_or_else(String::new, |wamid| format!("offline:{}", wamid.as_str()));
                let text = self
                    .hand_over(set, state, &reason, &key, self.now())
                    .await?;
                self.ai_message(
                    &state.wa_id,
                    &text,
                    super::confirmations::HANDOFF_AGENT,
                    Vec::new(),
                )
            }
            None => {
                served("offline_reply");
                metrics::counter!("zaguan_offline_replies_total", "agent" => agent.name.clone())
                    .increment(1);
                let text = set.with_contact(
                    agent
                        .offline_reply
                        .as_deref()
                        .unwrap_or(phrases::apology(None)),
                );
                self.ai_message(&state.wa_id, &text, &agent.name, Vec::new())
            }
        })
    }

    /// What the offline engine sees of `state`'s turn in `agent`.
    pub(super) fn offline_turn<'a>(
        &self,
        set: &'a Assistants,
        state: &'a State,
        agent: &'a Agent,
    ) -> OfflineTurn<'a> {
        let role = state.user.role;
        OfflineTurn {
            agent,
            role,
            assistants: set
                .agents
                .agents()
                .filter(|a| a.kind == AgentKind::Subgraph && a.roles.contains(&role))
                .map(|a| a.name.as_str())
                .collect(),
            contact: set.business_contact.as_deref(),
            lang: state.lang.as_deref().unwrap_or("es"),
            location: state.location,
            messages: &state.messages,
            now: self.now(),
        }
    }

    pub(super) fn request_for(&self, set: &Assistants, agent: &Agent, state: &State) -> LlmRequest {
        let role = state.user.role;
        let context = PromptContext {
            user_name: state.user.name.clone(),
            user_role: role,
            user_info: state.user_info(),
            lang: state.lang.clone().unwrap_or_else(|| "es".to_owned()),
            now: spanish_now(self.now().with_timezone(&self.settings.timezone)),
            business_name: set.business_name.clone(),
            business_contact: set.business_contact.clone().unwrap_or_default(),
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
}

impl Engine {
    /// An AI message of `agent` for the history, stamped now.
    pub(super) fn ai_message(
        &self,
        wa_id: &WaId,
        content: &str,
        agent: &str,
        tool_calls: Vec<ToolCall>,
    ) -> NewMessage {
        NewMessage {
            wa_id: wa_id.clone(),
            role: MessageRole::Ai,
            content: content.to_owned(),
            agent: Some(agent.to_owned()),
            tool_calls,
            tool_call_id: None,
            wamids: Vec::new(),
            attachments: Vec::new(),
            at: self.now(),
        }
    }
}

/// "jueves 2026-11-26 10:30 (CET)": the prompts are Spanish, and so is the day they are told.
pub(super) fn spanish_now(now: chrono::DateTime<chrono_tz::Tz>) -> String {
    use chrono::Datelike as _;
    format!(
        "{} {}",
        crate::domain::phrases::weekday_es(now.weekday()),
        now.format("%Y-%m-%d %H:%M (%Z)")
    )
}
