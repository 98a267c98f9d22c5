//! The real-estate business behind the assistants: its data ([`model`]), where it is kept
//! ([`store`]), and the tools the assistants use on it.

pub mod alerts;
pub mod calendar;
pub mod context;
pub mod demo;
pub mod download;
pub mod feed;
pub mod follow_up;
pub mod listings;
pub mod memory;
pub mod model;
pub mod mongo;
pub mod mortgage;
pub mod offline;
pub mod people;
pub mod reminders;
pub mod roles;
pub mod store;
pub mod tools;

pub use memory::MemoryRealEstate;
pub use model::{
    Alert, AlertCriteria, Appointment, AppointmentStatus, CallbackRequest, FollowUp, ListingChange,
    ListingRequest, ListingStatus, MovedFrom, Notice, Offer, OfferAnswer, OfferStatus, Operation,
    Owner, Property, PropertyType, Slot, StaffMember, Visit, VisitOutcome,
};
pub use mongo::MongoRealEstate;
pub use store::{
    AlertStore, AppointmentStore, CalendarCopy, CalendarStore, CallbackRequestStore,
    FeedImportRecord, FeedImportStore, ListingRequestStore, OfferStore, OwnerStore, PropertyFilter,
    PropertyStore, RealEstateStore, Settled, SlotStore, StaffStore, VisitStore,
};
