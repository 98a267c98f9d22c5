//! The instances sharing one MongoDB: each records a heartbeat every few seconds and counts the
//! live ones, so a budget of the whole deployment (Meta's messages per second for a business
//! number) is split evenly as instances come and go — scale-out, crash or drain.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use crate::outbound::Limiters;
use crate::store::Store;

/// How often each instance says it is alive.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(10);
/// An instance not heard of for this long no longer counts (a crash is noticed within it).
pub const ALIVE_WITHIN: Duration = Duration::from_secs(30);

pub struct Membership {
    store: Arc<dyn Store>,
    owner: String,
    limiters: Arc<Limiters>,
}

impl Membership {
    pub fn new(store: Arc<dyn Store>, owner: String, limiters: Arc<Limiters>) -> Self {
        Self {
            store,
            owner,
            limiters,
        }
    }

    /// One heartbeat: returns the live instances and adjusts this one's share.
    pub async fn beat(&self) -> Option<u64> {
        let now = Utc::now();
        let since = now - chrono::Duration::from_std(ALIVE_WITHIN).unwrap_or_default();
        match self.store.instance_heartbeat(&self.owner, now, since).await {
            Ok(live) => {
                metrics::gauge!("zaguan_instances").set(live as f64);
                self.limiters
                    .set_instances(u32::try_from(live).unwrap_or(u32::MAX));
                Some(live)
            }
            Err(error) => {
                // Keep the last share: too generous only if instances were added meanwhile,
                // and the Graph API's 130429 is retried.
                tracing::warn!("instance heartbeat failed: {error}");
                None
            }
        }
    }

    pub fn spawn(self) -> MembershipTask {
        let membership = Arc::new(self);
        let beating = membership.clone();
        let task = tokio::spawn(async move {
            loop {
                beating.beat().await;
                tokio::time::sleep(HEARTBEAT_EVERY).await;
            }
        });
        MembershipTask { membership, task }
    }
}

/// The running heartbeat; `leave` stops it and tells the others at once.
pub struct MembershipTask {
    membership: Arc<Membership>,
    task: tokio::task::JoinHandle<()>,
}

impl MembershipTask {
    pub async fn leave(self) {
        self.task.abort();
        let membership = &self.membership;
        if let Err(error) = membership.store.instance_left(&membership.owner).await {
            tracing::warn!("cannot deregister this instance: {error}");
        }
    }
}
