//! Visit reminders: from a configured time of the day before (19:00 by default, in the business
//! time zone), each customer with a visit booked for tomorrow gets one reminder. Inside
//! WhatsApp's 24-hour customer-service window it is a plain text; outside it only an approved
//! template is delivered, so it goes as the configured template with the visit's details as
//! parameters. Each reminder is claimed by unique insert before it is queued, so it is queued
//! once however many instances run; the outbox and the sender do the rest.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeZone, Utc};

use super::RealEstateStore;
use crate::domain::WaId;
use crate::store::{NewOutbox, Store, StoreError, Template};

/// How reminders are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ReminderSettings {
    /// From this local time on, tomorrow's visits are reminded.
    pub at: NaiveTime,
    pub timezone: chrono_tz::Tz,
    /// The approved template used outside the 24-hour window; its body takes the property,
    /// the day and time, and the address, as `{{1}}`, `{{2}}`, `{{3}}`.
    pub template: String,
    pub template_language: String,
    /// The business number reminders are sent from.
    pub phone_number_id: String,
    /// How often to look.
    pub every: Duration,
}

/// The reminder loop of one process.
pub struct Reminders {
    realestate: Arc<dyn RealEstateStore>,
    store: Arc<dyn Store>,
    settings: ReminderSettings,
}

impl Reminders {
    pub fn new(
        realestate: Arc<dyn RealEstateStore>,
        store: Arc<dyn Store>,
        settings: ReminderSettings,
    ) -> Self {
        Self {
            realestate,
            store,
            settings,
        }
    }

    /// Looks every `settings.every` until the process stops.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                match self.tick(Utc::now()).await {
                    Ok(0) => {}
                    Ok(queued) => tracing::info!(queued, "visit reminders queued"),
                    Err(error) => tracing::warn!("visit reminders not checked: {error}"),
                }
                tokio::time::sleep(self.settings.every).await;
            }
        })
    }

    /// Queues the reminders due at `now`; returns how many.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
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
            if !self.realestate.claim_reminder(&appointment.id, now).await? {
                continue;
            }
            let part = self
                .reminder(&appointment.wa_id, &title, &day, &address, now)
                .await?;
            self.store.insert_outbox(&[part]).await?;
            metrics::counter!("zaguan_reminders_total").increment(1);
            queued += 1;
        }
        Ok(queued)
    }

    /// Text inside the 24-hour window, the template outside it.
    async fn reminder(
        &self,
        wa_id: &WaId,
        title: &str,
        day: &str,
        address: &str,
        now: DateTime<Utc>,
    ) -> Result<NewOutbox, StoreError> {
        let last_inbound = self
            .store
            .conversation(wa_id)
            .await?
            .and_then(|c| c.last_inbound_at);
        let in_window = last_inbound.is_some_and(|at| now - at < chrono::Duration::hours(24));
        let text = format!(
            "Recordatorio: mañana, {day}, tienes la visita a {title} ({address}). Si necesitas \
             cambiarla o cancelarla, escríbenos por aquí."
        );
        let mut part = NewOutbox::text(wa_id.clone(), None, text, now);
        part.phone_number_id = Some(self.settings.phone_number_id.clone());
        if !in_window {
            part.template = Some(Template {
                name: self.settings.template.clone(),
                language: self.settings.template_language.clone(),
                parameters: vec![title.to_owned(), day.to_owned(), address.to_owned()],
            });
        }
        Ok(part)
    }
}
