//! The agency without a model: each assistant served deterministically from the same tools
//! when no model answers (see [`crate::engine::offline`]). A search is read from the
//! customer's words ([`criteria`]), a listing picked from the last list or named by its
//! reference, a slot booked with the usual confirmation; what the tools return is worded for
//! the customer, and what no tool can do goes to the staff.

pub mod criteria;
mod texts;

#[cfg(test)]
mod tests;

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use regex::Regex;
use serde_json::{Value, json};

use crate::agents::AgentKind;
use crate::domain::{MessageRole, Role, ToolCall};
use crate::engine::attachments::ASK_PREFIX;
use crate::engine::offline::{Keep, OfflineAnswer, OfflineAssistants, OfflineTurn};
use crate::realestate::PropertyFilter;
use crate::realestate::{AppointmentStore, PropertyStore, RealEstateStore};
use crate::store::{Attachment, ListRow, ReplyButton, StoredMessage};

use criteria::LISTING_ID;
pub use criteria::{Criteria, Places};
use texts::Text;

/// How long the place names read from the listings are used before they are read again.
const PLACES_TTL: Duration = Duration::from_secs(300);
/// Longest a read of the listings for their place names may take.
const PLACES_TIMEOUT: Duration = Duration::from_secs(5);
/// Most customer messages a search's criteria are gathered from.
const CRITERIA_MESSAGES: usize = 6;

/// The offline engine over the agency's data.
pub struct OfflineAgency<S: ?Sized = dyn RealEstateStore> {
    store: Arc<S>,
    places: tokio::sync::Mutex<Option<(Instant, Arc<Places>)>>,
}

impl<S: AppointmentStore + PropertyStore + ?Sized> OfflineAgency<S> {
    pub fn new(store: Arc<S>) -> Self {
        Self {
            store,
            places: tokio::sync::Mutex::new(None),
        }
    }

    /// The place names last read, without waiting (none before the first read).
    fn cached_places(&self) -> Arc<Places> {
        self.places
            .try_lock()
            .ok()
            .and_then(|cached| cached.as_ref().map(|(_, places)| places.clone()))
            .unwrap_or_default()
    }

    /// The place names of the available listings, read at most every [`PLACES_TTL`]; the
    /// last ones read while the store does not answer.
    async fn places(&self) -> Arc<Places> {
        let mut cached = self.places.lock().await;
        if let Some((at, places)) = cached.as_ref()
            && at.elapsed() < PLACES_TTL
        {
            return places.clone();
        }
        let filter = PropertyFilter {
            available_only: true,
            ..PropertyFilter::default()
        };
        match tokio::time::timeout(PLACES_TIMEOUT, self.store.properties(&filter)).await {
            Ok(Ok(properties)) => {
                let places = Arc::new(Places::from_properties(&properties));
                *cached = Some((Instant::now(), places.clone()));
                places
            }
            outcome => {
                let why = match outcome {
                    Ok(Err(error)) => error.to_string(),
                    _ => "timed out".to_owned(),
                };
                tracing::warn!("offline mode: the place names could not be read: {why}");
                cached
                    .as_ref()
                    .map(|(_, places)| places.clone())
                    .unwrap_or_default()
            }
        }
    }
}

