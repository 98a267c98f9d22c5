//! `zaguan export leads|appointments|offers --since 7d [--format csv|jsonl] [--bom]`: what
//! happened since then, to standard output (see [`crate::admin::export`]).

use std::io::Write as _;

use anyhow::Context as _;
use chrono::Utc;

use crate::admin::export::{self, ExportFormat, ExportKind};
use crate::config::Config;
use crate::startup::{open_pool, open_realestate, open_store};

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    pub kind: ExportKind,
    /// `7d`, `24h`, `30m` or an RFC 3339 time.
    #[arg(long, default_value = "7d")]
    pub since: String,
    #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
    pub format: ExportFormat,
    /// Start a CSV with a UTF-8 byte-order mark (for spreadsheets).
    #[arg(long)]
    pub bom: bool,
}

pub async fn run(args: ExportArgs, config: Config) -> anyhow::Result<()> {
    let since = export::parse_since(&args.since, Utc::now()).map_err(anyhow::Error::msg)?;
    let pool = open_pool(&config).await?;
    let store = open_store(pool.as_ref());
    let realestate = open_realestate(&config, pool.as_ref()).await?;
    let export = export::rows(args.kind, since, store.as_ref(), realestate.as_ref())
        .await
        .context("reading the store")?;
    let out = export::render(args.kind, &export.rows, args.format, args.bom);
    std::io::stdout().write_all(&out)?;
    eprintln!("{} row(s)", export.rows.len());
    if let Some(next) = export.next {
        eprintln!(
            "cut at {} rows: more follow; the next page is `--since {}`",
            export.rows.len(),
            next.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        );
    }
    Ok(())
}
