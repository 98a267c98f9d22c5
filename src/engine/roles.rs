//! Roles from the business data: a number that is an owner's (`owners.wa_id`) talks to the
//! assistants as an owner, one of the agency's staff (`staff.wa_id`) as an agent, anyone else
//! as a prospect — from their first message, and again whenever the link changes. A role an
//! operator set stays (`users set-role`).
//!
//! The numbers are read as a whole, at most once a [`REFRESH`] per process, so a turn costs no
//! extra database round trip; a change in the data applies within that time. A number not
//! found reads them again if the last read is older than [`MISS_REFRESH`]: an owner added a
//! moment ago (`zaguan owners add`, in another process) is one on their first message, and a
//! burst of strangers costs one read per [`MISS_REFRESH`], not one each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::domain::{Role, WaId};
use crate::store::StoreResult;

/// Where the numbers with a role come from: the business's data (owners and staff), which this
/// layer does not know.
#[async_trait]
pub trait KnownNumbers: Send + Sync + 'static {
    /// Every number whose role is not prospect, with that role.
    async fn known_numbers(&self) -> StoreResult<HashMap<WaId, Role>>;
}

/// How long the numbers read are used before they are read again.
pub const REFRESH: Duration = Duration::from_secs(60);
/// A number not found is looked for again in a read at least this much newer.
pub const MISS_REFRESH: Duration = Duration::from_secs(3);
/// After a failed read, how long before the next try (the last numbers read stay in use).
const RETRY: Duration = Duration::from_secs(10);
/// Longest a read of the numbers may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Who is who, by WhatsApp number, as the business data says.
pub struct RoleDirectory {
    numbers: Arc<dyn KnownNumbers>,
    refresh: Duration,
    known: Mutex<Known>,
    /// One read at a time; the others wait for it rather than read again.
    reading: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Known {
    roles: Option<Arc<HashMap<WaId, Role>>>,
    /// When to read again.
    due: Option<Instant>,
    /// When the numbers were last read, or tried: a failing store is not asked again on
    /// every miss.
    read_at: Option<Instant>,
}

impl RoleDirectory {
    pub fn new(numbers: Arc<dyn KnownNumbers>) -> Self {
        Self::refreshed_every(numbers, REFRESH)
    }

    pub fn refreshed_every(numbers: Arc<dyn KnownNumbers>, refresh: Duration) -> Self {
        Self {
            numbers,
            refresh,
            known: Mutex::new(Known::default()),
            reading: tokio::sync::Mutex::new(()),
        }
    }

    /// The role the data gives `wa_id`; `None` while the data cannot be read (then no role is
    /// changed).
    pub async fn role_of(&self, wa_id: &WaId) -> Option<Role> {
        let roles = self.roles().await?;
        if let Some(role) = roles.get(wa_id) {
            return Some(*role);
        }
        let stale = {
            let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            known
                .read_at
                .is_none_or(|at| at.elapsed() >= MISS_REFRESH.min(self.refresh))
        };
        if stale {
            self.expire();
            let roles = self.roles().await?;
            return Some(roles.get(wa_id).copied().unwrap_or(Role::Prospect));
        }
        Some(Role::Prospect)
    }

    /// Makes the next lookup read the numbers again (unless a read is under way).
    fn expire(&self) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if known
            .read_at
            .is_none_or(|at| at.elapsed() >= MISS_REFRESH.min(self.refresh))
        {
            known.due = None;
        }
    }

    fn current(&self) -> (Option<Arc<HashMap<WaId, Role>>>, bool) {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = known.due.is_some_and(|due| Instant::now() < due);
        (known.roles.clone(), fresh)
    }

    async fn roles(&self) -> Option<Arc<HashMap<WaId, Role>>> {
        if let (roles, true) = self.current() {
            return roles;
        }
        let _reading = self.reading.lock().await;
        let (roles, fresh) = self.current();
        if fresh {
            return roles;
        }
        let read = tokio::time::timeout(READ_TIMEOUT, self.numbers.known_numbers()).await;
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.read_at = Some(Instant::now());
        match read {
            Ok(Ok(roles)) => {
                metrics::gauge!("zaguan_known_numbers").set(roles.len() as f64);
                known.roles = Some(Arc::new(roles));
                known.due = Some(Instant::now() + self.refresh);
            }
            Ok(Err(error)) => {
                tracing::warn!("owners and staff not read, roles unchanged for now: {error}");
                metrics::counter!("zaguan_role_directory_errors_total").increment(1);
                known.due = Some(Instant::now() + RETRY);
            }
            Err(_) => {
                tracing::warn!(
                    "owners and staff not read within {READ_TIMEOUT:?}, roles unchanged for now"
                );
                metrics::counter!("zaguan_role_directory_errors_total").increment(1);
                known.due = Some(Instant::now() + RETRY);
            }
        }
        known.roles.clone()
    }
}
