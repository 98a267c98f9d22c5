//! The business's data: properties and their owners, the slots when a property can be visited,
//! appointments booked in them, visits made (with the customer's feedback), and offers. Ids are
//! short, readable and stable (`P-1001`, `O-07`), because customers and the LLM quote them.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::domain::{GeoPoint, WaId};

/// For sale or for rent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Sale,
    Rent,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Sale => "sale",
            Operation::Rent => "rent",
        }
    }

    /// How a Spanish listing says it.
    pub fn label_es(self) -> &'static str {
        match self {
            Operation::Sale => "venta",
            Operation::Rent => "alquiler",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PropertyType {
    Flat,
    Penthouse,
    Studio,
    Duplex,
    House,
    Office,
    Commercial,
}

impl PropertyType {
    pub const ALL: [PropertyType; 7] = [
        PropertyType::Flat,
        PropertyType::Penthouse,
        PropertyType::Studio,
        PropertyType::Duplex,
        PropertyType::House,
        PropertyType::Office,
        PropertyType::Commercial,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PropertyType::Flat => "flat",
            PropertyType::Penthouse => "penthouse",
            PropertyType::Studio => "studio",
            PropertyType::Duplex => "duplex",
            PropertyType::House => "house",
            PropertyType::Office => "office",
            PropertyType::Commercial => "commercial",
        }
    }

    pub fn label_es(self) -> &'static str {
        match self {
            PropertyType::Flat => "piso",
            PropertyType::Penthouse => "ático",
            PropertyType::Studio => "estudio",
            PropertyType::Duplex => "dúplex",
            PropertyType::House => "casa",
            PropertyType::Office => "oficina",
            PropertyType::Commercial => "local",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// Where a listing stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListingStatus {
    Available,
    /// A deposit was paid: no new visits or offers.
    Reserved,
    Sold,
    Rented,
    Withdrawn,
}

impl ListingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ListingStatus::Available => "available",
            ListingStatus::Reserved => "reserved",
            ListingStatus::Sold => "sold",
            ListingStatus::Rented => "rented",
            ListingStatus::Withdrawn => "withdrawn",
        }
    }
}

/// A listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Property {
    /// `P-1001`.
    pub id: String,
    pub title: String,
    pub description: String,
    pub operation: Operation,
    pub kind: PropertyType,
    pub city: String,
    pub neighbourhood: String,
    pub address: String,
    pub location: GeoPoint,
    /// Whole currency units (euros); for rent, per month.
    pub price: u64,
    /// ISO 4217, e.g. `EUR`.
    pub currency: String,
    pub bedrooms: u32,
    pub bathrooms: u32,
    pub area_m2: u32,
    /// Lowercase Spanish words: `terraza`, `ascensor`, `garaje`, `piscina`, `trastero`…
    pub amenities: Vec<String>,
    pub status: ListingStatus,
    pub owner_id: String,
    pub listed_at: DateTime<Utc>,
    /// Photo URLs (https), the cover first: sent as WhatsApp image messages.
    #[serde(default)]
    pub photos: Vec<String>,
    /// When the price last went down (`zaguan listings update`): a saved search that now
    /// matches hears of it.
    #[serde(default)]
    pub price_dropped_at: Option<DateTime<Utc>>,
    /// The agent who shows it (`properties.agent_id`); `None`: the staff covering its city.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The description in other languages, by ISO 639-1 code (`properties.descriptions`,
    /// from a feed): a customer is given theirs where there is one.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub descriptions: std::collections::BTreeMap<String, String>,
    /// The listing's id in the agency's feed (`properties.feed_id`, Kyero's `<id>`), when it
    /// came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feed_id: Option<String>,
}

impl Property {
    /// The description in `lang` when the listing has one, else its own.
    pub fn description_in(&self, lang: Option<&str>) -> &str {
        lang.and_then(|lang| self.descriptions.get(lang))
            .map_or(&self.description, |text| text)
    }

    /// When the listing last became news for saved searches: listed, or its price lowered.
    pub fn news_at(&self) -> DateTime<Utc> {
        self.price_dropped_at
            .map_or(self.listed_at, |dropped| dropped.max(self.listed_at))
    }
}

