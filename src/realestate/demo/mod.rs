//! The demo data set: a small but believable agency portfolio — 64 listings in Madrid,
//! Valencia, Sevilla and Málaga, their 12 owners, three weeks of visit slots, last month's
//! visits and the offers that followed — so the assistants can be tried end to end without a
//! real catalogue (`zaguan demo seed`).
//!
//! The set is a pure function of the day it is built for and the business's time zone: no
//! clock, no entropy, only a fixed-seed generator. Seeding twice yields the same ids and the
//! same documents, so reseeding is an idempotent upsert; seeding on another day keeps every
//! property, owner, visit and offer id and moves the dates with it.
//!
//! Demo WhatsApp ids, to chat as one of them (`zaguan chat --wa-id …`):
//!
//! | WhatsApp id                   | Who                                                  |
//! |-------------------------------|------------------------------------------------------|
//! | `34600000001`                 | owner `O-01`, María Luisa Fernández Ortega (Madrid)  |
//! | `34600000005`                 | owner `O-05`, Vicent Soler Ferrer (Valencia)         |
//! | `34600000010`                 | owner `O-10`, Francisco Ruiz Moreno (Málaga)         |
//! | `34611000001` … `34611000006` | customers with past visits and offers                |
//!
//! What is in it: listings `P-1001`… (about two thirds for sale; a few reserved, sold, rented or
//! withdrawn), owners `O-01` to `O-12`, slots `S-P1001-202611271000` (listing and local start)
//! every other day for each available listing — weekdays at two of 10:00, 12:00, 17:00 and
//! 18:30, Saturdays at one morning time, never on Sundays — visits `V-0001`… in the last month
//! (the two most recent still without feedback) and offers `F-0001`… made the day after a
//! visit; each reserved listing has the accepted offer that reserved it.
//!
//! Prices per m² follow each neighbourhood's market (see `NEIGHBOURHOODS`): for sale from
//! 2,500 €/m² (Benimaclet, Teatinos) to 12,000 €/m² (Salamanca); for rent from 12 to
//! 25 €/m² a month.

mod listings;
mod neighbourhoods;
mod people;
mod visits;

use crate::realestate::{OfferStore, OwnerStore, PropertyStore, SlotStore, StaffStore, VisitStore};
use std::collections::BTreeSet;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;

use super::model::{Offer, Owner, Property, Slot, StaffMember, Visit};

use crate::domain::{GeoPoint, WaId};
use crate::store::StoreResult;

use listings::properties;
use people::{owners, staff};
use visits::{slots, visits_and_offers};

/// The demo customers: WhatsApp ids that visited properties in the last month, some of whom
/// made offers. Chat as one of them to ask about "my visits" or "my offer".
pub const DEMO_CUSTOMERS: [&str; 6] = [
    "34611000001",
    "34611000002",
    "34611000003",
    "34611000004",
    "34611000005",
    "34611000006",
];

/// The agents who show properties.
pub const AGENTS: [&str; 4] = ["Lucía", "Javier", "Marta", "Andrés"];

/// The agents' WhatsApp ids, in the order of [`AGENTS`]: chat as one to be a colleague.
pub const AGENT_WA_IDS: [&str; 4] = ["34699000001", "34699000002", "34699000003", "34699000004"];

/// How many days ahead visit slots are offered, from tomorrow on.
pub const SLOT_DAYS: u64 = 21;

/// How long a visit lasts.
pub const SLOT_MINUTES: u32 = 45;

/// Local start times of visits: the first two are mornings (the only ones on Saturdays).
const VISIT_TIMES: [(u32, u32); 4] = [(10, 0), (12, 0), (17, 0), (18, 30)];

/// How far back listings go, in days (about six months).
const LISTING_DAYS: u64 = 180;

/// How many documents go to the store in one call.
const SEED_BATCH: usize = 500;

/// The vocabulary of amenities, in the order a listing shows them.
pub const AMENITIES: [&str; 10] = [
    "terraza",
    "ascensor",
    "garaje",
    "piscina",
    "trastero",
    "aire acondicionado",
    "calefacción",
    "amueblado",
    "jardín",
    "portero",
];

