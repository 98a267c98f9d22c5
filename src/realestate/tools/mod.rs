//! The tools the assistants call on the business's data. Each knows who is asking from the
//! turn (`ToolContext`), never from the model's arguments; the ones that change data ask the
//! user to confirm first.

pub mod alerts;
pub mod appointments;
pub mod business;
pub mod callbacks;
pub mod listing_buttons;
pub mod listing_requests;
pub mod mortgage;
pub mod offers;
pub mod owners;
pub mod photos;
pub mod search;
pub mod text;
pub mod visits;

use std::sync::Arc;

pub use alerts::{CancelSearchAlert, CreateSearchAlert, ListMyAlerts};
pub use appointments::{
    BookAppointment, CancelAppointment, ListAvailableSlots, ListMyAppointments,
    RescheduleAppointment,
};
pub use business::{BUSINESS_INFO, BusinessInfo};
pub use callbacks::{REQUEST_CALLBACK, RequestCallback};
pub use listing_requests::{REQUEST_LISTING_CHANGE, RequestListingChange};
pub use mortgage::SimulateMortgage;
pub use offers::{ListMyOffers, SubmitOffer};
pub use owners::OwnerListingStats;
pub use photos::SendPropertyPhotos;
pub use search::{GetPropertyDetails, SearchProperties};
pub use visits::{ListMyVisits, RecordVisitFeedback};

use crate::engine::ToolRegistry;
use crate::realestate::RealEstateStore;

/// Every domain tool's name: what prompt files may list (checked by `zaguan prompts check`).
pub const TOOL_NAMES: &[&str] = &[
    "search_properties",
    "get_property_details",
    "list_available_slots",
    "book_appointment",
    "reschedule_appointment",
    "cancel_appointment",
    "list_my_appointments",
    "list_my_visits",
    "record_visit_feedback",
    "simulate_mortgage",
    "submit_offer",
    "list_my_offers",
    "owner_listing_stats",
    "create_search_alert",
    "list_my_alerts",
    "cancel_search_alert",
    "send_property_photos",
    "business_info",
];

/// All the domain tools over `store`.
pub fn registry(store: Arc<dyn RealEstateStore>) -> ToolRegistry {
    ToolRegistry::new()
        .with(SearchProperties::new(store.clone()))
        .with(GetPropertyDetails::new(store.clone()))
        .with(ListAvailableSlots::new(store.clone()))
        .with(BookAppointment::new(store.clone()))
        .with(RescheduleAppointment::new(store.clone()))
        .with(CancelAppointment::new(store.clone()))
        .with(ListMyAppointments::new(store.clone()))
        .with(ListMyVisits::new(store.clone()))
        .with(RecordVisitFeedback::new(store.clone()))
        .with(SimulateMortgage::new(store.clone()))
        .with(SubmitOffer::new(store.clone()))
        .with(ListMyOffers::new(store.clone()))
        .with(OwnerListingStats::new(store.clone()))
        .with(CreateSearchAlert::new(store.clone()))
        .with(ListMyAlerts::new(store.clone()))
        .with(CancelSearchAlert::new(store.clone()))
        .with(SendPropertyPhotos::new(store))
        .with(BusinessInfo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::handoff::{HandoffDesk, HandoffSettings, RequestHuman};
    use crate::realestate::MemoryRealEstate;
    use crate::store::MemoryStore;

    /// Every tool an assistant can be given, by name: the registry's, the three that tell the
    /// agency's people, and the opt-out.
    fn every_tool_spec() -> std::collections::BTreeMap<String, crate::llm::ToolSpec> {
        let realestate = Arc::new(MemoryRealEstate::new());
        let store: Arc<dyn crate::store::Store> = Arc::new(MemoryStore::new());
        let desk = Arc::new(HandoffDesk::new(store, None, HandoffSettings::default()));
        let registry = registry(realestate.clone())
            .with(RequestHuman::new(desk.clone()))
            .with(crate::engine::consent::RecordOptOut::new(Arc::new(
                MemoryStore::new(),
            )))
            .with(RequestCallback::new(realestate.clone(), desk.clone()))
            .with(RequestListingChange::new(realestate, desk));
        registry
            .names()
            .iter()
            .map(|name| {
                let spec = registry.spec(name).expect("a listed tool");
                (name.clone(), spec)
            })
            .collect()
    }

    /// The schemas the model sees come from the tools' argument types. They are the ones
    /// written by hand before (`tests/data/tool_schemas.json`, as they were): the same
    /// contract, word for word and key for key.
    #[test]
    fn the_schemas_derived_from_the_argument_types_are_the_hand_written_ones() {
        let before: std::collections::BTreeMap<String, serde_json::Value> =
            serde_json::from_str(include_str!("../../../tests/data/tool_schemas.json"))
                .expect("the hand-written schemas");
        let now = every_tool_spec();
        assert_eq!(
            now.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>()
        );
        let mut differences = Vec::new();
        for (name, spec) in &now {
            let was = &before[name];
            // As text, so the keys' order counts too: it is what the model is sent, and what
            // the recorded conversations hash.
            let (derived, written) = (
                serde_json::to_string(&spec.parameters).expect("JSON"),
                serde_json::to_string(&was["parameters"]).expect("JSON"),
            );
            if derived != written {
                differences.push(format!(
                    "{name}: derived {}\n  hand-written {}",
                    spec.parameters, was["parameters"]
                ));
            }
            if spec.description != was["description"] {
                differences.push(format!("{name}: the description changed"));
            }
        }
        assert!(differences.is_empty(), "{}", differences.join("\n"));
    }

    #[test]
    fn the_registry_holds_exactly_the_named_tools() {
        let registry = registry(Arc::new(crate::realestate::MemoryRealEstate::new()));
        let names: Vec<&str> = TOOL_NAMES.to_vec();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(
            registry
                .names()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            sorted
        );
    }
}
