//! The turn's new messages into the history: merged, transcribed when they are voice notes,
//! answered at once when the user is over budget or sends media nobody can read; and the
//! user's role refreshed from the business data.

use crate::domain::DialogState;
use crate::domain::{Content, MediaKind};
use std::borrow::Cow;
use std::collections::HashSet;

use crate::domain::MessageRole;
use crate::engine::abuse::{BUDGET_HANDOFF_REASON, BUDGET_REPLY};
use crate::engine::attachments;
use crate::engine::context_extractor::State;
use crate::outbound::governor::{self, Form, SERVICE_WINDOW, Skip};
use crate::store::{InboxEntry, NewMessage, NewOutbox, RoleAssignment, RoleSource};
use crate::templates::Purpose;

use crate::domain::WaMessageId;
use crate::engine::roles::RoleDirectory;
use crate::engine::turn::EngineError;
use crate::engine::turn::graph::Turn;
use crate::store::Store;
use crate::voice::VoiceNotes;

/// Appends the inbox messages not yet in the history as one human message, voice notes
/// transcribed. Before that, a subgraph idle past the TTL is left, so the new message starts
/// from the primary agent. Returns the new entries, a voice note's text its transcript (only
/// those are copied).
pub(super) async fn add_human_message<'a>(
    turn: &Turn<'_>,
    voice: Option<&VoiceNotes>,
    state: &mut State,
    inbox: &'a [InboxEntry],
) -> Result<Vec<Cow<'a, InboxEntry>>, EngineError> {
    // Sized to the inbox (a filter's collect would start at four entries): held while the
    // turn waits on the model.
    let mut new: Vec<Cow<'a, InboxEntry>> = Vec::with_capacity(inbox.len());
    new.extend(
        inbox
            .iter()
            .filter(|e| !state.is_stored(&e.wamid))
            .map(Cow::Borrowed),
    );
    if new.is_empty() {
        return Ok(new);
    }
    let mut voice_notes = HashSet::new();
    for entry in &mut new {
        if let Some(transcript) = transcribe(voice, entry, state.lang.as_deref()).await {
            entry.to_mut().text = Some(transcript);
            voice_notes.insert(entry.wamid.clone());
        }
    }
    if let Some(location) = new.iter().rev().find_map(|e| shared_location(e)) {
        turn.store
            .set_conversation_location(&state.wa_id, location)
            .await?;
        state.location = Some(location);
    }
    let now = turn.now();
    if !state.dialog_state.is_primary() {
        let last_activity = state
            .messages
            .last()
            .map(|m| m.message.at)
            .or(state.state_entered_at);
        let idle = last_activity.map(|at| (now - at).to_std().unwrap_or_default());
        if idle.is_some_and(|idle| idle >= turn.settings.dialog_idle_ttl) {
            let agent = state.dialog_state.current().unwrap_or("");
            tracing::info!(agent = %agent, "idle subgraph left before routing");
            metrics::counter!("zaguan_turn_guard_total", "guard" => "idle_ttl").increment(1);
            turn.set_dialog_state(state, DialogState::primary()).await?;
        }
    }
    let mut lines = Vec::with_capacity(new.len());
    for e in &new {
        // The ad they tapped is the context of what they write (`referral`).
        if let Some(referral) = crate::domain::Referral::of_message(&e.payload) {
            lines.push(referral.note());
        }
        lines.push(match &e.text {
            _ if is_reaction(e) => reaction_note(turn.store, e).await?,
            Some(text) if voice_notes.contains(&e.wamid) => format!("(voice note) {text}"),
            Some(text) => text.clone(),
            None => format!("(sent a {} without text)", e.kind),
        });
    }
    let content = lines.join("\n");
    // The conversation's language follows the user's confident switches, in what they
    // wrote (not in the placeholders of media without text, nor in a reaction's emoji).
    let written: Vec<&str> = new
        .iter()
        .filter(|e| !is_reaction(e))
        .filter_map(|e| e.text.as_deref())
        .collect();
    // Every message leaves the conversation with a language: the business's (the first of
    // `ZAGUAN_LANGUAGES`) until the user writes something that tells.
    let default = turn.settings.languages.first().map_or("es", String::as_str);
    let lang = match (written.is_empty(), &state.lang) {
        (true, Some(lang)) => lang.clone(),
        (true, None) => default.to_owned(),
        (false, previous) => {
            turn.set
                .guard
                .languages()
                .follow_or(&written.join("\n"), previous.as_deref(), default)
        }
    };
    if state.lang.as_ref() != Some(&lang) {
        tracing::info!(lang = %lang, "conversation language set");
        turn.store
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
    turn.append(state, message);
    Ok(new)
}

