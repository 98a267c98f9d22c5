//! Reader for Kyero v3 property feeds, the XML that Spanish agencies' CRMs export.
//!
//! Real feeds bend the schema, so values are read leniently (CDATA, stray
//! whitespace, any case, thousands separators, unknown elements). A
//! `<property>` that cannot become a listing is reported in [`Feed::skipped`]
//! with its position and a reason, so one bad entry never costs the rest;
//! only a feed that is unreadable as a whole is a [`FeedError`].

use std::borrow::Cow;
use std::collections::HashMap;

use chrono::{NaiveDate, NaiveDateTime};
use quick_xml::Reader;
use quick_xml::errors::{Error as XmlError, SyntaxError};
use quick_xml::events::Event;

/// A feed read whole: the listings it holds and the `<property>` elements that could not be one.
#[derive(Debug, Clone, PartialEq)]
pub struct Feed {
    pub listings: Vec<FeedListing>,
    pub skipped: Vec<Skipped>,
}

/// A `<property>` left out, with enough to find it in the feed and tell the agency why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    /// 1-based index of the `<property>` in the feed.
    pub position: usize,
    /// Its `<ref>`, else its `<id>`, if readable.
    pub id: Option<String>,
    pub reason: String,
}

/// Why a whole feed was refused; per-property problems go to [`Feed::skipped`] instead.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("not well-formed XML: {0}")]
    NotXml(String),
    #[error("not a Kyero feed: {0}")]
    NotKyero(String),
    /// Cut short in transfer: importing the part would silently drop listings.
    #[error("feed cut short: {0}")]
    Truncated(String),
    #[error("feed too large: more than {limit} {what}")]
    TooLarge { what: &'static str, limit: usize },
}

/// More properties than any agency feed we take; guards memory and import time.
pub const MAX_PROPERTIES: usize = 20_000;

/// Inputs over this are refused before parsing, for the same reason.
const MAX_BYTES: usize = 200 * 1024 * 1024;

/// One property of the feed, mapped to our vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedListing {
    /// `<ref>`, trimmed: the id customers quote. Falls back to `<id>` when the
    /// feed has no `<ref>`, so that every listing stays addressable.
    pub reference: String,
    /// `<id>`, trimmed (may be empty when only `<ref>` is given).
    pub feed_id: String,
    pub date: Option<NaiveDateTime>,
    /// `price_freq` month => true, sale => false (weekly rents are skipped).
    pub rent: bool,
    /// None when the price is `x`, empty, missing or 0: all ways feeds say "on request".
    pub price: Option<u64>,
    /// `<currency>`, upper-cased, default "EUR".
    pub currency: String,
    /// One of "flat", "penthouse", "studio", "duplex", "house", "office", "commercial".
    pub kind: &'static str,
    pub town: String,
    pub province: String,
    pub location_detail: Option<String>,
    /// (latitude, longitude); None when out of range or (0, 0), a common "unknown".
    pub location: Option<(f64, f64)>,
    pub beds: u32,
    pub baths: u32,
    /// `<surface_area><built>`; None when absent, unreadable or 0.
    pub built_m2: Option<u32>,
    /// (language code as in the feed, text), in feed order, empty texts dropped.
    pub descriptions: Vec<(String, String)>,
    /// Features and flags in our amenity vocabulary, deduplicated, in order of first appearance.
    pub amenities: Vec<String>,
    /// http(s) image URLs ordered by the `id` attribute, then feed order.
    pub images: Vec<String>,
    pub new_build: bool,
}

impl FeedListing {
    /// The description in `lang` if the feed has it, else Spanish, else English, else the first.
    pub fn description(&self, lang: &str) -> Option<&str> {
        let find = |code: &str| {
            self.descriptions
                .iter()
                .find(|(c, _)| c.eq_ignore_ascii_case(code))
                .map(|(_, t)| t.as_str())
        };
        find(lang)
            .or_else(|| find("es"))
            .or_else(|| find("en"))
            .or_else(|| self.descriptions.first().map(|(_, t)| t.as_str()))
    }
}

/// Reads a whole feed. Refuses it only when it is not XML, not Kyero, cut
/// short or too large; an empty feed is Ok with no listings (the caller decides).
pub fn read(xml: &[u8]) -> Result<Feed, FeedError> {
    read_with_limits(xml, MAX_BYTES, MAX_PROPERTIES)
}

fn read_with_limits(xml: &[u8], max_bytes: usize, max_props: usize) -> Result<Feed, FeedError> {
    if xml.len() > max_bytes {
        return Err(FeedError::TooLarge {
            what: "bytes",
            limit: max_bytes,
        });
    }
    let text = decode(xml)?;
    Parser::new(&text, max_props).run()
}

/// UTF-8 as is; a feed cut inside a multi-byte character keeps its valid
/// prefix (the parser then reports the cut); declared single-byte encodings,
/// still common in older Spanish CRMs, are transcoded.
fn decode(xml: &[u8]) -> Result<Cow<'_, str>, FeedError> {
    match std::str::from_utf8(xml) {
        Ok(s) => Ok(Cow::Borrowed(s)),
        Err(e) if e.error_len().is_none() => {
            let valid = &xml[..e.valid_up_to()];
            Ok(Cow::Borrowed(
                std::str::from_utf8(valid).unwrap_or_default(),
            ))
        }
        Err(e) => {
            if xml.starts_with(&[0xFF, 0xFE]) || xml.starts_with(&[0xFE, 0xFF]) {
                return Err(FeedError::NotXml("UTF-16 feeds are not supported".into()));
            }
            match declared_encoding(xml).as_deref() {
                Some("iso-8859-1" | "latin1" | "latin-1" | "windows-1252" | "cp1252") => {
                    Ok(Cow::Owned(xml.iter().map(|&b| cp1252(b)).collect()))
                }
                Some("iso-8859-15" | "latin9" | "latin-9") => {
                    Ok(Cow::Owned(xml.iter().map(|&b| latin9(b)).collect()))
                }
                _ => Err(FeedError::NotXml(format!(
                    "invalid UTF-8 at byte {} and no single-byte encoding declared",
                    e.valid_up_to()
                ))),
            }
        }
    }
}

/// The `encoding` of the XML declaration, lower-cased.
fn declared_encoding(xml: &[u8]) -> Option<String> {
    let head = &xml[..xml.len().min(256)];
    let end = head.windows(2).position(|w| w == b"?>")?;
    let decl = String::from_utf8_lossy(&head[..end]);
    if !decl.trim_start_matches('\u{feff}').starts_with("<?xml") {
        return None;
    }
    let rest = &decl[decl.find("encoding")? + "encoding".len()..];
    let rest = rest.trim_start().strip_prefix('=')?.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let value = &rest[1..];
    Some(value[..value.find(quote)?].trim().to_ascii_lowercase())
}

