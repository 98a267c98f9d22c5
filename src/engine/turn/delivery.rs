//! The end of a turn: the reply through guard_translator into the outbox, with the tools'
//! attachments and a confirmation's buttons; and messages the service starts itself
//! (reminders, alerts).

use chrono::Utc;

use crate::domain::PendingAction;
use crate::domain::{OutboxId, WaId};
use crate::engine::context_extractor::State;
use crate::engine::{attachments, pending};
use crate::outbound::governor::{self, Form, Skip};
use crate::store::{
    Attachment, InboxEntry, Media, NewMessage, NewOutbox, OutboxEntry, ReplyButton, reply_parts,
};
use crate::templates::{Purpose, TemplateValue};

use crate::engine::turn::graph::Turn;
use crate::engine::turn::{EngineError, PromptSet, TurnOptions};
use crate::store::Store;

/// How a reply leaves: made in this call (never sent before) or read back from the history.
#[derive(Debug, Clone, Copy)]
pub(super) struct Delivery {
    pub(super) fresh: bool,
    pub(super) options: TurnOptions,
}

/// guard_translator, then the reply: for the caller to send now, or queued in the outbox.
/// A reply read back from the history (the turn was cut after its answer was stored) may
/// have gone out already: it is recorded as sent-but-unconfirmed, for its status webhook
/// to confirm or its grace to resend — never sent again at once. Its parts' ids come from
/// the inbound message, so recording it again changes nothing.
pub(super) async fn deliver(
    turn: &Turn<'_>,
    state: &mut State,
    text: &str,
    asked: Option<&PendingAction>,
    reply_to: Option<&InboxEntry>,
    delivery: Delivery,
) -> Result<(Vec<String>, Option<Vec<OutboxEntry>>), EngineError> {
    turn.save(state).await?;
    let lang = state.lang.as_deref();
    let mut shown = attachments::this_turn(state);
    if asked.is_some() {
        // The customer is asked to confirm: a list to pick from would only compete with
        // the buttons (the slots the booking was chosen from, say).
        shown.retain(|a| !matches!(a, Attachment::List { .. }));
    }
    // Offline mode may say everything with what it shows (a question with buttons).
    let mut bodies = if text.trim().is_empty() && !shown.is_empty() {
        Vec::new()
    } else {
        turn.set
            .guard
            .guard(text, lang, state.wa_id.as_str())
            .await
            .parts
    };
    let texts = bodies.len();
    // What the turn's tools show (photos, a list to tap), after the words.
    let mut media: Vec<(Option<Media>, Vec<ReplyButton>)> = Vec::new();
    let wa_id = state.wa_id.as_str();
    for attachment in shown {
        let said = |text: String| async move {
            turn.set
                .guard
                .guard(&text, lang, wa_id)
                .await
                .parts
                .join("\n")
        };
        match attachment {
            Attachment::Image { link, caption } => {
                bodies.push(attachments::caption(&said(caption).await));
                media.push((Some(Media::Image { link }), Vec::new()));
            }
            Attachment::List { text, rows } => {
                let text = said(text).await;
                bodies.push(attachments::plain_list(&text, &rows));
                media.push((
                    Some(Media::List {
                        text,
                        button: attachments::list_button(lang).to_owned(),
                        rows,
                    }),
                    Vec::new(),
                ));
            }
            Attachment::Buttons { text, buttons } => {
                let body: String = said(text).await;
                bodies.push(
                    body.chars()
                        .take(crate::outbound::graph::MAX_INTERACTIVE_BODY)
                        .collect(),
                );
                let buttons = buttons
                    .into_iter()
                    .take(crate::outbound::graph::MAX_BUTTONS)
                    .map(|b| {
                        let title: String = b
                            .title
                            .chars()
                            .take(crate::outbound::graph::MAX_BUTTON_TITLE)
                            .collect();
                        ReplyButton::new(b.id, title)
                    })
                    .collect();
                media.push((None, buttons));
            }
        }
    }
    let mut buttons = Vec::new();
    if let Some(action) = asked {
        // The summary with Confirm / Cancel buttons, as a last message of its own.
        let summary = turn
            .set
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
        buttons = pending::buttons(&action.id, lang);
    }
    let now = turn.now();
    let mut parts = NewOutbox::parts(
        &state.wa_id,
        reply_to.map(|e| &e.wamid),
        reply_to.map(|e| e.phone_number_id.as_str()),
        &bodies,
        now,
    );
    for (part, (media, buttons)) in parts.iter_mut().skip(texts).zip(media) {
        part.media = media;
        part.buttons = buttons;
    }
    if let Some(last) = parts.last_mut()
        && !buttons.is_empty()
    {
        last.buttons = buttons;
    }
    // The customer's reply reads as the words and the confirmation, not the captions.
    let bodies: Vec<String> = bodies
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i < texts || parts.get(*i).is_some_and(|p| p.media.is_none()))
        .map(|(_, body)| body)
        .collect();
    // As few messages as say it: Meta bills each one.
    let parts = crate::outbound::bundle::bundle(parts);
    let Some(reply_to) = reply_to else {
        turn.store.insert_outbox(&parts).await?;
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
    turn.store.record_reply(&entries).await?;
    Ok((bodies, None))
}

