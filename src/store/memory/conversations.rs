//! MemoryStore's `conversations`: where each conversation stands (`dialog_state`, a pending action,
//! a handoff, its language).

use crate::domain::{DialogState, WaId};
use crate::domain::{Handoff, PendingAction};
use crate::store::{
    Conversation, ConversationQuery, HandoffReason, HandoffRequest, HandoffStep, MemoryStore,
    NoticeFailure, StoreResult,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::ConversationStore;

#[async_trait]
impl ConversationStore for MemoryStore {
    async fn conversation(&self, wa_id: &WaId) -> StoreResult<Option<Conversation>> {
        Ok(self.lock().conversations.get(wa_id).map(|c| (**c).clone()))
    }

    async fn set_dialog_state(
        &self,
        wa_id: &WaId,
        dialog_state: &DialogState,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let mut inner = self.lock();
        let conversation = inner.conversation_mut(wa_id);
        conversation.dialog_state = dialog_state.clone();
        conversation.state_entered_at = Some(at);
        conversation.updated_at = conversation.updated_at.max(Some(at));
        Ok(())
    }

    async fn list_conversations(
        &self,
        query: &ConversationQuery,
    ) -> StoreResult<Vec<Conversation>> {
        // Filtered and sorted by reference: only the page is copied (the health monitor asks
        // three times a tick, and copying every conversation cost 9 MB a time at 10,000).
        let inner = self.lock();
        let mut matching: Vec<&Conversation> = inner
            .conversations
            .values()
            .map(Box::as_ref)
            .filter(|c| query.admits(c))
            .collect();
        // Oldest activity first, as MongoStore sorts by `updated_at` from its index.
        matching.sort_by(|a, b| (a.last_activity(), &a.wa_id).cmp(&(b.last_activity(), &b.wa_id)));
        Ok(matching
            .into_iter()
            .skip(query.skip)
            .take(query.limit)
            .cloned()
            .collect())
    }

    async fn reset_conversation(
        &self,
        wa_id: &WaId,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(conversation) = inner.conversations.get_mut(wa_id) else {
            return Ok(false);
        };
        conversation.dialog_state = DialogState::primary();
        conversation.pending_action = None;
        conversation.state_entered_at = Some(at);
        conversation.updated_at = conversation.updated_at.max(Some(at));
        conversation.reset_by = Some(by.to_owned());
        conversation.reset_at = Some(at);
        Ok(true)
    }

    async fn set_handoff(&self, wa_id: &WaId, handoff: Option<&Handoff>) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(conversation) = inner.conversations.get_mut(wa_id) else {
            return Ok(false);
        };
        if handoff.is_some() {
            conversation.handoff_requested = None;
        }
        conversation.handoff = handoff.cloned();
        Ok(true)
    }

    async fn request_handoff(
        &self,
        wa_id: &WaId,
        reason: &HandoffReason,
        first_notice_at: Option<DateTime<Utc>>,
    ) -> StoreResult<HandoffRequest> {
        let mut inner = self.lock();
        let requested = &mut inner.conversation_mut(wa_id).handoff_requested;
        match requested {
            Some(request) => {
                request.add(reason.clone());
                Ok(request.clone())
            }
            None => Ok(requested
                .insert(HandoffRequest::first(reason.clone(), first_notice_at))
                .clone()),
        }
    }

    async fn due_handoffs(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(WaId, HandoffRequest)>> {
        let inner = self.lock();
        let mut due: Vec<(WaId, HandoffRequest)> = inner
            .conversations
            .iter()
            .filter_map(|(wa_id, c)| Some((wa_id.clone(), c.handoff_requested.clone()?)))
            .filter(|(_, r)| r.next_notice_at.is_some_and(|at| at <= now))
            .collect();
        due.sort_by_key(|(_, r)| r.next_notice_at);
        due.truncate(limit);
        Ok(due)
    }

    async fn advance_handoff(
        &self,
        wa_id: &WaId,
        requested_at: DateTime<Utc>,
        from_level: u8,
        step: &HandoffStep,
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(request) = inner
            .conversations
            .get_mut(wa_id)
            .and_then(|c| c.handoff_requested.as_mut())
            .filter(|r| r.at == requested_at && r.level == from_level)
        else {
            return Ok(false);
        };
        request.level = step.level;
        request.notified.extend(step.told.iter().cloned());
        request.failures.extend(step.failed.iter().cloned());
        request.next_notice_at = step.next_notice_at;
        Ok(true)
    }

    async fn handoff_notice_failed(
        &self,
        wa_id: &WaId,
        failure: &NoticeFailure,
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(request) = inner
            .conversations
            .get_mut(wa_id)
            .and_then(|c| c.handoff_requested.as_mut())
        else {
            return Ok(false);
        };
        request.failures.push(failure.clone());
        request.next_notice_at = Some(failure.at);
        Ok(true)
    }

    async fn set_pending_action(
        &self,
        wa_id: &WaId,
        action: Option<&PendingAction>,
    ) -> StoreResult<()> {
        self.lock().conversation_mut(wa_id).pending_action = action.cloned();
        Ok(())
    }

    async fn set_conversation_location(
        &self,
        wa_id: &WaId,
        location: crate::domain::GeoPoint,
    ) -> StoreResult<()> {
        self.lock().conversation_mut(wa_id).location = Some(location);
        Ok(())
    }

    async fn note_history_written(&self, wa_id: &WaId, at: DateTime<Utc>) -> StoreResult<()> {
        self.lock().conversation_mut(wa_id).history_at = Some(at);
        Ok(())
    }

    async fn set_conversation_lang(&self, wa_id: &WaId, lang: &str) -> StoreResult<()> {
        self.lock().conversation_mut(wa_id).lang = Some(lang.to_owned());
        Ok(())
    }
}
