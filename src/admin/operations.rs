//! What operators do to conversations and users, whatever face they use: the admin API
//! ([`super::api`]), the console and the CLI all call these, so they behave alike.

use crate::domain::DialogState;
use crate::domain::Role;
use crate::domain::WaId;
use crate::engine::handoff::{self, FollowUpStore, HandoffError, HandoffStore, OperatorReplyStore};
use crate::store::{
    Conversation, ConversationQuery, HandoffFilter, RoleAssignment, RoleSource, StoreError,
};
use crate::store::{
    ConversationStore, HistoryStore, LeaseStore, MaintenanceStore, OutboxStore, UserStore,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Messages shown with one conversation.
const SHOWN_MESSAGES: usize = 20;

/// Most conversations on one page.
const MAX_PAGE: usize = 200;

/// Why an admin request was refused, as JSON.
pub enum AdminError {
    /// No admin token configured: the admin API does not exist.
    Disabled,
    Unauthorized,
    /// The caller's role does not allow it (403).
    Forbidden(String),
    BadRequest(String),
    NotFound(String),
    /// The request is well formed but cannot be done as things are (409).
    Conflict(String),
    /// A prompt set with problems, each as `file:line: message` (422).
    InvalidPrompts(Vec<String>),
    Store(StoreError),
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdminError::Disabled => f.write_str("the admin API is off (no ZAGUAN_ADMIN_TOKEN)"),
            AdminError::Unauthorized => f.write_str("missing or wrong bearer token"),
            AdminError::BadRequest(why)
            | AdminError::Forbidden(why)
            | AdminError::NotFound(why)
            | AdminError::Conflict(why) => f.write_str(why),
            AdminError::InvalidPrompts(problems) => f.write_str(&problems.join("\n")),
            AdminError::Store(error) => write!(f, "{error}"),
        }
    }
}

impl From<HandoffError> for AdminError {
    fn from(error: HandoffError) -> Self {
        match error {
            HandoffError::NotFound(wa_id) => {
                AdminError::NotFound(format!("no conversation {wa_id}"))
            }
            HandoffError::Conflict(why) => AdminError::Conflict(why),
            window @ HandoffError::WindowClosed { .. } => AdminError::Conflict(window.to_string()),
            HandoffError::Invalid(why) => AdminError::BadRequest(why),
            HandoffError::Store(error) => AdminError::Store(error),
        }
    }
}

impl From<StoreError> for AdminError {
    fn from(error: StoreError) -> Self {
        AdminError::Store(error)
    }
}

/// A conversation in a list.
#[derive(Debug, Serialize)]
pub struct ConversationSummary {
    pub wa_id: String,
    pub dialog_state: DialogState,
    pub state_entered_at: Option<DateTime<Utc>>,
    pub last_activity_at: Option<DateTime<Utc>>,
    pub idle_seconds: Option<i64>,
    pub lang: Option<String>,
    pub pending_action: Option<String>,
    /// The operator who has it now (an expired handoff is not shown).
    pub handoff: Option<HandoffSummary>,
    /// An assistant asked for a person and nobody took it yet.
    pub handoff_requested: Option<HandoffRequestSummary>,
}

