//! `create_search_alert`, `list_my_alerts` and `cancel_search_alert`: a customer saves a search
//! and hears of new or cheaper listings that match it (see [`crate::realestate::alerts`]). Whose
//! alerts they are comes from the number writing, never from the model.

use crate::realestate::AlertStore;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::text::unavailable;
use crate::domain::Role;
use crate::engine::tools::{NoArgs, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::{Alert, AlertCriteria, Operation, PropertyType};

pub const CREATE_SEARCH_ALERT: &str = "create_search_alert";
pub const LIST_MY_ALERTS: &str = "list_my_alerts";
pub const CANCEL_SEARCH_ALERT: &str = "cancel_search_alert";

/// What the confirmation adds for a contact who opted out: the alerts are held back by the send
/// governor until they write ALTA, and the button must not promise otherwise.
const OPTED_OUT_NOTE: &str =
    ". Pediste no recibir mensajes que no pidas: para que te lleguen estos avisos, escribe ALTA";

/// Most saved searches a customer keeps at once.
pub const MAX_ALERTS: usize = 5;

/// Customers save searches; owners and staff have other tools.
const ROLES: &[Role] = &[Role::Prospect];

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CreateArgs {
    #[schemars(description = "Ciudad")]
    city: Option<String>,
    #[schemars(description = "Barrio")]
    neighbourhood: Option<String>,
    #[schemars(description = "sale = compra, rent = alquiler")]
    operation: Option<Operation>,
    #[serde(rename = "type")]
    kind: Option<PropertyType>,
    #[schemars(description = "Precio máximo en euros (alquiler: por mes)")]
    #[schemars(range(min = 1))]
    max_price: Option<u64>,
    min_bedrooms: Option<u32>,
}

impl CreateArgs {
    fn criteria(self) -> Result<AlertCriteria, ToolError> {
        let clean = |text: Option<String>| {
            text.map(|t| t.trim().chars().take(60).collect::<String>())
                .filter(|t| !t.is_empty())
        };
        let criteria = AlertCriteria {
            city: clean(self.city),
            neighbourhood: clean(self.neighbourhood),
            operation: self.operation,
            kind: self.kind,
            max_price: self.max_price.filter(|p| *p > 0),
            min_bedrooms: self.min_bedrooms,
        };
        if criteria.city.is_none() && criteria.neighbourhood.is_none() {
            return Err(ToolError::InvalidArgs(
                "a saved search needs at least a city or a neighbourhood; ask the user where"
                    .into(),
            ));
        }
        Ok(criteria)
    }
}

pub struct CreateSearchAlert {
    store: Arc<dyn AlertStore>,
}

impl CreateSearchAlert {
    pub fn new(store: Arc<dyn AlertStore>) -> Self {
        Self { store }
    }

    async fn active(&self, context: &ToolContext) -> Result<Vec<Alert>, ToolError> {
        Ok(self
            .store
            .alerts_of(&context.wa_id)
            .await
            .map_err(unavailable)?
            .into_iter()
            .filter(|a| a.cancelled_at.is_none())
            .collect())
    }

    async fn check(
        &self,
        args: &CreateArgs,
        context: &ToolContext,
    ) -> Result<AlertCriteria, ToolError> {
        let criteria = args.clone().criteria()?;
        let active = self.active(context).await?;
        if active.iter().any(|a| a.criteria == criteria) {
            return Err(ToolError::Failed(
                "the user already has this very search saved; nothing to do".into(),
            ));
        }
        if active.len() >= MAX_ALERTS {
            return Err(ToolError::Failed(format!(
                "the user already has {MAX_ALERTS} saved searches (the most allowed); offer to \
                 cancel one first (list_my_alerts)"
            )));
        }
        Ok(criteria)
    }
}

#[async_trait]
impl TypedTool for CreateSearchAlert {
    type Args = CreateArgs;
    const NAME: &'static str = CREATE_SEARCH_ALERT;
    const ROLES: &'static [Role] = ROLES;
    const CONFIRMS: bool = true;

    fn description(&self) -> String {
        "Guarda la búsqueda del cliente para avisarle por WhatsApp cuando entre un inmueble que \
         encaje o uno que encaje baje de precio (una vez por inmueble). El cliente confirma con \
         un botón."
            .into()
    }

    async fn confirm(&self, args: &CreateArgs, context: &ToolContext) -> Result<String, ToolError> {
        self.check(args, context).await.map(|criteria| {
            let mut text = format!(
                "Avisarte por WhatsApp de novedades: {}",
                criteria.describe()
            );
            if context.opted_out {
                text.push_str(OPTED_OUT_NOTE);
            }
            text
        })
    }

    async fn call(&self, args: CreateArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let criteria = self.check(&args, context).await?;
        let alert = Alert {
            id: format!("S-{}", &context.call_key()[..10]),
            wa_id: context.wa_id.clone(),
            criteria,
            created_at: context.now,
            cancelled_at: None,
        };
        self.store.save_alert(&alert).await.map_err(unavailable)?;
        tracing::info!(conversation.id = %context.wa_id.masked(), alert = %alert.id, "search alert saved");
        metrics::counter!("zaguan_search_alerts_total", "change" => "created").increment(1);
        let what_next = if context.opted_out {
            "Pero el cliente pidió no recibir mensajes que no pida: no le llegará ningún aviso \
             hasta que escriba ALTA. Díselo así; no le prometas avisos."
        } else {
            "Se avisará al cliente de cada inmueble nuevo o más barato que encaje, una vez por \
             inmueble. Puede cancelarla cuando quiera."
        };
        Ok(format!(
            "Búsqueda guardada ({}): {}. {what_next}",
            alert.id,
            alert.criteria.describe()
        )
        .into())
    }
}

pub struct ListMyAlerts {
    store: Arc<dyn AlertStore>,
}

impl ListMyAlerts {
    pub fn new(store: Arc<dyn AlertStore>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl TypedTool for ListMyAlerts {
    type Args = NoArgs;
    const NAME: &'static str = LIST_MY_ALERTS;
    const ROLES: &'static [Role] = ROLES;

    fn description(&self) -> String {
        "Las búsquedas guardadas del cliente (avisos activos), con su id (S-…).".into()
    }

    async fn call(&self, _args: NoArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let active: Vec<Alert> = self
            .store
            .alerts_of(&context.wa_id)
            .await
            .map_err(unavailable)?
            .into_iter()
            .filter(|a| a.cancelled_at.is_none())
            .collect();
        if active.is_empty() {
            return Ok("El cliente no tiene búsquedas guardadas.".into());
        }
        let mut out = format!("{} búsqueda(s) guardada(s):", active.len());
        for alert in &active {
            out.push_str(&format!("\n{} · {}", alert.id, alert.criteria.describe()));
        }
        Ok(out.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CancelArgs {
    #[schemars(description = "Id de la búsqueda, p. ej. S-1234")]
    alert_id: String,
}

pub struct CancelSearchAlert {
    store: Arc<dyn AlertStore>,
}

impl CancelSearchAlert {
    pub fn new(store: Arc<dyn AlertStore>) -> Self {
        Self { store }
    }

    /// The caller's own active alert, or an error the model can act on.
    async fn own(&self, args: &CancelArgs, context: &ToolContext) -> Result<Alert, ToolError> {
        let id = args.alert_id.trim();
        self.store
            .alerts_of(&context.wa_id)
            .await
            .map_err(unavailable)?
            .into_iter()
            .find(|a| a.id == id && a.cancelled_at.is_none())
            .ok_or_else(|| {
                ToolError::InvalidArgs(format!(
                    "the user has no active saved search `{id}`; use an id from list_my_alerts"
                ))
            })
    }
}

#[async_trait]
impl TypedTool for CancelSearchAlert {
    type Args = CancelArgs;
    const NAME: &'static str = CANCEL_SEARCH_ALERT;
    const ROLES: &'static [Role] = ROLES;
    const CONFIRMS: bool = true;

    fn description(&self) -> String {
        "Cancela una búsqueda guardada del cliente por su id (S-…, de list_my_alerts): deja de \
         recibir esos avisos."
            .into()
    }

    async fn confirm(&self, args: &CancelArgs, context: &ToolContext) -> Result<String, ToolError> {
        self.own(args, context)
            .await
            .map(|alert| format!("Dejar de avisarte de: {}", alert.criteria.describe()))
    }

    async fn call(&self, args: CancelArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut alert = self.own(&args, context).await?;
        alert.cancelled_at = Some(context.now);
        self.store.save_alert(&alert).await.map_err(unavailable)?;
        metrics::counter!("zaguan_search_alerts_total", "change" => "cancelled").increment(1);
        Ok(format!(
            "Búsqueda {} cancelada: el cliente ya no recibirá esos avisos.",
            alert.id
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::WaId;
    use crate::realestate::MemoryRealEstate;

    /// A contact who opted out hears, at the button and after it, that the alerts they save
    /// will not come until they write ALTA: the send governor holds them back.
    #[tokio::test]
    async fn a_saved_search_of_a_contact_who_opted_out_promises_no_alerts() {
        let tool = CreateSearchAlert::new(Arc::new(MemoryRealEstate::new()));
        let args = || CreateArgs {
            city: Some("Valencia".into()),
            neighbourhood: None,
            operation: None,
            kind: None,
            max_price: None,
            min_bedrooms: None,
        };
        let mut context = ToolContext::new(
            WaId::parse("34611000321").unwrap(),
            Role::Prospect,
            chrono::Utc::now(),
        );
        context.call_id = "call_1".into();
        let asked = tool.confirm(&args(), &context).await.unwrap();
        assert!(!asked.contains("ALTA"), "{asked}");
        context.opted_out = true;
        let asked = tool.confirm(&args(), &context).await.unwrap();
        assert!(asked.contains("escribe ALTA"), "{asked}");
        let saved = tool.call(args(), &context).await.unwrap().text;
        assert!(saved.contains("hasta que escriba ALTA"), "{saved}");
        assert!(!saved.contains("Se avisará"), "{saved}");
    }
}