/// Someone whose property the agency markets. Their listings are the ones whose
/// `properties.owner_id` names them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Owner {
    /// `O-07`.
    pub id: String,
    pub name: String,
    /// The owner's WhatsApp: how an owner writing in is recognised.
    pub wa_id: Option<WaId>,
    /// The agent who looks after them (`owners.agent_id`): told of their listings' visits and
    /// offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// One of the agency's agents (`staff`): one writing in on WhatsApp talks to the assistants
/// as a colleague (role `agent`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StaffMember {
    /// `A-01`.
    pub id: String,
    pub name: String,
    /// Their WhatsApp: how they are recognised when they write in.
    pub wa_id: Option<WaId>,
    /// Told on WhatsApp when a customer asks for a person (`staff.notify_handoffs`).
    #[serde(default)]
    pub notify_handoffs: bool,
    /// When they are on duty, weekday → spans (`{"monday": ["9:00-14:00"]}`, as the business
    /// file's `[hours]`); `None`: the agency's opening hours (`staff.hours`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<std::collections::BTreeMap<String, Vec<String>>>,
    /// Works the agency's holidays (`staff.works_holidays`): told of handoffs on them too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub works_holidays: bool,
    /// How long one of their visits lasts (`staff.visit_minutes`); `None`: the agency's
    /// default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visit_minutes: Option<u32>,
    /// The cities or zones whose listings they show when a listing names no agent
    /// (`staff.zones`), compared without case or accents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// Their own calendar's iCalendar address (`staff.calendar_url`): its busy times block
    /// visits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar_url: Option<String>,
    /// The secret of their visits' feed, `/calendar/{token}.ics` (`staff.calendar_token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar_token: Option<String>,
    /// When they were disabled (`staff.disabled_at`): kept for history, out of handoffs and
    /// visits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<DateTime<Utc>>,
}

impl StaffMember {
    pub fn is_active(&self) -> bool {
        self.disabled_at.is_none()
    }
}

/// A time a property can be visited with an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// `S-P1001-202611271000`: property and start, so reseeding yields the same ids.
    pub id: String,
    pub property_id: String,
    pub starts_at: DateTime<Utc>,
    pub minutes: u32,
    /// The agent who shows the property.
    pub agent: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppointmentStatus {
    Booked,
    Cancelled,
    /// The visit took place (a [`Visit`] records how it went).
    Done,
    /// The customer did not come.
    NoShow,
}

impl AppointmentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AppointmentStatus::Booked => "booked",
            AppointmentStatus::Cancelled => "cancelled",
            AppointmentStatus::Done => "done",
            AppointmentStatus::NoShow => "no_show",
        }
    }
}

/// Where an appointment was before it was rescheduled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MovedFrom {
    pub slot_id: String,
    pub starts_at: DateTime<Utc>,
}

/// A customer's visit booked in a slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Appointment {
    /// `A-…`.
    pub id: String,
    pub property_id: String,
    pub slot_id: String,
    pub wa_id: WaId,
    pub starts_at: DateTime<Utc>,
    pub status: AppointmentStatus,
    pub created_at: DateTime<Utc>,
    /// When the reminder went out (sent once).
    pub reminder_sent_at: Option<DateTime<Utc>>,
    /// The slot and start it was moved from by its last reschedule: a reschedule replayed
    /// after a crash frees that slot and reports the move from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<MovedFrom>,
    /// What the back office does with it once booked.
    #[serde(default)]
    pub follow_up: FollowUp,
}

