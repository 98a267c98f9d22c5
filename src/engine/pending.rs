//! A pending action's yes or no.
//!
//! A tool call that changes data waits for the user's confirmation ([`PendingAction`]). The
//! answer must never misfire: a Confirm button carries the id of the action it was shown for,
//! so an old button cannot confirm whatever is pending now; and a typed answer confirms only
//! when the whole message is a plain yes («sí», «vale», «dale», «👍», «ok perfecto»). A yes
//! with a change («sí, pero el jueves»), a mixed or an unrelated message goes to the assistant,
//! which is told what was pending and that nothing was done.

use crate::agents::keywords::tokens;
use crate::domain::Content;
use crate::domain::PendingAction;
use crate::store::{InboxEntry, ReplyButton};

/// What the user's new messages say to the pending action (or to a button they pressed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Confirm,
    Decline,
    /// A Confirm or Cancel button of an action that is no longer the pending one (or of none).
    Stale,
    /// Anything else: for the assistant to read, the action not executed as it stands.
    Unclear,
}

const CONFIRM: &str = "confirm:";
const CANCEL: &str = "cancel:";

/// The id of the action `call` of `wa_id`'s conversation asks for (short: it travels in every
/// button id). Made from the model's call id, so the same call asks the same action — a turn
/// resumed after a crash, or a recorded conversation replayed by `zaguan test`.
pub fn action_id(wa_id: &crate::domain::WaId, call_id: &str) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::new()
        .chain_update(wa_id.as_str().as_bytes())
        .chain_update(b":action:")
        .chain_update(call_id.as_bytes())
        .finalize();
    hex::encode(&digest[..6])
}

/// The id of the tool call a confirmed action runs as: `call_confirmed_` and the action's id.
/// The router runs such a call without asking again — it is only stored once the user said
/// yes — so a turn resumed after a crash finishes the action instead of asking twice.
pub fn confirmed_call_id(action_id: &str) -> String {
    format!("{CONFIRMED_CALL}{action_id}")
}

/// Whether `call_id` is a confirmed action's ([`confirmed_call_id`]).
pub fn is_confirmed_call(call_id: &str) -> bool {
    call_id
        .strip_prefix(CONFIRMED_CALL)
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

const CONFIRMED_CALL: &str = "call_confirmed_";

/// Confirm / Cancel in the user's language (titles ≤ 20 characters), for the action `id`.
pub fn buttons(action_id: &str, lang: Option<&str>) -> Vec<ReplyButton> {
    let (yes, no) = match lang.unwrap_or("es") {
        "en" => ("Confirm", "Cancel"),
        "pt" => ("Confirmar", "Cancelar"),
        "fr" => ("Confirmer", "Annuler"),
        "de" => ("Bestätigen", "Abbrechen"),
        "it" => ("Conferma", "Annulla"),
        "ca" => ("Confirmar", "Cancel·lar"),
        _ => ("Confirmar", "Cancelar"),
    };
    vec![
        ReplyButton::new(format!("{CONFIRM}{action_id}"), yes),
        ReplyButton::new(format!("{CANCEL}{action_id}"), no),
    ]
}

/// The id of the reply button (or template quick reply) `entry` is the press of.
pub fn pressed(entry: &InboxEntry) -> Option<String> {
    match &entry.content {
        Content::ButtonReply { id, .. } => Some(id.clone()),
        Content::Button { payload, .. } => payload.clone(),
        _ => None,
    }
}

/// What `new` (the turn's new messages, oldest first) answers. `pending` is the action
/// awaiting a yes, if any (expired ones already dropped). `None`: nothing to do with a
/// confirmation (no action pending and no confirmation button pressed).
pub fn answer(new: &[&InboxEntry], pending: Option<&PendingAction>) -> Option<Answer> {
    if let Some(id) = new.last().and_then(|entry| pressed(entry)) {
        let (confirmed, action) = if let Some(action) = id.strip_prefix(CONFIRM) {
            (true, Some(action))
        } else if let Some(action) = id.strip_prefix(CANCEL) {
            (false, Some(action))
        } else if id == "btn_0" || id == "btn_1" {
            // Sent before buttons carried their action: which one it was is unknown.
            (false, None)
        } else {
            // Not one of ours (a template's quick reply): an ordinary message.
            return pending.map(|_| Answer::Unclear);
        };
        return Some(match (pending, action) {
            (Some(pending), Some(action)) if !pending.id.is_empty() && pending.id == action => {
                if confirmed {
                    Answer::Confirm
                } else {
                    Answer::Decline
                }
            }
            _ => Answer::Stale,
        });
    }
    pending?;
    // A reaction never answers: only a button or typed words do.
    let text: Vec<&str> = new
        .iter()
        .filter(|e| !matches!(e.content, Content::Reaction { .. }))
        .filter_map(|e| e.text.as_deref())
        .collect();
    if text.is_empty() {
        return None;
    }
    Some(match reply(&text.join("\n")) {
        Reply::Yes => Answer::Confirm,
        Reply::No => Answer::Decline,
        Reply::Other => Answer::Unclear,
    })
}

/// A typed answer to a yes-or-no question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Yes,
    No,
    Other,
}

