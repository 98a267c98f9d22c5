//! `zaguan serve`: the HTTP server, with the embedded or MongoDB store.

use crate::startup::{build_engine, open_pool, open_realestate, open_store, open_team, outbound};
use std::future::IntoFuture as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::FromRef;
use clap::Args;

use crate::app::{self, AppState};
use crate::config::Config;
use crate::crm::EventDelivery;
use crate::engine::Engine;
use crate::engine::handoff::HandoffEscalation;
use crate::health::{HealthState, StoreDoctor};
use crate::outbound::Outbound;
use crate::realestate::alerts::Alerts;
use crate::realestate::reminders::Reminders;
use crate::runtime::UsageRecorder;
use crate::runtime::instances::{IdentityError, Membership, MembershipTask};
use crate::runtime::monitor::Monitor;
use crate::runtime::retention::Cleanup;
use crate::runtime::{PromptReloader, Workers};
use crate::telemetry;

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
    let reminders = match &config.outreach {
        Some(outreach) => Some((
            Reminders::new(
                realestate.clone(),
                engine.clone(),
                outreach.reminders.clone(),
            )
            .spawn(),
            Alerts::new(realestate.clone(), engine.clone(), outreach.alerts.clone()).spawn(),
            crate::realestate::follow_up::FollowUps::new(
                realestate.clone(),
                engine.clone(),
                outreach.follow_ups.clone(),
            )
            .spawn(),
        )),
        None => {
            tracing::warn!(
                "WHATSAPP_PHONE_NUMBER_ID is unset: no visit reminders, saved-search notices nor follow-ups are sent"
            );
            None
        }
    };
    let feed = match &config.listings_feed {
        Some(settings) => {
            tracing::info!(url = %settings.url, every = ?settings.every, "the listings feed is imported every ZAGUAN_LISTINGS_FEED_EVERY");
            Some(
                crate::realestate::feed::schedule::FeedImports::new(
                    realestate.clone(),
                    settings.clone(),
                    config.workers.owner.clone(),
                )?
                .spawn(),
            )
        }
        None => None,
    };
    let calendars = crate::realestate::calendar::refresh::CalendarRefresh::new(
        realestate.clone(),
        config.calendar_refresh,
        config.engine.timezone,
    )?
    .spawn();
    let escalation = {
        let prompts = engine.clone();
        HandoffEscalation::new(
            engine.handoffs().clone(),
            Arc::new(move || prompts.prompts().business().clone()),
        )
        .spawn()
    };
    let outbound = Arc::new(outbound(&config, store.clone())?);
    let events = match &config.events {
        Some(settings) => {
            tracing::info!(
                receivers = settings.urls.len(),
                "business events are delivered to ZAGUAN_EVENTS_URL"
            );
            Some(
                EventDelivery::new(store.clone(), settings.clone())?
                    .with_sources(store.clone())
                    .spawn(),
            )
        }
        None => {
            tracing::info!("ZAGUAN_EVENTS_URL is unset: business events are recorded, not sent");
            None
        }
    };
    announce(&config);
    let prompts = Arc::new(PromptReloader::new(
        config.prompts_dir.clone(),
        crate::startup::known_tools(),
        engine.clone(),
    ));
    let prompt_watch = prompts.clone().spawn();
    let leads = leads_intake(&config, &store, &realestate, &engine);
    let lead_sweep = leads
        .clone()
        .map(|intake| crate::leads::sweep::LeadSweep::new(intake).spawn());

    let state = AppState::new(
        store,
        config.whatsapp.verify_token.clone(),
        config.whatsapp.app_secret.clone(),
    )
    .with_admin_token(config.admin_token.clone())
    .with_team(open_team(pool.as_ref()))
    .with_realestate(realestate)
    .with_lease(config.workers.lease)
    .with_secure_cookies(
        config
            .public_url
            .as_ref()
            .is_some_and(|url| url.scheme() == "https"),
    )
    .with_prompts(prompts)
    .with_handoff_ttl(config.handoff_ttl)
    .with_leads(leads)
    .with_config(config.clone());
    // The workers start once this process is its instance (the store must answer for that);
    // until then `/readyz` says so.
    let state = state.starting();
    let starter = tokio::spawn(start_instance(
        state.clone(),
        config.clone(),
        engine,
        outbound,
    ));
    let doctor = pool
        .clone()
        .map(|pool| StoreDoctor::new(pool, HealthState::from_ref(&state)).spawn());
    let cleanup = Cleanup::new(state.store.clone(), config.retention).spawn(CLEANUP_EVERY);
    let listener = tokio::net::TcpListener::bind(config.bind_addr)
        .await
        .with_context(|| format!("cannot listen on {}", config.bind_addr))?;
    tracing::info!(addr = %listener.local_addr()?, "zaguan listening");
    // `/metrics` on a listener of its own when ZAGUAN_METRICS_ADDR says so (a port only
    // Prometheus reaches); the public one then no longer serves it.
    let metrics = match config.metrics_addr {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on ZAGUAN_METRICS_ADDR {addr}"))?;
            tracing::info!(addr = %listener.local_addr()?, "metrics listening");
            Some(tokio::spawn(
                axum::serve(listener, app::metrics_router()).into_future(),
            ))
        }
        None => None,
    };
    // One deadline from SIGTERM for everything: the HTTP server stops accepting and finishes
    // its requests while the workers finish their turns, side by side.
    let (stopping, mut stop_requested) = tokio::sync::watch::channel(false);
    let mut http = tokio::spawn(
        axum::serve(
            listener,
            app::router(state).into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
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
                    config.workers.owner
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
    escalation.abort();
    calendars.abort();
    if let Some(feed) = feed {
        feed.abort();
    }
    if let Some(metrics) = metrics {
        metrics.abort();
    }
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
    if let Some(sweep) = lead_sweep {
        sweep.abort();
    }
    if let Some((reminders, alerts, follow_ups)) = reminders {
        reminders.abort();
        alerts.abort();
        follow_ups.abort();
    }
    usage.flush().await;
    if let Some(error) = failure {
        tracing::error!("zaguan stopped: {error:#}");
        return Err(error);
    }
    tracing::info!("zaguan stopped");
    Ok(())
}

/// Portal and CRM leads in, with `ZAGUAN_LEADS_TOKEN`; contacted from the business number
/// (`WHATSAPP_PHONE_NUMBER_ID`), else only stored.
fn leads_intake(
    config: &Config,
    store: &Arc<dyn crate::store::Store>,
    realestate: &Arc<dyn crate::realestate::RealEstateStore>,
    engine: &Arc<Engine>,
) -> Option<Arc<crate::leads::Intake>> {
    let token = config.leads_token.clone()?;
    let phone_number_id = config
        .outreach
        .as_ref()
        .map(|o| o.follow_ups.phone_number_id.clone());
    if phone_number_id.is_none() {
        tracing::warn!("WHATSAPP_PHONE_NUMBER_ID is unset: leads are stored, not contacted");
    }
    tracing::info!("portal and CRM leads are taken at POST /leads and POST /leads/email");
    Some(Arc::new(crate::leads::Intake::new(
        store.clone(),
        Some(realestate.clone()),
        engine.clone(),
        crate::leads::LeadSettings {
            token,
            phone_number_id,
            region: config.phone_region,
        },
    )))
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
) -> anyhow::Result<Running> {
    let mut delay = Duration::from_millis(200);
    let membership = loop {
        match Membership::establish(
            state.store.clone(),
            config.workers.owner.clone(),
            config.workers.lease,
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
        config.workers.clone(),
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

/// How often the cleanup job deletes what the retention no longer keeps.
const CLEANUP_EVERY: Duration = Duration::from_secs(3600);

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
    if config.whatsapp.graph.access_token.is_none() {
        tracing::warn!("WHATSAPP_ACCESS_TOKEN is unset: dry run, replies go to the log only");
    }
    if config.client_ip_header.is_some() && config.trusted_proxies.is_empty() {
        tracing::warn!(
            "ZAGUAN_CLIENT_IP_HEADER is set but ZAGUAN_TRUSTED_PROXIES is not: the header is \
             believed from no one, and each connection's peer counts as the client"
        );
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