#[derive(Debug, Serialize)]
pub struct HandoffSummary {
    pub operator: String,
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

#[derive(Debug, Serialize)]
pub struct HandoffRequestSummary {
    pub at: DateTime<Utc>,
    pub reason: String,
    /// Staff notices that did not reach their member: who (masked) and why.
    pub notice_failures: Vec<NoticeFailureSummary>,
}

#[derive(Debug, Serialize)]
pub struct NoticeFailureSummary {
    /// The staff member's number, masked.
    pub member: String,
    pub reason: String,
    pub at: DateTime<Utc>,
}

pub(crate) fn summary(c: &Conversation, now: DateTime<Utc>) -> ConversationSummary {
    ConversationSummary {
        wa_id: c.wa_id.as_str().to_owned(),
        dialog_state: c.dialog_state.clone(),
        state_entered_at: c.state_entered_at,
        last_activity_at: c.last_activity(),
        idle_seconds: c.last_activity().map(|at| (now - at).num_seconds()),
        lang: c.lang.clone(),
        pending_action: c.pending_action.as_ref().map(|a| a.tool.clone()),
        handoff: c
            .handoff
            .as_ref()
            .filter(|h| h.is_active(now))
            .map(|h| HandoffSummary {
                operator: h.operator.clone(),
                since: h.since,
                until: h.until,
            }),
        handoff_requested: c.handoff_requested.as_ref().map(|r| HandoffRequestSummary {
            at: r.at,
            reason: r.reason.clone(),
            notice_failures: r
                .failures
                .iter()
                .map(|f| NoticeFailureSummary {
                    member: f.member.masked(),
                    reason: f.reason.clone(),
                    at: f.at,
                })
                .collect(),
        }),
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    /// An agent name: conversations whose `dialog_state` holds it.
    pub state: Option<String>,
    /// `2h`, `30m`…: idle at least this long.
    pub idle_for: Option<String>,
    /// `requested` (an assistant asked for a person) or `active` (an operator has it).
    pub handoff: Option<String>,
    /// `true`: only conversations in some assistant other than the primary one.
    pub in_assistant: Option<bool>,
    pub page: Option<usize>,
    pub limit: Option<usize>,
}

/// The conversations `params` asks for, as the API and `zaguan conversations list` show them.
pub async fn list_conversations(
    store: &(impl ConversationStore + ?Sized),
    params: &ListParams,
) -> Result<serde_json::Value, AdminError> {
    let now = Utc::now();
    let idle_since = match params.idle_for.as_deref().filter(|v| !v.is_empty()) {
        Some(text) => {
            let idle = humantime::parse_duration(text).map_err(|e| {
                AdminError::BadRequest(format!("idle_for `{text}` is not a duration like 2h: {e}"))
            })?;
            Some(now - chrono::Duration::from_std(idle).unwrap_or(chrono::Duration::MAX))
        }
        None => None,
    };
    let limit = params.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let page = params.page.unwrap_or(1).max(1);
    let handoff = match params.handoff.as_deref().filter(|v| !v.is_empty()) {
        None => None,
        Some("requested") => Some(HandoffFilter::Requested),
        Some("active") => Some(HandoffFilter::ActiveAt(now)),
        Some(other) => {
            return Err(AdminError::BadRequest(format!(
                "handoff `{other}`: expected `requested` or `active`"
            )));
        }
    };
    let query = ConversationQuery {
        agent: params
            .state
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(crate::domain::AgentName::from),
        idle_since,
        handoff,
        in_assistant: params.in_assistant.unwrap_or(false),
        skip: (page - 1) * limit,
        limit,
    };
    let conversations = store.list_conversations(&query).await?;
    Ok(json!({
        "page": page,
        "limit": limit,
        "conversations": conversations.iter().map(|c| summary(c, now)).collect::<Vec<_>>(),
    }))
}

pub(crate) fn wa_id(raw: &str) -> Result<WaId, AdminError> {
    WaId::parse(raw).map_err(|e| AdminError::BadRequest(format!("wa_id: {e}")))
}

/// One conversation in full, as the API and `zaguan conversations show` show it.
pub async fn show_conversation(
    store: &(impl ConversationStore + HistoryStore + OutboxStore + UserStore + ?Sized),
    raw: &str,
) -> Result<serde_json::Value, AdminError> {
    let wa_id = wa_id(raw)?;
    let Some(conversation) = store.conversation(&wa_id).await? else {
        return Err(AdminError::NotFound(format!("no conversation {raw}")));
    };
    let messages = store.recent_messages(&wa_id, SHOWN_MESSAGES).await?;
    let mut outbox = Vec::new();
    for message in &messages {
        for wamid in &message.message.wamids {
            outbox.extend(store.outbox_in_reply_to(wamid).await?);
        }
    }
    let last_error = outbox
        .iter()
        .rev()
        .find_map(|o| o.error.as_ref())
        .map(ToString::to_string);
    let user = store.user(&wa_id).await?;
    Ok(json!({
        "conversation": summary(&conversation, Utc::now()),
        "opted_out_at": user.as_ref().and_then(|u| u.opted_out_at),
        "opt_out_source": user.as_ref().and_then(|u| u.opt_out_source.clone()),
        "marketing_opted_out_at": user.as_ref().and_then(|u| u.marketing_opted_out_at),
        "referral": user.as_ref().and_then(|u| u.referral.clone()),
        "pending_action": conversation.pending_action.as_ref().map(|a| json!({
            "tool": a.tool, "args": a.args, "summary": a.summary, "agent": a.agent,
            "created_at": a.created_at,
        })),
        "reset_by": conversation.reset_by,
        "reset_at": conversation.reset_at,
        "last_error": last_error,
        "messages": messages.iter().map(|m| json!({
            "seq": m.seq,
            "role": m.message.role.as_str(),
            "agent": m.message.agent,
            "content": m.message.content,
            "tool_calls": m.message.tool_calls.iter().map(|c| json!({"id": c.id, "name": c.name, "args": c.args})).collect::<Vec<_>>(),
            "tool_call_id": m.message.tool_call_id,
            "at": m.message.at,
        })).collect::<Vec<_>>(),
        "outbox": outbox.iter().map(|o| json!({
            "id": o.id.0,
            "in_reply_to": o.in_reply_to.as_ref().map(|w| w.as_str()),
            "part": o.part,
            "parts": o.parts,
            "status": o.status.as_str(),
            "wamid": o.wamid.as_ref().map(|w| w.as_str()),
            "error": o.error.as_ref().map(ToString::to_string),
            "attempts": o.attempts,
            "at": o.at,
        })).collect::<Vec<_>>(),
    }))
}

/// Sets a contact's role, for the API and `zaguan users set-role`: `owner`, `agent` or
/// `prospect` stay until an operator changes them; `auto` hands the role back to the business
/// data (a prospect until the next message finds the number among owners or staff).
pub async fn set_role(
    store: &(impl UserStore + ?Sized),
    raw: &str,
    role: &str,
    operator: Option<&str>,
) -> Result<serde_json::Value, AdminError> {
    let wa_id = wa_id(raw)?;
    let (role, source) = match role.trim() {
        "owner" => (Role::Owner, RoleSource::Operator),
        "agent" => (Role::Agent, RoleSource::Operator),
        "prospect" => (Role::Prospect, RoleSource::Operator),
        "auto" => (Role::Prospect, RoleSource::Data),
        other => {
            return Err(AdminError::BadRequest(format!(
                "role `{other}` is not owner, agent, prospect or auto"
            )));
        }
    };
    let assignment = RoleAssignment {
        role,
        source,
        by: operator_name(operator),
        at: Utc::now(),
    };
    store.assign_role(&wa_id, &assignment).await?;
    tracing::info!(
        conversation.id = %wa_id.masked(),
        role = role.as_str(),
        source = source.as_str(),
        operator = %assignment.by,
        "role set by hand"
    );
    Ok(json!({
        "wa_id": wa_id.as_str(),
        "role": role.as_str(),
        "source": source.as_str(),
        "set_by": assignment.by,
        "set_at": assignment.at,
    }))
}

/// The operator named in a request ("admin-api" when none).
pub(crate) fn operator_name(operator: Option<&str>) -> String {
    operator
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .unwrap_or("admin-api")
        .to_owned()
}

/// Sends a conversation back to the primary agent, for the API and `zaguan conversations reset`.
pub async fn reset_conversation(
    store: &(impl ConversationStore + ?Sized),
    raw: &str,
    operator: Option<&str>,
) -> Result<serde_json::Value, AdminError> {
    let wa_id = wa_id(raw)?;
    let operator = operator_name(operator);
    let now = Utc::now();
    if !store.reset_conversation(&wa_id, &operator, now).await? {
        return Err(AdminError::NotFound(format!("no conversation {raw}")));
    }
    tracing::info!(conversation.id = %wa_id.masked(), operator = %operator, "conversation reset by an operator");
    metrics::counter!("zaguan_conversation_resets_total").increment(1);
    Ok(json!({
        "wa_id": wa_id.as_str(),
        "dialog_state": [],
        "reset_by": operator,
        "reset_at": now,
    }))
}

/// Takes a conversation for an operator, for the API and `zaguan conversations take`.
pub async fn take_conversation(
    store: &(impl HandoffStore + ?Sized),
    raw: &str,
    operator: Option<&str>,
    for_: Option<&str>,
    default_ttl: std::time::Duration,
) -> Result<serde_json::Value, AdminError> {
    let wa_id = wa_id(raw)?;
    let ttl = match for_.map(str::trim).filter(|v| !v.is_empty()) {
        Some(text) => humantime::parse_duration(text)
            .ok()
            .filter(|ttl| !ttl.is_zero())
            .ok_or_else(|| {
                AdminError::BadRequest(format!("for `{text}` is not a duration like 2h"))
            })?,
        None => default_ttl,
    };
    let handoff = handoff::take(store, &wa_id, &operator_name(operator), ttl, Utc::now()).await?;
    Ok(json!({
        "wa_id": wa_id.as_str(),
        "handoff": {"operator": handoff.operator, "since": handoff.since, "until": handoff.until},
    }))
}

/// Gives a conversation back to the bot, for the API and `zaguan conversations release`.
pub async fn release_conversation(
    store: &(impl HandoffStore + ?Sized),
    raw: &str,
    operator: Option<&str>,
) -> Result<serde_json::Value, AdminError> {
    let wa_id = wa_id(raw)?;
    let released = handoff::release(store, &wa_id, &operator_name(operator), Utc::now()).await?;
    Ok(json!({"wa_id": wa_id.as_str(), "released": released}))
}

/// Queues an operator's reply, for the API and `zaguan conversations reply`.
pub async fn operator_message(
    store: &(impl OperatorReplyStore + ?Sized),
    raw: &str,
    operator: Option<&str>,
    text: &str,
) -> Result<serde_json::Value, AdminError> {
    let wa_id = wa_id(raw)?;
    let reply = handoff::reply(store, &wa_id, &operator_name(operator), text, Utc::now()).await?;
    Ok(json!({"wa_id": wa_id.as_str(), "parts": reply.parts}))
}

/// Sends the follow-up template to a customer whose window closed (the API, the console).
pub async fn operator_follow_up(
    store: &(impl FollowUpStore + ?Sized),
    templates: &crate::templates::Templates,
    business: &str,
    raw: &str,
    who: &crate::admin::team::Identity,
) -> Result<serde_json::Value, AdminError> {
    let wa_id = wa_id(raw)?;
    let template = handoff::follow_up(
        store,
        templates,
        &wa_id,
        handoff::FollowUpBy {
            operator: &who.name,
            shown_as: &who.shown_as(business),
        },
        business,
        Utc::now(),
    )
    .await?;
    Ok(json!({"wa_id": wa_id.as_str(), "template": template.name, "language": template.language}))
}

/// Who holds a conversation while it is being forgotten, so no turn runs meanwhile.
const FORGETTER: &str = "zaguan-users-forget";

/// Erases what is stored about a contact, for `zaguan users forget`, the API and the console:
/// the conversation is first taken like a worker would (409 while a turn runs), so no turn
/// writes it back meanwhile.
pub async fn forget_user(
    store: &(impl LeaseStore + MaintenanceStore + ?Sized),
    raw: &str,
    lease: std::time::Duration,
) -> Result<crate::store::ForgetCounts, AdminError> {
    let wa_id = wa_id(raw)?;
    let now = store.server_time().await?;
    let since = now - chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
    let live: Vec<String> = store
        .instances()
        .await?
        .into_iter()
        .filter(|record| record.seen_at >= since)
        .map(|record| record.id)
        .collect();
    let now = Utc::now();
    if !store
        .claim_conversation(
            &wa_id,
            FORGETTER,
            now,
            now + chrono::Duration::minutes(5),
            &live,
        )
        .await?
    {
        return Err(AdminError::Conflict(format!(
            "{} is being answered right now; try again in a minute",
            wa_id.masked()
        )));
    }
    let counts = store.forget(&wa_id).await?;
    tracing::info!(conversation.id = %wa_id.masked(), deleted = counts.total(), "user forgotten");
    Ok(counts)
}