/// Words of a plain yes, by language (es, en, pt, then the other supported ones), in the
/// folded form of [`tokens`] with letter runs collapsed («siii» is «si»).
const YES: &[&str] = &[
    // es
    "si",
    "sip",
    "vale",
    "ok",
    "okay",
    "okey",
    "oki",
    "okis",
    "dale",
    "claro",
    "perfecto",
    "perfecta",
    "genial",
    "estupendo",
    "confirmo",
    "confirmar",
    "confirma",
    "confirmado",
    "confirmada",
    "confirmalo",
    "confirmala",
    "adelante",
    "correcto",
    "exacto",
    "venga",
    "hecho",
    "listo",
    "de acuerdo",
    "esta bien",
    "por supuesto",
    "claro que si",
    "me parece bien",
    "eso es",
    // en
    "yes",
    "yeah",
    "yep",
    "yup",
    "sure",
    "confirm",
    "confirmed",
    "alright",
    "all right",
    "fine",
    "great",
    "perfect",
    "absolutely",
    "go ahead",
    "of course",
    "sounds good",
    "do it",
    // pt
    "sim",
    "beleza",
    "certo",
    "isso",
    "combinado",
    "fechado",
    "perfeito",
    "otimo",
    "bora",
    "pode ser",
    "pode",
    "ta bom",
    "esta bem",
    "com certeza",
    // fr, it, de, ca
    "oui",
    "d acord",
    "d accord",
    "parfait",
    "confirmer",
    "ca marche",
    "va bene",
    "perfeto",
    "conferma",
    "confermo",
    "ja",
    "genau",
    "passt",
    "einverstanden",
    "bestatigen",
    "endavant",
    "perfecte",
];

/// Words of a plain no, likewise.
const NO: &[&str] = &[
    // es
    "no",
    "nop",
    "cancelar",
    "cancela",
    "cancelalo",
    "cancelala",
    "cancelado",
    "mejor no",
    "no quiero",
    "dejalo",
    "olvidalo",
    "para nada",
    "negativo",
    "ni hablar",
    "claro que no",
    "por supuesto que no",
    "de ninguna manera",
    // en
    "nope",
    "nah",
    "cancel",
    "cancel it",
    "don t",
    "never mind",
    "nevermind",
    // pt
    "nao",
    "nao quero",
    "deixa",
    "deixa pra la",
    // fr, it, de, ca
    "non",
    "annuler",
    "annulla",
    "nein",
    "abbrechen",
    "cancel la",
];

/// Politeness that changes nothing: «sí, gracias», «no, thanks», «sim, obrigado».
const FILLER: &[&str] = &[
    "gracias",
    "muchas gracias",
    "por favor",
    "porfa",
    "porfavor",
    "please",
    "pls",
    "thanks",
    "thank you",
    "thx",
    "obrigado",
    "obrigada",
    "merci",
    "grazie",
    "danke",
    "gracies",
];

/// Emoji that say yes or no on their own.
const YES_EMOJI: &[char] = &['👍', '👌', '✅', '✔', '🙌', '🆗'];
const NO_EMOJI: &[char] = &['👎', '❌', '✖', '🚫', '⛔'];

