//! The health of the conversations, as gauges an alert can watch: the inbox backlog and its
//! oldest message's age, messages given up on, conversations claimed right now, and
//! conversations stuck in an assistant (a non-empty `dialog_state` idle beyond a threshold —
//! the seed's first debugging scenario). A stuck conversation is logged once, when first seen.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::instances::Membership;
use crate::domain::WaId;
use crate::store::{ConversationQuery, ConversationStore, HandoffFilter, InboxStore, LeaseStore};
use crate::store::{Store, StoreError};

/// Most stuck conversations looked at per check.
const MAX_STUCK: usize = 10_000;

/// Longest between two counts of the stuck conversations.
const STUCK_RECOUNT_MAX: Duration = Duration::from_secs(5 * 60);

/// What one check found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Health {
    pub inbox_open: u64,
    pub oldest_pending_seconds: i64,
    pub inbox_failed: u64,
    pub active_leases: u64,
    pub stuck: u64,
    /// Conversations an operator answers right now.
    pub handoffs_active: u64,
    /// Conversations where an assistant asked for a person and nobody took them yet.
    pub handoffs_requested: u64,
}

/// Reads the inbox's backlog, the leases and the conversations.
pub struct Monitor<S: ?Sized = dyn Store> {
    store: Arc<S>,
    /// A conversation in an assistant idle this long is stuck.
    stuck_after: Duration,
    /// How often the stuck ones are counted again: a small part of `stuck_after`. Their query
    /// is a range with no equality, which FerretDB answers by reading every conversation.
    stuck_every: Duration,
    stuck: std::sync::Mutex<Stuck>,
    /// Who is alive: a lease counts while its holder beats.
    membership: Option<Arc<Membership>>,
}

/// The last count of the stuck conversations.
#[derive(Default)]
struct Stuck {
    counted_at: Option<DateTime<Utc>>,
    count: u64,
    /// Already logged as stuck; forgotten once it is not.
    reported: HashSet<WaId>,
}

impl<S: InboxStore + LeaseStore + ConversationStore + ?Sized> Monitor<S> {
    pub fn new(store: Arc<S>, stuck_after: Duration) -> Self {
        Self {
            store,
            stuck_after,
            stuck_every: (stuck_after / 24).min(STUCK_RECOUNT_MAX),
            stuck: Default::default(),
            membership: None,
        }
    }

    /// Counts the leases of `membership`'s live instances as claimed.
    pub fn with_membership(mut self, membership: Arc<Membership>) -> Self {
        self.membership = Some(membership);
        self
    }

