//! Leads from the portals (Idealista, Fotocasa, Habitaclia, pisos.com) and the agency's CRM,
//! answered on WhatsApp within a minute.
//!
//! A lead comes in as a CRM's JSON push (`POST /leads`, [`input`]) or as the portal's e-mail
//! forwarded raw (`POST /leads/email`, [`email`]). Either way it becomes one [`PortalLead`],
//! stored before the answer under an id derived from what makes two pushes the same lead, so a
//! lead pushed twice, to any instance, is stored and contacted once. A lead with a number
//! WhatsApp can have gets the `lead_first_contact` template about the listing it asked about,
//! through the send governor (never to an opted-out contact); one without is stored with why.
//! [`sweep`] looks after what happens next: a first contact a crash left unsent, a number
//! WhatsApp refused (the staff on duty are told, with the e-mail to write to), and the
//! customer's answer.

pub mod email;
pub mod http;
pub mod input;
pub mod sweep;

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::domain::WaId;
use crate::domain::phone::{PhoneRegion, wa_id_of};
use crate::engine::Engine;
use crate::engine::turn::{Notified, Outreach};
use crate::realestate::RealEstateStore;
use crate::store::{Event, LeadStatus, NewMessage, PortalLead, Store, StoreError, StoreResult};
use crate::templates::{Purpose, TemplateValue};

pub use input::Incoming;

/// The `agent` the first contact is written to the history as.
pub const FIRST_CONTACT_AGENT: &str = "lead_first_contact";
pub use crate::domain::PORTAL_AGENT;

/// How leads come in and go out (`ZAGUAN_LEADS_TOKEN` and the number messages go from).
#[derive(Debug, Clone)]
pub struct LeadSettings {
    /// The bearer token pushes carry.
    pub token: secrecy::SecretString,
    /// The business number first contacts go from; without it leads are stored, not contacted.
    pub phone_number_id: Option<String>,
    /// Where a number written without a country code is.
    pub region: PhoneRegion,
}

/// What became of a lead that came in.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// The lead as stored (the earlier one when it came before).
    pub lead: PortalLead,
    /// Whether it is new: `false` for the same lead pushed again.
    pub new: bool,
}

/// Stores leads and contacts them.
pub struct Intake {
    store: Arc<dyn Store>,
    realestate: Option<Arc<dyn RealEstateStore>>,
    engine: Arc<Engine>,
    settings: LeadSettings,
}

impl Intake {
    pub fn new(
        store: Arc<dyn Store>,
        realestate: Option<Arc<dyn RealEstateStore>>,
        engine: Arc<Engine>,
        settings: LeadSettings,
    ) -> Self {
        Self {
            store,
            realestate,
            engine,
            settings,
        }
    }

