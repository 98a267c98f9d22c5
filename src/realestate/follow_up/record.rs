//! What became of a visit or an offer, recorded the same way whoever records it: the agent's
//! or the owner's button, the console, the admin API or the command line. Each change is
//! conditional (the first to record wins, the others read it as recorded) and carries its
//! event and the notice the follow-up job sends, so nothing is said twice or lost in a crash.

use chrono::{DateTime, Utc};

use crate::realestate::{
    Appointment, AppointmentStatus, AppointmentStore, Offer, OfferAnswer, OfferStatus, OfferStore,
    Settled, Visit, VisitStore,
};
use crate::store::{BusinessEvent, Event, EventStore, StoreResult};

/// What an agent says became of a visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    NoShow,
    /// Called off at the last minute, not by the customer on WhatsApp.
    Cancelled,
}

impl Outcome {
    /// `done`, `no-show` (or `no_show`), `cancelled`: the command line's and the API's words.
    pub fn parse(word: &str) -> Option<Outcome> {
        match word.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "done" => Some(Outcome::Done),
            "no_show" => Some(Outcome::NoShow),
            "cancelled" | "canceled" => Some(Outcome::Cancelled),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.status().as_str()
    }

    pub fn status(self) -> AppointmentStatus {
        match self {
            Outcome::Done => AppointmentStatus::Done,
            Outcome::NoShow => AppointmentStatus::NoShow,
            Outcome::Cancelled => AppointmentStatus::Cancelled,
        }
    }
}

/// The visit record a done appointment becomes: one per appointment, whoever writes it.
pub fn visit_id(appointment_id: &str) -> String {
    format!("V-{}", appointment_id.trim_start_matches("A-"))
}

/// Records `outcome` for the booked appointment `id`, by `by` (`agent:Marta`, `operator:ana`,
/// `cli`). The first caller writes the change, the visit record (done), the event and the
/// customer's notice; later callers get the appointment as it was recorded. `None`: no such
/// appointment.
pub async fn record_outcome(
    realestate: &(impl AppointmentStore + VisitStore + ?Sized),
    events: &dyn EventStore,
    id: &str,
    outcome: Outcome,
    by: &str,
    now: DateTime<Utc>,
) -> StoreResult<Option<Settled<Appointment>>> {
    let settled = realestate
        .settle_appointment(id.trim(), outcome.status(), by, now)
        .await?;
    if let Some(Settled::Now(appointment)) = &settled {
        metrics::counter!("zaguan_visit_outcomes_total", "outcome" => outcome.as_str())
            .increment(1);
        tracing::info!(appointment_id = %appointment.id, outcome = outcome.as_str(), by, "visit outcome recorded");
        after_outcome(realestate, events, appointment).await?;
    }
    Ok(settled)
}

/// What follows a recorded outcome: the visit record and the event. Safe to run again (the
/// follow-up job does, before the customer's notice, in case a crash cut the first run).
pub async fn after_outcome(
    realestate: &(impl VisitStore + ?Sized),
    events: &dyn EventStore,
    appointment: &Appointment,
) -> StoreResult<()> {
    let by = appointment.follow_up.outcome_by.clone().unwrap_or_default();
    let at = appointment
        .follow_up
        .outcome_at
        .unwrap_or(appointment.starts_at);
    let event = match appointment.status {
        AppointmentStatus::Done => {
            let id = visit_id(&appointment.id);
            ensure_visit(realestate, appointment, &id).await?;
            BusinessEvent::VisitDone {
                appointment_id: appointment.id.clone(),
                visit_id: id,
                property_id: appointment.property_id.clone(),
                starts_at: appointment.starts_at,
                by,
            }
        }
        AppointmentStatus::NoShow => BusinessEvent::VisitNoShow {
            appointment_id: appointment.id.clone(),
            property_id: appointment.property_id.clone(),
            starts_at: appointment.starts_at,
            by,
        },
        AppointmentStatus::Booked | AppointmentStatus::Cancelled => return Ok(()),
    };
    events
        .insert_events(&[Event::keyed(&appointment.wa_id, event, at, "")])
        .await
}

/// Writes the visit record unless it is there (with the customer's feedback, perhaps).
async fn ensure_visit(
    realestate: &(impl VisitStore + ?Sized),
    appointment: &Appointment,
    id: &str,
) -> StoreResult<()> {
    let visits = realestate.visits_of(&appointment.wa_id).await?;
    if visits.iter().any(|v| v.id == id) {
        return Ok(());
    }
    let visit = Visit {
        id: id.to_owned(),
        property_id: appointment.property_id.clone(),
        wa_id: appointment.wa_id.clone(),
        visited_at: appointment.starts_at,
        outcome: None,
        feedback: None,
        rating: None,
    };
    realestate.upsert_visits(&[visit]).await
}