#[async_trait]
impl<S: AppointmentStore + PropertyStore + ?Sized> OfflineAssistants for OfflineAgency<S> {
    fn route(&self, turn: &OfflineTurn<'_>) -> Option<&'static str> {
        let said = Said { turn };
        let (_, text) = said.last_human()?;
        let words = crate::agents::keywords::tokens(text);
        let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
        let agent = if has(OFFER_WORDS) {
            "prospect_offer_assistant"
        } else if has(MORTGAGE_WORDS) {
            "mortgage_loan_assistant"
        } else if has(VISIT_WORDS) || has(CANCEL_WORDS) && has(VISIT_NOUNS) {
            "appointment_assistant"
        } else if criteria::reference(text).is_some() {
            "property_assistant"
        } else {
            let places = self.cached_places();
            if !criteria::read(text, &places).is_empty() {
                "searcher_assistant"
            } else if said.portal_listing().is_some() {
                // A portal's lead answering our first message («sí, me interesa»): about the
                // listing they asked about there.
                "property_assistant"
            } else {
                return None;
            }
        };
        (agent != turn.agent.name && turn.assistants.contains(&agent)).then_some(agent)
    }

    fn keeps(&self, turn: &OfflineTurn<'_>) -> Keep {
        let said = Said { turn };
        let Some((index, text)) = said.last_human() else {
            return Keep::No;
        };
        // A pick from the list or a press of a button this assistant just showed.
        let shown = said.messages()[..index]
            .iter()
            .rev()
            .find_map(|m| (!m.message.attachments.is_empty()).then_some(&m.message.attachments));
        let answers = shown.is_some_and(|shown| {
            shown.iter().any(|attachment| match attachment {
                Attachment::List { rows, .. } => rows
                    .iter()
                    .any(|r| !r.title.is_empty() && text.starts_with(&r.title)),
                Attachment::Buttons { buttons, .. } => buttons.iter().any(|b| text == b.title),
                Attachment::Image { .. } => false,
            })
        });
        let places = self.cached_places();
        if answers {
            Keep::Answer
        } else if turn.agent.name == "searcher_assistant"
            && !criteria::read(text, &places).is_empty()
        {
            Keep::Own
        } else {
            Keep::No
        }
    }

    async fn answer(&self, turn: &OfflineTurn<'_>) -> Option<OfflineAnswer> {
        let said = Said { turn };
        let answer = match said.results() {
            Some(results) => match word(&said, &results) {
                Some(answer) => answer,
                None => self.serve(&said).await?,
            },
            None => self.serve(&said).await?,
        };
        Some(match answer {
            OfflineAnswer::Reply { text, attachments } if !said.told_limited_mode() => {
                OfflineAnswer::Reply {
                    text: format!("{}\n\n{text}", texts::LIMITED_MODE.in_lang(turn.lang)),
                    attachments,
                }
            }
            answer => answer,
        })
    }
}

impl<S: AppointmentStore + PropertyStore + ?Sized> OfflineAgency<S> {
    /// The customer's last message, served by the assistant it was routed to.
    async fn serve(&self, said: &Said<'_>) -> Option<OfflineAnswer> {
        let agent = said.turn.agent;
        Some(match agent.name.as_str() {
            "searcher_assistant" => self.search(said).await,
            "property_assistant" => listing(said),
            "appointment_assistant" => self.appointments(said).await,
            "mortgage_loan_assistant" => mortgage(said),
            "prospect_offer_assistant" => offers(said),
            "owner_info_assistant" => owners(said),
            "visit_tracker_assistant" => visits(said),
            _ if agent.kind == AgentKind::Primary => menu(said),
            _ => return None,
        })
    }

    async fn search(&self, said: &Said<'_>) -> OfflineAnswer {
        let lang = said.turn.lang;
        if let Some(id) = said.picked_listing() {
            // Its details and photos: the property assistant's, when this one cannot send them.
            let photos = said
                .turn
                .agent
                .tools
                .iter()
                .any(|t| t == "send_property_photos");
            if !photos && said.turn.assistants.contains(&"property_assistant") {
                return OfflineAnswer::Transfer {
                    to: "property_assistant",
                };
            }
            if let Some(calls) = said.calls(listing_calls(&id)) {
                return OfflineAnswer::Calls(calls);
            }
        }
        let places = self.places().await;
        let (previous, since) = match said.last_call("search_properties") {
            Some((index, call)) => (Criteria::from_args(&call.args), index),
            None => (Criteria::default(), 0),
        };
        let mut wanted = previous.clone();
        let mut new = false;
        for text in said.human_texts_since(since, CRITERIA_MESSAGES) {
            let read = criteria::read(text, &places);
            new |= !read.is_empty();
            wanted = wanted.refined(read);
        }
        if !new && said.last_call("search_properties").is_some() {
            return reply(texts::REFINE.in_lang(lang));
        }
        if wanted.near_me && said.turn.location.is_none() {
            return reply(texts::SHARE_LOCATION.in_lang(lang));
        }
        if !wanted.has_place() {
            let cities = places.cities();
            if cities.is_empty() {
                return reply(texts::ASK_PLACE.in_lang(lang));
            }
            let rows = cities
                .into_iter()
                .take(crate::outbound::graph::MAX_LIST_ROWS)
                .map(|city| ListRow {
                    id: format!("city:{city}"),
                    title: city.to_owned(),
                    description: String::new(),
                })
                .collect();
            return OfflineAnswer::Reply {
                text: texts::ASK_PLACE.in_lang(lang).to_owned(),
                attachments: vec![Attachment::List {
                    text: texts::PICK_CITY.in_lang(lang).to_owned(),
                    rows,
                }],
            };
        }
        if wanted.operation.is_none() {
            return OfflineAnswer::Reply {
                text: String::new(),
                attachments: vec![Attachment::Buttons {
                    text: texts::ASK_OPERATION.in_lang(lang).to_owned(),
                    buttons: vec![
                        ReplyButton::new("operation:sale", texts::BUY.in_lang(lang)),
                        ReplyButton::new("operation:rent", texts::RENT.in_lang(lang)),
                    ],
                }],
            };
        }
        match said.calls(vec![("search_properties", wanted.to_args())]) {
            Some(calls) => OfflineAnswer::Calls(calls),
            None => menu(said),
        }
    }

