//! The typed `State` of a turn and `context_extractor`, which loads it from the store: the user,
//! the conversation (`dialog_state`, `lang`) and the message window.

use chrono::{DateTime, Utc};

use crate::domain::WaId;
use crate::llm::ChatMessage;
use crate::realestate::GeoPoint;
use crate::store::{
    Handoff, HandoffRequest, MessageRole, PendingAction, Role, Store, StoreResult, StoredMessage,
    User,
};

/// Messages loaded per turn: hygiene keeps a window of 50 out of these.
pub const LOADED_MESSAGES: usize = 120;

/// Everything a turn knows about its conversation.
#[derive(Debug, Clone)]
pub struct State {
    pub wa_id: WaId,
    pub user: User,
    pub dialog_state: Vec<String>,
    pub lang: Option<String>,
    /// When the current `dialog_state` was entered.
    pub state_entered_at: Option<DateTime<Utc>>,
    /// A data-changing call waiting for the user's yes or no.
    pub pending_action: Option<PendingAction>,
    /// The last location the user shared.
    pub location: Option<GeoPoint>,
    /// An operator answers instead of the bot (when still active).
    pub handoff: Option<Handoff>,
    /// An assistant (or the token budget) asked for a person; no operator took it yet.
    pub handoff_requested: Option<HandoffRequest>,
    /// The stored history, oldest first (the last [`LOADED_MESSAGES`]).
    pub messages: Vec<StoredMessage>,
}

impl State {
    /// A readable summary of the user for prompts.
    pub fn user_info(&self) -> String {
        let mut info = format!("Rol: {}", self.user.role.as_str());
        if let Some(name) = &self.user.name {
            info.push_str(&format!("; nombre: {name}"));
        }
        if let Some(lang) = &self.lang {
            info.push_str(&format!("; idioma: {lang}"));
        }
        info
    }

    /// The history as the LLM sees it.
    pub fn chat_messages(&self) -> Vec<ChatMessage> {
        self.messages.iter().map(|m| to_chat(&m.message)).collect()
    }
}

fn to_chat(message: &crate::store::NewMessage) -> ChatMessage {
    match message.role {
        MessageRole::Human => ChatMessage::human(message.content.clone()),
        MessageRole::Ai => ChatMessage::Ai {
            content: message.content.clone(),
            tool_calls: message.tool_calls.clone(),
        },
        MessageRole::Tool => ChatMessage::tool(
            message.tool_call_id.clone().unwrap_or_default(),
            message.content.clone(),
        ),
    }
}

/// Loads the state of `wa_id`'s conversation. A user never seen is a prospect.
pub async fn context_extractor(store: &dyn Store, wa_id: &WaId) -> StoreResult<State> {
    let user = store.user(wa_id).await?.unwrap_or_else(|| User {
        wa_id: wa_id.clone(),
        name: None,
        username: None,
        role: Role::Prospect,
        lang: None,
    });
    let conversation = store.conversation(wa_id).await?;
    let messages = store.recent_messages(wa_id, LOADED_MESSAGES).await?;
    let conversation =
        conversation.unwrap_or_else(|| crate::store::Conversation::new(wa_id.clone()));
    Ok(State {
        wa_id: wa_id.clone(),
        lang: conversation.lang.or(user.lang.clone()),
        user,
        dialog_state: conversation.dialog_state,
        state_entered_at: conversation.state_entered_at,
        pending_action: conversation.pending_action,
        location: conversation.location,
        handoff: conversation.handoff,
        handoff_requested: conversation.handoff_requested,
        messages,
    })
}
