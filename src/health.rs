//! `/healthz` (the process works) and `/readyz` (it serves: started, and the store answers):
//! the probes of deploy files; and the doctor that keeps the store client honest.
//!
//! A client that stops answering while the database answers others (the outage of the store
//! path issue: a wedged pool) is rebuilt in place — a new client from the same configuration,
//! calls in flight finishing on the old one — without a restart. Should a rebuilt client still
//! not answer while a fresh probe does, `/healthz` fails so the orchestrator restarts the
//! process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;

use crate::store::{MaintenanceStore, MongoPool};

/// What the probes read: the service's state composes it (`FromRef`). Of the store, only its
/// ping.
#[derive(Clone)]
pub struct HealthState {
    pub store: Arc<dyn MaintenanceStore>,
    /// The workers run; until then `/readyz` answers 503.
    pub started: Arc<AtomicBool>,
    /// The store client works ([`StoreDoctor`]); `/healthz` answers 503 otherwise.
    pub healthy: Arc<AtomicBool>,
}

/// A ready check that takes longer than this counts as not ready.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn healthz(State(state): State<HealthState>) -> (StatusCode, &'static str) {
    if state.healthy.load(Ordering::SeqCst) {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "store client stuck while the database answers",
        )
    }
}

pub async fn readyz(State(state): State<HealthState>) -> (StatusCode, &'static str) {
    if !state.started.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "starting");
    }
    match tokio::time::timeout(READY_TIMEOUT, state.store.ping()).await {
        Ok(Ok(())) => (StatusCode::OK, "ready"),
        Ok(Err(error)) => {
            tracing::warn!("not ready: {error}");
            (StatusCode::SERVICE_UNAVAILABLE, "store unavailable")
        }
        Err(_) => {
            tracing::warn!("not ready: store ping timed out");
            (StatusCode::SERVICE_UNAVAILABLE, "store unavailable")
        }
    }
}

/// Watches the process's store client: pings it, and when it has not answered for
/// [`DoctorSettings::stuck_after`] while a client built fresh gets an answer, rebuilds it; if
/// the rebuilt one still does not answer within as long again, marks the process unhealthy.
pub struct StoreDoctor {
    pool: MongoPool,
    state: HealthState,
    settings: DoctorSettings,
}

#[derive(Debug, Clone, Copy)]
pub struct DoctorSettings {
    /// How often the client is pinged.
    pub every: Duration,
    /// How long a ping may take.
    pub ping_timeout: Duration,
    /// How long the client may go unanswered before a fresh probe is tried.
    pub stuck_after: Duration,
}

impl Default for DoctorSettings {
    fn default() -> Self {
        Self {
            every: Duration::from_secs(2),
            ping_timeout: Duration::from_secs(2),
            stuck_after: Duration::from_secs(10),
        }
    }
}

impl StoreDoctor {
    pub fn new(pool: MongoPool, state: HealthState) -> Self {
        Self {
            pool,
            state,
            settings: DoctorSettings::default(),
        }
    }

    pub fn with_settings(mut self, settings: DoctorSettings) -> Self {
        self.settings = settings;
        self
    }

    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run())
    }

    async fn run(self) {
        // Since when the client has not answered, and whether it was rebuilt meanwhile.
        let mut silent_since: Option<Instant> = None;
        let mut rebuilt_at: Option<Instant> = None;
        loop {
            tokio::time::sleep(self.settings.every).await;
            let answered =
                tokio::time::timeout(self.settings.ping_timeout, self.state.store.ping())
                    .await
                    .is_ok_and(|ping| ping.is_ok());
            if answered {
                silent_since = None;
                rebuilt_at = None;
                if !self.state.healthy.swap(true, Ordering::SeqCst) {
                    tracing::info!("the store client answers again: healthy");
                }
                continue;
            }
            let since = *silent_since.get_or_insert_with(Instant::now);
            if since.elapsed() < self.settings.stuck_after {
                continue;
            }
            if rebuilt_at.is_some_and(|at| at.elapsed() < self.settings.stuck_after) {
                continue;
            }
            if !self
                .pool
                .fresh_client_answers(self.settings.ping_timeout)
                .await
            {
                // The database itself does not answer: nothing of ours to mend (`/readyz`
                // says so).
                continue;
            }
            if rebuilt_at.is_some() {
                tracing::error!(
                    "the rebuilt MongoDB client does not answer either while the database \
                     answers a fresh one: /healthz fails so the process is restarted"
                );
                self.state.healthy.store(false, Ordering::SeqCst);
                continue;
            }
            tracing::error!(
                silent = ?since.elapsed(),
                "the MongoDB client has not answered while the database answers a fresh one: \
                 rebuilding it"
            );
            match self.pool.rebuild().await {
                Ok(()) => rebuilt_at = Some(Instant::now()),
                Err(error) => tracing::error!("cannot rebuild the MongoDB client: {error:#}"),
            }
        }
    }
}
