//! `zaguan conversations list|show|reset|take|reply|release`: the admin API, straight against
//! the store,
//! for an operator on a box with `MONGODB_URI`. Tables for people, `--json` (the API's exact
//! JSON) for scripts.

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::admin::operations::{self, ListParams};
use crate::config::Config;
use crate::startup::{open_pool, open_store};

#[derive(Debug, Args)]
pub struct ConversationsArgs {
    #[command(subcommand)]
    pub command: ConversationsCommand,
    /// Print the admin API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ConversationsCommand {
    /// Conversations, longest idle first.
    List {
        /// Only those in this agent (e.g. appointment_assistant).
        #[arg(long)]
        state: Option<String>,
        /// Only those idle at least this long (e.g. 2h, 30m).
        #[arg(long)]
        idle_for: Option<String>,
        /// Only those where an assistant asked for a person (`requested`) or an operator
        /// answers (`active`).
        #[arg(long)]
        handoff: Option<String>,
        #[arg(long, default_value_t = 1)]
        page: usize,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// One conversation: state, pending action, last messages, outbox.
    Show { wa_id: String },
    /// Back to the primary agent (history kept).
    Reset {
        wa_id: String,
        /// Who resets it, for the record.
        #[arg(long, default_value = "cli")]
        operator: String,
    },
    /// An operator takes the conversation: the bot stays silent until `release` or the end of
    /// the handoff.
    Take {
        wa_id: String,
        /// Who answers instead of the bot.
        #[arg(long)]
        operator: String,
        /// How long before it returns to the bot by itself (default ZAGUAN_HANDOFF_TTL).
        #[arg(long = "for")]
        for_: Option<String>,
    },
    /// Sends the operator's reply (WhatsApp formatting applies; a running `zaguan serve`
    /// delivers it within a second).
    Reply {
        wa_id: String,
        #[arg(long)]
        operator: String,
        /// The message; Markdown like the bot's (**bold**, lists, links).
        text: String,
    },
    /// Back to the bot.
    Release {
        wa_id: String,
        #[arg(long, default_value = "cli")]
        operator: String,
    },
    /// Writes the conversation as a conversation test (personal data replaced) and its
    /// recorded model answers beside it, for `zaguan test`.
    ExportTest {
        wa_id: String,
        /// The test file (its cassette is written beside it).
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// The test's name.
        #[arg(long)]
        name: Option<String>,
    },
}

pub async fn run(args: ConversationsArgs, config: Config) -> anyhow::Result<()> {
    let pool = open_pool(&config).await?;
    let store = open_store(pool.as_ref());
    let team = crate::admin::team::Team::new(crate::startup::open_team(pool.as_ref()), None);
    // The name an action is recorded under: a member of the team once there is one.
    let acting = async |name: &str| -> anyhow::Result<String> { Ok(team.acting(name).await?) };
    if let ConversationsCommand::ExportTest { wa_id, out, name } = &args.command {
        return export_test(store.as_ref(), config, wa_id, out.clone(), name.clone()).await;
    }
    let store = store.as_ref();
    let value = match &args.command {
        ConversationsCommand::List {
            state,
            idle_for,
            handoff,
            page,
            limit,
        } => {
            let params = ListParams {
                state: state.clone(),
                idle_for: idle_for.clone(),
                handoff: handoff.clone(),
                in_assistant: None,
                page: Some(*page),
                limit: Some(*limit),
            };
            operations::list_conversations(store, &params).await
        }
        ConversationsCommand::Show { wa_id } => operations::show_conversation(store, wa_id).await,
        ConversationsCommand::Reset { wa_id, operator } => {
            let operator = acting(operator).await?;
            operations::reset_conversation(store, wa_id, Some(&operator)).await
        }
        ConversationsCommand::Take {
            wa_id,
            operator,
            for_,
        } => {
            let operator = acting(operator).await?;
            operations::take_conversation(
                store,
                wa_id,
                Some(&operator),
                for_.as_deref(),
                config.handoff_ttl,
            )
            .await
        }
        ConversationsCommand::Reply {
            wa_id,
            operator,
            text,
        } => {
            let operator = acting(operator).await?;
            operations::operator_message(store, wa_id, Some(&operator), text).await
        }
        ConversationsCommand::Release { wa_id, operator } => {
            let operator = acting(operator).await?;
            operations::release_conversation(store, wa_id, Some(&operator)).await
        }
        ConversationsCommand::ExportTest { .. } => unreachable!("answered above"),
    }
    .map_err(|error| anyhow::anyhow!("{error}"))?;
    let text = if args.json {
        serde_json::to_string_pretty(&value)?
    } else {
        match &args.command {
            ConversationsCommand::List { .. } => list_table(&value),
            ConversationsCommand::Show { .. } => show_text(&value),
            ConversationsCommand::Reset { .. } => format!(
                "{} reset by {}: back to the primary assistant (history kept)",
                text(&value["wa_id"]),
                text(&value["reset_by"])
            ),
            ConversationsCommand::Take { .. } => format!(
                "{} taken by {} until {}: the bot stays silent; reply with `zaguan conversations \
                 reply`, give it back with `release`",
                text(&value["wa_id"]),
                text(&value["handoff"]["operator"]),
                text(&value["handoff"]["until"])
            ),
            ConversationsCommand::Reply { .. } => format!(
                "queued for {} in {} message(s)",
                text(&value["wa_id"]),
                value["parts"].as_array().map_or(0, Vec::len)
            ),
            ConversationsCommand::Release { .. } => {
                if value["released"] == Value::Bool(true) {
                    format!("{}: back to the bot", text(&value["wa_id"]))
                } else {
                    format!(
                        "{}: no operator had it; the bot answers",
                        text(&value["wa_id"])
                    )
                }
            }
            ConversationsCommand::ExportTest { .. } => unreachable!("answered above"),
        }
    };
    println!("{text}");
    Ok(())
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn state(value: &Value) -> String {
    let agents: Vec<String> = value
        .as_array()
        .map(|a| a.iter().map(text).collect())
        .unwrap_or_default();
    if agents.is_empty() {
        "primary".to_owned()
    } else {
        agents.join(",")
    }
}

/// `3h 12m`.
fn idle(value: &Value) -> String {
    let Some(seconds) = value.as_i64() else {
        return "-".to_owned();
    };
    let (h, m) = (seconds / 3600, (seconds % 3600) / 60);
    if h > 0 {
        format!("{h}h {m:02}m")
    } else {
        format!("{m}m")
    }
}

fn list_table(value: &Value) -> String {
    let rows: Vec<[String; 6]> = value["conversations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            [
                text(&c["wa_id"]),
                state(&c["dialog_state"]),
                idle(&c["idle_seconds"]),
                text(&c["pending_action"]),
                text(&c["lang"]),
                handoff(c),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no conversation matches".to_owned();
    }
    table(
        ["WA_ID", "STATE", "IDLE", "PENDING", "LANG", "HANDOFF"],
        &rows,
    )
}

/// `lucia until 14:05`, `requested`, or `-`.
fn handoff(c: &Value) -> String {
    if let Some(operator) = c["handoff"]["operator"].as_str() {
        let until = text(&c["handoff"]["until"]);
        let until = until.get(11..16).unwrap_or(&until);
        format!("{operator} until {until} UTC")
    } else if !c["handoff_requested"].is_null() {
        "requested".to_owned()
    } else {
        "-".to_owned()
    }
}

fn show_text(value: &Value) -> String {
    let c = &value["conversation"];
    let mut out = format!(
        "{}  state: {}  idle: {}  lang: {}\n",
        text(&c["wa_id"]),
        state(&c["dialog_state"]),
        idle(&c["idle_seconds"]),
        text(&c["lang"])
    );
    if c["handoff"].is_object() || !c["handoff_requested"].is_null() {
        out.push_str(&format!("handoff: {}", handoff(c)));
        if let Some(reason) = c["handoff_requested"]["reason"].as_str() {
            out.push_str(&format!(" — asked: {reason}"));
        }
        out.push('\n');
    }
    if let Some(at) = value["opted_out_at"].as_str() {
        out.push_str(&format!(
            "opted out: {at} ({}): no reminders or alerts\n",
            text(&value["opt_out_source"])
        ));
    }
    if let Some(at) = value["marketing_opted_out_at"].as_str() {
        out.push_str(&format!(
            "marketing stopped in WhatsApp: {at}: no marketing templates, utility ones still go\n"
        ));
    }
    if let Some(referral) = value["referral"].as_object() {
        out.push_str(&format!(
            "came from an ad: {} (click id {})\n",
            referral
                .get("headline")
                .or(referral.get("source_id"))
                .map_or("-".into(), text),
            referral.get("ctwa_clid").map_or("-".into(), text),
        ));
    }
    if let Some(action) = value["pending_action"].as_object() {
        out.push_str(&format!(
            "pending: {} — {}\n",
            text(&action["tool"]),
            text(&action["summary"])
        ));
    }
    if !value["reset_by"].is_null() {
        out.push_str(&format!(
            "last reset by {} at {}\n",
            text(&value["reset_by"]),
            text(&value["reset_at"])
        ));
    }
    if !value["last_error"].is_null() {
        out.push_str(&format!(
            "last send error: {}\n",
            text(&value["last_error"])
        ));
    }
    let rows: Vec<[String; 4]> = value["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let mut content: String = text(&m["content"]).replace('\n', " ");
            if let Some(calls) = m["tool_calls"].as_array().filter(|c| !c.is_empty()) {
                let names: Vec<String> = calls.iter().map(|c| text(&c["name"])).collect();
                content = format!("→ {} {content}", names.join(", "));
            }
            if content.chars().count() > 70 {
                content = content.chars().take(69).collect::<String>() + "…";
            }
            [
                text(&m["seq"]),
                text(&m["role"]),
                text(&m["agent"]),
                content,
            ]
        })
        .collect();
    out.push_str(&table(["SEQ", "ROLE", "AGENT", "CONTENT"], &rows));
    out
}

/// Columns padded to their widest cell.
fn table<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths: [usize; N] = header.map(|h| h.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// `export-test`: the test and its cassette written, and whether it passes now.
async fn export_test(
    store: &dyn crate::store::Store,
    config: Config,
    raw: &str,
    out: Option<std::path::PathBuf>,
    name: Option<String>,
) -> anyhow::Result<()> {
    use crate::conversation_tests::{cassette, export};
    let wa_id = crate::domain::WaId::parse(raw).map_err(|e| anyhow::anyhow!("{raw}: {e}"))?;
    let shared = crate::conversation_tests::shared_for_replay(config)?;
    let exported = export::export(store, &shared, &wa_id, name).await?;
    let out = out.unwrap_or_else(|| {
        let digits = wa_id.as_str();
        std::path::PathBuf::from(format!(
            "tests/conversations/exported-{}.yaml",
            &digits[digits.len().saturating_sub(4)..]
        ))
    });
    std::fs::write(&out, &exported.yaml).map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    let cassette_path = cassette::path_for(&out);
    exported
        .cassette
        .save(&cassette_path)
        .map_err(anyhow::Error::msg)?;
    println!(
        "wrote {} and {} («{}»)",
        out.display(),
        cassette_path.display(),
        exported.name
    );
    if exported.passes {
        println!("it passes by replay: edit its expectations to say what the bot should do");
    } else {
        println!("it does not pass by replay yet:");
        for failure in &exported.failures {
            println!("  {failure}");
        }
    }
    Ok(())
}
