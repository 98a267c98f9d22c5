//! `zaguan operators add|list|disable|reset`: the agency's team, straight against MongoDB. A new
//! or reset operator's password and API token are printed once; only their hashes are kept.

use chrono::Utc;
use clap::{Args, Subcommand};

use crate::admin::team::{Issued, OperatorRole, Team};
use crate::config::Config;
use crate::startup::{open_pool, open_team};

#[derive(Debug, Args)]
pub struct OperatorsArgs {
    #[command(subcommand)]
    pub command: OperatorsCommand,
}

#[derive(Debug, Subcommand)]
pub enum OperatorsCommand {
    /// Adds an operator and prints their one-time password and API token.
    Add {
        /// Letters, digits, `.`, `_` or `-` (kept in lower case).
        name: String,
        /// viewer: reads, numbers masked; operator: acts on conversations; admin: also
        /// manages operators and exports.
        #[arg(long, value_enum)]
        role: OperatorRole,
        /// How customers read them in a follow-up («Lucía Pérez»); without it, the business
        /// name.
        #[arg(long)]
        display_name: Option<String>,
    },
    /// Every operator, their role and whether they are enabled.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Disables an operator: their sessions end and their token stops working at once.
    Disable { name: String },
    /// A new password and token for an operator (enabled again); their sessions end.
    Reset { name: String },
}

pub async fn run(args: OperatorsArgs, config: Config) -> anyhow::Result<()> {
    let pool = open_pool(&config).await?.ok_or_else(|| {
        anyhow::anyhow!("operators are kept in MongoDB: set MONGODB_URI to the service's database")
    })?;
    let team = Team::new(open_team(Some(&pool)), None);
    let now = Utc::now();
    let by = "cli";
    match args.command {
        OperatorsCommand::Add {
            name,
            role,
            display_name,
        } => {
            let issued = team
                .add(&name, role, display_name.as_deref(), by, now)
                .await?;
            print_issued(&issued, &config);
        }
        OperatorsCommand::Reset { name } => {
            let issued = team.reset(&name, by, now).await?;
            print_issued(&issued, &config);
        }
        OperatorsCommand::Disable { name } => {
            let ended = team.disable(&name, by, now).await?;
            println!(
                "{}: disabled; {ended} session(s) ended",
                name.trim().to_lowercase()
            );
        }
        OperatorsCommand::List { json } => {
            for operator in team.list().await? {
                let state = match operator.disabled_at {
                    Some(at) => format!("disabled {}", at.format("%Y-%m-%d %H:%M UTC")),
                    None => "enabled".to_owned(),
                };
                let last = operator
                    .last_sign_in_at
                    .map(|at| at.format("%Y-%m-%d %H:%M UTC").to_string());
                if json {
                    println!(
                        "{}",
                        serde_json::json!({
                            "name": operator.name, "role": operator.role.as_str(),
                            "enabled": operator.disabled_at.is_none(),
                            "disabled_at": operator.disabled_at, "created_at": operator.created_at,
                            "created_by": operator.created_by, "last_sign_in_at": operator.last_sign_in_at,
                        })
                    );
                } else {
                    println!(
                        "{:<24} {:<9} {:<30} last sign-in: {}",
                        operator.name,
                        operator.role.as_str(),
                        state,
                        last.as_deref().unwrap_or("never")
                    );
                }
            }
        }
    }
    Ok(())
}

fn print_issued(issued: &Issued, config: &Config) {
    println!("operator: {} ({})", issued.name, issued.role.as_str());
    println!("password: {}", issued.password);
    println!("API token: {}", issued.token);
    if let Some(url) = &config.public_url
        && let Ok(link) = url.join(&format!("console/sign-in?operator={}", issued.name))
    {
        println!("sign in at: {link}");
    }
    println!("Shown once: only their hashes are kept. `zaguan operators reset` issues new ones.");
}
