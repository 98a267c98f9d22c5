//! Human handoff: an operator takes a conversation, the bot stays silent (the customer's
//! messages are still stored), the operator's replies go out through the outbox and the
//! WhatsApp formatter, and the conversation returns to the bot when the operator releases it or
//! the handoff expires. Assistants flag conversations for a person with `request_human`.
//!
//! Only these operations and the expiry end a handoff: status webhooks and the business's own
//! echoes never reach the engine as customer messages.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

mod asks;
mod desk;

pub use asks::asks_for_person;
pub use desk::{
    DEFAULT_HANDOFF_SLA, HandoffDesk, HandoffEscalation, HandoffOutcome, HandoffSettings,
    StaffOnCall, StaffRoster,
};

use super::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::domain::Handoff;
use crate::domain::WaId;
use crate::store::{BusinessEvent, Event, NewMessage, NewOutbox, StoreError};
use crate::store::{
    ConversationStore, EventStore, HistoryStore, InboxStore, LeaseStore, OutboxStore, UserStore,
};

/// The tool an assistant calls when the customer asks for a person.
pub const REQUEST_HUMAN: &str = "request_human";

/// How long a handoff lasts unless released (`ZAGUAN_HANDOFF_TTL`).
pub const DEFAULT_HANDOFF_TTL: Duration = Duration::from_secs(2 * 3600);

/// The `agent` of the messages an operator sends, in the history.
pub const OPERATOR_AGENT: &str = "operator";

/// Why a handoff operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    #[error("no conversation {0}")]
    NotFound(String),
    /// The operation does not fit the conversation's state (not taken, window closed…).
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    /// The customer's 24-hour window closed: only the follow-up template can reach them.
    #[error(
        "the customer last wrote at {last_wrote}: past WhatsApp's 24-hour window, a reply would \
         not be delivered; send the follow-up template instead (it invites them to write back)"
    )]
    WindowClosed { last_wrote: DateTime<Utc> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What taking or releasing a conversation writes: its handoff, and the business event.
pub trait HandoffStore: ConversationStore + EventStore {}
impl<T: ConversationStore + EventStore + ?Sized> HandoffStore for T {}

/// What an operator's reply reads and writes: the conversation, the customer's last message,
/// the database's clock, the history and the outbox.
pub trait OperatorReplyStore:
    ConversationStore + HistoryStore + InboxStore + LeaseStore + OutboxStore
{
}
impl<T> OperatorReplyStore for T where
    T: ConversationStore + HistoryStore + InboxStore + LeaseStore + OutboxStore + ?Sized
{
}

/// What the follow-up template needs besides: the customer's name.
pub trait FollowUpStore: OperatorReplyStore + UserStore {}
impl<T: OperatorReplyStore + UserStore + ?Sized> FollowUpStore for T {}

/// Gives `wa_id`'s conversation to `operator` for `ttl`; any request for a person is settled
/// and any action awaiting the customer's yes is dropped (the operator decides now).
pub async fn take(
    store: &(impl HandoffStore + ?Sized),
    wa_id: &WaId,
    operator: &str,
    ttl: Duration,
    now: DateTime<Utc>,
) -> Result<Handoff, HandoffError> {
    let handoff = Handoff {
        operator: operator.to_owned(),
        since: now,
        until: now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX),
    };
    if !store.set_handoff(wa_id, Some(&handoff)).await? {
        return Err(HandoffError::NotFound(wa_id.as_str().to_owned()));
    }
    store.set_pending_action(wa_id, None).await?;
    let taken = BusinessEvent::HandoffTaken {
        operator: operator.to_owned(),
        until: handoff.until,
    };
    store
        .insert_events(&[Event::new(wa_id, taken, now)])
        .await?;
    tracing::info!(conversation.id = %wa_id.masked(), %operator, until = %handoff.until, "conversation taken by an operator");
    metrics::counter!("zaguan_handoffs_total").increment(1);
    Ok(handoff)
}

