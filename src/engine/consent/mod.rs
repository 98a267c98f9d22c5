//! Opt-out and opt-in, read as intent, without a model. A short whole message that asks the
//! business to stop writing first — «STOP», «BAJA», «por favor no me mandéis más mensajes»,
//! «dejad de escribirme», «stop sending me these», «pare de me mandar mensagens» — stops every
//! proactive message to that contact (reminders, saved-search alerts, re-engagement); one that
//! asks for them again — «ALTA», «quiero volver a recibir los avisos», «start again» — brings
//! them back. Meta lowers the quality rating of numbers whose messages are ignored or blocked,
//! and a low rating caps or stops the number: honouring the opt-out at once protects the number.
//!
//! What is not consent goes to the assistants, whose `record_opt_out` tool catches what this
//! reader leaves: a message that names something else to cancel («quiero dar de baja mi
//! anuncio», «cancela la alerta de Ruzafa», «anula la visita»); a bare «baja» or «alta» right
//! after the bot offered it as a choice («¿planta alta o baja?»); anything long.
//!
//! Measured on `tests/data/consent/` (a tuning table, and a held-out one written apart).

mod tool;
mod words;

use std::sync::LazyLock;

use regex::Regex;

use crate::agents::keywords::tokens;

pub use tool::{RECORD_OPT_OUT, RecordOptOut, RecordOptOutArgs};
use words::{
    ARTICLES, CONSENT_TALK, CONSENT_TALK_PHRASES, COURTESY, HYPOTHETICAL, MESSAGE_CUES, MESSAGES,
    MISTAKES, MOST_WORDS, NO, OPT_IN_WORDS, OPT_OUT_WORDS, OTHER_THINGS, PREFERENCES,
    QUESTION_WORDS, RESUME, RESUME_CUES, STOP, STOP_CUES, YES,
};

/// What a message says about proactive messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// Stop writing to me first.
    OptOut,
    /// Write to me again.
    OptIn,
}

/// What the bot said last, before the message being read: its words, and the titles of the
/// buttons and list rows it offered.
#[derive(Debug, Clone, Default)]
pub struct Offered<'a> {
    pub texts: Vec<&'a str>,
    /// The titles of its buttons and list rows: each one a choice.
    pub choices: Vec<&'a str>,
    /// Whether it was the bot's own consent acknowledgement («… escribe ALTA»).
    pub about_consent: bool,
}

/// A reader of consent: the words of a message, with what the bot offered before it.
pub fn consent_after(text: &str, offered: &Offered<'_>) -> Option<Consent> {
    let raw = spoken(tokens(text));
    // «si me doy de baja de las alertas, ¿pierdo la visita?»: a question about it.
    if raw.first().is_some_and(|w| w == "si") && text.contains('?') {
        return None;
    }
    // «¿puedo dejar de recibir avisos si quiero?», «just curious»: asking about it.
    let joined = raw.join(" ");
    if HYPOTHETICAL.iter().any(|h| match h.strip_suffix('$') {
        Some(last) => joined.ends_with(last),
        None => phrase_in(&raw, h),
    }) {
        return None;
    }
    if let Some(answer) = answer_to_consent_question(&raw, offered) {
        return Some(answer);
    }
    let mut words: Vec<String> = raw
        .into_iter()
        .filter(|w| !COURTESY.contains(&w.as_str()))
        .collect();
    // «STOP STOP STOP» says it once.
    words.dedup();
    if words.is_empty() || words.len() > MOST_WORDS {
        return None;
    }
    let said = words.join(" ");
    let keyword = if OPT_OUT_WORDS.contains(&said.as_str()) {
        Some(Consent::OptOut)
    } else if OPT_IN_WORDS.contains(&said.as_str()) {
        Some(Consent::OptIn)
    } else {
        None
    };
    if let Some(keyword) = keyword {
        // A word the bot just offered as a choice is the answer to it («¿alta o baja?»),
        // unless it offered it for consent («… escribe ALTA»).
        return (!was_offered(&words, offered)).then_some(keyword);
    }
    // «non merci, stop», «nein danke, aufhören»: a no, then the keyword.
    if let [first, rest @ ..] = words.as_slice()
        && NO.contains(&first.as_str())
        && OPT_OUT_WORDS.contains(&rest.join(" ").as_str())
    {
        return (!was_offered(rest, offered)).then_some(Consent::OptOut);
    }
    // «Please stop. We bought a house.», «lol who gave you my number, stop»: the keyword
    // ends or opens the message as a sentence of its own.
    if ends_on_stop(text) {
        return Some(Consent::OptOut);
    }
    // «no dejéis de escribirme», «don't stop sending»: the opposite.
    if said.contains("no dejeis de")
        || said.contains("no dejes de")
        || said.contains("dont stop")
        || said.contains("don t stop")
        || said.contains("nao parem de")
        || said.contains("nao deixem de")
    {
        return None;
    }
    // «hace tiempo pedí no recibir mensajes, pero ahora quiero recibirlos»: a change of mind
    // is read from its last clause.
    let last_clause = [" pero ", " but ", " ma "]
        .iter()
        .filter_map(|join| said.rsplit_once(join).map(|(_, after)| after))
        .min_by_key(|after| after.len());
    if let Some(after) = last_clause {
        if matches_about_messages(&RESUME, after) {
            return Some(Consent::OptIn);
        }
        if matches_about_messages(&STOP, after) {
            return Some(Consent::OptOut);
        }
    }
    // «oops didn't mean to unsubscribe, please add me back»: undoing a mistake.
    if MISTAKES.iter().any(|m| said.contains(m)) && matches_about_messages(&RESUME, &said) {
        return Some(Consent::OptIn);
    }
    if matches_about_messages(&STOP, &said) {
        return Some(Consent::OptOut);
    }
    if matches_about_messages(&RESUME, &said) {
        return Some(Consent::OptIn);
    }
    cues(&words)
}

