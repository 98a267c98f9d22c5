//! `request_callback`: the customer wants a person to call them (a mortgage advisor, the agent
//! negotiating their offer). The wish is stored (`callback_requests`) and the conversation is
//! flagged for a person like `request_human`, so it shows in
//! `zaguan conversations list --handoff requested`.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::text::{self, unavailable};
use crate::engine::tools::{Tool, ToolContext, ToolError, ToolOutput};
use crate::llm::ToolSpec;
use crate::realestate::{CallbackRequest, RealEstateStore};
use crate::store::{BusinessEvent, HandoffRequest, Store};

/// The tool's name, for prompt files.
pub const REQUEST_CALLBACK: &str = "request_callback";

/// Longest reason and preferred time kept, in chars.
const MAX_REASON: usize = 300;
const MAX_PREFERRED_TIME: usize = 100;

pub struct RequestCallback {
    realestate: Arc<dyn RealEstateStore>,
    conversations: Arc<dyn Store>,
}

impl RequestCallback {
    pub fn new(realestate: Arc<dyn RealEstateStore>, conversations: Arc<dyn Store>) -> Self {
        Self {
            realestate,
            conversations,
        }
    }
}

#[derive(Debug, Deserialize)]
struct CallbackArgs {
    reason: String,
    preferred_time: Option<String>,
}

#[async_trait]
impl Tool for RequestCallback {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: REQUEST_CALLBACK.into(),
            description: "Pide que una persona de la agencia llame al cliente a este mismo número \
                          (un asesor hipotecario, el agente que lleva su oferta). Úsala cuando el \
                          cliente pida que le llamen."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "reason": {"type": "string", "description": "De qué quiere hablar, en una frase, para quien le llame."},
                    "preferred_time": {"type": "string", "description": "Cuándo prefiere que le llamen, como lo dijo («mañana por la tarde»), si lo dijo."}
                },
                "required": ["reason"]
            }),
        }
    }

    async fn run(
        &self,
        args: serde_json::Value,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: CallbackArgs = text::args(args)?;
        let reason: String = args.reason.trim().chars().take(MAX_REASON).collect();
        if reason.is_empty() {
            return Err(ToolError::InvalidArgs(
                "`reason` must say what the call is about".into(),
            ));
        }
        let preferred_time = args
            .preferred_time
            .map(|t| {
                t.trim()
                    .chars()
                    .take(MAX_PREFERRED_TIME)
                    .collect::<String>()
            })
            .filter(|t| !t.is_empty());
        let request = CallbackRequest {
            id: format!("C-{}", context.now.timestamp_millis()),
            wa_id: context.wa_id.clone(),
            reason: reason.clone(),
            preferred_time: preferred_time.clone(),
            created_at: context.now,
        };
        self.realestate
            .save_callback_request(&request)
            .await
            .map_err(unavailable)?;
        let when = preferred_time
            .as_deref()
            .map_or_else(String::new, |t| format!(" (prefiere: {t})"));
        self.conversations
            .request_handoff(
                &context.wa_id,
                &HandoffRequest {
                    at: context.now,
                    reason: format!("Llamar al cliente: {reason}{when}"),
                },
            )
            .await
            .map_err(|error| {
                ToolError::Failed(format!("the team could not be notified: {error}"))
            })?;
        tracing::info!(conversation.id = %context.wa_id.masked(), "the customer asked to be called back");
        metrics::counter!("zaguan_callback_requests_total").increment(1);
        Ok(ToolOutput::with_event(
            format!(
                "Done: callback request {} recorded and the team notified; a person will call the \
             user at this number{}. Tell the user so in one short sentence, without promising an \
             exact time.",
                request.id,
                preferred_time
                    .as_deref()
                    .map_or_else(String::new, |t| format!(", preferably {t}"))
            ),
            BusinessEvent::CallbackRequested {
                request_id: request.id.clone(),
                reason: request.reason.clone(),
                preferred_time: request.preferred_time.clone(),
            },
        ))
    }
}
