//! The answers to the follow-ups, read without a model: a button's id names the record and
//! the answer (`visit:A-…:done`, `visit_feedback:V-…:interested`, `offer:F-…:counter`,
//! `counter:F-…:accept`), and only the contact it was sent to may give it. After
//! «Contraoferta», the next message is read for the amount (the offline reader's amounts).

use std::sync::Arc;

use async_trait::async_trait;

use super::record::{self, Outcome, Reply as OfferReply};
use super::{VISIT_FEEDBACK, agent_for};
use crate::engine::presses::{Answered, Presses, Reply, Said};
use crate::realestate::offline::criteria::amounts;
use crate::realestate::tools::text::money;
use crate::realestate::{Offer, OfferStatus, Property, RealEstateStore, Settled, VisitOutcome};
use crate::store::{BusinessEvent, Event, Store, StoreError, StoreResult};

/// The `agent` of these replies in the history.
const AGENT: &str = "follow_up";

/// A counter-offer below this is taken for a slip («250» for 250.000) and asked again.
const LEAST_COUNTER: u64 = 1_000;

/// Reads the answers to the follow-ups (see the module doc).
pub struct FollowUpPresses {
    realestate: Arc<dyn RealEstateStore>,
    /// Where the answers' events are written.
    store: Arc<dyn Store>,
}

impl FollowUpPresses {
    pub fn new(realestate: Arc<dyn RealEstateStore>, store: Arc<dyn Store>) -> Self {
        Self { realestate, store }
    }

    /// `agent:A-01` when `said` comes from a member of staff.
    async fn staff_member(&self, said: &Said<'_>) -> StoreResult<Option<String>> {
        let staff = self.realestate.staff().await?;
        Ok(staff
            .into_iter()
            .find(|m| m.wa_id.as_ref() == Some(said.wa_id))
            .map(|m| format!("agent:{}", m.id)))
    }

    /// Whose answer to an offer on `property` this would be: its owner's or staff's.
    async fn answerer(
        &self,
        said: &Said<'_>,
        property: Option<&Property>,
    ) -> StoreResult<Option<String>> {
        if let Some(owner) = self.realestate.owner_by_wa_id(said.wa_id).await?
            && property.is_some_and(|p| p.owner_id == owner.id)
        {
            return Ok(Some(format!("owner:{}", owner.id)));
        }
        self.staff_member(said).await
    }

    async fn visit_outcome(&self, said: &Said<'_>, id: &str, what: &str) -> StoreResult<Answered> {
        let (Some(outcome), Some(by)) = (Outcome::parse(what), self.staff_member(said).await?)
        else {
            return Ok(Answered::No);
        };
        let settled = record::record_outcome(
            self.realestate.as_ref(),
            self.store.as_ref(),
            id,
            outcome,
            &by,
            said.now,
        )
        .await?;
        let text = match settled {
            None => format!("No encuentro la visita {id}."),
            Some(Settled::Already(a)) => format!(
                "La visita {} ya estaba anotada como «{}».",
                a.id,
                status_es(a.status.as_str())
            ),
            Some(Settled::Now(a)) => match outcome {
                Outcome::Done => format!(
                    "Anotado: visita {} hecha. Le pregunto al cliente qué le pareció.",
                    a.id
                ),
                Outcome::NoShow => format!(
                    "Anotado: el cliente no vino a la visita {}. Le ofrezco otra hora.",
                    a.id
                ),
                Outcome::Cancelled => format!("Anotado: visita {} cancelada.", a.id),
            },
        };
        Ok(reply(text))
    }

