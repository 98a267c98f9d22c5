//! The user's context from the agency's data ([`ContextSource`]): an owner's listings with
//! their visits and offers, a prospect's next appointments and open offers. Short lines, a
//! few of each, so a prompt grows by a few hundred tokens at most.

use crate::realestate::{AppointmentStore, OfferStore, OwnerStore, PropertyStore, VisitStore};
use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use futures::future::try_join_all;

use super::tools::text::money;

use super::{AppointmentStatus, OfferStatus, PropertyFilter, RealEstateStore};
use crate::domain::Role;
use crate::domain::Situation;
use crate::domain::WaId;
use crate::domain::phrases::weekday_es;
use crate::engine::user_info::{ContextSource, UserContext};

/// A booked hour gone by this long ago still counts as a visit to follow up.
const PAST_VISIT_WINDOW: chrono::Duration = chrono::Duration::days(60);

/// Listings shown for an owner (the newest).
const MAX_LISTINGS: usize = 8;
/// Appointments and offers shown for a prospect.
const MAX_ITEMS: usize = 3;

pub struct RealEstateContext<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
    timezone: Tz,
}

impl<S: AppointmentStore + OfferStore + OwnerStore + PropertyStore + VisitStore + ?Sized>
    RealEstateContext<S>
{
    pub fn new(store: Arc<S>, timezone: Tz) -> Self {
        Self { store, timezone }
    }

    async fn owner(&self, wa_id: &WaId) -> anyhow::Result<Option<String>> {
        let Some(owner) = self.store.owner_by_wa_id(wa_id).await? else {
            return Ok(None);
        };
        let mut listings = self
            .store
            .properties(&PropertyFilter {
                owner_id: Some(owner.id.clone()),
                ..PropertyFilter::default()
            })
            .await?;
        let total = listings.len();
        listings.sort_by(|a, b| b.listed_at.cmp(&a.listed_at).then(a.id.cmp(&b.id)));
        listings.truncate(MAX_LISTINGS);
        let activity = try_join_all(listings.iter().map(|p| async {
            let visits = self.store.visits_to(&p.id).await?;
            let offers = self.store.offers_for(&p.id).await?;
            anyhow::Ok((visits.len(), offers))
        }))
        .await?;
        let mut out = format!(
            "Propietario {} ({}), {} con nosotros:",
            owner.id,
            owner.name,
            plural(total, "inmueble", "inmuebles")
        );
        for (p, (visits, offers)) in listings.iter().zip(activity) {
            let open = offers.iter().filter(|o| is_open(o.status)).count();
            out.push_str(&format!(
                "\n- {} «{}» · {} · {} · {} ({} abiertas)",
                p.id,
                p.title,
                p.status.as_str(),
                plural(visits, "visita", "visitas"),
                plural(offers.len(), "oferta", "ofertas"),
                open
            ));
        }
        if total > listings.len() {
            out.push_str(&format!("\n- y {} más", total - listings.len()));
        }
        Ok(Some(out))
    }

    async fn prospect(&self, wa_id: &WaId, now: DateTime<Utc>) -> anyhow::Result<UserContext> {
        let (appointments, offers, visits) = tokio::try_join!(
            self.store.appointments_of(wa_id),
            self.store.offers_of(wa_id),
            self.store.visits_of(wa_id)
        )?;
        let situation = Situation {
            upcoming_appointment: appointments
                .iter()
                .any(|a| a.status == AppointmentStatus::Booked && a.starts_at > now),
            // A visit made: one recorded, one marked done, or a booked hour gone by.
            past_visit: !visits.is_empty()
                || appointments.iter().any(|a| {
                    a.status == AppointmentStatus::Done
                        || (a.status == AppointmentStatus::Booked
                            && a.starts_at <= now
                            && now - a.starts_at <= PAST_VISIT_WINDOW)
                }),
        };
        let text = self.prospect_lines(appointments, offers, now).await?;
        Ok(UserContext { text, situation })
    }

    async fn prospect_lines(
        &self,
        appointments: Vec<crate::realestate::Appointment>,
        offers: Vec<crate::realestate::Offer>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<String>> {
        let next: Vec<_> = appointments
            .into_iter()
            .filter(|a| a.status == AppointmentStatus::Booked && a.starts_at > now)
            .take(MAX_ITEMS)
            .collect();
        let open: Vec<_> = offers
            .into_iter()
            .filter(|o| is_open(o.status))
            .take(MAX_ITEMS)
            .collect();
        if next.is_empty() && open.is_empty() {
            return Ok(None);
        }
        let ids: BTreeSet<&str> = next
            .iter()
            .map(|a| a.property_id.as_str())
            .chain(open.iter().map(|o| o.property_id.as_str()))
            .collect();
        let properties = try_join_all(ids.iter().map(|id| self.store.property(id))).await?;
        let title = |id: &str| {
            properties
                .iter()
                .flatten()
                .find(|p| p.id == id)
                .map_or_else(|| id.to_owned(), |p| format!("{id} «{}»", p.title))
        };
        let mut lines = Vec::new();
        if !next.is_empty() {
            lines.push("Próximas citas:".to_owned());
            for a in &next {
                let local = a.starts_at.with_timezone(&self.timezone);
                lines.push(format!(
                    "- {} {} a las {}: visita a {} (cita {})",
                    weekday_es(chrono::Datelike::weekday(&local)),
                    local.format("%d/%m"),
                    local.format("%H:%M"),
                    title(&a.property_id),
                    a.id
                ));
            }
        }
        if !open.is_empty() {
            lines.push("Ofertas abiertas:".to_owned());
            for o in &open {
                lines.push(format!(
                    "- {} por {} · {} (oferta {})",
                    money(o.amount, &o.currency),
                    title(&o.property_id),
                    o.status.as_str(),
                    o.id
                ));
            }
        }
        Ok(Some(lines.join("\n")))
    }
}

#[async_trait]
impl<S: AppointmentStore + OfferStore + OwnerStore + PropertyStore + VisitStore + ?Sized>
    ContextSource for RealEstateContext<S>
{
    async fn describe(
        &self,
        wa_id: &WaId,
        role: Role,
        now: DateTime<Utc>,
    ) -> anyhow::Result<UserContext> {
        match role {
            // An owner's visits are the ones to their listings, not theirs: no situation.
            Role::Owner => Ok(UserContext {
                text: self.owner(wa_id).await?,
                situation: Situation::default(),
            }),
            Role::Prospect => self.prospect(wa_id, now).await,
            // Agents ask about anyone with the tools; nothing of their own to show.
            Role::Agent => Ok(UserContext::default()),
        }
    }
}

fn is_open(status: OfferStatus) -> bool {
    matches!(status, OfferStatus::Submitted | OfferStatus::Countered)
}

/// "1 visita", "3 visitas".
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::realestate::{MemoryRealEstate, demo};

    #[tokio::test]
    async fn an_owner_sees_their_listings_and_a_customer_their_visits_and_offers() {
        let tz = chrono_tz::Europe::Madrid;
        let today = Utc::now().with_timezone(&tz).date_naive();
        let set = demo::demo_set(today, tz);
        let store = Arc::new(MemoryRealEstate::new());
        demo::seed(store.as_ref(), &set).await.unwrap();
        let context = RealEstateContext::new(store.clone(), tz);
        let now = Utc::now();

        let owner = set.owners_on_whatsapp().next().unwrap();
        let text = context
            .describe(owner.wa_id.as_ref().unwrap(), Role::Owner, now)
            .await
            .unwrap()
            .text
            .unwrap();
        assert!(
            text.starts_with(&format!("Propietario {} ({})", owner.id, owner.name)),
            "{text}"
        );
        let first = set.properties_of(&owner.id).next().unwrap();
        assert!(text.contains(&first.id), "{text}");
        assert!(text.lines().count() <= MAX_LISTINGS + 2, "{text}");

        // A customer with an offer in the demo data sees it; a stranger has nothing.
        let offer = set.offers.iter().find(|o| is_open(o.status)).unwrap();
        let text = context
            .describe(&offer.wa_id, Role::Prospect, now)
            .await
            .unwrap()
            .text
            .unwrap();
        assert!(text.contains("Ofertas abiertas:"), "{text}");
        assert!(text.contains(&offer.property_id), "{text}");
        let stranger = WaId::parse("34611999999").unwrap();
        assert_eq!(
            context
                .describe(&stranger, Role::Prospect, now)
                .await
                .unwrap(),
            UserContext::default()
        );
        assert_eq!(
            context
                .describe(owner.wa_id.as_ref().unwrap(), Role::Agent, now)
                .await
                .unwrap(),
            UserContext::default()
        );

        // A visit to come, then one gone by: the situation the router reads.
        let property = &set.properties[0];
        let mut appointment = crate::realestate::Appointment {
            id: "A-situation".into(),
            property_id: property.id.clone(),
            slot_id: "S-situation".into(),
            wa_id: stranger.clone(),
            starts_at: now + chrono::Duration::days(2),
            status: AppointmentStatus::Booked,
            created_at: now,
            reminder_sent_at: None,
            moved_from: None,
            follow_up: Default::default(),
        };
        store.save_appointment(&appointment).await.unwrap();
        let situation = |at| {
            let context = &context;
            let stranger = stranger.clone();
            async move {
                context
                    .describe(&stranger, Role::Prospect, at)
                    .await
                    .unwrap()
                    .situation
            }
        };
        assert_eq!(
            situation(now).await,
            Situation {
                upcoming_appointment: true,
                past_visit: false
            }
        );
        assert_eq!(
            situation(now + chrono::Duration::days(3)).await,
            Situation {
                upcoming_appointment: false,
                past_visit: true
            }
        );
        appointment.status = AppointmentStatus::Cancelled;
        store.save_appointment(&appointment).await.unwrap();
        assert_eq!(situation(now).await, Situation::default());
    }
}
