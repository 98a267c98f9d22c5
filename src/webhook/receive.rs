//! `POST /webhook`: verify, parse, store, then acknowledge.
//!
//! The order of the writes makes a crash or a 503 at any point safe: Meta redelivers the whole
//! body, contact upserts and status updates are idempotent, and inbox entries are keyed by wamid
//! so a redelivered message is acknowledged without being stored or processed twice. The inbox
//! write comes last: once it is done, the message is ours.

use std::collections::HashMap;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt, stream};
use secrecy::ExposeSecret;

use super::WebhookState;
use super::payload::{self, Updates};
use super::signature;
use super::{RecentContacts, WebhookError};
use crate::domain::{WaId, WaMessageId};
use crate::store::{ContactSeen, InboxEntry, RejectedEntry, StatusOutcome, TemplateStatus};
use crate::store::{ConversationStore, InboxStore, OutboxStore, UserStore};

/// Meta sends bodies of up to 3 MB; anything above this answers 413.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Store calls in flight at once for one request (a batch may name hundreds of contacts).
const STORE_CONCURRENCY: usize = 16;

pub async fn receive(
    State(state): State<WebhookState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, WebhookError> {
    let body = body.map_err(|rejection| match rejection {
        BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => {
            WebhookError::TooLarge
        }
        // The body stopped arriving (the client went away, or sent too slowly).
        _ => WebhookError::BodyNotReceived,
    })?;
    signature::verify(
        state
            .app_secret
            .as_ref()
            .map(|s| s.expose_secret().as_bytes()),
        headers
            .get("x-hub-signature-256")
            .map(|value| value.as_bytes()),
        &body,
    )?;
    let updates = payload::parse(&body)?;
    let stored = store_updates(
        state.store.as_ref(),
        &state.recent_contacts,
        &updates,
        state.clock.now(),
    )
    .await?;
    // This process's workers take them at once, without reading the inbox.
    state.arrivals.push(stored.messages);
    // A part Meta failed late goes again as its fallback now, not at the next poll.
    for wa_id in stored.resend {
        state.arrivals.owe(wa_id);
    }
    metrics::counter!("zaguan_webhook_requests_total", "outcome" => "accepted").increment(1);
    Ok(StatusCode::OK)
}

/// What a request stored that this process acts on at once.
#[derive(Debug, Default)]
pub struct Stored {
    /// The inbox messages stored for the first time (redeliveries left out).
    pub messages: Vec<InboxEntry>,
    /// Conversations with a part Meta failed late, queued again as its fallback.
    pub resend: Vec<WaId>,
}

/// Persists everything a verified request carried. Returns only once it is all stored, with
/// what the workers should take now. `now` is the database's time
/// ([`crate::store::StoreClock`]): it orders messages across instances.
#[tracing::instrument(skip_all, fields(
    webhook.messages = updates.messages.len(),
    webhook.statuses = updates.statuses.len(),
))]
pub async fn store_updates(
    store: &(impl InboxStore + UserStore + OutboxStore + ConversationStore + ?Sized),
    recent_contacts: &RecentContacts,
    updates: &Updates,
    now: DateTime<Utc>,
) -> Result<Stored, WebhookError> {
    let clock = Instant::now();

    // One upsert per sender, not per message (a batch often holds several from one person),
    // and none for a sender written moments ago with the same profile.
    let mut contacts: HashMap<&WaId, ContactSeen> = HashMap::new();
    for message in &updates.messages {
        let seen = ContactSeen::from_message(message, now);
        // The latest message of a sender names them and dates their last inbound.
        match contacts.get(&message.wa_id) {
            Some(known) if known.seen_at > seen.seen_at => {}
            _ => {
                contacts.insert(&message.wa_id, seen);
            }
        }
    }
    contacts.retain(|_, contact| recent_contacts.needs_write(contact, clock));
    let upserts: Vec<_> = contacts
        .values()
        .map(|contact| store.record_contact(contact))
        .collect();
    stream::iter(upserts)
        .buffer_unordered(STORE_CONCURRENCY)
        .try_collect::<()>()
        .await?;
    for contact in contacts.values() {
        recent_contacts.written(contact, clock);
    }
    store_referrals(store, updates, now).await?;
    store_preferences(store, updates, now).await?;
    store_account_signals(store, updates, now).await?;

    for rejected in &updates.rejected {
        tracing::warn!(
            what = rejected.what,
            reason = %rejected.reason,
            "webhook update could not be read; kept in webhook_rejects"
        );
        metrics::counter!("zaguan_webhook_rejected_updates_total", "what" => rejected.what)
            .increment(1);
        store
            .record_rejected(&RejectedEntry {
                what: rejected.what.to_owned(),
                reason: rejected.reason.clone(),
                raw: rejected.raw.clone(),
                at: now,
            })
            .await?;
    }

    let entries: Vec<InboxEntry> = updates
        .messages
        .iter()
        .map(|m| InboxEntry::pending(m, now))
        .collect();
    let inserted = store.insert_inbox(&entries).await?;
    for message in &updates.messages {
        metrics::counter!("zaguan_inbound_messages_total", "type" => label(&message.kind, MESSAGE_TYPES))
            .increment(1);
    }
    if inserted.duplicates > 0 {
        tracing::info!(
            duplicates = inserted.duplicates,
            "redelivered messages acknowledged, not stored again"
        );
        metrics::counter!("zaguan_inbound_duplicates_total").increment(inserted.duplicates as u64);
    }

    let applies: Vec<_> = updates
        .statuses
        .iter()
        .map(|status| store.apply_status(status))
        .collect();
    let outcomes: Vec<StatusOutcome> = stream::iter(applies)
        .buffered(STORE_CONCURRENCY)
        .try_collect()
        .await?;
    for (status, outcome) in updates.statuses.iter().zip(outcomes.iter().copied()) {
        let outcome_label = match outcome {
            StatusOutcome::Applied => "applied",
            StatusOutcome::Reconciled => "reconciled",
            StatusOutcome::Early => "early",
            StatusOutcome::Stale => "stale",
            StatusOutcome::Unknown => {
                tracing::debug!(wamid = %status.wamid, "status for a message not in the outbox");
                "unknown"
            }
            StatusOutcome::Unrecognised => {
                tracing::warn!(status = %status.status, "unrecognised delivery status");
                "unrecognised"
            }
        };
        if let Some(error) = status.errors.first() {
            tracing::warn!(
                code = error.code,
                title = error.title.as_deref().unwrap_or(""),
                "outbound message failed"
            );
        }
        // Meta bills a message once, when it is delivered.
        if status.status == "delivered"
            && matches!(
                outcome,
                StatusOutcome::Applied | StatusOutcome::Reconciled | StatusOutcome::Early
            )
            && let Some(pricing) = status.pricing.as_ref().filter(|p| p.billable)
        {
            metrics::counter!(
                "zaguan_whatsapp_billable_messages_total",
                "category" => label(&pricing.category, PRICING_CATEGORIES),
            )
            .increment(1);
        }
        metrics::counter!(
            "zaguan_webhook_statuses_total",
            "status" => label(&status.status, STATUSES),
            "outcome" => outcome_label,
        )
        .increment(1);
    }

    // A part Meta failed after accepting it takes the path of one refused at once.
    let mut resend = Vec::new();
    for (status, outcome) in updates.statuses.iter().zip(&outcomes) {
        if status.status == "failed"
            && matches!(outcome, StatusOutcome::Applied | StatusOutcome::Reconciled)
        {
            resend
                .extend(crate::outbound::failures::after_failed_status(store, status, now).await?);
        }
    }
    for change in &updates.templates {
        let known = store
            .template_statuses()
            .await?
            .into_iter()
            .find(|t| t.name == change.name && t.language == change.language);
        let status = TemplateStatus {
            name: change.name.clone(),
            language: change.language.clone(),
            status: change
                .event
                .clone()
                .or_else(|| known.as_ref().map(|k| k.status.clone()))
                .unwrap_or_else(|| "APPROVED".to_owned()),
            category: change
                .category
                .as_ref()
                .map(|c| c.to_ascii_lowercase())
                .or_else(|| known.as_ref().and_then(|k| k.category.clone())),
            reason: change.reason.clone(),
            quality: change
                .quality
                .as_ref()
                .map(|q| q.to_ascii_uppercase())
                .or_else(|| known.as_ref().and_then(|k| k.quality.clone())),
            at: now,
        };
        tracing::info!(template = %status.name, language = %status.language, status = %status.status, category = ?status.category, quality = ?status.quality, "template status from Meta");
        metrics::counter!("zaguan_template_status_updates_total", "status" => label(&status.status, TEMPLATE_STATUSES))
            .increment(1);
        store.record_template_status(&status).await?;
    }
    for field in &updates.ignored {
        tracing::debug!(field = %field, "webhook change ignored");
        metrics::counter!("zaguan_webhook_ignored_changes_total", "field" => label(field, CHANGE_FIELDS))
            .increment(1);
    }
    for error in &updates.errors {
        tracing::warn!(
            code = error.code,
            title = error.title.as_deref().unwrap_or(""),
            "webhook reported an error"
        );
        metrics::counter!("zaguan_webhook_errors_total").increment(1);
    }
    tracing::debug!(
        inserted = inserted.inserted,
        duplicates = inserted.duplicates,
        "webhook stored"
    );
    // Each id once, unless every copy of it was already there (a redelivery).
    let mut copies: HashMap<&WaMessageId, usize> = HashMap::new();
    for entry in &entries {
        *copies.entry(&entry.wamid).or_default() += 1;
    }
    for wamid in &inserted.known {
        if let Some(n) = copies.get_mut(wamid) {
            *n = n.saturating_sub(1);
        }
    }
    let fresh: std::collections::HashSet<WaMessageId> = copies
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(wamid, _)| wamid.clone())
        .collect();
    let mut handed = std::collections::HashSet::new();
    let messages = entries
        .into_iter()
        .filter(|entry| fresh.contains(&entry.wamid) && handed.insert(entry.wamid.clone()))
        .collect();
    Ok(Stored { messages, resend })
}