/// Whether the conversation has used its daily token budget. A turn that starts under
/// it runs to the end, so the budget is overshot by at most one turn.
pub(super) async fn over_budget(turn: &Turn<'_>, state: &State) -> Result<bool, EngineError> {
    let budget = turn.settings.daily_token_budget;
    if budget == 0 {
        return Ok(false);
    }
    // The agency's day: a budget spent in the evening does not come back at 1:00 in Madrid.
    let midnight = crate::business::start_of_today(turn.now(), turn.settings.timezone);
    let used = turn
        .store
        .llm_tokens_since(state.wa_id.as_str(), midnight)
        .await?;
    Ok(used >= budget)
}

/// Answers without a model and asks for a person: the staff on duty are told (once a
/// day), and the customer hears when someone will write.
pub(super) async fn answer_over_budget(
    turn: &Turn<'_>,
    state: &mut State,
) -> Result<(), EngineError> {
    tracing::warn!("daily token budget used up: fixed reply, a person is asked for");
    let told = ask_for_person_over_budget(turn, state).await?;
    let text = format!("{BUDGET_REPLY} {told}");
    let message = turn.ai_message(&state.wa_id, &text, "guard", Vec::new());
    turn.append(state, message);
    Ok(())
}

/// A conversation past its daily token budget, served offline: flagged for a person once
/// a day (an operator sees why), the customer told nothing they are not given.
pub(super) async fn flag_over_budget(
    turn: &Turn<'_>,
    state: &mut State,
) -> Result<(), EngineError> {
    tracing::warn!("daily token budget used up: served offline, flagged for a person");
    ask_for_person_over_budget(turn, state).await?;
    Ok(())
}

/// The day's one request for a person for a conversation past its budget (keyed by the
/// day, so asked again it changes nothing); returns what the customer may be told.
async fn ask_for_person_over_budget(
    turn: &Turn<'_>,
    state: &mut State,
) -> Result<String, EngineError> {
    metrics::counter!("zaguan_turn_guard_total", "guard" => "token_budget").increment(1);
    let now = turn.now();
    let day = now.with_timezone(&turn.settings.timezone).date_naive();
    let key = format!("budget:{day}");
    turn.hand_over(state, BUDGET_HANDOFF_REASON, &key, now)
        .await
}

/// The transcript of a voice note (an `audio` message without text), when voice notes are
/// set up and every step works; `None` otherwise, and the polite answer to media follows.
async fn transcribe(
    voice: Option<&VoiceNotes>,
    entry: &InboxEntry,
    lang: Option<&str>,
) -> Option<String> {
    let voice = voice?;
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
            metrics::counter!("zaguan_voice_notes_total", "outcome" => "transcribed").increment(1);
            Some(text)
        }
        Err(error) => {
            tracing::warn!("voice note not transcribed: {error}");
            metrics::counter!("zaguan_voice_notes_total", "outcome" => error.label()).increment(1);
            None
        }
    }
}