/// The words as said, not as typed: letters held out collapse («nooo» → «no», «siii» → «si»)
/// and «x fa» is «xfa» (por favor).
fn spoken(words: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for word in words {
        // At most two of a letter in a row.
        let mut held = String::with_capacity(word.len());
        let (mut last, mut run) = (None, 0);
        for c in word.chars() {
            run = if last == Some(c) { run + 1 } else { 1 };
            last = Some(c);
            if run <= 2 {
                held.push(c);
            }
        }
        // «siii» keeps two letters above; «sii» and «si» read alike.
        let word = match held.as_str() {
            "noo" => "no".to_owned(),
            "sii" => "si".to_owned(),
            _ => held,
        };
        if word == "fa" && out.last().is_some_and(|w| w == "x") {
            out.pop();
            out.push("xfa".to_owned());
            continue;
        }
        out.push(word);
    }
    out
}

/// Whether the words hold `phrase` (space-separated folded words) as whole words.
fn phrase_in(words: &[String], phrase: &str) -> bool {
    let wanted: Vec<&str> = phrase.split(' ').collect();
    words
        .windows(wanted.len())
        .any(|w| w.iter().zip(&wanted).all(|(a, b)| a == b))
}

/// A stop keyword as a sentence of its own at the end of a message or right before a reason:
/// «…, stop», «Please stop. We bought a house.».
fn ends_on_stop(text: &str) -> bool {
    static AT_END: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)[,.;!]\s*(stop|basta|basta ya|parad ya)[\s.!]*$").expect("a valid pattern")
    });
    static FIRST: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^\s*(please |pls |por favor,? )?(stop|basta|parad)\s*[.!]+\s*(we|i|ya)\s+(bought|found|have found|rented|moved|already|compr|encontr|alquil)")
            .expect("a valid pattern")
    });
    AT_END.is_match(text) || FIRST.is_match(text)
}

