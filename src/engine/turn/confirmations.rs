//! Before an assistant runs: a pending data-changing action is confirmed, cancelled or asked
//! again, and a stale Confirm/Cancel button answered.

use crate::domain::{Content, Role, phrases};
use crate::engine::consent::{Consent, Offered, consent_after};
use crate::engine::handoff::asks_for_person;
use crate::engine::turn::inbound::is_reaction;

use crate::domain::ToolCall;
use crate::domain::{MessageRole, PendingAction};
use crate::engine::context_extractor::State;
use crate::engine::pending::{self, Answer};
use crate::engine::presses::{Answered, Said};
use crate::engine::tools::ToolOutput;
use crate::store::{InboxEntry, NewMessage, OptOut};

use crate::engine::turn::EngineError;
use crate::engine::turn::graph::Turn;
use crate::engine::turn::inbound::is_unreadable_media;

/// Why a conversation was handed over when the customer asked for a person in so many words.
const PERSON_ASKED: &str = "El cliente ha pedido hablar con una persona";

/// The `agent` of the reply to such a request, in the history.
pub(super) const HANDOFF_AGENT: &str = "handoff";

/// The `agent` of an opt-out's or opt-in's acknowledgement, in the history.
const CONSENT_AGENT: &str = "consent";

/// The `agent` of what a reaction to a confirmation's buttons is answered with, in the
/// history: said once per pending action.
const REACTION_AGENT: &str = "confirmation_reminder";

/// A turn of reactions only (`new`): when one of them is to the message carrying the pending
/// action's buttons, the customer is told once that nothing is done yet and how to confirm it
/// — a 👍 there is not a yes, and silence would let them believe it is. It confirms nothing.
/// Returns whether a reply was written; any other reaction stays unanswered.
pub(super) async fn answer_reaction(
    turn: &Turn<'_>,
    state: &mut State,
    new: &[&InboxEntry],
) -> Result<bool, EngineError> {
    let Some(action) = state.pending_action.clone() else {
        return Ok(false);
    };
    let expired = turn.now() - action.created_at
        > chrono::Duration::from_std(turn.settings.pending_action_ttl)
            .unwrap_or(chrono::Duration::MAX);
    if expired || action.id.is_empty() {
        return Ok(false);
    }
    let already = state.messages.iter().any(|m| {
        m.message.agent.as_deref() == Some(REACTION_AGENT) && m.message.at >= action.created_at
    });
    if already {
        return Ok(false);
    }
    let mut to_buttons = false;
    for entry in new {
        let Content::Reaction {
            message_id: Some(id),
            emoji: Some(emoji),
        } = &entry.content
        else {
            continue;
        };
        if emoji.is_empty() {
            continue;
        }
        let Ok(wamid) = crate::domain::WaMessageId::parse(id) else {
            continue;
        };
        if let Some(ours) = turn.store.outbox_by_wamid(&wamid).await?
            && ours
                .buttons
                .iter()
                .any(|b| b.id.ends_with(&format!(":{}", action.id)))
        {
            to_buttons = true;
        }
    }
    if !to_buttons {
        return Ok(false);
    }
    tracing::info!(tool = %action.tool, "a reaction to a confirmation's buttons: told how to confirm");
    metrics::counter!("zaguan_pending_actions_total", "outcome" => "reaction").increment(1);
    let text = phrases::reaction_to_confirmation(state.lang.as_deref(), &action.summary);
    turn.append(
        state,
        turn.ai_message(&state.wa_id, &text, REACTION_AGENT, Vec::new()),
    );
    Ok(true)
}

