//! `appointments` and `reminders` in MongoDB: [`AppointmentStore`].

use async_trait::async_trait;
use bson::doc;
use chrono::{DateTime, Utc};

use super::codec::{appointment, appointment_doc, by_start, date};
use super::{MongoRealEstate, replace_by_id};
use crate::domain::WaId;
use crate::realestate::model::{Appointment, AppointmentStatus};
use crate::realestate::store::AppointmentStore;
use crate::store::{Lane, StoreResult};

#[async_trait]
impl AppointmentStore for MongoRealEstate {
    async fn save_appointment(&self, appointment: &Appointment) -> StoreResult<()> {
        replace_by_id(&self.pool, "appointments", appointment_doc(appointment)).await
    }

    async fn appointment(&self, id: &str) -> StoreResult<Option<Appointment>> {
        self.find_one("appointments", id, appointment).await
    }

    async fn appointments_of(&self, wa_id: &WaId) -> StoreResult<Vec<Appointment>> {
        self.find_all(
            "appointments",
            doc! {"wa_id": wa_id.as_str()},
            by_start(),
            appointment,
        )
        .await
    }

    async fn appointments_for(&self, property_id: &str) -> StoreResult<Vec<Appointment>> {
        self.find_all(
            "appointments",
            doc! {"property_id": property_id},
            by_start(),
            appointment,
        )
        .await
    }

    async fn booked_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        self.find_all(
            "appointments",
            doc! {
                "status": AppointmentStatus::Booked.as_str(),
                "starts_at": {"$gte": date(from), "$lt": date(to)},
            },
            by_start(),
            appointment,
        )
        .await
    }

    async fn claim_reminder(&self, appointment_id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        let claim = doc! {"_id": appointment_id, "at": date(at)};
        if !self.insert_claim("reminders", claim).await? {
            return Ok(false);
        }
        // For operators reading the appointment; `reminders` is what decides. The claim is
        // taken either way, so a failure here must not make the caller think it is not theirs.
        let noted = self
            .pool
            .update_one(
                Lane::Work,
                "appointments",
                doc! {"_id": appointment_id},
                doc! {"$set": {"reminder_sent_at": date(at)}},
            )
            .await;
        if let Err(error) = noted {
            tracing::warn!(appointment_id, error = %error, "reminder_sent_at not recorded");
        }
        Ok(true)
    }

    async fn appointments_created_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        self.find_all(
            "appointments",
            doc! {"created_at": {"$gte": date(since)}},
            doc! {"created_at": 1, "_id": 1},
            appointment,
        )
        .await
    }
}
