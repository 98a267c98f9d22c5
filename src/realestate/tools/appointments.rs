//! The appointment assistant's tools: free visit slots, and booking, moving and cancelling a
//! visit. The three that change data ask the user to confirm first (their `confirmation`
//! checks everything `run` needs, so a confirmed action rarely fails); a slot is taken by an
//! atomic claim, so two customers can never book the same one.

use crate::realestate::calendar::slots::{self as agent_day, agent_claim};
use crate::realestate::{AppointmentStore, CalendarStore, PropertyStore, SlotStore, StaffStore};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{Duration, TimeZone};
use schemars::JsonSchema;
use serde::Deserialize;

use super::text::{self, Lookup, unavailable, when};
use crate::engine::attachments::ASK_PREFIX;
use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::{
    Appointment, AppointmentStatus, FollowUp, ListingStatus, MovedFrom, Notice, Property,
    RealEstateStore, Slot,
};
use crate::store::{Attachment, BusinessEvent, ListRow};

/// Most slots listed at once.
const MAX_SLOTS: usize = 12;
/// How far ahead slots are listed, at most.
const MAX_DAYS: i64 = 21;

pub struct ListAvailableSlots<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
}

impl<S: PropertyStore + SlotStore + StaffStore + CalendarStore + ?Sized> ListAvailableSlots<S> {
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SlotsArgs {
    #[schemars(description = "Id de la propiedad, p. ej. P-1001")]
    property_id: String,
    #[schemars(description = "Desde este día, YYYY-MM-DD (hoy si no se indica)")]
    from_date: Option<String>,
    #[schemars(description = "Cuántos días mirar (7 si no se indica)")]
    #[schemars(range(min = 1, max = MAX_DAYS))]
    days: Option<i64>,
}

#[async_trait]
impl<S: PropertyStore + SlotStore + StaffStore + CalendarStore + ?Sized> TypedTool
    for ListAvailableSlots<S>
{
    type Args = SlotsArgs;
    const NAME: &'static str = "list_available_slots";

    fn description(&self) -> String {
        "Huecos libres para visitar una propiedad, con su id (S-…) para \
         reservar. Por defecto, los próximos 7 días."
            .into()
    }

    async fn call(&self, args: SlotsArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let property = visitable(self.store.as_ref(), &args.property_id).await?;
        let days = args.days.unwrap_or(7);
        if !(1..=MAX_DAYS).contains(&days) {
            return Err(ToolError::InvalidArgs(format!(
                "days must be between 1 and {MAX_DAYS}"
            )));
        }
        let from = match &args.from_date {
            Some(date) => {
                let date = text::date_from_today(date, context)?;
                context
                    .timezone
                    .from_local_datetime(&date.and_hms_opt(0, 0, 0).expect("midnight"))
                    .earliest()
                    .map_or(context.now, |d| d.to_utc())
                    .max(context.now)
            }
            None => context.now,
        };
        let to = from + Duration::days(days);
        let free = free_slots(self.store.as_ref(), &property, from, to, context).await?;
        if free.is_empty() {
            return Ok(format!(
                "No quedan huecos libres para {} en esas fechas. Prueba otros días (hasta {MAX_DAYS} vista).",
                property.id
            ).into());
        }
        let mut out = format!(
            "Huecos libres para visitar {} ({}):",
            property.id, property.title
        );
        for slot in free.iter().take(MAX_SLOTS) {
            out.push_str(&format!(
                "\n- {} · {} ({} min, con {})",
                slot.id,
                when(slot.starts_at, context),
                slot.minutes,
                slot.agent
            ));
        }
        if free.len() > MAX_SLOTS {
            out.push_str(&format!("\n(y {} más)", free.len() - MAX_SLOTS));
        }
        // The words stay as recorded conversations know them; the list is shown besides.
        let rows = free
            .iter()
            .take(crate::outbound::graph::MAX_LIST_ROWS)
            .map(|slot| slot_row(slot, context))
            .collect();
        Ok(ToolOutput {
            text: out,
            attachments: vec![Attachment::List {
                text: format!("Elige un hueco para visitar {}.", property.id),
                rows,
            }],
            events: Vec::new(),
        })
    }
}

/// The assistant a tapped slot asks to book it.
const BOOKING_AGENT: &str = "appointment_assistant";

/// A free slot as a list row: the day and hour, then how long and with whom.
fn slot_row(slot: &Slot, context: &ToolContext) -> ListRow {
    use chrono::Datelike as _;
    let local = slot.starts_at.with_timezone(&context.timezone);
    let day = crate::domain::phrases::weekday_es(local.weekday());
    ListRow {
        id: format!("{ASK_PREFIX}{BOOKING_AGENT}:{}", slot.id),
        title: format!("{day} {}", local.format("%d/%m · %H:%M")),
        description: format!("{} min · con {}", slot.minutes, slot.agent)
            .chars()
            .take(crate::outbound::graph::MAX_ROW_DESCRIPTION)
            .collect(),
    }
}

/// A property that can be visited: it exists and is available.
async fn visitable(store: &(impl PropertyStore + ?Sized), id: &str) -> Result<Property, ToolError> {
    let property = text::listing(store, id).await?;
    if property.status != ListingStatus::Available {
        return Err(ToolError::Failed(format!(
            "{} is {} and cannot be visited",
            property.id,
            property.status.as_str()
        )));
    }
    Ok(property)
}

/// Unclaimed slots of a property in `[from, to)`: the ones written for it (`slots`), else
/// the free times of the agents who show it, computed from their day (and written as slots
/// once shown, so a booking finds them). A slot is taken when its own claim or its agent's
/// at that time is.
async fn free_slots(
    store: &(impl SlotStore + StaffStore + CalendarStore + ?Sized),
    property: &Property,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
    context: &ToolContext,
) -> Result<Vec<Slot>, ToolError> {
    let mut slots = store
        .slots(&property.id, from, to)
        .await
        .map_err(unavailable)?;
    let computed = slots.is_empty();
    if computed {
        let staff = store.staff().await.map_err(unavailable)?;
        for member in agent_day::agents_of(property, &staff) {
            // Their own calendar's busy times, as last read (a copy of another address is
            // not theirs any more).
            let busy: Vec<crate::realestate::calendar::ics::Busy> = match &member.calendar_url {
                Some(url) => store
                    .calendar(&member.id)
                    .await
                    .map_err(unavailable)?
                    .filter(|copy| &copy.url == url)
                    .map(|copy| {
                        copy.busy
                            .into_iter()
                            .map(|(start, end)| crate::realestate::calendar::ics::Busy {
                                start,
                                end,
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            for start in agent_day::free_starts(
                member,
                &context.business,
                context.timezone,
                crate::realestate::calendar::DEFAULT_VISIT_MINUTES,
                &busy,
                from,
                to,
            ) {
                slots.push(agent_day::slot_at(
                    property,
                    member,
                    start,
                    crate::realestate::calendar::DEFAULT_VISIT_MINUTES,
                ));
            }
        }
        slots.sort_by(|a, b| a.starts_at.cmp(&b.starts_at).then(a.id.cmp(&b.id)));
    }
    let mut ids: Vec<String> = slots.iter().map(|s| s.id.clone()).collect();
    ids.extend(slots.iter().map(|s| agent_claim(&s.agent, s.starts_at)));
    let taken = store.claimed_slots(&ids).await.map_err(unavailable)?;
    let free: Vec<Slot> = slots
        .into_iter()
        .filter(|s| !taken.contains(&s.id) && !taken.contains(&agent_claim(&s.agent, s.starts_at)))
        .collect();
    if computed {
        // Written before they are offered: booking one reads it back by id.
        store
            .upsert_slots(&free[..free.len().min(MAX_SLOTS)])
            .await
            .map_err(unavailable)?;
    }
    Ok(free)
}

/// Takes `slot` for `appointment_id`: its own claim, then its agent's at that time (one
/// agent, one place). `false` when either is taken; a half-taken claim is given back.
async fn take(
    store: &(impl SlotStore + ?Sized),
    slot: &Slot,
    appointment_id: &str,
) -> Result<bool, ToolError> {
    if !store
        .claim_slot(&slot.id, appointment_id)
        .await
        .map_err(unavailable)?
    {
        return Ok(false);
    }
    let agent = agent_claim(&slot.agent, slot.starts_at);
    if store
        .claim_slot(&agent, appointment_id)
        .await
        .map_err(unavailable)?
    {
        return Ok(true);
    }
    store
        .release_slot(&slot.id, appointment_id)
        .await
        .map_err(unavailable)?;
    Ok(false)
}

/// Gives back what [`take`] took for `appointment_id` on the slot `slot_id`.
async fn give_back(
    store: &(impl SlotStore + ?Sized),
    slot_id: &str,
    appointment_id: &str,
) -> Result<(), ToolError> {
    store
        .release_slot(slot_id, appointment_id)
        .await
        .map_err(unavailable)?;
    if let Some(slot) = store.slot(slot_id).await.map_err(unavailable)? {
        store
            .release_slot(&agent_claim(&slot.agent, slot.starts_at), appointment_id)
            .await
            .map_err(unavailable)?;
    }
    Ok(())
}

/// A slot that can be booked now: it exists, is in the future, is free, and its property can
/// be visited.
/// A future slot of a listing that can be visited. `free`: also not taken (what the user is
/// shown before confirming); a run leaves that to the atomic claim, which a replayed step
/// holding the slot already passes.
async fn bookable(
    store: &(impl PropertyStore + SlotStore + ?Sized),
    slot_id: &str,
    context: &ToolContext,
    free: bool,
) -> Result<(Slot, Property), ToolError> {
    let slot = store
        .slot(slot_id.trim())
        .await
        .map_err(unavailable)?
        .ok_or_else(|| {
            ToolError::InvalidArgs(format!(
                "there is no slot `{slot_id}`; use an id from list_available_slots (like S-P1001-202611271000)"
            ))
        })?;
    if slot.starts_at <= context.now {
        return Err(ToolError::InvalidArgs(format!(
            "the slot {} has already started; list the available slots again",
            slot.id
        )));
    }
    let taken = if free {
        store
            .claimed_slots(std::slice::from_ref(&slot.id))
            .await
            .map_err(unavailable)?
    } else {
        Default::default()
    };
    if taken.contains(&slot.id) {
        return Err(ToolError::Failed(format!(
            "the slot {} is no longer available; offer the user other slots",
            slot.id
        )));
    }
    let property = visitable(store, &slot.property_id).await?;
    Ok((slot, property))
}

/// The user's own booked, future appointment.
async fn own_booking(
    store: &(impl AppointmentStore + ?Sized),
    appointment_id: &str,
    context: &ToolContext,
) -> Result<Appointment, ToolError> {
    let appointment = store
        .appointment(appointment_id.trim())
        .await
        .map_err(unavailable)?
        .filter(|a| a.wa_id == context.wa_id)
        .ok_or_else(|| {
            ToolError::InvalidArgs(format!(
                "the user has no appointment `{appointment_id}`; see list_my_appointments"
            ))
        })?;
    if appointment.status != AppointmentStatus::Booked || appointment.starts_at <= context.now {
        return Err(ToolError::Failed(format!(
            "the appointment {} is {} and cannot be changed",
            appointment.id,
            if appointment.status == AppointmentStatus::Booked {
                "in the past"
            } else {
                appointment.status.as_str()
            }
        )));
    }
    Ok(appointment)
}

/// The id of the appointment the call being run books: the same when the step is replayed.
fn new_appointment_id(slot: &Slot, context: &ToolContext) -> String {
    format!(
        "A-{}-{}",
        slot.id.trim_start_matches("S-"),
        &context.call_key()[..6]
    )
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BookArgs {
    #[schemars(description = "Id del hueco, p. ej. S-P1001-202611271000")]
    slot_id: String,
}

pub struct BookAppointment<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
}

impl<S: PropertyStore + SlotStore + AppointmentStore + ?Sized> BookAppointment<S> {
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl<S: PropertyStore + SlotStore + AppointmentStore + ?Sized> TypedTool for BookAppointment<S> {
    type Args = BookArgs;
    const NAME: &'static str = "book_appointment";
    const CONFIRMS: bool = true;

    fn description(&self) -> String {
        "Reserva una visita en un hueco libre (id S-… de list_available_slots). \
         El usuario confirmará con un botón antes de que se reserve."
            .into()
    }

    async fn confirm(&self, args: &BookArgs, context: &ToolContext) -> Result<String, ToolError> {
        let (slot, property) = bookable(self.store.as_ref(), &args.slot_id, context, true).await?;
        Ok(format!(
            "Visita a {} ({}, {}) el {} con {}",
            property.id,
            property.title,
            property.address,
            when(slot.starts_at, context),
            slot.agent
        ))
    }

    async fn call(&self, args: BookArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (slot, property) = bookable(self.store.as_ref(), &args.slot_id, context, false).await?;
        let id = new_appointment_id(&slot, context);
        if !take(self.store.as_ref(), &slot, &id).await? {
            return Err(ToolError::Failed(format!(
                "the slot {} was just taken by someone else; it is no longer available — offer the user other slots",
                slot.id
            )));
        }
        let booked = self.store.appointment(&id).await.map_err(unavailable)?;
        if booked.is_none() {
            let appointment = Appointment {
                id: id.clone(),
                property_id: property.id.clone(),
                slot_id: slot.id.clone(),
                wa_id: context.wa_id.clone(),
                starts_at: slot.starts_at,
                status: AppointmentStatus::Booked,
                created_at: context.now,
                reminder_sent_at: None,
                moved_from: None,
                follow_up: FollowUp {
                    agent: Some(slot.agent.clone()),
                    minutes: Some(slot.minutes),
                    notice: Some(Notice::Booked.key(slot.starts_at)),
                    ..Default::default()
                },
            };
            self.store
                .save_appointment(&appointment)
                .await
                .map_err(unavailable)?;
        }
        Ok(ToolOutput::with_event(
            format!(
                "Visita reservada ({id}): {} ({}), {} con {}. Recuérdale la dirección y que puede \
             cambiarla o cancelarla por aquí.",
                property.title,
                property.address,
                when(slot.starts_at, context),
                slot.agent
            ),
            BusinessEvent::AppointmentBooked {
                appointment_id: id.clone(),
                property_id: property.id.clone(),
                starts_at: slot.starts_at,
            },
        ))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RescheduleArgs {
    #[schemars(description = "Id de la cita, p. ej. A-P1001-202611271000-123")]
    appointment_id: String,
    #[schemars(description = "Id del nuevo hueco (S-…)")]
    slot_id: String,
}

pub struct RescheduleAppointment<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
}

impl<S: PropertyStore + SlotStore + AppointmentStore + ?Sized> RescheduleAppointment<S> {
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }

    async fn check(
        &self,
        args: &RescheduleArgs,
        context: &ToolContext,
        free: bool,
    ) -> Result<(Appointment, Slot, Property), ToolError> {
        let appointment = own_booking(self.store.as_ref(), &args.appointment_id, context).await?;
        let (slot, property) = bookable(self.store.as_ref(), &args.slot_id, context, free).await?;
        if slot.property_id != appointment.property_id {
            return Err(ToolError::InvalidArgs(format!(
                "the slot {} is for {}, but the appointment is for {}; to visit another property book a new appointment",
                slot.id, slot.property_id, appointment.property_id
            )));
        }
        Ok((appointment, slot, property))
    }
}

#[async_trait]
impl<S: PropertyStore + SlotStore + AppointmentStore + ?Sized> TypedTool
    for RescheduleAppointment<S>
{
    type Args = RescheduleArgs;
    const NAME: &'static str = "reschedule_appointment";
    const CONFIRMS: bool = true;

    fn description(&self) -> String {
        "Cambia una visita ya reservada (A-…) a otro hueco libre de la misma \
         propiedad. El usuario confirmará con un botón."
            .into()
    }

    async fn confirm(
        &self,
        args: &RescheduleArgs,
        context: &ToolContext,
    ) -> Result<String, ToolError> {
        let (appointment, slot, property) = self.check(args, context, true).await?;
        Ok(format!(
            "Cambiar la visita a {} ({}) del {} al {}",
            property.id,
            property.title,
            when(appointment.starts_at, context),
            when(slot.starts_at, context)
        ))
    }

    async fn call(
        &self,
        args: RescheduleArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let (mut appointment, slot, property) = self.check(&args, context, false).await?;
        let moved = match appointment.moved_from.clone() {
            // Moved there already: this step is a replay; finish what it left.
            Some(from) if appointment.slot_id == slot.id => from,
            _ => {
                if !take(self.store.as_ref(), &slot, &appointment.id).await? {
                    return Err(ToolError::Failed(format!(
                        "the slot {} was just taken; the visit stays as it was — offer other slots",
                        slot.id
                    )));
                }
                let from = MovedFrom {
                    slot_id: std::mem::replace(&mut appointment.slot_id, slot.id.clone()),
                    starts_at: std::mem::replace(&mut appointment.starts_at, slot.starts_at),
                };
                appointment.moved_from = Some(from.clone());
                appointment.reminder_sent_at = None;
                appointment.follow_up.agent = Some(slot.agent.clone());
                appointment.follow_up.minutes = Some(slot.minutes);
                appointment.follow_up.notice = Some(Notice::Moved.key(slot.starts_at));
                self.store
                    .save_appointment(&appointment)
                    .await
                    .map_err(unavailable)?;
                from
            }
        };
        let previous_starts_at = moved.starts_at;
        give_back(self.store.as_ref(), &moved.slot_id, &appointment.id).await?;
        Ok(ToolOutput::with_event(
            format!(
                "Visita cambiada ({}): {} ({}), ahora el {} con {}.",
                appointment.id,
                property.title,
                property.address,
                when(slot.starts_at, context),
                slot.agent
            ),
            BusinessEvent::AppointmentRescheduled {
                appointment_id: appointment.id.clone(),
                property_id: property.id.clone(),
                previous_starts_at,
                starts_at: slot.starts_at,
            },
        ))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CancelArgs {
    #[schemars(description = "Id de la cita (A-…)")]
    appointment_id: String,
}

pub struct CancelAppointment<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
}

impl<S: PropertyStore + SlotStore + AppointmentStore + ?Sized> CancelAppointment<S> {
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl<S: PropertyStore + SlotStore + AppointmentStore + ?Sized> TypedTool for CancelAppointment<S> {
    type Args = CancelArgs;
    const NAME: &'static str = "cancel_appointment";
    const CONFIRMS: bool = true;

    fn description(&self) -> String {
        "Cancela una visita reservada (A-…). El usuario confirmará con un botón.".into()
    }

    async fn confirm(&self, args: &CancelArgs, context: &ToolContext) -> Result<String, ToolError> {
        let appointment = own_booking(self.store.as_ref(), &args.appointment_id, context).await?;
        let property = text::listing(self.store.as_ref(), &appointment.property_id).await?;
        Ok(format!(
            "Cancelar la visita a {} ({}) del {}",
            property.id,
            property.title,
            when(appointment.starts_at, context)
        ))
    }

    async fn call(&self, args: CancelArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let cancelled = self
            .store
            .appointment(args.appointment_id.trim())
            .await
            .map_err(unavailable)?
            .filter(|a| a.wa_id == context.wa_id && a.status == AppointmentStatus::Cancelled);
        let appointment = match cancelled {
            // Cancelled already: this step is a replay; finish what it left.
            Some(appointment) => appointment,
            None => {
                let mut appointment =
                    own_booking(self.store.as_ref(), &args.appointment_id, context).await?;
                appointment.status = AppointmentStatus::Cancelled;
                appointment.follow_up.notice = Some(Notice::Cancelled.key(appointment.starts_at));
                self.store
                    .save_appointment(&appointment)
                    .await
                    .map_err(unavailable)?;
                appointment
            }
        };
        give_back(self.store.as_ref(), &appointment.slot_id, &appointment.id).await?;
        Ok(ToolOutput::with_event(
            format!(
                "Visita {} cancelada ({}). El hueco queda libre para otros.",
                appointment.id,
                when(appointment.starts_at, context)
            ),
            BusinessEvent::AppointmentCancelled {
                appointment_id: appointment.id.clone(),
                property_id: appointment.property_id.clone(),
                starts_at: appointment.starts_at,
            },
        ))
    }
}

pub struct ListMyAppointments<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
}

impl<S: AppointmentStore + PropertyStore + ?Sized> ListMyAppointments<S> {
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl<S: AppointmentStore + PropertyStore + ?Sized> TypedTool for ListMyAppointments<S> {
    type Args = text::LookupArgs;
    const NAME: &'static str = "list_my_appointments";

    fn description(&self) -> String {
        "Las visitas reservadas del usuario que escribe (próximas primero); un \
         agente de la agencia puede pedir las de un cliente o una propiedad."
            .into()
    }

    async fn call(
        &self,
        args: text::LookupArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let appointments = match text::lookup(args, context)? {
            Lookup::Customer(wa_id) => self.store.appointments_of(&wa_id).await,
            Lookup::Property(id) => self.store.appointments_for(&id).await,
        }
        .map_err(unavailable)?;
        let upcoming: Vec<&Appointment> = appointments
            .iter()
            .filter(|a| a.status == AppointmentStatus::Booked && a.starts_at > context.now)
            .collect();
        if upcoming.is_empty() {
            return Ok("No hay visitas reservadas próximamente.".into());
        }
        let mut out = String::from("Visitas reservadas:");
        for a in upcoming {
            let title = match self.store.property(&a.property_id).await {
                Ok(Some(p)) => format!("{} ({})", p.title, p.address),
                _ => a.property_id.clone(),
            };
            out.push_str(&format!(
                "\n- {} · {} · {title}",
                a.id,
                when(a.starts_at, context)
            ));
        }
        Ok(out.into())
    }
}