/// Everything `zaguan demo seed` loads.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoSet {
    pub owners: Vec<Owner>,
    pub staff: Vec<StaffMember>,
    pub properties: Vec<Property>,
    pub slots: Vec<Slot>,
    pub visits: Vec<Visit>,
    pub offers: Vec<Offer>,
}

impl DemoSet {
    /// How many documents of each kind the set holds.
    pub fn counts(&self) -> SeedCounts {
        SeedCounts {
            owners: self.owners.len(),
            staff: self.staff.len(),
            properties: self.properties.len(),
            slots: self.slots.len(),
            visits: self.visits.len(),
            offers: self.offers.len(),
        }
    }

    /// The cities with listings, sorted.
    pub fn cities(&self) -> BTreeSet<&str> {
        self.properties.iter().map(|p| p.city.as_str()).collect()
    }

    /// The owners who can write in on WhatsApp.
    pub fn owners_on_whatsapp(&self) -> impl Iterator<Item = &Owner> {
        self.owners.iter().filter(|o| o.wa_id.is_some())
    }

    /// The listings of an owner.
    pub fn properties_of<'a>(&'a self, owner_id: &'a str) -> impl Iterator<Item = &'a Property> {
        self.properties
            .iter()
            .filter(move |p| p.owner_id == owner_id)
    }
}

/// How many documents of each kind [`seed`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeedCounts {
    pub owners: usize,
    pub staff: usize,
    pub properties: usize,
    pub slots: usize,
    pub visits: usize,
    pub offers: usize,
}

/// Upserts the whole set, kind by kind and referenced before referencing (owners, properties,
/// then slots, visits and offers), in batches of a few hundred.
pub async fn seed(
    store: &(
         impl OfferStore + OwnerStore + PropertyStore + SlotStore + StaffStore + VisitStore + ?Sized
     ),
    set: &DemoSet,
) -> StoreResult<SeedCounts> {
    for batch in set.owners.chunks(SEED_BATCH) {
        store.upsert_owners(batch).await?;
    }
    store.upsert_staff(&set.staff).await?;
    for batch in set.properties.chunks(SEED_BATCH) {
        store.upsert_properties(batch).await?;
    }
    for batch in set.slots.chunks(SEED_BATCH) {
        store.upsert_slots(batch).await?;
    }
    for batch in set.visits.chunks(SEED_BATCH) {
        store.upsert_visits(batch).await?;
    }
    for batch in set.offers.chunks(SEED_BATCH) {
        store.upsert_offers(batch).await?;
    }
    Ok(set.counts())
}

/// The demo set as of `today` in the business's time zone `tz`: listings dated in the six
/// months before, slots on the [`SLOT_DAYS`] days after, visits and offers in the month before.
pub fn demo_set(today: NaiveDate, tz: Tz) -> DemoSet {
    let owners = owners();
    let properties = properties(today, tz);
    let slots = slots(&properties, today, tz);
    let (visits, offers) = visits_and_offers(&properties, today, tz);
    DemoSet {
        owners,
        staff: staff(),
        properties,
        slots,
        visits,
        offers,
    }
}

/// A small deterministic generator (splitmix64): the same seed, the same demo.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo + 1)) as u32
    }

    fn chance(&mut self, odds: f64) -> bool {
        self.unit() < odds
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

fn round6(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}

/// `hour:minute` on `date` in `tz`, in UTC. A time skipped by a daylight-saving change (never
/// a business hour in Spain) is read as UTC rather than dropped, so the set keeps its shape.
fn at_local(tz: Tz, date: NaiveDate, hour: u32, minute: u32) -> DateTime<Utc> {
    let naive = date
        .and_hms_opt(hour, minute, 0)
        .expect("hours and minutes of the demo are valid");
    tz.from_local_datetime(&naive)
        .earliest()
        .map_or_else(|| naive.and_utc(), |t| t.with_timezone(&Utc))
}

fn demo_wa_id(raw: &str) -> WaId {
    WaId::parse(raw).expect("demo WhatsApp ids are valid")
}

#[cfg(test)]
mod tests;
