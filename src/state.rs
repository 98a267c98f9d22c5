//! What every HTTP handler can reach, composed at start-up. The webhook and the probes see only
//! their parts ([`WebhookState`], [`HealthState`]), so they do not depend on the rest of the
//! service.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::FromRef;
use secrecy::SecretString;

use crate::admin::team::{MemoryTeam, Team, TeamStore};
use crate::health::HealthState;
use crate::realestate::RealEstateStore;
use crate::runtime::{Arrivals, PromptReloader};
use crate::store::{Store, StoreClock};
use crate::webhook::{self, WebhookState};

/// What every handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    /// `WHATSAPP_VERIFY_TOKEN`; `None` refuses every handshake.
    pub verify_token: Option<Arc<SecretString>>,
    /// `WHATSAPP_APP_SECRET`; `None` refuses every `POST /webhook`.
    pub app_secret: Option<Arc<SecretString>>,
    /// New messages the webhook stored, handed to this process's workers (no poll needed).
    pub arrivals: Arc<Arrivals>,
    /// Senders written recently, so bursts do not rewrite the same contact.
    pub recent_contacts: Arc<webhook::RecentContacts>,
    /// `ZAGUAN_ADMIN_TOKEN`; `None`: the admin API answers 404.
    pub admin_token: Option<Arc<SecretString>>,
    /// The running prompt set, for `GET /admin/prompts` and reloads; `None` when no engine
    /// runs in this process (the routes then answer 404).
    pub prompts: Option<Arc<PromptReloader>>,
    /// How long an operator's handoff lasts unless they say otherwise (`ZAGUAN_HANDOFF_TTL`).
    pub handoff_ttl: Duration,
    /// The workers run (`zaguan serve` sets it once the process is its instance); until then
    /// `/readyz` answers 503.
    pub started: Arc<AtomicBool>,
    /// The process's store client works (see [`crate::health::StoreDoctor`]); `/healthz`
    /// answers 503 otherwise, so an orchestrator restarts it.
    pub healthy: Arc<AtomicBool>,
    /// The database's clock, anchored by the instance's heartbeat: arrivals are stamped by it.
    pub clock: Arc<StoreClock>,
    /// The business's data, for the listings routes (404 without it).
    pub realestate: Option<Arc<dyn RealEstateStore>>,
    /// `ZAGUAN_LEASE`: how long a silent instance still holds its conversations (forgetting a
    /// user waits for them).
    pub lease: Duration,
    /// `ZAGUAN_PUBLIC_URL` is https: the console's cookie is `Secure`.
    pub secure_cookies: bool,
    /// The service's configuration, for what rebuilds the engine on the side (the console's
    /// "Save as a test"); `None` outside `zaguan serve`.
    pub config: Option<Arc<crate::config::Config>>,
    /// Where the named operators and their console sessions are kept.
    pub team: Arc<dyn TeamStore>,
    /// Portal and CRM leads in (`ZAGUAN_LEADS_TOKEN`); `None`: `POST /leads` answers 404.
    pub leads: Option<Arc<crate::leads::Intake>>,
}

impl AppState {
    pub fn new(
        store: Arc<dyn Store>,
        verify_token: Option<SecretString>,
        app_secret: Option<SecretString>,
    ) -> Self {
        Self {
            store,
            verify_token: verify_token.map(Arc::new),
            app_secret: app_secret.map(Arc::new),
            arrivals: Arc::new(Arrivals::new()),
            recent_contacts: Arc::new(webhook::RecentContacts::new()),
            admin_token: None,
            prompts: None,
            handoff_ttl: crate::engine::handoff::DEFAULT_HANDOFF_TTL,
            started: Arc::new(AtomicBool::new(true)),
            healthy: Arc::new(AtomicBool::new(true)),
            clock: Arc::default(),
            realestate: None,
            lease: Duration::from_secs(30),
            secure_cookies: false,
            config: None,
            team: Arc::new(MemoryTeam::default()),
            leads: None,
        }
    }

    pub fn with_leads(mut self, leads: Option<Arc<crate::leads::Intake>>) -> Self {
        self.leads = leads;
        self
    }

    pub fn with_config(mut self, config: crate::config::Config) -> Self {
        self.config = Some(Arc::new(config));
        self
    }

    /// Not ready until [`started`](Self::started) says so.
    pub fn starting(mut self) -> Self {
        self.started = Arc::new(AtomicBool::new(false));
        self
    }

    /// The workers run: ready once the store answers too.
    pub fn started(&self) {
        self.started.store(true, Ordering::SeqCst);
    }

    /// Shows and reloads the prompt set through the admin API.
    /// The templates messages are sent with and the agency's name: the running engine's, or
    /// the defaults when this state serves no engine.
    /// The running business file (an empty one without an engine in this process).
    pub fn business(&self) -> Arc<crate::business::Business> {
        match &self.prompts {
            Some(prompts) => prompts.engine().prompts().business().clone(),
            None => Arc::default(),
        }
    }

    /// When a conversation counts as stuck in an assistant (`ZAGUAN_STUCK_AFTER`).
    pub fn stuck_after(&self) -> std::time::Duration {
        self.config
            .as_ref()
            .map_or(std::time::Duration::from_secs(2 * 3600), |c| c.stuck_after)
    }

    pub fn templates_and_name(&self) -> (Arc<crate::templates::Templates>, String) {
        match &self.prompts {
            Some(prompts) => (
                prompts.engine().templates(),
                prompts.engine().business_name(),
            ),
            None => (
                Arc::new(crate::engine::EngineSettings::default().templates),
                crate::engine::DEFAULT_BUSINESS_NAME.to_owned(),
            ),
        }
    }

    pub fn with_prompts(mut self, prompts: Arc<PromptReloader>) -> Self {
        self.prompts = Some(prompts);
        self
    }

    pub fn with_handoff_ttl(mut self, ttl: Duration) -> Self {
        self.handoff_ttl = ttl;
        self
    }

    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Console cookies only over https when the service is reached over https.
    pub fn with_secure_cookies(mut self, secure: bool) -> Self {
        self.secure_cookies = secure;
        self
    }

    /// Lets the admin API add and change listings.
    pub fn with_realestate(mut self, realestate: Arc<dyn RealEstateStore>) -> Self {
        self.realestate = Some(realestate);
        self
    }

    /// Keeps the team (operators, sessions) in `team`.
    pub fn with_team(mut self, team: Arc<dyn TeamStore>) -> Self {
        self.team = team;
        self
    }

    /// The named operators, with the admin token as the bootstrap admin.
    pub fn team(&self) -> Team {
        Team::new(self.team.clone(), self.admin_token.clone())
    }

    /// Opens the admin API to holders of `token`.
    pub fn with_admin_token(mut self, token: Option<SecretString>) -> Self {
        self.admin_token = token.map(Arc::new);
        self
    }
}

impl FromRef<AppState> for HealthState {
    fn from_ref(state: &AppState) -> Self {
        HealthState {
            store: state.store.clone(),
            started: state.started.clone(),
            healthy: state.healthy.clone(),
        }
    }
}

impl FromRef<AppState> for WebhookState {
    fn from_ref(state: &AppState) -> Self {
        WebhookState {
            store: state.store.clone(),
            verify_token: state.verify_token.clone(),
            app_secret: state.app_secret.clone(),
            arrivals: state.arrivals.clone(),
            recent_contacts: state.recent_contacts.clone(),
            clock: state.clock.clone(),
        }
    }
}
