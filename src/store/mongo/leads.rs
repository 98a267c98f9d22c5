//! MongoStore's `leads`: one document per portal lead, its `_id` derived from what makes two
//! pushes one lead, so the insert itself deduplicates across instances.

use async_trait::async_trait;
use bson::{Document, doc};

use crate::domain::WaId;
use crate::store::mongo::codec::{Fields, date, opt_date, opt_str};
use crate::store::pool::{Find, Lane};
use crate::store::{LeadFilter, LeadStatus, LeadStore, MongoStore, PortalLead, StoreResult};

fn lead_doc(lead: &PortalLead) -> Document {
    doc! {
        "_id": &lead.id,
        "source": &lead.source,
        "portal_lead_id": opt_str(&lead.portal_lead_id),
        "name": opt_str(&lead.name),
        "phone": opt_str(&lead.phone),
        "wa_id": opt_str(&lead.wa_id.as_ref().map(|w| w.as_str().to_owned())),
        "email": opt_str(&lead.email),
        "listing_ref": opt_str(&lead.listing_ref),
        "listing_id": opt_str(&lead.listing_id),
        "message": opt_str(&lead.message),
        "lang": opt_str(&lead.lang),
        "received_at": date(lead.received_at),
        "stored_at": date(lead.stored_at),
        "status": lead.status.as_str(),
        "why": opt_str(&lead.why),
        "first_contact_at": opt_date(lead.first_contact_at),
        "answered_at": opt_date(lead.answered_at),
        "raw_email": opt_str(&lead.raw_email),
    }
}

fn lead_of(d: &Document) -> StoreResult<PortalLead> {
    let f = Fields(d);
    let received_at = f
        .date("received_at")
        .ok_or_else(|| anyhow::anyhow!("lead {:?} has no received_at", d.get("_id")))?;
    Ok(PortalLead {
        id: f.required_str("_id")?,
        source: f.str("source").unwrap_or_default(),
        portal_lead_id: f.str("portal_lead_id"),
        name: f.str("name"),
        phone: f.str("phone"),
        wa_id: f.str("wa_id").and_then(|w| WaId::parse(&w).ok()),
        email: f.str("email"),
        listing_ref: f.str("listing_ref"),
        listing_id: f.str("listing_id"),
        message: f.str("message"),
        lang: f.str("lang"),
        received_at,
        stored_at: f.date("stored_at").unwrap_or(received_at),
        status: f
            .str("status")
            .and_then(|s| LeadStatus::parse(&s))
            .unwrap_or(LeadStatus::New),
        why: f.str("why"),
        first_contact_at: f.date("first_contact_at"),
        answered_at: f.date("answered_at"),
        raw_email: f.str("raw_email"),
    })
}

#[async_trait]
impl LeadStore for MongoStore {
    async fn insert_lead(&self, lead: &PortalLead) -> StoreResult<(PortalLead, bool)> {
        if self
            .pool
            .insert_unique(Lane::Ingress, "leads", lead_doc(lead))
            .await?
        {
            return Ok((lead.clone(), true));
        }
        let stored = self.lead(&lead.id).await?.ok_or_else(|| {
            anyhow::anyhow!("lead {} refused as a duplicate and not found", lead.id)
        })?;
        Ok((stored, false))
    }

    async fn lead(&self, id: &str) -> StoreResult<Option<PortalLead>> {
        self.pool
            .find_one(Lane::Work, "leads", doc! {"_id": id}, Find::default())
            .await?
            .as_ref()
            .map(lead_of)
            .transpose()
    }

    async fn update_lead(&self, lead: &PortalLead, from: LeadStatus) -> StoreResult<bool> {
        let mut fields = lead_doc(lead);
        fields.remove("_id");
        let result = self
            .pool
            .update_one(
                Lane::Work,
                "leads",
                doc! {"_id": &lead.id, "status": from.as_str()},
                doc! {"$set": fields},
            )
            .await?;
        Ok(result.matched_count == 1)
    }

    async fn leads(&self, filter: &LeadFilter) -> StoreResult<Vec<PortalLead>> {
        let mut query = Document::new();
        if let Some(status) = filter.status {
            query.insert("status", status.as_str());
        }
        if let Some(wa_id) = &filter.wa_id {
            query.insert("wa_id", wa_id.as_str());
        }
        if let Some(since) = filter.since {
            query.insert("received_at", doc! {"$gte": date(since)});
        }
        let docs = self
            .pool
            .find(
                Lane::Work,
                "leads",
                query,
                Find::sorted(
                    doc! {"received_at": if filter.oldest_first { 1 } else { -1 }, "_id": 1},
                )
                .limit(filter.limit),
            )
            .await?;
        docs.iter().map(lead_of).collect()
    }
}
