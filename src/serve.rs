//! `zaguan serve`: the HTTP server, with the embedded or MongoDB store.

use std::future::IntoFuture as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use crate::agents::{self, AgentRegistry};
use crate::app::{self, AppState};
use crate::config::Config;
use crate::config::LlmProvider;
use crate::engine::UsageRecorder;
use crate::engine::handoff::RequestHuman;
use crate::engine::instances::{IdentityError, Membership, MembershipTask};
use crate::engine::monitor::Monitor;
use crate::engine::retention::Cleanup;
use crate::engine::roles::RoleDirectory;
use crate::engine::{Engine, EngineSettings, PromptReloader, WorkerSettings, Workers};
use crate::events::EventDelivery;
use crate::health::StoreDoctor;
use crate::llm::{AnthropicClient, FallbackChain, Llm, OfflineLlm, OpenAiClient};
use crate::outbound::{GraphClient, Limiters, Outbound, OutboundSettings};
use crate::realestate::alerts::{AlertSettings, Alerts};
use crate::realestate::context::RealEstateContext;
use crate::realestate::reminders::{ReminderSettings, Reminders};
use crate::realestate::{MemoryRealEstate, MongoRealEstate, RealEstateStore, demo};
use crate::store::{MemoryStore, MongoPool, MongoStore, Store};
use crate::telemetry;
use crate::voice::{GraphMedia, OpenAiTranscriber, VoiceNotes};

#[derive(Debug, Args)]
pub struct ServeArgs {}

