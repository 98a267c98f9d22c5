//! The BSON form of the business's records (properties, owners, staff, slots, appointments,
//! visits, offers, requests, alerts): one function per direction and record.

use crate::domain::GeoPoint;
use crate::domain::WaId;
use crate::realestate::model::{
    Alert, AlertCriteria, Appointment, CallbackRequest, FollowUp, ListingChange, ListingRequest,
    MovedFrom, Offer, OfferAnswer, Owner, Property, Slot, StaffMember, Visit,
};
use crate::store::{StoreError, StoreResult};
use bson::{Bson, Document, doc};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;

pub(super) fn date(at: DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_chrono(at)
}

pub(super) fn opt_date(at: Option<DateTime<Utc>>) -> Bson {
    at.map_or(Bson::Null, |at| Bson::DateTime(date(at)))
}

pub(super) fn opt_str(value: Option<&str>) -> Bson {
    value.map_or(Bson::Null, |s| Bson::String(s.to_owned()))
}

/// A count or amount as BSON, which has no unsigned integers.
pub(super) fn whole(value: u64, what: &str) -> StoreResult<i64> {
    i64::try_from(value).map_err(|_| anyhow::anyhow!("{what} {value} is too large to store").into())
}

/// The fields of a stored document: missing or mistyped fields read as absent, and a required
/// one that is absent is an error naming the document.
pub(super) struct Fields<'a>(pub(super) &'a Document);

impl Fields<'_> {
    pub(super) fn missing(&self, key: &str, what: &str) -> StoreError {
        let id = self.0.get("_id").cloned().unwrap_or(Bson::Null);
        anyhow::anyhow!("document {id} has no {what} `{key}`").into()
    }

    pub(super) fn str(&self, key: &str) -> Option<String> {
        self.0.get_str(key).ok().map(str::to_owned)
    }

    pub(super) fn required_str(&self, key: &str) -> StoreResult<String> {
        self.str(key).ok_or_else(|| self.missing(key, "string"))
    }

    /// Free text that may be missing: empty then.
    pub(super) fn text(&self, key: &str) -> String {
        self.str(key).unwrap_or_default()
    }

    pub(super) fn strings(&self, key: &str) -> Vec<String> {
        match self.0.get(key) {
            Some(Bson::Array(items)) => items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    }

    pub(super) fn date(&self, key: &str) -> Option<DateTime<Utc>> {
        self.0.get_datetime(key).ok().map(|d| d.to_chrono())
    }

    pub(super) fn required_date(&self, key: &str) -> StoreResult<DateTime<Utc>> {
        self.date(key).ok_or_else(|| self.missing(key, "date"))
    }

    pub(super) fn int(&self, key: &str) -> Option<i64> {
        match self.0.get(key)? {
            Bson::Int32(i) => Some(i64::from(*i)),
            Bson::Int64(i) => Some(*i),
            Bson::Double(f) if f.fract() == 0.0 => Some(*f as i64),
            _ => None,
        }
    }

    /// A non-negative integer that fits `T`.
    pub(super) fn required_int<T: TryFrom<i64>>(&self, key: &str) -> StoreResult<T> {
        self.int(key)
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| self.missing(key, "whole number in range"))
    }

    pub(super) fn wa_id(&self, key: &str) -> StoreResult<WaId> {
        WaId::parse(&self.required_str(key)?).map_err(|e| anyhow::anyhow!(e).into())
    }

    pub(super) fn opt_wa_id(&self, key: &str) -> StoreResult<Option<WaId>> {
        match self.str(key) {
            Some(raw) => WaId::parse(&raw)
                .map(Some)
                .map_err(|e| anyhow::anyhow!(e).into()),
            None => Ok(None),
        }
    }

    /// An enum stored as its snake_case name (the model's `as_str`, which is also its serde name).
    pub(super) fn opt_choice<T: DeserializeOwned>(&self, key: &str) -> StoreResult<Option<T>> {
        match self.str(key) {
            Some(name) => bson::from_bson(Bson::String(name.clone()))
                .map(Some)
                .map_err(|_| anyhow::anyhow!("`{key}` has an unknown value `{name}`").into()),
            None => Ok(None),
        }
    }

    pub(super) fn choice<T: DeserializeOwned>(&self, key: &str) -> StoreResult<T> {
        self.opt_choice(key)?
            .ok_or_else(|| self.missing(key, "string"))
    }

    /// A GeoJSON point: `{"type": "Point", "coordinates": [lon, lat]}`.
    pub(super) fn point(&self, key: &str) -> StoreResult<GeoPoint> {
        let number = |value: &Bson| match value {
            Bson::Double(f) => Some(*f),
            Bson::Int32(i) => Some(f64::from(*i)),
            Bson::Int64(i) => Some(*i as f64),
            _ => None,
        };
        let coordinates = self
            .0
            .get_document(key)
            .ok()
            .and_then(|point| point.get_array("coordinates").ok());
        match coordinates.map(|c| c.as_slice()) {
            Some([lon, lat]) => match (number(lon), number(lat)) {
                (Some(lon), Some(lat)) => Ok(GeoPoint { lat, lon }),
                _ => Err(self.missing(key, "GeoJSON point")),
            },
            _ => Err(self.missing(key, "GeoJSON point")),
        }
    }
}