/// Whether the whole of `text` is a plain yes, a plain no, or something else. Every word must
/// belong to a yes or a no phrase (or be politeness), and only one of the two may appear: «sí,
/// pero el jueves», «ok, no gracias» and «no hay problema» are something else.
pub fn reply(text: &str) -> Reply {
    let words: Vec<String> = tokens(text).iter().map(|w| collapse_runs(w)).collect();
    if words.len() > 8 {
        return Reply::Other;
    }
    let mut yes = text.chars().any(|c| YES_EMOJI.contains(&c));
    let mut no = text.chars().any(|c| NO_EMOJI.contains(&c));
    let mut at = 0;
    while at < words.len() {
        let Some((kind, len)) = longest_phrase(&words[at..]) else {
            return Reply::Other;
        };
        match kind {
            Kind::Yes => yes = true,
            Kind::No => no = true,
            Kind::Filler => {}
        }
        at += len;
    }
    match (yes, no) {
        (true, false) => Reply::Yes,
        (false, true) => Reply::No,
        _ => Reply::Other,
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Yes,
    No,
    Filler,
}

/// The longest phrase of the lists `words` starts with, and how many words it takes.
fn longest_phrase(words: &[String]) -> Option<(Kind, usize)> {
    let lists = [(Kind::Yes, YES), (Kind::No, NO), (Kind::Filler, FILLER)];
    let mut best: Option<(Kind, usize)> = None;
    for (kind, list) in lists {
        for phrase in list.iter() {
            let phrase: Vec<String> = phrase.split(' ').map(collapse_runs).collect();
            let fits = phrase.len() <= words.len() && phrase.iter().zip(words).all(|(p, w)| p == w);
            if fits && best.is_none_or(|(_, len)| phrase.len() > len) {
                best = Some((kind, phrase.len()));
            }
        }
    }
    best
}

/// «siii» → «si», «vaaale» → «vale», «okk» → «ok»: WhatsApp's emphasis, not another word.
fn collapse_runs(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        if !out.ends_with(c) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use Reply::{No, Other, Yes};

    /// Replies to «¿Confirmo la visita del jueves a las 18:00?», as customers type them.
    const TABLE: &[(&str, Reply)] = &[
        // A plain yes, in the usual WhatsApp forms.
        ("Sí", Yes),
        ("si", Yes),
        ("sí!!", Yes),
        ("¡Sí!", Yes),
        ("Siii", Yes),
        ("sí.", Yes),
        ("Sí, gracias", Yes),
        ("si si", Yes),
        ("Sí, por favor", Yes),
        ("dale", Yes),
        ("Dale!", Yes),
        ("vale", Yes),
        ("Vaaale", Yes),
        ("Vale, perfecto", Yes),
        ("ok", Yes),
        ("OK", Yes),
        ("okey", Yes),
        ("ok perfecto", Yes),
        ("Ok, perfecto, gracias", Yes),
        ("👍", Yes),
        ("👍🏻", Yes),
        ("Sí 👍", Yes),
        ("✅", Yes),
        ("Perfecto", Yes),
        ("Claro", Yes),
        ("Sí, claro", Yes),
        ("claro que sí", Yes),
        ("De acuerdo", Yes),
        ("Confirmo", Yes),
        ("confirmado", Yes),
        ("Sí, confírmalo", Yes),
        ("adelante", Yes),
        ("Está bien", Yes),
        ("Genial, gracias!", Yes),
        ("Sí 😊", Yes),
        // English and Portuguese.
        ("yes", Yes),
        ("Yes please", Yes),
        ("yep", Yes),
        ("Sure, go ahead", Yes),
        ("sounds good", Yes),
        ("sim", Yes),
        ("Sim, pode ser", Yes),
        ("Tá bom", Yes),
        ("sim, obrigado", Yes),
        ("Com certeza", Yes),
        // A plain no.
        ("No", No),
        ("no", No),
        ("No, gracias", No),
        ("nop", No),
        ("Cancelar", No),
        ("cancela", No),
        ("Mejor no", No),
        ("Claro que no", No),
        ("no quiero", No),
        ("Déjalo", No),
        ("👎", No),
        ("No thanks", No),
        ("nope", No),
        ("cancel", No),
        ("Não", No),
        ("não, obrigado", No),
        // A yes with a change, mixed, or not an answer: for the assistant.
        ("Sí, pero el jueves", Other),
        ("sí pero mejor a las 19", Other),
        ("Ok, no gracias", Other),
        ("No hay problema", Other),
        ("mejor sí", Other),
        ("sí, a nombre de mi marido", Other),
        ("¿A qué hora era?", Other),
        ("no sé", Other),
        ("quizás", Other),
        ("ahora no", Other),
        ("sí o no?", Other),
        ("sí 👎", Other),
        ("Gracias", Other),
        ("😊", Other),
        ("", Other),
        ("si quieres", Other),
        ("cancela la cita del martes", Other),
        ("Vale, pero ¿tiene parking?", Other),
        ("yes but on Friday", Other),
        ("sim, mas na sexta", Other),
        ("Sí sí sí sí sí sí sí sí sí", Other),
        ("Perfecto, nos vemos allí", Other),
    ];

    #[test]
    fn only_a_whole_plain_yes_confirms_and_only_a_whole_plain_no_declines() {
        assert!(TABLE.len() >= 60, "{} replies", TABLE.len());
        let wrong: Vec<String> = TABLE
            .iter()
            .filter(|(text, want)| reply(text) != *want)
            .map(|(text, want)| format!("«{text}»: want {want:?}, got {:?}", reply(text)))
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn letter_runs_collapse_on_both_sides() {
        assert_eq!(collapse_runs("siiii"), "si");
        assert_eq!(collapse_runs("correcto"), "corecto");
        assert_eq!(reply("Correcto"), Reply::Yes);
        assert_eq!(reply("siiii"), Reply::Yes);
    }

    #[test]
    fn button_ids_name_their_action() {
        let ids: Vec<String> = buttons("a1b2", Some("en"))
            .into_iter()
            .map(|b| b.id)
            .collect();
        assert_eq!(ids, ["confirm:a1b2", "cancel:a1b2"]);
        let wa_id = crate::domain::WaId::parse("34600111222").unwrap();
        let id = action_id(&wa_id, "call_1");
        assert_eq!(id.len(), 12);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            id,
            action_id(&wa_id, "call_1"),
            "the same call, the same action"
        );
        assert_ne!(id, action_id(&wa_id, "call_2"));
    }
}
