//! What a customer looks for, read from their words without a model: place (from the agency's
//! own place names, accent- and typo-tolerant), rent or buy, type, bedrooms, price range and
//! «cerca de mí», in Spanish, English and Portuguese.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};
use unicode_normalization::UnicodeNormalization as _;

use crate::realestate::{Operation, Property, PropertyType};

/// The search a customer asked for; every field optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Criteria {
    pub city: Option<String>,
    pub neighbourhood: Option<String>,
    pub operation: Option<Operation>,
    pub kind: Option<PropertyType>,
    pub min_price: Option<u64>,
    pub max_price: Option<u64>,
    pub min_bedrooms: Option<u32>,
    pub amenities: Vec<String>,
    pub near_me: bool,
}

impl Criteria {
    /// Nothing a search could use.
    pub fn is_empty(&self) -> bool {
        *self == Criteria::default()
    }

    /// `self` refined by what the customer said since: each criterion they named replaces
    /// the old one; a new place replaces the whole old place.
    pub fn refined(mut self, newer: Criteria) -> Criteria {
        if newer.city.is_some() || newer.neighbourhood.is_some() || newer.near_me {
            self.city = newer.city;
            self.neighbourhood = newer.neighbourhood;
            self.near_me = newer.near_me;
        }
        if newer.min_price.is_some() || newer.max_price.is_some() {
            self.min_price = newer.min_price;
            self.max_price = newer.max_price;
        }
        self.operation = newer.operation.or(self.operation);
        self.kind = newer.kind.or(self.kind);
        self.min_bedrooms = newer.min_bedrooms.or(self.min_bedrooms);
        for amenity in newer.amenities {
            if !self.amenities.contains(&amenity) {
                self.amenities.push(amenity);
            }
        }
        self
    }

    /// Where to look: a place or the customer's location.
    pub fn has_place(&self) -> bool {
        self.city.is_some() || self.neighbourhood.is_some() || self.near_me
    }

    /// The arguments of `search_properties`.
    pub fn to_args(&self) -> Value {
        let mut args = json!({});
        let mut put = |key: &str, value: Value| {
            args[key] = value;
        };
        if let Some(city) = &self.city {
            put("city", json!(city));
        }
        if let Some(neighbourhood) = &self.neighbourhood {
            put("neighbourhood", json!(neighbourhood));
        }
        if let Some(operation) = self.operation {
            put("operation", json!(operation.as_str()));
        }
        if let Some(kind) = self.kind {
            put("type", json!(kind.as_str()));
        }
        if let Some(min) = self.min_price {
            put("min_price", json!(min));
        }
        if let Some(max) = self.max_price {
            put("max_price", json!(max));
        }
        if let Some(bedrooms) = self.min_bedrooms {
            put("min_bedrooms", json!(bedrooms));
        }
        if !self.amenities.is_empty() {
            put("amenities", json!(self.amenities));
        }
        if self.near_me {
            put("near_me", json!(true));
        }
        args
    }

    /// The criteria of an earlier `search_properties` call.
    pub fn from_args(args: &Value) -> Criteria {
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        let number = |key: &str| args.get(key).and_then(Value::as_u64);
        Criteria {
            city: text("city"),
            neighbourhood: text("neighbourhood"),
            operation: match text("operation").as_deref() {
                Some("rent") => Some(Operation::Rent),
                Some("sale") => Some(Operation::Sale),
                _ => None,
            },
            kind: text("type")
                .and_then(|t| PropertyType::ALL.into_iter().find(|k| k.as_str() == t)),
            min_price: number("min_price"),
            max_price: number("max_price"),
            min_bedrooms: number("min_bedrooms").and_then(|n| u32::try_from(n).ok()),
            amenities: args
                .get("amenities")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            near_me: args.get("near_me").and_then(Value::as_bool) == Some(true),
        }
    }
}

/// The agency's place names, from its listings: what a customer's words are matched against.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// Longest names first, so «Santa Cruz» wins over a city called «Cruz».
    places: Vec<Place>,
}

#[derive(Debug, Clone)]
struct Place {
    /// As the data writes it: what the search is given.
    name: String,
    /// The city it is in (itself, for a city).
    city: String,
    is_city: bool,
    /// Folded words without a leading article: «El Carmen» is «carmen».
    words: Vec<String>,
}

