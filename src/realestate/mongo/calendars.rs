//! `calendars` in MongoDB: [`CalendarStore`]. The busy times are an array of `{start, end}`
//! documents (FerretDB keeps no arrays inside arrays).

use async_trait::async_trait;
use bson::{Bson, doc};

use super::MongoRealEstate;
use super::codec::{Fields, date, opt_date, opt_str};
use crate::realestate::store::{CalendarCopy, CalendarStore};
use crate::store::StoreResult;

fn copy_doc(c: &CalendarCopy) -> bson::Document {
    let busy: Vec<Bson> = c
        .busy
        .iter()
        .map(|(start, end)| Bson::Document(doc! {"start": date(*start), "end": date(*end)}))
        .collect();
    doc! {
        "_id": &c.staff_id,
        "url": &c.url,
        "busy": busy,
        "read_at": opt_date(c.read_at),
        "failing_since": opt_date(c.failing_since),
        "error": opt_str(c.error.as_deref()),
    }
}

fn copy(d: &bson::Document) -> StoreResult<CalendarCopy> {
    let f = Fields(d);
    let busy = d
        .get_array("busy")
        .map(|pairs| {
            pairs
                .iter()
                .filter_map(|pair| {
                    let pair = pair.as_document()?;
                    Some((
                        pair.get_datetime("start").ok()?.to_chrono(),
                        pair.get_datetime("end").ok()?.to_chrono(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(CalendarCopy {
        staff_id: f.required_str("_id")?,
        url: f.text("url"),
        busy,
        read_at: f.date("read_at"),
        failing_since: f.date("failing_since"),
        error: f.str("error"),
    })
}

#[async_trait]
impl CalendarStore for MongoRealEstate {
    async fn save_calendar(&self, c: &CalendarCopy) -> StoreResult<()> {
        self.upsert_all("calendars", vec![copy_doc(c)]).await
    }

    async fn calendar(&self, staff_id: &str) -> StoreResult<Option<CalendarCopy>> {
        self.find_one("calendars", staff_id, copy).await
    }

    async fn calendars(&self) -> StoreResult<Vec<CalendarCopy>> {
        self.find_all("calendars", doc! {}, doc! {"_id": 1}, copy)
            .await
    }
}
