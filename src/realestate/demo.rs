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

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, Days, NaiveDate, TimeZone, Utc, Weekday};
use chrono_tz::Tz;

use super::model::{
    ListingStatus, Offer, OfferStatus, Operation, Owner, Property, PropertyType, Slot, StaffMember,
    Visit, VisitOutcome,
};

use super::store::RealEstateStore;
use crate::domain::GeoPoint;
use crate::domain::WaId;
use crate::store::StoreResult;

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
pub async fn seed(store: &dyn RealEstateStore, set: &DemoSet) -> StoreResult<SeedCounts> {
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
    Ok(SeedCounts {
        owners: set.owners.len(),
        staff: set.staff.len(),
        properties: set.properties.len(),
        slots: set.slots.len(),
        visits: set.visits.len(),
        offers: set.offers.len(),
    })
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

/// A demo owner: id, name, city, WhatsApp.
struct OwnerSeed {
    id: &'static str,
    name: &'static str,
    city: &'static str,
    wa_id: Option<&'static str>,
}

/// Each city's first owner has the most listings; three of them can chat.
const OWNERS: [OwnerSeed; 12] = [
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

fn staff() -> Vec<StaffMember> {
    AGENTS
        .iter()
        .zip(AGENT_WA_IDS)
        .enumerate()
        .map(|(i, (name, wa_id))| StaffMember {
            id: format!("A-{:02}", i + 1),
            name: (*name).to_owned(),
            wa_id: Some(demo_wa_id(wa_id)),
        })
        .collect()
}

fn owners() -> Vec<Owner> {
    OWNERS
        .iter()
        .map(|seed| Owner {
            id: seed.id.to_owned(),
            name: seed.name.to_owned(),
            wa_id: seed.wa_id.map(demo_wa_id),
        })
        .collect()
}

/// The cities of the portfolio.
const CITIES: [&str; 4] = ["Madrid", "Valencia", "Sevilla", "Málaga"];

/// A neighbourhood's market: where it is, its streets, its prices, what is listed there.
struct Neighbourhood {
    city: &'static str,
    name: &'static str,
    /// How a title names it: "en el Cabanyal", "en Chamberí".
    called: &'static str,
    centre: GeoPoint,
    streets: &'static [&'static str],
    /// Sale price range, €/m².
    sale_eur_m2: (u32, u32),
    /// Monthly rent range, €/m².
    rent_eur_m2: (u32, u32),
    /// One listing per entry, in this order.
    kinds: &'static [PropertyType],
    /// How likely a flat there has a parking space, and a concierge.
    garage_odds: f64,
    concierge_odds: f64,
    /// Floors of a typical building, ground floor included.
    storeys: u32,
    /// The description's last sentence.
    blurb: &'static str,
}

use PropertyType::{Commercial, Duplex, Flat, House, Office, Penthouse, Studio};

const NEIGHBOURHOODS: [Neighbourhood; 19] = [
    Neighbourhood {
        city: "Madrid",
        name: "Chamberí",
        called: "Chamberí",
        centre: GeoPoint {
            lat: 40.4335,
            lon: -3.7035,
        },
        streets: &[
            "Calle de Ponzano",
            "Calle de Santa Engracia",
            "Calle de Eloy Gonzalo",
            "Calle de Olid",
            "Calle de Trafalgar",
        ],
        sale_eur_m2: (6_000, 9_000),
        rent_eur_m2: (18, 24),
        kinds: &[Flat, Penthouse, Studio, Flat],
        garage_odds: 0.2,
        concierge_odds: 0.5,
        storeys: 7,
        blurb: "Chamberí es un barrio castizo y tranquilo, con mercados, terrazas y metro a pocos minutos.",
    },
    Neighbourhood {
        city: "Madrid",
        name: "Salamanca",
        called: "Salamanca",
        centre: GeoPoint {
            lat: 40.4270,
            lon: -3.6830,
        },
        streets: &[
            "Calle de Serrano",
            "Calle de Velázquez",
            "Calle de Goya",
            "Calle de Lagasca",
            "Calle de Claudio Coello",
            "Calle de Jorge Juan",
        ],
        sale_eur_m2: (7_000, 12_000),
        rent_eur_m2: (20, 25),
        kinds: &[Flat, Penthouse, Office, Flat, Duplex],
        garage_odds: 0.35,
        concierge_odds: 0.7,
        storeys: 7,
        blurb: "Está en el barrio de Salamanca, entre tiendas de primeras marcas y a un paso del Retiro.",
    },
    Neighbourhood {
        city: "Madrid",
        name: "Malasaña",
        called: "Malasaña",
        centre: GeoPoint {
            lat: 40.4255,
            lon: -3.7045,
        },
        streets: &[
            "Calle del Espíritu Santo",
            "Calle de la Palma",
            "Calle de San Vicente Ferrer",
            "Calle del Pez",
            "Calle de Manuela Malasaña",
        ],
        sale_eur_m2: (5_500, 8_000),
        rent_eur_m2: (19, 25),
        kinds: &[Studio, Flat, Commercial],
        garage_odds: 0.05,
        concierge_odds: 0.1,
        storeys: 5,
        blurb: "Malasaña es uno de los barrios con más vida de Madrid: cafés, librerías y ocio en la puerta.",
    },
    Neighbourhood {
        city: "Madrid",
        name: "Retiro",
        called: "Retiro",
        centre: GeoPoint {
            lat: 40.4180,
            lon: -3.6740,
        },
        streets: &[
            "Calle de Ibiza",
            "Calle de Menorca",
            "Avenida de Menéndez Pelayo",
            "Calle del Doctor Castelo",
            "Calle de O'Donnell",
        ],
        sale_eur_m2: (5_500, 8_500),
        rent_eur_m2: (17, 23),
        kinds: &[Flat, Flat, Penthouse, Office],
        garage_odds: 0.3,
        concierge_odds: 0.5,
        storeys: 8,
        blurb: "Queda a pocos minutos a pie del parque del Retiro, en una zona residencial muy bien comunicada.",
    },
    Neighbourhood {
        city: "Madrid",
        name: "Chamartín",
        called: "Chamartín",
        centre: GeoPoint {
            lat: 40.4500,
            lon: -3.6770,
        },
        streets: &[
            "Calle de Príncipe de Vergara",
            "Avenida de Alfonso XIII",
            "Calle de López de Hoyos",
            "Calle del Padre Damián",
            "Calle de Alberto Alcocer",
        ],
        sale_eur_m2: (5_500, 9_000),
        rent_eur_m2: (16, 22),
        kinds: &[House, Flat, Office, Duplex],
        garage_odds: 0.7,
        concierge_odds: 0.6,
        storeys: 9,
        blurb: "Es una zona residencial de Chamartín, con colegios, zonas verdes y buena conexión con la Castellana.",
    },
    Neighbourhood {
        city: "Madrid",
        name: "Lavapiés",
        called: "Lavapiés",
        centre: GeoPoint {
            lat: 40.4085,
            lon: -3.7000,
        },
        streets: &[
            "Calle de Argumosa",
            "Calle del Ave María",
            "Calle de la Fe",
            "Calle de Lavapiés",
            "Calle del Amparo",
        ],
        sale_eur_m2: (4_000, 6_000),
        rent_eur_m2: (16, 21),
        kinds: &[Studio, Flat, Commercial],
        garage_odds: 0.05,
        concierge_odds: 0.05,
        storeys: 5,
        blurb: "Lavapiés es un barrio multicultural y lleno de vida, a un paso de Atocha y del centro.",
    },
    Neighbourhood {
        city: "Valencia",
        name: "Ruzafa",
        called: "Ruzafa",
        centre: GeoPoint {
            lat: 39.4620,
            lon: -0.3740,
        },
        streets: &[
            "Calle de Sueca",
            "Calle de Cádiz",
            "Calle del Literato Azorín",
            "Calle de Puerto Rico",
            "Calle de Denia",
        ],
        sale_eur_m2: (3_000, 4_000),
        rent_eur_m2: (13, 17),
        kinds: &[Flat, Penthouse, Commercial, Studio],
        garage_odds: 0.15,
        concierge_odds: 0.1,
        storeys: 7,
        blurb: "Ruzafa es el barrio de moda de Valencia: mercado, restaurantes y galerías a la vuelta de la esquina.",
    },
    Neighbourhood {
        city: "Valencia",
        name: "El Carmen",
        called: "El Carmen",
        centre: GeoPoint {
            lat: 39.4775,
            lon: -0.3800,
        },
        streets: &[
            "Calle de Caballeros",
            "Calle de Quart",
            "Calle Alta",
            "Calle de la Bolsería",
            "Calle Baja",
        ],
        sale_eur_m2: (3_000, 4_000),
        rent_eur_m2: (13, 17),
        kinds: &[Flat, Duplex, Studio],
        garage_odds: 0.05,
        concierge_odds: 0.05,
        storeys: 4,
        blurb: "Está en pleno casco histórico de Valencia, junto a las Torres de Serranos y el jardín del Turia.",
    },
    Neighbourhood {
        city: "Valencia",
        name: "Benimaclet",
        called: "Benimaclet",
        centre: GeoPoint {
            lat: 39.4855,
            lon: -0.3600,
        },
        streets: &[
            "Calle de Emilio Baró",
            "Calle del Barón de San Petrillo",
            "Avenida de Valladolid",
            "Calle de Arquitecto Arnau",
        ],
        sale_eur_m2: (2_500, 3_200),
        rent_eur_m2: (12, 14),
        kinds: &[Flat, House, Studio],
        garage_odds: 0.3,
        concierge_odds: 0.05,
        storeys: 5,
        blurb: "Benimaclet conserva su aire de pueblo, con ambiente universitario y la huerta a un paso.",
    },
    Neighbourhood {
        city: "Valencia",
        name: "Cabanyal",
        called: "el Cabanyal",
        centre: GeoPoint {
            lat: 39.4670,
            lon: -0.3290,
        },
        streets: &[
            "Calle de la Reina",
            "Calle de Josep Benlliure",
            "Calle del Progreso",
            "Calle de la Barraca",
            "Calle de Escalante",
        ],
        sale_eur_m2: (2_500, 3_500),
        rent_eur_m2: (12, 15),
        kinds: &[House, Flat, Commercial],
        garage_odds: 0.1,
        concierge_odds: 0.0,
        storeys: 3,
        blurb: "El Cabanyal es el barrio marinero de Valencia, con casas modernistas y la playa de la Malvarrosa a pocos minutos.",
    },
    Neighbourhood {
        city: "Valencia",
        name: "Campanar",
        called: "Campanar",
        centre: GeoPoint {
            lat: 39.4810,
            lon: -0.3930,
        },
        streets: &[
            "Avenida de Pío XII",
            "Avenida de Campanar",
            "Calle del General Avilés",
            "Calle de Valle de la Ballestera",
        ],
        sale_eur_m2: (2_500, 3_500),
        rent_eur_m2: (12, 15),
        kinds: &[Flat, Penthouse, House],
        garage_odds: 0.7,
        concierge_odds: 0.4,
        storeys: 10,
        blurb: "Campanar combina su núcleo antiguo con avenidas modernas, junto al Bioparc y al jardín del Turia.",
    },
    Neighbourhood {
        city: "Sevilla",
        name: "Triana",
        called: "Triana",
        centre: GeoPoint {
            lat: 37.3835,
            lon: -6.0025,
        },
        streets: &[
            "Calle Betis",
            "Calle Pureza",
            "Calle San Jacinto",
            "Calle Castilla",
            "Calle Pagés del Corro",
        ],
        sale_eur_m2: (2_800, 4_000),
        rent_eur_m2: (12, 15),
        kinds: &[Flat, House, Penthouse, Commercial],
        garage_odds: 0.15,
        concierge_odds: 0.1,
        storeys: 4,
        blurb: "Triana es el barrio más flamenco de Sevilla, a orillas del Guadalquivir y con su famoso mercado.",
    },
    Neighbourhood {
        city: "Sevilla",
        name: "Nervión",
        called: "Nervión",
        centre: GeoPoint {
            lat: 37.3830,
            lon: -5.9735,
        },
        streets: &[
            "Avenida de Eduardo Dato",
            "Calle Luis de Morales",
            "Calle Beatriz de Suabia",
            "Avenida de San Francisco Javier",
            "Calle Marqués de Pickman",
        ],
        sale_eur_m2: (2_500, 3_500),
        rent_eur_m2: (12, 14),
        kinds: &[Flat, Office, Duplex],
        garage_odds: 0.6,
        concierge_odds: 0.5,
        storeys: 9,
        blurb: "Nervión es el centro comercial y de negocios de Sevilla, con metro y junto al estadio Sánchez-Pizjuán.",
    },
    Neighbourhood {
        city: "Sevilla",
        name: "Santa Cruz",
        called: "Santa Cruz",
        centre: GeoPoint {
            lat: 37.3858,
            lon: -5.9890,
        },
        streets: &[
            "Calle Mateos Gago",
            "Calle Santa Teresa",
            "Calle Ximénez de Enciso",
            "Calle Mesón del Moro",
            "Calle Águilas",
        ],
        sale_eur_m2: (3_500, 5_000),
        rent_eur_m2: (14, 18),
        kinds: &[Flat, Studio, Penthouse],
        garage_odds: 0.0,
        concierge_odds: 0.05,
        storeys: 3,
        blurb: "Está en el corazón del barrio de Santa Cruz, entre callejuelas, la Giralda y los Reales Alcázares.",
    },
    Neighbourhood {
        city: "Sevilla",
        name: "Los Remedios",
        called: "Los Remedios",
        centre: GeoPoint {
            lat: 37.3765,
            lon: -5.9995,
        },
        streets: &[
            "Calle Asunción",
            "Avenida de la República Argentina",
            "Calle Virgen de Luján",
            "Calle Virgen de África",
            "Calle Juan Sebastián Elcano",
        ],
        sale_eur_m2: (3_000, 4_500),
        rent_eur_m2: (12, 15),
        kinds: &[Flat, House, Flat],
        garage_odds: 0.5,
        concierge_odds: 0.6,
        storeys: 9,
        blurb: "Los Remedios es un barrio residencial y tranquilo, con todos los servicios y cerca del recinto de la Feria.",
    },
    Neighbourhood {
        city: "Málaga",
        name: "Centro",
        called: "el centro de Málaga",
        centre: GeoPoint {
            lat: 36.7220,
            lon: -4.4200,
        },
        streets: &[
            "Calle Granada",
            "Calle Carretería",
            "Calle Álamos",
            "Calle Beatas",
            "Calle Méndez Núñez",
        ],
        sale_eur_m2: (4_000, 5_500),
        rent_eur_m2: (15, 20),
        kinds: &[Flat, Studio, Commercial, Penthouse],
        garage_odds: 0.05,
        concierge_odds: 0.1,
        storeys: 5,
        blurb: "Está en pleno centro histórico de Málaga, a pocos pasos de la calle Larios, la Catedral y el Museo Picasso.",
    },
    Neighbourhood {
        city: "Málaga",
        name: "El Palo",
        called: "El Palo",
        centre: GeoPoint {
            lat: 36.7220,
            lon: -4.3590,
        },
        streets: &[
            "Avenida de Juan Sebastián Elcano",
            "Calle Bolivia",
            "Calle Quitapenas",
            "Calle Practicante Pedro Román",
        ],
        sale_eur_m2: (3_000, 4_500),
        rent_eur_m2: (13, 17),
        kinds: &[House, Flat],
        garage_odds: 0.3,
        concierge_odds: 0.05,
        storeys: 4,
        blurb: "El Palo es el barrio marinero de Málaga, con playa, chiringuitos y espetos en la puerta.",
    },
    Neighbourhood {
        city: "Málaga",
        name: "Teatinos",
        called: "Teatinos",
        centre: GeoPoint {
            lat: 36.7200,
            lon: -4.4700,
        },
        streets: &[
            "Bulevar Louis Pasteur",
            "Calle Navarro Ledesma",
            "Avenida de Plutarco",
            "Calle Jiménez Fraud",
        ],
        sale_eur_m2: (2_500, 3_500),
        rent_eur_m2: (12, 14),
        kinds: &[Flat, Duplex, Office],
        garage_odds: 0.8,
        concierge_odds: 0.4,
        storeys: 8,
        blurb: "Teatinos es un barrio moderno y familiar, junto a la Universidad y con amplias zonas verdes.",
    },
    Neighbourhood {
        city: "Málaga",
        name: "Soho",
        called: "el Soho",
        centre: GeoPoint {
            lat: 36.7168,
            lon: -4.4232,
        },
        streets: &[
            "Calle Tomás Heredia",
            "Calle Casas de Campos",
            "Calle Trinidad Grund",
            "Calle Vendeja",
        ],
        sale_eur_m2: (4_000, 5_500),
        rent_eur_m2: (15, 20),
        kinds: &[Studio, Flat, Commercial],
        garage_odds: 0.1,
        concierge_odds: 0.2,
        storeys: 6,
        blurb: "El Soho es el barrio de las artes de Málaga: arte urbano, el CAC y el puerto a dos pasos.",
    },
];

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

/// Each listing draws from its own stream, so adding a listing never changes the others.
const PROPERTY_SEED: u64 = 0x5A67_7561_6E00_0000;
const OFFER_SEED: u64 = 0x5A67_7561_6E0F_0000;

/// Listings whose position in the list, modulo 20, is one of these are for rent (35 %).
const RENT_POSITIONS: [usize; 7] = [1, 4, 7, 10, 13, 16, 19];

/// Every ninth listing (from the fifth) is no longer simply available, in this order; `None`
/// means sold or rented, as its operation says.
const CLOSED_STATUSES: [Option<ListingStatus>; 8] = [
    Some(ListingStatus::Reserved),
    None,
    Some(ListingStatus::Withdrawn),
    Some(ListingStatus::Reserved),
    None,
    Some(ListingStatus::Reserved),
    None,
    None,
];

fn properties(today: NaiveDate, tz: Tz) -> Vec<Property> {
    let mut properties = Vec::new();
    let mut listed_in_city = [0usize; CITIES.len()];
    for hood in &NEIGHBOURHOODS {
        let city = CITIES
            .iter()
            .position(|c| *c == hood.city)
            .expect("every neighbourhood is in a listed city");
        for &kind in hood.kinds {
            let index = properties.len();
            let ordinal_in_city = listed_in_city[city];
            listed_in_city[city] += 1;
            let mut rng = SplitMix64::new(PROPERTY_SEED + index as u64);
            properties.push(property(
                index,
                ordinal_in_city,
                hood,
                kind,
                &mut rng,
                today,
                tz,
            ));
        }
    }
    properties
}

/// Bedrooms, bathrooms and area of a listing of `kind`.
fn layout(kind: PropertyType, rng: &mut SplitMix64) -> (u32, u32, u32) {
    match kind {
        Studio => (0, 1, rng.between(35, 50)),
        Flat => {
            let bedrooms = rng.between(1, 4);
            let area = 38 + bedrooms * 22 + rng.between(0, 20);
            (bedrooms, 1 + bedrooms / 3 + u32::from(area > 120), area)
        }
        Penthouse => {
            let bedrooms = rng.between(1, 4);
            let area = 55 + bedrooms * 25 + rng.between(0, 25);
            (bedrooms, (1 + bedrooms / 2).min(3), area)
        }
        Duplex => {
            let bedrooms = rng.between(2, 4);
            (
                bedrooms,
                bedrooms.min(3),
                80 + bedrooms * 20 + rng.between(0, 25),
            )
        }
        House => {
            let bedrooms = rng.between(3, 5);
            (
                bedrooms,
                2 + u32::from(bedrooms >= 4),
                130 + bedrooms * 20 + rng.between(0, 20),
            )
        }
        Office => {
            let area = rng.between(60, 200);
            (0, 1 + u32::from(area > 120), area)
        }
        Commercial => (0, 1, rng.between(40, 150)),
    }
}

/// Where a home is in its building: `None` for houses, `Some(0)` for a ground floor.
fn floor(kind: PropertyType, storeys: u32, rng: &mut SplitMix64) -> Option<u32> {
    match kind {
        House | Penthouse => None,
        Commercial => Some(0),
        Studio | Flat | Duplex | Office => Some(rng.between(0, storeys - 1)),
    }
}

fn amenities(
    kind: PropertyType,
    operation: Operation,
    floor: Option<u32>,
    hood: &Neighbourhood,
    rng: &mut SplitMix64,
) -> Vec<String> {
    let home = !matches!(kind, Office | Commercial);
    let madrid = hood.city == "Madrid";
    let ground = floor == Some(0);
    let has = [
        // terraza
        match kind {
            Penthouse => true,
            House => rng.chance(0.6),
            Flat | Duplex => rng.chance(0.3),
            Studio => rng.chance(0.1),
            Office | Commercial => false,
        },
        // ascensor
        match kind {
            House | Commercial => false,
            Penthouse => true,
            _ if ground => false,
            _ if floor.is_some_and(|f| f >= 3) => true,
            _ => rng.chance(0.7),
        },
        // garaje
        match kind {
            House => rng.chance(0.7),
            Studio | Commercial => false,
            Office | Duplex => rng.chance(hood.garage_odds.max(0.4)),
            Flat | Penthouse => rng.chance(hood.garage_odds),
        },
        // piscina
        match kind {
            House => rng.chance(0.4),
            Flat | Penthouse | Duplex => rng.chance(hood.garage_odds * 0.3),
            _ => false,
        },
        // trastero
        home && rng.chance(if kind == House { 0.5 } else { 0.3 }),
        // aire acondicionado
        rng.chance(match (home, madrid) {
            (false, _) => 0.9,
            (true, true) => 0.55,
            (true, false) => 0.8,
        }),
        // calefacción
        kind != Commercial && rng.chance(if madrid { 0.9 } else { 0.35 }),
        // amueblado
        kind != Commercial
            && rng.chance(match (operation, home) {
                (Operation::Rent, true) => 0.7,
                (Operation::Rent, false) => 0.2,
                (Operation::Sale, _) => 0.1,
            }),
        // jardín
        kind == House || (home && ground && rng.chance(0.25)),
        // portero
        !matches!(kind, House | Commercial) && rng.chance(hood.concierge_odds),
    ];
    AMENITIES
        .iter()
        .zip(has)
        .filter(|(_, has)| *has)
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

/// The owner of the `ordinal`th listing of a city: each owner of the city gets one first,
/// then the city's first owner (an investor) a third of the rest, the others share the rest.
fn owner_of(city: &str, ordinal: usize, rng: &mut SplitMix64) -> &'static str {
    let owners: Vec<&OwnerSeed> = OWNERS.iter().filter(|o| o.city == city).collect();
    let chosen = if ordinal < owners.len() {
        ordinal
    } else if rng.chance(0.35) {
        0
    } else {
        1 + (rng.next() % (owners.len() as u64 - 1)) as usize
    };
    owners[chosen].id
}

fn property(
    index: usize,
    ordinal_in_city: usize,
    hood: &Neighbourhood,
    kind: PropertyType,
    rng: &mut SplitMix64,
    today: NaiveDate,
    tz: Tz,
) -> Property {
    let operation = if RENT_POSITIONS.contains(&(index % 20)) {
        Operation::Rent
    } else {
        Operation::Sale
    };
    let status = if index % 9 == 4 {
        CLOSED_STATUSES[(index / 9) % CLOSED_STATUSES.len()].unwrap_or(match operation {
            Operation::Sale => ListingStatus::Sold,
            Operation::Rent => ListingStatus::Rented,
        })
    } else {
        ListingStatus::Available
    };
    let (bedrooms, bathrooms, area_m2) = layout(kind, rng);
    let floor = floor(kind, hood.storeys, rng);
    let street = *rng.pick(hood.streets);
    let number = rng.between(2, 120);
    let door = *rng.pick(&["A", "B", "C", "D", "izda.", "dcha."]);
    let address = match (kind, floor) {
        (House, _) => format!("{street} {number}"),
        (Penthouse, _) => format!("{street} {number}, ático"),
        (Commercial, _) => format!("{street} {number}, local"),
        (_, Some(0)) => format!("{street} {number}, bajo {door}"),
        (_, Some(floor)) => format!("{street} {number}, {floor}º {door}"),
        (_, None) => format!("{street} {number}"),
    };
    let amenities = amenities(kind, operation, floor, hood, rng);

    let (low, high) = match operation {
        Operation::Sale => hood.sale_eur_m2,
        Operation::Rent => hood.rent_eur_m2,
    };
    // Penthouses sit at the top of the range, shops and offices lower.
    let position = match kind {
        Penthouse => 0.5 + 0.5 * rng.unit(),
        Office | Commercial => 0.6 * rng.unit(),
        _ => rng.unit(),
    };
    let eur_m2 = f64::from(low) + f64::from(high - low) * position;
    let step = match operation {
        Operation::Sale => 1_000.0,
        Operation::Rent => 10.0,
    };
    let price = ((f64::from(area_m2) * eur_m2 / step).round() * step) as u64;

    let centre = hood.centre;
    let location = GeoPoint {
        lat: round6(centre.lat + (rng.unit() - 0.5) * 0.006),
        lon: round6(centre.lon + (rng.unit() - 0.5) * 0.008),
    };
    let days_ago = 1 + rng.next() % LISTING_DAYS;
    let listed_on = today - Days::new(days_ago);
    let listed_at = at_local(tz, listed_on, rng.between(9, 18), 15 * rng.between(0, 3));

    let owner_id = owner_of(hood.city, ordinal_in_city, rng).to_owned();
    let title = title(kind, bedrooms, &amenities, hood.called, rng);
    let description = description(
        kind, operation, area_m2, bedrooms, bathrooms, floor, street, &amenities, hood, rng,
    );
    let photos = photos(index, kind, &amenities);
    Property {
        id: format!("P-{}", 1001 + index),
        title,
        description,
        operation,
        kind,
        city: hood.city.to_owned(),
        neighbourhood: hood.name.to_owned(),
        address,
        location,
        price,
        currency: "EUR".to_owned(),
        bedrooms,
        bathrooms,
        area_m2,
        amenities,
        status,
        owner_id,
        photos,
        listed_at,
        price_dropped_at: None,
    }
}

/// Where the demo's photos live (an agency's image CDN would serve them).
pub const DEMO_PHOTO_BASE: &str = "https://media.zaguan-demo.es/listings";

/// The demo listing's photos, the cover first: the rooms a listing of its kind shows.
fn photos(index: usize, kind: PropertyType, amenities: &[String]) -> Vec<String> {
    let mut rooms: Vec<&str> = match kind {
        Office | Commercial => vec!["fachada", "interior", "aseo"],
        Studio => vec!["salon", "cocina", "bano"],
        _ => vec!["salon", "cocina", "dormitorio", "bano"],
    };
    for (amenity, room) in [
        ("terraza", "terraza"),
        ("piscina", "piscina"),
        ("jardín", "jardin"),
    ] {
        if has_amenity(amenities, amenity) {
            rooms.insert(1, room);
        }
    }
    let id = 1001 + index;
    rooms
        .iter()
        .enumerate()
        .map(|(n, room)| format!("{DEMO_PHOTO_BASE}/P-{id}/{}-{room}.jpg", n + 1))
        .collect()
}

fn has_amenity(amenities: &[String], name: &str) -> bool {
    amenities.iter().any(|a| a == name)
}

/// Feminine nouns take feminine adjectives: "casa reformada", "piso reformado".
fn feminine(kind: PropertyType) -> bool {
    matches!(kind, House | Office)
}

fn agree(kind: PropertyType, masculine: &'static str, feminine_form: &'static str) -> &'static str {
    if feminine(kind) {
        feminine_form
    } else {
        masculine
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// "Ático con terraza en Chamberí".
fn title(
    kind: PropertyType,
    bedrooms: u32,
    amenities: &[String],
    neighbourhood: &str,
    rng: &mut SplitMix64,
) -> String {
    let noun = capitalised(kind.label_es());
    let feature = match kind {
        Penthouse if has_amenity(amenities, "piscina") => "con terraza y piscina".to_owned(),
        Penthouse => "con terraza".to_owned(),
        House if has_amenity(amenities, "piscina") => "con piscina".to_owned(),
        House => "con jardín".to_owned(),
        Commercial => rng
            .pick(&["comercial a pie de calle", "con escaparate"])
            .to_string(),
        Office => rng.pick(&["exterior", "luminosa", "reformada"]).to_string(),
        Studio if has_amenity(amenities, "amueblado") => "amueblado".to_owned(),
        Duplex if has_amenity(amenities, "garaje") => "con garaje".to_owned(),
        Flat | Duplex if bedrooms >= 3 => format!("de {bedrooms} dormitorios"),
        Flat if has_amenity(amenities, "terraza") => rng
            .pick(&[
                "con terraza",
                "exterior con terraza",
                "luminoso con terraza",
            ])
            .to_string(),
        Flat if has_amenity(amenities, "amueblado") => "amueblado".to_owned(),
        _ => agree(kind, "reformado", "reformada").to_owned(),
    };
    format!("{noun} {feature} en {neighbourhood}")
}

/// "la calle de Ponzano", "el bulevar Louis Pasteur".
fn street_in_prose(street: &str) -> String {
    let (kind, rest) = street.split_once(' ').unwrap_or((street, ""));
    let article = if matches!(kind, "Bulevar" | "Paseo") {
        "el"
    } else {
        "la"
    };
    format!("{article} {} {rest}", kind.to_lowercase())
}

fn count(n: u32, one: &str, many: &str) -> String {
    match n {
        1 => format!("un {one}"),
        _ => format!("{n} {many}"),
    }
}

/// "a, b y c".
fn listed(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [only] => only.clone(),
        [init @ .., last] => format!("{} y {last}", init.join(", ")),
    }
}

const ORDINAL_FLOORS: [&str; 10] = [
    "planta baja",
    "primera planta",
    "segunda planta",
    "tercera planta",
    "cuarta planta",
    "quinta planta",
    "sexta planta",
    "séptima planta",
    "octava planta",
    "novena planta",
];

/// Three sentences: what and where, what it has, the neighbourhood.
#[allow(clippy::too_many_arguments)]
fn description(
    kind: PropertyType,
    operation: Operation,
    area_m2: u32,
    bedrooms: u32,
    bathrooms: u32,
    floor: Option<u32>,
    street: &str,
    amenities: &[String],
    hood: &Neighbourhood,
    rng: &mut SplitMix64,
) -> String {
    let placement = match (kind, floor) {
        (House, _) => format!(", {}", rng.pick(&["de dos plantas", "de tres plantas"])),
        (Penthouse, _) => ", en la última planta".to_owned(),
        (Commercial, _) => ", a pie de calle".to_owned(),
        (_, Some(0)) => ", en planta baja".to_owned(),
        (_, Some(floor)) => format!(", en {} exterior", ORDINAL_FLOORS[floor as usize]),
        (_, None) => String::new(),
    };
    let what = format!(
        "{} en {} de {area_m2} m² en {}{placement}.",
        capitalised(kind.label_es()),
        operation.label_es(),
        street_in_prose(street),
    );
    let rooms = match kind {
        Studio => "Espacio diáfano con cocina americana y baño completo".to_owned(),
        Office => format!(
            "Distribuida en {} despachos y una zona abierta, con {}",
            2 + area_m2 / 50,
            count(bathrooms, "aseo", "aseos"),
        ),
        Commercial => "Diáfano, con escaparate a la calle y un aseo".to_owned(),
        _ => format!(
            "Tiene {} y {}, salón-comedor y cocina {}",
            count(bedrooms, "dormitorio", "dormitorios"),
            count(bathrooms, "baño", "baños"),
            rng.pick(&["equipada", "independiente", "reformada"]),
        ),
    };
    // "amueblado" is how it comes, not something it has.
    let features: Vec<String> = amenities
        .iter()
        .filter(|a| *a != "amueblado")
        .cloned()
        .collect();
    let has = if features.is_empty() {
        String::new()
    } else {
        format!("; cuenta con {}", listed(&features))
    };
    let furnished = if has_amenity(amenities, "amueblado") {
        format!(", y se entrega {}", agree(kind, "amueblado", "amueblada"))
    } else {
        String::new()
    };
    format!("{what} {rooms}{has}{furnished}. {}", hood.blurb)
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

/// Every available listing is shown every other day, Monday to Friday at two of the four
/// [`VISIT_TIMES`] (mornings or afternoons, alternating), Saturdays at one morning time, never
/// on Sundays; the agent rotates with the listing and the day.
fn slots(properties: &[Property], today: NaiveDate, tz: Tz) -> Vec<Slot> {
    let mut slots = Vec::new();
    for (index, property) in properties.iter().enumerate() {
        if property.status != ListingStatus::Available {
            continue;
        }
        for offset in 1..=SLOT_DAYS {
            let offset_usize = offset as usize;
            if !(offset_usize + index).is_multiple_of(2) {
                continue;
            }
            let date = today + Days::new(offset);
            let times = match date.weekday() {
                Weekday::Sun => continue,
                Weekday::Sat => &VISIT_TIMES[..2],
                _ => &VISIT_TIMES[..],
            };
            let parity = (index + offset_usize / 2) % 2;
            for (t, &(hour, minute)) in times.iter().enumerate() {
                if t % 2 != parity {
                    continue;
                }
                slots.push(Slot {
                    id: format!(
                        "S-{}-{}{hour:02}{minute:02}",
                        property.id.replace('-', ""),
                        date.format("%Y%m%d"),
                    ),
                    property_id: property.id.clone(),
                    starts_at: at_local(tz, date, hour, minute),
                    minutes: SLOT_MINUTES,
                    agent: AGENTS[(index + offset_usize) % AGENTS.len()].to_owned(),
                });
            }
        }
    }
    slots
}

const FEEDBACK_INTERESTED: [&str; 3] = [
    "Me ha gustado mucho: muy luminoso y bien distribuido. Quiero comentarlo con mi pareja antes de decidir.",
    "La zona es ideal y está en buen estado. Estoy comparando con otra opción; os digo algo esta semana.",
    "Buena impresión en general. Me preocupa un poco el ruido de la calle, pero sigue en mi lista.",
];
const FEEDBACK_NOT_INTERESTED: [&str; 3] = [
    "Es más pequeño de lo que parecía en las fotos y la cocina necesita reforma. No me encaja.",
    "Está bien, pero por ese precio esperaba algo más reformado. Lo descarto.",
    "Poca luz natural y bastante ruido. Seguiré buscando.",
];
const FEEDBACK_SECOND_VISIT: [&str; 2] = [
    "Me interesa, pero quiero volver con mi arquitecto para ver el estado de las instalaciones.",
    "Nos gustó; queremos volver a verlo con la familia, a ser posible un sábado por la mañana.",
];
/// What a customer says after a visit that ends in an offer on a home for sale, and the
/// conditions of that offer.
const OFFERS_TO_BUY: [(&str, Option<&str>); 4] = [
    (
        "Es justo lo que buscábamos. Vamos a presentar una oferta.",
        Some("Arras del 10 % a la firma del contrato."),
    ),
    (
        "Nos encantan la zona y la luz. Hacemos una oferta hoy mismo.",
        Some("Pago al contado; firma ante notario en 30 días."),
    ),
    (
        "Muy buen estado y buen precio para la zona; presentamos una oferta sujeta a hipoteca.",
        Some("Sujeta a la concesión de la hipoteca."),
    ),
    (
        "Nos encaja, pero habría que reformar la cocina; ofrecemos algo por debajo del precio.",
        None,
    ),
];

/// The same for a home for rent: the offer is a monthly rent.
const OFFERS_TO_RENT: [(&str, Option<&str>); 2] = [
    (
        "Es justo lo que buscábamos. Queremos alquilarlo cuanto antes.",
        Some("Contrato de cinco años; entrada el día 1 del mes que viene."),
    ),
    (
        "Nos encaja muy bien; proponemos una renta algo menor a cambio de un contrato largo.",
        Some("Contrato de larga duración con dos meses de fianza."),
    ),
];

/// Local times offers came in, the day after the visit.
const OFFER_TIMES: [(u32, u32); 5] = [(9, 40), (13, 15), (21, 30), (11, 5), (19, 45)];

/// The visits of the last month, oldest first, and whether each ended in an offer. `None`:
/// the customer has not been asked for feedback yet (the two most recent visits).
const VISIT_OUTCOMES: [Option<VisitOutcome>; 15] = [
    Some(VisitOutcome::Interested),
    Some(VisitOutcome::MadeOffer),
    Some(VisitOutcome::NotInterested),
    Some(VisitOutcome::WantsSecondVisit),
    Some(VisitOutcome::MadeOffer),
    Some(VisitOutcome::Interested),
    Some(VisitOutcome::MadeOffer),
    Some(VisitOutcome::NotInterested),
    Some(VisitOutcome::MadeOffer),
    Some(VisitOutcome::WantsSecondVisit),
    Some(VisitOutcome::MadeOffer),
    Some(VisitOutcome::Interested),
    Some(VisitOutcome::MadeOffer),
    None,
    None,
];

/// How the offers after those visits stand: older ones answered, recent ones pending.
const OFFER_STATUSES: [OfferStatus; 6] = [
    OfferStatus::Rejected,
    OfferStatus::Countered,
    OfferStatus::Withdrawn,
    OfferStatus::Submitted,
    OfferStatus::Countered,
    OfferStatus::Submitted,
];

/// A visit at `time` on a weekday `days_ago` days before `today` (a weekend moves to the
/// Friday before).
fn past_visit_time(today: NaiveDate, days_ago: u64, time: (u32, u32), tz: Tz) -> DateTime<Utc> {
    let mut date = today - Days::new(days_ago);
    while matches!(date.weekday(), Weekday::Sat | Weekday::Sun) {
        date = date - Days::new(1);
    }
    at_local(tz, date, time.0, time.1)
}

/// An offer of 91–97 % of the asking price (96–97 % when accepted), to the nearest 500 € for
/// a sale and 10 € for a monthly rent.
fn offer_amount(property: &Property, accepted: bool, rng: &mut SplitMix64) -> u64 {
    let percent = if accepted {
        rng.between(96, 97)
    } else {
        rng.between(91, 97)
    };
    let step = match property.operation {
        Operation::Sale => 500,
        Operation::Rent => 10,
    };
    (property.price * u64::from(percent) / 100 + step / 2) / step * step
}

/// Each reserved listing was visited and got the accepted offer that reserved it; then
/// [`VISIT_OUTCOMES`] over available homes (offers only on homes for sale). Ids follow time.
fn visits_and_offers(
    properties: &[Property],
    today: NaiveDate,
    tz: Tz,
) -> (Vec<Visit>, Vec<Offer>) {
    let is_home = |p: &&Property| !matches!(p.kind, Office | Commercial);
    let reserved: Vec<&Property> = properties
        .iter()
        .filter(|p| p.status == ListingStatus::Reserved)
        .collect();
    let available_homes: Vec<&Property> = properties
        .iter()
        .filter(|p| p.status == ListingStatus::Available)
        .filter(is_home)
        .collect();
    let homes_for_sale: Vec<&Property> = available_homes
        .iter()
        .copied()
        .filter(|p| p.operation == Operation::Sale)
        .collect();

    let mut rng = SplitMix64::new(OFFER_SEED);
    let mut visits = Vec::new();
    let mut offers = Vec::new();
    // The n-th offer on `property`, the day after `visited`: what the customer said, the offer.
    let mut offer = |property: &Property,
                     customer: &str,
                     visited_at: DateTime<Utc>,
                     status: OfferStatus|
     -> &'static str {
        let n = offers.len();
        let (feedback, conditions) = match property.operation {
            Operation::Sale => OFFERS_TO_BUY[n % OFFERS_TO_BUY.len()],
            Operation::Rent => OFFERS_TO_RENT[n % OFFERS_TO_RENT.len()],
        };
        let (hour, minute) = OFFER_TIMES[n % OFFER_TIMES.len()];
        let next_day = visited_at.with_timezone(&tz).date_naive() + Days::new(1);
        offers.push(Offer {
            id: String::new(),
            property_id: property.id.clone(),
            wa_id: demo_wa_id(customer),
            amount: offer_amount(property, status == OfferStatus::Accepted, &mut rng),
            currency: property.currency.clone(),
            conditions: conditions.map(str::to_owned),
            status,
            created_at: at_local(tz, next_day, hour, minute),
        });
        feedback
    };

    for (k, property) in reserved.iter().enumerate() {
        let customer = DEMO_CUSTOMERS[(k * 2 + 1) % DEMO_CUSTOMERS.len()];
        // At noon, a time the other visits never take: nobody is in two places at once.
        let visited_at = past_visit_time(today, 26 - 4 * k as u64, VISIT_TIMES[1], tz);
        let feedback = offer(property, customer, visited_at, OfferStatus::Accepted);
        visits.push(Visit {
            id: String::new(),
            property_id: property.id.clone(),
            wa_id: demo_wa_id(customer),
            visited_at,
            outcome: Some(VisitOutcome::MadeOffer),
            feedback: Some(feedback.to_owned()),
            rating: Some(5),
        });
    }

    let (mut next_home, mut next_sale, mut offers_made) = (2usize, 0usize, 0usize);
    let last = VISIT_OUTCOMES.len() as u64 - 1;
    for (j, outcome) in VISIT_OUTCOMES.iter().enumerate() {
        let property = if *outcome == Some(VisitOutcome::MadeOffer) {
            next_sale += 5;
            homes_for_sale[next_sale % homes_for_sale.len()]
        } else {
            next_home += 7;
            available_homes[next_home % available_homes.len()]
        };
        let customer = DEMO_CUSTOMERS[j % DEMO_CUSTOMERS.len()];
        // Spread from 27 days ago to yesterday.
        let days_ago = 27 - j as u64 * 26 / last;
        let time = [VISIT_TIMES[0], VISIT_TIMES[2], VISIT_TIMES[3]][j % 3];
        let visited_at = past_visit_time(today, days_ago, time, tz);
        let (feedback, rating) = match outcome {
            None => (None, None),
            Some(VisitOutcome::Interested) => (Some(FEEDBACK_INTERESTED[j % 3]), Some(4)),
            Some(VisitOutcome::NotInterested) => (
                Some(FEEDBACK_NOT_INTERESTED[j % 3]),
                Some(2 + (j % 2) as u8),
            ),
            Some(VisitOutcome::WantsSecondVisit) => (Some(FEEDBACK_SECOND_VISIT[j % 2]), Some(4)),
            Some(VisitOutcome::MadeOffer) => {
                let status = OFFER_STATUSES[offers_made % OFFER_STATUSES.len()];
                offers_made += 1;
                (Some(offer(property, customer, visited_at, status)), Some(5))
            }
        };
        visits.push(Visit {
            id: String::new(),
            property_id: property.id.clone(),
            wa_id: demo_wa_id(customer),
            visited_at,
            outcome: *outcome,
            feedback: feedback.map(str::to_owned),
            rating,
        });
    }

    visits.sort_by(|a, b| (a.visited_at, &a.property_id).cmp(&(b.visited_at, &b.property_id)));
    for (n, visit) in visits.iter_mut().enumerate() {
        visit.id = format!("V-{:04}", n + 1);
    }
    offers.sort_by(|a, b| (a.created_at, &a.property_id).cmp(&(b.created_at, &b.property_id)));
    for (n, offer) in offers.iter_mut().enumerate() {
        offer.id = format!("F-{:04}", n + 1);
    }
    (visits, offers)
}

#[cfg(test)]
mod tests;
