//! The assistant node: one model call for the agent `route_to_workflow` names, with its tools
//! and the conversation's context, or the fast path's decision instead of the call.

use crate::domain::{AgentName, DialogState, Role, phrases};
use std::sync::Arc;

use crate::agents::fast_route::{Abstention, Decision};
use crate::agents::{Agent, AgentKind, PromptContext};
use crate::domain::MessageRole;
use crate::domain::llm_call::{FAST_PATH, OFFLINE};
use crate::engine::context_extractor::State;
use crate::engine::offline::{Keep, OfflineAnswer, OfflineTurn};
use crate::engine::route::route_to_workflow;
use crate::llm::{LlmRequest, RenderPrompt, SystemPrompt};
use crate::store::NewMessage;

use crate::engine::offline::{ModelStatus, OfflineAssistants};
use crate::engine::turn::EngineError;
use crate::engine::turn::PromptSet;
use crate::engine::turn::graph::Turn;
use crate::engine::turn::{confirmations, router};
use crate::llm::Llm;

/// Offline, a subgraph hands back a message the router reads as the primary assistant's with at
/// least this probability (a thanks, a goodbye); below it, the subgraph keeps the conversation.
const OFFLINE_PRIMARY_CONFIDENCE: f32 = 0.5;

/// The assistant node, with what only it uses: the model, whether the model answers, and
/// the offline engine that serves when it does not.
pub(super) struct AssistantNode<'a> {
    pub(super) llm: &'a dyn Llm,
    pub(super) model_status: &'a ModelStatus,
    /// Serves the assistants when no model answers; `None`: their `offline_reply`.
    pub(super) offline: Option<&'a dyn OfflineAssistants>,
}

