//! Agents' calendars. [`ics`] reads an iCalendar feed into busy times and writes one; this
//! module publishes an agent's booked visits as `GET /calendar/{token}.ics`
//! (`staff.calendar_token`), the feed their phone's calendar subscribes to: listing, address,
//! the customer's name and number, a console link, a stable UID per visit, cancelled ones as
//! cancelled.

pub mod ics;
pub mod refresh;
pub mod slots;

use chrono::{DateTime, Duration, Utc};

use super::{
    Appointment, AppointmentStatus, AppointmentStore, PropertyStore, SlotStore, StaffMember,
    StaffStore,
};
use crate::domain::WaId;
use crate::store::StoreResult;

/// How far ahead an agent's own calendar is read: the furthest a visit can be offered
/// (three weeks), and a day more.
pub const AHEAD: Duration = Duration::days(22);
/// How far back the feed reaches: older visits are history, not plans.
const PAST: Duration = Duration::days(30);
/// A visit's length when its slot says nothing: the agency's default.
pub const DEFAULT_VISIT_MINUTES: u32 = 30;

/// The active member whose feed secret is `token`.
pub async fn member_by_token(
    store: &(impl StaffStore + ?Sized),
    token: &str,
) -> StoreResult<Option<StaffMember>> {
    // Compared in constant time: the token is the only key to the feed.
    Ok(store.staff().await?.into_iter().find(|member| {
        member.is_active()
            && member.calendar_token.as_deref().is_some_and(|own| {
                own.len() == token.len()
                    && subtle::ConstantTimeEq::ct_eq(own.as_bytes(), token.as_bytes()).into()
            })
    }))
}

/// Whether a slot's `agent` names this member: their id (slots computed from their day) or
/// their name (slots written by hand or by the demo).
pub fn is_theirs(agent: &str, member: &StaffMember) -> bool {
    agent == member.id || agent.trim().eq_ignore_ascii_case(member.name.trim())
}

/// Who the customers are (their profile names live with the conversations, not here).
#[async_trait::async_trait]
pub trait Customers: Send + Sync {
    async fn name_of(&self, wa_id: &WaId) -> Option<String>;
}

/// The member's visits from [`PAST`] on, as an iCalendar text. `console` is the console's
/// base address, for a link to each customer's conversation.
pub async fn agent_feed(
    store: &(impl AppointmentStore + PropertyStore + SlotStore + ?Sized),
    member: &StaffMember,
    customers: &dyn Customers,
    console: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<String> {
    let appointments = store
        .appointments_created_since(now - Duration::days(400))
        .await?;
    let mut events = Vec::new();
    for appointment in appointments.iter().filter(|a| {
        a.starts_at >= now - PAST
            && matches!(
                a.status,
                AppointmentStatus::Booked | AppointmentStatus::Cancelled
            )
    }) {
        let Some(slot) = store.slot(&appointment.slot_id).await? else {
            continue;
        };
        if !is_theirs(&slot.agent, member) {
            continue;
        }
        let property = store.property(&appointment.property_id).await?;
        let customer = customers.name_of(&appointment.wa_id).await;
        events.push(event(
            appointment,
            slot.minutes,
            property.as_ref(),
            customer,
            console,
        ));
    }
    events.sort_by_key(|e| (e.start, e.uid.clone()));
    Ok(ics::visits_calendar(
        &format!("Visitas · {}", member.name),
        &events,
    ))
}

fn event(
    appointment: &Appointment,
    minutes: u32,
    property: Option<&super::Property>,
    customer: Option<String>,
    console: Option<&str>,
) -> ics::VisitEvent {
    let minutes = if minutes == 0 {
        DEFAULT_VISIT_MINUTES
    } else {
        minutes
    };
    let customer = customer.unwrap_or_else(|| "cliente".to_owned());
    let number = format!("+{}", appointment.wa_id.as_str());
    let (title, address) = property.map_or_else(
        || (appointment.property_id.clone(), String::new()),
        |p| (p.title.clone(), p.address.clone()),
    );
    let url = console.map(|base| {
        format!(
            "{}/console/conversations/{}",
            base.trim_end_matches('/'),
            appointment.wa_id.as_str()
        )
    });
    let mut description = format!(
        "{} · {title}\nCliente: {customer} ({number})\nCita {}",
        appointment.property_id, appointment.id
    );
    if let Some(url) = &url {
        description.push_str(&format!("\n{url}"));
    }
    ics::VisitEvent {
        // Stable across reschedules: a phone moves the event rather than adding one.
        uid: format!("{}@zaguan", appointment.id),
        start: appointment.starts_at,
        end: appointment.starts_at + Duration::minutes(i64::from(minutes)),
        summary: format!("Visita {} · {customer}", appointment.property_id),
        location: address,
        description,
        url,
        cancelled: appointment.status == AppointmentStatus::Cancelled,
        updated: appointment.created_at,
    }
}

#[cfg(test)]
mod tests;