/// What the engine answers without an assistant: the user's yes or no to a pending action,
/// and media it cannot read. Runs once per new human message.
pub(super) async fn before_assistant(
    turn: &Turn<'_>,
    state: &mut State,
    new: &[&InboxEntry],
) -> Result<(), EngineError> {
    let typed: Vec<&str> = new
        .iter()
        .filter(|e| !is_reaction(e))
        .filter_map(|e| e.text.as_deref())
        .collect();
    if typed.len() == new.len()
        && let Some(said) = consent_after(&typed.join("\n"), &offered_before(state))
        && let Some(last) = new.last()
        // A newcomer's «Start» or «Voltar» is not an opt-in: there is nothing to resume.
        && (said == Consent::OptOut || state.user.opted_out())
    {
        return settle_consent(turn, state, said, last).await;
    }
    if answer_follow_up(turn, state, new, &typed).await? {
        return Ok(());
    }
    if let Some(action) = state.pending_action.clone() {
        let expired = turn.now() - action.created_at
            > chrono::Duration::from_std(turn.settings.pending_action_ttl)
                .unwrap_or(chrono::Duration::MAX);
        if expired {
            tracing::info!(tool = %action.tool, "pending action dropped: expired");
            metrics::counter!("zaguan_pending_actions_total", "outcome" => "expired").increment(1);
            turn.store.set_pending_action(&state.wa_id, None).await?;
            state.pending_action = None;
        }
    }
    match pending::answer(new, state.pending_action.as_ref()) {
        None => {}
        Some(Answer::Stale) => return answer_stale_button(turn, state).await,
        Some(answer) => {
            if let Some(action) = state.pending_action.clone() {
                return settle_pending(turn, state, action, answer).await;
            }
        }
    }
    if new.iter().all(|e| is_unreadable_media(e)) {
        metrics::counter!("zaguan_media_answers_total").increment(1);
        let text = phrases::media_answer(state.lang.as_deref());
        turn.append(
            state,
            turn.ai_message(&state.wa_id, text, "guard", Vec::new()),
        );
        return Ok(());
    }
    if state.user.role != Role::Agent
        && typed.len() == new.len()
        && asks_for_person(&typed.join("\n"))
        && let Some(last) = new.last()
    {
        // Like a button: the staff are told and the customer hears the truth, no model.
        metrics::counter!("zaguan_person_requests_total").increment(1);
        let key = format!("asked:{}", last.wamid.as_str());
        let text = turn
            .hand_over(state, PERSON_ASKED, &key, turn.now())
            .await?;
        turn.append(
            state,
            turn.ai_message(&state.wa_id, &text, HANDOFF_AGENT, Vec::new()),
        );
        return Ok(());
    }
    Ok(())
}

/// A press of one of the business's follow-up buttons, or the words a follow-up question
/// awaits (a counter-offer's amount), answered without a model. Returns whether it was.
async fn answer_follow_up(
    turn: &Turn<'_>,
    state: &mut State,
    new: &[&InboxEntry],
    typed: &[&str],
) -> Result<bool, EngineError> {
    let (Some(presses), Some(last)) = (turn.presses, new.last()) else {
        return Ok(false);
    };
    let pressed = pending::pressed(last);
    let text = typed.join("\n");
    // The bot's last words before this turn's message.
    let this = state
        .messages
        .iter()
        .rposition(|m| m.message.role == MessageRole::Human)
        .unwrap_or(state.messages.len());
    let after = state.messages[..this]
        .iter()
        .rev()
        .find(|m| m.message.role == MessageRole::Ai)
        .and_then(|m| m.message.agent.as_deref());
    let said = Said {
        wa_id: &state.wa_id,
        lang: state.lang.as_deref(),
        pressed: pressed.as_deref(),
        text: (pressed.is_none() && !text.trim().is_empty()).then_some(text.as_str()),
        after,
        now: turn.now(),
    };
    let reply = match presses.answer(&said).await? {
        Answered::No | Answered::Noted => return Ok(false),
        Answered::Reply(reply) => reply,
        Answered::Run { agent, tool, args } => {
            metrics::counter!("zaguan_follow_up_answers_total", "agent" => agent).increment(1);
            run_for(turn, state, agent, tool, args).await?;
            return Ok(true);
        }
    };
    metrics::counter!("zaguan_follow_up_answers_total", "agent" => reply.agent).increment(1);
    let message = if reply.buttons.is_empty() {
        turn.ai_message(&state.wa_id, &reply.text, reply.agent, Vec::new())
    } else {
        let mut message = turn.ai_message(&state.wa_id, "", reply.agent, Vec::new());
        message.attachments = vec![crate::store::Attachment::Buttons {
            text: reply.text,
            buttons: reply.buttons,
        }];
        message
    };
    turn.append(state, message);
    Ok(true)
}