fn cp1252(b: u8) -> char {
    const HIGH: [char; 32] = [
        '\u{20AC}', '\u{81}', '\u{201A}', '\u{192}', '\u{201E}', '\u{2026}', '\u{2020}',
        '\u{2021}', '\u{2C6}', '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8D}', '\u{17D}',
        '\u{8F}', '\u{90}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}',
        '\u{2014}', '\u{2DC}', '\u{2122}', '\u{161}', '\u{203A}', '\u{153}', '\u{9D}', '\u{17E}',
        '\u{178}',
    ];
    match b {
        0x80..=0x9F => HIGH[(b - 0x80) as usize],
        _ => char::from(b),
    }
}

fn latin9(b: u8) -> char {
    match b {
        0xA4 => '\u{20AC}',
        0xA6 => '\u{160}',
        0xA8 => '\u{161}',
        0xB4 => '\u{17D}',
        0xB8 => '\u{17E}',
        0xBC => '\u{152}',
        0xBD => '\u{153}',
        0xBE => '\u{178}',
        _ => char::from(b),
    }
}

/// A `<property>` subtree, kept whole so fields can be read in any order.
#[derive(Debug, Default)]
struct Node {
    name: String,
    /// The `id` attribute, kept only for `<image>`.
    id_attr: Option<String>,
    text: String,
    children: Vec<Node>,
}

impl Node {
    fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Trimmed text of a direct child, None when missing or blank.
    fn value(&self, name: &str) -> Option<&str> {
        self.child(name)
            .map(|c| c.text.trim())
            .filter(|t| !t.is_empty())
    }
}

struct Parser<'a> {
    text: &'a str,
    reader: Reader<&'a [u8]>,
    max_props: usize,
    /// Names of the open elements, for structure checks and "where it stopped".
    path: Vec<String>,
    /// Open nodes of the current property; `building[0]` is the `<property>`.
    building: Vec<Node>,
    /// Depth of markup inside a `<desc>` language, kept as text (inline HTML).
    raw_depth: usize,
    root_done: bool,
    saw_kyero: bool,
    position: usize,
    seen_refs: HashMap<String, usize>,
    feed: Feed,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, max_props: usize) -> Self {
        let mut reader = Reader::from_str(text);
        // A bare `&` ("Bed & Breakfast") is a common slip in CRM exports; keep it as text.
        reader.config_mut().allow_dangling_amp = true;
        Parser {
            text,
            reader,
            max_props,
            path: Vec::new(),
            building: Vec::new(),
            raw_depth: 0,
            root_done: false,
            saw_kyero: false,
            position: 0,
            seen_refs: HashMap::new(),
            feed: Feed {
                listings: Vec::new(),
                skipped: Vec::new(),
            },
        }
    }

    fn run(mut self) -> Result<Feed, FeedError> {
        loop {
            let event = match self.reader.read_event() {
                Ok(ev) => ev,
                Err(e) => return Err(self.xml_error(e)),
            };
            match event {
                Event::Start(e) => {
                    let name = e.name().as_ref().to_owned();
                    if self.in_raw_html() {
                        self.raw_depth += 1;
                        self.push_text(&format!("<{}>", &*e));
                    } else {
                        self.open(&name, &e)?;
                    }
                    self.path.push(name);
                }
                Event::Empty(e) => {
                    let name = e.name().as_ref().to_owned();
                    if self.in_raw_html() {
                        self.push_text(&format!("<{}/>", &*e));
                    } else {
                        self.open(&name, &e)?;
                        self.close();
                    }
                    if self.path.is_empty() {
                        self.root_done = true;
                    }
                }
                Event::End(e) => {
                    self.path.pop();
                    if self.raw_depth > 0 {
                        self.raw_depth -= 1;
                        self.push_text(&format!("</{}>", e.name().as_ref()));
                    } else {
                        self.close();
                    }
                    if self.path.is_empty() {
                        self.root_done = true;
                    }
                }
                Event::Text(t) => self.text_event(&t.xml10_content())?,
                Event::CData(c) => self.text_event(&c.xml10_content())?,
                Event::GeneralRef(r) => {
                    let resolved = match r.resolve_char_ref() {
                        Ok(Some(c)) => c.to_string(),
                        _ => match quick_xml::escape::resolve_xml_entity(&r) {
                            Some(s) => s.to_owned(),
                            // Unknown (often HTML) entities are kept verbatim.
                            None => format!("&{};", &*r),
                        },
                    };
                    self.text_event(&resolved)?;
                }
                Event::Eof => return self.finish(),
                Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
            }
        }
    }

    fn in_raw_html(&self) -> bool {
        self.raw_depth > 0 || (self.building.len() == 3 && self.building[1].name == "desc")
    }

    fn open(&mut self, name: &str, e: &quick_xml::events::BytesStart) -> Result<(), FeedError> {
        match self.path.len() {
            0 if self.root_done => {
                return Err(FeedError::NotXml(format!(
                    "second root element <{name}> at line {}",
                    self.line(self.reader.buffer_position())
                )));
            }
            0 if name != "root" => {
                return Err(FeedError::NotKyero(format!(
                    "root element is <{name}>, expected <root>"
                )));
            }
            1 if name == "kyero" => self.saw_kyero = true,
            1 if name == "property" => {
                self.position += 1;
                if self.position > self.max_props {
                    return Err(FeedError::TooLarge {
                        what: "properties",
                        limit: self.max_props,
                    });
                }
            }
            _ => {}
        }
        if self.path.len() == 1 && name == "property" || !self.building.is_empty() {
            let id_attr = if name == "image" {
                e.try_get_attribute("id")
                    .ok()
                    .flatten()
                    .map(|a| a.value.trim().to_owned())
            } else {
                None
            };
            self.building.push(Node {
                name: name.to_owned(),
                id_attr,
                ..Node::default()
            });
        }
        Ok(())
    }

    fn close(&mut self) {
        let Some(node) = self.building.pop() else {
            return;
        };
        match self.building.last_mut() {
            Some(parent) => parent.children.push(node),
            None => self.property_done(node),
        }
    }

    fn push_text(&mut self, s: &str) {
        if let Some(node) = self.building.last_mut() {
            node.text.push_str(s);
        }
    }

    fn text_event(&mut self, s: &str) -> Result<(), FeedError> {
        if self.path.is_empty() && !s.trim().is_empty() {
            let where_ = if self.root_done { "after" } else { "before" };
            return Err(FeedError::NotXml(format!(
                "text {where_} the root element at line {}",
                self.line(self.reader.buffer_position())
            )));
        }
        self.push_text(s);
        Ok(())
    }

    fn property_done(&mut self, node: Node) {
        let position = self.position;
        let id = node
            .value("ref")
            .or_else(|| node.value("id"))
            .map(str::to_owned);
        let skip = |reason: String| Skipped {
            position,
            id: id.clone(),
            reason,
        };
        match listing_from(&node) {
            Ok(listing) => match self.seen_refs.get(&listing.reference) {
                Some(first) => {
                    let reason = format!(
                        "duplicate ref \"{}\" (first at property {first})",
                        listing.reference
                    );
                    self.feed.skipped.push(skip(reason));
                }
                None => {
                    self.seen_refs.insert(listing.reference.clone(), position);
                    self.feed.listings.push(listing);
                }
            },
            Err(reason) => self.feed.skipped.push(skip(reason)),
        }
    }

    fn finish(self) -> Result<Feed, FeedError> {
        if !self.path.is_empty() {
            return Err(FeedError::Truncated(format!(
                "ends inside {}",
                self.describe_position(self.reader.buffer_position())
            )));
        }
        if !self.root_done {
            return Err(FeedError::NotXml("no root element".into()));
        }
        if !self.saw_kyero && self.position == 0 {
            return Err(FeedError::NotKyero(
                "<root> holds neither <kyero> nor <property>".into(),
            ));
        }
        Ok(self.feed)
    }

    fn xml_error(&self, e: XmlError) -> FeedError {
        let pos = self.reader.error_position();
        // The reader looks for the closing `>`, `-->`, `]]>` or quote to the
        // end of input, so these only happen when the input stops early.
        let at_eof = match &e {
            XmlError::Syntax(SyntaxError::InvalidBangMarkup) => pos as usize + 2 >= self.text.len(),
            XmlError::Syntax(_) => true,
            _ => false,
        };
        if at_eof {
            FeedError::Truncated(format!(
                "ends in unfinished markup ({e}) inside {}",
                self.describe_position(pos)
            ))
        } else {
            FeedError::NotXml(format!("{e} at line {}", self.line(pos)))
        }
    }

    /// "<desc> (root/property/desc) of property 4 (ref "X"), line 88".
    fn describe_position(&self, pos: u64) -> String {
        let mut s = match self.path.last() {
            Some(last) => format!("<{last}> ({})", self.path.join("/")),
            None => "the document".to_owned(),
        };
        if let Some(prop) = self.building.first() {
            s.push_str(&format!(" of property {}", self.position));
            if let Some(r) = prop.value("ref").or_else(|| prop.value("id")) {
                s.push_str(&format!(" (ref \"{r}\")"));
            }
        }
        s.push_str(&format!(", line {}", self.line(pos)));
        s
    }

    fn line(&self, pos: u64) -> usize {
        let end = (pos as usize).min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }
}

