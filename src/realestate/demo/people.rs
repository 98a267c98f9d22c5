//! The demo's people: the twelve owners (three of them on WhatsApp) and the agency's staff.

use crate::realestate::demo::{AGENT_WA_IDS, AGENTS, demo_wa_id};
use crate::realestate::{Owner, StaffMember};

/// A demo owner: id, name, city, WhatsApp.
pub(super) struct OwnerSeed {
    pub(super) id: &'static str,
    pub(super) name: &'static str,
    pub(super) city: &'static str,
    pub(super) wa_id: Option<&'static str>,
}

/// Each city's first owner has the most listings; three of them can chat.
pub(super) const OWNERS: [OwnerSeed; 12] = [
    OwnerSeed {
        id: "O-01",
        name: "María Luisa Fernández Ortega",
        city: "Madrid",
        wa_id: Some("34600000001"),
    },
    OwnerSeed {
        id: "O-02",
        name: "Carlos Martín Peña",
        city: "Madrid",
        wa_id: None,
    },
    OwnerSeed {
        id: "O-03",
        name: "Patrimonios Castellana S.L.",
        city: "Madrid",
        wa_id: None,
    },
    OwnerSeed {
        id: "O-04",
        name: "Elena Ruiz Calvo",
        city: "Madrid",
        wa_id: None,
    },
    OwnerSeed {
        id: "O-05",
        name: "Vicent Soler Ferrer",
        city: "Valencia",
        wa_id: Some("34600000005"),
    },
    OwnerSeed {
        id: "O-06",
        name: "Amparo Llopis Martí",
        city: "Valencia",
        wa_id: None,
    },
    OwnerSeed {
        id: "O-07",
        name: "Josep Ribes Vidal",
        city: "Valencia",
        wa_id: None,
    },
    OwnerSeed {
        id: "O-08",
        name: "Rocío Jiménez Pérez",
        city: "Sevilla",
        wa_id: None,
    },
    OwnerSeed {
        id: "O-09",
        name: "Manuel Ortega Castaño",
        city: "Sevilla",
        wa_id: None,
    },
    OwnerSeed {
        id: "O-10",
        name: "Francisco Ruiz Moreno",
        city: "Málaga",
        wa_id: Some("34600000010"),
    },
    OwnerSeed {
        id: "O-11",
        name: "Carmen Navarro Gil",
        city: "Málaga",
        wa_id: None,
    },
    OwnerSeed {
        id: "O-12",
        name: "Antonio Vargas Medina",
        city: "Málaga",
        wa_id: None,
    },
];

pub(super) fn staff() -> Vec<StaffMember> {
    AGENTS
        .iter()
        .zip(AGENT_WA_IDS)
        .enumerate()
        .map(|(i, (name, wa_id))| StaffMember {
            id: format!("A-{:02}", i + 1),
            name: (*name).to_owned(),
            wa_id: Some(demo_wa_id(wa_id)),
            // Lucía and Javier take the handoffs: Lucía in the agency's opening hours,
            // Javier in mornings of his own.
            notify_handoffs: i < 2,
            hours: (i == 1).then(|| {
                ["monday", "tuesday", "wednesday", "thursday", "friday"]
                    .into_iter()
                    .map(|day| (day.to_owned(), vec!["9:00-14:00".to_owned()]))
                    .chain([("saturday".to_owned(), vec!["10:00-13:30".to_owned()])])
                    .collect()
            }),
            works_holidays: false,
            ..StaffMember::default()
        })
        .collect()
}

pub(super) fn owners() -> Vec<Owner> {
    OWNERS
        .iter()
        .map(|seed| Owner {
            id: seed.id.to_owned(),
            name: seed.name.to_owned(),
            wa_id: seed.wa_id.map(demo_wa_id),
            agent_id: None,
        })
        .collect()
}