impl AssistantNode<'_> {
    /// An assistant node: one LLM call with the agent's prompt, tools and the cleaned window —
    /// unless the fast path decides the route by keywords, or the LLM is down and the agent's
    /// offline reply (after keyword routing, where it finds the subgraph) answers instead.
    pub(super) async fn run(
        &self,
        turn: &Turn<'_>,
        state: &mut State,
        llm_down: &mut bool,
    ) -> Result<(), EngineError> {
        let role = state.user.role;
        let (route, fallback) = route_to_workflow(&state.dialog_state, role, &turn.set.agents);
        if let Some(fallback) = fallback {
            tracing::warn!(
                ?fallback,
                "dialog_state not followed; using {}",
                route.agent.name
            );
            metrics::counter!("zaguan_route_fallbacks_total").increment(1);
            Box::pin(turn.set_dialog_state(state, DialogState::primary())).await?;
        }
        let agent = route.agent;
        metrics::counter!("zaguan_route_total", "agent" => agent.name.to_string()).increment(1);

        if let Some(message) = router::tapped_route(turn, state, agent) {
            turn.decided_without_model(&state.wa_id, &agent.name, FAST_PATH);
            turn.append(state, message);
            return Ok(());
        }
        if turn.settings.fast_route
            && let Some((target, message)) = router::fast_delegation(turn, state, agent)
        {
            metrics::counter!("zaguan_fast_route_total", "agent" => target.name.to_string())
                .increment(1);
            tracing::info!(to = %target.name, "fast path: entered by the router");
            turn.decided_without_model(&state.wa_id, &agent.name, FAST_PATH);
            turn.append(state, message);
            return Ok(());
        }
        if turn.settings.fast_route
            && route.in_subgraph
            && let Some((target, message)) = router::fast_leave(turn, state, agent)
        {
            // The primary assistant's fast path enters `target` in the next node.
            metrics::counter!("zaguan_fast_leaves_total", "agent" => agent.name.to_string())
                .increment(1);
            tracing::info!(from = %agent.name, to = %target.name, "fast path: left for another assistant");
            turn.decided_without_model(&state.wa_id, &agent.name, FAST_PATH);
            turn.append(state, message);
            return Ok(());
        }

        let message = if *llm_down {
            None
        } else {
            let request = request_for(turn, agent, state);
            match self.llm.complete(&request).await {
                Ok(response) => Some({
                    self.model_status.answered();
                    turn.ai_message(
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
                    self.model_status.went_offline(turn.now());
                    *llm_down = true;
                    None
                }
                Err(error) => {
                    tracing::error!(agent = %agent.name, "LLM failed, answering offline: {error}");
                    self.model_status.went_offline(turn.now());
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
            let keep = self.offline.map_or(Keep::No, |offline| {
                offline.keeps(&offline_turn(turn, state, agent))
            });
            let leaves = keep != Keep::Answer
                && state
                    .messages
                    .last()
                    .filter(|m| m.message.role == MessageRole::Human)
                    .is_some_and(|last| {
                        let text = &last.message.content;
                        let elsewhere = || {
                            turn.set
                                .agents
                                .offline_route(text, agent, state.asking())
                                .is_some()
                                || self.offline.is_some_and(|offline| {
                                    offline.route(&offline_turn(turn, state, agent)).is_some()
                                })
                        };
                        match turn
                            .set
                            .agents
                            .fast_route_decision(text, agent, state.asking())
                        {
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
                metrics::counter!("zaguan_offline_leaves_total", "agent" => agent.name.to_string())
                    .increment(1);
                return Box::pin(turn.set_dialog_state(state, DialogState::primary())).await;
            }
        }
        if message.is_none() {
            turn.decided_without_model(&state.wa_id, &agent.name, OFFLINE);
        }
        let message = match message {
            Some(message) => message,
            None => match router::fast_delegation(turn, state, agent)
                .or_else(|| router::offline_delegation(turn, self.offline, state, agent))
            {
                // Offline, keywords still find the right subgraph, whose offline reply is more
                // useful than the primary's general one.
                Some((target, delegation)) => {
                    metrics::counter!("zaguan_offline_routes_total", "agent" => target.name.to_string())
                        .increment(1);
                    delegation
                }
                None => Box::pin(self.offline_message(turn, state, agent)).await?,
            },
        };
        turn.append(state, message);
        Ok(())
    }

    /// The step of `agent` when no model answers: the offline engine's, or the agent's
    /// `offline_reply` with the contact lines when the engine does not serve it.
    async fn offline_message(
        &self,
        turn: &Turn<'_>,
        state: &mut State,
        agent: &Agent,
    ) -> Result<NewMessage, EngineError> {
        let answer = match self.offline {
            Some(offline) => offline.answer(&offline_turn(turn, state, agent)).await,
            None => None,
        };
        let served = |how: &'static str| {
            metrics::counter!("zaguan_offline_turns_total", "agent" => agent.name.to_string(), "how" => how)
                .increment(1);
        };
        Ok(match answer {
            Some(OfflineAnswer::Calls(calls)) => {
                metrics::counter!("zaguan_offline_calls_total", "agent" => agent.name.to_string())
                    .increment(calls.len() as u64);
                tracing::info!(agent = %agent.name, calls = calls.len(), "offline: tools called");
                turn.ai_message(&state.wa_id, "", &agent.name, calls)
            }
            Some(OfflineAnswer::Reply { text, attachments }) => {
                served("engine");
                let mut message = turn.ai_message(&state.wa_id, &text, &agent.name, Vec::new());
                message.attachments = attachments;
                message
            }
            Some(OfflineAnswer::Transfer { to }) => {
                tracing::info!(from = %agent.name, %to, "offline: handed to another assistant");
                metrics::counter!("zaguan_offline_calls_total", "agent" => agent.name.to_string())
                    .increment(1);
                // As a tapped row asking for `to`: a subgraph hands back, and the primary
                // enters `to` with the customer's words in the next node.
                state.asked_for = Some(to.to_owned());
                let call = match agent.kind {
                    AgentKind::Primary => {
                        let text = router::unanswered_user_text(state)
                            .unwrap_or_default()
                            .to_owned();
                        router::delegation_call(to, &text)
                    }
                    AgentKind::Subgraph => {
                        router::leave_call(format!("the offline engine hands over to {to}"))
                    }
                };
                turn.ai_message(&state.wa_id, "", &agent.name, vec![call])
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
                let text = turn.hand_over(state, &reason, &key, turn.now()).await?;
                turn.ai_message(
                    &state.wa_id,
                    &text,
                    confirmations::HANDOFF_AGENT,
                    Vec::new(),
                )
            }
            None => {
                served("offline_reply");
                metrics::counter!("zaguan_offline_replies_total", "agent" => agent.name.to_string())
                    .increment(1);
                let text = turn.set.with_contact(
                    agent
                        .offline_reply
                        .as_deref()
                        .unwrap_or(phrases::apology(None)),
                );
                turn.ai_message(&state.wa_id, &text, &agent.name, Vec::new())
            }
        })
    }
}

/// What the offline engine sees of `state`'s turn in `agent`.
pub(super) fn offline_turn<'a>(
    turn: &Turn<'a>,
    state: &'a State,
    agent: &'a Agent,
) -> OfflineTurn<'a> {
    let role = state.user.role;
    OfflineTurn {
        agent,
        role,
        assistants: turn
            .set
            .agents
            .agents()
            .filter(|a| a.kind == AgentKind::Subgraph && a.roles.contains(&role))
            .map(|a| a.name.as_str())
            .collect(),
        contact: turn.set.business_contact.as_deref(),
        lang: state.lang.as_deref().unwrap_or("es"),
        location: state.location,
        messages: &state.messages,
        now: turn.now(),
    }
}

fn request_for(turn: &Turn<'_>, agent: &Agent, state: &State) -> LlmRequest {
    let role = state.user.role;
    let prompt = AssistantPrompt {
        set: Arc::clone(turn.set),
        agent: agent.name.clone(),
        user_name: state.user.name.clone(),
        user_role: role,
        user_info: state.user_info(),
        lang: state.lang.clone(),
        now: spanish_now(turn.now().with_timezone(&turn.settings.timezone)),
    };
    let tools = turn.set.tools_for(agent, role);
    LlmRequest {
        agent: agent.name.clone(),
        conversation: Some(state.wa_id.as_str().to_owned()),
        system: SystemPrompt::Rendered(Arc::new(prompt)),
        messages: state.model_messages(turn.settings.window),
        tools,
    }
}

/// An assistant's system prompt, rendered from the turn's prompt set each time its call is
/// encoded: a call waiting on the model keeps these fields, not the prompt's text.
struct AssistantPrompt {
    set: Arc<PromptSet>,
    agent: AgentName,
    user_name: Option<String>,
    user_role: Role,
    user_info: String,
    lang: Option<String>,
    now: String,
}

impl RenderPrompt for AssistantPrompt {
    fn render(&self) -> String {
        let registry = &self.set.agents;
        let Some(agent) = registry.get(self.agent.as_str()) else {
            tracing::error!(agent = %self.agent, "prompt did not render: no such agent");
            return String::new();
        };
        let context = PromptContext {
            user_name: self.user_name.clone(),
            user_role: self.user_role,
            user_info: self.user_info.clone(),
            lang: self.lang.clone().unwrap_or_else(|| "es".to_owned()),
            now: self.now.clone(),
            business_name: self.set.business_name.clone(),
            business_contact: self.set.business_contact.clone().unwrap_or_default(),
        };
        registry
            .render_system_prompt(agent, &context)
            .unwrap_or_else(|error| {
                tracing::error!(agent = %self.agent, "prompt did not render: {error:#}");
                String::new()
            })
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
