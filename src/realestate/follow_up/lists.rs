//! The lists the console, the admin API and the command line show: today's visits, the coming
//! ones, the ones over and waiting for an outcome; open offers and answered ones.

use chrono::{DateTime, Duration, NaiveTime, TimeZone, Utc};

use crate::realestate::{Appointment, AppointmentStatus, Offer, RealEstateStore};
use crate::store::StoreResult;

/// Which visits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppointmentView {
    /// Today's, in the agency's time zone, whatever their status.
    Today,
    /// From tomorrow on, for `UPCOMING_DAYS`.
    Upcoming,
    /// Started, still `booked`: no outcome recorded yet (the last `WAITING_DAYS`).
    Waiting,
}

impl AppointmentView {
    pub const ALL: [AppointmentView; 3] = [
        AppointmentView::Waiting,
        AppointmentView::Today,
        AppointmentView::Upcoming,
    ];

    pub fn parse(word: &str) -> Option<AppointmentView> {
        Self::ALL.into_iter().find(|v| v.as_str() == word.trim())
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AppointmentView::Today => "today",
            AppointmentView::Upcoming => "upcoming",
            AppointmentView::Waiting => "waiting",
        }
    }
}

/// How far ahead the upcoming visits go.
pub const UPCOMING_DAYS: u64 = 14;
/// How far back visits waiting for an outcome are looked for.
pub const WAITING_DAYS: i64 = 30;

fn midnight(tz: chrono_tz::Tz, day: chrono::NaiveDate) -> DateTime<Utc> {
    tz.from_local_datetime(&day.and_time(NaiveTime::MIN))
        .earliest()
        .map_or_else(|| day.and_time(NaiveTime::MIN).and_utc(), |d| d.to_utc())
}

/// The visits of `view` at `now`, by start.
pub async fn appointments(
    realestate: &dyn RealEstateStore,
    view: AppointmentView,
    now: DateTime<Utc>,
    tz: chrono_tz::Tz,
) -> StoreResult<Vec<Appointment>> {
    let today = now.with_timezone(&tz).date_naive();
    let tomorrow = midnight(tz, today + chrono::Days::new(1));
    Ok(match view {
        AppointmentView::Today => {
            realestate
                .appointments_between(midnight(tz, today), tomorrow)
                .await?
        }
        AppointmentView::Upcoming => {
            realestate
                .appointments_between(
                    tomorrow,
                    midnight(tz, today + chrono::Days::new(1 + UPCOMING_DAYS)),
                )
                .await?
        }
        AppointmentView::Waiting => realestate
            .appointments_between(now - Duration::days(WAITING_DAYS), now)
            .await?
            .into_iter()
            .filter(|a| a.status == AppointmentStatus::Booked)
            .collect(),
    })
}

/// Which offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferView {
    /// Waiting for the owner's answer, or for the customer's to a counter-offer.
    Open,
    Answered,
}

impl OfferView {
    pub fn parse(word: &str) -> Option<OfferView> {
        match word.trim() {
            "open" => Some(OfferView::Open),
            "answered" => Some(OfferView::Answered),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OfferView::Open => "open",
            OfferView::Answered => "answered",
        }
    }
}

/// How far back offers are listed.
pub const OFFER_DAYS: i64 = 365;

/// The offers of `view` of the last year, newest first.
pub async fn offers(
    realestate: &dyn RealEstateStore,
    view: OfferView,
    now: DateTime<Utc>,
) -> StoreResult<Vec<Offer>> {
    let mut offers = realestate
        .offers_created_since(now - Duration::days(OFFER_DAYS))
        .await?;
    offers.retain(|o| match view {
        OfferView::Open => o.status.is_open(),
        // A counter-offer is answered by the owner and open for the customer: in both.
        OfferView::Answered => o.answer.answered_at.is_some(),
    });
    offers.sort_by_key(|o| std::cmp::Reverse(o.created_at));
    Ok(offers)
}

/// A visit as the admin API and `--json` show it.
pub fn appointment_json(appointment: &Appointment, view: AppointmentView) -> serde_json::Value {
    serde_json::json!({
        "view": view.as_str(),
        "id": appointment.id,
        "property_id": appointment.property_id,
        "wa_id": appointment.wa_id.as_str(),
        "starts_at": appointment.starts_at,
        "status": appointment.status.as_str(),
        "agent": appointment.follow_up.agent,
        "outcome_at": appointment.follow_up.outcome_at,
        "outcome_by": appointment.follow_up.outcome_by,
    })
}

/// An offer as the admin API and `--json` show it.
pub fn offer_json(offer: &Offer) -> serde_json::Value {
    serde_json::json!({
        "id": offer.id,
        "property_id": offer.property_id,
        "wa_id": offer.wa_id.as_str(),
        "amount": offer.amount,
        "currency": offer.currency,
        "status": offer.status.as_str(),
        "open": offer.status.is_open(),
        "answered_at": offer.answer.answered_at,
        "answered_by": offer.answer.answered_by,
        "counter_amount": offer.answer.counter_amount,
        "created_at": offer.created_at,
    })
}
