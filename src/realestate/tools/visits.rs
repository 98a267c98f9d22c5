//! The visit tracker's tools: the visits a customer made, and their feedback on one (asked to
//! confirm before it is recorded).

use crate::realestate::{PropertyStore, VisitStore};
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::text::{self, Lookup, unavailable, when};
use crate::engine::tools::{Tool, ToolContext, ToolError, ToolOutput};
use crate::llm::ToolSpec;
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
impl<S: PropertyStore + VisitStore + ?Sized> Tool for ListMyVisits<S> {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_my_visits".into(),
            description: "Las visitas que el usuario ya hizo (V-…), con la opinión que dejó, si \
                          la dejó; un agente de la agencia puede pedir las de un cliente o una \
                          propiedad."
                .into(),
            parameters: text::lookup_parameters(),
        }
    }

    async fn run(
        &self,
        args: serde_json::Value,
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

#[derive(Debug, Deserialize)]
struct FeedbackArgs {
    visit_id: String,
    outcome: Option<String>,
    feedback: Option<String>,
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
        args: serde_json::Value,
        context: &ToolContext,
    ) -> Result<Visit, ToolError> {
        let args: FeedbackArgs = text::args(args)?;
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
        if let Some(feedback) = args.feedback {
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
impl Tool for RecordVisitFeedback {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "record_visit_feedback".into(),
            description: "Guarda la opinión del usuario sobre una visita hecha (V-…). El usuario \
                          confirmará con un botón."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "visit_id": {"type": "string", "description": "Id de la visita (V-…)"},
                    "outcome": {"type": "string", "enum": VisitOutcome::ALL.map(VisitOutcome::as_str)},
                    "feedback": {"type": "string", "description": "Lo que dijo, con sus palabras"},
                    "rating": {"type": "integer", "minimum": 1, "maximum": 5}
                },
                "required": ["visit_id"]
            }),
        }
    }

    async fn confirmation(
        &self,
        args: &serde_json::Value,
        context: &ToolContext,
    ) -> Option<Result<String, ToolError>> {
        Some(self.updated(args.clone(), context).await.map(|visit| {
            let mut summary = format!("Guardar tu opinión sobre la visita {}", visit.id);
            if let Some(outcome) = visit.outcome {
                summary.push_str(&format!(": {}", outcome_es(outcome)));
            }
            if let Some(rating) = visit.rating {
                summary.push_str(&format!(", {rating}/5"));
            }
            summary
        }))
    }

    async fn run(
        &self,
        args: serde_json::Value,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let visit = self.updated(args, context).await?;
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