/// A yes or no to the bot's own question about its messages: «¿Quieres seguir recibiendo
/// alertas? Responde SÍ o NO» → «no» stops them; «¿Quieres que te demos de baja?» → «sí»
/// does, «no» to it changes nothing; «Escribe CANCELAR para dejar de recibir estas alertas» → «cancelar» does.
fn answer_to_consent_question(words: &[String], offered: &Offered<'_>) -> Option<Consent> {
    let asked = offered.texts.last()?;
    let said = tokens(asked).join(" ");
    // «Escribe CANCELAR para dejar de recibir…»: the word it asks for.
    if let Some(keyword) = asked_keyword(words, &said) {
        return Some(keyword);
    }
    if !asked.contains('?') && !asked.contains('¿') {
        return None;
    }
    // What comes before the question is not what it asks: «Te enviaremos la confirmación.
    // ¿Algo más?» asks nothing about messages; «¿Sigues buscando? Si quieres te seguimos
    // enviando novedades» does.
    let question_from = asked
        .find(['¿'])
        .or_else(|| {
            let mark = asked.find('?')?;
            Some(asked[..mark].rfind(['.', '!', '\n']).map_or(0, |i| i + 1))
        })
        .unwrap_or(0);
    let about_messages = CONSENT_TALK
        .iter()
        .any(|prefix| said.split(' ').any(|w| w.starts_with(prefix)))
        || CONSENT_TALK_PHRASES.iter().any(|p| said.contains(p))
        || said.contains("de baja")
        || said.contains("activar");
    if !about_messages {
        return None;
    }
    // «¿Algo más?»: a question that asks for nothing about messages.
    let question = tokens(&asked[question_from..]).join(" ");
    if GENERIC_QUESTIONS.iter().any(|q| question.contains(q)) {
        return None;
    }
    let stops = stops(&said);
    // «¿Quieres que te avise si baja el precio de este piso?»: a yes to an alert about a
    // listing or a zone is a saved search, the assistant's; only a no is read here.
    let about_listings = said
        .split(' ')
        .any(|w| OTHER_THINGS.contains(&w) || LISTING_WORDS.contains(&w));
    let proposed = if stops {
        Consent::OptOut
    } else {
        Consent::OptIn
    };
    // Declining to stop changes nothing; declining to go on receiving stops them.
    let declined = match proposed {
        Consent::OptOut => None,
        Consent::OptIn => Some(Consent::OptOut),
    };
    // «ya no», «bueno, sí»: the first word that answers.
    let answer: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .skip_while(|w| LEADING.contains(w))
        .collect();
    let first = *answer.first()?;
    // Courtesy words («vale», «sí») were taken out: an empty rest after them is a yes.
    if about_listings && !stops {
        return (NO.contains(&first) && answer.len() <= 4)
            .then_some(declined)
            .flatten()
            .filter(|_| keeps_sending(&said));
    }
    if YES.contains(&first)
        || (answer.len() <= 4
            && answer.contains(&"quiero")
            && !answer.iter().any(|w| NO.contains(w)))
    {
        return Some(proposed);
    }
    if NO.contains(&first) && answer.len() <= 4 {
        return declined;
    }
    None
}

/// Questions that ask for anything: what was said before them is not what they ask.
const GENERIC_QUESTIONS: &[&str] = &[
    "algo mas",
    "alguna otra",
    "algo en que",
    "puedo ayudar",
    "te puedo ayudar",
    "anything else",
    "can i help",
    "mais alguma",
    "posso ajudar",
];

/// Words of listings and places: an offer about them is an alert for a search.
const LISTING_WORDS: &[&str] = &[
    "zona",
    "barrio",
    "precio",
    "area",
    "neighbourhood",
    "price",
    "zone",
    "bairro",
    "preco",
    "barri",
    "quartier",
    "gegend",
    "appartamenti",
    "appartements",
    "wohnungen",
    "pisos",
    "flats",
];

/// Whether the bot asked to go on sending: «¿Sigues buscando? Si quieres te seguimos
/// enviando novedades», «Reply to keep getting updates», «¿Quieres continuar recibiendo…?».
fn keeps_sending(said: &str) -> bool {
    // Within words too: «continuar» holds «continuare», «seguir» «seguir recebendo».
    [
        "seguimos",
        "seguir",
        "sigues",
        "continuar",
        "continue",
        "keep",
        "still",
    ]
    .iter()
    .any(|w| said.contains(w))
}

/// Words that open an answer without being it: «ya no», «bueno, sí».
const LEADING: &[&str] = &[
    "ya", "pues", "bueno", "eh", "oye", "mmm", "hmm", "well", "um",
];

/// Whether the bot's words propose to stop its messages.
fn stops(said: &str) -> bool {
    [
        "de baja",
        "dejar de",
        "no recibir",
        "stop receiving",
        "unsubscribe",
    ]
    .iter()
    .any(|p| said.contains(p))
}

/// «Escribe CANCELAR para dejar de recibir estas alertas» → «cancelar» stops them; `said` is
/// the bot's message, folded.
fn asked_keyword(words: &[String], said: &str) -> Option<Consent> {
    let [only] = words else {
        return None;
    };
    (stops(said) && said.contains(&format!(" {only} para "))).then_some(Consent::OptOut)
}

