use super::criteria::{self, Criteria, Places};
use crate::realestate::{Operation, PropertyType, demo};

fn demo_places() -> Places {
    let today = chrono::Utc::now().date_naive();
    let set = demo::demo_set(today, chrono_tz::Europe::Madrid);
    let available: Vec<_> = set
        .properties
        .into_iter()
        .filter(|p| p.status == crate::realestate::ListingStatus::Available)
        .collect();
    Places::from_properties(&available)
}

/// `key=value …` of a phrasings file as criteria.
fn expected(spec: &str) -> Criteria {
    let mut c = Criteria::default();
    for pair in spec.split(' ').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').expect("key=value");
        match key {
            "city" => c.city = Some(value.to_owned()),
            "hood" => c.neighbourhood = Some(value.to_owned()),
            "op" => {
                c.operation = Some(match value {
                    "rent" => Operation::Rent,
                    "sale" => Operation::Sale,
                    other => panic!("op={other}"),
                })
            }
            "kind" => {
                c.kind = Some(
                    PropertyType::ALL
                        .into_iter()
                        .find(|k| k.as_str() == value)
                        .expect("a type"),
                )
            }
            "beds" => c.min_bedrooms = Some(value.parse().unwrap()),
            "min" => c.min_price = Some(value.parse().unwrap()),
            "max" => c.max_price = Some(value.parse().unwrap()),
            "near" => c.near_me = value == "1",
            "amen" => c.amenities = value.split(',').map(str::to_owned).collect(),
            other => panic!("unknown criterion {other}"),
        }
    }
    c.amenities.sort();
    c
}

/// The lines of a phrasings file: (message, expected criteria).
fn cases(file: &str) -> Vec<(&str, Criteria)> {
    file.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (text, spec) = line.split_once('\t').expect("a tab");
            (text, expected_spec(spec))
        })
        .collect()
}

/// The spec with names of several words joined back («hood=El Carmen»).
fn expected_spec(spec: &str) -> Criteria {
    let mut pairs: Vec<String> = Vec::new();
    for word in spec.split(' ') {
        if word.contains('=') || pairs.is_empty() {
            pairs.push(word.to_owned());
        } else {
            let last = pairs.last_mut().expect("a pair");
            last.push('\u{a0}');
            last.push_str(word);
        }
    }
    let mut c = expected(&pairs.join(" "));
    c.city = c.city.map(|n| n.replace('\u{a0}', " "));
    c.neighbourhood = c.neighbourhood.map(|n| n.replace('\u{a0}', " "));
    c
}

/// The cases read wrong, each with what was wanted and what was read.
fn misread(cases: &[(&str, Criteria)], places: &Places) -> Vec<String> {
    cases
        .iter()
        .filter_map(|(text, want)| {
            let got = read_sorted(text, places);
            (got != *want).then(|| format!("{text}\n  want {want:?}\n  got  {got:?}"))
        })
        .collect()
}

fn read_sorted(text: &str, places: &Places) -> Criteria {
    let mut read = criteria::read(text, places);
    read.amenities.sort();
    read
}

#[test]
fn every_phrasing_of_a_search_yields_its_criteria() {
    let places = demo_places();
    let cases = cases(include_str!(
        "../../../tests/data/offline/search_phrasings.tsv"
    ));
    assert!(cases.len() >= 80, "{} phrasings", cases.len());
    let wrong = misread(&cases, &places);
    assert!(wrong.is_empty(), "{}\n{}", wrong.len(), wrong.join("\n"));
}

/// Measured only: the held-out phrasings were never used to build the reader.
#[test]
fn most_held_out_phrasings_yield_their_criteria() {
    let places = demo_places();
    let cases = cases(include_str!(
        "../../../tests/data/offline/search_phrasings_held_out.tsv"
    ));
    let wrong = misread(&cases, &places);
    let right = cases.len() - wrong.len();
    eprintln!(
        "held-out phrasings: {right}/{} read right\n{}",
        cases.len(),
        wrong.join("\n")
    );
    assert!(
        right * 100 >= cases.len() * 80,
        "{right}/{} held-out phrasings read right",
        cases.len()
    );
}

#[test]
fn a_refinement_replaces_only_what_it_names() {
    let places = demo_places();
    let first = criteria::read("piso en Valencia para alquilar, 2 habitaciones", &places);
    let refined = first
        .clone()
        .refined(criteria::read("mejor en Ruzafa, hasta 1.000", &places));
    assert_eq!(refined.neighbourhood.as_deref(), Some("Ruzafa"));
    assert_eq!(refined.operation, Some(Operation::Rent));
    assert_eq!(refined.min_bedrooms, Some(2));
    assert_eq!(refined.max_price, Some(1000));
    assert_eq!(
        Criteria::from_args(&refined.to_args()),
        refined,
        "the criteria survive the tool call"
    );
}

#[test]
fn amounts_years_and_rates_read_for_a_mortgage() {
    let text = "250.000 €, entrada 60.000, 30 años al 2,95 %";
    assert_eq!(amounts_in(text), vec![250_000, 60_000]);
    assert!(criteria::amounts(text)[1].1.contains(&"entrada".to_owned()));
    assert_eq!(criteria::years("a 25 años"), Some(25));
    assert_eq!(criteria::percent("al 2,95 %"), Some(2.95));
    assert_eq!(criteria::amounts("3 habitaciones y 2 baños"), Vec::new());
}

#[test]
fn a_listing_reference_is_no_price_and_no_amount() {
    // «el P-1001» after a search names a listing, not a maximum price of 1,001.
    assert_eq!(
        criteria::read("el P-1001", &demo_places()),
        Criteria::default()
    );
    assert!(criteria::read("el p-1001", &demo_places()).is_empty());
    // «por el P-1001» names no amount; the amounts beside it still count.
    assert!(criteria::amounts("Quiero hacer una oferta por el P-1001").is_empty());
    assert_eq!(amounts_in("ofrezco 700.000 € por el P-1001"), vec![700_000]);
    assert_eq!(
        amounts_in("simula la hipoteca del P-1023 con 30k de entrada"),
        vec![30_000]
    );
}

/// The amounts read from `text`, without the words around them.
fn amounts_in(text: &str) -> Vec<u64> {
    criteria::amounts(text)
        .into_iter()
        .map(|(a, _)| a)
        .collect()
}