    async fn appointments(&self, said: &Said<'_>) -> OfflineAnswer {
        let lang = said.turn.lang;
        let text = said.last_human().map_or("", |(_, text)| text);
        let chosen = said.chosen_ref().or_else(|| find(&SLOT_ID, text));
        if let Some(chosen) = chosen {
            if let Some(id) = chosen.strip_prefix("cancel:") {
                return said.call_or_menu("cancel_appointment", json!({ "appointment_id": id }));
            }
            if let Some(id) = chosen.strip_prefix("move:") {
                let property = match self.store.appointment(id).await {
                    Ok(Some(appointment)) => appointment.property_id,
                    _ => return reply(texts::FAILED.in_lang(lang)),
                };
                return said
                    .call_or_menu("list_available_slots", json!({ "property_id": property }));
            }
            if chosen.starts_with("S-") {
                return match said.moving() {
                    Some(appointment) => said.call_or_menu(
                        "reschedule_appointment",
                        json!({ "appointment_id": appointment, "slot_id": chosen }),
                    ),
                    None => said.call_or_menu("book_appointment", json!({ "slot_id": chosen })),
                };
            }
        }
        let words = criteria::fold(text);
        if has_any(&words, CANCEL_WORDS)
            || has_any(&words, MOVE_WORDS)
            || (has_any(&words, MY_WORDS) && said.mentioned_listing().is_none())
        {
            return said.call_or_menu("list_my_appointments", json!({}));
        }
        match said.mentioned_listing() {
            Some(id) => said.call_or_menu("list_available_slots", json!({ "property_id": id })),
            None => reply(texts::WHICH_LISTING.in_lang(lang)),
        }
    }
}

/// Reads the conversation of an offline turn.
struct Said<'a> {
    turn: &'a OfflineTurn<'a>,
}

/// A tool's answer to one of the calls of the last step.
struct Answered<'a> {
    call: &'a ToolCall,
    text: &'a str,
    attachments: &'a [Attachment],
}

static SLOT_ID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bS-[A-Za-z0-9]+-\d{8,14}\b").expect("valid"));

/// The first match of `pattern` in `text`, upper-cased as the data writes ids.
fn find(pattern: &Regex, text: &str) -> Option<String> {
    pattern.find(text).map(|m| m.as_str().to_uppercase())
}

