//! MemoryStore's `users`: who wrote, and the role the business gives them.

use crate::domain::WaId;
use crate::store::{ContactSeen, MemoryStore, OptOut, RoleAssignment, StoreResult, User};
use async_trait::async_trait;

use crate::store::UserStore;

#[async_trait]
impl UserStore for MemoryStore {
    async fn record_lead(
        &self,
        wa_id: &WaId,
        at: chrono::DateTime<chrono::Utc>,
        assistant: &str,
    ) -> StoreResult<()> {
        let mut inner = self.lock();
        let user = prospect(&mut inner.users, wa_id);
        if user.lead_at.is_none() {
            user.lead_at = Some(at);
            user.lead_assistant = Some(assistant.to_owned());
        }
        Ok(())
    }

    async fn note_portal_contact(
        &self,
        wa_id: &WaId,
        name: Option<&str>,
        source: &str,
    ) -> StoreResult<()> {
        let mut inner = self.lock();
        let user = prospect(&mut inner.users, wa_id);
        if user.name.is_none() {
            user.name = name.map(str::to_owned);
        }
        if user.lead_source.is_none() {
            user.lead_source = Some(source.to_owned());
        }
        Ok(())
    }

    async fn leads_since(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<User>> {
        let mut leads: Vec<User> = self
            .lock()
            .users
            .values()
            .filter(|u| u.lead_at.is_some_and(|at| at >= since))
            .map(|u| (**u).clone())
            .collect();
        leads.sort_by(|a, b| (a.lead_at, &a.wa_id).cmp(&(b.lead_at, &b.wa_id)));
        leads.truncate(limit);
        Ok(leads)
    }

    async fn opt_outs_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<u64> {
        Ok(self
            .lock()
            .users
            .values()
            .filter(|u| u.opted_out_at.is_some_and(|at| at >= from && at < to))
            .count() as u64)
    }

    async fn record_contact(&self, contact: &ContactSeen) -> StoreResult<()> {
        let mut inner = self.lock();
        let user = inner
            .users
            .entry(contact.wa_id.clone())
            .or_insert_with(|| Box::new(User::new(contact.wa_id.clone())));
        if contact.name.is_some() {
            user.name.clone_from(&contact.name);
        }
        if contact.username.is_some() {
            user.username.clone_from(&contact.username);
        }
        let conversation = inner.conversation_mut(&contact.wa_id);
        if contact.phone.is_some() {
            conversation.phone.clone_from(&contact.phone);
        }
        if contact.user_id.is_some() {
            conversation.user_id.clone_from(&contact.user_id);
        }
        conversation.last_inbound_at = conversation.last_inbound_at.max(Some(contact.seen_at));
        conversation.updated_at = conversation.updated_at.max(Some(contact.seen_at));
        Ok(())
    }

    async fn user(&self, wa_id: &WaId) -> StoreResult<Option<User>> {
        Ok(self.lock().users.get(wa_id).map(|u| (**u).clone()))
    }

    async fn set_opt_out(&self, wa_id: &WaId, opt_out: Option<&OptOut>) -> StoreResult<()> {
        let mut inner = self.lock();
        let user = prospect(&mut inner.users, wa_id);
        user.opted_out_at = opt_out.map(|o| o.at);
        user.opt_out_source = opt_out.map(|o| o.source.clone());
        Ok(())
    }

    async fn set_marketing_preference(
        &self,
        wa_id: &WaId,
        stopped: bool,
        at: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let user = prospect(&mut inner.users, wa_id);
        if user.marketing_choice_at.is_some_and(|last| last >= at) {
            return Ok(false);
        }
        user.marketing_choice_at = Some(at);
        user.marketing_opted_out_at = stopped.then_some(at);
        Ok(true)
    }

    async fn note_referral(
        &self,
        wa_id: &WaId,
        referral: &crate::domain::Referral,
        at: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let user = prospect(&mut inner.users, wa_id);
        if user.referral.is_some() {
            return Ok(false);
        }
        user.referral = Some(referral.clone());
        user.referral_at = Some(at);
        Ok(true)
    }

    async fn assign_role(&self, wa_id: &WaId, assignment: &RoleAssignment) -> StoreResult<()> {
        let mut inner = self.lock();
        let user = prospect(&mut inner.users, wa_id);
        user.role = assignment.role;
        user.role_source = Some(assignment.source);
        user.role_set_by = Some(assignment.by.clone());
        user.role_set_at = Some(assignment.at);
        let conversation = inner.conversation_mut(wa_id);
        conversation.role = Some(assignment.role);
        conversation.role_source = Some(assignment.source);
        Ok(())
    }
}

/// The contact's user, made a prospect if they were not there yet.
fn prospect<'a>(
    users: &'a mut std::collections::HashMap<WaId, Box<User>>,
    wa_id: &WaId,
) -> &'a mut User {
    users
        .entry(wa_id.clone())
        .or_insert_with(|| Box::new(User::new(wa_id.clone())))
}
