//! The BSON form of the store's records: one function per direction and record, so a field's
//! name is spelled in one place (`docs/operators.md`, what each collection holds).

use crate::domain::{AgentName, CallOutcome, DialogState};
use crate::domain::{Content, Handoff, MessageRole, OutboxId, PendingAction, Role, ToolCall};
use crate::domain::{GraphError, Pricing, WaId, WaMessageId};
use crate::store::{
    Attachment, BusinessEvent, Conversation, Event, EventStatus, HandoffReason, HandoffRequest,
    InboxEntry, InboxStatus, LlmCall, Media, NewMessage, NoticeFailure, OutboxEntry, OutboxStatus,
    ReplyButton, RoleSource, StoreError, StoreResult, StoredMessage, Template,
};
use anyhow::Context as _;
use bson::{Bson, Document, doc, oid::ObjectId};
use chrono::{DateTime, Utc};
use std::time::Duration;

use crate::templates::Purpose;

pub(super) fn date(at: DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_chrono(at)
}

pub(super) fn opt_date(at: Option<DateTime<Utc>>) -> Bson {
    at.map_or(Bson::Null, |at| Bson::DateTime(date(at)))
}

pub(super) fn opt_str(value: &Option<String>) -> Bson {
    value
        .as_ref()
        .map_or(Bson::Null, |s| Bson::String(s.clone()))
}

/// Reading documents operators may have edited by hand: missing or mistyped fields read as absent.
pub(super) struct Fields<'a>(pub(super) &'a Document);

impl Fields<'_> {
    pub(super) fn str(&self, key: &str) -> Option<String> {
        self.0.get_str(key).ok().map(str::to_owned)
    }

    pub(super) fn date(&self, key: &str) -> Option<DateTime<Utc>> {
        self.0.get_datetime(key).ok().map(|d| d.to_chrono())
    }

    pub(super) fn int(&self, key: &str) -> Option<i64> {
        match self.0.get(key)? {
            Bson::Int32(i) => Some(i64::from(*i)),
            Bson::Int64(i) => Some(*i),
            Bson::Double(f) => Some(*f as i64),
            _ => None,
        }
    }

    pub(super) fn required_str(&self, key: &str) -> StoreResult<String> {
        self.str(key).ok_or_else(|| {
            anyhow::anyhow!("document {:?} has no string `{key}`", self.0.get("_id")).into()
        })
    }

    pub(super) fn wa_id(&self, key: &str) -> StoreResult<WaId> {
        WaId::parse(&self.required_str(key)?).map_err(|e| anyhow::anyhow!(e).into())
    }
}

pub(super) fn json_to_bson(raw: &str) -> Bson {
    serde_json::from_str::<serde_json::Value>(raw)
        .ok()
        .filter(|value| depth(value) <= MAX_DOCUMENT_DEPTH)
        .and_then(|value| bson::to_bson(&value).ok())
        .unwrap_or_else(|| Bson::String(raw.to_owned()))
}

/// MongoDB refuses documents nested more than 100 levels; a payload deeper than this (with
/// room for the inbox document around it) is kept as text, or one odd field would make the
/// whole webhook fail on every retry.
pub(super) const MAX_DOCUMENT_DEPTH: usize = 90;

