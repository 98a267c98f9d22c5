//! `instances`, retention and forgetting.

use chrono::{DateTime, Utc};

/// What the cleanup job may delete: records older than each date (`None`: keep them all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeBefore {
    /// Inbox messages `done` or `failed` that arrived before, and rejected updates.
    pub inbox: Option<DateTime<Utc>>,
    /// Outbox parts past sending (`sent` … `read`, `failed`) queued before.
    pub outbox: Option<DateTime<Utc>>,
    /// History messages written before.
    pub messages: Option<DateTime<Utc>>,
    pub llm_calls: Option<DateTime<Utc>>,
    /// Lease records expired before.
    pub leases: Option<DateTime<Utc>>,
    /// Business events delivered or failed that happened before.
    pub events: Option<DateTime<Utc>>,
}

/// Documents deleted by one purge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeCounts {
    pub inbox: u64,
    pub outbox: u64,
    pub messages: u64,
    pub llm_calls: u64,
    pub leases: u64,
    /// Rejected webhook updates, kept as long as the inbox.
    pub webhook_rejects: u64,
    pub events: u64,
}

/// Documents deleted by forgetting one user (`zaguan users forget`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ForgetCounts {
    pub conversations: u64,
    pub users: u64,
    pub messages: u64,
    pub inbox: u64,
    pub outbox: u64,
    pub llm_calls: u64,
    pub leases: u64,
    /// Rejected webhook bodies that mention the number.
    pub webhook_rejects: u64,
    /// Business events of the conversation (delivered or not).
    pub events: u64,
    /// Portal leads of the number.
    pub leads: u64,
}

impl ForgetCounts {
    pub fn total(&self) -> u64 {
        self.leads
            + self.conversations
            + self.users
            + self.messages
            + self.inbox
            + self.outbox
            + self.llm_calls
            + self.leases
            + self.webhook_rejects
            + self.events
    }
}

/// A process's record in `instances`: its heartbeat, and the nonce of the process that holds
/// the instance id now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRecord {
    pub id: String,
    pub nonce: String,
    /// The database's clock at the last heartbeat.
    pub seen_at: DateTime<Utc>,
}
