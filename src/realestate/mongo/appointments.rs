//! `appointments` and `reminders` in MongoDB: [`AppointmentStore`].

use async_trait::async_trait;
use bson::{Bson, doc};
use chrono::{DateTime, Utc};

use super::codec::{appointment, appointment_doc, by_start, date};
use super::{MongoRealEstate, replace_by_id};
use crate::domain::WaId;
use crate::realestate::model::{Appointment, AppointmentStatus, Notice};
use crate::realestate::store::{AppointmentStore, Settled};
use crate::store::pool::Find;
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

    async fn appointments_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        self.find_all(
            "appointments",
            doc! {"starts_at": {"$gte": date(from), "$lt": date(to)}},
            by_start(),
            appointment,
        )
        .await
    }

    async fn settle_appointment(
        &self,
        id: &str,
        status: AppointmentStatus,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<Settled<Appointment>>> {
        // Only from `booked`: the first to record wins, and the others read what it recorded.
        let mut set = doc! {
            "status": status.as_str(),
            "outcome_at": date(at),
            "outcome_by": by,
        };
        if let Some(notice) = Notice::after(status) {
            set.insert("notice", notice.key(at));
        }
        let changed = self
            .pool
            .update_one(
                Lane::Work,
                "appointments",
                doc! {"_id": id, "status": AppointmentStatus::Booked.as_str()},
                doc! {"$set": set},
            )
            .await?
            .modified_count
            == 1;
        let found = self.appointment(id).await?;
        Ok(found.map(|a| {
            if changed {
                Settled::Now(a)
            } else {
                Settled::Already(a)
            }
        }))
    }

    async fn notices_due(&self, limit: usize) -> StoreResult<Vec<Appointment>> {
        self.find_some(
            "appointments",
            doc! {"notice": {"$type": "string"}},
            Find::sorted(by_start()).limit(limit),
            appointment,
        )
        .await
    }

    async fn clear_notice(&self, id: &str, notice: &str) -> StoreResult<()> {
        self.pool
            .update_one(
                Lane::Work,
                "appointments",
                doc! {"_id": id, "notice": notice},
                doc! {"$set": {"notice": Bson::Null}},
            )
            .await?;
        Ok(())
    }

    async fn outcomes_unasked(
        &self,
        before: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<Appointment>> {
        self.find_some(
            "appointments",
            doc! {
                "status": AppointmentStatus::Booked.as_str(),
                "starts_at": {"$lt": date(before)},
                "outcome_asked_at": Bson::Null,
            },
            Find::sorted(by_start()).limit(limit),
            appointment,
        )
        .await
    }

    async fn claim_outcome_question(&self, id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        Ok(self
            .pool
            .update_one(
                Lane::Work,
                "appointments",
                doc! {"_id": id, "outcome_asked_at": Bson::Null},
                doc! {"$set": {"outcome_asked_at": date(at)}},
            )
            .await?
            .modified_count
            == 1)
    }
}