impl<'a> Said<'a> {
    fn messages(&self) -> &'a [StoredMessage] {
        self.turn.messages
    }

    /// The customer's last message and where it is.
    fn last_human(&self) -> Option<(usize, &'a str)> {
        self.messages()
            .iter()
            .enumerate()
            .rev()
            .find(|(_, m)| m.message.role == MessageRole::Human)
            .map(|(i, m)| (i, m.message.content.as_str()))
    }

    /// The customer's messages after message `since`, the last `most` of them, oldest first.
    fn human_texts_since(&self, since: usize, most: usize) -> Vec<&'a str> {
        let mut texts: Vec<&str> = self
            .messages()
            .iter()
            .skip(since)
            .filter(|m| m.message.role == MessageRole::Human)
            .map(|m| m.message.content.as_str())
            .collect();
        let skip = texts.len().saturating_sub(most);
        texts.drain(..skip);
        texts
    }

    /// The results of the last step's calls, when the turn stands on them and they were
    /// calls of a domain tool (not a handover between assistants).
    fn results(&self) -> Option<Vec<Answered<'a>>> {
        let messages = self.messages();
        let last = messages.last()?;
        if last.message.role != MessageRole::Tool {
            return None;
        }
        let step = messages
            .iter()
            .rposition(|m| m.message.role == MessageRole::Ai && !m.message.tool_calls.is_empty())?;
        let calls = &messages[step].message.tool_calls;
        let handover = calls.iter().any(|call| {
            call.name == crate::agents::COMPLETE_OR_ESCALATE || call.name.starts_with("To")
        });
        if handover {
            return None;
        }
        let results: Vec<Answered<'a>> = messages[step + 1..]
            .iter()
            .filter(|m| m.message.role == MessageRole::Tool)
            .filter_map(|m| {
                let id = m.message.tool_call_id.as_deref()?;
                let call = calls.iter().find(|c| c.id == id)?;
                Some(Answered {
                    call,
                    text: &m.message.content,
                    attachments: &m.message.attachments,
                })
            })
            .collect();
        (!results.is_empty()).then_some(results)
    }

    /// The last call of tool `name` in the window, and where it is.
    fn last_call(&self, name: &str) -> Option<(usize, &'a ToolCall)> {
        self.messages().iter().enumerate().rev().find_map(|(i, m)| {
            m.message
                .tool_calls
                .iter()
                .find(|c| c.name == name)
                .map(|c| (i, c))
        })
    }

    /// The rows of the last list shown before message `before`.
    fn list_before(&self, before: usize) -> Option<&'a [ListRow]> {
        self.messages()[..before].iter().rev().find_map(|m| {
            m.message.attachments.iter().rev().find_map(|a| match a {
                Attachment::List { rows, .. } => Some(rows.as_slice()),
                _ => None,
            })
        })
    }

    /// What the customer's message at `index` picks from the list shown before it: a tapped
    /// row (its words start with the row's title) or one named by its place («el segundo»).
    /// The row's reference: what follows `ask:<agent>:`, or its id.
    fn chosen_at(&self, index: usize) -> Option<String> {
        let text = self.messages()[index].message.content.trim();
        let rows = self.list_before(index)?;
        let row = rows
            .iter()
            .find(|row| !row.title.is_empty() && text.starts_with(row.title.as_str()))
            .or_else(|| ordinal(text, rows.len()).and_then(|i| rows.get(i)))?;
        Some(match row.id.strip_prefix(ASK_PREFIX) {
            Some(rest) => rest.split_once(':').map_or(rest, |(_, r)| r).to_owned(),
            None => row.id.clone(),
        })
    }

    /// What the customer's last message picks from the last list.
    fn chosen_ref(&self) -> Option<String> {
        let (index, _) = self.last_human()?;
        self.chosen_at(index)
    }

    /// The listing the customer's last message names or picks.
    fn picked_listing(&self) -> Option<String> {
        let (_, text) = self.last_human()?;
        criteria::reference(text).or_else(|| {
            self.chosen_ref()
                .filter(|r| LISTING_ID.is_match(r))
                .and_then(|r| find(&LISTING_ID, &r))
        })
    }

    /// The listing a portal's lead asked about, from the portal's message in the history.
    fn portal_listing(&self) -> Option<String> {
        self.messages().iter().rev().find_map(|m| {
            (m.message.role == MessageRole::Human
                && m.message.agent.as_ref().map(|a| a.as_str())
                    == Some(crate::domain::PORTAL_AGENT))
            .then(|| criteria::reference(&m.message.content))
            .flatten()
        })
    }

    /// The listing the conversation is about: picked or named last, or the last one a tool
    /// was called for.
    fn mentioned_listing(&self) -> Option<String> {
        if let Some(id) = self.picked_listing() {
            return Some(id);
        }
        self.messages()
            .iter()
            .rev()
            .find_map(|m| match m.message.role {
                MessageRole::Human => criteria::reference(&m.message.content),
                MessageRole::Ai => m.message.tool_calls.iter().rev().find_map(|c| {
                    c.args
                        .get("property_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                }),
                MessageRole::Tool => None,
            })
    }

    /// The appointment being moved: the slots last listed were asked for by picking an
    /// appointment to move.
    fn moving(&self) -> Option<String> {
        let (step, _) = self.last_call("list_available_slots")?;
        let asked = self.messages()[..step]
            .iter()
            .rposition(|m| m.message.role == MessageRole::Human)?;
        self.chosen_at(asked)?
            .strip_prefix("move:")
            .map(str::to_owned)
    }

    /// Whether a reply in this window already said that the mode is limited.
    fn told_limited_mode(&self) -> bool {
        let notices = [
            texts::LIMITED_MODE.es,
            texts::LIMITED_MODE.en,
            texts::LIMITED_MODE.pt,
        ];
        self.messages().iter().any(|m| {
            m.message.role == MessageRole::Ai
                && notices.iter().any(|n| m.message.content.contains(n))
        })
    }

    /// The calls, when this assistant has every tool they need.
    fn calls(&self, calls: Vec<(&str, Value)>) -> Option<Vec<ToolCall>> {
        let tools = &self.turn.agent.tools;
        let usable: Vec<ToolCall> = calls
            .into_iter()
            .filter(|(name, _)| tools.iter().any(|t| t == name))
            .map(|(name, args)| ToolCall {
                id: crate::llm::new_call_id(),
                name: name.to_owned(),
                args: args.into(),
            })
            .collect();
        (!usable.is_empty()).then_some(usable)
    }

    /// One call, or the menu when this assistant does not have the tool.
    fn call_or_menu(&self, name: &str, args: Value) -> OfflineAnswer {
        match self.calls(vec![(name, args)]) {
            Some(calls) => OfflineAnswer::Calls(calls),
            None => menu(self),
        }
    }
}

/// «el primero», «la segunda», «the third», «o último», or a bare «2»: which of `len` rows.
fn ordinal(text: &str, len: usize) -> Option<usize> {
    let words = crate::agents::keywords::tokens(text);
    if words.is_empty() || words.len() > 5 {
        return None;
    }
    const PLACES: &[&[&str]] = &[
        &[
            "primero", "primera", "primer", "first", "primeiro", "1o", "1a", "1st",
        ],
        &["segundo", "segunda", "second", "2o", "2a", "2nd"],
        &[
            "tercero", "tercera", "tercer", "third", "terceiro", "terceira", "3o", "3a", "3rd",
        ],
        &[
            "cuarto", "cuarta", "fourth", "quarto", "quarta", "4o", "4a", "4th",
        ],
        &["quinto", "quinta", "fifth", "5o", "5a", "5th"],
    ];
    const LAST: &[&str] = &["ultimo", "ultima", "last", "latest"];
    for word in &words {
        if LAST.contains(&word.as_str()) {
            return len.checked_sub(1);
        }
        if let Some(i) = PLACES.iter().position(|w| w.contains(&word.as_str())) {
            return (i < len).then_some(i);
        }
    }
    // A number alone («2», «el 3», «opción 4») is a row only in a message of little else.
    if words.len() <= 2 {
        let n: usize = words.last()?.parse().ok()?;
        return (1..=len).contains(&n).then(|| n - 1);
    }
    None
}

fn reply(text: &str) -> OfflineAnswer {
    OfflineAnswer::Reply {
        text: text.to_owned(),
        attachments: Vec::new(),
    }
}

fn has_any(folded: &str, words: &[&str]) -> bool {
    crate::agents::keywords::tokens(folded)
        .iter()
        .any(|w| words.contains(&w.as_str()))
}

const CANCEL_WORDS: &[&str] = &[
    "cancelar",
    "cancela",
    "cancelo",
    "anular",
    "anula",
    "cancel",
    "desmarcar",
];
const MOVE_WORDS: &[&str] = &[
    "cambiar",
    "cambia",
    "cambio",
    "mover",
    "muevo",
    "aplazar",
    "retrasar",
    "adelantar",
    "reprogramar",
    "move",
    "reschedule",
    "change",
    "alterar",
    "mudar",
    "remarcar",
];
/// Words of a request for a visit (es, en, pt).
const VISIT_WORDS: &[&str] = &[
    "visitar",
    "visitarlo",
    "visitarla",
    "visita",
    "visitas",
    "cita",
    "citas",
    "agendar",
    "verlo",
    "verla",
    "visit",
    "viewing",
    "visita",
    "marcar",
    "visitalo",
    "visitala",
];
const VISIT_NOUNS: &[&str] = &["visita", "cita", "visit", "appointment", "viewing"];
/// Words of an offer.
const OFFER_WORDS: &[&str] = &[
    "oferta",
    "ofertas",
    "ofrezco",
    "ofrecer",
    "ofrecemos",
    "offer",
    "offers",
    "proposta",
    "ofereco",
    "oferecer",
];
/// Words of a mortgage question.
const MORTGAGE_WORDS: &[&str] = &[
    "hipoteca",
    "hipotecas",
    "mortgage",
    "financiacion",
    "financiar",
    "cuota",
    "credito",
    "prestamo",
    "loan",
];
const MY_WORDS: &[&str] = &[
    "mis", "mi", "my", "minhas", "minha", "meus", "tengo", "tenho",
];

/// The details and photos of listing `id`.
fn listing_calls(id: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("get_property_details", json!({ "property_id": id })),
        ("send_property_photos", json!({ "property_id": id })),
    ]
}

/// The property assistant: the listing picked, named or talked about, with its photos.
fn listing(said: &Said<'_>) -> OfflineAnswer {
    match said.mentioned_listing() {
        Some(id) => match said.calls(listing_calls(&id)) {
            Some(calls) => OfflineAnswer::Calls(calls),
            None => menu(said),
        },
        None => reply(texts::WHICH_LISTING.in_lang(said.turn.lang)),
    }
}

/// The mortgage assistant: a simulation from the numbers of the message, or of the listing
/// talked about.
fn mortgage(said: &Said<'_>) -> OfflineAnswer {
    let text = said.last_human().map_or("", |(_, text)| text);
    let numbers = criteria::mortgage_numbers(text);
    let mut args = json!({});
    if let Some(down) = numbers.down_payment {
        args["down_payment"] = json!(down);
    }
    match (numbers.price, said.mentioned_listing()) {
        (Some(price), _) => args["price"] = json!(price),
        (None, Some(id)) => args["property_id"] = json!(id),
        (None, None) => return reply(texts::ASK_MORTGAGE.in_lang(said.turn.lang)),
    }
    if let Some(years) = numbers.years {
        args["years"] = json!(years);
    }
    if let Some(rate) = numbers.rate {
        args["annual_rate_percent"] = json!(rate);
    }
    said.call_or_menu("simulate_mortgage", args)
}

/// The offers assistant: an offer of the amount the message names for the listing talked
/// about (confirmed first), or the customer's offers.
fn offers(said: &Said<'_>) -> OfflineAnswer {
    let lang = said.turn.lang;
    let text = said.last_human().map_or("", |(_, text)| text);
    let amount = criteria::amounts(text).into_iter().map(|(a, _)| a).max();
    let listing = said.mentioned_listing();
    match (listing, amount) {
        (Some(id), Some(amount)) => said.call_or_menu(
            "submit_offer",
            json!({ "property_id": id, "amount": amount }),
        ),
        (Some(id), None) if !has_any(&criteria::fold(text), MY_WORDS) => {
            reply(&texts::ASK_OFFER_AMOUNT.in_lang(lang).replace("{id}", &id))
        }
        _ if has_any(&criteria::fold(text), MY_WORDS) => {
            said.call_or_menu("list_my_offers", json!({}))
        }
        _ => reply(texts::WHICH_LISTING.in_lang(lang)),
    }
}

/// Words of an owner's request the staff must handle: a change to the listing, papers.
const CHANGE_WORDS: &[&str] = &[
    "cambiar",
    "bajar",
    "subir",
    "precio",
    "retirar",
    "quitar",
    "documento",
    "documentos",
    "contrato",
    "firmar",
    "change",
    "lower",
    "raise",
    "price",
    "withdraw",
    "contract",
    "mudar",
    "baixar",
    "preco",
    "contrato",
    "retirar",
];

/// The owners' assistant: how their listings are doing; a change goes to the staff.
fn owners(said: &Said<'_>) -> OfflineAnswer {
    let text = said.last_human().map_or("", |(_, text)| text);
    if has_any(&criteria::fold(text), CHANGE_WORDS) {
        return OfflineAnswer::Handoff {
            reason: format!("{}: «{}»", texts::HANDOFF_REASON, short(text)),
        };
    }
    said.call_or_menu("owner_listing_stats", json!({}))
}

/// The visits' follow-up, a short guided form: the customer's visits, the first without an
/// opinion asked about with buttons, the answer recorded (confirmed first); an owner's
/// listing stats.
fn visits(said: &Said<'_>) -> OfflineAnswer {
    if said.turn.role == Role::Owner {
        return said.call_or_menu("owner_listing_stats", json!({}));
    }
    let Some((index, text)) = said.last_human() else {
        return said.call_or_menu("list_my_visits", json!({}));
    };
    let asked = said.messages()[..index].iter().rev().find_map(|m| {
        m.message.attachments.iter().find_map(|a| match a {
            Attachment::Buttons { buttons, .. }
                if buttons.iter().any(|b| b.id.starts_with(FEEDBACK)) =>
            {
                Some(buttons)
            }
            _ => None,
        })
    });
    if let Some(buttons) = asked {
        let pressed = buttons.iter().find(|b| b.title == text.trim());
        let id = pressed.unwrap_or(&buttons[0]).id.as_str();
        let mut parts = id.trim_start_matches(FEEDBACK).splitn(2, ':');
        let visit = parts.next().unwrap_or_default();
        let mut args = json!({ "visit_id": visit, "feedback": short(text) });
        if let (Some(_), Some(outcome)) = (pressed, parts.next()) {
            args["outcome"] = json!(outcome);
        }
        return said.call_or_menu("record_visit_feedback", args);
    }
    said.call_or_menu("list_my_visits", json!({}))
}

/// The id prefix of a visit feedback button: `feedback:<visit>:<outcome>`.
const FEEDBACK: &str = "feedback:";

/// The visits listed, and one asked about with buttons: the first without an opinion, else
/// the latest.
fn ask_feedback(lang: &str, listed: &str) -> Option<(String, Attachment)> {
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^- (V-[A-Za-z0-9-]+) · (.+?) · ").expect("valid"));
    let lines: Vec<&str> = listed.lines().map(str::trim).collect();
    let line = lines
        .iter()
        .find(|line| line.ends_with("sin opinión todavía"))
        .or_else(|| lines.iter().find(|line| LINE.is_match(line)))?;
    let caps = LINE.captures(line)?;
    let (visit, title) = (&caps[1], &caps[2]);
    let question = texts::HOW_WAS_IT.in_lang(lang).replace("{title}", title);
    let button = |outcome: &str, text: &Text| {
        ReplyButton::new(format!("{FEEDBACK}{visit}:{outcome}"), text.in_lang(lang))
    };
    let buttons = vec![
        button("interested", &texts::INTERESTED),
        button("not_interested", &texts::NOT_INTERESTED),
        button("wants_second_visit", &texts::SECOND_VISIT),
    ];
    Some((
        for_customer(listed),
        Attachment::Buttons {
            text: question,
            buttons,
        },
    ))
}

fn short(text: &str) -> String {
    text.chars().take(200).collect()
}

/// The primary assistant: what can be done now, as a list, and the contact lines.
fn menu(said: &Said<'_>) -> OfflineAnswer {
    let lang = said.turn.lang;
    let reachable = |name: &str| said.turn.assistants.contains(&name);
    let mut rows = Vec::new();
    let mut row = |agent: &str, title: &Text| {
        if reachable(agent) {
            rows.push(ListRow {
                id: format!("{ASK_PREFIX}{agent}:menu"),
                title: title.in_lang(lang).to_owned(),
                description: String::new(),
            });
        }
    };
    if said.turn.role == Role::Owner {
        row("owner_info_assistant", &texts::MENU_OWNER);
    }
    row("searcher_assistant", &texts::MENU_SEARCH);
    row("appointment_assistant", &texts::MENU_APPOINTMENTS);
    row("mortgage_loan_assistant", &texts::MENU_MORTGAGE);
    row("prospect_offer_assistant", &texts::MENU_OFFERS);
    rows.push(ListRow {
        id: "person".to_owned(),
        title: texts::MENU_PERSON.in_lang(lang).to_owned(),
        description: String::new(),
    });
    OfflineAnswer::Reply {
        // The list says what it is; the words are how to reach a person.
        text: said.turn.contact.unwrap_or_default().to_owned(),
        attachments: vec![Attachment::List {
            text: texts::MENU.in_lang(lang).to_owned(),
            rows,
        }],
    }
}

/// The reply to the last step's results, in the customer's words; `None` when the turn
/// should be served from the customer's message instead (an unclear answer to a
/// confirmation).
fn word(said: &Said<'_>, results: &[Answered<'_>]) -> Option<OfflineAnswer> {
    let lang = said.turn.lang;
    let mut lines: Vec<String> = Vec::new();
    let mut attachments = Vec::new();
    for result in results {
        let text = result.text.trim();
        let listed = result
            .attachments
            .iter()
            .any(|a| matches!(a, Attachment::List { .. }));
        if text.starts_with("Not executed: the user was asked to confirm") {
            return None;
        }
        if text.starts_with(crate::engine::turn::AWAITING_CONFIRMATION) {
            lines.push(texts::CONFIRM_FIRST.in_lang(lang).to_owned());
            continue;
        }
        if text.starts_with("The user declined") {
            lines.push(texts::DECLINED.in_lang(lang).to_owned());
            continue;
        }
        if text.starts_with("Error:") {
            let taken = text.contains("taken") || text.contains("no longer available");
            let failed = if taken {
                &texts::SLOT_TAKEN
            } else if text.contains("the asking price") {
                &texts::OFFER_OUT_OF_RANGE
            } else if text.contains("not registered as an owner") {
                &texts::NOT_AN_OWNER
            } else if text.contains("location") {
                &texts::SHARE_LOCATION
            } else {
                &texts::FAILED
            };
            lines.push(failed.in_lang(lang).to_owned());
            continue;
        }
        let id = result
            .call
            .args
            .get("property_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match result.call.name.as_str() {
            "search_properties" if listed => {
                let n: usize = text
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let found = if n == 1 {
                    texts::FOUND_ONE.in_lang(lang).to_owned()
                } else {
                    texts::FOUND.in_lang(lang).replace("{n}", &n.to_string())
                };
                lines.push(format!("{found} {}", texts::REFINE.in_lang(lang)));
            }
            "search_properties" => lines.push(texts::NONE_FOUND.in_lang(lang).to_owned()),
            "get_property_details" => {
                lines.push(for_customer(text));
                // The photos' tool put the listing's buttons under them; else they go here.
                let shown = results.iter().any(|r| {
                    r.attachments
                        .iter()
                        .any(crate::realestate::tools::listing_buttons::is_listing_buttons)
                });
                if !shown {
                    attachments.push(crate::realestate::tools::listing_buttons::for_listing(
                        id,
                        text.contains(" en venta "),
                        lang,
                    ));
                }
            }
            // The photos go as they are, after the words.
            "send_property_photos" => {}
            "list_available_slots" if listed => {
                lines.push(texts::SLOTS.in_lang(lang).replace("{id}", id));
            }
            "list_available_slots" => {
                lines.push(texts::NO_SLOTS.in_lang(lang).replace("{id}", id));
            }
            "list_my_appointments" => {
                let (list, cancel) = appointments_to_pick(said, text);
                match list {
                    Some(rows) if !rows.is_empty() => {
                        let ask = if cancel {
                            &texts::PICK_TO_CANCEL
                        } else {
                            &texts::PICK_TO_MOVE
                        };
                        lines.push(ask.in_lang(lang).to_owned());
                        attachments.push(Attachment::List {
                            text: ask.in_lang(lang).to_owned(),
                            rows,
                        });
                    }
                    Some(_) => lines.push(texts::NO_APPOINTMENTS.in_lang(lang).to_owned()),
                    None => lines.push(for_customer(text)),
                }
            }
            "list_my_visits" => match ask_feedback(lang, text) {
                Some((listed, question)) => {
                    lines.push(listed);
                    attachments.push(question);
                }
                None => lines.push(for_customer(text)),
            },
            "simulate_mortgage" => {
                lines.push(format!(
                    "{} {}",
                    for_customer(text),
                    texts::ESTIMATE.in_lang(lang)
                ));
            }
            _ => lines.push(for_customer(text)),
        }
    }
    let text = lines
        .into_iter()
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    Some(OfflineAnswer::Reply { text, attachments })
}

