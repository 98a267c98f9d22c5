//! `zaguan serve`: the HTTP server, with the embedded or MongoDB store.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use crate::app::{self, AppState};
use crate::config::Config;
use crate::store::{MemoryStore, MongoStore, Store};
use crate::telemetry;

#[derive(Debug, Args)]
pub struct ServeArgs {}

pub async fn run(_args: ServeArgs, config: Config) -> anyhow::Result<()> {
    telemetry::metrics_handle();
    let store = open_store(&config).await?;
    announce(&config);

    let state = AppState::new(
        store,
        config.whatsapp.verify_token.clone(),
        config.whatsapp.app_secret.clone(),
    );
    let listener = tokio::net::TcpListener::bind(config.bind_addr)
        .await
        .with_context(|| format!("cannot listen on {}", config.bind_addr))?;
    tracing::info!(addr = %listener.local_addr()?, "zaguan listening");
    axum::serve(listener, app::router(state))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("HTTP server failed")?;
    tracing::info!("zaguan stopped");
    Ok(())
}

/// MongoDB when configured (indexes created in the background, retried until the server
/// answers), else the in-memory store.
async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let Some(mongo) = &config.mongodb else {
        tracing::warn!(
            "MONGODB_URI is unset: using the in-memory store; nothing is durable, \
             conversations are lost on restart"
        );
        return Ok(Arc::new(MemoryStore::new()));
    };
    let store = MongoStore::connect(mongo).await?;
    tracing::info!(database = %mongo.database, "using MongoDB");
    let indexer = store.clone();
    tokio::spawn(async move {
        let mut delay = Duration::from_secs(1);
        loop {
            match indexer.ensure_indexes().await {
                Ok(()) => {
                    tracing::info!("MongoDB indexes in place");
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
