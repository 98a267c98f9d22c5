//! `zaguan events list [--failed]` and `zaguan events retry ID|--failed`: the business events
//! bound for the agency's CRM, and a second chance for the ones a receiver refused or that
//! were not accepted within a day.

use anyhow::Context as _;
use chrono::Utc;

use crate::config::Config;
use crate::startup::{open_pool, open_store};
use crate::store::{EventQuery, EventStatus};

#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    #[command(subcommand)]
    pub command: EventsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum EventsCommand {
    /// The newest events (`--failed`: only those that failed for good).
    List {
        #[arg(long)]
        failed: bool,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Sends a failed event again (`--failed`: every failed one).
    Retry {
        id: Option<String>,
        #[arg(long)]
        failed: bool,
    },
}

pub async fn run(args: EventsArgs, config: Config) -> anyhow::Result<()> {
    let pool = open_pool(&config).await?;
    let store = open_store(pool.as_ref());
    match args.command {
        EventsCommand::List {
            failed,
            limit,
            json,
        } => {
            let events = store
                .list_events(&EventQuery {
                    status: failed.then_some(EventStatus::Failed),
                    limit: limit.clamp(1, 10_000),
                    ..EventQuery::default()
                })
                .await
                .context("reading events")?;
            for event in &events {
                if json {
                    let mut line = event.body();
                    line["status"] = serde_json::json!(event.status.as_str());
                    line["attempts"] = serde_json::json!(event.attempts);
                    line["error"] = serde_json::json!(event.error);
                    println!("{line}");
                } else {
                    println!(
                        "{}  {:<9}  {:>2}  {}{}",
                        event.at.format("%Y-%m-%d %H:%M:%S"),
                        event.status.as_str(),
                        event.attempts,
                        event.id,
                        event
                            .error
                            .as_deref()
                            .map_or_else(String::new, |e| format!("  ({e})"))
                    );
                }
            }
            if events.is_empty() && !json {
                println!("no events");
            }
            Ok(())
        }
        EventsCommand::Retry { id, failed } => {
            let ids: Vec<String> = match (id, failed) {
                (Some(id), false) => vec![id],
                (None, true) => store
                    .list_events(&EventQuery {
                        status: Some(EventStatus::Failed),
                        limit: 10_000,
                        ..EventQuery::default()
                    })
                    .await?
                    .into_iter()
                    .map(|e| e.id)
                    .collect(),
                _ => anyhow::bail!("name one event id, or --failed for every failed event"),
            };
            let mut retried = 0;
            for id in &ids {
                if store.retry_event(id, Utc::now()).await? {
                    retried += 1;
                } else {
                    eprintln!("{id}: no failed event with that id");
                }
            }
            println!("{retried} event(s) queued again");
            if retried < ids.len() {
                anyhow::bail!("{} event(s) not found as failed", ids.len() - retried);
            }
            Ok(())
        }
    }
}