/// Articles a place name may start with, which customers drop.
const ARTICLES: &[&str] = &["el", "la", "los", "las", "l", "o", "a", "os", "as"];

impl Places {
    pub fn from_properties(properties: &[Property]) -> Self {
        let mut places: Vec<Place> = Vec::new();
        let mut add = |name: &str, city: &str, is_city: bool| {
            let mut words = fold_words(name);
            while words.len() > 1 && ARTICLES.contains(&words[0].as_str()) {
                words.remove(0);
            }
            if words.is_empty()
                || places
                    .iter()
                    .any(|p| p.is_city == is_city && p.name == name && p.city == city)
            {
                return;
            }
            places.push(Place {
                name: name.to_owned(),
                city: city.to_owned(),
                is_city,
                words,
            });
        };
        for property in properties {
            add(&property.city, &property.city, true);
            add(&property.neighbourhood, &property.city, false);
        }
        places.sort_by_key(|p| std::cmp::Reverse(p.words.len()));
        Places { places }
    }

    /// The cities, in the order the data first names them.
    pub fn cities(&self) -> Vec<&str> {
        let mut cities: Vec<&str> = Vec::new();
        for place in self.places.iter().filter(|p| p.is_city) {
            if !cities.contains(&place.name.as_str()) {
                cities.push(&place.name);
            }
        }
        cities.sort_unstable();
        cities
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// The city and neighbourhood `words` name. A neighbourhood whose name several cities
    /// have is taken in the city named with it, or dropped.
    fn find(&self, words: &[&str]) -> (Option<String>, Option<String>) {
        let mut cities: Vec<&Place> = Vec::new();
        let mut hoods: Vec<&Place> = Vec::new();
        for place in &self.places {
            if named(&place.words, words) {
                if place.is_city {
                    cities.push(place);
                } else {
                    hoods.push(place);
                }
            }
        }
        let city = cities.first().map(|c| c.name.clone());
        let hood = match &city {
            Some(city) => hoods.iter().find(|h| &h.city == city),
            None if hoods
                .iter()
                .all(|h| h.name == hoods[0].name && h.city == hoods[0].city) =>
            {
                hoods.first()
            }
            // Several neighbourhoods of one city («Lavapiés o Malasaña»): the city.
            None if hoods.iter().all(|h| h.city == hoods[0].city) => {
                return (hoods.first().map(|h| h.city.clone()), None);
            }
            // The same name in several cities, and none named: ask rather than guess.
            None => None,
        };
        match hood {
            Some(hood) => (Some(hood.city.clone()), Some(hood.name.clone())),
            None => (city, None),
        }
    }
}

/// Whether the customer's `words` name `place`: its words in a row, each exact or, for a long
/// word, within a typo or two («Valncia», «Sevila», «Madird»).
fn named(place: &[String], words: &[&str]) -> bool {
    if place.len() > words.len() {
        return false;
    }
    words
        .windows(place.len())
        .any(|window| window.iter().zip(place).all(|(w, p)| close(w, p)))
}

fn close(word: &str, name: &str) -> bool {
    if word == name {
        return true;
    }
    let len = name.chars().count();
    let allowed = match len {
        0..=4 => 0,
        5..=7 => 1,
        _ => 2,
    };
    allowed > 0
        && word.chars().count() >= 4
        && !VOCABULARY.contains(&word)
        && strsim::osa_distance(word, name) <= allowed
}

/// A listing's reference, as the data writes it (`P-1001`).
pub static LISTING_ID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bP-\d{1,9}\b").expect("valid"));

/// A listing quoted by its number: «ref 1018», «Ref. P-1018», «referencia 1001», «la referencia
/// es 1030», «reference 1012», «referência 1007», «ref.1015» (over folded text).
static QUOTED_REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bref(?:erencia|erence|\.)?\b\.?\s*(?:(?:es|is|e|:|n|no|num)\s*\.?\s*)?(?:p\s*-?\s*)?(\d{3,6})\b")
        .expect("valid")
});

