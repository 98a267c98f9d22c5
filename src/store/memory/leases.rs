//! MemoryStore's `leases` and `instances`: which process holds which conversation, and which
//! processes are alive.

use crate::domain::WaId;
use crate::store::memory::LeaseRecord;
use crate::store::{InstanceRecord, LeaseView, MemoryStore, StoreResult};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::LeaseStore;

#[async_trait]
impl LeaseStore for MemoryStore {
    async fn lease_of(&self, wa_id: &WaId) -> StoreResult<Option<LeaseView>> {
        Ok(self.lock().leases.get(wa_id).map(|lease| LeaseView {
            owner: lease.owner.clone(),
            until: lease.until,
            released: lease.released,
        }))
    }

    async fn claim_conversation(
        &self,
        wa_id: &WaId,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        live: &[String],
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let held = inner.leases.get(wa_id).is_some_and(|lease| {
            !lease.released
                && lease.owner != owner
                && (lease.until > now || live.contains(&lease.owner))
        });
        if held {
            return Ok(false);
        }
        inner.leases.insert(
            wa_id.clone(),
            LeaseRecord {
                owner: owner.to_owned(),
                until,
                released: false,
            },
        );
        inner.conversation_mut(wa_id);
        Ok(true)
    }

    async fn release_conversation(&self, wa_id: &WaId, owner: &str) -> StoreResult<()> {
        if let Some(lease) = self.lock().leases.get_mut(wa_id)
            && lease.owner == owner
        {
            lease.released = true;
        }
        Ok(())
    }

    async fn release_all_leases(&self, owner: &str) -> StoreResult<u64> {
        let mut released = 0;
        for lease in self.lock().leases.values_mut() {
            if lease.owner == owner && !lease.released {
                lease.released = true;
                released += 1;
            }
        }
        Ok(released)
    }

    async fn active_leases(&self, now: DateTime<Utc>, live: &[String]) -> StoreResult<u64> {
        Ok(self
            .lock()
            .leases
            .values()
            .filter(|lease| !lease.released && (lease.until > now || live.contains(&lease.owner)))
            .count() as u64)
    }

    async fn server_time(&self) -> StoreResult<DateTime<Utc>> {
        Ok(self.now())
    }

    async fn instance_beat(
        &self,
        id: &str,
        nonce: &str,
        take_over: bool,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        let mut inner = self.lock();
        let holds = inner
            .instances
            .get(id)
            .is_some_and(|record| record.nonce == nonce);
        if !take_over && !holds {
            return Ok(None);
        }
        let now = Utc::now();
        inner.instances.insert(
            id.to_owned(),
            InstanceRecord {
                id: id.to_owned(),
                nonce: nonce.to_owned(),
                seen_at: now,
            },
        );
        Ok(Some(now))
    }

    async fn instances(&self) -> StoreResult<Vec<InstanceRecord>> {
        Ok(self.lock().instances.values().cloned().collect())
    }

    async fn instance_left(&self, id: &str, nonce: &str) -> StoreResult<()> {
        let mut inner = self.lock();
        if inner
            .instances
            .get(id)
            .is_some_and(|record| record.nonce == nonce)
        {
            inner.instances.remove(id);
        }
        Ok(())
    }
}