/// The role the business data gives the user, when theirs follows the data and differs:
/// recorded (`users.role`, source `data`) and used from this turn on.
pub(super) async fn role_from_data(
    turn: &Turn<'_>,
    roles: Option<&RoleDirectory>,
    state: &mut State,
) -> Result<(), EngineError> {
    let Some(roles) = roles else {
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
    turn.store
        .assign_role(
            &state.wa_id,
            &RoleAssignment {
                role,
                source: RoleSource::Data,
                by: "data".to_owned(),
                at: turn.now(),
            },
        )
        .await?;
    state.user.role = role;
    state.user.role_source = Some(RoleSource::Data);
    Ok(())
}

/// The location a WhatsApp location message carries.
pub(super) fn shared_location(entry: &InboxEntry) -> Option<crate::domain::GeoPoint> {
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

/// Whether `entry` was written more than 24 hours ago by its own WhatsApp timestamp (Meta
/// retried it after an outage): no free text can answer it now. Read on the database's
/// clock, asked only when this process's clock already says so.
pub(super) async fn delivered_late(turn: &Turn<'_>, entry: &InboxEntry) -> bool {
    let Some(written) = entry.sent_at else {
        return false;
    };
    if turn.now() - written < SERVICE_WINDOW - chrono::Duration::minutes(5) {
        return false;
    }
    let now = turn
        .store
        .server_time()
        .await
        .unwrap_or_else(|_| turn.now());
    now - written >= SERVICE_WINDOW
}

/// A message delivered past the customer's window: kept in the history, shown to staff (a
/// request for a person, so they see it and are told), and answered with the
/// re-engagement template when one is configured — never with free text, which WhatsApp
/// would refuse. Without the template nothing goes, and the outbox says why.
pub(super) async fn answer_late(
    turn: &Turn<'_>,
    state: &mut State,
    entry: &InboxEntry,
) -> Result<(), EngineError> {
    tracing::warn!(written = ?entry.sent_at, "a message delivered more than 24 hours after it was written: no free text can answer it");
    metrics::counter!("zaguan_turns_total", "outcome" => "late").increment(1);
    let now = turn.now();
    turn.hand_over(
        state,
        "WhatsApp entregó su mensaje con más de 24 h de retraso: solo una plantilla puede \
         responderle; escríbele cuando vuelva a escribir, o envíale la plantilla de seguimiento",
        &format!("late:{}", entry.wamid.as_str()),
        now,
    )
    .await?;
    let name = state
        .user
        .name
        .as_deref()
        .and_then(|n| n.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    let values = [
        ("name", name.into()),
        ("business", turn.set.business_name.clone().into()),
    ];
    let database_now = turn.store.server_time().await.unwrap_or(now);
    let form = governor::form(
        turn.store,
        &turn.set.templates,
        &state.wa_id,
        Purpose::ReEngagement,
        state.lang.as_deref(),
        &values,
        database_now,
    )
    .await?;
    let mut part = NewOutbox::text(
        state.wa_id.clone(),
        Some(entry.wamid.clone()),
        String::new(),
        now,
    );
    part.phone_number_id = Some(entry.phone_number_id.clone());
    let id = crate::domain::OutboxId::for_reply(&entry.wamid, entry.received_at, 0);
    let (record, note) = match form {
        Form::Template(template) => {
            part.body = format!("(plantilla de reactivación `{}`)", template.name);
            part.template = Some(template);
            let note = part.body.clone();
            (crate::store::OutboxEntry::queued(id, &part), Some(note))
        }
        Form::Text { .. } | Form::Skip(_) => {
            (governor::skipped(part, Skip::WindowClosed, id), None)
        }
    };
    if let Some(note) = note {
        turn.append(
            state,
            turn.ai_message(&state.wa_id, &note, LATE_AGENT, Vec::new()),
        );
    }
    turn.save(state).await?;
    turn.store.record_reply(&[record]).await?;
    Ok(())
}

/// The `agent` of the re-engagement template a late message got, in the history.
const LATE_AGENT: &str = "late_delivery";

/// A reaction to a message (or one taken back): context, never a message to answer.
pub(super) fn is_reaction(entry: &InboxEntry) -> bool {
    matches!(entry.content, Content::Reaction { .. })
}

/// A reaction as the history keeps it, for operators and for the model's next turn:
/// «[Reacción 👍 a «…»]», quoting the message reacted to when it is known.
async fn reaction_note(store: &dyn Store, entry: &InboxEntry) -> Result<String, EngineError> {
    let Content::Reaction { message_id, emoji } = &entry.content else {
        return Ok(String::new());
    };
    let quoted = match message_id
        .as_deref()
        .and_then(|id| WaMessageId::parse(id).ok())
    {
        Some(id) => match store.outbox_by_wamid(&id).await? {
            Some(ours) => Some(ours.body),
            None => store.inbox_entry(&id).await?.and_then(|theirs| theirs.text),
        },
        None => None,
    };
    let quoted = quoted
        .map(|text| {
            let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let cut: String = text.chars().take(80).collect();
            if cut.len() < text.len() {
                format!(" a «{cut}…»")
            } else {
                format!(" a «{cut}»")
            }
        })
        .unwrap_or_default();
    Ok(match emoji.as_deref().filter(|e| !e.is_empty()) {
        Some(emoji) => format!("[Reacción {emoji}{quoted}; no es una respuesta]"),
        None => format!("[Reacción retirada{quoted}]"),
    })
}

/// Images, audio, video, documents and stickers without a caption: nothing an assistant can
/// read.
pub(super) fn is_unreadable_media(entry: &InboxEntry) -> bool {
    matches!(
        entry.kind.as_str(),
        "image" | "audio" | "video" | "document" | "sticker" | "voice"
    ) && entry.text.as_deref().is_none_or(|t| t.trim().is_empty())
}