/// The listing `text` names: its reference as the data writes it (`P-1018`), however the
/// customer quoted it.
pub fn reference(text: &str) -> Option<String> {
    if let Some(found) = LISTING_ID.find(text) {
        return Some(found.as_str().to_uppercase());
    }
    QUOTED_REFERENCE
        .captures(&fold(text))
        .map(|c| format!("P-{}", &c[1]))
}

/// `text` folded, without listing references: «el P-1001» names no price, and «una oferta por
/// el P-1001» or «ref 1018» no amount.
fn fold_without_references(text: &str) -> String {
    static PORTUGUESE_POSTAL: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\b\d{4}-\d{3}\b").expect("valid"));
    let folded = fold(&LISTING_ID.replace_all(text, " "));
    let folded = QUOTED_REFERENCE.replace_all(&folded, " ");
    let folded = PORTUGUESE_POSTAL.replace_all(&folded, " ");
    join_spaced_thousands(&folded)
}

/// «800 000» and «1 200 000» as one figure (a space groups thousands in pt and fr).
fn join_spaced_thousands(text: &str) -> String {
    static SPACED: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\b\d{1,3}(?:[ \u{a0}\u{202f}]\d{3})+\b").expect("valid"));
    SPACED
        .replace_all(text, |c: &regex::Captures<'_>| {
            c[0].chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
        })
        .into_owned()
}

/// Reads the criteria in `text`.
pub fn read(text: &str, places: &Places) -> Criteria {
    let folded = fold_without_references(text);
    let mut tokens = lex(&folded);
    let mut criteria = Criteria {
        min_bedrooms: bedrooms(&mut tokens),
        ..Criteria::default()
    };
    let (min, max) = prices(&mut tokens);
    criteria.min_price = min;
    criteria.max_price = max;
    let words: Vec<&str> = tokens
        .iter()
        .filter(|t| !t.used && t.number.is_none())
        .map(|t| t.text.as_str())
        .collect();
    criteria.operation = operation(&words, &folded);
    criteria.kind = kind(&words);
    criteria.amenities = amenities(&words);
    criteria.near_me = NEAR_ME
        .iter()
        .any(|phrase| contains_phrase(&folded, phrase));
    let (city, neighbourhood) = places.find(&words);
    criteria.city = city;
    criteria.neighbourhood = neighbourhood;
    criteria
}

