//! `zaguan staff add|list|update|disable|import` and `zaguan owners add|list|update|import`:
//! the agency loads its people without hand-writing MongoDB documents. Flags and files share
//! [`crate::realestate::people`], so both are checked the same way and a bad file writes
//! nothing.

use std::path::PathBuf;

use anyhow::Context as _;
use chrono::Utc;
use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::realestate::RealEstateStore;
use crate::realestate::StaffMember;
use crate::realestate::people::{self, FileFormat, OwnerView, Writing};
use crate::startup::{open_pool, open_realestate};

#[derive(Debug, clap::Args)]
pub struct StaffArgs {
    #[command(subcommand)]
    pub command: StaffCommand,
}

/// A staff member's fields as flags (each left out stays as it is).
#[derive(Debug, Default, clap::Args)]
pub struct StaffFlags {
    #[arg(long)]
    name: Option<String>,
    /// Their WhatsApp number, as typed («600 12 34 56», «+34 600…»).
    #[arg(long)]
    wa_id: Option<String>,
    /// Told when a customer asks for a person (`true`/`false`).
    #[arg(long)]
    notify_handoffs: Option<bool>,
    /// Their own hours: `monday 9:00-14:00 16:00-19:00; friday 9:00-14:00`, or JSON.
    #[arg(long)]
    hours: Option<String>,
    #[arg(long)]
    works_holidays: Option<bool>,
    /// How long one visit with them lasts.
    #[arg(long)]
    visit_minutes: Option<u32>,
    /// Cities or zones they show listings in: `Valencia;Ruzafa`.
    #[arg(long)]
    zones: Option<String>,
    /// Their calendar's iCalendar address (busy times block visits); empty removes it.
    #[arg(long)]
    calendar_url: Option<String>,
}

impl StaffFlags {
    fn item(&self) -> Map<String, Value> {
        let mut item = Map::new();
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                item.insert(key.to_owned(), value);
            }
        };
        put("name", self.name.clone().map(Value::from));
        put("wa_id", self.wa_id.clone().map(Value::from));
        put("notify_handoffs", self.notify_handoffs.map(Value::from));
        put("hours", self.hours.clone().map(Value::from));
        put("works_holidays", self.works_holidays.map(Value::from));
        put("visit_minutes", self.visit_minutes.map(Value::from));
        put("zones", self.zones.clone().map(Value::from));
        put("calendar_url", self.calendar_url.clone().map(Value::from));
        item
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum StaffCommand {
    /// Add a member (an id like A-07 is made unless `--id` gives one).
    Add {
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        fields: StaffFlags,
    },
    /// The agency's staff, disabled ones marked.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Change the fields given.
    Update {
        id: String,
        #[command(flatten)]
        fields: StaffFlags,
        /// Replace the secret of their visits' feed (`/calendar/{token}.ics`): the old
        /// address stops working.
        #[arg(long)]
        new_calendar_token: bool,
        /// Enable a disabled member again.
        #[arg(long)]
        enable: bool,
    },
    /// Take a member out of handoffs and visits; their record and history stay.
    Disable { id: String },
    /// Add many from a CSV (a header of field names) or JSON file, checked whole first.
    Import { file: PathBuf },
}

#[derive(Debug, clap::Args)]
pub struct OwnersArgs {
    #[command(subcommand)]
    pub command: OwnersCommand,
}

#[derive(Debug, Default, clap::Args)]
pub struct OwnerFlags {
    #[arg(long)]
    name: Option<String>,
    #[arg(long)]
    wa_id: Option<String>,
    /// The staff member who looks after them (A-…); empty removes it.
    #[arg(long)]
    agent_id: Option<String>,
    /// Their listings, the whole list: `P-1001;P-1002`.
    #[arg(long)]
    listings: Option<String>,
}

