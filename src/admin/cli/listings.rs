//! `zaguan listings add|update FILE.json`: the agency's staff put listings into the store. A
//! listing added or made cheaper is news for saved searches: the running service tells the
//! customers whose search it matches (see [`crate::realestate::alerts`]). `zaguan listings
//! import FILE|URL --format kyero` takes the agency's CRM feed as the whole inventory
//! ([`crate::realestate::feed`]).

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
    /// Import a listings feed (a file, `-`, or an http(s) URL) as the whole inventory:
    /// listings it lacks are withdrawn.
    Import {
        source: String,
        #[arg(long, value_enum, default_value = "kyero")]
        format: FeedFormat,
        /// Import a feed holding fewer than `--min-share` of today's listings.
        #[arg(long)]
        allow_shrink: bool,
        /// The share of today's listings a feed must hold.
        #[arg(long, default_value_t = 0.5)]
        min_share: f64,
    },
}

/// The feed formats read.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FeedFormat {
    /// Kyero v3 XML, the export of most Spanish agencies' CRMs.
    Kyero,
}

pub async fn run(args: ListingsArgs, config: Config) -> anyhow::Result<()> {
    let (file, adding) = match &args.command {
        ListingsCommand::Add { file } => (file, true),
        ListingsCommand::Update { file } => (file, false),
        ListingsCommand::Import {
            source,
            format: FeedFormat::Kyero,
            allow_shrink,
            min_share,
        } => return import(source, *allow_shrink, *min_share, config).await,
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

async fn import(
    source: &str,
    allow_shrink: bool,
    min_share: f64,
    config: Config,
) -> anyhow::Result<()> {
    use crate::realestate::feed::{self, ImportOptions};
    if !(0.0..=1.0).contains(&min_share) {
        anyhow::bail!("--min-share {min_share}: a share from 0 to 1");
    }
    let xml = if source.starts_with("http://") || source.starts_with("https://") {
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()?;
        feed::fetch(&client, source)
            .await
            .map_err(|why| anyhow::anyhow!("{why}; nothing was changed"))?
    } else if source == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
            .context("reading standard input")?;
        bytes
    } else {
        std::fs::read(source).with_context(|| format!("reading {source}"))?
    };
    let pool = open_pool(&config).await?;
    let store = open_realestate(&config, pool.as_ref())
        .await
        .context("cannot open the real-estate store")?;
    let report = feed::import_kyero(
        store.as_ref(),
        &xml,
        ImportOptions {
            allow_shrink,
            min_share,
            ..ImportOptions::at(Utc::now())
        },
    )
    .await
    .with_context(|| format!("importing {source}"))?;
    println!("{}", report.summary());
    for skipped in &report.skipped {
        println!(
            "  skipped property {} ({}): {}",
            skipped.position,
            skipped.id.as_deref().unwrap_or("no ref"),
            skipped.reason
        );
    }
    if !report.withdrawn.is_empty() {
        println!("  withdrawn: {}", report.withdrawn.join(", "));
    }
    Ok(())
}
