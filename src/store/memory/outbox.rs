//! MemoryStore's `outbox`: replies on their way to the Graph API, and their delivery statuses.

use crate::domain::OutboxId;
use crate::domain::{StatusUpdate, WaId, WaMessageId};
use crate::store::memory::early_status;
use crate::store::{
    Fallback, MemoryStore, NewOutbox, OutboxEntry, OutboxStatus, OutboxUpdate, StatusOutcome,
    StoreResult, TemplateStatus, first_distinct,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::OutboxStore;

#[async_trait]
impl OutboxStore for MemoryStore {
    async fn insert_outbox(&self, entries: &[NewOutbox]) -> StoreResult<Vec<OutboxId>> {
        let mut inner = self.lock();
        Ok(entries
            .iter()
            .map(|entry| {
                let id = OutboxId(bson::oid::ObjectId::new().to_hex());
                inner.push_outbox(OutboxEntry::queued(id.clone(), entry));
                id
            })
            .collect())
    }

    async fn record_reply(&self, parts: &[OutboxEntry]) -> StoreResult<()> {
        let mut inner = self.lock();
        for part in parts {
            let Some(&index) = inner.outbox_by_id.get(&part.id) else {
                inner.push_outbox(part.clone());
                continue;
            };
            if inner.early.remove(&part.id) {
                // What the status webhook knew stays; the rest is the sender's.
                let early = inner.outbox[index].clone();
                let mut completed = part.clone();
                completed.status = early.status;
                completed.status_at = early.status_at;
                completed.wamid = early.wamid.or(completed.wamid);
                *inner.outbox[index] = completed;
                inner.reindex_outbox();
            }
        }
        Ok(())
    }

    async fn outbox_entry(&self, id: &OutboxId) -> StoreResult<Option<OutboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .outbox_by_id
            .get(id)
            .map(|&index| (*inner.outbox[index]).clone()))
    }

    async fn update_outbox(&self, id: &OutboxId, update: &OutboxUpdate) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(&index) = inner.outbox_by_id.get(id) else {
            return Err(anyhow::anyhow!("no outbox entry {}", id.0).into());
        };
        let entry = &mut inner.outbox[index];
        let unsent = matches!(entry.status, OutboxStatus::Queued | OutboxStatus::Sending);
        let applied = unsent || matches!(update, OutboxUpdate::Sent { .. });
        match update {
            OutboxUpdate::Sending { at, resend_at } if unsent => {
                entry.status = OutboxStatus::Sending;
                entry.sending_at = Some(*at);
                entry.next_attempt_at = Some(*resend_at);
                entry.attempts += 1;
            }
            OutboxUpdate::Sent { wamid } => {
                entry.wamid.clone_from(wamid);
                entry.next_attempt_at = None;
                if OutboxStatus::Sent.replaces().contains(&entry.status) {
                    entry.status = OutboxStatus::Sent;
                }
                if let Some(wamid) = wamid {
                    inner.outbox_by_wamid.insert(wamid.clone(), index);
                }
            }
            OutboxUpdate::Retry { at, error } if unsent => {
                entry.status = OutboxStatus::Queued;
                entry.next_attempt_at = Some(*at);
                entry.error.clone_from(error);
            }
            OutboxUpdate::Failed { error } if unsent => {
                entry.status = OutboxStatus::Failed;
                entry.error = Some(error.clone());
            }
            OutboxUpdate::Skipped { error } if unsent => {
                entry.status = OutboxStatus::Skipped;
                entry.error = Some(error.clone());
                entry.fallback = None;
            }
            _ => {}
        }
        let unsent = matches!(
            inner.outbox[index].status,
            OutboxStatus::Queued | OutboxStatus::Sending
        );
        if unsent {
            inner.unsent.insert(index);
        } else {
            inner.unsent.remove(&index);
        }
        Ok(applied)
    }

    async fn unsent_outbox(&self, wa_id: &WaId) -> StoreResult<Vec<OutboxEntry>> {
        let inner = self.lock();
        let mut unsent: Vec<OutboxEntry> = inner
            .unsent
            .iter()
            .map(|&i| &*inner.outbox[i])
            .filter(|e| &e.wa_id == wa_id)
            .cloned()
            .collect();
        unsent.sort_by_key(|e| (e.at, e.part));
        Ok(unsent)
    }

    async fn conversations_with_unsent_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<WaId>> {
        let inner = self.lock();
        let mut due: Vec<&OutboxEntry> = inner
            .unsent
            .iter()
            .map(|&i| &*inner.outbox[i])
            .filter(|e| e.next_attempt_at.is_none_or(|at| at <= now))
            .collect();
        due.sort_by_key(|e| e.at);
        Ok(first_distinct(due.iter().map(|e| e.wa_id.clone()), limit))
    }

    async fn outbox_by_wamid(&self, wamid: &WaMessageId) -> StoreResult<Option<OutboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .outbox_by_wamid
            .get(wamid)
            .map(|&index| (*inner.outbox[index]).clone()))
    }

    async fn outbox_in_reply_to(&self, wamid: &WaMessageId) -> StoreResult<Vec<OutboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .outbox_by_reply_to
            .get(wamid)
            .into_iter()
            .flatten()
            .map(|&position| (*inner.outbox[position]).clone())
            .collect())
    }

    async fn fall_back(&self, id: &OutboxId, fallback: &Fallback) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(&index) = inner.outbox_by_id.get(id) else {
            return Ok(false);
        };
        let entry = &mut inner.outbox[index];
        if entry.fell_back
            || matches!(
                entry.status,
                OutboxStatus::Delivered | OutboxStatus::Read | OutboxStatus::Played
            )
        {
            return Ok(false);
        }
        let old = entry.wamid.take();
        entry.fall_back(fallback);
        if let Some(old) = old {
            inner.outbox_by_wamid.remove(&old);
        }
        inner.unsent.insert(index);
        Ok(true)
    }

    async fn billed_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        let inner = self.lock();
        let mut billed: Vec<OutboxEntry> = inner
            .outbox
            .iter()
            .filter(|e| e.at >= from && e.at < to)
            // Meta bills delivered messages.
            .filter(|e| {
                matches!(
                    e.status,
                    OutboxStatus::Delivered | OutboxStatus::Read | OutboxStatus::Played
                )
            })
            .filter(|e| e.pricing.as_ref().is_some_and(|p| p.billable))
            .map(|e| (**e).clone())
            .collect();
        billed.sort_by_key(|e| e.at);
        billed.truncate(limit);
        Ok(billed)
    }

    async fn undelivered_since(
        &self,
        since: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .outbox
            .iter()
            .rev()
            .filter(|e| {
                matches!(e.status, OutboxStatus::Failed | OutboxStatus::Skipped) && e.at >= since
            })
            .take(limit)
            .map(|e| (**e).clone())
            .collect())
    }

    async fn record_template_status(&self, status: &TemplateStatus) -> StoreResult<()> {
        self.lock().templates.insert(
            (status.name.clone(), status.language.clone()),
            status.clone(),
        );
        Ok(())
    }

    async fn template_statuses(&self) -> StoreResult<Vec<TemplateStatus>> {
        Ok(self.lock().templates.values().cloned().collect())
    }

    async fn record_account_health(
        &self,
        health: &crate::domain::AccountHealth,
    ) -> StoreResult<()> {
        self.lock()
            .accounts
            .insert(health.key.clone(), health.clone());
        Ok(())
    }

    async fn account_health(&self) -> StoreResult<Vec<crate::domain::AccountHealth>> {
        Ok(self.lock().accounts.values().cloned().collect())
    }

    async fn initiated_since(&self, since: DateTime<Utc>, with: &WaId) -> StoreResult<(u64, bool)> {
        let inner = self.lock();
        let reached: std::collections::HashSet<&WaId> = inner
            .outbox
            .iter()
            .filter(|e| e.template.is_some() && e.at >= since)
            .filter(|e| !matches!(e.status, OutboxStatus::Failed | OutboxStatus::Skipped))
            .map(|e| &e.wa_id)
            .collect();
        Ok((reached.len() as u64, reached.contains(with)))
    }

    async fn pause_sends(&self, key: &str, until: DateTime<Utc>) -> StoreResult<()> {
        let mut inner = self.lock();
        let kept = inner.send_pauses.entry(key.to_owned()).or_insert(until);
        *kept = (*kept).max(until);
        Ok(())
    }

    async fn send_pauses(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(String, DateTime<Utc>)>> {
        let mut inner = self.lock();
        inner.send_pauses.retain(|_, until| *until > now);
        let mut pauses: Vec<(String, DateTime<Utc>)> = inner
            .send_pauses
            .iter()
            .map(|(key, until)| (key.clone(), *until))
            .collect();
        pauses.sort_by_key(|(_, until)| std::cmp::Reverse(*until));
        pauses.truncate(limit);
        Ok(pauses)
    }

    async fn apply_status(&self, update: &StatusUpdate) -> StoreResult<StatusOutcome> {
        let Some(status) = OutboxStatus::parse(&update.status) else {
            return Ok(StatusOutcome::Unrecognised);
        };
        let mut inner = self.lock();
        let (index, outcome) = match inner.outbox_by_wamid.get(&update.wamid) {
            Some(&index) => (index, StatusOutcome::Applied),
            // Not by its wamid: the part the callback data names, if its wamid is not recorded.
            None => {
                let named = update
                    .callback_data
                    .as_deref()
                    .and_then(OutboxId::from_callback_data)
                    .and_then(|id| inner.outbox_by_id.get(&id).copied())
                    .filter(|&index| {
                        let entry = &inner.outbox[index];
                        // A part queued again as its fallback is a new message: the old
                        // one's statuses are not its own.
                        entry.wamid.is_none()
                            && !entry.fell_back
                            && status.replaces().contains(&entry.status)
                    });
                let Some(index) = named else {
                    return Ok(early_status(&mut inner, update, status));
                };
                inner.outbox[index].wamid = Some(update.wamid.clone());
                inner.outbox[index].next_attempt_at = None;
                inner.outbox_by_wamid.insert(update.wamid.clone(), index);
                (index, StatusOutcome::Reconciled)
            }
        };
        let entry = &mut inner.outbox[index];
        if let Some(pricing) = &update.pricing {
            entry.pricing = Some(pricing.clone());
        }
        if !status.replaces().contains(&entry.status) {
            return Ok(StatusOutcome::Stale);
        }
        entry.status = status;
        entry.status_at = update.at;
        if status == OutboxStatus::Failed {
            entry.error = update.errors.first().cloned();
        }
        if !matches!(status, OutboxStatus::Queued | OutboxStatus::Sending) {
            inner.unsent.remove(&index);
        }
        Ok(outcome)
    }
}