pub async fn run(_args: ServeArgs, config: Config) -> anyhow::Result<()> {
    telemetry::metrics_handle();
    // Histogram samples are folded in at scrape time; without a scraper they would pile up.
    let metrics_upkeep = tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_secs(10)).await;
            telemetry::metrics_handle().run_upkeep();
        }
    });
    let pool = open_pool(&config).await?;
    let store = open_store(pool.as_ref());
    let usage = UsageRecorder::spawn(store.clone());
    let realestate = open_realestate(&config, pool.as_ref()).await?;
    let engine = Arc::new(build_engine(
        &config,
        store.clone(),
        realestate.clone(),
        Some(usage.clone()),
    )?);
    let reminders = match &config.whatsapp.phone_number_id {
        Some(phone_number_id) => Some((
            Reminders::new(
                realestate.clone(),
                engine.clone(),
                ReminderSettings {
                    at: config.whatsapp.reminder_time,
                    timezone: config.timezone,
                    template: config.whatsapp.reminder_template.clone(),
                    template_language: config.whatsapp.reminder_template_language.clone(),
                    phone_number_id: phone_number_id.clone(),
                    every: Duration::from_secs(60),
                },
            )
            .spawn(),
            Alerts::new(
                realestate.clone(),
                engine.clone(),
                AlertSettings {
                    template: config.whatsapp.alert_template.clone(),
                    template_language: config.whatsapp.alert_template_language.clone(),
                    phone_number_id: phone_number_id.clone(),
                    every: Duration::from_secs(60),
                },
            )
            .spawn(),
        )),
        None => {
            tracing::warn!(
                "WHATSAPP_PHONE_NUMBER_ID is unset: no visit reminders nor saved-search notices are sent"
            );
            None
        }
    };
    let outbound = Arc::new(outbound(&config, store.clone())?);
    let events = match &config.events {
        Some(settings) => {
            tracing::info!(
                receivers = settings.urls.len(),
                "business events are delivered to ZAGUAN_EVENTS_URL"
            );
            Some(EventDelivery::new(store.clone(), settings.clone())?.spawn())
        }
        None => {
            tracing::info!("ZAGUAN_EVENTS_URL is unset: business events are recorded, not sent");
            None
        }
    };
    announce(&config);
    let prompts = Arc::new(PromptReloader::new(
        config.prompts_dir.clone(),
        agents::known_tools(),
        engine.clone(),
    ));
    let prompt_watch = prompts.clone().spawn();

    let state = AppState::new(
        store,
        config.whatsapp.verify_token.clone(),
        config.whatsapp.app_secret.clone(),
    )
    .with_admin_token(config.admin_token.clone())
    .with_realestate(realestate)
    .with_lease(config.lease)
    .with_secure_cookies(
        config
            .public_url
            .as_ref()
            .is_some_and(|url| url.scheme() == "https"),
    )
    .with_prompts(prompts)
    .with_handoff_ttl(config.handoff_ttl);
    let worker_settings = WorkerSettings {
        owner: config.instance_id.clone(),
        lease: config.lease,
        concurrency: config.worker_concurrency,
        user_turns: std::num::NonZeroU32::new(config.user_turns_per_minute)
            .map(governor::Quota::per_minute),
        ..WorkerSettings::default()
    };
    // The workers start once this process is its instance (the store must answer for that);
    // until then `/readyz` says so.
    let state = state.starting();
    let starter = tokio::spawn(start_instance(
        state.clone(),
        config.clone(),
        engine,
        outbound,
        worker_settings,
    ));
    let doctor = pool
        .clone()
        .map(|pool| StoreDoctor::new(pool, state.clone()).spawn());
    let cleanup = Cleanup::new(state.store.clone(), config.retention).spawn(CLEANUP_EVERY);
    let listener = tokio::net::TcpListener::bind(config.bind_addr)
        .await
        .with_context(|| format!("cannot listen on {}", config.bind_addr))?;
    tracing::info!(addr = %listener.local_addr()?, "zaguan listening");
    // One deadline from SIGTERM for everything: the HTTP server stops accepting and finishes
    // its requests while the workers finish their turns, side by side.
    let (stopping, mut stop_requested) = tokio::sync::watch::channel(false);
    let mut http = tokio::spawn(
        axum::serve(listener, app::router(state))
            .with_graceful_shutdown(async move {
                let _ = stop_requested.changed().await;
            })
            .into_future(),
    );
    let mut starter = starter;
    let mut running: Option<Running> = None;
    let failure = loop {
        tokio::select! {
            () = shutdown_signal() => break None,
            served = &mut http => {
                // The server stopped by itself: that is a failure, not a shutdown.
                served.context("HTTP server panicked")?.context("HTTP server failed")?;
                break None;
            }
            started = &mut starter, if running.is_none() => {
                match started.context("instance start-up panicked")? {
                    Ok(started) => running = Some(started),
                    Err(error) => break Some(error),
                }
            }
            () = superseded(running.as_ref()), if running.is_some() => {
                break Some(anyhow::anyhow!(
                    "another process took ZAGUAN_INSTANCE_ID `{}`: this one stops",
                    config.instance_id
                ));
            }
        }
    };
    let deadline = tokio::time::Instant::now() + config.drain_timeout;
    let _ = stopping.send(true);
    let membership = match running {
        Some(running) => {
            if running.workers.drain(config.drain_timeout).await {
                tracing::info!("in-flight turns finished, leases released");
            }
            running.monitor.abort();
            Some(running.membership)
        }
        None => {
            starter.abort();
            None
        }
    };
    match tokio::time::timeout_at(deadline, &mut http).await {
        Ok(served) => served
            .context("HTTP server panicked")?
            .context("HTTP server failed")?,
        Err(_) => {
            tracing::warn!("HTTP requests still open at the drain deadline: closed");
            http.abort();
        }
    }
    cleanup.abort();
    if let Some(events) = events {
        events.abort();
    }
    if let Some(doctor) = doctor {
        doctor.abort();
    }
    if let Some(membership) = membership {
        membership.leave().await;
    }
    metrics_upkeep.abort();
    prompt_watch.abort();
    if let Some((reminders, alerts)) = reminders {
        reminders.abort();
        alerts.abort();
    }
    usage.flush().await;
    if let Some(error) = failure {
        tracing::error!("zaguan stopped: {error:#}");
        return Err(error);
    }
    tracing::info!("zaguan stopped");
    Ok(())
}

/// What runs once this process is its instance.
struct Running {
    membership: MembershipTask,
    beating: Arc<Membership>,
    workers: Workers,
    monitor: tokio::task::JoinHandle<()>,
}