/// Maps one `<property>` to a listing, or says why it cannot be one.
fn listing_from(p: &Node) -> Result<FeedListing, String> {
    let feed_id = p.value("id").unwrap_or_default().to_owned();
    let reference = match p.value("ref") {
        Some(r) => r.to_owned(),
        None if !feed_id.is_empty() => feed_id.clone(),
        None => return Err("no <ref> or <id>".into()),
    };
    let town = p.value("town").ok_or("missing <town>")?.to_owned();
    let rent = match p.value("price_freq").map(str::to_lowercase).as_deref() {
        Some("sale") => false,
        Some("month") => true,
        Some("week") => return Err("weekly rents are not taken (price_freq week)".into()),
        Some(other) => return Err(format!("unknown price_freq \"{other}\"")),
        None => return Err("missing <price_freq>".into()),
    };
    let raw_type = p.value("type").ok_or("missing <type>")?;
    let kind = map_type(raw_type).ok_or_else(|| format!("unmapped type \"{raw_type}\""))?;
    let price = match p.value("price") {
        None => None,
        Some(raw) => parse_price(raw).ok_or_else(|| format!("price \"{raw}\" is not a number"))?,
    };
    Ok(FeedListing {
        reference,
        feed_id,
        date: p.value("date").and_then(parse_date),
        rent,
        price,
        currency: p
            .value("currency")
            .map_or_else(|| "EUR".to_owned(), str::to_uppercase),
        kind,
        town,
        province: p.value("province").unwrap_or_default().to_owned(),
        location_detail: p.value("location_detail").map(str::to_owned),
        location: p.child("location").and_then(parse_location),
        beds: p.value("beds").map_or(0, parse_count),
        baths: p.value("baths").map_or(0, parse_count),
        built_m2: p
            .child("surface_area")
            .and_then(|s| s.value("built"))
            .and_then(parse_number)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0),
        descriptions: p
            .child("desc")
            .map(|d| {
                d.children
                    .iter()
                    .map(|c| (c.name.clone(), c.text.trim().to_owned()))
                    .filter(|(_, t)| !t.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        amenities: amenities(p),
        images: p.child("images").map(images).unwrap_or_default(),
        new_build: p.value("new_build").is_some_and(parse_flag),
    })
}

/// Lower-cases and strips Spanish/Western accents, so "Ático", "ATICO" and "atico" agree.
fn fold(s: &str) -> String {
    s.chars()
        .flat_map(char::to_lowercase)
        .map(|c| match c {
            'á' | 'à' | 'â' | 'ä' | 'ã' => 'a',
            'é' | 'è' | 'ê' | 'ë' => 'e',
            'í' | 'ì' | 'î' | 'ï' => 'i',
            'ó' | 'ò' | 'ô' | 'ö' | 'õ' => 'o',
            'ú' | 'ù' | 'û' | 'ü' => 'u',
            'ñ' => 'n',
            'ç' => 'c',
            other => other,
        })
        .collect()
}

/// Kyero's free-text `<type>` to our kind, by words so that variants like
/// "Apartment - Ground Floor" or "Semi-Detached House" need no table entry.
fn map_type(raw: &str) -> Option<&'static str> {
    const NOT_LISTED: &[&str] = &[
        "plot",
        "land",
        "parking",
        "garage",
        "garaje",
        "aparcamiento",
        "terreno",
        "parcela",
        "solar",
        "storage",
        "trastero",
    ];
    // Most specific first: "Duplex Penthouse" is a penthouse, "Studio Apartment" a studio.
    const KINDS: &[(&str, &[&str])] = &[
        ("penthouse", &["penthouse", "atico"]),
        ("studio", &["studio", "estudio"]),
        ("duplex", &["duplex", "triplex"]),
        (
            "flat",
            &["apartment", "apartments", "apartamento", "flat", "piso"],
        ),
        (
            "house",
            &[
                "villa",
                "house",
                "townhouse",
                "bungalow",
                "chalet",
                "casa",
                "finca",
                "cortijo",
                "detached",
                "quad",
                "adosado",
                "pareado",
            ],
        ),
        ("office", &["office", "oficina"]),
        (
            "commercial",
            &[
                "commercial",
                "comercial",
                "local",
                "premises",
                "shop",
                "tienda",
                "restaurant",
                "restaurante",
                "bar",
                "hotel",
                "business",
                "negocio",
                "warehouse",
                "nave",
            ],
        ),
    ];
    let folded = fold(raw);
    let words: Vec<&str> = folded
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if words.iter().any(|w| NOT_LISTED.contains(w)) {
        return None;
    }
    KINDS
        .iter()
        .find(|(_, keys)| words.iter().any(|w| keys.contains(w)))
        .map(|(kind, _)| *kind)
}

/// Feature phrases (folded) for each amenity, in vocabulary order.
const AMENITIES: &[(&str, &[&str])] = &[
    ("terraza", &["terrace", "terraza", "balcony", "balcon"]),
    ("ascensor", &["lift", "elevator", "ascensor"]),
    ("garaje", &["garage", "parking", "garaje", "aparcamiento"]),
    ("piscina", &["pool", "piscina"]),
    ("trastero", &["storage", "trastero"]),
    (
        "aire acondicionado",
        &["air con", "aircon", "a/c", "aire acondicionado"],
    ),
    ("calefacción", &["heating", "calefaccion"]),
    ("amueblado", &["furnished", "amueblado"]),
    ("jardín", &["garden", "jardin"]),
    (
        "portero",
        &["concierge", "portero", "porteria", "conserje", "doorman"],
    ),
];

fn feature_amenities(feature: &str) -> impl Iterator<Item = &'static str> {
    let f = fold(feature).replace(['-', '_'], " ");
    // "No lift", "Sin ascensor", "Unfurnished" name what the property lacks.
    let negated = ["no ", "sin ", "not ", "without "]
        .iter()
        .any(|p| f.starts_with(p))
        || f.contains("unfurnished");
    AMENITIES
        .iter()
        .filter(move |(_, keys)| !negated && keys.iter().any(|k| f.contains(k)))
        .map(|(name, _)| *name)
}

