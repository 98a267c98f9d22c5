//! Visit reminders: from a configured time of the day before (19:00 by default, in the business
//! time zone), each customer with a visit booked for tomorrow gets one reminder, like any
//! reply: in the conversation's language (through guard_translator) and in the history, so
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
use crate::templates::Purpose;

/// The `agent` of reminders in the history.
pub const REMINDER_AGENT: &str = "visit_reminder";

/// How reminders are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ReminderSettings {
    /// From this local time on, tomorrow's visits are reminded.
    pub at: NaiveTime,
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
        let local = now.with_timezone(&tz);
        if local.time() < self.settings.at {
            return Ok(0);
        }
        let tomorrow = local.date_naive() + chrono::Days::new(1);
        let start = |date: chrono::NaiveDate| {
            tz.from_local_datetime(&date.and_time(NaiveTime::MIN))
                .earliest()
                .map(|d| d.to_utc())
        };
        let (Some(from), Some(to)) = (start(tomorrow), start(tomorrow + chrono::Days::new(1)))
        else {
            return Ok(0);
        };
        let mut queued = 0;
        for appointment in self.realestate.booked_between(from, to).await? {
            if appointment.reminder_sent_at.is_some() {
                continue;
            }
            let property = self.realestate.property(&appointment.property_id).await?;
            let (title, address) = property
                .map(|p| (p.title, p.address))
                .unwrap_or_else(|| (appointment.property_id.clone(), String::new()));
            let day = appointment
                .starts_at
                .with_timezone(&tz)
                .format("%d/%m a las %H:%M")
                .to_string();
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
                "Recordatorio de {}: mañana, {day}, tienes la visita a {title} ({address}). Si \
                 necesitas cambiarla o cancelarla, escríbenos por aquí.",
                self.engine.business_name()
            );
            if let Some(contact) = self.engine.business_contact() {
                text.push_str(&format!(" Si prefieres llamar: {contact}."));
            }
            let values = [
                ("property", title),
                ("when", day),
                ("address", address),
                ("business", self.engine.business_name()),
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
