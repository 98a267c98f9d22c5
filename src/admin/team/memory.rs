//! The team in memory: a service without MongoDB, and tests.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Operator, SessionRecord, TeamStore};
use crate::store::StoreResult;

#[derive(Default)]
pub struct MemoryTeam {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    operators: HashMap<String, Operator>,
    sessions: HashMap<String, SessionRecord>,
    /// Failed sign-ins: address, account, when.
    failures: Vec<(String, String, DateTime<Utc>)>,
}

/// Most failed sign-ins kept: past it, the oldest go (a flood cannot grow the process).
const MAX_FAILURES: usize = 10_000;

impl MemoryTeam {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[async_trait]
impl TeamStore for MemoryTeam {
    async fn insert_operator(&self, operator: &Operator) -> StoreResult<bool> {
        Ok(self.with(|inner| {
            if inner.operators.contains_key(&operator.name) {
                return false;
            }
            inner
                .operators
                .insert(operator.name.clone(), operator.clone());
            true
        }))
    }

    async fn operator(&self, name: &str) -> StoreResult<Option<Operator>> {
        Ok(self.with(|inner| inner.operators.get(name).cloned()))
    }

    async fn operators(&self) -> StoreResult<Vec<Operator>> {
        let mut all: Vec<Operator> = self.with(|inner| inner.operators.values().cloned().collect());
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    async fn operator_by_token(&self, token_hash: &str) -> StoreResult<Option<Operator>> {
        Ok(self.with(|inner| {
            inner
                .operators
                .values()
                .find(|o| o.token_hash == token_hash)
                .cloned()
        }))
    }

    async fn set_credentials(
        &self,
        name: &str,
        password_hash: &str,
        token_hash: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(self.with(|inner| {
            let Some(operator) = inner.operators.get_mut(name) else {
                return false;
            };
            operator.password_hash = password_hash.to_owned();
            operator.token_hash = token_hash.to_owned();
            operator.issued_at = at;
            operator.disabled_at = None;
            true
        }))
    }

    async fn set_disabled(&self, name: &str, at: Option<DateTime<Utc>>) -> StoreResult<bool> {
        Ok(self.with(|inner| {
            inner
                .operators
                .get_mut(name)
                .map(|o| o.disabled_at = at)
                .is_some()
        }))
    }

    async fn note_sign_in(&self, name: &str, at: DateTime<Utc>) -> StoreResult<()> {
        self.with(|inner| {
            if let Some(operator) = inner.operators.get_mut(name) {
                operator.last_sign_in_at = Some(at);
            }
        });
        Ok(())
    }

    async fn insert_session(&self, session: &SessionRecord) -> StoreResult<()> {
        self.with(|inner| inner.sessions.insert(session.id.clone(), session.clone()));
        Ok(())
    }

    async fn session(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        Ok(self.with(|inner| inner.sessions.get(id).cloned()))
    }

    async fn delete_session(&self, id: &str) -> StoreResult<()> {
        self.with(|inner| inner.sessions.remove(id));
        Ok(())
    }

    async fn delete_sessions_of(&self, operator: &str) -> StoreResult<u64> {
        Ok(self.with(|inner| {
            let before = inner.sessions.len();
            inner.sessions.retain(|_, s| s.operator != operator);
            (before - inner.sessions.len()) as u64
        }))
    }

    async fn delete_expired_sessions(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        Ok(self.with(|inner| {
            let before = inner.sessions.len();
            inner.sessions.retain(|_, s| s.expires_at > now);
            (before - inner.sessions.len()) as u64
        }))
    }

    async fn record_sign_in_failure(
        &self,
        address: &str,
        account: &str,
        at: DateTime<Utc>,
        forget_before: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.with(|inner| {
            inner.failures.retain(|(_, _, when)| *when >= forget_before);
            if inner.failures.len() >= MAX_FAILURES {
                inner.failures.remove(0);
            }
            inner
                .failures
                .push((address.to_owned(), account.to_owned(), at));
        });
        Ok(())
    }

    async fn sign_in_failures(
        &self,
        address: &str,
        account: &str,
        since: DateTime<Utc>,
    ) -> StoreResult<(u64, u64)> {
        Ok(self.with(|inner| {
            let recent = inner
                .failures
                .iter()
                .filter(|(from, _, when)| from == address && *when > since);
            let from_address = recent.clone().count() as u64;
            let for_account = recent.filter(|(_, name, _)| name == account).count() as u64;
            (from_address, for_account)
        }))
    }
}