/// Each contact's first ad referral kept on the contact (`users.referral`), before the
/// message is ours: the agency's CRM reports conversions to Meta with its click id.
async fn store_referrals(
    store: &(impl UserStore + ?Sized),
    updates: &Updates,
    now: DateTime<Utc>,
) -> Result<(), WebhookError> {
    for message in &updates.messages {
        let Some(referral) = &message.referral else {
            continue;
        };
        let at = message.sent_at.unwrap_or(now);
        let first = store.note_referral(&message.wa_id, referral, at).await?;
        tracing::info!(
            source_id = referral.source_id.as_deref().unwrap_or(""),
            first,
            "message from a click-to-WhatsApp ad"
        );
        metrics::counter!("zaguan_ad_referrals_total", "first" => if first { "yes" } else { "no" })
            .increment(1);
    }
    Ok(())
}

/// Marketing stopped or resumed inside WhatsApp: nothing is sent in answer (the customer
/// acted in the app), the governor reads it before every marketing template.
async fn store_preferences(
    store: &(impl UserStore + ?Sized),
    updates: &Updates,
    now: DateTime<Utc>,
) -> Result<(), WebhookError> {
    for preference in &updates.preferences {
        let choice = match preference.stops() {
            Some(stopped) => {
                let at = preference.at.unwrap_or(now);
                let applied = store
                    .set_marketing_preference(&preference.wa_id, stopped, at)
                    .await?;
                tracing::info!(stopped, applied, "marketing preference from WhatsApp");
                match (stopped, applied) {
                    (_, false) => "stale",
                    (true, true) => "stop",
                    (false, true) => "resume",
                }
            }
            None => "other",
        };
        metrics::counter!("zaguan_marketing_preferences_total", "choice" => choice).increment(1);
    }
    Ok(())
}