/// The customer's appointments as rows to cancel or move, when their last message asked to;
/// `None` when it only asked to see them. The flag: cancelling.
fn appointments_to_pick(said: &Said<'_>, listed: &str) -> (Option<Vec<ListRow>>, bool) {
    let text = said.last_human().map_or("", |(_, text)| text);
    let words = criteria::fold(text);
    let cancel = has_any(&words, CANCEL_WORDS);
    let intent = if cancel {
        "cancel"
    } else if has_any(&words, MOVE_WORDS) {
        "move"
    } else {
        return (None, false);
    };
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^- (A-[A-Za-z0-9-]+) · ([^·]+) · (.+)$").expect("valid"));
    let rows = listed
        .lines()
        .filter_map(|line| LINE.captures(line.trim()))
        .take(crate::outbound::graph::MAX_LIST_ROWS)
        .map(|c| ListRow {
            id: format!("{ASK_PREFIX}appointment_assistant:{intent}:{}", &c[1]),
            title: c[2]
                .trim()
                .chars()
                .take(crate::outbound::graph::MAX_ROW_TITLE)
                .collect(),
            description: c[3]
                .trim()
                .chars()
                .take(crate::outbound::graph::MAX_ROW_DESCRIPTION)
                .collect(),
        })
        .collect();
    (Some(rows), cancel)
}

/// A tool's text without what it tells the model: the sentences that instruct it, the line
/// that names another tool.
fn for_customer(text: &str) -> String {
    const FOR_THE_MODEL: &[&str] = &[
        "recuérdale",
        "no prometas",
        "propón al usuario",
        "el usuario recibe",
        "se envían con",
        "di en una frase",
        "no pegues",
        "dilo",
        "say so",
    ];
    text.lines()
        .filter(|line| !line.starts_with("Fotos: ") && !line.starts_with("Sin fotos"))
        .map(|line| {
            line.split_inclusive(". ")
                .filter(|sentence| {
                    let lower = sentence.to_lowercase();
                    !FOR_THE_MODEL.iter().any(|m| lower.contains(m))
                })
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}