/// A booked visit's life after the booking: who shows it, the notice waiting for them, and
/// what became of it, whoever recorded it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FollowUp {
    /// The agent who shows it, as the slot named them (`Slot::agent`).
    pub agent: Option<String>,
    /// How long it lasts (the slot's `minutes`).
    pub minutes: Option<u32>,
    /// A notice not sent yet ([`Notice::key`]: `booked:…`, `moved:…`, `cancelled:…` to the
    /// agent, `done:…`, `no_show:…` to the customer): set with the change, cleared once it is
    /// queued, so a crash in between sends it later and never loses it.
    pub notice: Option<String>,
    /// When the agent was asked how it went.
    pub outcome_asked_at: Option<DateTime<Utc>>,
    /// When its outcome (`done`, `no_show`, a late `cancelled`) was recorded, and by whom
    /// (`agent:NAME`, `operator:NAME`, `cli`).
    pub outcome_at: Option<DateTime<Utc>>,
    pub outcome_by: Option<String>,
}

/// What an appointment's pending notice tells, and to whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// To the agent: a visit booked, moved or cancelled by the customer.
    Booked,
    Moved,
    Cancelled,
    /// To the customer: how did it go?
    Done,
    /// To the customer: one offer of another time.
    NoShow,
}

impl Notice {
    const ALL: [Notice; 5] = [
        Notice::Booked,
        Notice::Moved,
        Notice::Cancelled,
        Notice::Done,
        Notice::NoShow,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Notice::Booked => "booked",
            Notice::Moved => "moved",
            Notice::Cancelled => "cancelled",
            Notice::Done => "done",
            Notice::NoShow => "no_show",
        }
    }

    /// `follow_up.notice` for this notice about the visit at `at`: a second move is a new
    /// notice, and the job clears only the one it sent.
    pub fn key(self, at: DateTime<Utc>) -> String {
        format!("{}:{}", self.as_str(), at.format("%Y%m%d%H%M"))
    }

    /// The notice a `follow_up.notice` value names.
    pub fn of_key(key: &str) -> Option<Notice> {
        let kind = key.split(':').next()?;
        Self::ALL.into_iter().find(|n| n.as_str() == kind)
    }

    /// The customer's notice once a visit's outcome is `status`: none for a late cancel.
    pub fn after(status: AppointmentStatus) -> Option<Notice> {
        match status {
            AppointmentStatus::Done => Some(Notice::Done),
            AppointmentStatus::NoShow => Some(Notice::NoShow),
            AppointmentStatus::Booked | AppointmentStatus::Cancelled => None,
        }
    }

    /// Whether it goes to the agent (else to the customer).
    pub fn to_agent(self) -> bool {
        matches!(self, Notice::Booked | Notice::Moved | Notice::Cancelled)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VisitOutcome {
    Interested,
    NotInterested,
    WantsSecondVisit,
    MadeOffer,
}

impl VisitOutcome {
    pub const ALL: [VisitOutcome; 4] = [
        VisitOutcome::Interested,
        VisitOutcome::NotInterested,
        VisitOutcome::WantsSecondVisit,
        VisitOutcome::MadeOffer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            VisitOutcome::Interested => "interested",
            VisitOutcome::NotInterested => "not_interested",
            VisitOutcome::WantsSecondVisit => "wants_second_visit",
            VisitOutcome::MadeOffer => "made_offer",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == text)
    }
}

/// A visit that took place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Visit {
    /// `V-…`.
    pub id: String,
    pub property_id: String,
    pub wa_id: WaId,
    pub visited_at: DateTime<Utc>,
    pub outcome: Option<VisitOutcome>,
    pub feedback: Option<String>,
    /// 1 to 5.
    pub rating: Option<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferStatus {
    Submitted,
    Accepted,
    Rejected,
    Countered,
    Withdrawn,
}

impl OfferStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OfferStatus::Submitted => "submitted",
            OfferStatus::Accepted => "accepted",
            OfferStatus::Rejected => "rejected",
            OfferStatus::Countered => "countered",
            OfferStatus::Withdrawn => "withdrawn",
        }
    }

    /// Still waiting for an answer from one side: the owner's to an offer, the customer's to
    /// a counter-offer.
    pub fn is_open(self) -> bool {
        matches!(self, OfferStatus::Submitted | OfferStatus::Countered)
    }

    /// What an owner's figures count: offers still open and accepted ones, never the rejected
    /// or withdrawn.
    pub fn counts(self) -> bool {
        self.is_open() || self == OfferStatus::Accepted
    }
}

