//! Senders recorded recently, so a burst of messages from one person upserts their contact once.
//!
//! Two upserts per message (`users`, `conversations`) cost several times the inbox insert on a
//! real database; people write in bursts. A contact whose profile is unchanged and was written
//! less than [`REFRESH_AFTER`] ago is not written again. `last_inbound_at` may then lag by at
//! most that long, which only makes the 24-hour window look shorter, never longer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::domain::WaId;
use crate::store::ContactSeen;

/// How long a written contact is trusted before it is written again.
pub const REFRESH_AFTER: Duration = Duration::from_secs(60);

/// Entries kept at most; past that the cache starts over (a cost, never a correctness issue).
const CAPACITY: usize = 100_000;

/// The profile fields a write would change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Profile {
    phone: Option<String>,
    user_id: Option<String>,
    name: Option<String>,
    username: Option<String>,
}

impl Profile {
    fn of(contact: &ContactSeen) -> Self {
        Self {
            phone: contact.phone.clone(),
            user_id: contact.user_id.clone(),
            name: contact.name.clone(),
            username: contact.username.clone(),
        }
    }
}

#[derive(Default)]
pub struct RecentContacts {
    written: Mutex<HashMap<WaId, (Profile, Instant)>>,
}

impl RecentContacts {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `contact` must be written: unknown, changed, or last written too long ago.
    pub fn needs_write(&self, contact: &ContactSeen, now: Instant) -> bool {
        let written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        match written.get(&contact.wa_id) {
            Some((profile, at)) => {
                *profile != Profile::of(contact) || now.duration_since(*at) >= REFRESH_AFTER
            }
            None => true,
        }
    }

    /// Records that `contact` is now in the store.
    pub fn written(&self, contact: &ContactSeen, now: Instant) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.len() >= CAPACITY {
            written.clear();
        }
        written.insert(contact.wa_id.clone(), (Profile::of(contact), now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contact(name: &str) -> ContactSeen {
        ContactSeen {
            wa_id: WaId::parse("34600111222").unwrap(),
            phone: Some("34600111222".into()),
            user_id: None,
            name: Some(name.into()),
            username: None,
            seen_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn an_unchanged_contact_is_written_once_per_refresh_period() {
        let cache = RecentContacts::new();
        let start = Instant::now();
        assert!(cache.needs_write(&contact("Lucía"), start));
        cache.written(&contact("Lucía"), start);
        assert!(!cache.needs_write(&contact("Lucía"), start + Duration::from_secs(59)));
        assert!(cache.needs_write(&contact("Lucía"), start + REFRESH_AFTER));
    }

    #[test]
    fn a_changed_profile_is_written_at_once() {
        let cache = RecentContacts::new();
        let start = Instant::now();
        cache.written(&contact("Lucía"), start);
        assert!(cache.needs_write(&contact("Lucía Fernández"), start));
    }
}
