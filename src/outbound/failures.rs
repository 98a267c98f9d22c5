//! What happens to a message WhatsApp refuses for good — whether the Graph API says so at once
//! or a `failed` status webhook says so minutes later: both take this path, and it acts once.
//!
//! - An image or a list it would not take (131053 media, 131026 undeliverable, any refusal of
//!   the media): the same part goes again as text, with the image's link.
//! - A media carousel it would not take: its pieces, one message each (the text, the photos,
//!   the question with its buttons).
//! - A text outside the contact's 24-hour window (131047): the same part goes again as the
//!   template of its purpose, when it has one; otherwise the conversation is flagged for a
//!   person, since nothing but a template can reach the customer now.
//! - A per-user marketing cap (131049): nothing is sent again today.
//! - A staff member's handoff notice, refused for any reason: the refusal goes back to each
//!   request it was for, whose next member is tried at once. The staff member's own
//!   conversation is never flagged: they are not the one waiting.
//!
//! A part falls back once (`fell_back`, set by the store for one caller only), so a refusal
//! answered at once and a late `failed` status of the same part never send two fallbacks.

use chrono::{DateTime, Utc};

use crate::domain::{GraphError, OutboxId, StatusUpdate, WaId};
use crate::store::{
    ConversationStore, Fallback, HandoffReason, Media, NoticeFailure, OutboxEntry, OutboxStore,
    StoreResult,
};
use crate::templates::Purpose;

/// Meta's code for a free-form message outside the customer-service window.
pub const WINDOW_CLOSED: i64 = 131047;

/// What `entry`, refused with `error`, is sent as instead, if anything.
pub fn fallback_for(entry: &OutboxEntry, error: &GraphError) -> Option<Fallback> {
    if entry.fell_back {
        return None;
    }
    if error.code == Some(WINDOW_CLOSED) && entry.template.is_none() {
        return entry.fallback.clone().map(Fallback::Template);
    }
    match &entry.media {
        // The image or the list refused, for whatever reason: the words and the link.
        Some(Media::Image { link }) if entry.template.is_none() => Some(Fallback::Text {
            body: if entry.body.is_empty() {
                link.clone()
            } else {
                format!("{}\n{link}", entry.body)
            },
        }),
        Some(Media::List { .. }) if entry.template.is_none() => Some(Fallback::Text {
            body: entry.body.clone(),
        }),
        // A carousel refused: its text, its photos and its question, as they were.
        Some(Media::Carousel { .. }) if entry.template.is_none() => Some(Fallback::Photos),
        _ => None,
    }
}

/// After `entry` was refused for good with `error` and could not fall back: a staff notice
/// goes back to the requests it was for; a text the closed window kept from a customer flags
/// their conversation for a person (once per part). Returns whether anything was recorded.
pub async fn undelivered(
    store: &(impl ConversationStore + ?Sized),
    entry: &OutboxEntry,
    error: &GraphError,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    if entry.purpose == Some(Purpose::StaffHandoff) {
        let reason = refusal(error);
        for customer in &entry.about {
            let failure = NoticeFailure {
                member: entry.wa_id.clone(),
                reason: reason.clone(),
                at: now,
            };
            store.handoff_notice_failed(customer, &failure).await?;
        }
        tracing::warn!(conversation.id = %entry.wa_id.masked(), requests = entry.about.len(), code = error.code, "a staff notice was refused: its requests go to the next staff member");
        metrics::counter!("zaguan_handoff_notices_total", "outcome" => "refused").increment(1);
        return Ok(!entry.about.is_empty());
    }
    if error.code != Some(WINDOW_CLOSED) || entry.template.is_some() {
        return Ok(false);
    }
    let reason = HandoffReason {
        at: now,
        reason: "Un mensaje no se pudo entregar: la ventana de 24 h de WhatsApp estaba cerrada y \
                 no hay plantilla para él"
            .to_owned(),
        key: format!("undelivered:{}", entry.id.0),
    };
    store
        .request_handoff(&entry.wa_id, &reason, Some(now))
        .await?;
    tracing::warn!(conversation.id = %entry.wa_id.masked(), part = entry.part, "a message could not be delivered (window closed, no template): flagged for a person");
    metrics::counter!("zaguan_outbound_fallbacks_total", "to" => "person").increment(1);
    Ok(true)
}

