//! `zaguan users forget WA_ID`: erases what Zaguan stores about one WhatsApp contact (a data
//! subject's erasure request), straight against the store. `zaguan users set-role`: gives a
//! contact a role by hand, recorded with who and when.

use clap::{Args, Subcommand};

use crate::config::Config;
use crate::domain::WaId;
use crate::startup::{open_pool, open_realestate, open_store};

#[derive(Debug, Args)]
pub struct UsersArgs {
    #[command(subcommand)]
    pub command: UsersCommand,
}

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Deletes the contact's conversation, profile, history, inbox, outbox, LLM call records,
    /// leases and rejected webhooks that mention it. Business records (appointments, visits,
    /// offers) are kept and counted: remove them in the business's own systems if required.
    Forget {
        /// The contact key: the phone number as WhatsApp sends it (e.g. 34600111222).
        wa_id: String,
        /// Print the counts as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sets the contact's role (`users.role`, with `role_set_by` and `role_set_at`); from the
    /// next message they talk to the assistants in it. The business data no longer changes a
    /// role set here; `auto` gives it back to the data (owners' and staff's numbers).
    SetRole {
        /// The contact key (e.g. 34600111222).
        wa_id: String,
        #[arg(value_parser = ["owner", "agent", "prospect", "auto"])]
        role: String,
        /// Who sets it, for the record.
        #[arg(long)]
        operator: String,
    },
}

pub async fn run(args: UsersArgs, config: Config) -> anyhow::Result<()> {
    match args.command {
        UsersCommand::Forget { wa_id, json } => forget(&wa_id, json, config).await,
        UsersCommand::SetRole {
            wa_id,
            role,
            operator,
        } => {
            let pool = open_pool(&config).await?;
            let store = open_store(pool.as_ref());
            let team =
                crate::admin::team::Team::new(crate::startup::open_team(pool.as_ref()), None);
            let operator = team.acting(&operator).await?;
            let set =
                crate::admin::operations::set_role(store.as_ref(), &wa_id, &role, Some(&operator))
                    .await
                    .map_err(|error| anyhow::anyhow!("{error}"))?;
            println!(
                "{}: role {} ({}, set by {} at {})",
                set["wa_id"].as_str().unwrap_or_default(),
                set["role"].as_str().unwrap_or_default(),
                set["source"].as_str().unwrap_or_default(),
                set["set_by"].as_str().unwrap_or_default(),
                set["set_at"].as_str().unwrap_or_default(),
            );
            Ok(())
        }
    }
}

async fn forget(wa_id: &str, json: bool, config: Config) -> anyhow::Result<()> {
    let wa_id = WaId::parse(wa_id).map_err(|e| anyhow::anyhow!("`{wa_id}`: {e}"))?;
    let pool = open_pool(&config).await?;
    let store = open_store(pool.as_ref());
    let counts =
        crate::admin::operations::forget_user(store.as_ref(), wa_id.as_str(), config.workers.lease)
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))?;
    let realestate = open_realestate(&config, pool.as_ref()).await?;
    let kept = serde_json::json!({
        "appointments": realestate.appointments_of(&wa_id).await?.len(),
        "visits": realestate.visits_of(&wa_id).await?.len(),
        "offers": realestate.offers_of(&wa_id).await?.len(),
    });
    tracing::info!(conversation.id = %wa_id.masked(), deleted = counts.total(), "user forgotten");
    if json {
        let value = serde_json::json!({"wa_id": wa_id.as_str(), "deleted": counts, "kept": kept});
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!(
            "{}: deleted {} documents (conversations {}, users {}, messages {}, inbox {}, \
             outbox {}, llm_calls {}, leases {}, webhook_rejects {}, events {}); kept business \
             records: \
             appointments {}, visits {}, offers {}",
            wa_id.as_str(),
            counts.total(),
            counts.conversations,
            counts.users,
            counts.messages,
            counts.inbox,
            counts.outbox,
            counts.llm_calls,
            counts.leases,
            counts.webhook_rejects,
            counts.events,
            kept["appointments"],
            kept["visits"],
            kept["offers"],
        );
    }
    Ok(())
}
