//! The demo's calendar: visit slots in the weeks ahead, and last month's visits with the offers
//! that followed.

use crate::realestate::PropertyType::{Commercial, Office};
use crate::realestate::demo::{
    AGENTS, DEMO_CUSTOMERS, SLOT_DAYS, SLOT_MINUTES, SplitMix64, VISIT_TIMES, at_local, demo_wa_id,
};
use crate::realestate::{
    ListingStatus, Offer, OfferStatus, Operation, Property, Slot, Visit, VisitOutcome,
};
use chrono::{DateTime, Datelike, Days, NaiveDate, Utc, Weekday};
use chrono_tz::Tz;

/// Offers draw from their own stream, apart from the listings'.
const OFFER_SEED: u64 = 0x5A67_7561_6E0F_0000;

/// Every available listing is shown every other day, Monday to Friday at two of the four
/// [`VISIT_TIMES`] (mornings or afternoons, alternating), Saturdays at one morning time, never
/// on Sundays; the agent rotates with the listing and the day.
pub(super) fn slots(properties: &[Property], today: NaiveDate, tz: Tz) -> Vec<Slot> {
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
pub(super) fn visits_and_offers(
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
            answer: Default::default(),
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
