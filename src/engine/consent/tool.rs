//! `record_opt_out`, the assistants' way to record the opt-out the reader could not read.

use std::sync::Arc;

use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::store::{OptOut, UserStore};

/// `record_opt_out`: what the reader left to the assistants — «¿me podéis quitar de los
/// avisos, que ya he alquilado?» — recorded as the keyword would be, so no assistant promises
/// an opt-out nothing keeps. Run at once: stopping messages is the safe direction, and the
/// customer can undo it with ALTA.
pub struct RecordOptOut {
    store: Arc<dyn UserStore>,
}

impl RecordOptOut {
    pub fn new(store: Arc<dyn UserStore>) -> Self {
        Self { store }
    }
}

/// The tool's name, as prompt files list it.
pub const RECORD_OPT_OUT: &str = "record_opt_out";

/// What `record_opt_out` takes.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct RecordOptOutArgs {
    #[schemars(description = "Lo que pidió el cliente, con sus palabras.")]
    said: String,
}

#[async_trait::async_trait]
impl TypedTool for RecordOptOut {
    type Args = RecordOptOutArgs;
    const NAME: &'static str = RECORD_OPT_OUT;
    const WRITES: bool = true;

    fn description(&self) -> String {
        "Registra que el cliente no quiere recibir más mensajes que no haya pedido \
         (recordatorios de visitas, avisos de inmuebles nuevos, seguimientos). Úsala solo \
         cuando lo pida claramente; no para cancelar una visita, una alerta concreta o un \
         anuncio. Se le seguirá respondiendo cuando escriba."
            .into()
    }

    async fn call(
        &self,
        args: RecordOptOutArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let said: String = args.said.trim().chars().take(40).collect();
        let opt_out = OptOut {
            at: context.now,
            source: format!("assistant:{said}"),
        };
        self.store
            .set_opt_out(&context.wa_id, Some(&opt_out))
            .await
            .map_err(|error| ToolError::Failed(format!("the opt-out was not recorded: {error}")))?;
        tracing::info!(conversation.id = %context.wa_id.masked(), "opt-out recorded by an assistant");
        metrics::counter!("zaguan_consent_changes_total", "change" => "opt_out_by_assistant")
            .increment(1);
        Ok(ToolOutput::from(
            "Done: no reminders, alerts or news will be sent to this user unless they ask. \
             Tell them so in one short sentence, that we still answer when they write, and \
             that writing ALTA brings the messages back."
                .to_owned(),
        ))
    }
}
