//! The typed `State` of a turn and `context_extractor`, which loads it from the store: the user,
//! the conversation (`dialog_state`, `lang`) and the message window.

use crate::domain::DialogState;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::domain::GeoPoint;
use crate::domain::{Handoff, MessageRole, PendingAction};
use crate::domain::{WaId, WaMessageId};
use crate::llm::ChatMessage;
use crate::store::{
    ConversationStore, HandoffRequest, HistoryStore, StoreResult, StoredMessage, User, UserStore,
};

/// Messages loaded per turn: hygiene keeps a window of 50 out of these.
pub const LOADED_MESSAGES: usize = 120;

/// Everything a turn knows about its conversation.
#[derive(Debug, Clone)]
pub struct State {
    pub wa_id: WaId,
    pub user: User,
    pub dialog_state: DialogState,
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
    /// The history, oldest first (the last [`LOADED_MESSAGES`]), and this turn's messages.
    pub messages: Vec<StoredMessage>,
    /// When the history was last written by someone other than the turns (see
    /// [`Window`]).
    pub history_at: Option<DateTime<Utc>>,
    /// How many of the last `messages` are not stored yet: a node's messages are written
    /// together, before anything else is (see `Engine::save`).
    pub unsaved: usize,
    /// What the business data says about the user (see [`super::user_info`]).
    pub context: Option<String>,
    /// Their visits, as the data says: what the router reads beside their words; `None` when
    /// it could not be read, or there is no data.
    pub situation: Option<crate::domain::Situation>,
    /// The assistant the user's new message asks for by a tapped list row (see
    /// [`super::attachments::asked_agent`]); this turn only.
    pub asked_for: Option<String>,
    /// The contact's first message is this turn's: a lead for the agency's CRM.
    pub first_contact: bool,
}

impl State {
    /// Who is asking and what is going on with them, for the router.
    pub fn asking(&self) -> crate::agents::Asking {
        crate::agents::Asking {
            role: self.user.role,
            situation: self.situation,
        }
    }

    /// Whether inbound message `wamid` is already in the history: a turn resumed, or a
    /// message redelivered.
    pub fn is_stored(&self, wamid: &WaMessageId) -> bool {
        // A scan, not a set: a turn asks for one or two messages against a window of 50, and
        // hashing the window's ids cost more than comparing them.
        self.messages
            .iter()
            .filter(|m| m.message.role == MessageRole::Human)
            .any(|m| m.message.wamids.contains(wamid))
    }

    /// The agent of the last AI message: the one that called the tools being run, or wrote
    /// the reply.
    pub fn last_agent(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.message.role == MessageRole::Ai)
            .and_then(|m| m.message.agent.as_deref())
    }

    /// A readable summary of the user for prompts.
    pub fn user_info(&self) -> String {
        let mut info = format!("Rol: {}", self.user.role.as_str());
        if let Some(name) = &self.user.name {
            info.push_str(&format!("; nombre: {name}"));
        }
        if let Some(lang) = &self.lang {
            info.push_str(&format!("; idioma: {lang}"));
        }
        if let Some(context) = &self.context {
            info.push('\n');
            info.push_str(context);
        }
        info
    }

    /// The history as the model is sent it, at most `window` messages of it
    /// ([`history::for_model_from`](crate::engine::history::for_model_from)).
    pub fn model_messages(&self, window: usize) -> Vec<ChatMessage> {
        crate::engine::history::for_model_from(
            &self.messages,
            window,
            |m| m.message.role == MessageRole::Human,
            |m| to_chat(&m.message),
        )
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
pub async fn context_extractor(
    store: &(impl UserStore + ConversationStore + HistoryStore + ?Sized),
    wa_id: &WaId,
) -> StoreResult<State> {
    let user = store.user(wa_id).await?;
    context_for(store, wa_id, user).await
}

/// [`context_extractor`] for a user already known (`None`: never seen, a prospect): the
/// conversation and its window, in one read each.
pub async fn context_for(
    store: &(impl ConversationStore + HistoryStore + ?Sized),
    wa_id: &WaId,
    user: Option<User>,
) -> StoreResult<State> {
    context_with(store, wa_id, user, None).await
}

/// [`context_for`], taking the window from `window` when it is still the history's: read
/// while this process held the conversation's lease without a break, and nobody else wrote
/// to the history since (`history_at` unchanged).
pub async fn context_with(
    store: &(impl ConversationStore + HistoryStore + ?Sized),
    wa_id: &WaId,
    user: Option<User>,
    window: Option<Window>,
) -> StoreResult<State> {
    let mut user = user.unwrap_or_else(|| User::new(wa_id.clone()));
    let conversation = store.conversation(wa_id).await?;
    // Moved, not copied: copying a 50-message window was a tenth of a turn's CPU.
    let cached = window.filter(|window| {
        conversation
            .as_ref()
            .is_some_and(|c| c.history_at == window.history_at)
    });
    let messages = match cached {
        Some(window) => window.messages,
        None => store.recent_messages(wa_id, LOADED_MESSAGES).await?,
    };
    let conversation =
        conversation.unwrap_or_else(|| crate::store::Conversation::new(wa_id.clone()));
    // A role set by staff since `user` was read is on the conversation.
    if let Some(role) = conversation.role {
        user.role = role;
        user.role_source = conversation.role_source;
    }
    Ok(State {
        wa_id: wa_id.clone(),
        history_at: conversation.history_at,
        lang: conversation.lang.or(user.lang.clone()),
        user,
        dialog_state: conversation.dialog_state,
        state_entered_at: conversation.state_entered_at,
        pending_action: conversation.pending_action,
        location: conversation.location,
        handoff: conversation.handoff,
        handoff_requested: conversation.handoff_requested,
        messages,
        unsaved: 0,
        context: None,
        situation: None,
        asked_for: None,
        first_contact: false,
    })
}

/// A conversation's window as its last turn left it, kept by the process holding its lease:
/// nobody else writes to a history but an operator (who marks `history_at`), so the next turn
/// need not read it again.
#[derive(Debug, Clone)]
pub struct Window {
    pub history_at: Option<DateTime<Utc>>,
    pub messages: Vec<StoredMessage>,
}

/// The `users` documents turns read, kept a minute: a user's role and name change rarely, and
/// a conversation's turns come seconds apart. A role set through the store's `set_user_role`
/// is copied onto the conversation and applies at once; one edited in `users` by hand applies
/// within [`USER_TTL`].
pub struct UserCache {
    entries: Mutex<HashMap<WaId, (Option<User>, Instant)>>,
}

/// How long a user read for a turn is used for the next ones.
pub const USER_TTL: Duration = Duration::from_secs(60);
/// Users kept at most; past it the cache starts again empty.
const USER_CAPACITY: usize = 50_000;

impl Default for UserCache {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl UserCache {
    /// The user of `wa_id`, from the cache while fresh, else from the store.
    pub async fn user(
        &self,
        store: &(impl UserStore + ?Sized),
        wa_id: &WaId,
    ) -> StoreResult<Option<User>> {
        if let Some((user, read)) = self.lock().get(wa_id)
            && read.elapsed() < USER_TTL
        {
            return Ok(user.clone());
        }
        let user = store.user(wa_id).await?;
        let mut entries = self.lock();
        if entries.len() >= USER_CAPACITY {
            entries.clear();
        }
        entries.insert(wa_id.clone(), (user.clone(), Instant::now()));
        Ok(user)
    }

    /// Drops what is kept of `wa_id` (its record just changed).
    pub fn forget(&self, wa_id: &WaId) {
        self.lock().remove(wa_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WaId, (Option<User>, Instant)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}
