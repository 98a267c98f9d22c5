//! The demo's listings: drawn per listing from its own seeded stream, in the neighbourhoods'
//! markets, with titles and descriptions written the way an agency writes them.

use super::neighbourhoods::{CITIES, NEIGHBOURHOODS, Neighbourhood};
use super::people::{OWNERS, OwnerSeed};
use crate::realestate::PropertyType::{
    self, Commercial, Duplex, Flat, House, Office, Penthouse, Studio,
};
use crate::realestate::demo::{AMENITIES, GeoPoint, LISTING_DAYS, SplitMix64, at_local, round6};
use crate::realestate::{ListingStatus, Operation, Property};
use chrono::{Days, NaiveDate};
use chrono_tz::Tz;

/// Each listing draws from its own stream, so adding a listing never changes the others.
const PROPERTY_SEED: u64 = 0x5A67_7561_6E00_0000;

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

pub(super) fn properties(today: NaiveDate, tz: Tz) -> Vec<Property> {
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
pub(super) fn floor(kind: PropertyType, storeys: u32, rng: &mut SplitMix64) -> Option<u32> {
    match kind {
        House | Penthouse => None,
        Commercial => Some(0),
        Studio | Flat | Duplex | Office => Some(rng.between(0, storeys - 1)),
    }
}

pub(super) fn amenities(
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

pub(super) fn property(
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
        agent_id: None,
        feed_id: None,
        descriptions: Default::default(),
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
pub(super) fn title(
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

pub(super) fn count(n: u32, one: &str, many: &str) -> String {
    match n {
        1 => format!("un {one}"),
        _ => format!("{n} {many}"),
    }
}

/// "a, b y c".
pub(super) fn listed(items: &[String]) -> String {
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
pub(super) fn description(
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
