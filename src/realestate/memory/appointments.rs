//! `appointments` and `reminders` in memory: [`AppointmentStore`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{MemoryRealEstate, by_start};
use crate::domain::WaId;
use crate::realestate::model::{Appointment, AppointmentStatus, Notice};
use crate::realestate::store::{AppointmentStore, Settled};
use crate::store::StoreResult;

#[async_trait]
impl AppointmentStore for MemoryRealEstate {
    async fn save_appointment(&self, appointment: &Appointment) -> StoreResult<()> {
        self.lock()
            .appointments
            .insert(appointment.id.clone(), appointment.clone());
        Ok(())
    }

    async fn appointment(&self, id: &str) -> StoreResult<Option<Appointment>> {
        Ok(self.lock().appointments.get(id).cloned())
    }

    async fn appointments_of(&self, wa_id: &WaId) -> StoreResult<Vec<Appointment>> {
        let appointments = self
            .lock()
            .appointments
            .values()
            .filter(|a| a.wa_id == *wa_id)
            .cloned()
            .collect();
        Ok(by_start(appointments, |a| a.starts_at, |a| &a.id))
    }

    async fn appointments_for(&self, property_id: &str) -> StoreResult<Vec<Appointment>> {
        let appointments = self
            .lock()
            .appointments
            .values()
            .filter(|a| a.property_id == property_id)
            .cloned()
            .collect();
        Ok(by_start(appointments, |a| a.starts_at, |a| &a.id))
    }

    async fn booked_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        let appointments = self
            .lock()
            .appointments
            .values()
            .filter(|a| {
                a.status == AppointmentStatus::Booked && from <= a.starts_at && a.starts_at < to
            })
            .cloned()
            .collect();
        Ok(by_start(appointments, |a| a.starts_at, |a| &a.id))
    }

    async fn claim_reminder(&self, appointment_id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        let mut inner = self.lock();
        if !inner.reminders.insert(appointment_id.to_owned()) {
            return Ok(false);
        }
        if let Some(appointment) = inner.appointments.get_mut(appointment_id) {
            appointment.reminder_sent_at = Some(at);
        }
        Ok(true)
    }

    async fn appointments_created_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        let mut found: Vec<Appointment> = self
            .lock()
            .appointments
            .values()
            .filter(|a| a.created_at >= since)
            .cloned()
            .collect();
        found.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(found)
    }

    async fn appointments_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        let appointments = self
            .lock()
            .appointments
            .values()
            .filter(|a| from <= a.starts_at && a.starts_at < to)
            .cloned()
            .collect();
        Ok(by_start(appointments, |a| a.starts_at, |a| &a.id))
    }

    async fn settle_appointment(
        &self,
        id: &str,
        status: AppointmentStatus,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<Settled<Appointment>>> {
        let mut inner = self.lock();
        let Some(appointment) = inner.appointments.get_mut(id) else {
            return Ok(None);
        };
        if appointment.status != AppointmentStatus::Booked {
            return Ok(Some(Settled::Already(appointment.clone())));
        }
        appointment.status = status;
        appointment.follow_up.outcome_at = Some(at);
        appointment.follow_up.outcome_by = Some(by.to_owned());
        if let Some(notice) = Notice::after(status) {
            appointment.follow_up.notice = Some(notice.key(at));
        }
        Ok(Some(Settled::Now(appointment.clone())))
    }

    async fn notices_due(&self, limit: usize) -> StoreResult<Vec<Appointment>> {
        let appointments = self
            .lock()
            .appointments
            .values()
            .filter(|a| a.follow_up.notice.is_some())
            .cloned()
            .collect();
        let mut due = by_start(appointments, |a| a.starts_at, |a| &a.id);
        due.truncate(limit);
        Ok(due)
    }

    async fn clear_notice(&self, id: &str, notice: &str) -> StoreResult<()> {
        if let Some(appointment) = self.lock().appointments.get_mut(id)
            && appointment.follow_up.notice.as_deref() == Some(notice)
        {
            appointment.follow_up.notice = None;
        }
        Ok(())
    }

    async fn outcomes_unasked(
        &self,
        before: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<Appointment>> {
        let appointments = self
            .lock()
            .appointments
            .values()
            .filter(|a| {
                a.status == AppointmentStatus::Booked
                    && a.starts_at < before
                    && a.follow_up.outcome_asked_at.is_none()
            })
            .cloned()
            .collect();
        let mut due = by_start(appointments, |a| a.starts_at, |a| &a.id);
        due.truncate(limit);
        Ok(due)
    }

    async fn claim_outcome_question(&self, id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        let mut inner = self.lock();
        match inner.appointments.get_mut(id) {
            Some(appointment) if appointment.follow_up.outcome_asked_at.is_none() => {
                appointment.follow_up.outcome_asked_at = Some(at);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