/// The second reading, by what a message holds rather than how it is worded: a short message
/// with a cue of stopping (or of coming back) and one of the messages themselves, that names
/// nothing else and asks no question — «mensajes no más, gracias», «avisos: ya no, que alquilé».
fn cues(words: &[String]) -> Option<Consent> {
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    let phrase = |list: &[&str]| list.iter().any(|p| phrase_in(words, p));
    if words.len() > 12
        || has(OTHER_THINGS)
        || has(PREFERENCES)
        || has(QUESTION_WORDS)
        || !(has(MESSAGE_CUES) || MESSAGES.split('|').any(|m| has(&[m.trim()])))
    {
        return None;
    }
    if phrase(STOP_CUES) {
        return Some(Consent::OptOut);
    }
    // «no me mandéis la ubicación otra vez» asks for nothing back.
    let negated = has(&[
        "no", "nao", "not", "dont", "ne", "non", "nicht", "kein", "never",
    ]);
    if !negated && phrase(RESUME_CUES) {
        return Some(Consent::OptIn);
    }
    None
}

/// Whether one of `patterns` matches `said` with the messages as its object: «no me mandes más
/// fotos del piso» asks for no more photos, «dejad de enviarme el contrato» not to be sent a
/// contract — a thing named right after the match is what it is about.
fn matches_about_messages(patterns: &[Regex], said: &str) -> bool {
    patterns.iter().any(|pattern| {
        pattern.find_iter(said).any(|found| {
            // Ending on the messages themselves: what follows only says which ones.
            let last = found.as_str().rsplit(' ').next().unwrap_or_default();
            if MESSAGES.split('|').any(|m| m.trim() == last) {
                return true;
            }
            let object = said[found.end()..]
                .split(' ')
                .filter(|w| !w.is_empty())
                .find(|w| !ARTICLES.contains(w));
            object.is_none_or(|w| !OTHER_THINGS.contains(&w))
        })
    })
}

/// [`consent_after`] with nothing offered before.
pub fn consent(text: &str) -> Option<Consent> {
    consent_after(text, &Offered::default())
}

/// Whether the bot's last message offered the keyword `words` as an answer: the word is a
/// button or a list row, or stands in a question or a choice of its text («¿planta alta o
/// baja?», «alta o baja»), and the message was not about consent. A word in a statement
/// («el Euríbor baja») offers nothing.
fn was_offered(words: &[String], offered: &Offered<'_>) -> bool {
    if offered.about_consent {
        return false;
    }
    let Some(word) = words.last() else {
        return false;
    };
    let talks_consent = offered
        .texts
        .iter()
        .chain(&offered.choices)
        .flat_map(|t| tokens(t))
        .any(|w| CONSENT_TALK.iter().any(|prefix| w.starts_with(prefix)));
    if talks_consent {
        return false;
    }
    if offered.choices.iter().any(|c| tokens(c).contains(word)) {
        return true;
    }
    offered
        .texts
        .iter()
        .flat_map(|text| text.split_inclusive(['?', '.', '!', '\n']))
        .any(|sentence| {
            let said = tokens(sentence);
            let Some(at) = said.iter().position(|w| w == word) else {
                return false;
            };
            let asked = sentence.contains('?')
                || sentence.contains('¿')
                || said.iter().any(|w| ANSWER_ASKS.contains(&w.as_str()));
            let next_to = |i: Option<usize>| {
                i.and_then(|i| said.get(i))
                    .is_some_and(|w| CHOICE_JOINS.contains(&w.as_str()))
            };
            asked || next_to(at.checked_sub(1)) || next_to(Some(at + 1))
        })
}

/// Words that join the options of a choice: «alta o baja», «high or low».
///
/// Not «y» or «and»: «el Euríbor baja y el alquiler sube» lists, it offers nothing.
const CHOICE_JOINS: &[&str] = &["o", "u", "ou", "or", "oder", "oppure"];

/// Verbs that ask for an answer: every word of their sentence is offered («Elige: planta
/// baja, intermedia o ático», «Reply START to begin the tour»).
const ANSWER_ASKS: &[&str] = &[
    "elige",
    "elija",
    "elegid",
    "escoge",
    "escoja",
    "responde",
    "responda",
    "responded",
    "contesta",
    "conteste",
    "escribe",
    "escriba",
    "reply",
    "answer",
    "choose",
    "pick",
    "type",
    "respond",
    "responda",
    "escolha",
    "escolhe",
    "antworten",
    "antworte",
    "wahlen",
    "rispondi",
    "rispondete",
    "choisissez",
    "repondez",
];

#[cfg(test)]
mod tests;