/// Amenities from `<features>` and the `<pool>` flag, in the order the feed gives them.
fn amenities(p: &Node) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |a: &str| {
        if !out.iter().any(|x| x == a) {
            out.push(a.to_owned());
        }
    };
    for child in &p.children {
        match child.name.as_str() {
            "pool" if parse_flag(child.text.trim()) => add("piscina"),
            "features" => child
                .children
                .iter()
                .filter(|f| f.name == "feature")
                .flat_map(|f| feature_amenities(&f.text))
                .for_each(&mut add),
            _ => {}
        }
    }
    out
}

fn images(imgs: &Node) -> Vec<String> {
    let mut found: Vec<(u32, String)> = imgs
        .children
        .iter()
        .filter(|c| c.name == "image")
        .filter_map(|img| {
            // Some feeds put the URL directly in <image>.
            let url = img.value("url").unwrap_or_else(|| img.text.trim());
            let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
            if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                return None;
            }
            let order = img
                .id_attr
                .as_deref()
                .and_then(|id| id.parse().ok())
                .unwrap_or(u32::MAX);
            Some((order, url.to_owned()))
        })
        .collect();
    found.sort_by_key(|(order, _)| *order); // stable: feed order among equal ids
    found.into_iter().map(|(_, url)| url).collect()
}

fn parse_flag(s: &str) -> bool {
    matches!(
        fold(s.trim()).as_str(),
        "1" | "true" | "yes" | "y" | "si" | "s"
    )
}

fn parse_date(s: &str) -> Option<NaiveDateTime> {
    const DATETIME: &[&str] = &[
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%d/%m/%Y %H:%M:%S",
    ];
    const DATE: &[&str] = &["%Y-%m-%d", "%d/%m/%Y"];
    DATETIME
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .or_else(|| {
            DATE.iter()
                .find_map(|f| NaiveDate::parse_from_str(s, f).ok())
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
}

fn parse_location(loc: &Node) -> Option<(f64, f64)> {
    let coord = |name: &str| -> Option<f64> {
        loc.value(name)?
            .replace(',', ".")
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
    };
    let (lat, lon) = (coord("latitude")?, coord("longitude")?);
    let valid = (-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon);
    (valid && (lat, lon) != (0.0, 0.0)).then_some((lat, lon))
}

/// Beds/baths: optional, so anything unreadable counts as 0 rather than losing the listing.
fn parse_count(s: &str) -> u32 {
    s.parse::<u32>()
        .ok()
        .or_else(|| {
            let v: f64 = s.replace(',', ".").parse().ok()?;
            (v.is_finite() && v >= 0.0).then(|| v.floor().min(u32::MAX as f64) as u32)
        })
        .unwrap_or(0)
}

/// `Ok(None)` for "on request" (x, empty, 0); `None` when the text is not a number.
fn parse_price(raw: &str) -> Option<Option<u64>> {
    let s: String = raw
        .chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '€' | '$' | '£'))
        .collect();
    if s.is_empty() || s.eq_ignore_ascii_case("x") {
        return Some(None);
    }
    parse_number(&s).map(|n| (n > 0).then_some(n))
}

/// Reads "250000", "250.000", "250,000", "1.250.000,50" or "1200.50"
/// (rounded). A single separator followed by exactly three digits is taken
/// as thousands, as Spanish feeds write them.
fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    if !s.starts_with(|c: char| c.is_ascii_digit())
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b',')
    {
        return None;
    }
    let (int_part, frac) = match s.rfind(['.', ',']) {
        None => (s, ""),
        Some(last) => {
            let sep = s.as_bytes()[last] as char;
            let same = s.matches(sep).count();
            let mixed = s.contains(if sep == '.' { ',' } else { '.' });
            let tail = &s[last + 1..];
            let decimal = same == 1 && (mixed || tail.len() != 3);
            if decimal { (&s[..last], tail) } else { (s, "") }
        }
    };
    if int_part.contains('.') && int_part.contains(',') {
        return None;
    }
    let mut groups = int_part.split(['.', ',']);
    let first = groups.next()?;
    let mut digits = first.to_owned();
    let mut grouped = false;
    for g in groups {
        grouped = true;
        if g.len() != 3 {
            return None;
        }
        digits.push_str(g);
    }
    if first.is_empty() || grouped && first.len() > 3 {
        return None;
    }
    let whole: u64 = digits.parse().ok()?;
    let round_up = frac.bytes().next().is_some_and(|d| d >= b'5');
    whole.checked_add(u64::from(round_up))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Same text as tests/data/kyero-small.xml, inline so the module can move
    /// to another crate without its test data path.
    const SMALL: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<root>
  <kyero>
    <feed_version>3</feed_version>
    <feed_generated>2024-05-02 06:00:00</feed_generated>
  </kyero>
  <agent>
    <id>77</id>
    <name>Costa Homes S.L.</name>
    <email>info@example.com</email>
    <town>Marbella</town>
  </agent>
  <property>
    <id>1001</id>
    <date>2024-04-30 12:15:00</date>
    <ref> CH-001 </ref>
    <price>250.000</price>
    <currency>EUR</currency>
    <price_freq>sale</price_freq>
    <new_build>0</new_build>
    <type><![CDATA[ Apartment ]]></type>
    <town>
      Marbella
    </town>
    <province>Málaga</province>
    <location_detail>Nueva Andalucía</location_detail>
    <location>
      <latitude>36.4976</latitude>
      <longitude>-4.9529</longitude>
    </location>
    <beds>2</beds>
    <baths>2</baths>
    <pool>1</pool>
    <surface_area>
      <built>95</built>
      <plot>0</plot>
    </surface_area>
    <agent>
      <id>99</id>
      <name>Ana &amp; Luis</name>
      <contact><tel>+34 600 000 000</tel></contact>
    </agent>
    <desc>
      <es><![CDATA[ <p>Piso luminoso con terraza &amp; vistas al mar.</p> ]]></es>
      <en>Bright flat with terrace &amp; sea views.</en>
      <de></de>
    </desc>
    <features>
      <feature>Terraza</feature>
      <feature>Lift</feature>
      <feature>Air Conditioning</feature>
      <feature>Communal Pool</feature>
      <feature>Sea views</feature>
    </features>
    <images>
      <image id="3"><url>https://img.example.com/ch-001/3.jpg</url></image>
      <image id="1"><url> https://img.example.com/ch-001/1.jpg </url></image>
      <image id="2"><url>ftp://img.example.com/ch-001/2.jpg</url></image>
      <image id="10"><url>http://img.example.com/ch-001/10.jpg</url></image>
    </images>
  </property>
  <property>
    <id>1002</id>
    <date>2024-04-29 09:00:00</date>
    <ref>CH-002</ref>
    <price>x</price>
    <price_freq>month</price_freq>
    <type>VILLA</type>
    <town>Estepona</town>
    <province>Málaga</province>
    <beds>four</beds>
    <desc>
      <de>Villa mit Garten</de>
    </desc>
    <features>
      <feature>Private garden</feature>
      <feature>Garaje</feature>
      <feature>Jardín</feature>
    </features>
    <images/>
  </property>
  <property>
    <id>1003</id>
    <ref>CH-003</ref>
    <price>700</price>
    <price_freq>week</price_freq>
    <type>Apartment</type>
    <town>Nerja</town>
    <province>Málaga</province>
    <desc><en>Holiday let</en></desc>
    <images/>
  </property>
  <property>
    <id>1004</id>
    <ref>CH-004</ref>
    <price>90000</price>
    <price_freq>sale</price_freq>
    <type>Plot</type>
    <town>Ronda</town>
    <province>Málaga</province>
    <desc><en>Building plot with views</en></desc>
    <images/>
  </property>
