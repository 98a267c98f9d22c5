//! What happens to a lead after it is stored, looked at every few seconds by every instance
//! (each step is conditional, so two instances never do one twice):
//! - a new lead not contacted (its instance crashed after storing it) is contacted;
//! - a lead claimed but whose message was never queued (a crash in between) gets it queued;
//! - a first contact WhatsApp refused for the number (131026: not on WhatsApp) marks the lead
//!   unreachable and asks the staff on duty to write to the lead's e-mail;
//! - a customer who wrote back marks the lead answered.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{FIRST_CONTACT_AGENT, Intake, portal_name};
use crate::domain::{OutboxId, WaId};
use crate::engine::turn::Outreach;
use crate::runtime::periodic::{PeriodicJob, spawn_every};
use crate::store::{LeadFilter, LeadStatus, OutboxStatus, PortalLead, StoreError};
use crate::templates::Purpose;

/// How often the sweep looks.
pub const EVERY: Duration = Duration::from_secs(10);
/// Leads older than this are left as they are.
const HORIZON: chrono::Duration = chrono::Duration::days(7);
/// A lead stored this long ago and still new was missed by its instance.
const MISSED_AFTER: chrono::Duration = chrono::Duration::seconds(5);
/// A lead claimed this long ago with no message queued lost it to a crash.
const LOST_AFTER: chrono::Duration = chrono::Duration::seconds(60);
/// Leads looked at per round, per state.
const BATCH: usize = 200;
/// WhatsApp's "message undeliverable": the number is not on WhatsApp.
const NOT_ON_WHATSAPP: i64 = 131026;

/// The id of the lead's first message: the step [`Intake::send_first_contact`] queues it under.
pub fn first_contact_id(lead: &PortalLead, wa_id: &WaId) -> OutboxId {
    let (step, step_at) = super::contact_step(lead);
    Outreach {
        to: wa_id,
        text: "",
        agent: FIRST_CONTACT_AGENT,
        phone_number_id: "",
        purpose: Purpose::LeadFirstContact,
        values: &[],
        step: &step,
        step_at,
        buttons: &[],
    }
    .id()
}

pub struct LeadSweep {
    intake: Arc<Intake>,
}

impl LeadSweep {
    pub fn new(intake: Arc<Intake>) -> Self {
        Self { intake }
    }

    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        spawn_every(self, EVERY)
    }

    async fn missed(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let store = self.intake.store();
        let mut done = 0;
        for lead in store
            .leads(&LeadFilter {
                status: Some(LeadStatus::New),
                since: Some(now - HORIZON),
                limit: BATCH,
                ..LeadFilter::default()
            })
            .await?
        {
            if lead.stored_at <= now - MISSED_AFTER
                && self.intake.contact(&lead, now).await? != LeadStatus::New
            {
                done += 1;
            }
        }
        Ok(done)
    }

    async fn contacted(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let store = self.intake.store();
        let mut done = 0;
        for lead in store
            .leads(&LeadFilter {
                status: Some(LeadStatus::Contacted),
                since: Some(now - HORIZON),
                limit: BATCH,
                ..LeadFilter::default()
            })
            .await?
        {
            let Some(wa_id) = lead.wa_id.clone() else {
                continue;
            };
            let contacted_at = lead.first_contact_at.unwrap_or(lead.stored_at);
            match store.outbox_entry(&first_contact_id(&lead, &wa_id)).await? {
                None if contacted_at <= now - LOST_AFTER => {
                    self.intake.send_first_contact(&wa_id, &lead, now).await?;
                    done += 1;
                    continue;
                }
                Some(entry)
                    if entry.status == OutboxStatus::Failed
                        && entry.error.as_ref().and_then(|e| e.code) == Some(NOT_ON_WHATSAPP) =>
                {
                    done += usize::from(self.unreachable(&lead, &wa_id, now).await?);
                    continue;
                }
                _ => {}
            }
            let answered = store
                .conversation(&wa_id)
                .await?
                .and_then(|c| c.last_inbound_at)
                .filter(|at| *at > contacted_at);
            if let Some(at) = answered {
                let mut lead = lead.clone();
                lead.status = LeadStatus::Answered;
                lead.answered_at = Some(at);
                if store.update_lead(&lead, LeadStatus::Contacted).await? {
                    super::counted(&lead.source, "answered");
                    tracing::info!(lead = %lead.id, "lead answered");
                    done += 1;
                }
            }
        }
        Ok(done)
    }

    /// The number is not on WhatsApp: the lead is marked, and the staff on duty are asked to
    /// write to the e-mail (the handoff queue shows it until someone takes it).
    async fn unreachable(
        &self,
        lead: &PortalLead,
        wa_id: &WaId,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let listing = lead
            .listing_id
            .as_ref()
            .or(lead.listing_ref.as_ref())
            .map_or(String::new(), |l| format!(" sobre {l}"));
        let write_to = lead.email.as_ref().map_or_else(
            || "no dejó e-mail; llámale".to_owned(),
            |e| format!("escríbele a {e}"),
        );
        let reason = format!(
            "Lead de {}{listing}: su número no tiene WhatsApp; {write_to}",
            portal_name(&lead.source)
        );
        // Asked first, under the lead's key (two instances ask once), then marked: a lead
        // marked unreachable has its staff told.
        let engine = &self.intake.engine;
        let business = engine.prompts().business().clone();
        engine
            .handoffs()
            .request(
                wa_id,
                &reason,
                &format!("lead-unreachable:{}", lead.id),
                &business,
                now,
            )
            .await?;
        let mut marked = lead.clone();
        marked.status = LeadStatus::Unreachable;
        marked.why = Some(format!("the number is not on WhatsApp ({NOT_ON_WHATSAPP})"));
        if !self
            .intake
            .store()
            .update_lead(&marked, LeadStatus::Contacted)
            .await?
        {
            return Ok(false);
        }
        super::counted(&lead.source, "unreachable");
        tracing::warn!(lead = %lead.id, "lead not on WhatsApp: the staff are asked to write to them");
        Ok(true)
    }
}

impl PeriodicJob for LeadSweep {
    const DONE: Option<&'static str> = Some("leads looked after");
    const FAILED: &'static str = "leads not looked after";
    type Error = StoreError;

    async fn round(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        Ok(self.missed(now).await? + self.contacted(now).await?)
    }
}
