//! Visit reminders: from a configured time of the day before (19:00 by default, in the business
//! time zone), each customer with a visit booked for tomorrow gets one reminder, like any
//! reply. A reminder never comes less than `ZAGUAN_REMINDER_MIN_NOTICE` (3 h) after the booking:
//! a visit booked at 19:30 for tomorrow morning is reminded two hours before it instead, as is a
//! visit booked for the same day; one too close for that gets none (its confirmation is fresh).
//! Each reminder goes in the conversation's language (through guard_translator) and in the history, so
//! when the customer answers «¿me lo puedes pasar al viernes?» the assistant knows what about.
//! Inside WhatsApp's 24-hour customer-service window it is a plain text; outside it only an
//! approved template is delivered, so it goes as the configured template with the visit's
//! details as parameters. It names the agency and its contact lines from the business file.
//! Each reminder is claimed by unique insert before it is queued, so it
//! is queued once however many instances run; the outbox and the sender do the rest.

use crate::realestate::{AppointmentStore, PropertyStore};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeZone, Utc};

use super::RealEstateStore;
use crate::engine::{Engine, EngineError, Notified, Outreach};
use crate::outbound::governor;
use crate::runtime::{PeriodicJob, spawn_every};
use crate::templates::{Purpose, TemplateValue};

/// The `agent` of reminders in the history.
pub const REMINDER_AGENT: &str = "visit_reminder";

/// `ZAGUAN_REMINDER_MIN_NOTICE`'s default.
pub const DEFAULT_MIN_NOTICE: Duration = Duration::from_secs(3 * 3600);

/// How long before a visit a reminder goes on the day itself.
const SAME_DAY_LEAD: chrono::Duration = chrono::Duration::hours(2);

/// When the reminder of a visit at `starts_at`, booked at `booked_at`, is due: the configured
/// time of the day before, or two hours before the visit when that is too soon after the
/// booking; `None` when both are.
pub fn reminder_due(
    settings: &ReminderSettings,
    starts_at: DateTime<Utc>,
    booked_at: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let tz = settings.timezone;
    let earliest = booked_at
        + chrono::Duration::from_std(settings.min_notice).unwrap_or(chrono::Duration::MAX);
    let day_before = starts_at.with_timezone(&tz).date_naive() - chrono::Days::new(1);
    let evening_before = tz
        .from_local_datetime(&day_before.and_time(settings.at))
        .earliest()
        .map(|at| at.to_utc());
    evening_before
        .filter(|due| *due >= earliest)
        .or_else(|| Some(starts_at - SAME_DAY_LEAD).filter(|due| *due >= earliest))
}

/// How reminders are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ReminderSettings {
    /// From this local time on, tomorrow's visits are reminded.
    pub at: NaiveTime,
    /// The least time between a booking and its reminder (`ZAGUAN_REMINDER_MIN_NOTICE`).
    pub min_notice: Duration,
    pub timezone: chrono_tz::Tz,
    /// The business number reminders are sent from.
    pub phone_number_id: String,
    /// How often to look.
    pub every: Duration,
}

/// The reminder loop of one process.
pub struct Reminders<S: ?Sized = dyn RealEstateStore> {
    realestate: Arc<S>,
    /// Says them: translation, outbox, history.
    engine: Arc<Engine>,
    settings: ReminderSettings,
}

impl<S: AppointmentStore + PropertyStore + ?Sized> PeriodicJob for Reminders<S> {
    const DONE: Option<&'static str> = Some("visit reminders queued");
    const FAILED: &'static str = "visit reminders not checked";
    type Error = EngineError;

    async fn round(&self, now: DateTime<Utc>) -> Result<usize, EngineError> {
        self.tick(now).await
    }
}

impl<S: AppointmentStore + PropertyStore + ?Sized> Reminders<S> {
    pub fn new(realestate: Arc<S>, engine: Arc<Engine>, settings: ReminderSettings) -> Self {
        Self {
            realestate,
            engine,
            settings,
        }
    }

    /// Looks every `settings.every` until the process stops.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        let every = self.settings.every;
        spawn_every(self, every)
    }

    /// Queues the reminders due at `now`; returns how many.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<usize, EngineError> {
        let tz = self.settings.timezone;
        // Every visit a reminder may be due for: from now to the end of tomorrow.
        let day_after = now.with_timezone(&tz).date_naive() + chrono::Days::new(2);
        let Some(until) = tz
            .from_local_datetime(&day_after.and_time(NaiveTime::MIN))
            .earliest()
            .map(|d| d.to_utc())
        else {
            return Ok(0);
        };
        let mut queued = 0;
        for appointment in self.realestate.booked_between(now, until).await? {
            if appointment.reminder_sent_at.is_some() {
                continue;
            }
            let due = reminder_due(
                &self.settings,
                appointment.starts_at,
                appointment.created_at,
            );
            if due.is_none_or(|due| due > now) {
                continue;
            }
            let property = self.realestate.property(&appointment.property_id).await?;
            let (title, address) = property
                .map(|p| (p.title, p.address))
                .unwrap_or_else(|| (appointment.property_id.clone(), String::new()));
            let local = appointment.starts_at.with_timezone(&tz);
            let when = if local.date_naive() == now.with_timezone(&tz).date_naive() {
                format!("hoy a las {}", local.format("%H:%M"))
            } else {
                format!(
                    "mañana, {}",
                    crate::domain::phrases::moment(Some("es"), local.naive_local())
                )
            };
            let place = if address.is_empty() {
                title.clone()
            } else {
                format!("{title} ({address})")
            };
            // An opted-out customer's reminder is not claimed: opting back in before the
            // evening still brings it.
            if !governor::may_reach(
                self.engine.store().as_ref(),
                &appointment.wa_id,
                Purpose::VisitReminder,
            )
            .await?
            {
                continue;
            }
            if !self.realestate.claim_reminder(&appointment.id, now).await? {
                continue;
            }
            let mut text = format!(
                "Recordatorio de {}: {when}, tienes la visita a {place}. Si necesitas cambiarla o \
                 cancelarla, escríbenos por aquí.",
                self.engine.business_name()
            );
            if let Some(contact) = self.engine.business_contact() {
                text.push_str(&format!(" Si prefieres llamar: {contact}."));
            }
            let values = [
                ("property", title.into()),
                ("when", TemplateValue::Moment(local.naive_local())),
                ("address", address.into()),
                ("business", self.engine.business_name().into()),
            ];
            let step = format!("reminder:{}", appointment.id);
            let notified = self
                .engine
                .notify(
                    Outreach {
                        to: &appointment.wa_id,
                        text: &text,
                        agent: REMINDER_AGENT,
                        phone_number_id: &self.settings.phone_number_id,
                        purpose: Purpose::VisitReminder,
                        values: &values,
                        step: &step,
                        step_at: appointment.starts_at,
                        buttons: &[],
                    },
                    now,
                )
                .await?;
            if let Notified::Queued(_) = notified {
                metrics::counter!("zaguan_reminders_total").increment(1);
                queued += 1;
            }
        }
        Ok(queued)
    }
}