impl OwnerFlags {
    fn item(&self) -> Map<String, Value> {
        let mut item = Map::new();
        for (key, value) in [
            ("name", &self.name),
            ("wa_id", &self.wa_id),
            ("agent_id", &self.agent_id),
            ("listings", &self.listings),
        ] {
            if let Some(value) = value {
                item.insert(key.to_owned(), Value::from(value.clone()));
            }
        }
        item
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum OwnersCommand {
    /// Add an owner (an id like O-07 is made unless `--id` gives one).
    Add {
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        fields: OwnerFlags,
    },
    /// The owners with their listings.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Change the fields given.
    Update {
        id: String,
        #[command(flatten)]
        fields: OwnerFlags,
    },
    /// Add many from a CSV or JSON file, checked whole first.
    Import { file: PathBuf },
}

async fn open(config: &Config) -> anyhow::Result<std::sync::Arc<dyn RealEstateStore>> {
    let pool = open_pool(config).await?;
    let store = open_realestate(config, pool.as_ref())
        .await
        .context("cannot open the real-estate store")?;
    if config.mongodb.is_none() {
        eprintln!(
            "warning: no MONGODB_URI: the in-memory store forgets this when the command exits"
        );
    }
    Ok(store)
}

fn writing(config: &Config) -> Writing {
    Writing {
        region: config.phone_region,
        now: Utc::now(),
    }
}

fn read_file(file: &PathBuf) -> anyhow::Result<Vec<Map<String, Value>>> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    let format = FileFormat::guess(&file.to_string_lossy(), &text);
    people::parse(&text, format)
        .with_context(|| format!("in {}; nothing was written", file.display()))
}

pub async fn run_staff(args: StaffArgs, config: Config) -> anyhow::Result<()> {
    let store = open(&config).await?;
    let store = store.as_ref();
    let writing = writing(&config);
    match args.command {
        StaffCommand::Add { id, fields } => {
            let mut item = fields.item();
            if let Some(id) = id {
                item.insert("id".to_owned(), json!(id));
            }
            let added = people::add_staff(store, vec![item], writing)
                .await
                .context("nothing was written")?;
            println!("added {}", line(&added[0]));
        }
        StaffCommand::Import { file } => {
            let added = people::add_staff(store, read_file(&file)?, writing)
                .await
                .with_context(|| format!("in {}; nothing was written", file.display()))?;
            println!("{} added", added.len());
            for member in &added {
                println!("  {}", line(member));
            }
        }
        StaffCommand::List { json } => {
            let staff = store.staff().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&staff)?);
            } else if staff.is_empty() {
                println!("no staff yet: `zaguan staff add --name … --wa-id …`");
            } else {
                let calendars = store.calendars().await?;
                for member in &staff {
                    let mut text = line(member);
                    // Whether their own calendar reads, and since when it does not.
                    if let Some(copy) = calendars.iter().find(|c| c.staff_id == member.id) {
                        match (&copy.failing_since, &copy.error) {
                            (Some(since), Some(error)) => text.push_str(&format!(
                                " (not read since {}: {error})",
                                since.format("%Y-%m-%d %H:%M UTC")
                            )),
                            _ => {
                                if let Some(at) = copy.read_at {
                                    text.push_str(&format!(
                                        " (read {})",
                                        at.format("%Y-%m-%d %H:%M UTC")
                                    ));
                                }
                            }
                        }
                    }
                    println!("{text}");
                }
            }
        }
        StaffCommand::Update {
            id,
            fields,
            new_calendar_token,
            enable,
        } => {
            let mut item = fields.item();
            if enable {
                item.insert("disabled".to_owned(), json!(false));
            }
            let member = people::update_staff(store, &id, item, new_calendar_token, writing)
                .await
                .context("nothing was written")?;
            println!("updated {}", line(&member));
            if new_calendar_token {
                println!(
                    "their visits' feed is now /calendar/{}.ics",
                    member.calendar_token.as_deref().unwrap_or_default()
                );
            }
        }
        StaffCommand::Disable { id } => {
            let member = people::disable_staff(store, &id, writing.now).await?;
            println!("disabled {}", line(&member));
        }
    }
    Ok(())
}

/// `A-01  Lucía Ferrer  …3456  handoffs  Valencia, Ruzafa  calendar` — numbers masked, as in
/// logs.
fn line(member: &StaffMember) -> String {
    let mut parts = vec![member.id.clone(), member.name.clone()];
    parts.push(
        member
            .wa_id
            .as_ref()
            .map_or_else(|| "no number".to_owned(), |w| w.masked()),
    );
    if member.notify_handoffs {
        parts.push("handoffs".to_owned());
    }
    if !member.zones.is_empty() {
        parts.push(member.zones.join(", "));
    }
    if let Some(minutes) = member.visit_minutes {
        parts.push(format!("{minutes} min visits"));
    }
    if member.calendar_url.is_some() {
        parts.push("calendar".to_owned());
    }
    if let Some(at) = member.disabled_at {
        parts.push(format!("disabled {}", at.format("%Y-%m-%d")));
    }
    parts.join("  ")
}

fn owner_line(view: &OwnerView) -> String {
    let owner = &view.owner;
    let mut parts = vec![
        owner.id.clone(),
        owner.name.clone(),
        owner
            .wa_id
            .as_ref()
            .map_or_else(|| "no number".to_owned(), |w| w.masked()),
    ];
    if let Some(agent) = &owner.agent_id {
        parts.push(format!("agent {agent}"));
    }
    if !view.listings.is_empty() {
        parts.push(view.listings.join(", "));
    }
    parts.join("  ")
}

pub async fn run_owners(args: OwnersArgs, config: Config) -> anyhow::Result<()> {
    let store = open(&config).await?;
    let store = store.as_ref();
    let writing = writing(&config);
    match args.command {
        OwnersCommand::Add { id, fields } => {
            let mut item = fields.item();
            if let Some(id) = id {
                item.insert("id".to_owned(), json!(id));
            }
            let added = people::add_owners(store, vec![item], writing)
                .await
                .context("nothing was written")?;
            println!("added {}", owner_line(&added[0]));
        }
        OwnersCommand::Import { file } => {
            let added = people::add_owners(store, read_file(&file)?, writing)
                .await
                .with_context(|| format!("in {}; nothing was written", file.display()))?;
            println!("{} added", added.len());
            for owner in &added {
                println!("  {}", owner_line(owner));
            }
        }
        OwnersCommand::List { json } => {
            let owners = people::owners(store).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&owners)?);
            } else if owners.is_empty() {
                println!("no owners yet: `zaguan owners add --name … --wa-id …`");
            } else {
                for owner in &owners {
                    println!("{}", owner_line(owner));
                }
            }
        }
        OwnersCommand::Update { id, fields } => {
            let owner = people::update_owner(store, &id, fields.item(), writing)
                .await
                .context("nothing was written")?;
            println!("updated {}", owner_line(&owner));
        }
    }
    Ok(())
}