/// A refusal as operators read it in the queue: «131026: Message undeliverable».
fn refusal(error: &GraphError) -> String {
    let what = error
        .message
        .as_deref()
        .or(error.title.as_deref())
        .unwrap_or("refused");
    match error.code {
        Some(code) => format!("WhatsApp refused it ({code}: {what})"),
        None => what.to_owned(),
    }
}

/// A `failed` status webhook for one of our parts: the same handling as a refusal at once.
/// Returns the conversation whose outbox has a part to send again now.
pub async fn after_failed_status(
    store: &(impl OutboxStore + ConversationStore + ?Sized),
    status: &StatusUpdate,
    now: DateTime<Utc>,
) -> StoreResult<Option<WaId>> {
    if status.status != "failed" {
        return Ok(None);
    }
    let entry = match store.outbox_by_wamid(&status.wamid).await? {
        Some(entry) => Some(entry),
        None => match status
            .callback_data
            .as_deref()
            .and_then(OutboxId::from_callback_data)
        {
            Some(id) => store.outbox_entry(&id).await?,
            None => None,
        },
    };
    let Some(entry) = entry else {
        return Ok(None);
    };
    let Some(error) = status.errors.first() else {
        return Ok(None);
    };
    match fallback_for(&entry, error) {
        Some(fallback) => {
            if store.fall_back(&entry.id, &fallback).await? {
                tracing::info!(conversation.id = %entry.wa_id.masked(), part = entry.part, code = error.code, "a late failure: the part goes again as its fallback");
                metrics::counter!("zaguan_outbound_fallbacks_total", "to" => fallback_label(&fallback))
                    .increment(1);
                return Ok(Some(entry.wa_id));
            }
            Ok(None)
        }
        None => {
            undelivered(store, &entry, error, now).await?;
            Ok(None)
        }
    }
}

pub fn fallback_label(fallback: &Fallback) -> &'static str {
    match fallback {
        Fallback::Text { .. } => "text",
        Fallback::Template(_) => "template",
        Fallback::Photos => "photos",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewOutbox, Template};

    fn error(code: i64) -> GraphError {
        GraphError {
            code: Some(code),
            title: None,
            message: Some("refused".into()),
            error_data: None,
        }
    }

    fn part() -> OutboxEntry {
        let new = NewOutbox::text(
            WaId::parse("34600111222").unwrap(),
            None,
            "Mira esta foto",
            Utc::now(),
        );
        OutboxEntry::queued(OutboxId("a".repeat(24)), &new)
    }

    #[test]
    fn a_refused_image_goes_as_its_words_and_link_once() {
        let mut image = part();
        image.media = Some(Media::Image {
            link: "https://example.com/p.jpg".into(),
        });
        assert_eq!(
            fallback_for(&image, &error(131053)),
            Some(Fallback::Text {
                body: "Mira esta foto\nhttps://example.com/p.jpg".into()
            })
        );
        image.fell_back = true;
        assert_eq!(fallback_for(&image, &error(131053)), None);
    }

    #[test]
    fn a_closed_window_sends_the_purposes_template_or_nothing() {
        let mut text = part();
        assert_eq!(fallback_for(&text, &error(WINDOW_CLOSED)), None);
        let template = Template {
            name: "visit_reminder".into(),
            language: "es".into(),
            parameters: vec!["Ático".into()],
            category: Some("utility".into()),
            buttons: Vec::new(),
        };
        text.fallback = Some(template.clone());
        assert_eq!(
            fallback_for(&text, &error(WINDOW_CLOSED)),
            Some(Fallback::Template(template))
        );
        // Another refusal of a text: nothing to fall back to.
        assert_eq!(fallback_for(&text, &error(131049)), None);
    }
}