/// Gives the conversation back to the bot; `false` when no operator had it.
pub async fn release(
    store: &(impl HandoffStore + ?Sized),
    wa_id: &WaId,
    operator: &str,
    now: DateTime<Utc>,
) -> Result<bool, HandoffError> {
    let Some(conversation) = store.conversation(wa_id).await? else {
        return Err(HandoffError::NotFound(wa_id.as_str().to_owned()));
    };
    let was_active = conversation
        .handoff
        .as_ref()
        .is_some_and(|handoff| handoff.is_active(now));
    if conversation.handoff.is_some() {
        store.set_handoff(wa_id, None).await?;
    }
    if was_active {
        let released = BusinessEvent::HandoffReleased {
            operator: operator.to_owned(),
        };
        store
            .insert_events(&[Event::new(wa_id, released, now)])
            .await?;
        tracing::info!(conversation.id = %wa_id.masked(), %operator, "conversation released to the bot");
        metrics::counter!("zaguan_handoffs_ended_total", "how" => "released").increment(1);
    }
    Ok(was_active)
}

/// What an operator's reply became.
#[derive(Debug, Clone)]
pub struct OperatorReply {
    /// The WhatsApp messages queued, in order.
    pub parts: Vec<String>,
}

/// Queues `text` from `operator` to the customer: formatted and split for WhatsApp like the
/// bot's replies (no LLM, no translation), stored in the history as the operator's, sent by the
/// workers. Only while the operator's handoff is active, and within the 24-hour window.
pub async fn reply(
    store: &(impl OperatorReplyStore + ?Sized),
    wa_id: &WaId,
    operator: &str,
    text: &str,
    now: DateTime<Utc>,
) -> Result<OperatorReply, HandoffError> {
    if text.trim().is_empty() {
        return Err(HandoffError::Invalid("the reply is empty".to_owned()));
    }
    let Some(conversation) = store.conversation(wa_id).await? else {
        return Err(HandoffError::NotFound(wa_id.as_str().to_owned()));
    };
    if !conversation
        .handoff
        .as_ref()
        .is_some_and(|handoff| handoff.is_active(now))
    {
        return Err(HandoffError::Conflict(
            "the bot has this conversation: take it first (its replies and yours would cross)"
                .to_owned(),
        ));
    }
    let Some(last) = store.latest_inbox(wa_id).await? else {
        return Err(HandoffError::Conflict(
            "the customer has not written yet: WhatsApp only allows templates".to_owned(),
        ));
    };
    // The window runs from the customer's last message as WhatsApp stamped it (a message
    // delivered late does not reopen it), on the database's clock.
    let database_now = store.server_time().await.unwrap_or(now);
    let last_wrote = conversation.last_inbound_at.unwrap_or(last.received_at);
    if !crate::outbound::governor::window_open(last_wrote, database_now) {
        return Err(HandoffError::WindowClosed { last_wrote });
    }
    let parts = crate::guard::whatsapp_parts(text);
    if parts.is_empty() {
        return Err(HandoffError::Invalid(
            "the reply has no text once formatted".to_owned(),
        ));
    }
    store
        .append_message(NewMessage::ai(wa_id, text, OPERATOR_AGENT, Vec::new(), now))
        .await?;
    store.note_history_written(wa_id, now).await?;
    let outbox = NewOutbox::parts(wa_id, None, Some(&last.phone_number_id), &parts, now);
    store.insert_outbox(&outbox).await?;
    tracing::info!(conversation.id = %wa_id.masked(), %operator, parts = parts.len(), "operator reply queued");
    metrics::counter!("zaguan_operator_replies_total").increment(1);
    Ok(OperatorReply { parts })
}

/// Who sends a follow-up: the operator recorded, and how the customer reads them (their
/// display name, else the business's).
#[derive(Debug, Clone, Copy)]
pub struct FollowUpBy<'a> {
    pub operator: &'a str,
    pub shown_as: &'a str,
}