/// Lowercase, accents dropped, everything else kept (a price's dots and commas matter).
pub fn fold(text: &str) -> String {
    text.replace('²', "2")
        .nfd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

fn fold_words(text: &str) -> Vec<String> {
    WORD.find_iter(&fold(text))
        .map(|m| m.as_str().to_owned())
        .collect()
}

/// Whether `phrase` (folded words) is in `folded` as whole words.
fn contains_phrase(folded: &str, phrase: &str) -> bool {
    let padded = format!(
        " {} ",
        WORD.find_iter(folded)
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    padded.contains(&format!(" {phrase} "))
}

static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[a-z0-9]+").expect("valid"));
static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bt\d\b|\d+(?:[.,]\d+)*|[a-z]+|€|\$|-").expect("valid"));

#[derive(Debug)]
struct Token {
    text: String,
    /// A figure: «1.200» is 1200, «1,5» is 1.5.
    number: Option<f64>,
    /// Read as a criterion already.
    used: bool,
}

fn lex(folded: &str) -> Vec<Token> {
    TOKEN
        .find_iter(folded)
        .map(|m| {
            let text = m.as_str().to_owned();
            let number = figure(&text).or_else(|| small_number(&text));
            Token {
                text,
                number,
                used: false,
            }
        })
        .collect()
}

/// «1.200», «1,200» and «300.000» group thousands; «1,5» and «2.5» have decimals.
fn figure(text: &str) -> Option<f64> {
    if !text.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let groups: Vec<&str> = text.split(['.', ',']).collect();
    if groups.len() > 1 && groups[1..].iter().all(|g| g.len() == 3) {
        return groups.concat().parse().ok();
    }
    if groups.len() == 2 {
        return format!("{}.{}", groups[0], groups[1]).parse().ok();
    }
    groups.concat().parse().ok()
}

/// Numbers written as words, as in «dos habitaciones» (one to six).
fn small_number(word: &str) -> Option<f64> {
    Some(match word {
        "una" | "uno" | "one" | "um" | "uma" => 1.0,
        "dos" | "two" | "dois" | "duas" => 2.0,
        "tres" | "three" => 3.0,
        "cuatro" | "four" | "quatro" => 4.0,
        "cinco" | "five" => 5.0,
        "seis" | "six" => 6.0,
        _ => return None,
    })
}

const BEDROOM_WORDS: &[&str] = &[
    "hab",
    "habs",
    "habitacion",
    "habitaciones",
    "habitacio",
    "habitacions",
    "dormitorio",
    "dormitorios",
    "dorm",
    "dorms",
    "cuarto",
    "cuartos",
    "alcobas",
    "bedroom",
    "bedrooms",
    "bed",
    "beds",
    "bd",
    "bdr",
    "br",
    "room",
    "rooms",
    "quarto",
    "quartos",
    "suite",
    "suites",
    "habitaciónes",
    "habitacines",
    "habitaciones",
    "abitaciones",
    "havitaciones",
    "dormitorioss",
    "recamara",
    "recamaras",
    "ambientes",
    "bedrom",
    "bedrooms",
    "quatros",
];

/// The bedrooms of a Portuguese typology («t2»).
fn typology(text: &str) -> Option<u32> {
    let n = text.strip_prefix('t')?;
    (n.len() == 1).then(|| n.parse().ok()).flatten()
}

/// Joins of a range of bedrooms: «2 a 3», «2 or 3», «2-3».
const RANGE_OR: &[&str] = &["a", "o", "or", "ou", "to", "-", "y", "e", "and"];

/// Joins between a number and its bedroom word: «3 o más habitaciones».
const OR_MORE: &[&str] = &[
    "o", "mas", "or", "more", "ou", "mais", "y", "+", "de", "plus",
];

fn bedrooms(tokens: &mut [Token]) -> Option<u32> {
    let is_bedroom = |t: &Token| {
        BEDROOM_WORDS.contains(&t.text.as_str())
            || (t.text.len() >= 8 && t.text.starts_with("habitac"))
            || (t.text.len() >= 7 && t.text.starts_with("dormitor"))
    };
    for i in 0..tokens.len() {
        // Portuguese typology: T2 is two bedrooms; «T2 ou T3», at least two.
        if let Some(n) = typology(&tokens[i].text) {
            tokens[i].used = true;
            if let (Some(join), Some(next)) = (tokens.get(i + 1), tokens.get(i + 2))
                && RANGE_OR.contains(&join.text.as_str())
                && typology(&next.text).is_some()
            {
                tokens[i + 1].used = true;
                tokens[i + 2].used = true;
            }
            return Some(n);
        }
        let Some(n) = tokens[i].number else { continue };
        if n.fract() != 0.0 || !(0.0..=20.0).contains(&n) {
            continue;
        }
        // «de 2 a 3 habitaciones», «2 or 3 bedrooms», «2-3 quartos»: at least the first.
        if let (Some(join), Some(high)) = (tokens.get(i + 1), tokens.get(i + 2))
            && RANGE_OR.contains(&join.text.as_str())
            && high
                .number
                .is_some_and(|m| m.fract() == 0.0 && m >= n && m <= 20.0)
            && tokens.get(i + 3).is_some_and(is_bedroom)
        {
            for token in &mut tokens[i..=i + 3] {
                token.used = true;
            }
            return Some(n as u32);
        }
        let mut j = i + 1;
        while j < tokens.len() && j <= i + 3 && OR_MORE.contains(&tokens[j].text.as_str()) {
            j += 1;
        }
        if j < tokens.len() && is_bedroom(&tokens[j]) {
            for token in &mut tokens[i..=j] {
                token.used = true;
            }
            return Some(n as u32);
        }
    }
    None
}

const THOUSAND: &[&str] = &["mil", "k", "thousand", "grand"];
const MILLION: &[&str] = &[
    "m", "millon", "millones", "million", "millions", "milhao", "milhoes", "mill", "mln",
];
const CURRENCY: &[&str] = &["€", "eur", "euro", "euros", "$"];
const AREA: &[&str] = &[
    "m2", "metros", "metro", "mt", "mts", "sqm", "sq", "square", "ft",
];

/// Words right before a figure that make it the top of the budget («hasta», «under»)…
const MAX_CUES: &[&str] = &[
    "hasta",
    "maximo",
    "max",
    "menos",
    "tope",
    "up",
    "under",
    "below",
    "less",
    "most",
    "ate",
    "abaixo",
    "budget",
    "presupuesto",
    "orcamento",
    "within",
];
/// …or its bottom («desde», «a partir de», «over»).
const MIN_CUES: &[&str] = &[
    "desde", "partir", "minimo", "min", "over", "above", "least", "acima", "from", "superior",
    "mas",
];
const RANGE_JOIN: &[&str] = &["y", "and", "e", "a", "to", "-", "hasta", "ate"];

/// A price: a figure with a multiplier or a currency, or one big enough to be one. Its value
/// and the tokens it spans.
fn price_at(tokens: &[Token], i: usize) -> Option<(f64, usize, bool)> {
    let n = tokens[i].number?;
    if tokens[i].used {
        return None;
    }
    let next = tokens.get(i + 1).map(|t| t.text.as_str());
    let after = tokens.get(i + 2).map(|t| t.text.as_str());
    if next.is_some_and(|w| AREA.contains(&w)) || (next == Some("m") && after == Some("2")) {
        return None;
    }
    let (value, mut end, scaled) = match next {
        Some(w) if THOUSAND.contains(&w) => (n * 1_000.0, i + 2, true),
        Some(w) if MILLION.contains(&w) => (n * 1_000_000.0, i + 2, true),
        _ => (n, i + 1, false),
    };
    let currency = tokens
        .get(end)
        .is_some_and(|t| CURRENCY.contains(&t.text.as_str()))
        || (i > 0 && CURRENCY.contains(&tokens[i - 1].text.as_str()));
    if tokens
        .get(end)
        .is_some_and(|t| CURRENCY.contains(&t.text.as_str()))
    {
        end += 1;
    }
    // A year, a floor or a count of rooms is not a price.
    if !scaled && !currency && (value < 100.0 || (1900.0..=2100.0).contains(&value)) {
        return None;
    }
    if !scaled && !currency && tokens[i].text.bytes().all(|b| b.is_ascii_digit()) {
        let before = |n: usize, words: &[&str]| {
            tokens[i.saturating_sub(n)..i]
                .iter()
                .any(|t| words.contains(&t.text.as_str()))
        };
        let budget = before(2, MAX_CUES) || before(2, MIN_CUES);
        // A postal code: «en el 28010», «CP 46005», «código postal 41010».
        if tokens[i].text.len() == 5
            && !budget
            && (before(3, POSTAL_CUES)
                || before(
                    1,
                    &["el", "en", "in", "em", "no", "na", "the", "area", "zona"],
                ))
        {
            return None;
        }
        // A street number: «por la Avenida del Puerto 180», unless a budget is said of it.
        if before(6, STREET_WORDS) && !budget {
            return None;
        }
    }
    Some((value, end, scaled))
}

/// Words before five digits that make them a postal code.
const POSTAL_CUES: &[&str] = &[
    "cp", "c", "p", "codigo", "postal", "zip", "postcode", "cep", "code",
];

/// Words of an address: a figure after one is the street's number.
const STREET_WORDS: &[&str] = &[
    "calle",
    "c",
    "cl",
    "avenida",
    "avda",
    "av",
    "avd",
    "plaza",
    "pza",
    "pl",
    "paseo",
    "camino",
    "carrer",
    "ronda",
    "travesia",
    "glorieta",
    "carretera",
    "ctra",
    "via",
    "rua",
    "avenue",
    "ave",
    "street",
    "st",
    "road",
    "rd",
    "lane",
    "praca",
    "largo",
    "travessa",
    "alameda",
    "numero",
    "num",
    "portal",
    "passeig",
    "avinguda",
    "rambla",
    "placa",
    "paseig",
    "avenue",
    "calle",
    "carrera",
];

fn prices(tokens: &mut [Token]) -> (Option<u64>, Option<u64>) {
    let mut found: Vec<(usize, f64, usize, bool)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match price_at(tokens, i) {
            Some((value, end, scaled)) => {
                found.push((i, value, end, scaled));
                i = end;
            }
            None => {
                // «entre 200 y 300 mil»: a small first figure of a range is a price too.
                i += 1;
            }
        }
    }
    let mut min = None;
    let mut max = None;
    for (k, &(start, value, end, scaled)) in found.iter().enumerate() {
        for token in &mut tokens[start..end] {
            token.used = true;
        }
        // A range: this figure, a join, the next figure.
        if let Some(&(next_start, next_value, _, next_scaled)) = found.get(k + 1)
            && next_start == end + 1
            && RANGE_JOIN.contains(&tokens[end].text.as_str())
        {
            // «entre 200 y 300 mil»: the first figure shares the second's multiplier.
            let low = if !scaled && next_scaled && value * range_unit(next_value) <= next_value {
                value * range_unit(next_value)
            } else {
                value
            };
            if low <= next_value {
                return (Some(low as u64), Some(next_value as u64));
            }
        }
        // The nearest cue before the figure says which end it is; none: the top.
        let cue = tokens[start.saturating_sub(4)..start]
            .iter()
            .rev()
            .map(|t| t.text.as_str())
            .find(|w| MIN_CUES.contains(w) || MAX_CUES.contains(w));
        let negated = start >= 2
            && tokens[start.saturating_sub(3)..start]
                .iter()
                .any(|t| t.text == "no");
        if cue.is_some_and(|w| MIN_CUES.contains(&w)) && !negated {
            min = min.or(Some(value as u64));
        } else {
            max = max.or(Some(value as u64));
        }
    }
    // «entre 200 y 300 mil»: the 200 was too small to be a price on its own.
    if found.len() == 1 {
        let (start, value, _, scaled) = found[0];
        if scaled
            && start >= 2
            && RANGE_JOIN.contains(&tokens[start - 1].text.as_str())
            && let Some(low) = tokens[start - 2].number
            && low < value
        {
            let unit = range_unit(value);
            let low = if low * unit < value { low * unit } else { low };
            return (Some(low as u64), Some(value as u64));
        }
    }
    (min, max)
}

/// The multiplier of the figure that ends a range: 1,000 for «300 mil».
fn range_unit(value: f64) -> f64 {
    if value >= 1_000_000.0 {
        1_000_000.0
    } else {
        1_000.0
    }
}

const RENT: &[&str] = &[
    "alquiler",
    "alquilar",
    "alquilo",
    "alquila",
    "alquileres",
    "arrendar",
    "arriendo",
    "arrendamiento",
    "renta",
    "rentar",
    "rent",
    "renting",
    "rental",
    "rentals",
    "lease",
    "alugar",
    "aluguel",
    "aluguer",
    "arrendamento",
    "alugo",
    "mensual",
    "mensuales",
    "monthly",
    "pcm",
    "mensais",
    "alqiler",
    "alquier",
    "let",
    "lettings",
    "arrenda",
    "aluga",
    "alugando",
    "rento",
    "rentaria",
    "alquilaria",
    "alguiler",
    "alquilr",
];
const SALE: &[&str] = &[
    "comprar",
    "compra",
    "compro",
    "venta",
    "buy",
    "buying",
    "purchase",
    "sale",
    "venda",
    "adquirir",
    "comprarme",
    "comprarlo",
    "comprala",
    "comprarla",
    "compar",
    "conprar",
];

fn operation(words: &[&str], folded: &str) -> Option<Operation> {
    let rent = words.iter().any(|w| RENT.contains(w))
        || folded.contains("/mes")
        || ["al mes", "por mes", "a month", "per month", "a mes"]
            .iter()
            .any(|phrase| contains_phrase(folded, phrase));
    let sale = words.iter().any(|w| SALE.contains(w))
        || contains_phrase(folded, "en propiedad")
        || contains_phrase(folded, "for sale")
        || contains_phrase(folded, "a venda");
    match (rent, sale) {
        (true, false) => Some(Operation::Rent),
        (false, true) => Some(Operation::Sale),
        _ => None,
    }
}

fn kind(words: &[&str]) -> Option<PropertyType> {
    use PropertyType::*;
    words.iter().find_map(|w| {
        Some(match *w {
            "piso" | "pisos" | "apartamento" | "apartamentos" | "apartment" | "apartments"
            | "flat" | "flats" | "apto" | "departamento" | "departamentos" | "depto" | "deptos"
            | "depa" | "depas" | "condo" | "apartamentinho" => Flat,
            "atico" | "aticos" | "penthouse" | "penthouses" | "cobertura" => Penthouse,
            "estudio" | "estudios" | "studio" | "studios" | "loft" | "kitchenette" => Studio,
            "duplex" | "duplexes" => Duplex,
            "chalet" | "chalets" | "chale" | "adosado" | "unifamiliar" | "house" | "houses"
            | "villa" | "moradia" | "vivenda" | "townhouse" | "bungalow" | "cottage"
            | "moradias" | "sobrado" | "casita" => House,
            "oficina" | "oficinas" | "office" | "offices" | "escritorio" => Office,
            "local" | "locales" | "shop" | "loja" | "commercial" => Commercial,
            _ => return None,
        })
    })
}

/// The data's amenity words, by what customers write.
const AMENITIES: &[(&str, &[&str])] = &[
    (
        "terraza",
        &[
            "terraza", "terrazas", "terrace", "terraco", "balcon", "balcony",
        ],
    ),
    ("ascensor", &["ascensor", "lift", "elevator", "elevador"]),
    (
        "garaje",
        &["garaje", "garage", "parking", "garagem", "cochera"],
    ),
    ("piscina", &["piscina", "pool", "swimming"]),
    ("trastero", &["trastero", "storage"]),
    (
        "amueblado",
        &[
            "amueblado",
            "amueblada",
            "furnished",
            "mobilado",
            "mobiliado",
        ],
    ),
    ("jardín", &["jardin", "garden", "jardim"]),
    (
        "aire acondicionado",
        &["acondicionado", "conditioning", "condicionado"],
    ),
];

fn amenities(words: &[&str]) -> Vec<String> {
    AMENITIES
        .iter()
        .filter(|(_, said)| words.iter().any(|w| said.contains(w)))
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

const NEAR_ME: &[&str] = &[
    "cerca de mi",
    "cerca mio",
    "cerca de donde estoy",
    "cerca de aqui",
    "por aqui cerca",
    "aqui cerca",
    "near me",
    "nearby",
    "close to me",
    "around me",
    "near here",
    "perto de mim",
    "perto daqui",
    "aqui perto",
    "proximo de mim",
    "mi ubicacion",
    "my location",
    "minha localizacao",
];

/// Words of the criteria themselves: never read as a misspelt place.
const VOCABULARY: &[&str] = &[
    "alquiler",
    "alquilar",
    "comprar",
    "compra",
    "venta",
    "busco",
    "buscando",
    "quiero",
    "habitaciones",
    "dormitorios",
    "piso",
    "pisos",
    "apartamento",
    "casa",
    "centro",
    "cerca",
    "barrio",
    "zona",
    "ciudad",
    "hasta",
    "entre",
    "desde",
    "precio",
    "euros",
    "looking",
    "rent",
    "flat",
    "house",
    "bedrooms",
    "apartment",
    "procuro",
    "alugar",
    "quartos",
    "quero",
    "valor",
    "vivienda",
    "tengo",
    "gracias",
    "favor",
    "hola",
    "buenas",
    "ciudades",
    "sevillana",
];

/// The amounts of money in `text`, each with the words of its clause around it («entrada de
/// 60.000», «60.000 de entrada»): what a mortgage or an offer is read from. Bedrooms and areas
/// are not amounts. A clause ends at a comma, a stop, or «y» / «and» / «e» / «pero»: in «piso
/// de 300 mil, tengo 60 mil ahorrados y cobro 2.500 al mes» each amount keeps its own words.
pub fn amounts(text: &str) -> Vec<(u64, Vec<String>)> {
    let folded = fold_without_references(text);
    let mut found = Vec::new();
    for clause in CLAUSE.split(&folded) {
        let mut tokens = lex(clause);
        bedrooms(&mut tokens);
        let mut i = 0;
        while i < tokens.len() {
            match price_at(&tokens, i) {
                Some((value, end, _)) => {
                    let around = tokens[i.saturating_sub(4)..i]
                        .iter()
                        .chain(tokens[end..(end + 3).min(tokens.len())].iter())
                        .map(|t| t.text.clone())
                        .collect();
                    found.push((value as u64, around));
                    i = end;
                }
                None => i += 1,
            }
        }
    }
    found
}

/// Where a clause ends: a comma or stop before a space, or a joining word.
static CLAUSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[,;.!?]\s|[,;!?]$|\s(?:y|and|e|pero|but|mas|aunque|though)\s").expect("valid")
});

