//! `owner_listing_stats`: how an owner's listings are doing — visits, offers, days on the
//! market. Who the owner is comes from the WhatsApp number writing, never from the model; only
//! owners (and the agency's own agents) may run it.

use crate::realestate::{OfferStore, OwnerStore, PropertyStore, VisitStore};
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::text::{self, money, unavailable};
use crate::domain::Role;
use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::{PropertyFilter, RealEstateStore, VisitOutcome};

pub struct OwnerListingStats<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
}

impl<S: OfferStore + OwnerStore + PropertyStore + VisitStore + ?Sized> OwnerListingStats<S> {
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StatsArgs {
    /// Only for the agency's agents, who ask about any owner.
    #[schemars(description = "Solo para agentes de la agencia: id del propietario (O-…)")]
    owner_id: Option<String>,
}

#[async_trait]
impl<S: OfferStore + OwnerStore + PropertyStore + VisitStore + ?Sized> TypedTool
    for OwnerListingStats<S>
{
    type Args = StatsArgs;
    const NAME: &'static str = "owner_listing_stats";
    const ROLES: &'static [Role] = &[Role::Owner, Role::Agent];

    fn description(&self) -> String {
        "Cómo van las propiedades del propietario que escribe: visitas, ofertas \
         (la mejor), días en el mercado y estado de cada una."
            .into()
    }

    async fn call(&self, args: StatsArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let owner = match (context.role, args.owner_id) {
            (Role::Agent, Some(id)) => self.store.owner(id.trim()).await.map_err(unavailable)?,
            _ => self
                .store
                .owner_by_wa_id(&context.wa_id)
                .await
                .map_err(unavailable)?,
        };
        let Some(owner) = owner else {
            return Err(ToolError::Failed(
                "this WhatsApp number is not registered as an owner's; the agency must link it \
                 before listing statistics can be shared"
                    .into(),
            ));
        };
        let listings = self
            .store
            .properties(&PropertyFilter {
                owner_id: Some(owner.id.clone()),
                ..PropertyFilter::default()
            })
            .await
            .map_err(unavailable)?;
        if listings.is_empty() {
            return Ok(format!(
                "{} no tiene propiedades publicadas con nosotros.",
                owner.name
            )
            .into());
        }
        let mut out = format!("Propiedades de {} ({}):", owner.name, owner.id);
        for p in &listings {
            let visits = self.store.visits_to(&p.id).await.map_err(unavailable)?;
            let offers = self.store.offers_for(&p.id).await.map_err(unavailable)?;
            let open: Vec<_> = offers.iter().filter(|o| o.status.is_open()).collect();
            // A rejected or withdrawn offer is no offer any more.
            let best = offers
                .iter()
                .filter(|o| o.status.counts())
                .map(|o| o.amount)
                .max();
            let days = (context.now - p.listed_at).num_days().max(0);
            out.push_str(&format!(
                "\n- {} · {} · {} · {} · {days} días en el mercado · {} visitas · {} ofertas ({} abiertas)",
                p.id,
                p.title,
                text::price(p),
                p.status.as_str(),
                visits.len(),
                offers.len(),
                open.len()
            ));
            if let Some(best) = best {
                out.push_str(&format!(" · mejor oferta {}", money(best, &p.currency)));
            }
            // What the visitors said after their visit (the follow-up's buttons, or in words).
            let said = |outcomes: &[VisitOutcome]| {
                visits
                    .iter()
                    .filter(|v| v.outcome.is_some_and(|o| outcomes.contains(&o)))
                    .count()
            };
            let opinions = [
                (
                    "interesados",
                    said(&[VisitOutcome::Interested, VisitOutcome::MadeOffer]),
                ),
                ("no convencidos", said(&[VisitOutcome::NotInterested])),
                ("quieren volver", said(&[VisitOutcome::WantsSecondVisit])),
            ];
            let opinions: Vec<String> = opinions
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(what, n)| format!("{what}: {n}"))
                .collect();
            if !opinions.is_empty() {
                out.push_str(&format!(" · tras la visita, {}", opinions.join(", ")));
            }
        }
        Ok(out.into())
    }
}