/// Sends the operator follow-up template (`templates.toml`, `operator_follow_up`) to a
/// customer whose window closed, so they can write back and the conversation can go on: the
/// only message WhatsApp delivers then. Refused while the window is open (write a reply) and
/// when no such template is configured or usable.
pub async fn follow_up(
    store: &(impl FollowUpStore + ?Sized),
    templates: &crate::templates::Templates,
    wa_id: &WaId,
    by: FollowUpBy<'_>,
    business: &str,
    now: DateTime<Utc>,
) -> Result<crate::store::Template, HandoffError> {
    let FollowUpBy { operator, shown_as } = by;
    use crate::outbound::governor::{self, Form, Skip};
    use crate::templates::Purpose;
    let Some(conversation) = store.conversation(wa_id).await? else {
        return Err(HandoffError::NotFound(wa_id.as_str().to_owned()));
    };
    let Some(last) = store.latest_inbox(wa_id).await? else {
        return Err(HandoffError::Conflict(
            "the customer has not written yet: nothing to follow up".to_owned(),
        ));
    };
    let name = store
        .user(wa_id)
        .await?
        .and_then(|u| u.name)
        .and_then(|n| n.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default();
    let values = [
        ("name", name.into()),
        ("business", business.into()),
        ("operator", shown_as.into()),
    ];
    let database_now = store.server_time().await.unwrap_or(now);
    let form = governor::form(
        store,
        templates,
        wa_id,
        Purpose::OperatorFollowUp,
        conversation.lang.as_deref(),
        &values,
        database_now,
    )
    .await?;
    let template = match form {
        Form::Template(template) => template,
        Form::Text { .. } => {
            return Err(HandoffError::Conflict(
                "the customer's 24-hour window is open: write them a reply instead".to_owned(),
            ));
        }
        Form::Skip(Skip::OptedOut) => {
            return Err(HandoffError::Conflict(
                "the customer opted out of messages they did not ask for (BAJA, STOP): no \
                 follow-up goes until they write again or opt back in"
                    .to_owned(),
            ));
        }
        Form::Skip(Skip::WindowClosed) => {
            return Err(HandoffError::Conflict(
                "no usable `operator_follow_up` template in templates.toml: add one approved in \
                 the account"
                    .to_owned(),
            ));
        }
        Form::Skip(
            skip @ (Skip::MissingValue(_)
            | Skip::MarketingStopped
            | Skip::MarketingHeld
            | Skip::MessagingLimit),
        ) => {
            return Err(HandoffError::Conflict(skip.reason()));
        }
    };
    let mut part = NewOutbox::text(
        wa_id.clone(),
        None,
        format!("(plantilla de seguimiento `{}`)", template.name),
        now,
    );
    part.phone_number_id = Some(last.phone_number_id.clone());
    part.template = Some(template.clone());
    store.insert_outbox(std::slice::from_ref(&part)).await?;
    store
        .append_message(NewMessage::ai(
            wa_id,
            format!(
                "[{operator} envió la plantilla de seguimiento `{}`]",
                template.name
            ),
            OPERATOR_AGENT,
            Vec::new(),
            now,
        ))
        .await?;
    store.note_history_written(wa_id, now).await?;
    tracing::info!(conversation.id = %wa_id.masked(), %operator, template = %template.name, "follow-up template queued");
    metrics::counter!("zaguan_operator_replies_total").increment(1);
    Ok(template)
}

/// `request_human`: tells the staff on duty that the customer wants a person (through the
/// [`HandoffDesk`]); the bot keeps answering until one takes the conversation.
pub struct RequestHuman {
    desk: Arc<HandoffDesk>,
}

impl RequestHuman {
    pub fn new(desk: Arc<HandoffDesk>) -> Self {
        Self { desk }
    }
}

/// What `request_human` takes.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct RequestHumanArgs {
    #[schemars(
        description = "Qué necesita el cliente, en una frase, para la persona que le atienda."
    )]
    reason: String,
}

#[async_trait]
impl TypedTool for RequestHuman {
    type Args = RequestHumanArgs;
    const NAME: &'static str = REQUEST_HUMAN;
    const WRITES: bool = true;

    fn description(&self) -> String {
        "Avisa al equipo de que este cliente quiere hablar con una persona (o \
         necesita algo que no puedes resolver). El resultado dice si se ha \
         avisado ya a alguien o cuándo abre la oficina: díselo al cliente tal cual."
            .into()
    }

    async fn call(
        &self,
        args: RequestHumanArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let reason = Some(args.reason.trim())
            .filter(|r| !r.is_empty())
            .ok_or_else(|| ToolError::InvalidArgs("`reason` (text) is required".to_owned()))?;
        let reason: String = reason.chars().take(500).collect();
        let outcome = self
            .desk
            .request(
                &context.wa_id,
                &reason,
                &context.call_id,
                &context.business,
                context.now,
            )
            .await
            .map_err(|error| {
                ToolError::Failed(format!("the team could not be notified: {error}"))
            })?;
        tracing::info!(conversation.id = %context.wa_id.masked(), ?outcome, "the customer asked for a person");
        let contact = context.contact_line();
        Ok(ToolOutput::with_event(
            outcome.for_the_model(context.timezone, contact.as_deref()),
            BusinessEvent::HandoffRequested { reason },
        ))
    }
}

#[cfg(test)]
mod tests;