pub(super) fn property_doc(p: &Property) -> StoreResult<Document> {
    Ok(doc! {
        "_id": &p.id,
        "title": &p.title,
        "description": &p.description,
        "operation": p.operation.as_str(),
        "kind": p.kind.as_str(),
        "city": &p.city,
        "neighbourhood": &p.neighbourhood,
        "address": &p.address,
        "location": {"type": "Point", "coordinates": [p.location.lon, p.location.lat]},
        "price": whole(p.price, "price")?,
        "currency": &p.currency,
        "bedrooms": i64::from(p.bedrooms),
        "bathrooms": i64::from(p.bathrooms),
        "area_m2": i64::from(p.area_m2),
        "amenities": &p.amenities,
        "status": p.status.as_str(),
        "owner_id": &p.owner_id,
        "listed_at": date(p.listed_at),
        "photos": &p.photos,
        "price_dropped_at": p.price_dropped_at.map_or(Bson::Null, |at| Bson::DateTime(date(at))),
        "agent_id": opt_str(p.agent_id.as_deref()),
        "feed_id": opt_str(p.feed_id.as_deref()),
        "descriptions": p
            .descriptions
            .iter()
            .map(|(lang, text)| (lang.clone(), Bson::String(text.clone())))
            .collect::<Document>(),
    })
}