/// The account's and numbers' standing, folded into what was known.
async fn store_account_signals(
    store: &(impl OutboxStore + ?Sized),
    updates: &Updates,
    now: DateTime<Utc>,
) -> Result<(), WebhookError> {
    if updates.accounts.is_empty() {
        return Ok(());
    }
    let mut known = store.account_health().await?;
    for signal in &updates.accounts {
        let key = signal.key();
        let health = match known.iter_mut().position(|h| h.key == key) {
            Some(i) => &mut known[i],
            None => {
                known.push(crate::domain::AccountHealth::default());
                known.last_mut().expect("just pushed")
            }
        };
        health.apply(signal, now);
        let held = health.holds_marketing(now);
        tracing::warn!(
            field = signal.field,
            event = %signal.event,
            key = %key,
            marketing_held = held.as_deref().unwrap_or("no"),
            "WhatsApp account signal"
        );
        metrics::counter!("zaguan_whatsapp_account_signals_total", "event" => label(&signal.event, ACCOUNT_EVENTS))
            .increment(1);
        metrics::gauge!("zaguan_whatsapp_marketing_held", "key" => key).set(if held.is_some() {
            1.0
        } else {
            0.0
        });
        store.record_account_health(health).await?;
    }
    Ok(())
}

/// Metric labels come from a fixed set so a new value from Meta cannot grow the series forever.
fn label(value: &str, known: &'static [&'static str]) -> &'static str {
    known
        .iter()
        .find(|k| **k == value)
        .copied()
        .unwrap_or("other")
}

const MESSAGE_TYPES: &[&str] = &[
    "text",
    "image",
    "audio",
    "voice",
    "video",
    "document",
    "sticker",
    "location",
    "contacts",
    "interactive",
    "button",
    "reaction",
    "order",
    "system",
    "unsupported",
    "request_welcome",
    "edit",
    "revoke",
];

const STATUSES: &[&str] = &["sent", "delivered", "read", "played", "failed"];

const TEMPLATE_STATUSES: &[&str] = &[
    "APPROVED",
    "PAUSED",
    "REJECTED",
    "DISABLED",
    "PENDING",
    "IN_APPEAL",
    "PENDING_DELETION",
    "ARCHIVED",
    "UNARCHIVED",
    "LOCKED",
    "UNLOCKED",
    "REINSTATED",
    "FLAGGED",
];

const CHANGE_FIELDS: &[&str] = &[
    "calls",
    "smb_message_echoes",
    "message_template_components_update",
    "business_capability_update",
    "phone_number_name_update",
    "security",
];

const PRICING_CATEGORIES: &[&str] = &[
    "marketing",
    "marketing_lite",
    "utility",
    "authentication",
    "authentication_international",
    "service",
    "referral_conversion",
];

const ACCOUNT_EVENTS: &[&str] = &[
    "ACCOUNT_RESTRICTION",
    "ACCOUNT_VIOLATION",
    "ACCOUNT_DELETED",
    "ACCOUNT_OFFBOARDED",
    "ACCOUNT_RECONNECTED",
    "DISABLED_UPDATE",
    "PARTNER_ADDED",
    "PARTNER_REMOVED",
    "VOLUME_BASED_PRICING_TIER_UPDATE",
    "FLAGGED",
    "UNFLAGGED",
    "UPGRADE",
    "DOWNGRADE",
    "ONBOARDING",
    "THROUGHPUT_UPGRADE",
];