/// Runs `tool` as `agent`'s call, in that assistant, for it to answer from the result.
async fn run_for(
    turn: &Turn<'_>,
    state: &mut State,
    agent: &str,
    tool: &str,
    args: serde_json::Value,
) -> Result<(), EngineError> {
    turn.set_dialog_state(state, crate::domain::DialogState::entered(agent))
        .await?;
    let call = ToolCall {
        id: crate::llm::new_call_id(),
        name: tool.to_owned(),
        args: args.into(),
    };
    turn.append(
        state,
        turn.ai_message(&state.wa_id, "", agent, vec![call.clone()]),
    );
    let output: ToolOutput = if turn.tools.allows(&call.name, state.user.role) {
        let context = turn.tool_context(state);
        turn.tools
            .run(&call, &context, turn.settings.tool_timeout)
            .await
    } else {
        format!(
            "Error: the tool {} is not available for this user.",
            call.name
        )
        .into()
    };
    let ToolOutput {
        text: content,
        attachments,
        events,
    } = output;
    turn.record_events(&state.wa_id, events, turn.now(), &call.id)
        .await?;
    let message = NewMessage {
        wa_id: state.wa_id.clone(),
        role: MessageRole::Tool,
        content,
        agent: Some(agent.into()),
        tool_calls: Vec::new(),
        tool_call_id: Some(call.id),
        wamids: Vec::new(),
        attachments,
        at: turn.now(),
    };
    turn.append(state, message);
    Ok(())
}

/// What the bot said before the message this turn answers: the texts, buttons and list rows
/// since the customer's previous message (the last one is this turn's own).
fn offered_before(state: &State) -> Offered<'_> {
    let earlier = &state.messages[..state.messages.len().saturating_sub(1)];
    let since = earlier
        .iter()
        .rposition(|m| m.message.role == MessageRole::Human)
        .map_or(0, |at| at + 1);
    let mut offered = Offered::default();
    for message in &earlier[since..] {
        let message = &message.message;
        if message.role == MessageRole::Ai && !message.content.trim().is_empty() {
            offered.texts.push(&message.content);
            if message.agent.as_deref() == Some(CONSENT_AGENT) {
                offered.about_consent = true;
            }
        }
        for attachment in &message.attachments {
            match attachment {
                crate::store::Attachment::Buttons { text, buttons } => {
                    offered.texts.push(text);
                    offered
                        .choices
                        .extend(buttons.iter().map(|b| b.title.as_str()));
                }
                crate::store::Attachment::List { text, rows } => {
                    offered.texts.push(text);
                    offered
                        .choices
                        .extend(rows.iter().map(|r| r.title.as_str()));
                }
                crate::store::Attachment::Image { .. } => {}
            }
        }
    }
    offered
}

/// An opt-out or opt-in, like a button: recorded on the contact for every instance to see,
/// acknowledged in their language, no model. Whatever was waiting for their yes is dropped:
/// they said something else.
async fn settle_consent(
    turn: &Turn<'_>,
    state: &mut State,
    said: Consent,
    last: &InboxEntry,
) -> Result<(), EngineError> {
    let now = turn.now();
    let (opt_out, text, label) = match said {
        Consent::OptOut => (
            Some(OptOut {
                at: now,
                source: format!(
                    "keyword:{}",
                    last.text
                        .as_deref()
                        .unwrap_or_default()
                        .trim()
                        .chars()
                        .take(40)
                        .collect::<String>()
                ),
            }),
            phrases::opted_out(state.lang.as_deref()),
            "opt_out",
        ),
        Consent::OptIn => (None, phrases::opted_in(state.lang.as_deref()), "opt_in"),
    };
    turn.store
        .set_opt_out(&state.wa_id, opt_out.as_ref())
        .await?;
    turn.users.forget(&state.wa_id);
    if state.pending_action.take().is_some() {
        turn.store.set_pending_action(&state.wa_id, None).await?;
    }
    tracing::info!(
        change = label,
        "the contact changed what they want to receive"
    );
    metrics::counter!("zaguan_consent_changes_total", "change" => label).increment(1);
    turn.append(
        state,
        turn.ai_message(&state.wa_id, text, CONSENT_AGENT, Vec::new()),
    );
    Ok(())
}