/// A customer's offer on a property.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// `F-…`.
    pub id: String,
    pub property_id: String,
    pub wa_id: WaId,
    /// Whole currency units, in the property's currency.
    pub amount: u64,
    pub currency: String,
    pub conditions: Option<String>,
    pub status: OfferStatus,
    pub created_at: DateTime<Utc>,
    /// The answer, once there is one.
    #[serde(default)]
    pub answer: OfferAnswer,
}

/// How an offer was answered (`offers.answered_at`, `offers.counter_amount`) and the notice
/// that carries the news.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OfferAnswer {
    pub answered_at: Option<DateTime<Utc>>,
    /// `owner:NAME`, `agent:NAME`, `operator:NAME`, `customer`, `cli`.
    pub answered_by: Option<String>,
    /// The owner's counter-offer, in the offer's currency.
    pub counter_amount: Option<u64>,
    /// A notice not sent yet (`received`, `answered:accepted`…): set with the change, cleared
    /// once queued.
    pub notice: Option<String>,
    /// The counter-offer amount is awaited from this contact's next message.
    pub awaiting_counter_from: Option<String>,
}

/// `callback_requests`: a customer asked to be called back (the mortgage or offer assistants'
/// `request_callback`); the conversation is flagged for a person at the same time.
#[derive(Debug, Clone, PartialEq)]
pub struct CallbackRequest {
    /// `C-…`.
    pub id: String,
    pub wa_id: WaId,
    /// What the call is about, in the assistant's words.
    pub reason: String,
    /// When the customer prefers, as they said it («mañana por la tarde»).
    pub preferred_time: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// `listing_requests`: an owner asked to change one of their listings (a new price, a pause, a
/// withdrawal). Nothing changes on the listing itself: a person at the agency handles it, and
/// the conversation is flagged for them at the same time.
#[derive(Debug, Clone, PartialEq)]
pub struct ListingRequest {
    /// `R-…`.
    pub id: String,
    pub property_id: String,
    pub owner_id: String,
    /// Who asked: the owner, or a staff member on their behalf.
    pub wa_id: WaId,
    pub change: ListingChange,
    pub note: Option<String>,
    /// `requested` until a person handles it.
    pub status: String,
    pub created_at: DateTime<Utc>,
}

/// What an owner wants done with a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListingChange {
    /// A new asking price, in the listing's currency.
    Price(u64),
    Pause,
    Withdraw,
}

impl ListingChange {
    /// `price`, `pause`, `withdraw`: the stored `change`.
    pub fn as_str(self) -> &'static str {
        match self {
            ListingChange::Price(_) => "price",
            ListingChange::Pause => "pause",
            ListingChange::Withdraw => "withdraw",
        }
    }

    pub fn new_price(self) -> Option<u64> {
        match self {
            ListingChange::Price(price) => Some(price),
            _ => None,
        }
    }

    /// From the stored `change` and `new_price`.
    pub fn parse(change: &str, new_price: Option<u64>) -> Option<Self> {
        match (change, new_price) {
            ("price", Some(price)) => Some(ListingChange::Price(price)),
            ("pause", _) => Some(ListingChange::Pause),
            ("withdraw", _) => Some(ListingChange::Withdraw),
            _ => None,
        }
    }
}

/// `alerts`: a customer's saved search. When a listing is added or its price drops and it
/// matches, the customer hears of it once (see [`crate::realestate::alerts`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// `S-…`.
    pub id: String,
    pub wa_id: WaId,
    pub criteria: AlertCriteria,
    pub created_at: DateTime<Utc>,
    /// Set when the customer cancels it; a cancelled alert never fires.
    pub cancelled_at: Option<DateTime<Utc>>,
}

/// What a saved search looks for; an empty field matches anything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AlertCriteria {
    pub city: Option<String>,
    pub neighbourhood: Option<String>,
    pub operation: Option<Operation>,
    #[serde(rename = "type")]
    pub kind: Option<PropertyType>,
    pub max_price: Option<u64>,
    pub min_bedrooms: Option<u32>,
}
