//! The offer assistant's tools: submitting an offer on a property (confirmed by the user first)
//! and the user's offers.

use crate::realestate::{OfferStore, PropertyStore};
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::text::{self, Lookup, money, unavailable};
use crate::domain::Role;
use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::{
    ListingStatus, Offer, OfferAnswer, OfferStatus, Property, RealEstateStore,
};
use crate::store::BusinessEvent;

/// Offers below this share of the asking price are not submitted: the owner would not take
/// them seriously, and it is usually a misunderstanding (monthly vs total, a missing zero).
const FLOOR_PERCENT: u64 = 50;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct OfferArgs {
    #[schemars(description = "Id de la propiedad (P-…)")]
    property_id: String,
    #[schemars(description = "Importe ofrecido, en unidades (euros), sin decimales")]
    #[schemars(range(min = 1))]
    amount: u64,
    #[schemars(description = "Condiciones, p. ej. «sujeta a hipoteca», «entrada en enero»")]
    conditions: Option<String>,
}

pub struct SubmitOffer<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
}

impl<S: OfferStore + PropertyStore + ?Sized> SubmitOffer<S> {
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }

    async fn check(&self, args: &OfferArgs) -> Result<Property, ToolError> {
        let property = text::listing(self.store.as_ref(), &args.property_id).await?;
        if property.status != ListingStatus::Available {
            return Err(ToolError::Failed(format!(
                "{} is {} and does not take offers",
                property.id,
                property.status.as_str()
            )));
        }
        if args.amount == 0 || args.amount * 100 < property.price * FLOOR_PERCENT {
            return Err(ToolError::InvalidArgs(format!(
                "an offer of {} is below {FLOOR_PERCENT} % of the asking price {}; check the amount with the user",
                money(args.amount, &property.currency),
                text::price(&property)
            )));
        }
        if args.amount > property.price.saturating_mul(2) {
            return Err(ToolError::InvalidArgs(format!(
                "an offer of {} is over twice the asking price {}; check the amount with the user",
                money(args.amount, &property.currency),
                text::price(&property)
            )));
        }
        Ok(property)
    }
}

#[async_trait]
impl<S: OfferStore + PropertyStore + ?Sized> TypedTool for SubmitOffer<S> {
    type Args = OfferArgs;
    const NAME: &'static str = "submit_offer";
    const ROLES: &'static [Role] = &[Role::Prospect, Role::Agent];
    const CONFIRMS: bool = true;

    fn description(&self) -> String {
        "Presenta una oferta del usuario por una propiedad (importe en la \
         moneda de la propiedad; en alquiler, por mes). El usuario confirmará \
         con un botón antes de enviarla al propietario."
            .into()
    }

    async fn confirm(&self, args: &OfferArgs, _context: &ToolContext) -> Result<String, ToolError> {
        let property = self.check(args).await?;
        let mut summary = format!(
            "Oferta de {} por {} ({}; precio {})",
            money(args.amount, &property.currency),
            property.id,
            property.title,
            text::price(&property)
        );
        if let Some(conditions) = &args.conditions {
            summary.push_str(&format!(", {conditions}"));
        }
        Ok(summary)
    }

    async fn call(&self, args: OfferArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let property = self.check(&args).await?;
        let offer = Offer {
            // From the call: a step replayed after a crash writes the same offer again.
            id: format!(
                "F-{}-{}",
                property.id.trim_start_matches("P-"),
                &context.call_key()[..8]
            ),
            property_id: property.id.clone(),
            wa_id: context.wa_id.clone(),
            amount: args.amount,
            currency: property.currency.clone(),
            conditions: args.conditions.map(|c| c.trim().to_owned()),
            status: OfferStatus::Submitted,
            created_at: context.now,
            // The follow-up loop sends it to the owner (or the agent) for an answer.
            answer: OfferAnswer {
                notice: Some("received".into()),
                ..OfferAnswer::default()
            },
        };
        // A replayed step finds it written, perhaps answered already: left as it is.
        if self
            .store
            .offer(&offer.id)
            .await
            .map_err(unavailable)?
            .is_none()
        {
            self.store
                .upsert_offers(std::slice::from_ref(&offer))
                .await
                .map_err(unavailable)?;
        }
        Ok(ToolOutput::with_event(
            format!(
                "Oferta {} registrada y enviada a la agencia: {} por {} ({}). No es vinculante \
             hasta que el propietario la acepte; no prometas cuándo responderá.",
                offer.id,
                money(offer.amount, &offer.currency),
                property.id,
                property.title
            ),
            BusinessEvent::OfferSubmitted {
                offer_id: offer.id.clone(),
                property_id: offer.property_id.clone(),
                amount: offer.amount,
                currency: offer.currency.clone(),
                conditions: offer.conditions.clone(),
            },
        ))
    }
}

pub struct ListMyOffers {
    store: Arc<dyn OfferStore>,
}

impl ListMyOffers {
    pub fn new(store: Arc<dyn OfferStore>) -> Self {
        Self { store }
    }
}

fn status_es(status: OfferStatus) -> &'static str {
    match status {
        OfferStatus::Submitted => "pendiente de respuesta",
        OfferStatus::Accepted => "aceptada",
        OfferStatus::Rejected => "rechazada",
        OfferStatus::Countered => "con contraoferta del propietario",
        OfferStatus::Withdrawn => "retirada",
    }
}

#[async_trait]
impl TypedTool for ListMyOffers {
    type Args = text::LookupArgs;
    const NAME: &'static str = "list_my_offers";
    const ROLES: &'static [Role] = &[Role::Prospect, Role::Agent];

    fn description(&self) -> String {
        "Las ofertas que ha presentado el usuario y su estado; un agente de la \
         agencia puede pedir las de un cliente o una propiedad."
            .into()
    }

    async fn call(
        &self,
        args: text::LookupArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let offers = match text::lookup(args, context)? {
            Lookup::Customer(wa_id) => self.store.offers_of(&wa_id).await,
            Lookup::Property(id) => self.store.offers_for(&id).await,
        }
        .map_err(unavailable)?;
        if offers.is_empty() {
            return Ok("No consta ninguna oferta.".into());
        }
        let mut out = String::from("Ofertas:");
        for offer in offers.iter().take(10) {
            out.push_str(&format!(
                "\n- {} · {} por {} · {}",
                offer.id,
                money(offer.amount, &offer.currency),
                offer.property_id,
                status_es(offer.status)
            ));
            if let Some(counter) = offer.answer.counter_amount {
                out.push_str(&format!(" de {}", money(counter, &offer.currency)));
                if offer.status == OfferStatus::Countered {
                    out.push_str(" (puede aceptarla con el botón del mensaje que recibió)");
                }
            }
        }
        Ok(out.into())
    }
}
