//! `zaguan appointments list|outcome ID done|no-show` and `zaguan offers list|answer ID
//! accept|reject|counter AMOUNT`: what happened after the bot booked a visit or took an offer,
//! recorded as the agent's and the owner's buttons record it (first writer wins; the customer
//! hears of it from the running service's follow-up loop).

use anyhow::Context as _;
use chrono::Utc;

use crate::admin::follow_ups;
use crate::config::Config;
use crate::realestate::follow_up::lists::{
    AppointmentView, OfferView, appointment_json, appointments, offer_json, offers,
};
use crate::startup::{open_pool, open_realestate, open_store};

#[derive(Debug, clap::Args)]
pub struct AppointmentsArgs {
    #[command(subcommand)]
    pub command: AppointmentsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum AppointmentsCommand {
    /// Visits waiting for an outcome, today's and the coming ones (`--view` one of them).
    List {
        /// `waiting`, `today` or `upcoming`.
        #[arg(long)]
        view: Option<String>,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Records what became of a visit: `done`, `no-show` or `cancelled`.
    Outcome { id: String, outcome: String },
}

#[derive(Debug, clap::Args)]
pub struct OffersArgs {
    #[command(subcommand)]
    pub command: OffersCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum OffersCommand {
    /// The offers of the last year: open ones, then answered ones (`--view` one of them).
    List {
        /// `open` or `answered`.
        #[arg(long)]
        view: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Answers an offer: `accept`, `reject` or `counter AMOUNT`.
    Answer {
        id: String,
        answer: String,
        amount: Option<String>,
    },
}

pub async fn run_appointments(args: AppointmentsArgs, config: Config) -> anyhow::Result<()> {
    let pool = open_pool(&config).await?;
    let realestate = open_realestate(&config, pool.as_ref()).await?;
    let now = Utc::now();
    match args.command {
        AppointmentsCommand::List { view, json } => {
            let views = match view.as_deref() {
                None => AppointmentView::ALL.to_vec(),
                Some(word) => vec![
                    AppointmentView::parse(word)
                        .with_context(|| format!("`{word}` is not waiting, today or upcoming"))?,
                ],
            };
            let tz = config.engine.timezone;
            let mut shown = 0;
            for view in views {
                let listed = appointments(realestate.as_ref(), view, now, tz)
                    .await
                    .context("reading appointments")?;
                shown += listed.len();
                for appointment in &listed {
                    if json {
                        println!("{}", appointment_json(appointment, view));
                    } else {
                        println!(
                            "{:<8}  {}  {:<9}  {:<28}  {:<8}  +{}  {}",
                            view.as_str(),
                            appointment
                                .starts_at
                                .with_timezone(&tz)
                                .format("%Y-%m-%d %H:%M"),
                            appointment.status.as_str(),
                            appointment.id,
                            appointment.property_id,
                            appointment.wa_id.as_str(),
                            appointment.follow_up.agent.as_deref().unwrap_or("-"),
                        );
                    }
                }
            }
            if shown == 0 && !json {
                println!("no appointments");
            }
            Ok(())
        }
        AppointmentsCommand::Outcome { id, outcome } => {
            let store = open_store(pool.as_ref());
            let appointment = follow_ups::outcome(
                realestate.as_ref(),
                store.as_ref(),
                &id,
                &outcome,
                "cli",
                now,
            )
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}: {}", appointment.id, appointment.status.as_str());
            Ok(())
        }
    }
}

pub async fn run_offers(args: OffersArgs, config: Config) -> anyhow::Result<()> {
    let pool = open_pool(&config).await?;
    let realestate = open_realestate(&config, pool.as_ref()).await?;
    let now = Utc::now();
    match args.command {
        OffersCommand::List { view, json } => {
            let views = match view.as_deref() {
                None => vec![OfferView::Open, OfferView::Answered],
                Some(word) => vec![
                    OfferView::parse(word)
                        .with_context(|| format!("`{word}` is not open or answered"))?,
                ],
            };
            let mut shown = 0;
            for view in views {
                let listed = offers(realestate.as_ref(), view, now)
                    .await
                    .context("reading offers")?;
                shown += listed.len();
                for offer in &listed {
                    if json {
                        println!("{}", offer_json(offer));
                    } else {
                        println!(
                            "{:<8}  {}  {:<9}  {:<22}  {:<8}  {:>12} {}  +{}{}",
                            view.as_str(),
                            offer.created_at.format("%Y-%m-%d %H:%M"),
                            offer.status.as_str(),
                            offer.id,
                            offer.property_id,
                            offer.amount,
                            offer.currency,
                            offer.wa_id.as_str(),
                            offer
                                .answer
                                .counter_amount
                                .map_or_else(String::new, |c| format!("  counter {c}"))
                        );
                    }
                }
            }
            if shown == 0 && !json {
                println!("no offers");
            }
            Ok(())
        }
        OffersCommand::Answer { id, answer, amount } => {
            let store = open_store(pool.as_ref());
            let offer = follow_ups::answer(
                realestate.as_ref(),
                store.as_ref(),
                &id,
                &answer,
                amount.as_deref(),
                "cli",
                now,
            )
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}: {}", offer.id, offer.status.as_str());
            Ok(())
        }
    }
}