/// An answer to an offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Accept,
    Reject,
    /// A counter-offer of this many units of the offer's currency.
    Counter(u64),
}

impl Reply {
    /// `accept`, `reject`, `counter AMOUNT`: the command line's and the API's words.
    pub fn parse(word: &str, amount: Option<&str>) -> Result<Reply, String> {
        match word.trim().to_ascii_lowercase().as_str() {
            "accept" => Ok(Reply::Accept),
            "reject" => Ok(Reply::Reject),
            "counter" => {
                let amount = amount.ok_or("a counter-offer needs its amount: counter 250000")?;
                // Thousands may be grouped with dots, commas, spaces or underscores.
                let digits: String = amount
                    .chars()
                    .filter(|c| !matches!(c, '.' | ',' | ' ' | '_'))
                    .collect();
                match digits.parse::<u64>() {
                    Ok(units) if units > 0 => Ok(Reply::Counter(units)),
                    _ => Err(format!(
                        "`{amount}` is not an amount in whole units, like 250000 or 250.000"
                    )),
                }
            }
            other => Err(format!("`{other}` is not accept, reject or counter")),
        }
    }

    pub fn status(self) -> OfferStatus {
        match self {
            Reply::Accept => OfferStatus::Accepted,
            Reply::Reject => OfferStatus::Rejected,
            Reply::Counter(_) => OfferStatus::Countered,
        }
    }
}

/// The notice an answered offer carries: the customer hears the answer (and the agent of an
/// accepted one), unless the customer gave it.
pub fn answered_notice(status: OfferStatus) -> String {
    format!("answered:{}", status.as_str())
}

/// Answers the offer `id` with `reply`, by `by` (`owner:O-07`, `agent:A-01`, `operator:ana`,
/// `customer`, `cli`). An owner's answer is to a submitted offer; a customer's acceptance is
/// of a counter-offer. The first caller writes the change, the event and the notice; later
/// callers get the offer as it was recorded. `None`: no such offer.
pub async fn answer_offer(
    realestate: &(impl OfferStore + ?Sized),
    events: &dyn EventStore,
    id: &str,
    reply: Reply,
    by: &str,
    now: DateTime<Utc>,
) -> StoreResult<Option<Settled<Offer>>> {
    let id = id.trim();
    let Some(offer) = realestate.offer(id).await? else {
        return Ok(None);
    };
    let from = match (by, reply) {
        ("customer", Reply::Accept) => OfferStatus::Countered,
        _ => OfferStatus::Submitted,
    };
    if offer.status != from {
        return Ok(Some(Settled::Already(offer)));
    }
    let status = reply.status();
    let answer = OfferAnswer {
        answered_at: Some(now),
        answered_by: Some(by.to_owned()),
        counter_amount: match reply {
            Reply::Counter(amount) => Some(amount),
            _ => offer.answer.counter_amount,
        },
        notice: Some(answered_notice(status)),
        awaiting_counter_from: None,
    };
    let settled = realestate.answer_offer(id, from, status, &answer).await?;
    if let Some(Settled::Now(offer)) = &settled {
        metrics::counter!("zaguan_offer_answers_total", "status" => status.as_str()).increment(1);
        tracing::info!(offer_id = %offer.id, status = status.as_str(), by, "offer answered");
        let event = offer_event(offer, by);
        events
            .insert_events(&[Event::keyed(&offer.wa_id, event, now, "")])
            .await?;
    }
    Ok(settled)
}

fn offer_event(offer: &Offer, by: &str) -> BusinessEvent {
    let (offer_id, property_id, amount, currency, by) = (
        offer.id.clone(),
        offer.property_id.clone(),
        offer.amount,
        offer.currency.clone(),
        by.to_owned(),
    );
    match offer.status {
        OfferStatus::Countered => BusinessEvent::OfferCountered {
            offer_id,
            property_id,
            amount,
            counter_amount: offer.answer.counter_amount.unwrap_or(amount),
            currency,
            by,
        },
        OfferStatus::Rejected => BusinessEvent::OfferRejected {
            offer_id,
            property_id,
            amount,
            currency,
            by,
        },
        _ => BusinessEvent::OfferAccepted {
            offer_id,
            property_id,
            amount: offer.answer.counter_amount.unwrap_or(amount),
            currency,
            by,
        },
    }
}
