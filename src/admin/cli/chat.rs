//! `zaguan chat`: talk to the bot in the terminal through the very same engine and guard path
//! as WhatsApp; each line you type is an inbound message, the reply is printed as the user
//! would see it, followed by the conversation's `dialog_state`. Buttons and list rows are
//! numbered: typing the number presses it. The service's logs go to a file (`--log-file`), or
//! to stderr with `-v`, so the dialogue stays readable.

use std::io::Write;

use anyhow::Context as _;
use chrono::Utc;
use clap::Args;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::config::Config;
use crate::domain::Role;
use crate::domain::{WaId, WaMessageId};
use crate::runtime::UsageRecorder;
use crate::startup::{build_engine, open_pool, open_realestate, open_store};
use crate::store::ConversationStore;
use crate::store::{InboxEntry, InboxStatus, Media, RoleAssignment, RoleSource};

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Conversation key to talk as.
    #[arg(long, default_value = "34600000000")]
    wa_id: String,
    /// Talk as this role (prospect, owner or agent), set as an operator would. Without it the
    /// stored role is kept, or the business data's for a number never seen (an owner's or a
    /// staff member's).
    #[arg(long, value_parser = ["prospect", "owner", "agent"])]
    role: Option<String>,
    /// Show the service's logs on stderr instead of writing them to the log file.
    #[arg(short, long)]
    pub verbose: bool,
    /// Where the logs go without `-v` (default: zaguan-chat.log in the temporary folder).
    #[arg(long)]
    pub log_file: Option<std::path::PathBuf>,
}

impl ChatArgs {
    /// The log file of a quiet session.
    pub fn log_path(&self) -> std::path::PathBuf {
        self.log_file
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("zaguan-chat.log"))
    }
}

/// A button or list row the user can press by typing its number.
struct Choice {
    id: String,
    title: String,
    /// `button_reply` or `list_reply`.
    kind: &'static str,
}

pub async fn run(args: ChatArgs, config: Config) -> anyhow::Result<()> {
    let wa_id = WaId::parse(&args.wa_id).map_err(|e| anyhow::anyhow!("--wa-id: {e}"))?;
    let pool = open_pool(&config).await?;
    let store = open_store(pool.as_ref());
    if let Some(role) = &args.role {
        let assignment = RoleAssignment {
            role: Role::parse(role),
            source: RoleSource::Operator,
            by: "zaguan chat".to_owned(),
            at: Utc::now(),
        };
        store
            .assign_role(&wa_id, &assignment)
            .await
            .context("cannot record the role")?;
    }
    let usage = UsageRecorder::spawn(store.clone());
    let realestate = open_realestate(&config, pool.as_ref()).await?;
    let engine = build_engine(&config, store.clone(), realestate, Some(usage.clone()))?;

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = std::io::stdout();
    let session = Utc::now().timestamp_millis();
    let mut n = 0u64;
    let mut choices: Vec<Choice> = Vec::new();
    loop {
        write!(stdout, "tú> ")?;
        stdout.flush()?;
        let Some(line) = lines.next_line().await? else {
            break;
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        n += 1;
        let pressed = text
            .parse::<usize>()
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| choices.get(i));
        let (kind, said, payload) = match pressed {
            Some(choice) => (
                "interactive",
                choice.title.clone(),
                serde_json::json!({"type": "interactive", "interactive": {
                    "type": choice.kind,
                    choice.kind: {"id": choice.id, "title": choice.title},
                }}),
            ),
            None => (
                "text",
                text.to_owned(),
                serde_json::json!({"type": "text", "text": {"body": text}}),
            ),
        };
        let entry = InboxEntry {
            wamid: WaMessageId::parse(&format!("wamid.chat.{session}.{n}"))
                .map_err(anyhow::Error::msg)?,
            wa_id: wa_id.clone(),
            phone_number_id: "chat".to_owned(),
            kind: kind.to_owned(),
            text: Some(said),
            content: crate::webhook::payload::message_content(&payload),
            payload: payload.to_string(),
            context_id: None,
            sent_at: Some(Utc::now()),
            status: InboxStatus::Pending,
            received_at: Utc::now(),
            attempts: 0,
        };
        store.insert_inbox(std::slice::from_ref(&entry)).await?;
        let open = store.open_inbox(&wa_id).await?;
        let outcome = engine.run_turn(&wa_id, &open).await?;
        store
            .set_inbox_status(&outcome.answered, InboxStatus::Done)
            .await?;
        // Each part is one WhatsApp message, as the customer would see it.
        let sent = store.outbox_in_reply_to(&entry.wamid).await?;
        choices.clear();
        if sent.is_empty() && outcome.parts.is_empty() {
            writeln!(stdout, "bot> (ya respondido)")?;
        }
        if sent.is_empty() {
            for part in &outcome.parts {
                writeln!(stdout, "bot> {part}")?;
            }
        }
        for part in &sent {
            match &part.media {
                Some(Media::Image { link }) => {
                    writeln!(stdout, "bot> [foto] {} {link}", part.body)?
                }
                Some(Media::List { text, rows, .. }) => {
                    writeln!(stdout, "bot> {text}")?;
                    for row in rows {
                        choices.push(Choice {
                            id: row.id.clone(),
                            title: row.title.clone(),
                            kind: "list_reply",
                        });
                        writeln!(
                            stdout,
                            "     {}) {} — {}",
                            choices.len(),
                            row.title,
                            row.description
                        )?;
                    }
                }
                // One message: the text, the photos to swipe, a tap on any of them.
                Some(Media::Carousel { text, cards, .. }) => {
                    writeln!(stdout, "bot> {text}")?;
                    for card in cards {
                        writeln!(stdout, "     [foto] {} {}", card.caption, card.link)?;
                    }
                }
                None => writeln!(stdout, "bot> {}", part.body)?,
            }
            if !part.buttons.is_empty() {
                let mut line = String::from("    ");
                for button in &part.buttons {
                    choices.push(Choice {
                        id: button.id.clone(),
                        title: button.title.clone(),
                        kind: "button_reply",
                    });
                    line.push_str(&format!(" {}) {}", choices.len(), button.title));
                }
                writeln!(stdout, "{line}")?;
            }
        }
        writeln!(
            stdout,
            "     [dialog_state: {:?}]",
            outcome.dialog_state.to_list()
        )?;
    }
    usage.flush().await;
    print_summary(store.as_ref(), &wa_id).await
}

async fn print_summary(
    store: &(impl ConversationStore + ?Sized),
    wa_id: &WaId,
) -> anyhow::Result<()> {
    if let Some(conversation) = store.conversation(wa_id).await? {
        eprintln!(
            "dialog_state at exit: {:?}",
            conversation.dialog_state.to_list()
        );
    }
    Ok(())
}