/// What a mortgage question names: the home's price, the down payment, the term and the rate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MortgageNumbers {
    pub price: Option<u64>,
    pub down_payment: Option<u64>,
    pub years: Option<u32>,
    pub rate: Option<f64>,
}

/// The numbers of a mortgage question: an amount said as savings or a down payment is the down
/// payment; one said as income or per month («cobro 2.500 al mes») is neither; the largest of
/// the rest is the price.
pub fn mortgage_numbers(text: &str) -> MortgageNumbers {
    let mut numbers = MortgageNumbers {
        years: years(text),
        rate: percent(text),
        ..MortgageNumbers::default()
    };
    for (amount, around) in amounts(text) {
        let said = |words: &[&str]| around.iter().any(|w| words.contains(&w.as_str()));
        let monthly = around.windows(2).any(|pair| {
            matches!(
                (pair[0].as_str(), pair[1].as_str()),
                ("al" | "por" | "a" | "per" | "ao", "mes" | "month" | "mês")
            )
        });
        if said(INCOME) || monthly {
            continue;
        }
        if said(DOWN_PAYMENT) {
            numbers.down_payment = numbers.down_payment.or(Some(amount));
        } else {
            numbers.price = Some(numbers.price.map_or(amount, |p| p.max(amount)));
        }
    }
    numbers
}