/// Queues a message of the engine's own (not an answer to any inbound message, so it
/// never stands in for one), translated into the conversation's language and sent from
/// the number `via` arrived on.
pub(super) async fn notice(
    store: &dyn Store,
    set: &PromptSet,
    wa_id: &WaId,
    text: &str,
    via: &InboxEntry,
    now: chrono::DateTime<Utc>,
) -> Result<(), EngineError> {
    let written_at = via.sent_at.unwrap_or(via.received_at);
    let form = governor::notice_form(store, wa_id, written_at, now).await?;
    metrics::counter!("zaguan_outreach_total", "purpose" => "slow_down", "form" => form.label())
        .increment(1);
    let lang = store.conversation(wa_id).await?.and_then(|c| c.lang);
    let bodies = set
        .guard
        .guard(text, lang.as_deref(), wa_id.as_str())
        .await
        .parts;
    let parts = NewOutbox::parts(wa_id, None, Some(&via.phone_number_id), &bodies, now);
    if let Form::Skip(skip) = form {
        // Kept on the outbox with why, for operators; never sent.
        tracing::info!(conversation.id = %wa_id.masked(), reason = skip.as_str(), "a notice not sent");
        let skipped: Vec<OutboxEntry> = parts
            .into_iter()
            .map(|part| {
                let id = OutboxId::for_notice(&via.wamid, via.received_at, part.part);
                governor::skipped(part, skip, id)
            })
            .collect();
        store.record_reply(&skipped).await?;
        return Ok(());
    }
    store.insert_outbox(&parts).await?;
    Ok(())
}

/// A message of the business's own that answers nothing (a reminder, an alert, a notice to
/// an agent): to whom, what it says, and the step that sends it.
#[derive(Debug, Clone, Copy)]
pub struct Outreach<'a> {
    pub to: &'a WaId,
    /// In the business's language; guard_translator says it in the contact's.
    pub text: &'a str,
    /// The `agent` it is written to the history as (`visit_reminder`, `search_alert`…).
    pub agent: &'a str,
    /// The business number it goes from.
    pub phone_number_id: &'a str,
    pub purpose: Purpose,
    /// What fills the purpose's template, by name.
    pub values: &'a [(&'a str, TemplateValue)],
    /// Names the step (`reminder:A-…`): the message has the same id however often, and by
    /// however many instances, the step runs, so it is queued once.
    pub step: &'a str,
    /// When what the step is about happened (a visit's start, a listing's news): the id's
    /// time, never the clock's, which differs between two runs of the step.
    pub step_at: chrono::DateTime<Utc>,
    /// Reply buttons (at most 3): on the text inside the window, as the template's quick
    /// replies outside it. A press comes back with the button's id.
    pub buttons: &'a [ReplyButton],
}

impl Outreach<'_> {
    /// The id of the step's message.
    pub fn id(&self) -> OutboxId {
        OutboxId::derived(
            &format!("{}:{}:{}", self.agent, self.step, self.to.as_str()),
            self.step_at,
        )
    }
}

/// `Engine::notify`: a message of the business's own, sent as the send governor decides, with
/// the prompt set `set`.
pub(super) async fn notify(
    store: &dyn Store,
    set: &PromptSet,
    outreach: Outreach<'_>,
    now: chrono::DateTime<Utc>,
) -> Result<Notified, EngineError> {
    let Outreach {
        to: wa_id,
        text,
        agent,
        phone_number_id,
        purpose,
        values,
        buttons,
        ..
    } = outreach;
    let id = outreach.id();
    if store.outbox_entry(&id).await?.is_some() {
        // The step ran before (another instance, or this one before a crash): said once.
        return Ok(Notified::Already);
    }
    let mut values = values.to_vec();
    if !buttons.is_empty() {
        let ids = buttons.iter().map(|b| b.id.clone()).collect();
        values.push(("buttons", TemplateValue::Buttons(ids)));
    }
    let conversation = store.conversation(wa_id).await?;
    let lang = conversation.and_then(|c| c.lang);
    let database_now = store.server_time().await.unwrap_or(now);
    let form = governor::form(
        store,
        &set.templates,
        wa_id,
        purpose,
        lang.as_deref(),
        &values,
        database_now,
    )
    .await?;
    metrics::counter!("zaguan_outreach_total", "purpose" => purpose.key(), "form" => form.label())
        .increment(1);
    let body = set
        .guard
        .guard(text, lang.as_deref(), wa_id.as_str())
        .await
        .parts
        .join("\n\n");
    // One message: a reminder or an alert is short, and its fallback stands for all of it.
    let mut part = NewOutbox::text(wa_id.clone(), None, body.clone(), now);
    part.phone_number_id = Some(phone_number_id.to_owned());
    part.buttons = buttons.to_vec();
    // What it was written for: the governor asks again by it just before it is sent.
    part.purpose = Some(purpose);
    match form {
        Form::Skip(skip) => {
            tracing::info!(conversation.id = %wa_id.masked(), purpose = purpose.key(), reason = skip.as_str(), "not sent");
            store
                .record_reply(&[governor::skipped(part, skip, id)])
                .await?;
            return Ok(Notified::Skipped(skip));
        }
        Form::Text { fallback } => part.fallback = fallback,
        Form::Template(template) => part.template = Some(template),
    }
    // Under the step's id: a step run again runs into the first copy.
    store
        .record_reply(&[OutboxEntry::queued(id, &part)])
        .await?;
    store
        .append_message(NewMessage::ai(wa_id, body, agent, Vec::new(), now))
        .await?;
    store.note_history_written(wa_id, now).await?;
    Ok(Notified::Queued(Box::new(part)))
}

/// What became of a message the business started.
#[derive(Debug, Clone, PartialEq)]
pub enum Notified {
    /// Queued, as text or as a template.
    Queued(Box<NewOutbox>),
    /// Not sent, and why (recorded on the outbox).
    Skipped(Skip),
    /// Queued before, by an earlier run of the same step: nothing done now.
    Already,
}