    async fn feedback(&self, said: &Said<'_>, id: &str, what: &str) -> StoreResult<Answered> {
        let outcome = match what {
            "interested" => VisitOutcome::Interested,
            "not_interested" => VisitOutcome::NotInterested,
            "again" => VisitOutcome::WantsSecondVisit,
            _ => return Ok(Answered::No),
        };
        let visits = self.realestate.visits_of(said.wa_id).await?;
        let Some(mut visit) = visits.into_iter().find(|v| v.id == id) else {
            return Ok(Answered::No);
        };
        visit.outcome = Some(outcome);
        self.realestate
            .upsert_visits(std::slice::from_ref(&visit))
            .await?;
        let event = BusinessEvent::VisitFeedbackRecorded {
            visit_id: visit.id.clone(),
            property_id: visit.property_id.clone(),
            interest: outcome.as_str().to_owned(),
            feedback: visit.feedback.clone().unwrap_or_default(),
        };
        self.store
            .insert_events(&[Event::keyed(said.wa_id, event, said.now, "")])
            .await?;
        metrics::counter!("zaguan_visit_feedback_total", "outcome" => outcome.as_str())
            .increment(1);
        Ok(match outcome {
            VisitOutcome::Interested => reply_as(
                VISIT_FEEDBACK,
                format!(
                    "¡Gracias! Queda anotado que {} te interesa. Si quieres, te ayudo a hacer una \
                 oferta o a resolver dudas.",
                    visit.property_id
                ),
            ),
            VisitOutcome::NotInterested => reply_as(
                VISIT_FEEDBACK,
                "Gracias por contárnoslo, queda anotado. Si quieres, busco otras opciones que \
                 encajen mejor."
                    .to_owned(),
            ),
            // The appointment assistant offers the new times.
            _ => Answered::Run {
                agent: "appointment_assistant",
                tool: "list_available_slots",
                args: serde_json::json!({"property_id": visit.property_id}),
            },
        })
    }

    /// Words added after the feedback question: the visit's feedback, in the customer's
    /// words; the assistants still answer them.
    async fn feedback_words(&self, said: &Said<'_>, text: &str) -> StoreResult<Answered> {
        let visits = self.realestate.visits_of(said.wa_id).await?;
        // Their first words only: what follows is a conversation, not the visit's feedback.
        let Some(mut visit) = visits.into_iter().next().filter(|v| v.feedback.is_none()) else {
            return Ok(Answered::No);
        };
        visit.feedback = Some(text.trim().chars().take(1_000).collect());
        self.realestate
            .upsert_visits(std::slice::from_ref(&visit))
            .await?;
        Ok(Answered::Noted)
    }

    async fn offer(&self, said: &Said<'_>, id: &str, what: &str) -> StoreResult<Answered> {
        let Some(offer) = self.realestate.offer(id).await? else {
            return Ok(Answered::No);
        };
        let property = self.realestate.property(&offer.property_id).await?;
        let Some(by) = self.answerer(said, property.as_ref()).await? else {
            return Ok(Answered::No);
        };
        if offer.status != OfferStatus::Submitted {
            return Ok(reply(already(&offer)));
        }
        let answer = match what {
            "accept" => OfferReply::Accept,
            "reject" => OfferReply::Reject,
            "counter" => {
                self.realestate
                    .await_counter(&offer.id, Some(said.wa_id))
                    .await?;
                return Ok(reply(format!(
                    "¿Qué importe propones para {}? Escríbelo en tu próximo mensaje, por ejemplo \
                     «{}».",
                    offer.property_id,
                    money(
                        offer.amount.saturating_add(offer.amount / 10),
                        &offer.currency
                    )
                )));
            }
            _ => return Ok(Answered::No),
        };
        self.answered(&offer, answer, &by, said).await
    }