/// Words of an amount that is the down payment.
const DOWN_PAYMENT: &[&str] = &[
    "entrada",
    "ahorros",
    "ahorrado",
    "ahorrados",
    "ahorradas",
    "aporto",
    "aportar",
    "aportamos",
    "aportaria",
    "down",
    "deposit",
    "savings",
    "saved",
    "poupanca",
    "poupancas",
    "poupado",
    "poupados",
    "tengo",
    "tenemos",
    "tenho",
    "temos",
    "have",
    "put",
];

/// Words of an amount that is income, or paid each month: neither price nor down payment.
const INCOME: &[&str] = &[
    "cobro",
    "cobra",
    "cobramos",
    "gano",
    "gana",
    "ganamos",
    "ingresos",
    "ingreso",
    "ingresamos",
    "sueldo",
    "salario",
    "nomina",
    "neto",
    "netos",
    "netas",
    "brutos",
    "mensuales",
    "mensual",
    "cuota",
    "earn",
    "earns",
    "income",
    "salary",
    "make",
    "net",
    "monthly",
    "ganho",
    "ganha",
    "ganhamos",
    "recebo",
    "recebemos",
    "renda",
    "rendimento",
    "mensais",
    "prestacao",
];

/// A term in years («30 años», «25 years», «30 anos»).
pub fn years(text: &str) -> Option<u32> {
    static YEARS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\b(\d{1,2})\s*-?\s*(?:anos|ano|years|year|yrs|yr|a)\b").expect("valid")
    });
    // «tengo 35 años», «I'm 40 years old»: an age, not a term.
    static AGE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\b(?:tengo|tenemos|tiene|tenho|temos|im|i am|we are|aged|edad de|de edad)\s*$")
            .expect("valid")
    });
    let folded = fold(text);
    YEARS.captures_iter(&folded).find_map(|c| {
        let whole = c.get(0)?;
        let before = &folded[..whole.start()];
        let after = &folded[whole.end()..];
        if AGE.is_match(before) || after.trim_start().starts_with("old") {
            return None;
        }
        c[1].parse().ok()
    })
}

/// A rate in percent («al 2,95 %», «3.1%»).
pub fn percent(text: &str) -> Option<f64> {
    static RATE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(\d{1,2}(?:[.,]\d{1,2})?)\s*%").expect("valid"));
    RATE.captures(text)
        .and_then(|c| c[1].replace(',', ".").parse().ok())
}
