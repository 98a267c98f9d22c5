//! The Router node: an AI message's tool calls become a delegation (`To<X>Assistant`), a hand
//! back (`CompleteOrEscalate`) or tool runs; and the fast path's own entries and exits,
//! recorded as the model would have made them.

use crate::agents::{Agent, AgentKind, AgentRegistry, COMPLETE_OR_ESCALATE};
use crate::domain::ToolCall;
use crate::domain::{MessageRole, PendingAction};
use crate::engine::context_extractor::State;
use crate::engine::pending;
use crate::engine::tools::ToolOutput;
use crate::store::NewMessage;

use crate::domain::DialogState;
use crate::engine::offline::OfflineAssistants;
use crate::engine::turn::EngineError;
use crate::engine::turn::assistant::offline_turn;
use crate::engine::turn::graph::Turn;

/// What one tool call of an AI message becomes.
enum Plan<'a> {
    /// A `To<X>Assistant` call: the subgraph `target` takes over.
    Enter {
        target: &'a Agent,
        query: String,
    },
    /// The seed's `leave_skill`: a subgraph's `CompleteOrEscalate` hands back to the primary.
    LeaveSkill {
        reason: String,
    },
    Run,
    Refuse(String),
}

/// The `To<X>Assistant` call the primary agent would make for the user's new message, when
/// the router is sure which reachable subgraph it belongs to: written as if the LLM had made
/// it, so the router node, the history and every provider see an ordinary delegation.
pub(super) fn fast_delegation<'a>(
    turn: &Turn<'a>,
    state: &State,
    agent: &Agent,
) -> Option<(&'a Agent, NewMessage)> {
    delegation(turn, state, agent, |text| {
        turn.set.agents.fast_route(text, agent, state.asking())
    })
}

/// Offline, where the fast path is unsure and no model will decide: the primary
/// delegates to the subgraph the router reads as most likely, when clear enough, else to
/// the one the offline engine names by the domain's words.
pub(super) fn offline_delegation<'a>(
    turn: &Turn<'a>,
    offline: Option<&dyn OfflineAssistants>,
    state: &State,
    agent: &Agent,
) -> Option<(&'a Agent, NewMessage)> {
    delegation(turn, state, agent, |text| {
        turn.set
            .agents
            .offline_route(text, agent, state.asking())
            .or_else(|| {
                let name = offline?.route(&offline_turn(turn, state, agent))?;
                turn.set.agents.get(name)
            })
    })
}

/// The primary's `To<X>Assistant` call for the user's unanswered message, to the subgraph
/// `route` reads it as.
fn delegation<'a>(
    turn: &Turn<'_>,
    state: &State,
    agent: &Agent,
    route: impl FnOnce(&str) -> Option<&'a Agent>,
) -> Option<(&'a Agent, NewMessage)> {
    if agent.kind != AgentKind::Primary || !state.dialog_state.is_primary() {
        return None;
    }
    let text = unanswered_user_text(state)?;
    let target = route(text)?;
    let call = delegation_call(&target.name, text);
    Some((
        target,
        turn.ai_message(&state.wa_id, "", &agent.name, vec![call]),
    ))
}

/// A tapped list row asks a named assistant (the property assistant, for a search result):
/// the primary delegates to it, or the subgraph holding the conversation hands back so the
/// primary can, whatever the router or a model would read in the row's words.
pub(super) fn tapped_route(
    turn: &Turn<'_>,
    state: &mut State,
    agent: &Agent,
) -> Option<NewMessage> {
    let name = state.asked_for.clone()?;
    let role = state.user.role;
    let target = turn
        .set
        .agents
        .get(&name)
        .filter(|t| t.kind == AgentKind::Subgraph && t.roles.contains(&role));
    let Some(target) = target.filter(|t| t.name != agent.name) else {
        // There already, or not one this user may reach: the assistant reads the row.
        state.asked_for = None;
        return None;
    };
    let call = match agent.kind {
        AgentKind::Primary if state.dialog_state.is_primary() => {
            state.asked_for = None;
            delegation_call(&target.name, unanswered_user_text(state)?)
        }
        AgentKind::Subgraph => leave_call(format!("the user tapped an option for {}", target.name)),
        _ => {
            state.asked_for = None;
            return None;
        }
    };
    tracing::info!(from = %agent.name, to = %target.name, "a tapped list row routes the turn");
    metrics::counter!("zaguan_tapped_routes_total", "agent" => target.name.to_string())
        .increment(1);
    Some(turn.ai_message(&state.wa_id, "", &agent.name, vec![call]))
}

/// The `CompleteOrEscalate` the subgraph `agent` holding the conversation would call when
/// the router is sure the user's new message belongs to another assistant: the subgraph
/// hands back, and the primary's fast path enters the right one in the same turn.
pub(super) fn fast_leave<'a>(
    turn: &Turn<'a>,
    state: &State,
    agent: &Agent,
) -> Option<(&'a Agent, NewMessage)> {
    let last = state.messages.last()?;
    if last.message.role != MessageRole::Human {
        return None;
    }
    let target = turn
        .set
        .agents
        .fast_route(&last.message.content, agent, state.asking())?;
    let call = leave_call(format!("the user's request is for {}", target.name));
    Some((
        target,
        turn.ai_message(&state.wa_id, "", &agent.name, vec![call]),
    ))
}

