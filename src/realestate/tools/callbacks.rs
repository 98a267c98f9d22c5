//! `request_callback`: the customer wants a person to call them (a mortgage advisor, the agent
//! negotiating their offer). Like every change, it is confirmed first with the usual buttons;
//! then the wish is stored in `callback_requests` and the staff on duty are told on WhatsApp
//! (the [`HandoffDesk`]), as for `request_human`.
//!
//! A request's id is derived from the confirmed call that made it: unique per request (two
//! customers in the same millisecond get two), the same when a step cut short by a crash is
//! replayed, and inserted, never replaced.

use crate::realestate::CallbackRequestStore;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::text::unavailable;
use crate::engine::handoff::HandoffDesk;
use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::CallbackRequest;
use crate::store::BusinessEvent;

/// The tool's name, for prompt files.
pub const REQUEST_CALLBACK: &str = "request_callback";

/// Longest reason and preferred time kept, in chars.
const MAX_REASON: usize = 300;
const MAX_PREFERRED_TIME: usize = 100;

pub struct RequestCallback {
    realestate: Arc<dyn CallbackRequestStore>,
    desk: Arc<HandoffDesk>,
}

impl RequestCallback {
    pub fn new(realestate: Arc<dyn CallbackRequestStore>, desk: Arc<HandoffDesk>) -> Self {
        Self { realestate, desk }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CallbackArgs {
    #[schemars(description = "De qué quiere hablar, en una frase, para quien le llame.")]
    reason: String,
    #[schemars(
        description = "Cuándo prefiere que le llamen, como lo dijo («mañana por la tarde»), si lo dijo."
    )]
    preferred_time: Option<String>,
}

/// The arguments as kept: the reason trimmed and required, the preferred time when given.
fn checked(args: &CallbackArgs) -> Result<(String, Option<String>), ToolError> {
    let reason: String = args.reason.trim().chars().take(MAX_REASON).collect();
    if reason.is_empty() {
        return Err(ToolError::InvalidArgs(
            "`reason` must say what the call is about".into(),
        ));
    }
    let preferred_time = args
        .preferred_time
        .as_deref()
        .map(|t| {
            t.trim()
                .chars()
                .take(MAX_PREFERRED_TIME)
                .collect::<String>()
        })
        .filter(|t| !t.is_empty());
    Ok((reason, preferred_time))
}

#[async_trait]
impl TypedTool for RequestCallback {
    type Args = CallbackArgs;
    const NAME: &'static str = REQUEST_CALLBACK;
    const CONFIRMS: bool = true;

    fn description(&self) -> String {
        "Pide que una persona de la agencia llame al cliente a este mismo número (un asesor \
         hipotecario, el agente que lleva su oferta). Úsala cuando el cliente pida que le \
         llamen. El cliente confirma con un botón; después se avisa al equipo."
            .into()
    }

    async fn confirm(
        &self,
        args: &CallbackArgs,
        _context: &ToolContext,
    ) -> Result<String, ToolError> {
        checked(args).map(|(reason, preferred_time)| {
            format!(
                "Que una persona de la agencia te llame a este número: {reason}{}",
                preferred_time
                    .as_deref()
                    .map_or_else(String::new, |t| format!(" (mejor {t})"))
            )
        })
    }

    async fn call(
        &self,
        args: CallbackArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let (reason, preferred_time) = checked(&args)?;
        let request = CallbackRequest {
            id: format!("C-{}", context.call_key()),
            wa_id: context.wa_id.clone(),
            reason: reason.clone(),
            preferred_time: preferred_time.clone(),
            created_at: context.now,
        };
        if !self
            .realestate
            .insert_callback_request(&request)
            .await
            .map_err(unavailable)?
        {
            tracing::info!(request = %request.id, "callback request already recorded (a replayed step)");
        }
        let when = preferred_time
            .as_deref()
            .map_or_else(String::new, |t| format!(" (prefiere: {t})"));
        let outcome = self
            .desk
            .request(
                &context.wa_id,
                &format!("Llamar al cliente: {reason}{when}"),
                &context.call_id,
                &context.business,
                context.now,
            )
            .await
            .map_err(|error| {
                ToolError::Failed(format!("the team could not be notified: {error}"))
            })?;
        tracing::info!(conversation.id = %context.wa_id.masked(), ?outcome, "the customer asked to be called back");
        metrics::counter!("zaguan_callback_requests_total").increment(1);
        let contact = context.contact_line();
        Ok(ToolOutput::with_event(
            format!(
                "Callback request {} recorded. {} Do not promise an exact time for the call.",
                request.id,
                outcome.for_the_model(context.timezone, contact.as_deref())
            ),
            BusinessEvent::CallbackRequested {
                request_id: request.id.clone(),
                reason: request.reason.clone(),
                preferred_time: request.preferred_time.clone(),
            },
        ))
    }
}
