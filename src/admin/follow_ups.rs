//! Recording a visit's outcome or an offer's answer from the admin API and the console, as
//! the agent's and the owner's buttons do: the first to record wins, and a later attempt is a
//! conflict that says what was recorded, by whom.

use chrono::{DateTime, Utc};

use crate::admin::operations::AdminError;
use crate::realestate::follow_up::{Outcome, Reply, answer_offer, record_outcome};
use crate::realestate::{Appointment, Offer, RealEstateStore, Settled};
use crate::store::Store;

/// Records `word` (`done`, `no-show`, `cancelled`) for the appointment `id`, by `by`.
pub async fn outcome(
    realestate: &dyn RealEstateStore,
    store: &dyn Store,
    id: &str,
    word: &str,
    by: &str,
    now: DateTime<Utc>,
) -> Result<Appointment, AdminError> {
    let outcome = Outcome::parse(word).ok_or_else(|| {
        AdminError::BadRequest(format!("`{word}` is not done, no-show or cancelled"))
    })?;
    match record_outcome(realestate, store, id, outcome, by, now).await? {
        None => Err(AdminError::NotFound(format!("no appointment {id}"))),
        Some(Settled::Now(appointment)) => Ok(appointment),
        Some(Settled::Already(a)) => Err(AdminError::Conflict(format!(
            "{} is {} already (by {})",
            a.id,
            a.status.as_str(),
            a.follow_up.outcome_by.as_deref().unwrap_or("the customer")
        ))),
    }
}

/// Answers the offer `id` with `word` (`accept`, `reject`, `counter` and `amount`), by `by`.
pub async fn answer(
    realestate: &dyn RealEstateStore,
    store: &dyn Store,
    id: &str,
    word: &str,
    amount: Option<&str>,
    by: &str,
    now: DateTime<Utc>,
) -> Result<Offer, AdminError> {
    let reply = Reply::parse(word, amount).map_err(AdminError::BadRequest)?;
    match answer_offer(realestate, store, id, reply, by, now).await? {
        None => Err(AdminError::NotFound(format!("no offer {id}"))),
        Some(Settled::Now(offer)) => Ok(offer),
        Some(Settled::Already(offer)) => Err(AdminError::Conflict(format!(
            "{} is {} already (by {})",
            offer.id,
            offer.status.as_str(),
            offer.answer.answered_by.as_deref().unwrap_or("nobody yet")
        ))),
    }
}