/// Resolves once another process took this instance's id.
async fn superseded(running: Option<&Running>) {
    match running {
        Some(running) => running.beating.until_superseded().await,
        None => std::future::pending().await,
    }
}

/// Becomes instance `ZAGUAN_INSTANCE_ID` (retried while the store does not answer; refused
/// when another live process has the id), then starts the heartbeat, the workers and the
/// health gauges, and says the process is ready.
async fn start_instance(
    state: AppState,
    config: Config,
    engine: Arc<Engine>,
    outbound: Arc<Outbound>,
    settings: WorkerSettings,
) -> anyhow::Result<Running> {
    let mut delay = Duration::from_millis(200);
    let membership = loop {
        match Membership::establish(
            state.store.clone(),
            config.instance_id.clone(),
            config.lease,
            Some(outbound.limiters().clone()),
            state.clock.clone(),
        )
        .await
        {
            Ok(membership) => break membership,
            Err(IdentityError::InUse(id)) => return Err(IdentityError::InUse(id).into()),
            Err(error) => {
                tracing::warn!("instance not registered yet, retrying in {delay:?}: {error}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    };
    tracing::info!(instance = %membership.id(), "instance registered");
    let monitor = Monitor::new(state.store.clone(), config.stuck_after)
        .with_membership(membership.clone())
        .spawn(Duration::from_secs(30));
    let workers = Workers::spawn_in(
        engine,
        outbound,
        state.arrivals.clone(),
        settings,
        membership.clone(),
    );
    let beating = membership.clone();
    let membership = membership.spawn();
    state.started();
    Ok(Running {
        membership,
        beating,
        workers,
        monitor,
    })
}

/// The engine over `store`: the agents of the prompts folder (a bad prompt set refuses to
/// start, with every problem listed), the tools, and the LLM chain, whose calls go to `usage`.
pub fn build_engine(
    config: &Config,
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
    usage: Option<UsageRecorder>,
) -> anyhow::Result<Engine> {
    let roles = Arc::new(RoleDirectory::new(realestate.clone()));
    let context = Arc::new(RealEstateContext::new(realestate.clone(), config.timezone));
    let tools = crate::realestate::tools::registry(realestate.clone())
        .with(RequestHuman::new(store.clone()).with_contact(config.business_contact.clone()))
        .with(crate::realestate::tools::RequestCallback::new(
            realestate.clone(),
            store.clone(),
        ))
        .with(crate::realestate::tools::RequestListingChange::new(
            realestate,
            store.clone(),
        ));
    let registry =
        AgentRegistry::load(&config.prompts_dir, &agents::known_tools()).map_err(|problems| {
            for problem in &problems {
                eprintln!("{problem}");
            }
            anyhow::anyhow!(
                "{} problem(s) in the prompts folder {}; run `zaguan prompts check`",
                problems.len(),
                config.prompts_dir.display()
            )
        })?;
    tracing::info!(
        agents = registry.agents().count(),
        version = %registry.version(),
        "prompts loaded"
    );
    for warning in registry.warnings() {
        tracing::warn!("{warning}");
    }
    let llm = llm_chain(config, usage)?;
    let settings = EngineSettings {
        dialog_idle_ttl: config.dialog_idle_ttl,
        timezone: config.timezone,
        fast_route: config.llm.fast_route,
        languages: config.languages.clone(),
        daily_token_budget: config.daily_token_budget,
        business_name: config.business_name.clone(),
        business_contact: config.business_contact.clone(),
        ..EngineSettings::default()
    };
    let engine = Engine::new(store, llm, Arc::new(registry), Arc::new(tools), settings)
        .with_roles(roles)
        .with_context(context);
    Ok(match voice_notes(config)? {
        Some(voice) => engine.with_voice_notes(Arc::new(voice)),
        None => engine,
    })
}

/// Voice notes to text when `LLM_TRANSCRIBE` is set and both keys it needs are there: the
/// Graph API's (to download) and OpenAI's (to transcribe). Otherwise voice notes get the polite
/// answer, and start-up says why.
fn voice_notes(config: &Config) -> anyhow::Result<Option<VoiceNotes>> {
    let Some(model) = &config.llm.transcribe else {
        return Ok(None);
    };
    let (Some(token), Some(key)) = (
        config.whatsapp.access_token.clone(),
        config.llm.openai_api_key.clone(),
    ) else {
        tracing::warn!(
            "LLM_TRANSCRIBE is set but WHATSAPP_ACCESS_TOKEN or OPENAI_API_KEY is not: voice \
             notes get the polite answer"
        );
        return Ok(None);
    };
    let timeout = config.llm.transcribe_timeout;
    tracing::info!(model = %model, "voice notes are transcribed");
    Ok(Some(VoiceNotes::new(
        GraphMedia::new(config.whatsapp.api_base_url.clone(), token, timeout)?,
        OpenAiTranscriber::new(
            config.llm.openai_base_url.clone(),
            key,
            model.clone(),
            timeout,
        )?,
    )))
}

/// How often the cleanup job deletes what the retention no longer keeps.
const CLEANUP_EVERY: Duration = Duration::from_secs(3600);

/// The outbound channel: the Graph API with `WHATSAPP_ACCESS_TOKEN` (a dry run without it),
/// Meta's limits as configured.
pub fn outbound(config: &Config, store: Arc<dyn Store>) -> anyhow::Result<Outbound> {
    let whatsapp = &config.whatsapp;
    let graph = GraphClient::new(
        whatsapp.api_base_url.clone(),
        whatsapp.access_token.clone(),
        whatsapp.api_timeout,
    )?;
    Ok(Outbound::new(
        store,
        graph,
        Limiters::new(&whatsapp.limits),
        OutboundSettings {
            // A call that timed out elsewhere has ended well before a part is sent again.
            unconfirmed_grace: (whatsapp.api_timeout * 2).max(Duration::from_secs(30)),
            ..OutboundSettings::default()
        },
    ))
}

/// The HTTP clients' own timeout, a backstop behind the policy's: the policy's fires first, so
/// a slow provider is reported as a timeout of the chain.
const HTTP_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

/// `LLM_PRIMARY` then `LLM_FALLBACK`, each when it can be reached: a key, or a self-hosted base
/// URL (such servers often need no key). With neither, offline mode: every turn answers with
/// the agent's `offline_reply`.
pub fn llm_chain(config: &Config, usage: Option<UsageRecorder>) -> anyhow::Result<Arc<dyn Llm>> {
    let mut providers: Vec<(String, Arc<dyn Llm>)> = Vec::new();
    let http_timeout = config.llm.policy.timeout + HTTP_TIMEOUT_MARGIN;
    for spec in [&config.llm.primary, &config.llm.fallback] {
        let llm = &config.llm;
        let client: Option<Arc<dyn Llm>> = match spec.provider {
            LlmProvider::OpenAi
                if llm.openai_api_key.is_some()
                    || llm.openai_base_url.as_str() != "https://api.openai.com/v1" =>
            {
                Some(Arc::new(OpenAiClient::new(
                    llm.openai_base_url.clone(),
                    llm.openai_api_key.clone(),
                    spec.model.clone(),
                    http_timeout,
                )?))
            }
            LlmProvider::Anthropic
                if llm.anthropic_api_key.is_some()
                    || llm.anthropic_base_url.as_str() != "https://api.anthropic.com/" =>
            {
                Some(Arc::new(AnthropicClient::new(
                    llm.anthropic_base_url.clone(),
                    llm.anthropic_api_key.clone(),
                    spec.model.clone(),
                    llm.max_tokens,
                    http_timeout,
                )?))
            }
            _ => {
                tracing::warn!(llm = %spec, "no API key for this model: not used");
                None
            }
        };
        if let Some(client) = client {
            tracing::info!(llm = %spec, "LLM in the chain");
            providers.push((spec.to_string(), client));
        }
    }
    if providers.is_empty() {
        tracing::warn!(
            "no LLM API key: offline mode, every turn is routed by keywords and answered with \
             the agent's offline reply (set OPENAI_API_KEY or ANTHROPIC_API_KEY)"
        );
        return Ok(Arc::new(OfflineLlm));
    }
    let chain = FallbackChain::new(providers, config.llm.policy.clone());
    Ok(Arc::new(match usage {
        Some(usage) => chain.with_call_log(Arc::new(usage)),
        None => chain,
    }))
}

/// The process's one MongoDB client (shared by the conversation store and the agency's data,
/// so one gate bounds everything the process asks of the database), when `MONGODB_URI` is set.
pub async fn open_pool(config: &Config) -> anyhow::Result<Option<MongoPool>> {
    let Some(mongo) = &config.mongodb else {
        return Ok(None);
    };
    let pool = MongoPool::connect(mongo, None).await?;
    tracing::info!(database = %mongo.database, lanes = ?pool.lane_sizes(), "using MongoDB");
    Ok(Some(pool))
}

/// MongoDB over `pool` (indexes created in the background, retried until the server
/// answers), else the in-memory store.
pub fn open_store(pool: Option<&MongoPool>) -> Arc<dyn Store> {
    let Some(pool) = pool else {
        tracing::warn!(
            "MONGODB_URI is unset: using the in-memory store; nothing is durable, \
             conversations are lost on restart"
        );
        return Arc::new(MemoryStore::new());
    };
    let store = MongoStore::over(pool.clone());
    let indexer = store.clone();
    tokio::spawn(async move {
        let mut delay = Duration::from_secs(1);
        loop {
            match indexer.ensure_indexes().await {
                Ok(()) => {
                    tracing::info!("MongoDB indexes in place");
                    match indexer.reopen_processing().await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(
                            messages = n,
                            "inbox messages left `processing` reopened"
                        ),
                        Err(error) => {
                            tracing::warn!("cannot reopen `processing` messages: {error}")
                        }
                    }
                    break;
                }
                Err(error) => {
                    tracing::error!(
                        "MongoDB indexes not created yet, retrying in {delay:?}: {error}"
                    );
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
    });
    Arc::new(store)
}

/// The business's data: MongoDB over `pool` (indexes created in the background), else an
/// in-memory store loaded with the demo data set, so a fresh machine has properties to talk
/// about (nothing of it is kept).
pub async fn open_realestate(
    config: &Config,
    pool: Option<&MongoPool>,
) -> anyhow::Result<Arc<dyn RealEstateStore>> {
    let Some(pool) = pool else {
        let store = MemoryRealEstate::new();
        let today = chrono::Utc::now()
            .with_timezone(&config.timezone)
            .date_naive();
        let set = demo::demo_set(today, config.timezone);
        let counts = demo::seed(&store, &set).await?;
        tracing::warn!(
            properties = counts.properties,
            "MONGODB_URI is unset: the real-estate data is the demo set, in memory"
        );
        return Ok(Arc::new(store));
    };
    let store = MongoRealEstate::new(pool.clone());
    let indexer = store.clone();
    tokio::spawn(async move {
        if let Err(error) = indexer.ensure_indexes().await {
            tracing::error!("real-estate indexes not created: {error}");
        }
    });
    Ok(Arc::new(store))
}

/// Says at start-up what will not work with this configuration.
fn announce(config: &Config) {
    if config.whatsapp.app_secret.is_none() {
        tracing::warn!(
            "WHATSAPP_APP_SECRET is unset: every POST /webhook will be refused with 401 \
             (unsigned payloads are never accepted)"
        );
    }
    if config.whatsapp.verify_token.is_none() {
        tracing::warn!(
            "WHATSAPP_VERIFY_TOKEN is unset: the GET /webhook handshake will answer 403"
        );
    }
    if config.whatsapp.access_token.is_none() {
        tracing::warn!("WHATSAPP_ACCESS_TOKEN is unset: dry run, replies go to the log only");
    }
    tracing::info!(
        llm.primary = %config.llm.primary,
        llm.fallback = %config.llm.fallback,
        "configuration loaded"
    );
}

/// Resolves on SIGINT or SIGTERM; in-flight requests then finish before the server stops.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for SIGINT: {error}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!("cannot listen for SIGTERM: {error}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutdown signal received, draining in-flight requests");
}