/// Nesting depth of a JSON value (serde_json parses at most 128 levels, so recursion is safe).
pub(super) fn depth(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        serde_json::Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

pub(super) fn bson_to_json(value: Option<&Bson>) -> String {
    match value {
        Some(Bson::String(s)) => s.clone(),
        Some(other) => other.clone().into_relaxed_extjson().to_string(),
        None => "null".to_owned(),
    }
}

/// A `conversations` document.
pub(super) fn conversation(doc: &Document) -> StoreResult<Conversation> {
    let f = Fields(doc);
    let names = match doc.get("dialog_state") {
        Some(Bson::Array(items)) => items
            .iter()
            .filter_map(|b| b.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let (dialog_state, several) = DialogState::from_list(names);
    if let Some(several) = several {
        tracing::warn!(
            several,
            "conversations.dialog_state holds several agents (edited by hand?): the last one is \
             followed; `zaguan conversations reset` sets it right"
        );
        metrics::counter!("zaguan_route_fallbacks_total").increment(1);
    }
    Ok(Conversation {
        wa_id: f.wa_id("_id")?,
        phone: f.str("wa_id"),
        user_id: f.str("user_id"),
        dialog_state,
        lang: f.str("lang"),
        last_inbound_at: f.date("last_inbound_at"),
        updated_at: f.date("updated_at"),
        state_entered_at: f.date("state_entered_at"),
        pending_action: doc
            .get_document("pending_action")
            .ok()
            .and_then(pending_action),
        location: doc.get_document("location").ok().and_then(geo_point),
        reset_by: f.str("reset_by"),
        reset_at: f.date("reset_at"),
        history_at: f.date("history_at"),
        role: f.str("role").map(|r| Role::parse(&r)),
        role_source: f.str("role_source").and_then(|s| RoleSource::parse(&s)),
        handoff: doc.get_document("handoff").ok().and_then(|doc| {
            let f = Fields(doc);
            Some(Handoff {
                operator: f.str("operator").unwrap_or_default(),
                since: f.date("since")?,
                until: f.date("until")?,
            })
        }),
        handoff_requested: doc
            .get_document("handoff_requested")
            .ok()
            .and_then(handoff_request),
    })
}

/// A stored `handoff_requested`; one written before requests kept their reasons and notices
/// reads as a single reason, nobody told.
fn handoff_request(doc: &Document) -> Option<HandoffRequest> {
    let f = Fields(doc);
    let at = f.date("at")?;
    let reason = f.str("reason").unwrap_or_default();
    let mut reasons: Vec<HandoffReason> = doc
        .get_array("reasons")
        .map(|list| {
            list.iter()
                .filter_map(Bson::as_document)
                .filter_map(|d| {
                    let f = Fields(d);
                    Some(HandoffReason {
                        at: f.date("at")?,
                        reason: f.str("reason").unwrap_or_default(),
                        key: f.str("key").unwrap_or_default(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if reasons.is_empty() {
        reasons.push(HandoffReason {
            at,
            reason: reason.clone(),
            key: String::new(),
        });
    }
    Some(HandoffRequest {
        at,
        reason,
        reasons,
        notified: doc
            .get_array("notified")
            .map(|list| {
                list.iter()
                    .filter_map(|b| b.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        failures: doc
            .get_array("failures")
            .map(|list| {
                list.iter()
                    .filter_map(Bson::as_document)
                    .filter_map(|d| {
                        let f = Fields(d);
                        Some(NoticeFailure {
                            member: f.wa_id("member").ok()?,
                            reason: f.str("reason").unwrap_or_default(),
                            at: f.date("at")?,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default(),
        level: f
            .int("level")
            .and_then(|l| u8::try_from(l).ok())
            .unwrap_or(0),
        next_notice_at: f.date("next_notice_at"),
    })
}

pub(super) fn handoff_reason_doc(reason: &HandoffReason) -> Document {
    doc! {"at": date(reason.at), "reason": &reason.reason, "key": &reason.key}
}

pub(super) fn handoff_request_doc(request: &HandoffRequest) -> Document {
    let mut doc = doc! {
        "at": date(request.at),
        "reason": &request.reason,
        "reasons": request.reasons.iter().map(handoff_reason_doc).collect::<Vec<_>>(),
        "notified": &request.notified,
        "failures": request.failures.iter().map(notice_failure_doc).collect::<Vec<_>>(),
        "level": i32::from(request.level),
    };
    if let Some(at) = request.next_notice_at {
        doc.insert("next_notice_at", date(at));
    }
    doc
}

/// A staff notice's failure, in `handoff_requested.failures`.
pub(super) fn notice_failure_doc(failure: &NoticeFailure) -> Document {
    doc! {
        "member": failure.member.as_str(),
        "reason": &failure.reason,
        "at": date(failure.at),
    }
}

/// A stored outbox `template`.
pub(super) fn template(doc: &Document) -> Option<Template> {
    let f = Fields(doc);
    Some(Template {
        name: f.str("name")?,
        language: f.str("language")?,
        parameters: doc
            .get_array("parameters")
            .map(|items| {
                items
                    .iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        category: f.str("category"),
        buttons: doc
            .get_array("buttons")
            .map(|items| {
                items
                    .iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// A template as stored in an outbox part.
pub(super) fn template_doc(t: &Template) -> Document {
    let mut doc = doc! {
        "name": &t.name,
        "language": &t.language,
        "parameters": &t.parameters,
    };
    if let Some(category) = &t.category {
        doc.insert("category", category);
    }
    if !t.buttons.is_empty() {
        doc.insert("buttons", &t.buttons);
    }
    doc
}

/// A stored `pending_action`; `None` when it was damaged by hand (then it is simply dropped).
pub(super) fn pending_action(doc: &Document) -> Option<PendingAction> {
    let f = Fields(doc);
    Some(PendingAction {
        id: f.str("id").unwrap_or_default(),
        tool: f.str("tool")?,
        args: doc
            .get("args")
            .and_then(|args| serde_json::to_value(args.clone().into_relaxed_extjson()).ok())
            .unwrap_or(serde_json::Value::Null),
        summary: f.str("summary").unwrap_or_default(),
        agent: f.str("agent").unwrap_or_default().into(),
        created_at: f.date("created_at")?,
    })
}

/// GeoJSON `{"type": "Point", "coordinates": [lon, lat]}`.
pub(super) fn geo_point(doc: &Document) -> Option<crate::domain::GeoPoint> {
    let coordinates = doc.get_array("coordinates").ok()?;
    let number = |b: &Bson| match b {
        Bson::Double(x) => Some(*x),
        Bson::Int32(x) => Some(f64::from(*x)),
        Bson::Int64(x) => Some(*x as f64),
        _ => None,
    };
    Some(crate::domain::GeoPoint {
        lon: number(coordinates.first()?)?,
        lat: number(coordinates.get(1)?)?,
    })
}

pub(super) fn llm_call(doc: &Document) -> StoreResult<LlmCall> {
    let f = Fields(doc);
    let count = |key: &str| f.int(key).and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
    let outcome = f.required_str("outcome")?;
    Ok(LlmCall {
        conversation: f.str("wa_id"),
        agent: f.required_str("agent")?.into(),
        provider: f.required_str("provider")?,
        model: f.required_str("model")?,
        outcome: CallOutcome::parse(&outcome)
            .ok_or_else(|| anyhow::anyhow!("llm_calls: unknown outcome `{outcome}`"))?,
        input_tokens: count("input_tokens"),
        output_tokens: count("output_tokens"),
        latency: Duration::from_millis(count("latency_ms")),
        error: f.str("error"),
        at: f.date("at").unwrap_or_default(),
    })
}

pub(super) fn inbox_doc(entry: &InboxEntry) -> Document {
    doc! {
        "_id": entry.wamid.as_str(),
        "wa_id": entry.wa_id.as_str(),
        "phone_number_id": &entry.phone_number_id,
        "type": &entry.kind,
        "text": opt_str(&entry.text),
        "payload": json_to_bson(&entry.payload),
        "content": bson::to_bson(&entry.content).unwrap_or(Bson::Null),
        "context_id": opt_str(&entry.context_id),
        "sent_at": opt_date(entry.sent_at),
        "status": entry.status.as_str(),
        "received_at": date(entry.received_at),
        "attempts": i64::from(entry.attempts),
    }
}

pub(super) fn inbox_entry(doc: &Document) -> StoreResult<InboxEntry> {
    let f = Fields(doc);
    Ok(InboxEntry {
        wamid: WaMessageId::from(f.required_str("_id")?),
        wa_id: f.wa_id("wa_id")?,
        phone_number_id: f.str("phone_number_id").unwrap_or_default(),
        kind: f.str("type").unwrap_or_default(),
        text: f.str("text"),
        payload: bson_to_json(doc.get("payload")),
        // Entries stored before `content` existed read as `Other`: their words are in `text`.
        content: doc
            .get("content")
            .and_then(|content| bson::from_bson(content.clone()).ok())
            .unwrap_or(Content::Other),
        context_id: f.str("context_id"),
        sent_at: f.date("sent_at"),
        status: f
            .str("status")
            .and_then(|s| InboxStatus::parse(&s))
            .unwrap_or(InboxStatus::Pending),
        received_at: f.date("received_at").unwrap_or_default(),
        attempts: f.int("attempts").unwrap_or(0).try_into().unwrap_or(0),
    })
}

pub(super) fn message_doc(seq: i64, m: &NewMessage) -> StoreResult<Document> {
    let tool_calls = bson::to_bson(&m.tool_calls).context("tool calls to BSON")?;
    let mut doc = doc! {
        "wa_id": m.wa_id.as_str(),
        "seq": seq,
        "role": m.role.as_str(),
        "content": &m.content,
        "agent": m.agent.as_deref().map_or(Bson::Null, |agent| Bson::String(agent.to_owned())),
        "tool_calls": tool_calls,
        "tool_call_id": opt_str(&m.tool_call_id),
        "wamids": m.wamids.iter().map(|w| w.as_str()).collect::<Vec<_>>(),
        "at": date(m.at),
    };
    if !m.attachments.is_empty() {
        let attachments = bson::to_bson(&m.attachments).context("attachments to BSON")?;
        doc.insert("attachments", attachments);
    }
    Ok(doc)
}

pub(super) fn stored_message(doc: &Document) -> StoreResult<StoredMessage> {
    let f = Fields(doc);
    let tool_calls = match doc.get("tool_calls") {
        Some(Bson::Array(calls)) => calls
            .iter()
            .map(|c| bson::from_bson::<ToolCall>(c.clone()))
            .collect::<Result<_, _>>()
            .context("tool_calls in messages")?,
        _ => Vec::new(),
    };
    Ok(StoredMessage {
        seq: f.int("seq").unwrap_or_default(),
        message: NewMessage {
            wa_id: f.wa_id("wa_id")?,
            role: f
                .str("role")
                .and_then(|r| MessageRole::parse(&r))
                .ok_or_else(|| anyhow::anyhow!("message without a known role"))?,
            content: f.str("content").unwrap_or_default(),
            agent: f.str("agent").map(AgentName::from),
            tool_calls,
            tool_call_id: f.str("tool_call_id"),
            wamids: match doc.get("wamids") {
                Some(Bson::Array(ids)) => ids
                    .iter()
                    .filter_map(|id| id.as_str().map(|id| WaMessageId::from(id.to_owned())))
                    .collect(),
                _ => Vec::new(),
            },
            attachments: match doc.get("attachments") {
                // One this version cannot read is dropped, never the message.
                Some(Bson::Array(items)) => items
                    .iter()
                    .filter_map(|a| bson::from_bson::<Attachment>(a.clone()).ok())
                    .collect(),
                _ => Vec::new(),
            },
            at: f.date("at").unwrap_or_default(),
        },
    })
}

pub(super) fn outbox_entry(doc: &Document) -> StoreResult<OutboxEntry> {
    let f = Fields(doc);
    let id = doc
        .get_object_id("_id")
        .map(|id| id.to_hex())
        .or_else(|_| f.required_str("_id"))?;
    let error = match doc.get("error") {
        Some(Bson::Document(e)) => bson::from_document::<GraphError>(e.clone()).ok(),
        _ => None,
    };
    let count = |key: &str| f.int(key).and_then(|n| u32::try_from(n).ok());
    let buttons = match doc.get("buttons") {
        Some(Bson::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b {
                Bson::Document(button) => Some(ReplyButton::new(
                    button.get_str("id").ok()?,
                    button.get_str("title").ok()?,
                )),
                // Written before buttons had ids of their own: a title, sent as `btn_<i>`.
                Bson::String(title) => Some(ReplyButton::new(format!("btn_{i}"), title)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(OutboxEntry {
        id: OutboxId(id),
        wa_id: f.wa_id("wa_id")?,
        in_reply_to: f.str("in_reply_to").map(WaMessageId::from),
        phone_number_id: f.str("phone_number_id"),
        body: f.str("body").unwrap_or_default(),
        buttons,
        template: doc.get_document("template").ok().and_then(template),
        media: doc
            .get("media")
            .and_then(|m| bson::from_bson::<Media>(m.clone()).ok()),
        part: count("part").unwrap_or(0),
        parts: count("parts").unwrap_or(1),
        status: f
            .str("status")
            .and_then(|s| OutboxStatus::parse(&s))
            .unwrap_or(OutboxStatus::Queued),
        next_attempt_at: f.date("next_attempt_at"),
        wamid: f.str("wamid").map(WaMessageId::from),
        error,
        attempts: f.int("attempts").unwrap_or(0).try_into().unwrap_or(0),
        at: f.date("at").unwrap_or_default(),
        sending_at: f.date("sending_at"),
        status_at: f.date("status_at"),
        pricing: doc
            .get_document("pricing")
            .ok()
            .and_then(|p| bson::from_document::<Pricing>(p.clone()).ok()),
        fallback: doc.get_document("fallback").ok().and_then(template),
        fell_back: doc.get_bool("fell_back").unwrap_or(false),
        purpose: f.str("purpose").and_then(|p| Purpose::parse(&p)),
        about: doc
            .get_array("about")
            .map(|list| {
                list.iter()
                    .filter_map(|b| WaId::parse(b.as_str()?).ok())
                    .collect()
            })
            .unwrap_or_default(),
    })
}

pub(super) fn outbox_id(id: &OutboxId) -> Bson {
    ObjectId::parse_str(&id.0).map_or_else(|_| Bson::String(id.0.clone()), Bson::ObjectId)
}

/// An `outbox` document.
pub(super) fn outbox_doc(entry: &OutboxEntry) -> Document {
    let mut doc = doc! {
        "_id": outbox_id(&entry.id),
        "wa_id": entry.wa_id.as_str(),
        "in_reply_to": entry.in_reply_to.as_ref().map(|w| w.as_str()),
        "phone_number_id": opt_str(&entry.phone_number_id),
        "body": &entry.body,
        "buttons": entry.buttons.iter().map(|b| doc! {"id": &b.id, "title": &b.title}).collect::<Vec<_>>(),
        "template": entry.template.as_ref().map(template_doc),
        "part": i64::from(entry.part),
        "parts": i64::from(entry.parts),
        "status": entry.status.as_str(),
        "attempts": i64::from(entry.attempts),
        "at": date(entry.at),
    };
    if let Some(media) = entry.media.as_ref().and_then(|m| bson::to_bson(m).ok()) {
        doc.insert("media", media);
    }
    if let Some(at) = entry.sending_at {
        doc.insert("sending_at", date(at));
    }
    if let Some(fallback) = &entry.fallback {
        doc.insert("fallback", template_doc(fallback));
    }
    if entry.fell_back {
        doc.insert("fell_back", true);
    }
    if let Some(purpose) = entry.purpose {
        doc.insert("purpose", purpose.key());
    }
    if !entry.about.is_empty() {
        doc.insert(
            "about",
            entry.about.iter().map(WaId::as_str).collect::<Vec<_>>(),
        );
    }
    if let Some(at) = entry.next_attempt_at {
        doc.insert("next_attempt_at", date(at));
    }
    if let Some(wamid) = &entry.wamid {
        doc.insert("wamid", wamid.as_str());
    }
    if let Some(at) = entry.status_at {
        doc.insert("status_at", date(at));
    }
    if let Some(error) = entry.error.as_ref().and_then(|e| bson::to_bson(e).ok()) {
        doc.insert("error", error);
    }
    doc
}

pub(super) fn statuses(list: &[OutboxStatus]) -> Vec<&'static str> {
    list.iter().map(|s| s.as_str()).collect()
}

/// An `events` document.
pub(super) fn event_doc(event: &Event) -> StoreResult<Document> {
    let Bson::Document(typed) = bson::to_bson(&event.event).context("event to BSON")? else {
        return Err(StoreError::Unexpected(anyhow::anyhow!(
            "an event is not a document"
        )));
    };
    let mut doc = doc! {
        "_id": &event.id,
        "wa_id": event.wa_id.as_str(),
        "at": date(event.at),
        "status": event.status.as_str(),
        "attempts": i64::from(event.attempts),
    };
    doc.extend(typed);
    if let Some(at) = event.next_attempt_at {
        doc.insert("next_attempt_at", date(at));
    }
    if let Some(error) = &event.error {
        doc.insert("error", error);
    }
    Ok(doc)
}

pub(super) fn event(doc: &Document) -> StoreResult<Event> {
    let f = Fields(doc);
    let typed = doc! {
        "type": doc.get("type").cloned().unwrap_or(Bson::Null),
        "data": doc.get("data").cloned().unwrap_or(Bson::Null),
    };
    let business =
        bson::from_document::<BusinessEvent>(typed).context("an event's type and data")?;
    Ok(Event {
        id: f.required_str("_id")?,
        wa_id: f.wa_id("wa_id")?,
        at: f.date("at").unwrap_or_default(),
        event: business,
        status: f
            .str("status")
            .and_then(|s| EventStatus::parse(&s))
            .unwrap_or(EventStatus::Pending),
        attempts: f
            .int("attempts")
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        next_attempt_at: f.date("next_attempt_at"),
        claimed_until: f.date("claimed_until"),
        delivered_at: f.date("delivered_at"),
        error: f.str("error"),
    })
}