</root>
"#;

    const EMPTY: &str = "<root><kyero><feed_version>3</feed_version></kyero></root>";

    /// A feed of the given `<property>` bodies.
    fn feed(props: &[&str]) -> String {
        let mut s = String::from("<root><kyero><feed_version>3</feed_version></kyero>");
        for p in props {
            s.push_str("<property>");
            s.push_str(p);
            s.push_str("</property>");
        }
        s.push_str("</root>");
        s
    }

    /// A property body that reads (no price), with `extra` elements appended.
    fn prop(reference: &str, extra: &str) -> String {
        format!(
            "<id>{reference}</id><ref>{reference}</ref>\
             <price_freq>sale</price_freq><type>apartment</type><town>Málaga</town>\
             <province>Málaga</province>{extra}"
        )
    }

    fn one(extra: &str) -> Result<FeedListing, Skipped> {
        let f = read(feed(&[&prop("R1", extra)]).as_bytes()).unwrap();
        match (f.listings.into_iter().next(), f.skipped.into_iter().next()) {
            (Some(l), None) => Ok(l),
            (None, Some(s)) => Err(s),
            other => panic!("expected one result, got {other:?}"),
        }
    }

    fn skipped_reason(body: &str) -> String {
        let f = read(feed(&[body]).as_bytes()).unwrap();
        assert!(f.listings.is_empty(), "{:?}", f.listings);
        f.skipped[0].reason.clone()
    }

    #[test]
    fn small_feed_reads_two_listings_and_skips_two() {
        let f = read(SMALL.as_bytes()).unwrap();
        assert_eq!(f.listings.len(), 2);
        assert_eq!(f.skipped.len(), 2);

        let a = &f.listings[0];
        assert_eq!(a.reference, "CH-001");
        assert_eq!(a.feed_id, "1001");
        assert_eq!(
            a.date,
            NaiveDate::from_ymd_opt(2024, 4, 30)
                .unwrap()
                .and_hms_opt(12, 15, 0)
        );
        assert!(!a.rent);
        assert_eq!(a.price, Some(250_000));
        assert_eq!(a.currency, "EUR");
        assert_eq!(a.kind, "flat");
        assert_eq!(a.town, "Marbella");
        assert_eq!(a.province, "Málaga");
        assert_eq!(a.location_detail.as_deref(), Some("Nueva Andalucía"));
        assert_eq!(a.location, Some((36.4976, -4.9529)));
        assert_eq!((a.beds, a.baths), (2, 2));
        assert_eq!(a.built_m2, Some(95));
        assert_eq!(
            a.amenities,
            ["piscina", "terraza", "ascensor", "aire acondicionado"]
        );
        assert_eq!(
            a.images,
            [
                "https://img.example.com/ch-001/1.jpg",
                "https://img.example.com/ch-001/3.jpg",
                "http://img.example.com/ch-001/10.jpg",
            ]
        );
        assert!(!a.new_build);

        let b = &f.listings[1];
        assert_eq!(b.reference, "CH-002");
        assert!(b.rent);
        assert_eq!(b.price, None);
        assert_eq!(b.kind, "house");
        assert_eq!(b.beds, 0);
        assert_eq!(b.amenities, ["jardín", "garaje"]);
        assert!(b.images.is_empty());
        assert_eq!(b.location, None);

        assert_eq!(f.skipped[0].position, 3);
        assert_eq!(f.skipped[0].id.as_deref(), Some("CH-003"));
        assert!(f.skipped[0].reason.contains("weekly rents are not taken"));
        assert_eq!(f.skipped[1].position, 4);
        assert_eq!(f.skipped[1].id.as_deref(), Some("CH-004"));
        assert!(
            f.skipped[1].reason.contains("\"Plot\""),
            "{}",
            f.skipped[1].reason
        );
    }

    #[test]
    fn agent_blocks_do_not_leak_into_the_listing() {
        let f = read(SMALL.as_bytes()).unwrap();
        // The property's <agent><id>99</id> must not replace its own <id>.
        assert_eq!(f.listings[0].feed_id, "1001");
        assert!(
            !f.listings
                .iter()
                .any(|l| l.town == "Marbella" && l.reference == "77")
        );
    }

    #[test]
    fn descriptions_keep_feed_order_drop_empty_and_unescape() {
        let f = read(SMALL.as_bytes()).unwrap();
        let a = &f.listings[0];
        let langs: Vec<&str> = a.descriptions.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(langs, ["es", "en"]);
        assert_eq!(
            a.descriptions[0].1, "<p>Piso luminoso con terraza &amp; vistas al mar.</p>",
            "CDATA is literal: its &amp; stays as written"
        );
        assert_eq!(a.descriptions[1].1, "Bright flat with terrace & sea views.");
    }

    #[test]
    fn description_fallbacks() {
        let l = one("<desc><de>Hallo</de><en>Hello</en><es>Hola</es></desc>").unwrap();
        assert_eq!(l.description("de"), Some("Hallo"));
        assert_eq!(l.description("EN"), Some("Hello"));
        assert_eq!(l.description("fr"), Some("Hola"), "falls back to Spanish");

        let l = one("<desc><de>Hallo</de><en>Hello</en></desc>").unwrap();
        assert_eq!(l.description("fr"), Some("Hello"), "then English");

        let l = one("<desc><de>Hallo</de><nl>Hoi</nl></desc>").unwrap();
        assert_eq!(l.description("fr"), Some("Hallo"), "then the first");

        let l = one("<desc><es>  </es></desc>").unwrap();
        assert!(l.descriptions.is_empty());
        assert_eq!(l.description("es"), None);
    }

    #[test]
    fn inline_html_in_descriptions_is_kept_as_text() {
        let l = one("<desc><en>Line one<br/>Line <b class=\"x\">two</b> &lt;ok&gt;</en></desc>")
            .unwrap();
        assert_eq!(
            l.description("en"),
            Some("Line one<br/>Line <b class=\"x\">two</b> <ok>")
        );
    }

    #[test]
    fn images_ordered_by_id_then_feed_order_http_only() {
        let l = one("<images>\
               <image id=\"2\"><url>https://x/b.jpg</url></image>\
               <image><url>https://x/no-id.jpg</url></image>\
               <image id=\" 0 \"><url>HTTPS://x/a.jpg</url></image>\
               <image id=\"2\"><url>https://x/b2.jpg</url></image>\
               <image id=\"1\"><url>/relative.jpg</url></image>\
               <image id=\"1\"><url></url></image>\
               <image id=\"11\">https://x/bare.jpg</image>\
               <image id=\"5\"><url>https://x/q.jpg?w=1&amp;h=2</url></image>\
             </images>")
        .unwrap();
        assert_eq!(
            l.images,
            [
                "HTTPS://x/a.jpg",
                "https://x/b.jpg",
                "https://x/b2.jpg",
                "https://x/q.jpg?w=1&h=2",
                "https://x/bare.jpg",
                "https://x/no-id.jpg",
            ]
        );
    }

    #[test]
    fn truncated_feed_is_refused_with_where_it_stopped() {
        let cut = &SMALL.as_bytes()[..SMALL.len() - 300];
        match read(cut) {
            Err(FeedError::Truncated(msg)) => {
                // The last 300 bytes hold property 4 and the end of property 3.
                assert!(msg.contains("property 3 (ref \"CH-003\")"), "{msg}");
                assert!(msg.contains("line "), "{msg}");
            }
            other => panic!("expected Truncated, got {other:?}"),
        }
    }

    #[test]
    fn truncated_anywhere_is_truncated() {
        // Cut inside a tag, a CDATA section, an attribute, a text and a
        // multi-byte character: all are a feed that stopped early.
        let bytes = SMALL.as_bytes();
        let cdata = SMALL.find("<![CDATA[ Apartment").unwrap() + 12;
        let attr = SMALL.find("id=\"3").unwrap() + 5;
        let tag = SMALL.find("<price_freq>month").unwrap() + 4;
        let accent = SMALL.find("Málaga").unwrap() + 2; // inside 'á'
        let text = SMALL.find("Estepona").unwrap() + 3;
        for at in [cdata, attr, tag, accent, text, 40, 1] {
            match read(&bytes[..at]) {
                Err(FeedError::Truncated(_)) => {}
                other => panic!("cut at {at}: expected Truncated, got {other:?}"),
            }
        }
    }

    #[test]
    fn malformed_xml_is_refused() {
        let cases = [
            "<root><kyero><feed_version>3</feed_version></kyero><property><ref>1</property></root>",
            "<root><kyero></kyero></root><root></root>",
            "<root><kyero></kyero></root> trailing",
            "not xml at all",
            "",
            "<root></kyero></root>",
        ];
        for c in cases {
            match read(c.as_bytes()) {
                Err(FeedError::NotXml(_)) => {}
                other => panic!("{c:?}: expected NotXml, got {other:?}"),
            }
        }
        assert!(matches!(
            read(b"<root><kyero/></root>\xff\xfe"),
            Err(FeedError::NotXml(_))
        ));
    }

    #[test]
    fn wrong_root_or_no_kyero_structure_is_not_kyero() {
        for c in [
            "<html><body>Not found</body></html>",
            "<rss><channel/></rss>",
            "<root></root>",
            "<root><listing/></root>",
            "<Root><kyero/></Root>",
            "<root/>",
        ] {
            match read(c.as_bytes()) {
                Err(FeedError::NotKyero(_)) => {}
                other => panic!("{c:?}: expected NotKyero, got {other:?}"),
            }
        }
    }

    #[test]
    fn empty_feed_is_ok_with_no_listings() {
        let f = read(EMPTY.as_bytes()).unwrap();
        assert!(f.listings.is_empty());
        assert!(f.skipped.is_empty());
        let with_bom = format!("\u{feff}<?xml version=\"1.0\"?>\n{EMPTY}\n");
        assert_eq!(read(with_bom.as_bytes()).unwrap(), f);
        assert_eq!(read(b"<root><kyero/></root>").unwrap(), f);
    }

    #[test]
    fn properties_without_kyero_block_are_still_read() {
        let s = format!("<root><property>{}</property></root>", prop("A", ""));
        assert_eq!(read(s.as_bytes()).unwrap().listings.len(), 1);
    }

    #[test]
    fn too_many_properties_is_refused() {
        let mut s = String::from("<root><kyero><feed_version>3</feed_version></kyero>");
        for _ in 0..=MAX_PROPERTIES {
            s.push_str("<property/>");
        }
        s.push_str("</root>");
        assert!(matches!(
            read(s.as_bytes()),
            Err(FeedError::TooLarge {
                what: "properties",
                limit: MAX_PROPERTIES
            })
        ));
        // Exactly at the limit is fine.
        let at_limit = s.replacen("<property/>", "", 1);
        assert_eq!(
            read(at_limit.as_bytes()).unwrap().skipped.len(),
            MAX_PROPERTIES
        );
    }

    #[test]
    fn too_many_bytes_is_refused_before_parsing() {
        let big = vec![b' '; MAX_BYTES + 1];
        assert!(matches!(
            read(&big),
            Err(FeedError::TooLarge { what: "bytes", .. })
        ));
        assert!(matches!(
            read_with_limits(EMPTY.as_bytes(), 10, MAX_PROPERTIES),
            Err(FeedError::TooLarge {
                what: "bytes",
                limit: 10
            })
        ));
    }

    #[test]
    fn generated_feed_of_5000_properties() {
        let bodies: Vec<String> = (0..5000)
            .map(|i| {
                prop(
                    &format!("G-{i}"),
                    "<desc><es>Piso</es><en>Flat</en></desc>\
                     <features><feature>Lift</feature><feature>Pool</feature></features>\
                     <images><image id=\"1\"><url>https://x/1.jpg</url></image></images>",
                )
            })
            .collect();
        let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
        let f = read(feed(&refs).as_bytes()).unwrap();
        assert_eq!(f.listings.len(), 5000);
        assert!(f.skipped.is_empty());
        assert_eq!(f.listings[4999].reference, "G-4999");
    }

    #[test]
    fn cdata_whitespace_and_value_case_are_lenient() {
        let l = read(
            feed(&["\n <id>\n 7 \n</id>\n <ref><![CDATA[  R-7  ]]></ref>\
                    <price>\n 1 200 \n</price><price_freq> SALE </price_freq>\
                    <type><![CDATA[ APARTMENT ]]></type><town><![CDATA[ Nerja ]]></town>\
                    <currency> gbp </currency><new_build> 1 </new_build>"])
            .as_bytes(),
        )
        .unwrap()
        .listings
        .remove(0);
        assert_eq!(l.reference, "R-7");
        assert_eq!(l.feed_id, "7");
        assert_eq!(l.price, Some(1200));
        assert_eq!(l.kind, "flat");
        assert_eq!(l.town, "Nerja");
        assert_eq!(l.currency, "GBP");
        assert!(l.new_build);
    }

    #[test]
    fn element_names_are_case_sensitive() {
        // <Town> is not <town>, so the property has no town.
        let r = skipped_reason(
            "<ref>A</ref><price>1</price><price_freq>sale</price_freq>\
             <type>flat</type><Town>Nerja</Town>",
        );
        assert_eq!(r, "missing <town>");
    }

    #[test]
    fn unknown_and_nested_elements_are_ignored() {
        let l = one(
            "<energy_rating><consumption>A</consumption></energy_rating>\
             <custom><town>Wrong</town><ref>WRONG</ref><deep><beds>9</beds></deep></custom>\
             <notes>internal</notes><beds>3</beds>",
        )
        .unwrap();
        assert_eq!(l.town, "Málaga");
        assert_eq!(l.reference, "R1");
        assert_eq!(l.beds, 3);
    }

    #[test]
    fn missing_optional_fields_leave_defaults() {
        let l = read(
            feed(&[
                "<ref>A</ref><price_freq>sale</price_freq><type>house</type><town>Ronda</town>",
            ])
            .as_bytes(),
        )
        .unwrap()
        .listings
        .remove(0);
        assert_eq!(l.feed_id, "");
        assert_eq!(l.date, None);
        assert_eq!(l.price, None);
        assert_eq!(l.currency, "EUR");
        assert_eq!(l.province, "");
        assert_eq!(l.location_detail, None);
        assert_eq!(l.location, None);
        assert_eq!((l.beds, l.baths), (0, 0));
        assert_eq!(l.built_m2, None);
        assert!(l.descriptions.is_empty() && l.amenities.is_empty() && l.images.is_empty());
        assert!(!l.new_build);
    }

    #[test]
    fn prices_in_the_forms_feeds_write_them() {
        let cases: &[(&str, Option<u64>)] = &[
            ("250000", Some(250_000)),
            ("250.000", Some(250_000)),
            ("250,000", Some(250_000)),
            ("1.250.000", Some(1_250_000)),
            ("1,250,000", Some(1_250_000)),
            (" 250 000 ", Some(250_000)),
            ("1200.50", Some(1201)),
            ("1200,49", Some(1200)),
            ("1.200,50", Some(1201)),
            ("1,200.50", Some(1201)),
            ("250.000 €", Some(250_000)),
            ("x", None),
            ("X", None),
            ("", None),
            ("0", None),
        ];
        for (raw, want) in cases {
            let l = one(&format!("<price>{raw}</price>"))
                .unwrap_or_else(|s| panic!("{raw:?}: {}", s.reason));
            assert_eq!(l.price, *want, "{raw:?}");
        }
        let l = one("").unwrap();
        assert_eq!(l.price, None, "a missing <price> is on request too");
    }

    #[test]
    fn a_price_that_is_not_a_number_skips_the_property() {
        for raw in ["on request", "12.34.56", "-100", "1,2,3", "abc"] {
            let r = skipped_reason(&format!(
                "<ref>A</ref><price>{raw}</price><price_freq>sale</price_freq>\
                 <type>flat</type><town>Nerja</town>"
            ));
            assert!(r.contains("not a number") && r.contains(raw), "{raw}: {r}");
        }
    }

    #[test]
    fn beds_and_baths_non_numeric_are_zero() {
        let l = one("<beds>many</beds><baths>1.5</baths>").unwrap();
        assert_eq!((l.beds, l.baths), (0, 1));
        let l = one("<beds/><baths> 2 </baths>").unwrap();
        assert_eq!((l.beds, l.baths), (0, 2));
    }

    #[test]
    fn properties_that_cannot_be_listings_are_skipped_with_reasons() {
        let base = |drop: &str, add: &str| {
            let all = [
                ("id", "<id>9</id>"),
                ("ref", "<ref>R9</ref>"),
                ("price", "<price>100</price>"),
                ("price_freq", "<price_freq>sale</price_freq>"),
                ("type", "<type>flat</type>"),
                ("town", "<town>Nerja</town>"),
            ];
            let mut s: String = all
                .iter()
                .filter(|(n, _)| *n != drop && !(drop == "ids" && (*n == "id" || *n == "ref")))
                .map(|(_, x)| *x)
                .collect();
            s.push_str(add);
            s
        };
        assert_eq!(skipped_reason(&base("ids", "")), "no <ref> or <id>");
        assert_eq!(
            skipped_reason(&base("ids", "<ref> </ref><id></id>")),
            "no <ref> or <id>"
        );
        assert_eq!(skipped_reason(&base("town", "")), "missing <town>");
        assert_eq!(
            skipped_reason(&base("price_freq", "")),
            "missing <price_freq>"
        );
        assert!(
            skipped_reason(&base("price_freq", "<price_freq>daily</price_freq>"))
                .contains("unknown price_freq \"daily\"")
        );
        assert!(
            skipped_reason(&base("price_freq", "<price_freq>Week</price_freq>"))
                .contains("weekly rents are not taken")
        );
        for t in ["Plot", "Land", "Parking", "Garage", "Parcela", "Castle"] {
            let r = skipped_reason(&base("type", &format!("<type>{t}</type>")));
            assert!(r.contains(&format!("\"{t}\"")), "{t}: {r}");
        }
        assert_eq!(skipped_reason(&base("type", "")), "missing <type>");

        let f = read(feed(&[&base("", "")]).as_bytes()).unwrap();
        assert_eq!(f.listings[0].reference, "R9");
    }

    #[test]
    fn id_is_the_reference_when_ref_is_missing() {
        let f = read(
            feed(&[
                "<id> 55 </id><price_freq>sale</price_freq><type>flat</type><town>Nerja</town>",
            ])
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(f.listings[0].reference, "55");
        assert_eq!(f.listings[0].feed_id, "55");
    }

    #[test]
    fn second_property_with_same_ref_is_a_duplicate() {
        let f = read(feed(&[&prop("D", ""), &prop("E", ""), &prop(" D ", "")]).as_bytes()).unwrap();
        assert_eq!(f.listings.len(), 2);
        assert_eq!(f.skipped.len(), 1);
        assert_eq!(f.skipped[0].position, 3);
        assert_eq!(f.skipped[0].id.as_deref(), Some("D"));
        assert!(
            f.skipped[0].reason.contains("duplicate ref"),
            "{}",
            f.skipped[0].reason
        );
    }

    #[test]
    fn skipped_id_falls_back_to_id_and_positions_count_every_property() {
        let f = read(
            feed(&[
                &prop("A", ""),
                "<id>X1</id><price_freq>sale</price_freq><type>flat</type>",
                "",
            ])
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(f.skipped[0].position, 2);
        assert_eq!(f.skipped[0].id.as_deref(), Some("X1"));
        assert_eq!(f.skipped[1].position, 3);
        assert_eq!(f.skipped[1].id, None);
    }

    #[test]
    fn type_mapping() {
        let cases = [
            ("apartment", "flat"),
            ("Flat", "flat"),
            ("piso", "flat"),
            ("Apartamento", "flat"),
            ("Ground Floor Apartment", "flat"),
            ("Apartment - Ground Floor", "flat"),
            ("Penthouse", "penthouse"),
            ("Ático", "penthouse"),
            ("atico", "penthouse"),
            ("Duplex Penthouse", "penthouse"),
            ("Studio", "studio"),
            ("estudio", "studio"),
            ("Duplex", "duplex"),
            ("Dúplex", "duplex"),
            ("Triplex", "duplex"),
            ("Villa", "house"),
            ("house", "house"),
            ("Townhouse", "house"),
            ("Town House", "house"),
            ("Bungalow", "house"),
            ("Chalet", "house"),
            ("Casa", "house"),
            ("Country House", "house"),
            ("Finca", "house"),
            ("Cortijo", "house"),
            ("Cave House", "house"),
            ("Semi-Detached", "house"),
            ("Detached", "house"),
            ("Quad", "house"),
            ("Linked Villa", "house"),
            ("Office", "office"),
            ("Oficina", "office"),
            ("Commercial", "commercial"),
            ("Local", "commercial"),
            ("Shop", "commercial"),
            ("Restaurant", "commercial"),
            ("Bar", "commercial"),
            ("Hotel", "commercial"),
            ("Business", "commercial"),
            ("Warehouse", "commercial"),
            ("Nave", "commercial"),
            ("  APARTMENT  ", "flat"),
        ];
        for (raw, want) in cases {
            assert_eq!(map_type(raw), Some(want), "{raw}");
        }
        for raw in [
            "Plot",
            "Land",
            "Parking",
            "Garage",
            "Commercial Plot",
            "Castle",
            "",
        ] {
            assert_eq!(map_type(raw), None, "{raw}");
        }
    }

    #[test]
    fn feature_mapping() {
        let l = one("<features>\
               <feature>Balcony</feature><feature>TERRAZA</feature>\
               <feature>Elevator</feature><feature>Underground parking</feature>\
               <feature>Piscina comunitaria</feature><feature>Storage room</feature>\
               <feature>A/C</feature><feature>Central heating</feature>\
               <feature>Calefacción</feature><feature>Fully furnished</feature>\
               <feature>Jardín privado</feature><feature>Concierge</feature>\
               <feature>Portero</feature><feature>Sea views</feature>\
               <feature>Garaje</feature><feature>Doorman</feature>\
             </features>")
        .unwrap();
        assert_eq!(
            l.amenities,
            [
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
            ]
        );
        let l = one(
            "<features><feature>Aire acondicionado</feature><feature>Trastero</feature>\
             <feature>Aparcamiento</feature><feature>Ascensor</feature>\
             <feature>Amueblado</feature><feature>Doorman</feature></features>",
        )
        .unwrap();
        assert_eq!(
            l.amenities,
            [
                "aire acondicionado",
                "trastero",
                "garaje",
                "ascensor",
                "amueblado",
                "portero"
            ]
        );
    }

    #[test]
    fn negated_features_and_flags() {
        let l = one("<pool>0</pool><features><feature>Unfurnished</feature>\
             <feature>No lift</feature><feature>Sin ascensor</feature></features>")
        .unwrap();
        assert!(l.amenities.is_empty(), "{:?}", l.amenities);
        let l = one("<features><feature>Private pool</feature></features><pool>1</pool>").unwrap();
        assert_eq!(l.amenities, ["piscina"]);
    }

    #[test]
    fn entities_are_unescaped() {
        let l = one(
            "<location_detail>Puerto &amp; Playa &#233;l &#xE9; &quot;x&quot; &nbsp;</location_detail>\
             <desc><en>Bed & Breakfast</en></desc>",
        )
        .unwrap();
        assert_eq!(
            l.location_detail.as_deref(),
            Some("Puerto & Playa él é \"x\" &nbsp;")
        );
        assert_eq!(l.description("en"), Some("Bed & Breakfast"));
    }

    #[test]
    fn dates_and_locations() {
        let l = one("<date>2023-01-02 03:04:05</date>\
             <location><longitude>-0,4810</longitude><latitude>38,3452</latitude></location>")
        .unwrap();
        assert_eq!(
            l.date,
            NaiveDate::from_ymd_opt(2023, 1, 2)
                .unwrap()
                .and_hms_opt(3, 4, 5)
        );
        assert_eq!(l.location, Some((38.3452, -0.481)));

        let l = one(
            "<date>2023-01-02</date><location><latitude>0</latitude><longitude>0</longitude></location>",
        )
        .unwrap();
        assert_eq!(
            l.date,
            NaiveDate::from_ymd_opt(2023, 1, 2)
                .unwrap()
                .and_hms_opt(0, 0, 0)
        );
        assert_eq!(l.location, None);

        let l = one("<date>yesterday</date><location><latitude>95</latitude><longitude>1</longitude></location>")
            .unwrap();
        assert_eq!((l.date, l.location), (None, None));
    }

    #[test]
    fn built_area() {
        let l =
            one("<surface_area><built> 1.250 </built><plot>5000</plot></surface_area>").unwrap();
        assert_eq!(l.built_m2, Some(1250));
        let l = one("<surface_area><built>0</built></surface_area>").unwrap();
        assert_eq!(l.built_m2, None);
        let l = one("<surface_area><built>n/a</built></surface_area>").unwrap();
        assert_eq!(l.built_m2, None);
    }

    #[test]
    fn single_byte_encodings_are_transcoded() {
        let latin = b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\
<root><kyero/><property><ref>L1</ref><price_freq>sale</price_freq><type>Piso</type>\
<town>M\xe1laga</town><desc><es>Ba\xf1o \x80</es></desc></property></root>";
        let f = read(latin).unwrap();
        assert_eq!(f.listings[0].town, "Málaga");
        assert_eq!(f.listings[0].description("es"), Some("Baño €"));

        let undeclared = b"<root><kyero/><property><town>M\xe1laga</town></property></root>";
        assert!(matches!(read(undeclared), Err(FeedError::NotXml(_))));
    }
}
