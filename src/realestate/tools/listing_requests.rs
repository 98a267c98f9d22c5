//! `request_listing_change`: an owner asks for a new price, a pause or the withdrawal of one of
//! their listings. The listing itself does not change: after the owner's yes the request is
//! stored (`listing_requests`, status `requested`) and the conversation is flagged for a person,
//! who handles it with the owner. Whose listing it is comes from the number writing, never from
//! the model; the agency's agents may ask for any listing.

use crate::realestate::{ListingRequestStore, OwnerStore, PropertyStore};
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::text::{money, unavailable};
use crate::domain::Role;
use crate::engine::handoff::HandoffDesk;
use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::{ListingChange, ListingRequest, Property, RealEstateStore};
use crate::store::BusinessEvent;

/// The tool's name, for prompt files.
pub const REQUEST_LISTING_CHANGE: &str = "request_listing_change";

const MAX_NOTE: usize = 300;

pub struct RequestListingChange<S: ?Sized = dyn RealEstateStore> {
    realestate: Arc<S>,
    desk: Arc<HandoffDesk>,
}

impl<S: OwnerStore + PropertyStore + ListingRequestStore + ?Sized> RequestListingChange<S> {
    pub fn new(realestate: Arc<S>, desk: Arc<HandoffDesk>) -> Self {
        Self { realestate, desk }
    }

    /// The listing and the change, once the caller may ask for it.
    async fn check(
        &self,
        args: &ChangeArgs,
        context: &ToolContext,
    ) -> Result<(Property, ListingChange), ToolError> {
        let change = match (args.change.as_str(), args.new_price) {
            ("price", Some(price)) if price > 0 => ListingChange::Price(price),
            ("price", _) => {
                return Err(ToolError::InvalidArgs(
                    "a price change needs `new_price` (whole euros)".into(),
                ));
            }
            ("pause", _) => ListingChange::Pause,
            ("withdraw", _) => ListingChange::Withdraw,
            (other, _) => {
                return Err(ToolError::InvalidArgs(format!(
                    "`change` is `price`, `pause` or `withdraw`, not `{other}`"
                )));
            }
        };
        let property = self
            .realestate
            .property(args.property_id.trim())
            .await
            .map_err(unavailable)?
            .ok_or_else(|| ToolError::Failed(format!("no listing {}", args.property_id.trim())))?;
        if context.role != Role::Agent {
            let owner = self
                .realestate
                .owner_by_wa_id(&context.wa_id)
                .await
                .map_err(unavailable)?;
            if owner.is_none_or(|owner| owner.id != property.owner_id) {
                return Err(ToolError::Failed(format!(
                    "{} is not a listing of the owner writing from this number; only its owner \
                     (or the agency) can ask to change it",
                    property.id
                )));
            }
        }
        Ok((property, change))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChangeArgs {
    #[schemars(description = "Id del inmueble (P-…)")]
    property_id: String,
    #[schemars(extend("enum" = ["price", "pause", "withdraw"]))]
    change: String,
    #[schemars(description = "Nuevo precio en euros, sin decimales (solo con change=price)")]
    #[schemars(range(min = 1))]
    new_price: Option<u64>,
    #[schemars(description = "Lo que el propietario añada (motivo, desde cuándo…)")]
    note: Option<String>,
}

fn describe(change: ListingChange, property: &Property) -> String {
    match change {
        ListingChange::Price(price) => format!(
            "Cambiar el precio de {} ({}) de {} a {}",
            property.id,
            property.title,
            money(property.price, &property.currency),
            money(price, &property.currency)
        ),
        ListingChange::Pause => {
            format!("Pausar el anuncio de {} ({})", property.id, property.title)
        }
        ListingChange::Withdraw => format!(
            "Retirar {} ({}) de la venta o el alquiler",
            property.id, property.title
        ),
    }
}

#[async_trait]
impl<S: OwnerStore + PropertyStore + ListingRequestStore + ?Sized> TypedTool
    for RequestListingChange<S>
{
    type Args = ChangeArgs;
    const NAME: &'static str = REQUEST_LISTING_CHANGE;
    const ROLES: &'static [Role] = &[Role::Owner, Role::Agent];
    const CONFIRMS: bool = true;

    fn description(&self) -> String {
        "Registra que el propietario quiere cambiar el precio de su inmueble, \
         pausar el anuncio o retirarlo. No cambia nada al momento: el \
         propietario confirma con un botón y una persona de la agencia lo \
         gestiona con él."
            .into()
    }

    async fn confirm(&self, args: &ChangeArgs, context: &ToolContext) -> Result<String, ToolError> {
        let (property, change) = self.check(args, context).await?;
        Ok(format!(
            "{}; la agencia lo gestionará contigo",
            describe(change, &property)
        ))
    }

    async fn call(&self, args: ChangeArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (property, change) = self.check(&args, context).await?;
        let request = ListingRequest {
            id: format!(
                "R-{}-{}",
                property.id.trim_start_matches("P-"),
                context.call_key()
            ),
            property_id: property.id.clone(),
            owner_id: property.owner_id.clone(),
            wa_id: context.wa_id.clone(),
            change,
            note: args
                .note
                .map(|n| n.trim().chars().take(MAX_NOTE).collect::<String>())
                .filter(|n| !n.is_empty()),
            status: "requested".into(),
            created_at: context.now,
        };
        self.realestate
            .save_listing_request(&request)
            .await
            .map_err(unavailable)?;
        let outcome = self
            .desk
            .request(
                &context.wa_id,
                &format!(
                    "Propietario: {} ({})",
                    describe(change, &property),
                    request.id
                ),
                &context.call_id,
                &context.business,
                context.now,
            )
            .await
            .map_err(|error| {
                ToolError::Failed(format!("the team could not be notified: {error}"))
            })?;
        tracing::info!(conversation.id = %context.wa_id.masked(), change = change.as_str(), "listing change requested");
        metrics::counter!("zaguan_listing_requests_total", "change" => change.as_str())
            .increment(1);
        Ok(ToolOutput::with_event(
            format!(
                "Request {} recorded ({}); the listing itself is unchanged until a person at the \
                 agency handles it with the owner. {}",
                request.id,
                describe(change, &property),
                outcome.for_the_model(context.timezone, context.contact_line().as_deref())
            ),
            BusinessEvent::ListingChangeRequested {
                request_id: request.id.clone(),
                property_id: property.id.clone(),
                change: change.as_str().to_owned(),
                new_price: change.new_price(),
            },
        ))
    }
}