    /// Checks every `every` until the process stops.
    pub fn spawn(self, every: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                if let Err(error) = self.check(Utc::now()).await {
                    tracing::warn!("health check failed: {error}");
                }
                tokio::time::sleep(every).await;
            }
        })
    }

    /// How many conversations are stuck in an assistant, counted again once `stuck_every` has
    /// passed since the last count; those newly stuck are logged.
    async fn stuck(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let every = chrono::Duration::from_std(self.stuck_every).unwrap_or(chrono::Duration::MAX);
        {
            let known = self
                .stuck
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(at) = known.counted_at
                && at <= now
                && now - at < every
            {
                return Ok(known.count);
            }
        }
        let since =
            now - chrono::Duration::from_std(self.stuck_after).unwrap_or(chrono::Duration::MAX);
        let stuck = self
            .store
            .list_conversations(&ConversationQuery {
                idle_since: Some(since),
                in_assistant: true,
                limit: MAX_STUCK,
                ..ConversationQuery::default()
            })
            .await?;
        let mut known = self
            .stuck
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now_stuck: HashSet<WaId> = stuck.iter().map(|c| c.wa_id.clone()).collect();
        for conversation in &stuck {
            if known.reported.insert(conversation.wa_id.clone()) {
                tracing::warn!(
                    conversation.id = %conversation.wa_id.masked(),
                    agent = %conversation.dialog_state,
                    idle_since = ?conversation.last_activity(),
                    "conversation stuck in an assistant; `zaguan conversations reset` sends it back"
                );
            }
        }
        known.reported.retain(|wa_id| now_stuck.contains(wa_id));
        known.counted_at = Some(now);
        known.count = stuck.len() as u64;
        Ok(known.count)
    }

    /// One check: measures, sets the gauges, logs newly stuck conversations.
    pub async fn check(&self, now: DateTime<Utc>) -> Result<Health, StoreError> {
        let backlog = self.store.inbox_backlog().await?;
        let live = self
            .membership
            .as_ref()
            .map(|membership| membership.live())
            .unwrap_or_default();
        let active_leases = self.store.active_leases(now, &live).await?;
        let stuck = self.stuck(now).await?;
        let handoffs = |filter| ConversationQuery {
            handoff: Some(filter),
            limit: MAX_STUCK,
            ..ConversationQuery::default()
        };
        let handoffs_active = self
            .store
            .list_conversations(&handoffs(HandoffFilter::ActiveAt(now)))
            .await?
            .len() as u64;
        let handoffs_requested = self
            .store
            .list_conversations(&handoffs(HandoffFilter::Requested))
            .await?
            .len() as u64;
        let health = Health {
            inbox_open: backlog.open,
            oldest_pending_seconds: backlog
                .oldest_received_at
                .map_or(0, |at| (now - at).num_seconds().max(0)),
            inbox_failed: backlog.failed,
            active_leases,
            stuck,
            handoffs_active,
            handoffs_requested,
        };
        metrics::gauge!("zaguan_inbox_backlog").set(health.inbox_open as f64);
        metrics::gauge!("zaguan_inbox_oldest_pending_seconds")
            .set(health.oldest_pending_seconds as f64);
        metrics::gauge!("zaguan_inbox_failed").set(health.inbox_failed as f64);
        metrics::gauge!("zaguan_active_leases").set(health.active_leases as f64);
        metrics::gauge!("zaguan_stuck_conversations").set(health.stuck as f64);
        metrics::gauge!("zaguan_handoffs", "state" => "active").set(health.handoffs_active as f64);
        metrics::gauge!("zaguan_handoffs", "state" => "requested")
            .set(health.handoffs_requested as f64);
        Ok(health)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DialogState;
    use crate::store::{HandoffReason, MemoryStore};

    /// The stuck conversations are counted again only once a small part of the threshold has
    /// passed; the other figures are fresh at every check.
    #[tokio::test]
    async fn stuck_conversations_are_recounted_every_few_minutes() {
        let store = Arc::new(MemoryStore::new());
        let now = Utc::now();
        let stuck_in = |wa_id: &'static str| {
            let store = store.clone();
            async move {
                let wa_id = WaId::parse(wa_id).unwrap();
                let state = DialogState::entered("appointment_assistant");
                let hours_ago = now - chrono::Duration::hours(3);
                store
                    .set_dialog_state(&wa_id, &state, hours_ago)
                    .await
                    .unwrap();
            }
        };
        stuck_in("34600000001").await;
        let monitor = Monitor::new(store.clone(), Duration::from_secs(2 * 3600));
        assert_eq!(monitor.stuck_every, Duration::from_secs(5 * 60));
        assert_eq!(monitor.check(now).await.unwrap().stuck, 1);

        stuck_in("34600000002").await;
        let reason = HandoffReason {
            at: now,
            reason: "Quiere hablar con una persona".into(),
            key: String::new(),
        };
        let waiting = WaId::parse("34600000003").unwrap();
        store
            .request_handoff(&waiting, &reason, None)
            .await
            .unwrap();
        let a_minute_on = monitor
            .check(now + chrono::Duration::minutes(1))
            .await
            .unwrap();
        assert_eq!((a_minute_on.stuck, a_minute_on.handoffs_requested), (1, 1));
        let later = monitor
            .check(now + chrono::Duration::minutes(5))
            .await
            .unwrap();
        assert_eq!(later.stuck, 2);
        // A clock set back counts again rather than trusting a count from the future.
        stuck_in("34600000004").await;
        assert_eq!(monitor.check(now).await.unwrap().stuck, 3);
    }
}