pub(super) fn property(d: &Document) -> StoreResult<Property> {
    let f = Fields(d);
    Ok(Property {
        id: f.required_str("_id")?,
        title: f.text("title"),
        description: f.text("description"),
        operation: f.choice("operation")?,
        kind: f.choice("kind")?,
        city: f.required_str("city")?,
        neighbourhood: f.text("neighbourhood"),
        address: f.text("address"),
        location: f.point("location")?,
        price: f.required_int("price")?,
        currency: f.required_str("currency")?,
        bedrooms: f.required_int("bedrooms")?,
        bathrooms: f.required_int("bathrooms")?,
        area_m2: f.required_int("area_m2")?,
        amenities: f.strings("amenities"),
        status: f.choice("status")?,
        owner_id: f.required_str("owner_id")?,
        listed_at: f.required_date("listed_at")?,
        photos: f.strings("photos"),
        price_dropped_at: f.date("price_dropped_at"),
        agent_id: f.str("agent_id"),
        feed_id: f.str("feed_id"),
        descriptions: d
            .get_document("descriptions")
            .map(|texts| {
                texts
                    .iter()
                    .filter_map(|(lang, text)| Some((lang.clone(), text.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

pub(super) fn owner_doc(o: &Owner) -> Document {
    doc! {
        "_id": &o.id,
        "name": &o.name,
        "wa_id": opt_str(o.wa_id.as_ref().map(WaId::as_str)),
        "agent_id": opt_str(o.agent_id.as_deref()),
    }
}

pub(super) fn owner(d: &Document) -> StoreResult<Owner> {
    let f = Fields(d);
    Ok(Owner {
        id: f.required_str("_id")?,
        name: f.text("name"),
        wa_id: f.opt_wa_id("wa_id")?,
        agent_id: f.str("agent_id"),
    })
}

pub(super) fn staff_doc(s: &StaffMember) -> Document {
    let mut doc = doc! {
        "_id": &s.id,
        "name": &s.name,
        "wa_id": opt_str(s.wa_id.as_ref().map(WaId::as_str)),
        "notify_handoffs": s.notify_handoffs,
    };
    if s.works_holidays {
        doc.insert("works_holidays", true);
    }
    if let Some(minutes) = s.visit_minutes {
        doc.insert("visit_minutes", i64::from(minutes));
    }
    if !s.zones.is_empty() {
        doc.insert("zones", &s.zones);
    }
    if let Some(url) = &s.calendar_url {
        doc.insert("calendar_url", url);
    }
    if let Some(token) = &s.calendar_token {
        doc.insert("calendar_token", token);
    }
    if let Some(at) = s.disabled_at {
        doc.insert("disabled_at", date(at));
    }
    if let Some(hours) = &s.hours {
        let days: Document = hours
            .iter()
            .map(|(day, spans)| (day.clone(), Bson::from(spans.clone())))
            .collect();
        doc.insert("hours", days);
    }
    doc
}

pub(super) fn staff_member(d: &Document) -> StoreResult<StaffMember> {
    let f = Fields(d);
    Ok(StaffMember {
        id: f.required_str("_id")?,
        name: f.text("name"),
        wa_id: f.opt_wa_id("wa_id")?,
        notify_handoffs: d.get_bool("notify_handoffs").unwrap_or(false),
        works_holidays: d.get_bool("works_holidays").unwrap_or(false),
        visit_minutes: f.int("visit_minutes").and_then(|n| u32::try_from(n).ok()),
        zones: f.strings("zones"),
        calendar_url: f.str("calendar_url"),
        calendar_token: f.str("calendar_token"),
        disabled_at: f.date("disabled_at"),
        hours: d.get_document("hours").ok().map(|days| {
            days.iter()
                .map(|(day, spans)| {
                    let spans = spans
                        .as_array()
                        .map(|list| {
                            list.iter()
                                .filter_map(|s| s.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default();
                    (day.clone(), spans)
                })
                .collect()
        }),
    })
}

pub(super) fn slot_doc(s: &Slot) -> Document {
    doc! {
        "_id": &s.id,
        "property_id": &s.property_id,
        "starts_at": date(s.starts_at),
        "minutes": i64::from(s.minutes),
        "agent": &s.agent,
    }
}

pub(super) fn slot(d: &Document) -> StoreResult<Slot> {
    let f = Fields(d);
    Ok(Slot {
        id: f.required_str("_id")?,
        property_id: f.required_str("property_id")?,
        starts_at: f.required_date("starts_at")?,
        minutes: f.required_int("minutes")?,
        agent: f.text("agent"),
    })
}

pub(super) fn appointment_doc(a: &Appointment) -> Document {
    let mut doc = doc! {
        "_id": &a.id,
        "property_id": &a.property_id,
        "slot_id": &a.slot_id,
        "wa_id": a.wa_id.as_str(),
        "starts_at": date(a.starts_at),
        "status": a.status.as_str(),
        "created_at": date(a.created_at),
        "reminder_sent_at": opt_date(a.reminder_sent_at),
        "agent": opt_str(a.follow_up.agent.as_deref()),
        "minutes": a.follow_up.minutes.map_or(Bson::Null, |m| Bson::Int64(i64::from(m))),
        "notice": opt_str(a.follow_up.notice.as_deref()),
        "outcome_asked_at": opt_date(a.follow_up.outcome_asked_at),
        "outcome_at": opt_date(a.follow_up.outcome_at),
        "outcome_by": opt_str(a.follow_up.outcome_by.as_deref()),
    };
    if let Some(from) = &a.moved_from {
        doc.insert(
            "moved_from",
            doc! {"slot_id": &from.slot_id, "starts_at": date(from.starts_at)},
        );
    }
    doc
}

pub(super) fn appointment(d: &Document) -> StoreResult<Appointment> {
    let f = Fields(d);
    Ok(Appointment {
        id: f.required_str("_id")?,
        property_id: f.required_str("property_id")?,
        slot_id: f.required_str("slot_id")?,
        wa_id: f.wa_id("wa_id")?,
        starts_at: f.required_date("starts_at")?,
        status: f.choice("status")?,
        created_at: f.required_date("created_at")?,
        reminder_sent_at: f.date("reminder_sent_at"),
        moved_from: d.get_document("moved_from").ok().and_then(|m| {
            let f = Fields(m);
            Some(MovedFrom {
                slot_id: f.str("slot_id")?,
                starts_at: f.date("starts_at")?,
            })
        }),
        follow_up: FollowUp {
            agent: f.str("agent"),
            minutes: f.int("minutes").and_then(|m| u32::try_from(m).ok()),
            notice: f.str("notice"),
            outcome_asked_at: f.date("outcome_asked_at"),
            outcome_at: f.date("outcome_at"),
            outcome_by: f.str("outcome_by"),
        },
    })
}

pub(super) fn visit_doc(v: &Visit) -> Document {
    doc! {
        "_id": &v.id,
        "property_id": &v.property_id,
        "wa_id": v.wa_id.as_str(),
        "visited_at": date(v.visited_at),
        "outcome": opt_str(v.outcome.map(|o| o.as_str())),
        "feedback": opt_str(v.feedback.as_deref()),
        "rating": v.rating.map_or(Bson::Null, |r| Bson::Int32(i32::from(r))),
    }
}

pub(super) fn visit(d: &Document) -> StoreResult<Visit> {
    let f = Fields(d);
    Ok(Visit {
        id: f.required_str("_id")?,
        property_id: f.required_str("property_id")?,
        wa_id: f.wa_id("wa_id")?,
        visited_at: f.required_date("visited_at")?,
        outcome: f.opt_choice("outcome")?,
        feedback: f.str("feedback"),
        rating: f.int("rating").and_then(|r| u8::try_from(r).ok()),
    })
}

pub(super) fn offer_doc(o: &Offer) -> StoreResult<Document> {
    let mut doc = doc! {
        "_id": &o.id,
        "property_id": &o.property_id,
        "wa_id": o.wa_id.as_str(),
        "amount": whole(o.amount, "offer amount")?,
        "currency": &o.currency,
        "conditions": opt_str(o.conditions.as_deref()),
        "status": o.status.as_str(),
        "created_at": date(o.created_at),
    };
    doc.extend(offer_answer_doc(&o.answer)?);
    Ok(doc)
}

/// An offer's answer, as the fields of its document (written whole, or `$set` by an answer).
pub(super) fn offer_answer_doc(a: &OfferAnswer) -> StoreResult<Document> {
    Ok(doc! {
        "answered_at": opt_date(a.answered_at),
        "answered_by": opt_str(a.answered_by.as_deref()),
        "counter_amount": match a.counter_amount {
            Some(amount) => Bson::Int64(whole(amount, "counter amount")?),
            None => Bson::Null,
        },
        "answer_notice": opt_str(a.notice.as_deref()),
        "awaiting_counter_from": opt_str(a.awaiting_counter_from.as_deref()),
    })
}

pub(super) fn offer(d: &Document) -> StoreResult<Offer> {
    let f = Fields(d);
    Ok(Offer {
        id: f.required_str("_id")?,
        property_id: f.required_str("property_id")?,
        wa_id: f.wa_id("wa_id")?,
        amount: f.required_int("amount")?,
        currency: f.required_str("currency")?,
        conditions: f.str("conditions"),
        status: f.choice("status")?,
        created_at: f.required_date("created_at")?,
        answer: OfferAnswer {
            answered_at: f.date("answered_at"),
            answered_by: f.str("answered_by"),
            counter_amount: f.int("counter_amount").and_then(|a| u64::try_from(a).ok()),
            notice: f.str("answer_notice"),
            awaiting_counter_from: f.str("awaiting_counter_from"),
        },
    })
}

pub(super) fn callback_request_doc(r: &CallbackRequest) -> Document {
    doc! {
        "_id": &r.id,
        "wa_id": r.wa_id.as_str(),
        "reason": &r.reason,
        "preferred_time": opt_str(r.preferred_time.as_deref()),
        "created_at": date(r.created_at),
    }
}

pub(super) fn listing_request_doc(r: &ListingRequest) -> StoreResult<Document> {
    Ok(doc! {
        "_id": &r.id,
        "property_id": &r.property_id,
        "owner_id": &r.owner_id,
        "wa_id": r.wa_id.as_str(),
        "change": r.change.as_str(),
        "new_price": match r.change.new_price() {
            Some(price) => Bson::Int64(whole(price, "new price")?),
            None => Bson::Null,
        },
        "note": opt_str(r.note.as_deref()),
        "status": &r.status,
        "created_at": date(r.created_at),
    })
}

pub(super) fn listing_request(d: &Document) -> StoreResult<ListingRequest> {
    let f = Fields(d);
    let change = f.required_str("change")?;
    let new_price = f.int("new_price").and_then(|p| u64::try_from(p).ok());
    Ok(ListingRequest {
        id: f.required_str("_id")?,
        property_id: f.required_str("property_id")?,
        owner_id: f.required_str("owner_id")?,
        wa_id: f.wa_id("wa_id")?,
        change: ListingChange::parse(&change, new_price).ok_or_else(|| {
            f.missing("change", "`price` with a new_price, `pause` or `withdraw`")
        })?,
        note: f.str("note"),
        status: f.required_str("status")?,
        created_at: f.required_date("created_at")?,
    })
}

pub(super) fn alert_doc(a: &Alert) -> StoreResult<Document> {
    let c = &a.criteria;
    Ok(doc! {
        "_id": &a.id,
        "wa_id": a.wa_id.as_str(),
        "criteria": {
            "city": opt_str(c.city.as_deref()),
            "neighbourhood": opt_str(c.neighbourhood.as_deref()),
            "operation": opt_str(c.operation.map(crate::realestate::Operation::as_str)),
            "type": opt_str(c.kind.map(crate::realestate::PropertyType::as_str)),
            "max_price": match c.max_price {
                Some(price) => Bson::Int64(whole(price, "max_price")?),
                None => Bson::Null,
            },
            "min_bedrooms": c.min_bedrooms.map_or(Bson::Null, |n| Bson::Int64(n.into())),
        },
        "created_at": date(a.created_at),
        "cancelled_at": a.cancelled_at.map_or(Bson::Null, |at| Bson::DateTime(date(at))),
    })
}

pub(super) fn alert(d: &Document) -> StoreResult<Alert> {
    let f = Fields(d);
    let criteria = d
        .get_document("criteria")
        .map_err(|_| f.missing("criteria", "a document"))?;
    let c = Fields(criteria);
    Ok(Alert {
        id: f.required_str("_id")?,
        wa_id: f.wa_id("wa_id")?,
        criteria: AlertCriteria {
            city: c.str("city"),
            neighbourhood: c.str("neighbourhood"),
            operation: c.opt_choice("operation")?,
            kind: c.opt_choice("type")?,
            max_price: c.int("max_price").and_then(|p| u64::try_from(p).ok()),
            min_bedrooms: c.int("min_bedrooms").and_then(|n| u32::try_from(n).ok()),
        },
        created_at: f.required_date("created_at")?,
        cancelled_at: f.date("cancelled_at"),
    })
}

pub(super) fn callback_request(d: &Document) -> StoreResult<CallbackRequest> {
    let f = Fields(d);
    Ok(CallbackRequest {
        id: f.required_str("_id")?,
        wa_id: f.wa_id("wa_id")?,
        reason: f.required_str("reason")?,
        preferred_time: f.str("preferred_time"),
        created_at: f.required_date("created_at")?,
    })
}

/// By start time, ties by id.
pub(super) fn by_start() -> Document {
    doc! {"starts_at": 1, "_id": 1}
}

/// Newest first by `field`, ties by id.
pub(super) fn newest_first(field: &str) -> Document {
    doc! {field: -1, "_id": 1}
}