/// A Confirm or Cancel button of an action that is not the pending one: nothing is run.
/// The user is told so and, when another action is pending, shown it again with its own
/// buttons; otherwise asked what they need.
async fn answer_stale_button(turn: &Turn<'_>, state: &mut State) -> Result<(), EngineError> {
    metrics::counter!("zaguan_pending_actions_total", "outcome" => "stale_button").increment(1);
    let text = match state.pending_action.clone() {
        Some(mut action) => {
            tracing::info!(tool = %action.tool, "stale confirmation button: the pending action asked again");
            if action.id.is_empty() {
                // A pending action stored before actions had ids.
                action.id = pending::action_id(&state.wa_id, &action.tool);
            }
            // Asked in this turn: the reply carries its summary and buttons again.
            action.created_at = turn.now();
            turn.store
                .set_pending_action(&state.wa_id, Some(&action))
                .await?;
            state.pending_action = Some(action);
            phrases::STALE_BUTTON_REASKED
        }
        None => {
            tracing::info!("stale confirmation button: nothing pending");
            phrases::STALE_BUTTON
        }
    };
    turn.append(
        state,
        turn.ai_message(&state.wa_id, text, "guard", Vec::new()),
    );
    Ok(())
}

/// Settles the pending action with the user's answer, written as the assistant's tool call
/// and its result so the assistant answers from it as from any tool: run on a yes, dropped
/// on a no, and on anything else dropped with what was pending, for the assistant to ask
/// again with the user's changes. The call is stored before the action is cleared and run:
/// a crash in between asks the user again.
async fn settle_pending(
    turn: &Turn<'_>,
    state: &mut State,
    action: PendingAction,
    answer: Answer,
) -> Result<(), EngineError> {
    let confirmed = matches!(answer, Answer::Confirm);
    let call = ToolCall {
        // A confirmed call says so in its id: resumed after a crash, it runs without
        // asking again, and its records keep the ids its first run gave them.
        id: if confirmed {
            pending::confirmed_call_id(&action.id)
        } else {
            crate::llm::new_call_id()
        },
        name: action.tool.clone(),
        args: action.args.clone().into(),
    };
    turn.append(
        state,
        turn.ai_message(&state.wa_id, "", &action.agent, vec![call.clone()]),
    );
    turn.save(state).await?;
    turn.store.set_pending_action(&state.wa_id, None).await?;
    state.pending_action = None;
    let outcome = match answer {
        Answer::Confirm => "confirmed",
        Answer::Decline => "declined",
        Answer::Unclear | Answer::Stale => "unclear",
    };
    tracing::info!(tool = %action.tool, outcome, "pending action settled");
    metrics::counter!("zaguan_pending_actions_total", "outcome" => outcome).increment(1);
    let output: ToolOutput = match answer {
        Answer::Confirm if turn.tools.allows(&call.name, state.user.role) => {
            let context = turn.tool_context(state);
            let result = turn
                .tools
                .run(&call, &context, turn.settings.tool_timeout)
                .await;
            // The user's appointments or offers may have changed.
            turn.contexts.forget(&state.wa_id);
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
    turn.record_events(&state.wa_id, events, turn.now(), &call.id)
        .await?;
    let message = NewMessage {
        wa_id: state.wa_id.clone(),
        role: MessageRole::Tool,
        content,
        agent: Some(action.agent.clone()),
        tool_calls: Vec::new(),
        tool_call_id: Some(call.id),
        wamids: Vec::new(),
        attachments,
        at: turn.now(),
    };
    turn.append(state, message);
    Ok(())
}