    async fn answered(
        &self,
        offer: &Offer,
        answer: OfferReply,
        by: &str,
        said: &Said<'_>,
    ) -> StoreResult<Answered> {
        let settled = record::answer_offer(
            self.realestate.as_ref(),
            self.store.as_ref(),
            &offer.id,
            answer,
            by,
            said.now,
        )
        .await?;
        let text = match settled {
            None => format!("No encuentro la oferta {}.", offer.id),
            Some(Settled::Already(offer)) => already(&offer),
            Some(Settled::Now(offer)) => match answer {
                OfferReply::Accept if by == "customer" => {
                    let property = self.realestate.property(&offer.property_id).await?;
                    let agent =
                        agent_for(self.realestate.as_ref(), None, property.as_ref()).await?;
                    let told = match agent.filter(|a| a.wa_id.is_some()) {
                        Some(agent) => {
                            format!(
                                " Se lo comunico a {} para los siguientes pasos.",
                                agent.name
                            )
                        }
                        None => String::new(),
                    };
                    format!(
                        "¡Hecho! Aceptas la contraoferta de {} por {}.{told}",
                        money(
                            offer.answer.counter_amount.unwrap_or(offer.amount),
                            &offer.currency
                        ),
                        offer.property_id
                    )
                }
                OfferReply::Accept => format!(
                    "Anotado: aceptas la oferta de {} por {}. Se lo comunico al cliente.",
                    money(offer.amount, &offer.currency),
                    offer.property_id
                ),
                OfferReply::Reject => format!(
                    "Anotado: rechazas la oferta de {} por {}. Se lo comunico al cliente.",
                    money(offer.amount, &offer.currency),
                    offer.property_id
                ),
                OfferReply::Counter(amount) => format!(
                    "Anotado: contraoferta de {} por {}. Se la paso al cliente.",
                    money(amount, &offer.currency),
                    offer.property_id
                ),
            },
        };
        Ok(reply(text))
    }

    /// The message after «Contraoferta»: its amount, or the question again.
    async fn counter_amount(
        &self,
        said: &Said<'_>,
        offer: Offer,
        text: &str,
    ) -> StoreResult<Answered> {
        let property = self.realestate.property(&offer.property_id).await?;
        let Some(by) = self.answerer(said, property.as_ref()).await? else {
            return Ok(Answered::No);
        };
        let amount = amounts(text).into_iter().map(|(amount, _)| amount).next();
        match amount {
            Some(amount) if amount >= LEAST_COUNTER => {
                self.answered(&offer, OfferReply::Counter(amount), &by, said)
                    .await
            }
            _ => Ok(reply(format!(
                "No veo el importe de la contraoferta para {}. Escribe la cifra completa, por \
                 ejemplo «250.000 €».",
                offer.property_id
            ))),
        }
    }
}

#[async_trait]
impl Presses for FollowUpPresses {
    async fn answer(&self, said: &Said<'_>) -> Result<Answered, StoreError> {
        if let Some(pressed) = said.pressed {
            let mut parts = pressed.splitn(3, ':');
            let (Some(kind), Some(id), Some(what)) = (parts.next(), parts.next(), parts.next())
            else {
                return Ok(Answered::No);
            };
            return match kind {
                "visit" => self.visit_outcome(said, id, what).await,
                "visit_feedback" => self.feedback(said, id, what).await,
                "offer" => self.offer(said, id, what).await,
                "counter" if what == "accept" => {
                    let Some(offer) = self.realestate.offer(id).await? else {
                        return Ok(Answered::No);
                    };
                    if offer.wa_id != *said.wa_id {
                        return Ok(Answered::No);
                    }
                    self.answered(&offer, OfferReply::Accept, "customer", said)
                        .await
                }
                _ => Ok(Answered::No),
            };
        }
        let Some(text) = said.text else {
            return Ok(Answered::No);
        };
        if let Some(offer) = self.realestate.counter_awaited_from(said.wa_id).await? {
            return self.counter_amount(said, offer, text).await;
        }
        if said.after == Some(VISIT_FEEDBACK) {
            return self.feedback_words(said, text).await;
        }
        Ok(Answered::No)
    }
}

fn reply(text: String) -> Answered {
    reply_as(AGENT, text)
}

fn reply_as(agent: &'static str, text: String) -> Answered {
    Answered::Reply(Reply {
        text,
        agent,
        buttons: Vec::new(),
    })
}

fn already(offer: &Offer) -> String {
    format!(
        "La oferta {} ya tiene respuesta: «{}».",
        offer.id,
        status_es(offer.status.as_str())
    )
}

fn status_es(status: &str) -> &'static str {
    match status {
        "done" => "hecha",
        "no_show" => "no vino",
        "cancelled" => "cancelada",
        "booked" => "reservada",
        "accepted" => "aceptada",
        "rejected" => "rechazada",
        "countered" => "contraoferta",
        "withdrawn" => "retirada",
        _ => "pendiente",
    }
}