    pub fn settings(&self) -> &LeadSettings {
        &self.settings
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Makes `incoming` a lead and stores it: its number as a WhatsApp id (or why it has
    /// none), the agency's listing it names, its language. `unreadable`: an e-mail no reader
    /// understood, kept whole (`raw_email`) with why.
    pub async fn receive(
        &self,
        incoming: Incoming,
        raw_email: Option<String>,
        unreadable: Option<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Received> {
        let lead = self.lead_of(incoming, raw_email, unreadable, now).await?;
        let (lead, new) = self.store.insert_lead(&lead).await?;
        if new {
            let outcome = lead.status.as_str();
            counted(&lead.source, outcome);
            tracing::info!(lead = %lead.id, source = %lead.source, status = outcome, listing = ?lead.listing_id, "lead received");
            if let Some(wa_id) = &lead.wa_id {
                // The contact's source first: every event of theirs names it, this one too.
                self.store
                    .note_portal_contact(wa_id, lead.name.as_deref(), &lead.source)
                    .await?;
                let event = crate::store::BusinessEvent::LeadReceived {
                    lead_id: lead.id.clone(),
                    source: lead.source.clone(),
                    listing_id: lead.listing_id.clone().or(lead.listing_ref.clone()),
                    status: outcome.to_owned(),
                };
                self.store
                    .insert_events(&[Event::keyed(
                        wa_id,
                        event,
                        now,
                        &format!("lead:{}", lead.id),
                    )])
                    .await?;
            }
        } else {
            counted(&lead.source, "duplicate");
            tracing::info!(lead = %lead.id, source = %lead.source, "lead pushed again: stored once");
        }
        Ok(Received { lead, new })
    }

    async fn lead_of(
        &self,
        incoming: Incoming,
        raw_email: Option<String>,
        unreadable: Option<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<PortalLead> {
        let (wa_id, no_number) = match incoming.phone.as_deref() {
            None => (None, Some("no phone number".to_owned())),
            Some(phone) => match wa_id_of(phone, self.settings.region) {
                Ok(wa_id) => (Some(wa_id), None),
                Err(why) => (None, Some(format!("phone: {why}"))),
            },
        };
        let listing_id = match (&incoming.listing_ref, &self.realestate) {
            (Some(reference), Some(realestate)) => listing_named(realestate.as_ref(), reference)
                .await
                .map_err(|e| StoreError::Unexpected(anyhow::anyhow!(e)))?,
            _ => None,
        };
        let lang = incoming.lang.clone().or_else(|| {
            incoming
                .message
                .as_deref()
                .and_then(|m| self.engine.languages().detect(m))
                .map(str::to_owned)
        });
        let (status, why) = match (unreadable, no_number) {
            (Some(why), _) => (LeadStatus::Unreadable, Some(why)),
            (None, Some(why)) => (LeadStatus::Uncontactable, Some(why)),
            (None, None) => (LeadStatus::New, None),
        };
        let mut lead = PortalLead {
            id: String::new(),
            source: incoming.source,
            portal_lead_id: incoming.lead_id,
            name: incoming.name,
            phone: incoming.phone,
            wa_id,
            email: incoming.email,
            listing_ref: incoming.listing_ref,
            listing_id,
            message: incoming.message,
            lang,
            received_at: incoming.received_at.unwrap_or(now).min(now),
            stored_at: now,
            status,
            why,
            first_contact_at: None,
            answered_at: None,
            raw_email,
        };
        lead.id = lead.derived_id();
        Ok(lead)
    }

    /// The first contact of a new lead, once in any instance: the lead is claimed (new →
    /// contacted), the portal's message is written to the conversation's history (the
    /// customer's own words, with the listing), and the template queued through the governor.
    /// A lead another instance claimed, or one that cannot be contacted, is left as it is.
    pub async fn contact(&self, lead: &PortalLead, now: DateTime<Utc>) -> StoreResult<LeadStatus> {
        let (Some(wa_id), Some(_)) = (&lead.wa_id, &self.settings.phone_number_id) else {
            return Ok(lead.status);
        };
        if lead.status != LeadStatus::New {
            return Ok(lead.status);
        }
        let mut claimed = lead.clone();
        claimed.status = LeadStatus::Contacted;
        claimed.first_contact_at = Some(now);
        if !self.store.update_lead(&claimed, LeadStatus::New).await? {
            return Ok(self
                .store
                .lead(&lead.id)
                .await?
                .map_or(lead.status, |l| l.status));
        }
        self.prepare_conversation(wa_id, &claimed, now).await?;
        self.send_first_contact(wa_id, &claimed, now).await
    }

    /// The lead's language and the portal's message in the history, before the first
    /// message is written.
    async fn prepare_conversation(
        &self,
        wa_id: &WaId,
        lead: &PortalLead,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let conversation = self.store.conversation(wa_id).await?;
        if let Some(lang) = &lead.lang
            && conversation.as_ref().is_none_or(|c| c.lang.is_none())
        {
            self.store.set_conversation_lang(wa_id, lang).await?;
        }
        let listing = lead.listing_id.as_ref().or(lead.listing_ref.as_ref());
        let said = match (listing, &lead.message) {
            (Some(listing), Some(message)) => {
                format!("[{} · {listing}] {message}", portal_name(&lead.source))
            }
            (Some(listing), None) => format!("[{} · {listing}]", portal_name(&lead.source)),
            (None, Some(message)) => format!("[{}] {message}", portal_name(&lead.source)),
            (None, None) => return Ok(()),
        };
        // The customer's own words, written on the portal: what the assistants read first.
        self.store
            .append_message(NewMessage {
                wa_id: wa_id.clone(),
                role: crate::domain::MessageRole::Human,
                content: said,
                agent: Some(PORTAL_AGENT.into()),
                tool_calls: Vec::new(),
                tool_call_id: None,
                wamids: Vec::new(),
                attachments: Vec::new(),
                at: lead.received_at.min(now),
            })
            .await?;
        Ok(())
    }

    /// Queues the lead's first message (written to the history as [`FIRST_CONTACT_AGENT`]);
    /// the same lead's message is queued once however often this runs.
    pub(crate) async fn send_first_contact(
        &self,
        wa_id: &WaId,
        lead: &PortalLead,
        now: DateTime<Utc>,
    ) -> StoreResult<LeadStatus> {
        let Some(phone_number_id) = &self.settings.phone_number_id else {
            return Ok(lead.status);
        };
        let business = self.engine.business_name();
        let property = self.property_label(lead).await;
        let portal = portal_name(&lead.source);
        let name = lead.name.clone().unwrap_or_default();
        let greeting = if name.is_empty() {
            "Hola".to_owned()
        } else {
            format!("Hola, {}", first_name(&name))
        };
        let text = format!(
            "{greeting}: soy el asistente de {business}. Hemos recibido tu consulta en {portal} \
             sobre {property}. ¿Te cuento más o prefieres que busquemos un hueco para visitarlo?"
        );
        let values = [
            ("name", TemplateValue::from(first_name(&name))),
            ("property", TemplateValue::from(property.clone())),
            ("business", TemplateValue::from(business.clone())),
            ("portal", TemplateValue::from(portal.to_owned())),
        ];
        let (step, step_at) = contact_step(lead);
        let outreach = Outreach {
            to: wa_id,
            text: &text,
            agent: FIRST_CONTACT_AGENT,
            phone_number_id,
            purpose: Purpose::LeadFirstContact,
            values: &values,
            step: &step,
            step_at,
            buttons: &[],
        };
        let notified = self
            .engine
            .notify(outreach, now)
            .await
            .map_err(|e| StoreError::Unexpected(anyhow::anyhow!("{e}")))?;
        let outcome = match notified {
            Notified::Queued(_) | Notified::Already => {
                counted(&lead.source, "contacted");
                tracing::info!(lead = %lead.id, conversation.id = %wa_id.masked(), "lead contacted");
                LeadStatus::Contacted
            }
            Notified::Skipped(skip) => {
                let mut skipped = lead.clone();
                skipped.status = LeadStatus::Skipped;
                skipped.why = Some(skip.as_str().to_owned());
                self.store
                    .update_lead(&skipped, LeadStatus::Contacted)
                    .await?;
                counted(&lead.source, "skipped");
                tracing::info!(lead = %lead.id, reason = skip.as_str(), "lead not contacted");
                LeadStatus::Skipped
            }
        };
        Ok(outcome)
    }

    /// The listing as the template names it: the agency's id and title, or the portal's
    /// reference as the portal gave it.
    async fn property_label(&self, lead: &PortalLead) -> String {
        if let (Some(id), Some(realestate)) = (&lead.listing_id, &self.realestate)
            && let Ok(Some(property)) = realestate.property(id).await
        {
            return format!("{} ({})", property.id, property.title);
        }
        lead.listing_ref
            .clone()
            .unwrap_or_else(|| "el inmueble que consultaste".to_owned())
    }
}

/// The step a lead's first message is queued under: its listing and day, so that one person
/// who asks about one listing through two portals, or a portal and the CRM, on one day is
/// written to once (the message's id also names the number).
pub(crate) fn contact_step(lead: &PortalLead) -> (String, DateTime<Utc>) {
    let day = lead.received_at.date_naive();
    let listing = lead
        .listing_id
        .as_ref()
        .or(lead.listing_ref.as_ref())
        .map_or("-", String::as_str);
    (
        format!("lead:{listing}:{day}"),
        day.and_time(chrono::NaiveTime::MIN).and_utc(),
    )
}

/// The agency's listing `reference` names: its id as written («P-1001», «p1001»), or one whose
/// feed id it is.
async fn listing_named(
    realestate: &dyn RealEstateStore,
    reference: &str,
) -> anyhow::Result<Option<String>> {
    let reference = reference.trim();
    let mut candidates = vec![reference.to_owned(), reference.to_uppercase()];
    let compact: String = reference
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_uppercase();
    if let Some(digits) = compact.strip_prefix('P')
        && !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
    {
        candidates.push(format!("P-{digits}"));
    }
    for candidate in candidates {
        if let Some(property) = realestate.property(&candidate).await? {
            return Ok(Some(property.id));
        }
    }
    Ok(None)
}

/// Counts a lead in `zaguan_leads_total`. The label is one of the portals read here, or
/// `other`: a source is whatever a push or an e-mail's sender says, and a label per sender
/// would grow the metric without bound.
pub(crate) fn counted(source: &str, outcome: &'static str) {
    let label = match source {
        "idealista" | "fotocasa" | "habitaclia" | "pisos.com" | "unknown" => source.to_owned(),
        _ => "other".to_owned(),
    };
    metrics::counter!("zaguan_leads_total", "source" => label, "outcome" => outcome).increment(1);
}

/// The portal as customers know it.
pub fn portal_name(source: &str) -> &str {
    match source {
        "idealista" => "Idealista",
        "fotocasa" => "Fotocasa",
        "habitaclia" => "Habitaclia",
        "pisos.com" | "pisoscom" => "pisos.com",
        other => other,
    }
}

/// «Marta» of «Marta Giménez Soler».
fn first_name(name: &str) -> String {
    name.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}
