//! What the business data says about the user, for the prompts' `{{ user_info }}`: the seed's
//! context_extractor gives the assistants the user's data, not only a name. An owner's
//! listings with their visits and offers, a prospect's next appointments and open offers.
//!
//! Read at most once a [`CONTEXT_TTL`] per conversation (and again after a confirmed action
//! changed the data), bounded in time and size; when it cannot be read in time the turn goes
//! on without it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::WaId;
use crate::domain::{Role, Situation};

/// How long a user's context is used before it is read again.
pub const CONTEXT_TTL: Duration = Duration::from_secs(60);
/// Longest a context read may take before the turn goes on without it.
pub const CONTEXT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest context given to a prompt, in characters (some 400 tokens).
pub const MAX_CONTEXT_CHARS: usize = 1_600;
/// Conversations whose context is kept at most; past it the cache starts again empty.
const CAPACITY: usize = 50_000;

/// What the data says about a user: lines for the prompts, and their situation for the router.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserContext {
    /// A few short lines in Spanish like the prompts; `None` when there is nothing to say.
    pub text: Option<String>,
    pub situation: Situation,
}

/// Where a user's context comes from (the real-estate data, in the service).
#[async_trait]
pub trait ContextSource: Send + Sync + 'static {
    /// What the data says about `wa_id` as `role` at `now`.
    async fn describe(
        &self,
        wa_id: &WaId,
        role: Role,
        now: DateTime<Utc>,
    ) -> anyhow::Result<UserContext>;
}

/// A context read, and when.
type Entries = HashMap<(WaId, Role), (UserContext, Instant)>;

/// The contexts read lately, by conversation and role.
#[derive(Default)]
pub struct ContextCache {
    entries: Mutex<Entries>,
}

impl ContextCache {
    /// `wa_id`'s context as `role`: from the cache while fresh, else from `source` within
    /// [`CONTEXT_TIMEOUT`], its text cut to [`MAX_CONTEXT_CHARS`]; `None` when it could not
    /// be read.
    pub async fn get(
        &self,
        source: &dyn ContextSource,
        wa_id: &WaId,
        role: Role,
        now: DateTime<Utc>,
    ) -> Option<UserContext> {
        let key = (wa_id.clone(), role);
        if let Some((context, read)) = self.lock().get(&key)
            && read.elapsed() < CONTEXT_TTL
        {
            return Some(context.clone());
        }
        let context = match tokio::time::timeout(CONTEXT_TIMEOUT, source.describe(wa_id, role, now))
            .await
        {
            Ok(Ok(context)) => UserContext {
                text: context.text.map(|text| bounded(&text)),
                situation: context.situation,
            },
            Ok(Err(error)) => {
                tracing::warn!("user context not read, the turn goes on without it: {error:#}");
                metrics::counter!("zaguan_user_context_errors_total").increment(1);
                return None;
            }
            Err(_) => {
                tracing::warn!(
                    "user context not read within {CONTEXT_TIMEOUT:?}, the turn goes on without it"
                );
                metrics::counter!("zaguan_user_context_errors_total").increment(1);
                return None;
            }
        };
        let mut entries = self.lock();
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(key, (context.clone(), Instant::now()));
        Some(context)
    }

    /// The data behind `wa_id`'s context changed (a confirmed action ran): read it again.
    pub fn forget(&self, wa_id: &WaId) {
        self.lock().retain(|(key, _), _| key != wa_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `text` cut to [`MAX_CONTEXT_CHARS`] at a line end, saying so.
fn bounded(text: &str) -> String {
    if text.chars().count() <= MAX_CONTEXT_CHARS {
        return text.to_owned();
    }
    const MORE: &str = "(y más; pregunta con las herramientas)";
    let room = MAX_CONTEXT_CHARS - MORE.chars().count();
    let mut out = String::new();
    for line in text.lines() {
        if out.chars().count() + line.chars().count() + 1 > room {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(MORE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize, String);

    #[async_trait]
    impl ContextSource for Counting {
        async fn describe(
            &self,
            _: &WaId,
            _: Role,
            _: DateTime<Utc>,
        ) -> anyhow::Result<UserContext> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(UserContext {
                text: Some(self.1.clone()),
                situation: Situation::default(),
            })
        }
    }

    #[tokio::test]
    async fn a_context_is_read_once_then_again_after_a_change_and_kept_short() {
        let long: String = (0..200).map(|i| format!("- línea {i}\n")).collect();
        let source = Counting(AtomicUsize::new(0), long);
        let cache = ContextCache::default();
        let wa = WaId::parse("34600111222").unwrap();
        let first = cache
            .get(&source, &wa, Role::Owner, Utc::now())
            .await
            .unwrap()
            .text
            .unwrap();
        assert!(
            first.chars().count() <= MAX_CONTEXT_CHARS,
            "{}",
            first.chars().count()
        );
        assert!(first.starts_with("- línea 0\n") && first.ends_with("herramientas)"));
        cache.get(&source, &wa, Role::Owner, Utc::now()).await;
        assert_eq!(source.0.load(Ordering::SeqCst), 1);
        cache.forget(&wa);
        cache.get(&source, &wa, Role::Owner, Utc::now()).await;
        assert_eq!(source.0.load(Ordering::SeqCst), 2);
    }
}