/// Router + RouterTool + enter/leave: every call gets exactly one tool message. A
/// delegation or CompleteOrEscalate wins over the other calls of the same message, which
/// are answered as not executed; otherwise regular tools run concurrently.
pub(super) async fn router(
    turn: &Turn<'_>,
    state: &mut State,
    calls: Vec<ToolCall>,
) -> Result<(), EngineError> {
    let role = state.user.role;
    let caller = state
        .last_agent()
        .and_then(|name| turn.set.agents.get(name))
        .unwrap_or_else(|| turn.set.agents.primary_for(role));
    let plans: Vec<Plan<'_>> = calls.iter().map(|c| plan(turn, caller, role, c)).collect();
    let winner = plans
        .iter()
        .position(|p| matches!(p, Plan::Enter { .. } | Plan::LeaveSkill { .. }));

    let results: Vec<ToolOutput> = match winner {
        Some(w) => {
            let (new_state, text, what) = match &plans[w] {
                Plan::Enter { target, query } => (
                    DialogState::entered(target.name.as_str()),
                    format!(
                        "The conversation is now handled by {}. Continue helping the user \
                         with: {query}. Act as the assistant the user talks to, without \
                         mentioning any transfer. When the request is done or outside your \
                         domain, call {COMPLETE_OR_ESCALATE}.",
                        target.name
                    ),
                    format!("{} took over", calls[w].name),
                ),
                Plan::LeaveSkill { reason } => {
                    let (state, text) = leave_skill(reason);
                    (
                        state,
                        text,
                        format!("{COMPLETE_OR_ESCALATE} returned control"),
                    )
                }
                _ => unreachable!("the winner is a transition"),
            };
            // dialog_state first: a crash before the tool messages replays the transition.
            turn.set_dialog_state(state, new_state).await?;
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
            let context = turn.tool_context(state);
            // A call that changes data waits for the user's yes (one per step).
            let mut asked: Option<PendingAction> = None;
            let mut results = Vec::with_capacity(calls.len());
            for (call, plan) in calls.iter().zip(&plans) {
                let outcome = match plan {
                    // Confirmed already: a confirmed action resumed after a crash.
                    Plan::Run if pending::is_confirmed_call(&call.id) => None,
                    Plan::Run => turn.tools.confirmation(call, &context).await,
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
                            "{AWAITING_CONFIRMATION} {summary}. They have been \
                             shown Confirm / Cancel buttons. Tell them in one short sentence \
                             what will be done once they confirm; do not call {} again.",
                            call.name
                        );
                        asked = Some(PendingAction {
                            id: pending::action_id(&state.wa_id, &call.id),
                            tool: call.name.clone(),
                            args: serde_json::Value::clone(&call.args),
                            summary,
                            agent: caller.name.clone(),
                            created_at: turn.now(),
                        });
                        Some(text)
                    }
                });
            }
            let writes = calls
                .iter()
                .zip(&plans)
                .zip(&results)
                .any(|((call, plan), done)| {
                    matches!(plan, Plan::Run) && done.is_none() && turn.tools.writes(&call.name)
                });
            if writes {
                // The call first: a crash while it runs replays it under the same id.
                turn.save(state).await?;
            }
            let resumed = state.pending_action.as_ref().is_some_and(|action| {
                let id = pending::confirmed_call_id(&action.id);
                calls.iter().any(|call| call.id == id)
            });
            if resumed {
                // Confirmed before a crash cut the turn: no longer waiting for a yes.
                turn.store.set_pending_action(&state.wa_id, None).await?;
                state.pending_action = None;
            }
            if let Some(action) = asked {
                turn.save(state).await?;
                turn.store
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
                                turn.tools
                                    .run(call, context, turn.settings.tool_timeout)
                                    .await
                            }
                        }
                    }
                });
            futures::future::join_all(runs).await
        }
    };
    for (call, output) in calls.iter().zip(&results) {
        turn.record_events(
            &state.wa_id,
            output.events.iter().cloned(),
            turn.now(),
            &call.id,
        )
        .await?;
    }
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
            at: turn.now(),
        };
        turn.append(state, message);
    }
    Ok(())
}

fn plan<'a>(
    turn: &Turn<'a>,
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
            Plan::LeaveSkill { reason }
        } else {
            Plan::Refuse(format!(
                "Error: {COMPLETE_OR_ESCALATE} is only for specialised assistants."
            ))
        };
    }
    if let Some(target) = turn.set.agents.delegation_target(&call.name) {
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
        if turn.tools.allows(&call.name, role) {
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

/// How the tool message of a call waiting for the customer's yes begins.
pub const AWAITING_CONFIRMATION: &str = "Waiting for the user's confirmation:";

/// The `To<X>Assistant` call the primary makes to hand `query` to `target`.
pub(super) fn delegation_call(target: &str, query: &str) -> ToolCall {
    ToolCall {
        id: crate::llm::new_call_id(),
        name: AgentRegistry::delegation_tool_name(target),
        args: serde_json::json!({ "query": query }).into(),
    }
}

/// The `CompleteOrEscalate` a subgraph calls to hand the conversation back for `reason`.
pub(super) fn leave_call(reason: String) -> ToolCall {
    ToolCall {
        id: crate::llm::new_call_id(),
        name: COMPLETE_OR_ESCALATE.to_owned(),
        args: serde_json::json!({ "cancel": true, "reason": reason }).into(),
    }
}

/// The user's message the graph still has to answer: the last message when it is the user's,
/// or the user's message before a subgraph handed the conversation back (a `CompleteOrEscalate`
/// call and its result, nothing else), so the primary assistant can route it on.
pub(super) fn unanswered_user_text(state: &State) -> Option<&str> {
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

/// The seed's `leave_skill` node: the dialog state pops back to the primary assistant, and the
/// tool message tells the primary why, so it carries on with the user.
fn leave_skill(reason: &str) -> (DialogState, String) {
    (
        DialogState::primary(),
        format!(
            "Back with the primary assistant ({reason}). Reflect on the conversation and keep \
             helping the user."
        ),
    )
}
