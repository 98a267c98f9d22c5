//! The visit tracker's tools: the visits a customer made, and their feedback on one (asked to
//! confirm before it is recorded).

use crate::realestate::{PropertyStore, VisitStore};
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::text::{self, Lookup, unavailable, when};
use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::{RealEstateStore, Visit, VisitOutcome};
use crate::store::BusinessEvent;

pub struct ListMyVisits<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
}

impl<S: PropertyStore + VisitStore + ?Sized> ListMyVisits<S> {
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }
}

fn outcome_es(outcome: VisitOutcome) -> &'static str {
    match outcome {
        VisitOutcome::Interested => "le interesa",
        VisitOutcome::NotInterested => "no le interesa",
        VisitOutcome::WantsSecondVisit => "quiere una segunda visita",
        VisitOutcome::MadeOffer => "hizo una oferta",
    }
}

#[async_trait]
impl<S: PropertyStore + VisitStore + ?Sized> TypedTool for ListMyVisits<S> {
    type Args = text::LookupArgs;
    const NAME: &'static str = "list_my_visits";

    fn description(&self) -> String {
        "Las visitas que el usuario ya hizo (V-…), con la opinión que dejó, si \
         la dejó; un agente de la agencia puede pedir las de un cliente o una \
         propiedad."
            .into()
    }

    async fn call(
        &self,
        args: text::LookupArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let visits = match text::lookup(args, context)? {
            Lookup::Customer(wa_id) => self.store.visits_of(&wa_id).await,
            Lookup::Property(id) => self.store.visits_to(&id).await,
        }
        .map_err(unavailable)?;
        if visits.is_empty() {
            return Ok("No consta ninguna visita hecha.".into());
        }
        let mut out = String::from("Visitas hechas:");
        for v in visits.iter().take(10) {
            let title = match self.store.property(&v.property_id).await {
                Ok(Some(p)) => format!("{} {}", p.id, p.title),
                _ => v.property_id.clone(),
            };
            out.push_str(&format!(
                "\n- {} · {title} · {}",
                v.id,
                when(v.visited_at, context)
            ));
            match (&v.outcome, &v.feedback) {
                (None, None) => out.push_str(" · sin opinión todavía"),
                (outcome, feedback) => {
                    if let Some(outcome) = outcome {
                        out.push_str(&format!(" · {}", outcome_es(*outcome)));
                    }
                    if let Some(feedback) = feedback {
                        out.push_str(&format!(" · «{feedback}»"));
                    }
                }
            }
        }
        Ok(out.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FeedbackArgs {
    #[schemars(description = "Id de la visita (V-…)")]
    visit_id: String,
    #[schemars(extend("enum" = VisitOutcome::ALL.map(VisitOutcome::as_str)))]
    outcome: Option<String>,
    #[schemars(description = "Lo que dijo, con sus palabras")]
    feedback: Option<String>,
    #[schemars(range(min = 1, max = 5))]
    rating: Option<u8>,
}

pub struct RecordVisitFeedback {
    store: Arc<dyn VisitStore>,
}

impl RecordVisitFeedback {
    pub fn new(store: Arc<dyn VisitStore>) -> Self {
        Self { store }
    }

    /// The visit, updated with the feedback (not stored yet).
    async fn updated(
        &self,
        args: &FeedbackArgs,
        context: &ToolContext,
    ) -> Result<Visit, ToolError> {
        let mut visit = self
            .store
            .visits_of(&context.wa_id)
            .await
            .map_err(unavailable)?
            .into_iter()
            .find(|v| v.id == args.visit_id.trim())
            .ok_or_else(|| {
                ToolError::InvalidArgs(format!(
                    "the user has no visit `{}`; see list_my_visits",
                    args.visit_id
                ))
            })?;
        if args.outcome.is_none() && args.feedback.is_none() && args.rating.is_none() {
            return Err(ToolError::InvalidArgs(
                "give at least one of outcome, feedback or rating".into(),
            ));
        }
        if let Some(outcome) = &args.outcome {
            visit.outcome = Some(VisitOutcome::parse(outcome).ok_or_else(|| {
                ToolError::InvalidArgs(format!(
                    "outcome `{outcome}` is not one of interested, not_interested, wants_second_visit, made_offer"
                ))
            })?);
        }
        if let Some(rating) = args.rating {
            if !(1..=5).contains(&rating) {
                return Err(ToolError::InvalidArgs(format!(
                    "rating {rating} must be from 1 to 5"
                )));
            }
            visit.rating = Some(rating);
        }
        if let Some(feedback) = &args.feedback {
            let feedback = feedback.trim();
            if feedback.chars().count() > 1000 {
                return Err(ToolError::InvalidArgs(
                    "feedback is over 1000 characters; summarise it".into(),
                ));
            }
            visit.feedback = Some(feedback.to_owned());
        }
        Ok(visit)
    }
}

#[async_trait]
impl TypedTool for RecordVisitFeedback {
    type Args = FeedbackArgs;
    const NAME: &'static str = "record_visit_feedback";
    const CONFIRMS: bool = true;

    fn description(&self) -> String {
        "Guarda la opinión del usuario sobre una visita hecha (V-…). El usuario \
         confirmará con un botón."
            .into()
    }

    async fn confirm(
        &self,
        args: &FeedbackArgs,
        context: &ToolContext,
    ) -> Result<String, ToolError> {
        self.updated(args, context).await.map(|visit| {
            let mut summary = format!("Guardar tu opinión sobre la visita {}", visit.id);
            if let Some(outcome) = visit.outcome {
                summary.push_str(&format!(": {}", outcome_es(outcome)));
            }
            if let Some(rating) = visit.rating {
                summary.push_str(&format!(", {rating}/5"));
            }
            summary
        })
    }

    async fn call(
        &self,
        args: FeedbackArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let visit = self.updated(&args, context).await?;
        self.store
            .upsert_visits(std::slice::from_ref(&visit))
            .await
            .map_err(unavailable)?;
        Ok(ToolOutput::with_event(
            format!(
                "Opinión guardada para la visita {}. Agradéceselo.",
                visit.id
            ),
            BusinessEvent::VisitFeedbackRecorded {
                visit_id: visit.id.clone(),
                property_id: visit.property_id.clone(),
                interest: visit.outcome.map_or("unknown", |o| o.as_str()).to_owned(),
                feedback: visit.feedback.clone().unwrap_or_default(),
            },
        ))
    }
}
