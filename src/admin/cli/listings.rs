//! `zaguan listings add|update FILE.json`: the agency's staff put listings into the store. A
//! listing added or made cheaper is news for saved searches: the running service tells the
//! customers whose search it matches (see [`crate::realestate::alerts`]).

use std::path::PathBuf;

use anyhow::Context as _;
use chrono::Utc;

use crate::config::Config;
use crate::realestate::listings::{self, Applied};
use crate::startup::{open_pool, open_realestate};

#[derive(Debug, clap::Args)]
pub struct ListingsArgs {
    #[command(subcommand)]
    pub command: ListingsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ListingsCommand {
    /// Add new listings: a JSON object or array of them (`-` reads standard input).
    Add { file: PathBuf },
    /// Change listings: each object names its `id` and the fields to change.
    Update { file: PathBuf },
}

pub async fn run(args: ListingsArgs, config: Config) -> anyhow::Result<()> {
    let (file, adding) = match &args.command {
        ListingsCommand::Add { file } => (file, true),
        ListingsCommand::Update { file } => (file, false),
    };
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    let items = listings::parse(&text).with_context(|| format!("in {}", file.display()))?;
    let pool = open_pool(&config).await?;
    let store = open_realestate(&config, pool.as_ref())
        .await
        .context("cannot open the real-estate store")?;
    if config.mongodb.is_none() {
        eprintln!(
            "warning: no MONGODB_URI: the in-memory store forgets this when the command exits"
        );
    }
    let applied = if adding {
        listings::add(store.as_ref(), items, Utc::now()).await
    } else {
        listings::update(store.as_ref(), items, Utc::now()).await
    }
    .with_context(|| format!("in {}; nothing was written", file.display()))?;
    println!("{}", summary(&applied));
    Ok(())
}

/// `2 added (P-2001, P-2002)`, `1 updated (P-1001), 1 cheaper: saved searches will hear of it`.
fn summary(applied: &Applied) -> String {
    let mut parts = Vec::new();
    if !applied.added.is_empty() {
        parts.push(format!(
            "{} added ({})",
            applied.added.len(),
            applied.added.join(", ")
        ));
    }
    if !applied.updated.is_empty() {
        parts.push(format!(
            "{} updated ({})",
            applied.updated.len(),
            applied.updated.join(", ")
        ));
    }
    if !applied.price_drops.is_empty() {
        parts.push(format!("{} cheaper", applied.price_drops.len()));
    }
    if parts.is_empty() {
        return "nothing to do".to_owned();
    }
    let mut line = parts.join(", ");
    if !applied.added.is_empty() || !applied.price_drops.is_empty() {
        line.push_str(": matching saved searches are told by the running service");
    }
    line
}
