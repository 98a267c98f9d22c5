//! What the Graph API answered, recorded with patience; and a part as the Graph API's message.

use super::super::graph::{GraphClient, OutboundMessage, SendError};
use crate::domain::OutboxId;
use crate::domain::{GraphError, WaMessageId};
use crate::store::{Media, OutboxEntry, OutboxStore, OutboxUpdate, StoreError};
use std::time::Duration;

use crate::outbound::sender::RECORD_PATIENCE;

/// Records a delivered part as `sent`. While the store is unavailable it keeps trying, for up
/// to [`RECORD_PATIENCE`], the part still in flight so this process does not send it again:
/// left `sending`, it would wait for its status webhook or go out twice.
pub(super) async fn record_sent(
    store: &(impl OutboxStore + ?Sized),
    id: &OutboxId,
    update: &OutboxUpdate,
) -> Result<(), StoreError> {
    let mut result = store.update_outbox(id, update).await.map(drop);
    if !matches!(result, Err(StoreError::Unavailable(_))) {
        return result;
    }
    let deadline = std::time::Instant::now() + RECORD_PATIENCE;
    let mut delay = Duration::from_millis(100);
    while matches!(result, Err(StoreError::Unavailable(_))) && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
        result = store.update_outbox(id, update).await.map(drop);
    }
    if result.is_ok() {
        metrics::counter!("zaguan_outbound_late_records_total").increment(1);
    }
    result
}

/// Records a reply's parts. While the store is unavailable it keeps trying, for up to
/// [`RECORD_PATIENCE`], the parts still in flight so this process does not send them again.
pub(super) async fn record_with_patience(
    store: &(impl OutboxStore + ?Sized),
    parts: &[OutboxEntry],
) -> Result<(), StoreError> {
    let mut result = store.record_reply(parts).await;
    if !matches!(result, Err(StoreError::Unavailable(_))) {
        return result;
    }
    let deadline = std::time::Instant::now() + RECORD_PATIENCE;
    let mut delay = Duration::from_millis(100);
    while matches!(result, Err(StoreError::Unavailable(_))) && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
        result = store.record_reply(parts).await;
    }
    if result.is_ok() {
        metrics::counter!("zaguan_outbound_late_records_total").increment(1);
    }
    result
}

/// Sends `entry` as it is; a refusal's fallback is the caller's ([`super::super::failures`]).
pub(super) async fn send_entry(
    graph: &GraphClient,
    phone_number_id: &str,
    entry: &OutboxEntry,
    callback_data: &str,
) -> Result<Option<WaMessageId>, SendError> {
    // One message, or a refused carousel's pieces in order: the last one's id is the part's.
    let mut sent = None;
    for message in outbound_messages(entry) {
        sent = graph
            .send(phone_number_id, &entry.wa_id, &message, Some(callback_data))
            .await?;
    }
    Ok(sent)
}

/// What the Graph API is asked to send for `entry`: one message, or for a carousel that fell
/// back, the text, the photos and the question it was made of.
pub fn outbound_messages(entry: &OutboxEntry) -> Vec<OutboundMessage<'_>> {
    match &entry.media {
        Some(Media::Carousel {
            text,
            cards,
            question,
        }) if entry.fell_back && entry.template.is_none() => {
            let mut pieces = vec![OutboundMessage::Text { body: text }];
            pieces.extend(cards.iter().map(|card| OutboundMessage::Image {
                link: &card.link,
                caption: &card.caption,
            }));
            pieces.push(OutboundMessage::Buttons {
                body: question,
                buttons: &entry.buttons,
            });
            pieces
        }
        _ => vec![outbound_message(entry)],
    }
}

/// A template message sent: counted by Meta's category, since Meta bills each one by it.
pub(super) fn count_template(entry: &OutboxEntry) {
    if let Some(template) = &entry.template {
        let category = match template.category.as_deref() {
            Some("marketing") => "marketing",
            Some("authentication") => "authentication",
            Some("utility") => "utility",
            _ => "unknown",
        };
        metrics::counter!("zaguan_template_messages_total", "category" => category).increment(1);
    }
}

/// What the Graph API is asked to send for `entry`.
pub fn outbound_message(entry: &OutboxEntry) -> OutboundMessage<'_> {
    match (&entry.template, entry.buttons.is_empty()) {
        (Some(template), _) => OutboundMessage::Template {
            name: &template.name,
            language: &template.language,
            parameters: &template.parameters,
            buttons: &template.buttons,
        },
        (None, _) if entry.media.is_some() => match &entry.media {
            Some(Media::Image { link }) => OutboundMessage::Image {
                link,
                caption: &entry.body,
            },
            Some(Media::List { text, button, rows }) => OutboundMessage::List {
                body: text,
                button,
                rows,
            },
            Some(Media::Carousel { text, cards, .. }) => OutboundMessage::Carousel {
                body: text,
                cards,
                buttons: &entry.buttons,
            },
            None => OutboundMessage::Text { body: &entry.body },
        },
        (None, true) => OutboundMessage::Text { body: &entry.body },
        (None, false) => OutboundMessage::Buttons {
            body: &entry.body,
            buttons: &entry.buttons,
        },
    }
}

pub(super) fn status_label(error: &SendError) -> &'static str {
    match error {
        SendError::Retry { .. } => "retry",
        SendError::Unconfirmed { .. } => "unconfirmed",
        SendError::Permanent { .. } => "failed",
        SendError::Policy { .. } => "policy",
        SendError::Token { .. } => "token",
    }
}

pub(super) fn local_error(message: &str) -> GraphError {
    GraphError {
        code: None,
        title: None,
        message: Some(message.to_owned()),
        error_data: None,
    }
}
